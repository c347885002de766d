// tests/unit/lockset_test.cc - lock sets (weft/lockset.h): deadlock freedom
// (overlapping sets taken in opposite orders, mixed with threads that take single
// locks one at a time; exact counts), mixed kinds (mutex, hybrid, rwlock read and
// write), tryacquire all-or-nothing, timed acquire that times out holding nothing,
// EINVAL cases.
#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class LockSetTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(LockSetTest);

constexpr int kLocks = 4;

// Threads take overlapping sets of mutexes in opposite orders ({0,1,2} forward,
// {2,1,0} and {3,2,1,0} reversed, {1,3}), others lock one mutex at a time in a
// random order (never holding two). Each lock guards a plain counter that its
// holders increment. Finishes (the watchdog catches a deadlock) with exact counts.
TEST_P(LockSetTest, NoDeadlockOppositeOrdersExactCounts) {
  weft_mutex_t m[kLocks];
  for (auto &x : m) ASSERT_EQ(weft_mutex_init(&x), 0);
  long counter[kLocks] = {0, 0, 0, 0};
  std::atomic<long> expected[kLocks] = {};
  std::atomic<long> bad{0};
  std::atomic<int> last{0};
  const std::vector<std::vector<int>> sets = {{0, 1, 2}, {2, 1, 0}, {3, 2, 1, 0}, {1, 3}};
  const long rounds = Scaled(3000, 20);
  const int nset_weft = 2 * nvps() + 4, nsingle = 2, nos = 2;
  // [0, nset_weft) weft set-takers, then weft single-takers; OS: set-takers
  RunMixed(nset_weft + nsingle, nos, [&](int i) {
    std::minstd_rand rng(static_cast<unsigned>(i) * 13u + 5u);
    bool single = i >= nset_weft && i < nset_weft + nsingle;
    bool weft = weft_self() != nullptr;
    for (long r = 0; r < rounds; ++r) {
      if (single) {
        int k = static_cast<int>(rng() % kLocks);
        if (weft_mutex_lock(&m[k])) bad.fetch_add(1);
        ++counter[k];
        expected[k].fetch_add(1);
        if (weft && (r & 3) == 0) weft_yield();
        weft_mutex_unlock(&m[k]);
        continue;
      }
      const std::vector<int> &s = sets[static_cast<size_t>(i + r) % sets.size()];
      weft_lockref_t refs[kLocks];
      for (size_t j = 0; j < s.size(); ++j) refs[j] = {WEFT_LOCK_MUTEX, &m[s[j]]};
      int n = static_cast<int>(s.size());
      int rc = weft_lockset_acquire(refs, n);
      if (rc) {
        bad.fetch_add(1);
        last.store(rc);
        continue;
      }
      for (int k : s) {
        long c = counter[k];
        Work(20);
        counter[k] = c + 1;
        expected[k].fetch_add(1);
      }
      if (weft && (r & 7) == 0) weft_yield();  // hold the set across a switch
      if (weft_lockset_release(refs, n)) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0) << Err(last.load());
  for (int k = 0; k < kLocks; ++k) {
    EXPECT_EQ(counter[k], expected[k].load()) << "lock " << k;
    EXPECT_EQ(weft_mutex_destroy(&m[k]), 0) << "lock " << k << " left held";
  }
}

// Mixed kinds in one set: a mutex, a hybrid lock, an rwlock in read mode and
// another in write mode; other sets take the read-mode rwlock in write mode and
// the other way round. Writers' counts are exact, readers never see a writer.
TEST_P(LockSetTest, MixedKinds) {
  weft_mutex_t mu = WEFT_MUTEX_INIT;
  weft_hybrid_t hy = WEFT_HYBRID_INIT;
  weft_rwlock_t ra = WEFT_RWLOCK_INIT, rb = WEFT_RWLOCK_INIT;
  long cmu = 0, chy = 0, ca = 0, cb = 0;  // guarded by mu, hy, ra (write), rb (write)
  std::atomic<long> emu{0}, ehy{0}, ea{0}, eb{0}, bad{0}, violations{0};
  std::atomic<int> a_writers{0}, b_writers{0};
  const weft_lockref_t set0[] = {{WEFT_LOCK_MUTEX, &mu}, {WEFT_LOCK_HYBRID, &hy},
                                 {WEFT_LOCK_READ, &ra}, {WEFT_LOCK_WRITE, &rb}};
  const weft_lockref_t set1[] = {{WEFT_LOCK_WRITE, &ra}, {WEFT_LOCK_MUTEX, &mu}};
  const weft_lockref_t set2[] = {{WEFT_LOCK_READ, &rb}, {WEFT_LOCK_WRITE, &ra},
                                 {WEFT_LOCK_HYBRID, &hy}};
  const long rounds = Scaled(2000, 20);
  RunMixed(2 * nvps() + 3, 2, [&](int i) {
    bool weft = weft_self() != nullptr;
    for (long r = 0; r < rounds; ++r) {
      int which = static_cast<int>((i + r) % 3);
      const weft_lockref_t *set = which == 0 ? set0 : which == 1 ? set1 : set2;
      int n = which == 0 ? 4 : which == 1 ? 2 : 3;
      if (weft_lockset_acquire(set, n)) {
        bad.fetch_add(1);
        continue;
      }
      if (which == 0) {  // mu, hy, ra read, rb write
        if (a_writers.load()) violations.fetch_add(1);
        if (b_writers.fetch_add(1)) violations.fetch_add(1);
        ++cmu, ++chy, ++cb;
        emu++, ehy++, eb++;
        if (weft && (r & 3) == 0) weft_yield();
        b_writers.fetch_sub(1);
      } else if (which == 1) {  // ra write, mu
        if (a_writers.fetch_add(1)) violations.fetch_add(1);
        ++ca, ++cmu;
        ea++, emu++;
        if (weft && (r & 3) == 0) weft_yield();
        a_writers.fetch_sub(1);
      } else {  // rb read, ra write, hy
        if (b_writers.load()) violations.fetch_add(1);
        if (a_writers.fetch_add(1)) violations.fetch_add(1);
        ++ca, ++chy;
        ea++, ehy++;
        if (weft && (r & 3) == 0) weft_yield();
        a_writers.fetch_sub(1);
      }
      if (weft_lockset_release(set, n)) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(cmu, emu.load());
  EXPECT_EQ(chy, ehy.load());
  EXPECT_EQ(ca, ea.load());
  EXPECT_EQ(cb, eb.load());
  EXPECT_EQ(weft_mutex_destroy(&mu), 0);
  EXPECT_EQ(weft_hybrid_destroy(&hy), 0);
  EXPECT_EQ(weft_rwlock_destroy(&ra), 0);
  EXPECT_EQ(weft_rwlock_destroy(&rb), 0);
}

// tryacquire is all-or-nothing: with any one lock of the set busy (first, middle
// or last; busy as mutex, as write-held rwlock, or as read-held for a WRITE ref)
// it returns WEFT_EBUSY and every other lock of the set is free afterwards.
TEST_P(LockSetTest, TryAcquireAllOrNothing) {
  weft_mutex_t m0 = WEFT_MUTEX_INIT, m2 = WEFT_MUTEX_INIT;
  weft_hybrid_t h = WEFT_HYBRID_INIT;
  weft_rwlock_t rw = WEFT_RWLOCK_INIT;
  const weft_lockref_t set[] = {{WEFT_LOCK_MUTEX, &m0}, {WEFT_LOCK_WRITE, &rw},
                                {WEFT_LOCK_HYBRID, &h}, {WEFT_LOCK_MUTEX, &m2}};
  auto all_free = [&] {
    // from another thread: every lock can be taken
    return RunInThread([&]() -> void * {
      bool ok = weft_mutex_trylock(&m0) == 0;
      if (ok) weft_mutex_unlock(&m0);
      bool ok2 = weft_mutex_trylock(&m2) == 0;
      if (ok2) weft_mutex_unlock(&m2);
      bool ok3 = weft_hybrid_trylock(&h) == 0;
      if (ok3) weft_hybrid_unlock(&h);
      bool ok4 = weft_rwlock_trywrlock(&rw) == 0;
      if (ok4) weft_rwlock_unlock(&rw);
      return P(ok && ok2 && ok3 && ok4);
    }) == P(1);
  };
  EXPECT_TRUE(all_free());
  for (int busy = 0; busy < 5; ++busy) {
    // hold one lock from another (OS) thread for the duration of the check
    std::atomic<int> phase{0};
    std::thread holder([&] {
      switch (busy) {
        case 0: weft_mutex_lock(&m0); break;
        case 1: weft_rwlock_wrlock(&rw); break;
        case 2: weft_rwlock_rdlock(&rw); break;  // read-held: WRITE ref is busy
        case 3: weft_hybrid_lock(&h); break;
        case 4: weft_mutex_lock(&m2); break;
      }
      phase = 1;
      while (phase.load() != 2) std::this_thread::yield();
      switch (busy) {
        case 0: weft_mutex_unlock(&m0); break;
        case 1:
        case 2: weft_rwlock_unlock(&rw); break;
        case 3: weft_hybrid_unlock(&h); break;
        case 4: weft_mutex_unlock(&m2); break;
      }
    });
    ASSERT_TRUE(WaitFor([&] { return phase.load() == 1; }));
    EXPECT_EQ(weft_lockset_tryacquire(set, 4), WEFT_EBUSY) << "busy lock " << busy;
    // nothing held by us: the other locks are free
    bool others_free = true;
    if (busy != 0) {
      others_free &= weft_mutex_trylock(&m0) == 0;
      weft_mutex_unlock(&m0);
    }
    if (busy != 1 && busy != 2) {
      others_free &= weft_rwlock_trywrlock(&rw) == 0;
      weft_rwlock_unlock(&rw);
    }
    if (busy != 3) {
      others_free &= weft_hybrid_trylock(&h) == 0;
      weft_hybrid_unlock(&h);
    }
    if (busy != 4) {
      others_free &= weft_mutex_trylock(&m2) == 0;
      weft_mutex_unlock(&m2);
    }
    EXPECT_TRUE(others_free) << "tryacquire kept part of the set, busy lock " << busy;
    phase = 2;
    holder.join();
  }
  EXPECT_TRUE(all_free());
  ASSERT_EQ(weft_lockset_tryacquire(set, 4), 0);
  EXPECT_EQ(weft_mutex_trylock(&m0), WEFT_EBUSY);
  EXPECT_EQ(weft_rwlock_tryrdlock(&rw), WEFT_EBUSY);
  EXPECT_EQ(weft_lockset_release(set, 4), 0);
  EXPECT_TRUE(all_free());
  EXPECT_EQ(weft_lockset_tryacquire(set, 0), 0) << "empty set";
  EXPECT_EQ(weft_lockset_acquire(set, 0), 0);
  EXPECT_EQ(weft_lockset_release(set, 0), 0);
}

// timedacquire that times out holds nothing: ETIMEDOUT, not before the deadline,
// and every lock of the set is free afterwards (from weft and OS threads).
TEST_P(LockSetTest, TimedAcquireTimeoutHoldsNothing) {
  weft_mutex_t a = WEFT_MUTEX_INIT, b = WEFT_MUTEX_INIT;
  weft_rwlock_t rw = WEFT_RWLOCK_INIT;
  const weft_lockref_t set[] = {{WEFT_LOCK_MUTEX, &a}, {WEFT_LOCK_MUTEX, &b},
                                {WEFT_LOCK_WRITE, &rw}};
  for (int busy = 0; busy < 3; ++busy) {
    // the main thread holds one of them (the rwlock in read mode)
    int hold_rc = busy == 0 ? weft_mutex_lock(&a) : busy == 1 ? weft_mutex_lock(&b) : weft_rwlock_rdlock(&rw);
    ASSERT_EQ(hold_rc, 0);
    std::atomic<int> wrong{0}, early{0};
    RunMixed(2, 1, [&](int i) {
      uint64_t d = weft_deadline_after((1 + i) * kMs);
      int rc = weft_lockset_timedacquire(set, 3, d);
      if (rc != WEFT_ETIMEDOUT) {
        wrong.fetch_add(1);
        if (rc == 0) weft_lockset_release(set, 3);
      }
      if (weft_time_now() < d) early.fetch_add(1);
    });
    EXPECT_EQ(wrong.load(), 0) << "busy " << busy;
    EXPECT_EQ(early.load(), 0);
    if (busy == 0) weft_mutex_unlock(&a);
    if (busy == 1) weft_mutex_unlock(&b);
    if (busy == 2) weft_rwlock_unlock(&rw);
    // all free: another thread takes the whole set at once
    EXPECT_EQ(RunInThread([&]() -> void * {
      int rc = weft_lockset_tryacquire(set, 3);
      if (rc == 0) weft_lockset_release(set, 3);
      return P(rc);
    }), P(0)) << "a lock was left held after a timeout, busy " << busy;
  }
  EXPECT_EQ(weft_mutex_destroy(&a), 0);
  EXPECT_EQ(weft_mutex_destroy(&b), 0);
  EXPECT_EQ(weft_rwlock_destroy(&rw), 0);
}

// EINVAL: duplicates (same or different kind), a NULL lock, a bad kind, n >
// WEFT_LOCKSET_MAX, n < 0, NULL set; nothing held afterwards. WEFT_LOCKSET_MAX
// locks at once work.
// Releasing a set one of whose locks is not held reports that lock's WEFT_EPERM (it
// returned 0) and still releases the others.
TEST_P(LockSetTest, ReleaseOfALockNotHeldIsEperm) {
  weft_mutex_t a = WEFT_MUTEX_INIT, b = WEFT_MUTEX_INIT;
  weft_rwlock_t rw = WEFT_RWLOCK_INIT;
  const weft_lockref_t set[] = {{WEFT_LOCK_MUTEX, &a}, {WEFT_LOCK_MUTEX, &b}, {WEFT_LOCK_READ, &rw}};
  ASSERT_EQ(weft_mutex_lock(&a), 0);
  ASSERT_EQ(weft_rwlock_rdlock(&rw), 0);
  EXPECT_EQ(weft_lockset_release(set, 3), WEFT_EPERM) << "b was not held";
  EXPECT_EQ(weft_mutex_trylock(&a), 0) << "a was released anyway";
  EXPECT_EQ(weft_rwlock_trywrlock(&rw), 0) << "rw was released anyway";
  EXPECT_EQ(weft_rwlock_unlock(&rw), 0);
  EXPECT_EQ(weft_mutex_unlock(&a), 0);
  ASSERT_EQ(weft_lockset_acquire(set, 3), 0);
  EXPECT_EQ(weft_lockset_release(set, 3), 0);
}

TEST_P(LockSetTest, Einval) {
  std::vector<weft_mutex_t> m(WEFT_LOCKSET_MAX + 1);
  for (auto &x : m) ASSERT_EQ(weft_mutex_init(&x), 0);
  weft_rwlock_t rw = WEFT_RWLOCK_INIT;
  std::vector<weft_lockref_t> refs;
  for (auto &x : m) refs.push_back({WEFT_LOCK_MUTEX, &x});
  auto check = [&](const weft_lockref_t *s, int n, const char *what) {
    EXPECT_EQ(weft_lockset_acquire(s, n), WEFT_EINVAL) << what;
    EXPECT_EQ(weft_lockset_tryacquire(s, n), WEFT_EINVAL) << what;
    EXPECT_EQ(weft_lockset_timedacquire(s, n, weft_deadline_after(kMs)), WEFT_EINVAL) << what;
    EXPECT_EQ(weft_lockset_release(s, n), WEFT_EINVAL) << what;
  };
  weft_lockref_t dup[] = {{WEFT_LOCK_MUTEX, &m[0]}, {WEFT_LOCK_MUTEX, &m[1]}, {WEFT_LOCK_MUTEX, &m[0]}};
  check(dup, 3, "duplicate mutex");
  weft_lockref_t dup_rw[] = {{WEFT_LOCK_READ, &rw}, {WEFT_LOCK_WRITE, &rw}};
  check(dup_rw, 2, "rwlock twice, different modes");
  weft_lockref_t nul[] = {{WEFT_LOCK_MUTEX, &m[0]}, {WEFT_LOCK_MUTEX, nullptr}};
  check(nul, 2, "NULL lock");
  weft_lockref_t kind0[] = {{WEFT_LOCK_MUTEX, &m[0]}, {static_cast<weft_lock_kind_t>(0), &m[1]}};
  check(kind0, 2, "kind 0");
  weft_lockref_t kind5[] = {{static_cast<weft_lock_kind_t>(5), &m[1]}, {WEFT_LOCK_MUTEX, &m[0]}};
  check(kind5, 2, "kind 5");
  check(refs.data(), WEFT_LOCKSET_MAX + 1, "n > WEFT_LOCKSET_MAX");
  check(refs.data(), -1, "n < 0");
  check(nullptr, 1, "NULL set");
  // nothing held
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(weft_mutex_trylock(&m[i]), 0) << "lock " << i << " held after EINVAL";
    weft_mutex_unlock(&m[i]);
  }
  EXPECT_EQ(weft_rwlock_trywrlock(&rw), 0);
  weft_rwlock_unlock(&rw);
  // WEFT_LOCKSET_MAX locks are fine
  EXPECT_EQ(weft_lockset_acquire(refs.data(), WEFT_LOCKSET_MAX), 0);
  EXPECT_EQ(weft_mutex_trylock(&m[WEFT_LOCKSET_MAX - 1]), WEFT_EBUSY);
  EXPECT_EQ(weft_lockset_release(refs.data(), WEFT_LOCKSET_MAX), 0);
  for (auto &x : m) EXPECT_EQ(weft_mutex_destroy(&x), 0);
  EXPECT_EQ(weft_rwlock_destroy(&rw), 0);
}

// Relocking a mutex the caller holds is caught by checked builds, and the message
// names the call that did it (every lock call said "weft_mutex_lock").
void RelockMutex() {
  static weft_mutex_t m;
  weft_mutex_init(&m);
  weft_mutex_lock(&m);
  weft_mutex_lock(&m);
}
void RelockMutexTimed() {
  static weft_mutex_t m;
  weft_mutex_init(&m);
  weft_mutex_lock(&m);
  weft_mutex_timedlock(&m, weft_time_now() + 1000000000u);
}
void RelockHybrid() {
  static weft_hybrid_t h;
  weft_hybrid_init(&h);
  weft_hybrid_lock(&h);
  weft_hybrid_lock(&h);
}

TEST(MutexDeathTest, RelockNamesTheCall) {
  WEFT_EXPECT_MISUSE_DEATH("weft_mutex_lock of a mutex the caller holds", RelockMutex());
  WEFT_EXPECT_MISUSE_DEATH("weft_mutex_timedlock of a mutex the caller holds", RelockMutexTimed());
  WEFT_EXPECT_MISUSE_DEATH("weft_hybrid_lock of a mutex the caller holds", RelockHybrid());
}

}  // namespace
