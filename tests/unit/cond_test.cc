// tests/unit/cond_test.cc - condition variables (weft/cond.h): no lost wake-ups
// (bounded-buffer stress with signal and with broadcast, weft and plain OS
// threads mixed, 1/2/4 VPs), wait morphing (signal / broadcast while holding the
// mutex with many waiters: each returns with the mutex held, exactly once; a
// signalled waiter waits on the held mutex and is made ready by the unlock), timed
// waits (timeout re-acquires the mutex; timed waits racing with signals lose
// nothing), C-Threads §5.1's PingPong, initializers, destroy and EINVAL.
#include <deque>
#include <functional>
#include <vector>

#include "sync_test_util.h"

#include <stdio.h>
#include <weft/debug.h>

using namespace weft_sync_test;

namespace {

class CondTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(CondTest);

// A bounded buffer guarded by one mutex. Two conditions (not_empty, not_full)
// signalled one waiter at a time, or one condition broadcast on every change.
struct Buffer {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t not_empty = WEFT_COND_INIT, not_full = WEFT_COND_INIT;
  bool broadcast = false;      // one condition (not_empty), broadcast
  size_t cap = 4;
  std::deque<long> q;          // m
  long produced = 0, consumed = 0, total = 0, sum = 0;  // m
  std::atomic<int> bad{0};

  weft_cond_t *FullCond() { return broadcast ? &not_empty : &not_full; }
  void Wake(weft_cond_t *c) {
    int rc = broadcast ? weft_cond_broadcast(c) : weft_cond_signal(c);
    if (rc) bad.fetch_add(1);
  }
  void Put(long v, bool signal_after_unlock) {
    if (weft_mutex_lock(&m)) bad.fetch_add(1);
    while (q.size() >= cap)
      if (weft_cond_wait(FullCond(), &m)) bad.fetch_add(1);
    q.push_back(v);
    ++produced;
    if (signal_after_unlock) {
      if (weft_mutex_unlock(&m)) bad.fetch_add(1);
      Wake(&not_empty);
    } else {
      Wake(&not_empty);  // while holding the mutex: morphs weft waiters
      if (weft_mutex_unlock(&m)) bad.fetch_add(1);
    }
  }
  // Takes one item; false once `total` items were taken.
  bool Get() {
    if (weft_mutex_lock(&m)) bad.fetch_add(1);
    while (q.empty() && consumed < total)
      if (weft_cond_wait(&not_empty, &m)) bad.fetch_add(1);
    if (consumed == total) {
      weft_cond_broadcast(&not_empty);  // let the other consumers see the end
      weft_mutex_unlock(&m);
      return false;
    }
    sum += q.front();
    q.pop_front();
    ++consumed;
    if (consumed == total) weft_cond_broadcast(&not_empty);
    Wake(FullCond());
    if (weft_mutex_unlock(&m)) bad.fetch_add(1);
    return true;
  }
};

void ProducerConsumer(int nvps, bool broadcast) {
  Buffer b;
  b.broadcast = broadcast;
  const int np = 2 + nvps, nc = 2 + nvps, os_p = 1, os_c = 1;
  const long per = Scaled(6000, 20);
  b.total = (np + os_p) * per;
  std::atomic<long> got{0};
  // threads [0, np) weft producers, [np, np+nc) weft consumers; then OS ones
  RunMixed(np + nc, os_p + os_c, [&](int i) {
    bool producer = i < np || i == np + nc;
    if (producer) {
      for (long k = 1; k <= per; ++k) b.Put(k, (k & 1) != 0);
    } else {
      while (b.Get()) got.fetch_add(1);
    }
  });
  EXPECT_EQ(b.bad.load(), 0);
  EXPECT_EQ(got.load(), b.total);
  EXPECT_EQ(b.consumed, b.total);
  EXPECT_EQ(b.sum, (np + os_p) * per * (per + 1) / 2);
  EXPECT_TRUE(b.q.empty());
  EXPECT_EQ(weft_cond_destroy(&b.not_empty), 0);
  EXPECT_EQ(weft_cond_destroy(&b.not_full), 0);
  EXPECT_EQ(weft_mutex_destroy(&b.m), 0);
}

TEST_P(CondTest, ProducerConsumerSignal) { ProducerConsumer(nvps(), false); }
TEST_P(CondTest, ProducerConsumerBroadcast) { ProducerConsumer(nvps(), true); }

// N waiters block on one condition (each announced under the mutex before
// waiting, so once the main thread sees all N under the mutex, all N are inside
// weft_cond_wait). Then the main thread wakes them while holding the mutex (wait
// morphing); every waiter returns exactly once, holding the mutex alone.
struct Crowd {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  int waiting = 0;        // m
  long tickets = 0;       // m: each waiter needs one
  int holders = 0;        // m: threads inside the critical section (must be 1)
  int returned = 0;       // m
  std::atomic<int> overlaps{0}, bad{0};

  void Wait() {
    weft_mutex_lock(&m);
    ++waiting;
    while (tickets == 0)
      if (weft_cond_wait(&c, &m)) bad.fetch_add(1);
    --tickets;
    if (++holders != 1) overlaps.fetch_add(1);
    Work(50);
    if (weft_self()) weft_yield();  // still holding: others stay queued on m
    --holders;
    ++returned;
    weft_mutex_unlock(&m);
  }
  int Count(int Crowd::*f) {
    weft_mutex_lock(&m);
    int v = this->*f;
    weft_mutex_unlock(&m);
    return v;
  }
};

void WakeCrowd(int n, int nos, bool broadcast) {
  Crowd cr;
  std::vector<weft_thread_t *> ts;
  std::vector<std::thread> os;
  for (int i = 0; i < n; ++i)
    ts.push_back(Spawn(+[](void *a) -> void * {
      static_cast<Crowd *>(a)->Wait();
      return nullptr;
    }, &cr));
  for (int i = 0; i < nos; ++i) os.emplace_back([&cr] { cr.Wait(); });
  ASSERT_TRUE(WaitFor([&] { return cr.Count(&Crowd::waiting) == n + nos; }))
      << "waiters did not arrive";
  weft_mutex_lock(&cr.m);
  EXPECT_EQ(cr.returned, 0);
  cr.tickets = n + nos;
  if (broadcast) {
    EXPECT_EQ(weft_cond_broadcast(&cr.c), 0);
  } else {
    for (int i = 0; i < n + nos; ++i) EXPECT_EQ(weft_cond_signal(&cr.c), 0);
  }
  // Nobody can return while we hold the mutex, morphed or not.
  for (int i = 0; i < 20; ++i) weft_yield();
  EXPECT_EQ(cr.returned, 0) << "a woken waiter returned without the mutex";
  EXPECT_EQ(weft_cond_destroy(&cr.c), 0) << "all waiters were signalled: none left on c";
  EXPECT_EQ(weft_mutex_unlock(&cr.m), 0);
  EXPECT_TRUE(WaitFor([&] { return cr.Count(&Crowd::returned) == n + nos; }, 60))
      << "waiters did not all return: " << cr.Count(&Crowd::returned) << " of " << n + nos;
  for (auto *t : ts) Join(t);
  for (auto &t : os) t.join();
  EXPECT_EQ(cr.overlaps.load(), 0) << "two waiters held the mutex at once";
  EXPECT_EQ(cr.bad.load(), 0);
  EXPECT_EQ(cr.tickets, 0);
  EXPECT_EQ(weft_mutex_destroy(&cr.m), 0);
}

// Signals and broadcasts sent while holding the mutex (wait morphing).
TEST_P(CondTest, SignalEachWhileHoldingMutex) {
  for (int r = 0; r < Scaled(20, 2); ++r) WakeCrowd(16, 0, false);
}
TEST_P(CondTest, BroadcastWhileHoldingMutex) {
  for (int r = 0; r < Scaled(20, 2); ++r) WakeCrowd(16, 0, true);
}
TEST_P(CondTest, BroadcastWithOsWaitersWhileHoldingMutex) {
  for (int r = 0; r < Scaled(10, 2); ++r) WakeCrowd(8, 3, true);
}
TEST_P(CondTest, SignalWithOsWaitersWhileHoldingMutex) {
  for (int r = 0; r < Scaled(10, 2); ++r) WakeCrowd(8, 3, false);
}

// Wait morphing (C-Threads §4.4): with more than one VP, a weft-thread waiter
// signalled while the signaller holds the mutex is moved onto the mutex's queue and
// is made ready only when the holder unlocks. Seen through the waiter counts: at
// once after the signal it waits on the mutex, no longer on the condition (without
// morphing it would be ready instead); and through the UNBLOCKED event, raised for it
// by the unlock only, never by the signal. With one VP the signal makes it ready
// instead (src/sync/cond.c deliver; SignalOnTheOnlyVpMakesTheWaiterReady below).
struct MorphRec {
  std::atomic<weft_thread_t *> target{nullptr};
  std::atomic<int> unblocked{0};
};
MorphRec g_morph;  // static: a callback may still run after its pop (weft/hook.h)
void OnMorphUnblocked(weft_hook_event_t, weft_thread_t *t, int, void *, void *) {
  if (t == g_morph.target.load()) g_morph.unblocked.fetch_add(1);
}

TEST_P(CondTest, SignalMorphsWaiterOntoHeldMutex) {
  if (nvps() < 2) GTEST_SKIP() << "one VP: the signal makes the waiter ready (next test)";
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  int hooks = weft_hook_push(WEFT_HOOK_UNBLOCKED, OnMorphUnblocked, nullptr);
  ASSERT_TRUE(hooks == 0 || hooks == WEFT_EPERM) << Err(hooks);  // EPERM: WEFT_HOOKS=OFF
  const long rounds = Scaled(20, 3);
  for (long r = 0; r < rounds; ++r) {
    bool go = false;  // m
    std::atomic<int> state{0};
    auto waiter = [&] {
      weft_mutex_lock(&m);
      while (!go) weft_cond_wait(&c, &m);
      state = 1;
      weft_mutex_unlock(&m);
    };
    g_morph.unblocked = 0;
    weft_thread_t *t = SpawnCall(&waiter);
    g_morph.target = t;  // before the signal, the only thing that can wake it
    ASSERT_TRUE(WaitForWaiters(&c, 1)) << "round " << r;
    ASSERT_EQ(weft_mutex_lock(&m), 0);
    go = true;
    ASSERT_EQ(weft_cond_signal(&c), 0);
    EXPECT_EQ(Waiters(&c), 0) << "round " << r;
    EXPECT_EQ(Waiters(&m), 1) << "round " << r << ": the signalled waiter is not on the held mutex";
    if (r == 0) {  // and weft_dump says so: blocked on the mutex, not the condition
      char *buf = nullptr;
      size_t len = 0;
      FILE *f = open_memstream(&buf, &len);
      ASSERT_NE(f, nullptr);
      weft_dump(f);
      fclose(f);
      std::string out(buf, len);
      free(buf);
      char want[64];
      std::snprintf(want, sizeof want, "blocked on mutex 0x%llx", (unsigned long long)(uintptr_t)&m);
      EXPECT_NE(out.find(want), std::string::npos) << out;
    }
    if (hooks == 0) {
      EXPECT_EQ(g_morph.unblocked.load(), 0) << "round " << r << ": the signal made the waiter ready";
    }
    for (int i = 0; i < 10; ++i) weft_yield();  // it stays queued while the mutex is held
    EXPECT_EQ(state.load(), 0) << "round " << r;
    EXPECT_EQ(Waiters(&m), 1) << "round " << r;
    ASSERT_EQ(weft_mutex_unlock(&m), 0);  // makes it ready
    Join(t);
    EXPECT_EQ(state.load(), 1) << "round " << r;
    EXPECT_EQ(Waiters(&m), 0) << "round " << r;
    if (hooks == 0) {
      EXPECT_EQ(g_morph.unblocked.load(), 1) << "round " << r << ": made ready once, by the unlock";
    }
  }
  if (hooks == 0) {
    ASSERT_EQ(weft_hook_pop(WEFT_HOOK_UNBLOCKED), 0);
  }
  EXPECT_EQ(weft_cond_destroy(&c), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
}

// On the only VP a signal made under the mutex makes the waiter ready at once (its
// UNBLOCKED event comes from the signal, and it waits on neither object): it cannot
// run before the signaller gives up the VP, by when the mutex is usually free. If
// the signaller yields while still holding the mutex, the waiter runs, finds the
// mutex held and waits on it; the unlock then lets it return, holding the mutex,
// exactly once.
TEST_P(CondTest, SignalOnTheOnlyVpMakesTheWaiterReady) {
  if (nvps() != 1) GTEST_SKIP() << "more than one VP: the waiter is morphed (previous test)";
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  int hooks = weft_hook_push(WEFT_HOOK_UNBLOCKED, OnMorphUnblocked, nullptr);
  ASSERT_TRUE(hooks == 0 || hooks == WEFT_EPERM) << Err(hooks);  // EPERM: WEFT_HOOKS=OFF
  for (int yield_holding = 0; yield_holding < 2; ++yield_holding) {
    bool go = false;  // m
    std::atomic<int> state{0}, held_alone{0};
    auto waiter = [&] {
      weft_mutex_lock(&m);
      while (!go) weft_cond_wait(&c, &m);
      held_alone = weft_mutex_trylock(&m) == WEFT_EBUSY;  // it holds m
      state = 1;
      weft_mutex_unlock(&m);
    };
    g_morph.unblocked = 0;
    weft_thread_t *t = SpawnCall(&waiter);
    g_morph.target = t;
    ASSERT_TRUE(WaitForWaiters(&c, 1));
    ASSERT_EQ(weft_mutex_lock(&m), 0);
    go = true;
    ASSERT_EQ(weft_cond_signal(&c), 0);
    EXPECT_EQ(Waiters(&c), 0);
    EXPECT_EQ(Waiters(&m), 0) << "the waiter was queued on the mutex";
    if (hooks == 0) {
      EXPECT_EQ(g_morph.unblocked.load(), 1) << "the signal did not make the waiter ready";
    }
    if (yield_holding) {
      // it runs now, and waits on the mutex we hold
      ASSERT_TRUE(YieldUntil([&] { return Waiters(&m) == 1; }));
      EXPECT_EQ(state.load(), 0);
    }
    ASSERT_EQ(weft_mutex_unlock(&m), 0);
    Join(t);
    EXPECT_EQ(state.load(), 1);
    EXPECT_EQ(held_alone.load(), 1);
    EXPECT_EQ(Waiters(&m), 0);
  }
  if (hooks == 0) {
    ASSERT_EQ(weft_hook_pop(WEFT_HOOK_UNBLOCKED), 0);
  }
  EXPECT_EQ(weft_cond_destroy(&c), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
}

// A thread that blocks in cond_wait hands its mutex, held, to the cond waiter it
// switches to when that one waits to take the same mutex back (continuation
// recognition, src/sync/wait.c). Whatever the mix, a waiter returns holding the mutex
// and alone in it: threads take turns through waits and timed waits on two condition
// variables of one mutex while plain lockers (which queue on the mutex, so that its
// word says "waiters") and a waiter on another mutex come and go. Every turn is
// counted exactly once, nobody is inside twice, and the mutex ends free.
TEST_P(CondTest, MutexHandedToTheNextCondWaiterStaysExclusive) {
  weft_mutex_t m = WEFT_MUTEX_INIT, other = WEFT_MUTEX_INIT;
  weft_cond_t c[2] = {WEFT_COND_INIT, WEFT_COND_INIT}, oc = WEFT_COND_INIT;
  const int kTurners = 4, kRounds = 400;
  int turn = 0, inside = 0, overlaps = 0;  // m
  long turns = 0, locked = 0;              // m
  bool stop_other = false;                 // other
  std::atomic<int> turners_left{kTurners};
  // the turners start once both plain lockers have held m: else, where the turners are
  // quick (or the lockers slow to start, under an emulator), every turn could be over
  // before a plain locker ever queued on m, and the test would not test that
  std::atomic<int> lockers_in{0};
  auto enter = [&] {
    overlaps += inside != 0;
    inside = 1;
  };
  auto leave = [&] { inside = 0; };
  std::vector<std::function<void()>> fns;
  for (int me = 0; me < kTurners; ++me) {
    fns.push_back([&, me] {
      while (lockers_in.load() < 2) weft_yield();
      for (int r = 0; r < kRounds; ++r) {
        weft_mutex_lock(&m);
        while (turn != me) {
          // half of the waits are timed, some so short that they time out
          if ((r + me) & 1) weft_cond_timedwait(&c[me & 1], &m, weft_deadline_after(2000));
          else weft_cond_wait(&c[me & 1], &m);
          enter();  // it returned holding m
          leave();
        }
        enter();
        turns++;
        turn = (turn + 1) % kTurners;
        leave();
        weft_cond_broadcast(&c[0]);
        weft_cond_broadcast(&c[1]);
        weft_mutex_unlock(&m);
      }
      turners_left--;
    });
  }
  for (int k = 0; k < 2; ++k) {
    fns.push_back([&] {
      bool counted = false;
      while (turners_left.load() > 0) {
        weft_mutex_lock(&m);
        enter();
        locked++;
        leave();
        weft_mutex_unlock(&m);
        if (!counted) lockers_in++;
        counted = true;
        weft_yield();
      }
    });
  }
  fns.push_back([&] {  // a cond waiter on another mutex, never handed m
    weft_mutex_lock(&other);
    while (!stop_other) weft_cond_timedwait(&oc, &other, weft_deadline_after(5000));
    weft_mutex_unlock(&other);
  });
  std::vector<weft_thread_t *> ts;
  for (auto &f : fns) ts.push_back(SpawnCall(&f));
  for (int i = 0; i < kTurners + 2; ++i) Join(ts[(size_t)i]);
  weft_mutex_lock(&other);
  stop_other = true;
  weft_cond_signal(&oc);
  weft_mutex_unlock(&other);
  Join(ts.back());
  EXPECT_EQ(turns, (long)kTurners * kRounds);
  EXPECT_EQ(overlaps, 0) << "two threads inside the mutex at once";
  EXPECT_GT(locked, 0);
  EXPECT_EQ(weft_mutex_trylock(&m), 0) << "the mutex was left held";
  EXPECT_EQ(weft_mutex_unlock(&m), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
  EXPECT_EQ(weft_mutex_destroy(&other), 0);
  for (auto &x : c) EXPECT_EQ(weft_cond_destroy(&x), 0);
  EXPECT_EQ(weft_cond_destroy(&oc), 0);
}

// Broadcast and signal without the mutex held (waiters are woken to compete).
TEST_P(CondTest, SignalAndBroadcastWithoutMutex) {
  for (int r = 0; r < Scaled(20, 2); ++r) {
    for (int bc = 0; bc < 2; ++bc) {
      Crowd cr;
      const int n = 12;
      std::vector<weft_thread_t *> ts;
      for (int i = 0; i < n; ++i)
        ts.push_back(Spawn(+[](void *a) -> void * {
          static_cast<Crowd *>(a)->Wait();
          return nullptr;
        }, &cr));
      ASSERT_TRUE(WaitFor([&] { return cr.Count(&Crowd::waiting) == n; }));
      weft_mutex_lock(&cr.m);
      cr.tickets = n;
      weft_mutex_unlock(&cr.m);
      if (bc) {
        EXPECT_EQ(weft_cond_broadcast(&cr.c), 0);
      } else {
        for (int i = 0; i < n; ++i) EXPECT_EQ(weft_cond_signal(&cr.c), 0);
      }
      EXPECT_TRUE(WaitFor([&] { return cr.Count(&Crowd::returned) == n; }, 60));
      for (auto *t : ts) Join(t);
      EXPECT_EQ(cr.overlaps.load(), 0);
      EXPECT_EQ(cr.bad.load(), 0);
    }
  }
}

// The counters move under condition-variable traffic (no exact numbers).
TEST_P(CondTest, StatsMove) {
  weft_sync_stats_reset();
  WakeCrowd(16, 2, true);
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  weft_mutex_lock(&m);
  EXPECT_EQ(weft_cond_timedwait(&c, &m, weft_deadline_after(kMs)), WEFT_ETIMEDOUT);
  weft_mutex_unlock(&m);
  weft_sync_stats_t s = Stats();
  EXPECT_GT(s.timeouts, 0u);
  EXPECT_GT(s.mutex_missed + s.blocked + s.idled, 0u)
      << "no contention, blocking or idling counted for 18 threads sharing a mutex";
}

// A timed wait that times out returns WEFT_ETIMEDOUT, not before its deadline,
// with the mutex held again (another thread's trylock fails until it unlocks).
TEST_P(CondTest, TimedWaitTimesOutHoldingMutex) {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  for (int os = 0; os < 2; ++os) {
    auto body = [&] {
      EXPECT_EQ(weft_mutex_lock(&m), 0);
      for (uint64_t ms : {0, 1, 5}) {
        uint64_t d = weft_deadline_after(ms * kMs);
        EXPECT_EQ(weft_cond_timedwait(&c, &m, d), WEFT_ETIMEDOUT) << ms << " ms";
        EXPECT_GE(weft_time_now(), d) << "returned before the deadline";
        int other = 0;
        std::thread([&] { other = weft_mutex_trylock(&m); }).join();
        EXPECT_EQ(other, WEFT_EBUSY) << "mutex not re-acquired after the timeout";
      }
      EXPECT_EQ(weft_mutex_unlock(&m), 0);
    };
    if (os) std::thread(body).join();
    else body();
  }
  EXPECT_EQ(weft_cond_destroy(&c), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
}

// Timed waits racing with signals. Consumers (weft and OS, timed with short random
// deadlines, and untimed) each take exactly `quota` tokens; producers add tokens
// one at a time and signal once per token (holding the mutex or not). Every wait
// returns 0 or WEFT_ETIMEDOUT. Towards the end only untimed waiters may remain, so
// a signal lost to a timed-out waiter hangs the test (caught by the watchdog and
// by the bounded wait below).
TEST_P(CondTest, TimedWaitsRaceWithSignals) {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  long tokens = 0, taken = 0;  // m
  std::atomic<long> timeouts{0}, bad{0};
  std::atomic<int> last{0}, consumers_done{0};
  const int ncons_weft = 2 + 2 * nvps(), ncons_os = 2, nprod = 2;
  const int ncons = ncons_weft + ncons_os;
  const long quota = Scaled(1500, 10);
  const long total = ncons * quota;
  std::atomic<long> produced{0};
  auto consumer = [&](int i, bool timed) {
    std::minstd_rand rng(static_cast<unsigned>(i) + 17u);
    weft_mutex_lock(&m);
    for (long k = 0; k < quota; ++k) {
      while (tokens == 0) {
        int rc = timed ? weft_cond_timedwait(&c, &m, weft_deadline_after(rng() % (200 * kUs)))
                       : weft_cond_wait(&c, &m);
        if (rc == WEFT_ETIMEDOUT) {
          timeouts.fetch_add(1);
        } else if (rc != 0) {
          bad.fetch_add(1);
          last.store(rc);
        }
      }
      --tokens;
      ++taken;
    }
    weft_mutex_unlock(&m);
    consumers_done.fetch_add(1);
  };
  auto producer = [&](int i) {
    long mine = total / nprod + (i == 0 ? total % nprod : 0);
    for (long k = 0; k < mine; ++k) {
      weft_mutex_lock(&m);
      ++tokens;
      if (k & 1) {
        weft_cond_signal(&c);
        weft_mutex_unlock(&m);
      } else {
        weft_mutex_unlock(&m);
        weft_cond_signal(&c);
      }
      produced.fetch_add(1);
      if ((k & 15) == 0 && weft_self()) weft_yield();
    }
  };
  // [0, nprod) producers; then weft consumers (odd ones untimed); then OS
  // consumers (one timed, one untimed).
  RunMixed(nprod + ncons_weft, ncons_os, [&](int i) {
    if (i < nprod) producer(i);
    else if (i < nprod + ncons_weft) consumer(i, (i & 1) == 0);
    else consumer(i, i == nprod + ncons_weft);
  });
  EXPECT_EQ(bad.load(), 0) << "a wait returned " << Err(last.load());
  EXPECT_EQ(produced.load(), total);
  EXPECT_EQ(taken, total);
  EXPECT_EQ(tokens, 0);
  EXPECT_EQ(consumers_done.load(), ncons);
  EXPECT_EQ(weft_cond_destroy(&c), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
}

// A signalled timed waiter whose deadline is far away returns 0, and a signal
// that reaches a timed waiter is not also delivered as a timeout: a single waiter,
// a single signal per round, a deadline that races with it.
TEST_P(CondTest, TimedWaitSignalRaceSingleWaiter) {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  bool flag = false;  // m
  int ok = 0, to = 0, bad = 0;
  const int rounds = static_cast<int>(Scaled(400, 10));
  for (int r = 0; r < rounds; ++r) {
    std::atomic<bool> waiting{false};
    auto w = [&]() -> void * {
      weft_mutex_lock(&m);
      waiting = true;
      uint64_t d = weft_deadline_after(static_cast<uint64_t>(r % 20) * 10 * kUs);
      int rc = 0;
      while (!flag && rc == 0) rc = weft_cond_timedwait(&c, &m, d);
      if (flag) {
        ++ok;
        flag = false;
      } else if (rc == WEFT_ETIMEDOUT) {
        ++to;
      } else {
        ++bad;
      }
      weft_mutex_unlock(&m);
      return nullptr;
    };
    weft_thread_t *t = SpawnCall(&w);
    ASSERT_TRUE(WaitFor([&] { return waiting.load(); }));
    weft_mutex_lock(&m);
    flag = true;
    weft_cond_signal(&c);
    weft_mutex_unlock(&m);
    Join(t);
    weft_mutex_lock(&m);
    flag = false;  // a timed-out waiter left it set
    weft_mutex_unlock(&m);
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(ok + to, rounds);
  EXPECT_EQ(weft_cond_destroy(&c), 0) << "a waiter was left on the condition";
}

// C-Threads §5.1 PingPong: two threads alternate through one mutex and one
// condition; the round count is exact and turns strictly alternate. Also with one
// side a plain OS thread.
void PingPong(bool one_os) {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  int turn = 0;      // m
  long count = 0;    // m
  int last = 1;      // m
  std::atomic<int> bad{0};
  const long rounds = Scaled(20000, 50);
  auto player = [&](int me) {
    for (long r = 0; r < rounds; ++r) {
      weft_mutex_lock(&m);
      while (turn != me) weft_cond_wait(&c, &m);
      if (last == me) bad.fetch_add(1);
      last = me;
      ++count;
      turn = 1 - me;
      weft_cond_signal(&c);
      weft_mutex_unlock(&m);
    }
  };
  RunMixed(one_os ? 1 : 2, one_os ? 1 : 0, player);
  EXPECT_EQ(count, 2 * rounds);
  EXPECT_EQ(bad.load(), 0) << "turns did not alternate";
  EXPECT_EQ(weft_cond_destroy(&c), 0);
}
TEST_P(CondTest, PingPong) { PingPong(false); }
// The OS side blocks in the kernel, the weft side on its VP.
TEST_P(CondTest, PingPongWithOsThread) { PingPong(true); }

// Static initializer, all-zero object, destroy with a waiter, EINVAL.
// Waiting with a mutex that is not locked returns WEFT_EPERM at once, in every
// build, and leaves the mutex unlocked (it used to wait, then return holding it).
// The untimed form is woken by broadcasts until it returns, so a build without the
// check fails instead of hanging.
TEST_P(CondTest, WaitWithUnlockedMutexIsEperm) {
  weft_cond_t c = WEFT_COND_INIT;
  weft_mutex_t m = WEFT_MUTEX_INIT;
  auto check = [&](const char *who) {
    std::atomic<int> rc{-100};
    std::atomic<bool> done{false};
    auto body = [&] {
      rc = weft_cond_wait(&c, &m);
      done = true;
    };
    std::thread waker([&] {
      while (!done.load()) {
        weft_cond_broadcast(&c);
        std::this_thread::yield();
      }
    });
    body();
    waker.join();
    EXPECT_EQ(rc.load(), WEFT_EPERM) << who << ": weft_cond_wait";
    EXPECT_EQ(weft_cond_timedwait(&c, &m, weft_deadline_after(kMs)), WEFT_EPERM)
        << who << ": weft_cond_timedwait";
    EXPECT_EQ(weft_mutex_trylock(&m), 0) << who << ": the mutex was left locked";
    EXPECT_EQ(weft_mutex_unlock(&m), 0);
  };
  RunInThread([&]() -> void * {
    check("weft thread");
    return nullptr;
  });
  std::thread plain([&] { check("plain OS thread"); });
  plain.join();
  EXPECT_EQ(weft_cond_destroy(&c), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
}

TEST_P(CondTest, InitDestroyAndEinval) {
  weft_cond_t zero;
  std::memset(&zero, 0, sizeof zero);
  weft_cond_t st = WEFT_COND_INIT;
  weft_cond_t in;
  std::memset(&in, 0x5A, sizeof in);
  ASSERT_EQ(weft_cond_init(&in), 0);
  weft_mutex_t m;
  std::memset(&m, 0, sizeof m);
  for (weft_cond_t *c : {&zero, &st, &in}) {
    EXPECT_EQ(weft_cond_signal(c), 0) << "no waiters";
    EXPECT_EQ(weft_cond_broadcast(c), 0);
    std::atomic<int> state{0};
    bool go = false;  // m
    auto w = [&]() -> void * {
      weft_mutex_lock(&m);
      state = 1;
      while (!go) weft_cond_wait(c, &m);
      state = 2;
      weft_mutex_unlock(&m);
      return nullptr;
    };
    weft_thread_t *t = SpawnCall(&w);
    ASSERT_TRUE(WaitFor([&] { return state.load() == 1; }));
    weft_mutex_lock(&m);  // the waiter released it: it is inside the wait
    EXPECT_EQ(weft_cond_destroy(c), WEFT_EBUSY) << "destroy with a waiter";
    go = true;
    EXPECT_EQ(weft_cond_signal(c), 0);
    weft_mutex_unlock(&m);
    Join(t);
    EXPECT_EQ(state.load(), 2);
    EXPECT_EQ(weft_cond_destroy(c), 0);
  }
  weft_cond_t c = WEFT_COND_INIT;
  EXPECT_EQ(weft_cond_init(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_destroy(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_signal(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_broadcast(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_wait(nullptr, &m), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_wait(&c, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_timedwait(nullptr, &m, weft_deadline_after(kMs)), WEFT_EINVAL);
  EXPECT_EQ(weft_cond_timedwait(&c, nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
  EXPECT_EQ(weft_mutex_trylock(&m), 0) << "EINVAL calls left the mutex alone";
  EXPECT_EQ(weft_mutex_unlock(&m), 0);
}

}  // namespace
