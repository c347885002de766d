// tests/unit/time_test.cc - the clock, sleeping and the timers behind timed waits
// (weft/time.h): sleeps last at least what was asked (never an upper bound beyond
// hang guards), a sleeping weft thread does not hold its VP, many sleepers all wake
// (ordered only where deadlines differ a lot), sleeping from a plain OS thread,
// EINVAL for WEFT_FOREVER, weft_shutdown() waits for a sleeper, and timers fire
// with 1 VP while the other thread only yields and while every VP is idle.
#include <algorithm>

#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class TimeTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(TimeTest);
class TimeOneVpTest : public SyncOneVpTest {};

TEST(TimeNoRuntime, ClockAndDeadlines) {
  uint64_t a = weft_time_now(), b = weft_time_now();
  EXPECT_LE(a, b);
  EXPECT_GT(a, 0u);
  EXPECT_GE(weft_deadline_after(kMs), b + kMs);
  EXPECT_EQ(weft_deadline_after(WEFT_FOREVER), WEFT_FOREVER - 1) << "saturates below FOREVER";
  EXPECT_EQ(weft_deadline_after(WEFT_FOREVER - 1), WEFT_FOREVER - 1);
  // without a runtime: the caller is a plain OS thread and sleeps in the kernel
  uint64_t t0 = weft_time_now();
  EXPECT_EQ(weft_sleep_ns(2 * kMs), 0);
  EXPECT_GE(weft_time_now() - t0, 2 * kMs);
  EXPECT_EQ(weft_sleep_until(WEFT_FOREVER), WEFT_EINVAL);
}

// Sleeps from weft threads last at least the requested time; sleep_until returns
// at or after its deadline; a past deadline returns at once with 0.
TEST_P(TimeTest, SleepAtLeastRequested) {
  std::atomic<int> short_sleeps{0}, bad{0};
  RunMixed(3 * nvps(), 0, [&](int i) {
    for (uint64_t us : {0, 100, 1000, 3000}) {
      uint64_t ns = us * kUs + static_cast<uint64_t>(i) * 37 * kUs;
      uint64_t t0 = weft_time_now();
      if (weft_sleep_ns(ns) != 0) bad.fetch_add(1);
      if (weft_time_now() - t0 < ns) short_sleeps.fetch_add(1);
      uint64_t d = weft_deadline_after(ns / 2);
      if (weft_sleep_until(d) != 0) bad.fetch_add(1);
      if (weft_time_now() < d) short_sleeps.fetch_add(1);
    }
    if (weft_sleep_until(weft_time_now() - 1) != 0) bad.fetch_add(1);
    if (weft_sleep_until(0) != 0) bad.fetch_add(1);
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(short_sleeps.load(), 0) << "a sleep returned before its deadline";
}

// WEFT_FOREVER is not a sleep deadline, from weft and plain OS threads.
TEST_P(TimeTest, ForeverIsEinval) {
  EXPECT_EQ(weft_sleep_until(WEFT_FOREVER), WEFT_EINVAL);
  int os_rc = 0;
  std::thread([&] { os_rc = weft_sleep_until(WEFT_FOREVER); }).join();
  EXPECT_EQ(os_rc, WEFT_EINVAL);
}

// A plain OS thread sleeps in the kernel (while weft threads keep running).
TEST_P(TimeTest, SleepFromOsThread) {
  std::atomic<bool> done{false};
  std::atomic<int> short_sleeps{0};
  std::thread os([&] {
    for (uint64_t ms : {1, 5}) {
      uint64_t t0 = weft_time_now();
      EXPECT_EQ(weft_sleep_ns(ms * kMs), 0);
      if (weft_time_now() - t0 < ms * kMs) short_sleeps.fetch_add(1);
      uint64_t d = weft_deadline_after(ms * kMs);
      EXPECT_EQ(weft_sleep_until(d), 0);
      if (weft_time_now() < d) short_sleeps.fetch_add(1);
    }
    done = true;
  });
  long progress = 0;
  EXPECT_TRUE(YieldUntil([&] {
    ++progress;
    return done.load();
  }, 30));
  os.join();
  EXPECT_EQ(short_sleeps.load(), 0);
  EXPECT_GT(progress, 0);
}

// With one VP, a sleeping weft thread does not block the VP: another thread makes
// progress while it sleeps (progress counted across the sleep, not timed).
TEST_F(TimeOneVpTest, SleepDoesNotBlockTheVp) {
  std::atomic<long> progress{0};
  std::atomic<bool> stop{false};
  long before = -1, after = -1;
  auto sleeper = [&]() -> void * {
    before = progress.load();
    weft_sleep_ns(20 * kMs);
    after = progress.load();
    stop = true;
    return nullptr;
  };
  weft_thread_t *s = SpawnCall(&sleeper);
  std::pair<std::atomic<long> *, std::atomic<bool> *> yarg(&progress, &stop);
  weft_thread_t *y = Spawn(+[](void *a) -> void * {
    auto *st = static_cast<std::pair<std::atomic<long> *, std::atomic<bool> *> *>(a);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!st->second->load() && std::chrono::steady_clock::now() < deadline) {
      st->first->fetch_add(1);
      weft_yield();
    }
    return nullptr;
  }, &yarg);
  Join(s);
  Join(y);
  EXPECT_TRUE(stop.load()) << "sleeper never woke (yielder gave up after 30 s)";
  EXPECT_GT(after - before, 0) << "no other thread ran while one slept";
}

// Many sleepers with random deadlines all wake, each at or after its deadline.
// Order is checked only between two groups far apart: 0 ms sleepers all wake
// before any 100 ms sleeper.
TEST_P(TimeTest, ManySleepersAllWake) {
  const int n = static_cast<int>(Scaled(200, 20));
  std::atomic<int> seq{0}, early{0}, woke{0};
  std::vector<int> order(static_cast<size_t>(n), -1);
  RunMixed(n, 0, [&](int i) {
    std::minstd_rand rng(static_cast<unsigned>(i) + 3u);
    uint64_t d = weft_deadline_after((rng() % 20000) * kUs);
    weft_sleep_until(d);
    if (weft_time_now() < d) early.fetch_add(1);
    woke.fetch_add(1);
    order[static_cast<size_t>(i)] = seq.fetch_add(1);
  });
  EXPECT_EQ(woke.load(), n);
  EXPECT_EQ(early.load(), 0);

  const int g = 16;
  std::vector<int> rank(2 * g, -1);
  seq = 0;
  RunMixed(2 * g, 0, [&](int i) {
    bool late = i % 2 == 1;
    weft_sleep_ns(late ? 100 * kMs : 0);
    rank[static_cast<size_t>(i)] = seq.fetch_add(1);
  });
  int max_early = -1, min_late = 1 << 30;
  for (int i = 0; i < 2 * g; ++i) {
    if (i % 2) min_late = std::min(min_late, rank[static_cast<size_t>(i)]);
    else max_early = std::max(max_early, rank[static_cast<size_t>(i)]);
  }
  EXPECT_LT(max_early, min_late) << "a 100 ms sleeper woke before a 0 ms one";
}

// weft_shutdown() called while a (detached) thread sleeps waits for it and
// returns 0 once it has finished.
TEST_P(TimeTest, ShutdownWaitsForSleeper) {
  static std::atomic<int> finished;
  finished = 0;
  weft_attr_t attr = DetachedAttr();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(weft_create(nullptr, &attr, +[](void *a) -> void * {
      weft_sleep_ns(static_cast<uint64_t>(I(a)) * 10 * kMs);
      finished.fetch_add(1);
      return nullptr;
    }, P(i + 1)), 0);
  }
  weft_yield();
  int rc = weft_shutdown();
  EXPECT_EQ(rc, 0) << "shutdown with sleeping threads: " << Err(rc);
  EXPECT_EQ(finished.load(), 3) << "shutdown returned before the sleepers finished";
}

// With one VP, a timed wait times out while the only other thread yields in a
// loop (the VP never goes idle: the timer fires from the scheduler's checks).
TEST_F(TimeOneVpTest, TimedWaitFiresWhileOtherThreadYields) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  std::atomic<bool> done{false};
  std::atomic<int> rc_sem{1}, rc_cond{1}, rc_sleep{1};
  auto waiter = [&]() -> void * {
    rc_sem = weft_sem_timedwait(&s, weft_deadline_after(5 * kMs));
    weft_mutex_lock(&m);
    rc_cond = weft_cond_timedwait(&c, &m, weft_deadline_after(5 * kMs));
    weft_mutex_unlock(&m);
    rc_sleep = weft_sleep_ns(5 * kMs);
    done = true;
    return nullptr;
  };
  weft_thread_t *w = SpawnCall(&waiter);
  // the main thread is the yielder
  EXPECT_TRUE(YieldUntil([&] { return done.load(); }, 30)) << "timer never fired";
  Join(w);
  EXPECT_EQ(rc_sem.load(), WEFT_ETIMEDOUT);
  EXPECT_EQ(rc_cond.load(), WEFT_ETIMEDOUT);
  EXPECT_EQ(rc_sleep.load(), 0);
}

// Every VP idle: the only thread does a 5 ms timed wait; the idle VPs' kernel
// sleep is bounded by the deadline, so it returns (hang guard: within 5 s).
TEST_P(TimeTest, TimedWaitOnIdleSystem) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  for (int i = 0; i < 3; ++i) {
    uint64_t t0 = weft_time_now();
    EXPECT_EQ(weft_sem_timedwait(&s, weft_deadline_after(5 * kMs)), WEFT_ETIMEDOUT);
    EXPECT_EQ(weft_sleep_ns(5 * kMs), 0);
    ASSERT_EQ(weft_mutex_lock(&m), 0);
    EXPECT_EQ(weft_cond_timedwait(&c, &m, weft_deadline_after(5 * kMs)), WEFT_ETIMEDOUT);
    ASSERT_EQ(weft_mutex_unlock(&m), 0);
    EXPECT_LT(weft_time_now() - t0, 5000 * kMs) << "timed waits on an idle system hung";
    // a timed lock held by a blocked thread: every VP idle while it waits
    ASSERT_EQ(weft_rwlock_wrlock(&l), 0);
    std::atomic<int> rc{1};
    t0 = weft_time_now();
    std::pair<weft_rwlock_t *, std::atomic<int> *> targ(&l, &rc);
    weft_thread_t *t = Spawn(+[](void *a) -> void * {
      auto *p = static_cast<std::pair<weft_rwlock_t *, std::atomic<int> *> *>(a);
      p->second->store(weft_rwlock_timedrdlock(p->first, weft_deadline_after(5 * kMs)));
      return nullptr;
    }, &targ);
    Join(t);
    EXPECT_EQ(rc.load(), WEFT_ETIMEDOUT);
    EXPECT_LT(weft_time_now() - t0, 5000 * kMs);
    ASSERT_EQ(weft_rwlock_unlock(&l), 0);
  }
}

}  // namespace
