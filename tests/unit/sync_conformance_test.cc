// tests/unit/sync_conformance_test.cc - one conformance suite for every lock kind
// with lock / trylock / timedlock / unlock semantics: weft_mutex_t, weft_hybrid_t,
// weft_rwlock_t in write mode, a weft_sem_t of 1 used as a lock, and lock sets of 1
// and of 3 locks (mutex + hybrid + rwlock write). Each kind runs with 1, 2 and 4
// VPs (4 oversubscribes this 2-core machine), always with more threads than VPs.
//
// Covered per kind: mutual exclusion under real contention (exact non-atomic
// counts; critical sections yield, so others find the lock held and block), with
// weft threads and plain OS threads on the same lock at once; the static
// initializer and the all-zero object; trylock from other threads; timed locks
// that time out (object consistent afterwards, a blocked waiter still gets the
// lock after a timed-out one left the queue) and that race with unlock; destroy
// while held / with waiters (WEFT_EBUSY) and when free (0); NULL arguments.
#include <cstring>

#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

// ---- adapters ---------------------------------------------------------------------

struct MutexKind {
  static constexpr const char *kName = "mutex";
  static constexpr bool kDestroySeesHolder = true;  // destroy of a held object: EBUSY
  static constexpr bool kUnlockFreeIsEperm = true;
  static constexpr bool kCountsMutexStats = true;   // weft_sync_stats mutex counters
  weft_mutex_t m;
  int Init() { return weft_mutex_init(&m); }
  void InitStatic() {
    static const weft_mutex_t s = WEFT_MUTEX_INIT;
    m = s;
  }
  void InitZero() { std::memset(&m, 0, sizeof m); }
  int Lock() { return weft_mutex_lock(&m); }
  int TryLock() { return weft_mutex_trylock(&m); }
  int TimedLock(uint64_t d) { return weft_mutex_timedlock(&m, d); }
  int Unlock() { return weft_mutex_unlock(&m); }
  int Destroy() { return weft_mutex_destroy(&m); }
  int Waiters() { return weft_test::Waiters(&m); }
  static void CheckNull() {
    EXPECT_EQ(weft_mutex_init(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_mutex_lock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_mutex_trylock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_mutex_timedlock(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
    EXPECT_EQ(weft_mutex_unlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_mutex_destroy(nullptr), WEFT_EINVAL);
  }
};

struct HybridKind {
  static constexpr const char *kName = "hybrid";
  static constexpr bool kDestroySeesHolder = true;
  static constexpr bool kUnlockFreeIsEperm = true;
  static constexpr bool kCountsMutexStats = true;
  weft_hybrid_t h;
  int Init() { return weft_hybrid_init(&h); }
  void InitStatic() {
    static const weft_hybrid_t s = WEFT_HYBRID_INIT;
    h = s;
  }
  void InitZero() { std::memset(&h, 0, sizeof h); }
  int Lock() { return weft_hybrid_lock(&h); }
  int TryLock() { return weft_hybrid_trylock(&h); }
  int TimedLock(uint64_t d) { return weft_hybrid_timedlock(&h, d); }
  int Unlock() { return weft_hybrid_unlock(&h); }
  int Destroy() { return weft_hybrid_destroy(&h); }
  int Waiters() { return weft_test::Waiters(&h); }
  static void CheckNull() {
    EXPECT_EQ(weft_hybrid_init(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_hybrid_lock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_hybrid_trylock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_hybrid_timedlock(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
    EXPECT_EQ(weft_hybrid_unlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_hybrid_destroy(nullptr), WEFT_EINVAL);
  }
};

struct RwWriteKind {
  static constexpr const char *kName = "rwlock_write";
  static constexpr bool kDestroySeesHolder = true;
  static constexpr bool kUnlockFreeIsEperm = true;
  static constexpr bool kCountsMutexStats = false;
  // FIFO hand-off (no barging): with OS threads in the queue every hand-off to a
  // sleeping kernel thread costs a futex wake-up, so mixed runs are much slower.
  static constexpr bool kHandsOff = true;
  weft_rwlock_t l;
  int Init() { return weft_rwlock_init(&l); }
  void InitStatic() {
    static const weft_rwlock_t s = WEFT_RWLOCK_INIT;
    l = s;
  }
  void InitZero() { std::memset(&l, 0, sizeof l); }
  int Lock() { return weft_rwlock_wrlock(&l); }
  int TryLock() { return weft_rwlock_trywrlock(&l); }
  int TimedLock(uint64_t d) { return weft_rwlock_timedwrlock(&l, d); }
  int Unlock() { return weft_rwlock_unlock(&l); }
  int Destroy() { return weft_rwlock_destroy(&l); }
  int Waiters() { return weft_test::Waiters(&l); }
  static void CheckNull() {
    EXPECT_EQ(weft_rwlock_init(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_wrlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_trywrlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_timedwrlock(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_rdlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_tryrdlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_timedrdlock(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_unlock(nullptr), WEFT_EINVAL);
    EXPECT_EQ(weft_rwlock_destroy(nullptr), WEFT_EINVAL);
  }
};

// A semaphore of one unit used as a lock. Its destroy cannot tell "held" (count 0,
// nobody waiting) from "free with count 0", so only destroy-with-waiters is EBUSY;
// signalling a free semaphore is not an error (it would make a count of 2).
struct SemKind {
  static constexpr const char *kName = "sem1";
  static constexpr bool kDestroySeesHolder = false;
  static constexpr bool kUnlockFreeIsEperm = false;
  static constexpr bool kCountsMutexStats = false;
  weft_sem_t s;
  int Init() { return weft_sem_init(&s, 1); }
  void InitStatic() {
    static const weft_sem_t v = WEFT_SEM_INIT(1);
    s = v;
  }
  // All-zero is a semaphore of count 0: one signal makes it a free lock.
  void InitZero() {
    std::memset(&s, 0, sizeof s);
    EXPECT_EQ(weft_sem_value(&s), 0);
    EXPECT_EQ(weft_sem_signal(&s), 0);
  }
  int Lock() { return weft_sem_wait(&s); }
  int TryLock() { return weft_sem_trywait(&s); }
  int TimedLock(uint64_t d) { return weft_sem_timedwait(&s, d); }
  int Unlock() { return weft_sem_signal(&s); }
  int Destroy() { return weft_sem_destroy(&s); }
  int Waiters() { return weft_test::Waiters(&s); }
  static void CheckNull() { ExpectSemNullEinval(); }
};

// A lock set of N locks used as one lock: N == 1 is {mutex}; N == 3 is {mutex,
// hybrid, rwlock write}. destroy reports EBUSY if every lock does, 0 if every lock
// does, and a distinct bogus code if they disagree (which fails the test).
template <int N>
struct LockSetKind {
  static_assert(N == 1 || N == 3, "sets of 1 or 3");
  static constexpr const char *kName = N == 1 ? "lockset1" : "lockset3";
  static constexpr bool kDestroySeesHolder = true;
  static constexpr bool kUnlockFreeIsEperm = false;
  static constexpr bool kCountsMutexStats = true;  // the set's pivot is a mutex
  weft_mutex_t m;
  weft_hybrid_t h;
  weft_rwlock_t l;
  weft_lockref_t set[3];
  void Refs() {
    set[0] = {WEFT_LOCK_MUTEX, &m};
    set[1] = {WEFT_LOCK_HYBRID, &h};
    set[2] = {WEFT_LOCK_WRITE, &l};
  }
  int Init() {
    Refs();
    int a = weft_mutex_init(&m), b = weft_hybrid_init(&h), c = weft_rwlock_init(&l);
    return a ? a : b ? b : c;
  }
  void InitStatic() {
    Refs();
    static const weft_mutex_t sm = WEFT_MUTEX_INIT;
    static const weft_hybrid_t sh = WEFT_HYBRID_INIT;
    static const weft_rwlock_t sl = WEFT_RWLOCK_INIT;
    m = sm;
    h = sh;
    l = sl;
  }
  void InitZero() {
    Refs();
    std::memset(&m, 0, sizeof m);
    std::memset(&h, 0, sizeof h);
    std::memset(&l, 0, sizeof l);
  }
  int Lock() { return weft_lockset_acquire(set, N); }
  int TryLock() { return weft_lockset_tryacquire(set, N); }
  int TimedLock(uint64_t d) { return weft_lockset_timedacquire(set, N, d); }
  int Unlock() { return weft_lockset_release(set, N); }
  int Destroy() {
    int rc[3] = {weft_mutex_destroy(&m), N == 3 ? weft_hybrid_destroy(&h) : 0,
                 N == 3 ? weft_rwlock_destroy(&l) : 0};
    if (N == 1) return rc[0];
    if (rc[0] == rc[1] && rc[1] == rc[2]) return rc[0];
    return -1000;  // disagreement
  }
  // a waiter queues on one lock of the set (its pivot) at a time
  int Waiters() {
    return weft_test::Waiters(&m) + (N == 3 ? weft_test::Waiters(&h) + weft_test::Waiters(&l) : 0);
  }
  static void CheckNull() {
    weft_mutex_t mm = WEFT_MUTEX_INIT;
    weft_lockref_t nul[1] = {{WEFT_LOCK_MUTEX, nullptr}};
    EXPECT_EQ(weft_lockset_acquire(nullptr, 1), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_tryacquire(nullptr, 1), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_timedacquire(nullptr, 1, weft_deadline_after(kMs)), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_release(nullptr, 1), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_acquire(nul, 1), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_tryacquire(nul, 1), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_timedacquire(nul, 1, weft_deadline_after(kMs)), WEFT_EINVAL);
    EXPECT_EQ(weft_lockset_release(nul, 1), WEFT_EINVAL);
    EXPECT_EQ(weft_mutex_destroy(&mm), 0);
  }
};

// Kinds that hand the lock to the next waiter (no barging) declare kHandsOff.
template <class K, class = void>
struct HandsOffT : std::false_type {};
template <class K>
struct HandsOffT<K, std::void_t<decltype(K::kHandsOff)>> : std::integral_constant<bool, K::kHandsOff> {};
template <class K>
constexpr bool HandsOff() {
  return HandsOffT<K>::value;
}

template <class K, int V>
struct Cfg {
  using Kind = K;
  static constexpr int kVps = V;
};

using Cfgs = ::testing::Types<
    Cfg<MutexKind, 1>, Cfg<MutexKind, 2>, Cfg<MutexKind, 4>,
    Cfg<HybridKind, 1>, Cfg<HybridKind, 2>, Cfg<HybridKind, 4>,
    Cfg<RwWriteKind, 1>, Cfg<RwWriteKind, 2>, Cfg<RwWriteKind, 4>,
    Cfg<SemKind, 1>, Cfg<SemKind, 2>, Cfg<SemKind, 4>,
    Cfg<LockSetKind<1>, 1>, Cfg<LockSetKind<1>, 2>, Cfg<LockSetKind<1>, 4>,
    Cfg<LockSetKind<3>, 1>, Cfg<LockSetKind<3>, 2>, Cfg<LockSetKind<3>, 4>>;

struct CfgName {
  template <class C>
  static std::string GetName(int) {
    return std::string(C::Kind::kName) + "_" + std::to_string(C::kVps) + "vp";
  }
};

template <class C>
class SyncConformance : public WeftTest {
 protected:
  using K = typename C::Kind;
  void SetUp() override { StartWeft(C::kVps); }
  static int Vps() { return C::kVps; }
  Watchdog watchdog_;
};
TYPED_TEST_SUITE(SyncConformance, Cfgs, CfgName);

// The shared state of a contention run: a plain (non-atomic) counter that only the
// lock protects, and a detector for two holders at once.
template <class K>
struct Contended {
  K *lock = nullptr;
  long counter = 0;                // protected by *lock only
  std::atomic<int> inside{0};
  std::atomic<long> overlaps{0};
  std::atomic<long> bad_rc{0};
  std::atomic<int> last_bad_rc{0};

  void Note(int rc) {
    if (rc != 0) {
      bad_rc.fetch_add(1);
      last_bad_rc.store(rc);
    }
  }
  // One critical section. The thread may yield inside it (`yield_inside`): the
  // others then find the lock held and must block (the only way to contend on 1 VP).
  void Section(bool yield_inside, int work) {
    if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1);
    long c = counter;
    Work(work);
    if (yield_inside) weft_yield();
    counter = c + 1;
    inside.fetch_sub(1, std::memory_order_relaxed);
  }
  // iters lock/section/unlock rounds; weft threads yield inside every 4th section.
  void Run(long iters) {
    bool weft = weft_self() != nullptr;
    for (long i = 0; i < iters; ++i) {
      Note(lock->Lock());
      Section(weft && (i & 3) == 0, 200);
      Note(lock->Unlock());
    }
  }
};

template <class K>
void ExpectContendedOk(const Contended<K> &s, long expected, const char *what) {
  EXPECT_EQ(s.counter, expected) << what << ": lost or duplicated increments";
  EXPECT_EQ(s.overlaps.load(), 0) << what << ": two holders at once";
  EXPECT_EQ(s.bad_rc.load(), 0) << what << ": a lock/unlock call failed, last: "
                                << Err(s.last_bad_rc.load());
}

// Mutual exclusion under contention: many weft threads (more than VPs), exact count.
TYPED_TEST(SyncConformance, MutualExclusionWeftThreads) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  weft_sync_stats_reset();
  Contended<K> s;
  s.lock = &k;
  const int nthreads = 4 * this->Vps() + 4;
  const long iters = Scaled(20000, 20);
  RunMixed(nthreads, 0, [&](int) { s.Run(iters); });
  ExpectContendedOk(s, nthreads * iters, "weft threads");
  if (K::kCountsMutexStats) {
    weft_sync_stats_t st = Stats();
    EXPECT_GT(st.mutex_missed, 0u) << "contended lock never counted a miss";
    EXPECT_GT(st.blocked + st.acquired_polling + st.acquired_spinning, 0u)
        << "misses never resolved as spinning, polling or blocking";
  }
  EXPECT_EQ(k.Destroy(), 0);
}

// The memory of a lock may be reused as soon as the last holder has released it
// and destroyed it, even while another thread's release of it is still returning
// (POSIX's rule for mutexes). Each round has a fresh heap object; the thread whose
// section comes last in the round releases it, destroys it and frees it at once,
// while the others may still be in their own (slow) releases. Weft threads yield
// inside their sections so that the others queue and release through the slow path.
// A release that touches the object after freeing it is a use-after-free (ASan
// reports it; in other builds the reused memory corrupts a later round).
TYPED_TEST(SyncConformance, MemoryReusableRightAfterTheLastRelease) {
  using K = typename TestFixture::K;
  struct Obj {
    K k;
    int entered = 0;  // under k
  };
  const int nweft = 2 * this->Vps() + 2, nos = 2, n = nweft + nos;
  const int rounds = static_cast<int>(Scaled(3000, 50));
  std::vector<Obj *> objs(static_cast<size_t>(rounds));
  for (Obj *&o : objs) {
    o = new Obj;
    ASSERT_EQ(o->k.Init(), 0);
  }
  std::atomic<long> bad{0}, freed{0};
  RunMixed(nweft, nos, [&](int) {
    const bool weft = weft_self() != nullptr;
    for (int r = 0; r < rounds; ++r) {
      Obj *o = objs[static_cast<size_t>(r)];
      if (o->k.Lock() != 0) {
        bad.fetch_add(1);
        continue;
      }
      if (weft && (r & 1)) weft_yield();
      const bool last = ++o->entered == n;
      if (o->k.Unlock() != 0) bad.fetch_add(1);
      if (last) {
        if (o->k.Destroy() != 0) bad.fetch_add(1);
        std::memset(static_cast<void *>(o), 0xA5, sizeof *o);  // reused at once
        delete o;
        freed.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(bad.load(), 0) << "a lock, unlock or destroy call failed";
  EXPECT_EQ(freed.load(), rounds) << "some round's object was not released by everyone";
}

// Weft threads and plain OS threads (which block in the kernel) on the same lock.
TYPED_TEST(SyncConformance, MutualExclusionMixedWithOsThreads) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  Contended<K> s;
  s.lock = &k;
  const int nweft = 2 * this->Vps() + 3, nos = 3;
  const long iters = Scaled(HandsOff<K>() ? 1500 : 10000, 20);
  RunMixed(nweft, nos, [&](int) { s.Run(iters); });
  ExpectContendedOk(s, (nweft + nos) * iters, "weft + OS threads");
  EXPECT_EQ(k.Destroy(), 0);
}

// The static initializer and an all-zero object are free, usable locks.
TYPED_TEST(SyncConformance, StaticInitializerAndZeroObject) {
  using K = typename TestFixture::K;
  for (int mode = 0; mode < 2; ++mode) {
    const char *what = mode == 0 ? "static initializer" : "all-zero object";
    K k;
    std::memset(static_cast<void *>(&k), 0x5A, sizeof k);
    if (mode == 0) k.InitStatic();
    else k.InitZero();
    EXPECT_EQ(k.TryLock(), 0) << what;
    EXPECT_EQ(k.TryLock(), WEFT_EBUSY) << what;
    EXPECT_EQ(k.Unlock(), 0) << what;
    EXPECT_EQ(k.Lock(), 0) << what;
    EXPECT_EQ(k.Unlock(), 0) << what;
    Contended<K> s;
    s.lock = &k;
    const long iters = Scaled(500, 10);
    RunMixed(4, 1, [&](int) { s.Run(iters); });
    ExpectContendedOk(s, 5 * iters, what);
    EXPECT_EQ(k.Destroy(), 0) << what;
  }
}

// trylock: WEFT_EBUSY while another thread holds it (asked from weft and OS
// threads), 0 once it is free.
TYPED_TEST(SyncConformance, TryLockFromOtherThreads) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  ASSERT_EQ(k.Lock(), 0);
  EXPECT_EQ(k.TryLock(), WEFT_EBUSY) << "holder's own trylock";
  int weft_rc = 1;
  RunInThread([&]() -> void * {
    weft_rc = k.TryLock();
    return nullptr;
  });
  EXPECT_EQ(weft_rc, WEFT_EBUSY) << "weft thread, lock held";
  int os_rc = 1;
  std::thread([&] { os_rc = k.TryLock(); }).join();
  EXPECT_EQ(os_rc, WEFT_EBUSY) << "OS thread, lock held";
  ASSERT_EQ(k.Unlock(), 0);

  RunInThread([&]() -> void * {
    weft_rc = k.TryLock();
    if (weft_rc == 0) {
      EXPECT_EQ(k.Unlock(), 0);
    }
    return nullptr;
  });
  EXPECT_EQ(weft_rc, 0) << "weft thread, lock free";
  std::thread([&] {
    os_rc = k.TryLock();
    if (os_rc == 0) {
      EXPECT_EQ(k.Unlock(), 0);
    }
  }).join();
  EXPECT_EQ(os_rc, 0) << "OS thread, lock free";
  // The holder may be a different thread than the one that unlocks for a
  // semaphore only; for the others lock and unlock happen on one thread here.
  EXPECT_EQ(k.Destroy(), 0);
}

// A timed lock of a held object times out with WEFT_ETIMEDOUT, not before its
// deadline, from weft threads and OS threads; afterwards the object works and can
// be destroyed. A timed lock of a free object succeeds even with a past deadline.
TYPED_TEST(SyncConformance, TimedLockTimesOut) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  EXPECT_EQ(k.TimedLock(weft_time_now() - 1), 0) << "free lock, past deadline";
  EXPECT_EQ(k.Unlock(), 0);
  EXPECT_EQ(k.TimedLock(weft_deadline_after(kMs)), 0) << "free lock";
  EXPECT_EQ(k.Unlock(), 0);

  weft_sync_stats_reset();
  ASSERT_EQ(k.Lock(), 0);
  std::atomic<int> late{0}, wrong{0};
  std::atomic<int> last{0};
  auto timed = [&](int i) {
    uint64_t d = weft_deadline_after((i % 3 == 0) ? 0 : (2 + i % 5) * kMs);
    int rc = k.TimedLock(d);
    if (rc != WEFT_ETIMEDOUT) {
      wrong.fetch_add(1);
      last.store(rc);
      if (rc == 0) k.Unlock();
    }
    if (weft_time_now() < d) late.fetch_add(1);
  };
  RunMixed(4, 2, timed);
  EXPECT_EQ(wrong.load(), 0) << "timed lock of a held object returned " << Err(last.load());
  EXPECT_EQ(late.load(), 0) << "timed lock returned before its deadline";
  EXPECT_GT(Stats().timeouts, 0u) << "timeouts counter did not move";
  if (K::kDestroySeesHolder) {
    EXPECT_EQ(k.Destroy(), WEFT_EBUSY);
  }
  EXPECT_EQ(k.Unlock(), 0);
  // consistent afterwards
  EXPECT_EQ(k.TryLock(), 0);
  EXPECT_EQ(k.Unlock(), 0);
  RunMixed(2, 1, [&](int) {
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(k.Lock(), 0);
      EXPECT_EQ(k.Unlock(), 0);
    }
  });
  EXPECT_EQ(k.Destroy(), 0);
}

// A waiter that blocks forever is queued together with timed waiters that give up;
// when the holder unlocks, the forever-waiter still gets the lock (the timed-out
// waiters left the queue without taking or losing its wake-up).
TYPED_TEST(SyncConformance, TimedOutWaitersDoNotStrandOthers) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  const int rounds = static_cast<int>(Scaled(20, 3));
  for (int r = 0; r < rounds; ++r) {
    ASSERT_EQ(k.Lock(), 0);
    std::atomic<int> started{0}, got{0}, timed_out{0}, other{0};
    std::vector<weft_thread_t *> ts;
    auto forever = [&]() {
      started.fetch_add(1);
      if (k.Lock() == 0) {
        got.fetch_add(1);
        k.Unlock();
      } else {
        other.fetch_add(1);
      }
    };
    auto timed = [&]() {
      started.fetch_add(1);
      int rc = k.TimedLock(weft_deadline_after((1 + r % 4) * kMs));
      if (rc == WEFT_ETIMEDOUT) timed_out.fetch_add(1);
      else other.fetch_add(1);
      if (rc == 0) k.Unlock();
    };
    // weft: timed, forever, timed; OS: forever, timed
    std::thread os1(forever), os2(timed);
    auto t1 = [&] {
      timed();
      return nullptr;
    };
    auto t2 = [&] {
      forever();
      return nullptr;
    };
    auto spawn = [](auto &f) {
      using F = std::remove_reference_t<decltype(f)>;
      return Spawn(+[](void *a) -> void * { return (*static_cast<F *>(a))(); }, &f);
    };
    ts.push_back(spawn(t1));
    ts.push_back(spawn(t2));
    ts.push_back(spawn(t1));
    ASSERT_TRUE(WaitFor([&] { return started.load() == 5; }));
    // every timed waiter gives up while the lock is held
    ASSERT_TRUE(WaitFor([&] { return timed_out.load() + other.load() >= 3; }, 60))
        << "timed waiters did not return";
    EXPECT_EQ(timed_out.load(), 3) << "round " << r;
    EXPECT_EQ(got.load(), 0) << "round " << r << ": lock taken while held";
    ASSERT_EQ(k.Unlock(), 0);
    EXPECT_TRUE(WaitFor([&] { return got.load() == 2; }, 60))
        << "round " << r << ": a forever-waiter was stranded after timed waiters left";
    for (auto *t : ts) Join(t);
    EXPECT_TRUE(WaitFor([&] { return got.load() == 2; }, 60));
    os1.join();
    os2.join();
    EXPECT_EQ(other.load(), 0);
  }
  EXPECT_EQ(k.Destroy(), 0);
}

// Timed locks racing with unlock: many short deadlines; every call returns 0 or
// WEFT_ETIMEDOUT, the count of successful sections is exact, and the object is
// consistent afterwards.
TYPED_TEST(SyncConformance, TimedLockRacesWithUnlock) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  long counter = 0;  // protected by k
  std::atomic<long> successes{0}, timeouts{0}, bad{0};
  std::atomic<int> last{0}, inside{0}, overlaps{0};
  const long iters = Scaled(8000, 20);
  const int nweft = 2 * this->Vps() + 2, nos = 2;
  RunMixed(nweft, nos, [&](int i) {
    std::minstd_rand rng(static_cast<unsigned>(i) * 7919u + 1);
    bool weft = weft_self() != nullptr;
    for (long j = 0; j < iters; ++j) {
      int rc;
      if (i == 0 && (j & 7) == 0) rc = k.Lock();  // some untimed lockers too
      else rc = k.TimedLock(weft_deadline_after(rng() % (100 * kUs)));
      if (rc == WEFT_ETIMEDOUT) {
        timeouts.fetch_add(1);
        continue;
      }
      if (rc != 0) {
        bad.fetch_add(1);
        last.store(rc);
        continue;
      }
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      long c = counter;
      Work(static_cast<int>(rng() % 300));
      if (weft && (j & 7) == 1) weft_yield();
      counter = c + 1;
      inside.fetch_sub(1);
      successes.fetch_add(1);
      if (k.Unlock() != 0) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0) << "a timed lock returned " << Err(last.load());
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, successes.load());
  EXPECT_EQ(successes.load() + timeouts.load(), (nweft + nos) * iters);
  EXPECT_GT(successes.load(), 0);
  // consistent: free, lockable, destroyable
  EXPECT_EQ(k.TryLock(), 0);
  EXPECT_EQ(k.Unlock(), 0);
  EXPECT_EQ(k.Lock(), 0);
  EXPECT_EQ(k.Unlock(), 0);
  EXPECT_EQ(k.Destroy(), 0);
}

// weft_debug_waiters() counts the threads queued on a held lock, weft threads and
// plain OS threads alike, and none once they have all had it.
TYPED_TEST(SyncConformance, WaitersCountsQueuedThreads) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  EXPECT_EQ(k.Waiters(), 0) << "free";
  ASSERT_EQ(k.Lock(), 0);
  EXPECT_EQ(k.Waiters(), 0) << "held, nobody waiting";
  std::atomic<int> got{0};
  auto waiter = [&] {
    EXPECT_EQ(k.Lock(), 0);
    got.fetch_add(1);
    EXPECT_EQ(k.Unlock(), 0);
  };
  ThreadOfKind a(false, &waiter), b(false, &waiter), c(true, &waiter);
  ASSERT_TRUE(YieldUntil([&] { return k.Waiters() == 3; })) << "counted " << k.Waiters();
  EXPECT_EQ(got.load(), 0);
  ASSERT_EQ(k.Unlock(), 0);
  a.Join();
  b.Join();
  EXPECT_TRUE(WaitFor([&] { return got.load() == 3; }));
  c.Join();
  EXPECT_EQ(k.Waiters(), 0);
  EXPECT_EQ(k.Destroy(), 0);
}

// destroy: WEFT_EBUSY while held (kinds that can see a holder) and while a thread
// waits; 0 once free. The object is left as it was by a busy destroy.
TYPED_TEST(SyncConformance, DestroyBusy) {
  using K = typename TestFixture::K;
  K k;
  ASSERT_EQ(k.Init(), 0);
  EXPECT_EQ(k.Destroy(), 0) << "fresh object";
  ASSERT_EQ(k.Init(), 0);
  ASSERT_EQ(k.Lock(), 0);
  if (K::kDestroySeesHolder) {
    EXPECT_EQ(k.Destroy(), WEFT_EBUSY) << "held";
  }
  // with a waiter (a weft thread, then an OS thread)
  for (int os = 0; os < 2; ++os) {
    std::atomic<int> state{0};  // 1 about to lock, 2 got it
    auto waiter = [&] {
      state.store(1);
      EXPECT_EQ(k.Lock(), 0);
      state.store(2);
      EXPECT_EQ(k.Unlock(), 0);
    };
    ThreadOfKind th(os, &waiter);
    ASSERT_TRUE(YieldUntil([&] { return k.Waiters() == 1; })) << th.Kind() << " waiter never queued";
    EXPECT_EQ(state.load(), 1) << "waiter got a held lock";
    EXPECT_EQ(k.Destroy(), WEFT_EBUSY) << th.Kind() << " waiter queued";
    ASSERT_EQ(k.Unlock(), 0);  // hands over to the waiter
    EXPECT_TRUE(WaitFor([&] { return state.load() == 2; }));
    th.Join();
    EXPECT_EQ(k.Waiters(), 0);
    ASSERT_EQ(k.Lock(), 0);  // the busy destroy left it usable
  }
  ASSERT_EQ(k.Unlock(), 0);
  EXPECT_EQ(k.Destroy(), 0) << "free";
}

// NULL arguments: WEFT_EINVAL from every call. Unlocking a free mutex, hybrid lock
// or rwlock: WEFT_EPERM.
TYPED_TEST(SyncConformance, NullArgumentsAndUnlockFree) {
  using K = typename TestFixture::K;
  K::CheckNull();
  if (K::kUnlockFreeIsEperm) {
    K k;
    ASSERT_EQ(k.Init(), 0);
    EXPECT_EQ(k.Unlock(), WEFT_EPERM);
    EXPECT_EQ(k.TryLock(), 0) << "EPERM unlock left the object inconsistent";
    EXPECT_EQ(k.Unlock(), 0);
    EXPECT_EQ(k.Destroy(), 0);
  }
}

}  // namespace
