// tests/unit/sem_test.cc - counting semaphores (weft/sem.h): counts and trywait,
// no lost wake-ups (producers signal, consumers wait; weft and plain OS threads;
// 1/2/4 VPs), timed waits that time out take no unit, timed waits racing with
// signals conserve units, WEFT_SEM_INIT(n) and the all-zero object, EINVAL,
// EAGAIN at WEFT_SEM_MAX, destroy with waiters.
#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class SemTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(SemTest);

// init n: n trywaits succeed, the next one is WEFT_EBUSY; signals add units.
TEST_P(SemTest, Counts) {
  for (int32_t n : {0, 1, 5, 100}) {
    weft_sem_t s;
    ASSERT_EQ(weft_sem_init(&s, n), 0);
    EXPECT_EQ(weft_sem_value(&s), n);
    for (int32_t i = 0; i < n; ++i) ASSERT_EQ(weft_sem_trywait(&s), 0) << i << " of " << n;
    EXPECT_EQ(weft_sem_trywait(&s), WEFT_EBUSY) << "after " << n;
    EXPECT_EQ(weft_sem_value(&s), 0);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(weft_sem_signal(&s), 0);
    EXPECT_EQ(weft_sem_value(&s), 3);
    EXPECT_EQ(weft_sem_wait(&s), 0);
    EXPECT_EQ(weft_sem_timedwait(&s, weft_deadline_after(kMs)), 0);
    EXPECT_EQ(weft_sem_timedwait(&s, weft_time_now() - 1), 0) << "a free unit, past deadline";
    EXPECT_EQ(weft_sem_value(&s), 0);
    EXPECT_EQ(weft_sem_destroy(&s), 0);
  }
}

// WEFT_SEM_INIT(n) and all-zero objects.
TEST_P(SemTest, StaticInitializerAndZero) {
  weft_sem_t a = WEFT_SEM_INIT(3);
  EXPECT_EQ(weft_sem_value(&a), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(weft_sem_trywait(&a), 0);
  EXPECT_EQ(weft_sem_trywait(&a), WEFT_EBUSY);
  weft_sem_t z;
  std::memset(&z, 0, sizeof z);
  EXPECT_EQ(weft_sem_value(&z), 0);
  EXPECT_EQ(weft_sem_trywait(&z), WEFT_EBUSY);
  // a waiter on the zero object is woken by a signal
  weft_thread_t *t = Spawn(+[](void *a) -> void * {
    return P(weft_sem_wait(static_cast<weft_sem_t *>(a)) == 0 ? 1 : 0);
  }, &z);
  for (int i = 0; i < 10; ++i) weft_yield();
  EXPECT_EQ(weft_sem_signal(&z), 0);
  EXPECT_EQ(Join(t), P(1));
  EXPECT_EQ(weft_sem_value(&z), 0);
  EXPECT_EQ(weft_sem_destroy(&z), 0);
  EXPECT_EQ(weft_sem_destroy(&a), 0);
}

// EINVAL: NULL, negative initial count (object untouched). EAGAIN at WEFT_SEM_MAX.
TEST_P(SemTest, EinvalAndEagain) {
  weft_sem_t s;
  std::memset(&s, 0x5A, sizeof s);
  weft_sem_t before = s;
  EXPECT_EQ(weft_sem_init(&s, -1), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_init(&s, INT32_MIN), WEFT_EINVAL);
  EXPECT_EQ(std::memcmp(&s, &before, sizeof s), 0) << "failed init wrote the object";
  EXPECT_EQ(weft_sem_init(nullptr, 0), WEFT_EINVAL);
  ExpectSemNullEinval();

  ASSERT_EQ(weft_sem_init(&s, WEFT_SEM_MAX), 0);
  EXPECT_EQ(weft_sem_signal(&s), WEFT_EAGAIN);
  EXPECT_EQ(weft_sem_value(&s), WEFT_SEM_MAX) << "a refused signal changed the count";
  EXPECT_EQ(weft_sem_trywait(&s), 0);
  EXPECT_EQ(weft_sem_signal(&s), 0) << "back to the maximum";
  EXPECT_EQ(weft_sem_signal(&s), WEFT_EAGAIN);
  EXPECT_EQ(weft_sem_value(&s), WEFT_SEM_MAX);
  // concurrently: exactly one of many signallers succeeds from MAX - 1
  ASSERT_EQ(weft_sem_init(&s, WEFT_SEM_MAX - 1), 0);
  std::atomic<int> ok{0}, again{0}, other{0};
  RunMixed(4, 2, [&](int) {
    int rc = weft_sem_signal(&s);
    (rc == 0 ? ok : rc == WEFT_EAGAIN ? again : other).fetch_add(1);
  });
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(again.load(), 5);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(weft_sem_value(&s), WEFT_SEM_MAX);
  EXPECT_EQ(weft_sem_destroy(&s), 0);
}

// No lost wake-ups: P producers signal, C consumers wait (blocking), weft and OS
// threads mixed; every consumer gets exactly its share and the count ends at 0.
TEST_P(SemTest, ProducersConsumersNoLostWakeups) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  const int np_weft = 2 + nvps(), np_os = 1, nc_weft = 3 + nvps(), nc_os = 2;
  const int np = np_weft + np_os, nc = nc_weft + nc_os;
  const long per_consumer = Scaled(8000, 20);
  const long total = per_consumer * nc;
  std::atomic<long> taken{0}, bad{0};
  // thread index: [0, np_weft) weft producers, [np_weft, np_weft + nc_weft) weft
  // consumers, then OS: one producer, then nc_os consumers
  RunMixed(np_weft + nc_weft, np_os + nc_os, [&](int i) {
    int base_os = np_weft + nc_weft;
    bool producer = i < np_weft || i == base_os;
    if (producer) {
      long mine = total / np + ((i == 0) ? total % np : 0);
      for (long k = 0; k < mine; ++k) {
        if (weft_sem_signal(&s) != 0) bad.fetch_add(1);
        if ((k & 31) == 0 && weft_self()) weft_yield();
      }
    } else {
      for (long k = 0; k < per_consumer; ++k) {
        if (weft_sem_wait(&s) != 0) bad.fetch_add(1);
        taken.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(taken.load(), total);
  EXPECT_EQ(weft_sem_value(&s), 0);
  EXPECT_EQ(weft_sem_trywait(&s), WEFT_EBUSY);
  EXPECT_EQ(weft_sem_destroy(&s), 0);
}

// Every waiter blocks first (count 0), then units arrive one at a time: each
// signal must wake exactly one.
TEST_P(SemTest, SignalWakesBlockedWaitersOneEach) {
  for (int r = 0; r < Scaled(30, 3); ++r) {
    weft_sem_t s = WEFT_SEM_INIT(0);
    const int nweft = 8, nos = 2;
    std::atomic<int> started{0}, done{0};
    std::vector<weft_thread_t *> ts;
    std::vector<std::thread> os;
    auto waiter = [&] {
      started.fetch_add(1);
      EXPECT_EQ(weft_sem_wait(&s), 0);
      done.fetch_add(1);
    };
    for (int i = 0; i < nweft; ++i)
      ts.push_back(SpawnCall(&waiter));
    for (int i = 0; i < nos; ++i) os.emplace_back(waiter);
    ASSERT_TRUE(WaitFor([&] { return started.load() == nweft + nos; }));
    for (int i = 0; i < nweft + nos; ++i) {
      EXPECT_EQ(weft_sem_signal(&s), 0);
      if (i % 3 == 0) weft_yield();
    }
    EXPECT_TRUE(WaitFor([&] { return done.load() == nweft + nos; }, 60))
        << "round " << r << ": " << done.load() << " of " << nweft + nos << " woke";
    for (auto *t : ts) Join(t);
    for (auto &t : os) t.join();
    EXPECT_EQ(weft_sem_value(&s), 0);
    EXPECT_EQ(weft_sem_destroy(&s), 0);
  }
}

// A timed wait that times out takes no unit: WEFT_ETIMEDOUT, not before the
// deadline, value unchanged; the semaphore works afterwards.
TEST_P(SemTest, TimedWaitTimesOutTakingNothing) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  weft_sync_stats_reset();
  std::atomic<int> wrong{0}, early{0};
  RunMixed(3, 2, [&](int i) {
    for (uint64_t ms : {0, 1, 3}) {
      uint64_t d = weft_deadline_after(ms * kMs + static_cast<uint64_t>(i) * 100 * kUs);
      if (weft_sem_timedwait(&s, d) != WEFT_ETIMEDOUT) wrong.fetch_add(1);
      if (weft_time_now() < d) early.fetch_add(1);
    }
    if (weft_sem_timedwait(&s, weft_time_now() - 1) != WEFT_ETIMEDOUT) wrong.fetch_add(1);
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(weft_sem_value(&s), 0) << "a timed-out wait changed the count";
  EXPECT_GT(Stats().timeouts, 0u);
  EXPECT_EQ(weft_sem_signal(&s), 0);
  EXPECT_EQ(weft_sem_value(&s), 1);
  EXPECT_EQ(weft_sem_trywait(&s), 0);
  EXPECT_EQ(weft_sem_destroy(&s), 0);
}

// Timed waits racing with signals: units are conserved. Final value == signals -
// successful waits; each call returns 0 or WEFT_ETIMEDOUT.
TEST_P(SemTest, TimedWaitsRaceWithSignalsConserveUnits) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  const int nwait_weft = 2 + 2 * nvps(), nwait_os = 2, nsig = 3;
  const long waits_each = Scaled(3000, 20);
  const long signals_each = Scaled(3000, 20);
  std::atomic<long> ok{0}, timedout{0}, bad{0}, signals{0};
  std::atomic<int> last{0};
  // [0, nsig) weft signallers, then weft waiters, then OS waiters
  RunMixed(nsig + nwait_weft, nwait_os, [&](int i) {
    std::minstd_rand rng(static_cast<unsigned>(i) * 31u + 7u);
    if (i < nsig) {
      for (long k = 0; k < signals_each; ++k) {
        if (weft_sem_signal(&s) == 0) signals.fetch_add(1);
        else bad.fetch_add(1);
        if ((k & 7) == 0) weft_yield();
      }
      return;
    }
    for (long k = 0; k < waits_each; ++k) {
      int rc = weft_sem_timedwait(&s, weft_deadline_after(rng() % (150 * kUs)));
      if (rc == 0) {
        ok.fetch_add(1);
      } else if (rc == WEFT_ETIMEDOUT) {
        timedout.fetch_add(1);
      } else {
        bad.fetch_add(1);
        last.store(rc);
      }
    }
  });
  EXPECT_EQ(bad.load(), 0) << Err(last.load());
  EXPECT_EQ(ok.load() + timedout.load(), (nwait_weft + nwait_os) * waits_each);
  EXPECT_EQ(signals.load(), nsig * signals_each);
  EXPECT_EQ(weft_sem_value(&s), signals.load() - ok.load()) << "units lost or duplicated";
  long drained = 0;
  while (weft_sem_trywait(&s) == 0) ++drained;
  EXPECT_EQ(drained, signals.load() - ok.load());
  EXPECT_EQ(weft_sem_destroy(&s), 0);
}

// destroy with a waiter: WEFT_EBUSY; 0 once it left.
TEST_P(SemTest, DestroyWithWaiter) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  for (int os = 0; os < 2; ++os) {
    std::atomic<int> state{0};
    auto waiter = [&] {
      state = 1;
      EXPECT_EQ(weft_sem_wait(&s), 0);
      state = 2;
    };
    ThreadOfKind th(os, &waiter);
    ASSERT_TRUE(WaitForWaiters(&s, 1)) << th.Kind() << " waiter never queued";
    EXPECT_EQ(state.load(), 1);
    EXPECT_EQ(weft_sem_destroy(&s), WEFT_EBUSY) << th.Kind() << " waiter";
    EXPECT_EQ(weft_sem_signal(&s), 0);
    EXPECT_TRUE(WaitFor([&] { return state.load() == 2; }));
    th.Join();
    EXPECT_EQ(Waiters(&s), 0);
    EXPECT_EQ(weft_sem_value(&s), 0);
  }
  EXPECT_EQ(weft_sem_destroy(&s), 0);
}

}  // namespace
