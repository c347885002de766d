// tests/unit/runtime_test.cc - weft_init / weft_shutdown, configuration, virtual processors.
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "weft_test.h"

#include <unistd.h>

#include <weft/io.h>
#include <weft/schedlib.h>
#include <weft/vp.h>

using namespace weft_test;

namespace {

long OnlineCpus() { return sysconf(_SC_NPROCESSORS_ONLN); }

// A handle-shaped object for calls that must fail before touching it.
alignas(64) unsigned char g_fake_object[4096];
weft_thread_t *FakeThread() { return reinterpret_cast<weft_thread_t *>(g_fake_object); }
weft_bundle_t *FakeBundle() { return reinterpret_cast<weft_bundle_t *>(g_fake_object); }

void *ReturnArg(void *arg) { return arg; }

// Every call documented to fail with WEFT_ENOTINIT does so, and the queries report
// "not running".
void ExpectNotInitialized() {
  EXPECT_EQ(weft_is_running(), 0);
  weft_thread_t *t = FakeThread();
  EXPECT_EQ(weft_create(&t, nullptr, ReturnArg, nullptr), WEFT_ENOTINIT);
  EXPECT_EQ(t, FakeThread()) << "out-parameter changed on error";
  weft_attr_t attr = DetachedAttr();
  EXPECT_EQ(weft_create(nullptr, &attr, ReturnArg, nullptr), WEFT_ENOTINIT);
  void *result = P(7);
  EXPECT_EQ(weft_join(FakeThread(), &result), WEFT_ENOTINIT);
  EXPECT_EQ(result, P(7));
  EXPECT_EQ(weft_detach(FakeThread()), WEFT_ENOTINIT);
  weft_sched_ops_t ops = weft_sched_default;
  weft_bundle_t *b = FakeBundle();
  EXPECT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), WEFT_ENOTINIT);
  EXPECT_EQ(b, FakeBundle());
  EXPECT_EQ(weft_bundle_destroy(FakeBundle()), WEFT_ENOTINIT);
  EXPECT_EQ(weft_shutdown(), WEFT_ENOTINIT);
  EXPECT_EQ(weft_vp_count(), 0);
  EXPECT_EQ(weft_vp_self(), -1);
  EXPECT_EQ(weft_self(), nullptr);
  EXPECT_EQ(weft_bundle_root(), nullptr);
  EXPECT_EQ(weft_sched_vp_self(), nullptr);
  EXPECT_EQ(weft_sched_vp(0), nullptr);
  weft_yield();  // a plain OS thread: just sched_yield()
}

class RuntimeTest : public WeftTest {};
class RuntimeVpTest : public VpTest {};
WEFT_INSTANTIATE_VPS(RuntimeVpTest);

// weft_config_init() fills every field with its documented default.
TEST(RuntimeConfig, DefaultsAreDocumented) {
  weft_config_t cfg;
  std::memset(&cfg, 0xA5, sizeof cfg);
  weft_config_init(&cfg);
  EXPECT_EQ(cfg.nvps, OnlineCpus());
  EXPECT_EQ(cfg.pin, 0);
  EXPECT_EQ(cfg.stack_size, WEFT_DEFAULT_STACK_SIZE);
  EXPECT_EQ(cfg.freelist_local, 32);
  EXPECT_EQ(cfg.freelist_global, 1024);
  EXPECT_EQ(cfg.tcb_local, 1024);
  EXPECT_EQ(cfg.spin_us, 50);
  EXPECT_EQ(cfg.max_threads, 0);  // derived at weft_init: weft_max_threads()
  EXPECT_EQ(cfg.deadlock_report, WEFT_DEADLOCK_REPORT);
}

// A NULL config means all defaults: one VP per online CPU.
// WEFT_DEADLOCK and WEFT_MEMBARRIER: "0" or "off" turn their feature off; a value weft
// does not know is reported on stderr and ignored (it was ignored unseen, so
// WEFT_DEADLOCK=off left the report on). A deadlock with the report off just sleeps:
// the alarm ends it, where the report would have aborted.
static void DeadlockOfOneThread(unsigned alarm_s) {
  alarm(alarm_s);
  if (weft_init(nullptr) != 0) std::exit(3);
  weft_sem_t s = WEFT_SEM_INIT(0);
  weft_sem_wait(&s);  // nothing will signal it
  std::exit(4);
}
static void BadValuesSaySo() {
  if (weft_init(nullptr) != 0) std::exit(3);
  std::exit(weft_shutdown() == 0 ? 7 : 5);
}
TEST(RuntimeEnvDeathTest, DeadlockAndMembarrierSwitches) {
  SetDeathTestStyle();
  setenv("WEFT_DEADLOCK", "off", 1);
  EXPECT_EXIT(DeadlockOfOneThread(2), ::testing::KilledBySignal(SIGALRM), "");
#if !defined(WEFT_TEST_TSAN) && !defined(WEFT_TEST_EMULATED)
  // (TSan's kernel thread, there before weft_init, keeps the report off, and so does a
  // user-mode emulator: design.md; the alarm only bounds a run on a loaded machine)
  setenv("WEFT_DEADLOCK", "on", 1);
  EXPECT_DEATH(DeadlockOfOneThread(30), "all threads are asleep - deadlock");
#endif
  setenv("WEFT_DEADLOCK", "bogus", 1);
  setenv("WEFT_MEMBARRIER", "nope", 1);
  EXPECT_EXIT(BadValuesSaySo(), ::testing::ExitedWithCode(7),
              "WEFT_DEADLOCK=bogus is not 0/off or 1/on: ignored");
  EXPECT_EXIT(BadValuesSaySo(), ::testing::ExitedWithCode(7),
              "WEFT_MEMBARRIER=nope is not 0/off or 1/on: ignored");
  unsetenv("WEFT_DEADLOCK");
  unsetenv("WEFT_MEMBARRIER");
}

TEST_F(RuntimeTest, NullConfigUsesDefaults) {
  ASSERT_EQ(weft_init(nullptr), 0);
  EXPECT_EQ(weft_is_running(), 1);
  EXPECT_EQ(weft_vp_count(), OnlineCpus());
}

// Zero in every field means "default" too.
TEST_F(RuntimeTest, ZeroedConfigUsesDefaults) {
  weft_config_t cfg;
  std::memset(&cfg, 0, sizeof cfg);
  ASSERT_EQ(weft_init(&cfg), 0);
  EXPECT_EQ(weft_vp_count(), OnlineCpus());
  EXPECT_EQ(Join(Spawn(ReturnArg, P(5))), P(5));
}

// Calls before weft_init() fail with WEFT_ENOTINIT (or report "not running").
TEST_F(RuntimeTest, CallsBeforeInitAreNotInit) { ExpectNotInitialized(); }

// Calls after weft_shutdown() fail with WEFT_ENOTINIT (or report "not running").
TEST_F(RuntimeTest, CallsAfterShutdownAreNotInit) {
  StartWeft(2);
  EXPECT_EQ(Join(Spawn(ReturnArg, P(1))), P(1));
  ASSERT_EQ(weft_shutdown(), 0);
  ExpectNotInitialized();
}

// A second weft_init() while running fails with WEFT_EALREADY, from the main weft
// thread, a created weft thread and a plain OS thread alike; the runtime is unharmed.
TEST_P(RuntimeVpTest, InitTwiceIsAlready) {
  EXPECT_EQ(weft_init(nullptr), WEFT_EALREADY);
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  EXPECT_EQ(weft_init(&cfg), WEFT_EALREADY);
  EXPECT_EQ(I(RunInThread([] { return P(weft_init(nullptr)); })), WEFT_EALREADY);
  int from_plain = 0;
  std::thread plain([&] { from_plain = weft_init(nullptr); });
  plain.join();
  EXPECT_EQ(from_plain, WEFT_EALREADY);
  EXPECT_EQ(weft_vp_count(), nvps());
  EXPECT_EQ(Join(Spawn(ReturnArg, P(3))), P(3));
}

// Each invalid field makes weft_init() fail with WEFT_EINVAL, leaving nothing
// allocated; a valid weft_init() works afterwards.
TEST_F(RuntimeTest, InvalidConfigIsRejected) {
  struct Case {
    const char *what;
    void (*mutate)(weft_config_t *);
  };
  const Case cases[] = {
      {"nvps = -1", [](weft_config_t *c) { c->nvps = -1; }},
      {"nvps = INT_MIN", [](weft_config_t *c) { c->nvps = INT_MIN; }},
      {"nvps = WEFT_MAX_VPS + 1", [](weft_config_t *c) { c->nvps = WEFT_MAX_VPS + 1; }},
      {"nvps = INT_MAX", [](weft_config_t *c) { c->nvps = INT_MAX; }},
      {"stack_size = 1", [](weft_config_t *c) { c->stack_size = 1; }},
      {"stack_size = 4096", [](weft_config_t *c) { c->stack_size = 4096; }},
      {"stack_size = MIN - 1", [](weft_config_t *c) { c->stack_size = WEFT_MIN_STACK_SIZE - 1; }},
      {"stack_size = SIZE_MAX", [](weft_config_t *c) { c->stack_size = SIZE_MAX; }},
      {"stack_size = SIZE_MAX - 4095", [](weft_config_t *c) { c->stack_size = SIZE_MAX - 4095; }},
      {"freelist_local = -1", [](weft_config_t *c) { c->freelist_local = -1; }},
      {"freelist_global = -1", [](weft_config_t *c) { c->freelist_global = -1; }},
      {"tcb_local = -1", [](weft_config_t *c) { c->tcb_local = -1; }},
      {"tcb_local = 2^24 + 1", [](weft_config_t *c) { c->tcb_local = (1 << 24) + 1; }},
      {"spin_us = -1", [](weft_config_t *c) { c->spin_us = -1; }},
      {"max_threads = -1", [](weft_config_t *c) { c->max_threads = -1; }},
      {"deadlock_report = 2", [](weft_config_t *c) { c->deadlock_report = 2; }},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    weft_config_t cfg;
    weft_config_init(&cfg);
    c.mutate(&cfg);
    int rc = weft_init(&cfg);
    EXPECT_EQ(rc, WEFT_EINVAL) << weft_err_name(rc);
    if (rc == 0) {
      ASSERT_EQ(weft_shutdown(), 0);
    }
    EXPECT_EQ(weft_is_running(), 0);
    EXPECT_EQ(weft_debug_live_blocks(), 0);
  }
  StartWeft(2);
  EXPECT_EQ(Join(Spawn(ReturnArg, P(9))), P(9));
}

// Boundary values are accepted: the minimum stack size, a size that is not a page
// multiple, tiny free lists and no spinning.
TEST_F(RuntimeTest, BoundaryConfigIsAccepted) {
  const size_t sizes[] = {WEFT_MIN_STACK_SIZE, WEFT_MIN_STACK_SIZE + 1, 100 * 1000};
  for (size_t size : sizes) {
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = 2;
    cfg.stack_size = size;
    cfg.freelist_local = 1;
    cfg.freelist_global = 1;
    cfg.spin_us = 0;
    ASSERT_EQ(weft_init(&cfg), 0) << "stack_size " << size;
    std::vector<weft_thread_t *> ts;
    for (intptr_t i = 0; i < 200; ++i) ts.push_back(Spawn(ReturnArg, P(i)));
    for (intptr_t i = 0; i < 200; ++i) EXPECT_EQ(Join(ts[i]), P(i)) << "stack_size " << size;
    ASSERT_EQ(weft_shutdown(), 0) << "stack_size " << size;
    EXPECT_EQ(weft_debug_live_blocks(), 0) << "stack_size " << size;
  }
}

// WEFT_MAX_VPS virtual processors can be started, used and stopped.
TEST_F(RuntimeTest, MaxVps) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = WEFT_MAX_VPS;
  cfg.spin_us = 1;
  ASSERT_EQ(weft_init(&cfg), 0);
  EXPECT_EQ(weft_vp_count(), WEFT_MAX_VPS);
  EXPECT_NE(weft_sched_vp(WEFT_MAX_VPS - 1), nullptr);
  EXPECT_EQ(weft_sched_vp(WEFT_MAX_VPS), nullptr);
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 2 * WEFT_MAX_VPS; ++i) {
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.vproc = WEFT_VPROC(i);
    ts.push_back(Spawn(+[](void *) { return P(weft_vp_self()); }, nullptr, &attr));
  }
  for (weft_thread_t *t : ts) {
    intptr_t vp = I(Join(t));
    EXPECT_GE(vp, 0);
    EXPECT_LT(vp, WEFT_MAX_VPS);
  }
}

// weft_vp_count() is the configured count; weft_vp_self() is 0 for the caller of
// weft_init() right after it, in range in every weft thread, -1 on a plain thread.
TEST_P(RuntimeVpTest, VpCountAndSelf) {
  EXPECT_EQ(weft_vp_self(), 0);
  EXPECT_EQ(weft_vp_count(), nvps());
  EXPECT_EQ(weft_is_running(), 1);
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 50; ++i) {
    ts.push_back(Spawn(+[](void *) {
      weft_yield();
      return P(weft_vp_self());
    }));
  }
  for (weft_thread_t *t : ts) {
    intptr_t vp = I(Join(t));
    EXPECT_GE(vp, 0);
    EXPECT_LT(vp, nvps());
  }
  int plain_vp = 0;
  std::thread plain([&] { plain_vp = weft_vp_self(); });
  plain.join();
  EXPECT_EQ(plain_vp, -1);
}

// weft_shutdown() from a weft thread other than the main one fails with WEFT_EPERM.
TEST_P(RuntimeVpTest, ShutdownFromCreatedThreadIsEperm) {
  EXPECT_EQ(I(RunInThread([] { return P(weft_shutdown()); })), WEFT_EPERM);
  EXPECT_EQ(weft_is_running(), 1);
  EXPECT_EQ(Join(Spawn(ReturnArg, P(4))), P(4));
}

// weft_shutdown() from a plain OS thread fails with WEFT_EPERM.
TEST_P(RuntimeVpTest, ShutdownFromPlainThreadIsEperm) {
  int rc = 0;
  std::thread plain([&] { rc = weft_shutdown(); });
  plain.join();
  EXPECT_EQ(rc, WEFT_EPERM);
  EXPECT_EQ(weft_is_running(), 1);
}

std::atomic<weft_thread_t *> g_blocked{nullptr};

// Blocks forever (until unblocked); the release callback publishes the handle.
void *BlockForever(void *) {
  weft_thread_block(+[](void *self) { g_blocked.store(static_cast<weft_thread_t *>(self)); },
                    weft_self());
  return P(77);
}

// With a thread blocked for good, weft_shutdown() returns WEFT_EBUSY and the runtime
// keeps working; once the thread is unblocked and joined, shutdown succeeds.
TEST_P(RuntimeVpTest, ShutdownWithBlockedThreadIsBusy) {
  g_blocked = nullptr;
  weft_thread_t *t = Spawn(BlockForever);
  ASSERT_TRUE(YieldUntil([] { return g_blocked.load() != nullptr; }));
  EXPECT_EQ(g_blocked.load(), t);
  int rc = weft_shutdown();
  EXPECT_EQ(rc, WEFT_EBUSY) << weft_err_name(rc);
  ASSERT_EQ(weft_is_running(), 1);
  EXPECT_EQ(weft_vp_count(), nvps());
  EXPECT_EQ(Join(Spawn(ReturnArg, P(6))), P(6));  // still working
  rc = weft_shutdown();  // and still busy
  EXPECT_EQ(rc, WEFT_EBUSY) << weft_err_name(rc);
  weft_thread_unblock(g_blocked.load());
  EXPECT_EQ(Join(t), P(77));
  EXPECT_EQ(weft_shutdown(), 0);
}

std::atomic<int> g_detached_done{0};

void *DetachedWorker(void *arg) {
  for (int i = 0; i < 20; ++i) weft_yield();
  if (I(arg) > 0) {  // spawn a detached child one level down
    weft_attr_t attr = DetachedAttr();
    EXPECT_EQ(weft_create(nullptr, &attr, DetachedWorker, P(I(arg) - 1)), 0);
  }
  g_detached_done.fetch_add(1);
  return nullptr;
}

// weft_shutdown() waits for runnable detached threads (and the detached threads
// they create) to finish before it returns 0.
TEST_P(RuntimeVpTest, ShutdownWaitsForDetachedThreads) {
  g_detached_done = 0;
  weft_attr_t attr = DetachedAttr();
  const int kThreads = 100;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(weft_create(nullptr, &attr, DetachedWorker, P(i % 3)), 0);
  }
  // i % 3 == 0: 1 thread; 1: 2 threads; 2: 3 threads.
  const int expected = 34 * 1 + 33 * 2 + 33 * 3;
  const long tid = Tid();  // no switch yet: still the OS thread that called weft_init
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(g_detached_done.load(), expected);
  EXPECT_EQ(Tid(), tid) << "weft_shutdown returned on another kernel thread";
}

// A thread parked in weft_blocking() will be woken by its job: weft_shutdown waits
// for it (it once returned WEFT_EBUSY while the job ran).
std::atomic<int> g_blocking_done{0};
TEST_P(RuntimeVpTest, ShutdownWaitsForAThreadInWeftBlocking) {
  g_blocking_done = 0;
  weft_attr_t attr = DetachedAttr();
  ASSERT_EQ(weft_create(nullptr, &attr, +[](void *) -> void * {
    weft_blocking(+[](void *) -> void * {
      usleep(50000);
      return nullptr;
    }, nullptr, nullptr);
    g_blocking_done++;
    return nullptr;
  }, nullptr), 0);
  weft_sleep_ns(5000000);  // the job runs: its caller is parked
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(g_blocking_done.load(), 1);
}

// weft_shutdown calls the do-when-idle functions while it waits, with one VP too: a
// thread that such a function wakes is run and waited for (with one VP the function
// was never called, and shutdown returned WEFT_EBUSY).
weft_sem_t g_idle_sem;
std::atomic<int> g_idle_armed{0}, g_idle_woke{0};
void WakeOnceWhenIdle(void *) {
  int one = 1;
  if (g_idle_armed.compare_exchange_strong(one, 2)) weft_sem_signal(&g_idle_sem);
}
TEST_P(RuntimeVpTest, ShutdownCallsDoWhenIdleFunctions) {
  g_idle_armed = 0;
  g_idle_woke = 0;
  weft_sem_init(&g_idle_sem, 0);
  ASSERT_EQ(weft_idle_func_add(WakeOnceWhenIdle, nullptr), 0);
  weft_attr_t attr = DetachedAttr();
  ASSERT_EQ(weft_create(nullptr, &attr, +[](void *) -> void * {
    weft_sem_wait(&g_idle_sem);
    g_idle_woke++;
    return nullptr;
  }, nullptr), 0);
  weft_sleep_ns(2000000);  // the thread waits on the semaphore
  g_idle_armed = 1;
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(g_idle_woke.load(), 1);
  EXPECT_EQ(g_idle_armed.load(), 2);
}

// weft_shutdown's wait for threads that can still run (here: ones whose timed waits
// end while it waits) is a weft-level wait: its VP is not taken for stalled. The wait
// slept in the kernel; the monitor then saw a ready thread queued behind a sleeping
// kernel thread, started a spare for it, and the EBUSY answer (another thread waits
// for ever) came only once the spare retired, up to seconds later under load.
weft_sem_t g_never;
TEST_P(RuntimeVpTest, ShutdownWaitIsNoStall) {
  weft_sem_init(&g_never, 0);
  weft_attr_t attr = DetachedAttr();
  ASSERT_EQ(weft_create(nullptr, &attr, +[](void *) -> void * {
    weft_sem_wait(&g_never);  // never signalled before the EBUSY answers
    return nullptr;
  }, nullptr), 0);
  // Up to three tries, each an EBUSY answer: on a machine loaded past its cores a
  // VP's kernel thread can sleep briefly in the kernel with a thread queued (on the
  // mmap lock while mapping a stack, say), and the monitor then counts a stall that
  // is not the shutdown's. The shutdown's own kernel sleep stalled at every try.
  int clean = 0;
  for (int attempt = 0; attempt < 3 && !clean; attempt++) {
    for (int i = 0; i < 8; i++)
      ASSERT_EQ(weft_create(nullptr, &attr, +[](void *a) -> void * {
        // timed waits that end one after another while shutdown waits
        (void)weft_sem_timedwait(&g_never, weft_deadline_after(5000000ull * (1 + I(a))));
        return nullptr;
      }, P(i)), 0);
    weft_sleep_ns(1000000);
    weft_monitor_info_t before, after;
    ASSERT_EQ(weft_monitor_info(&before), 0);
    ASSERT_EQ(weft_shutdown(), WEFT_EBUSY);
    ASSERT_EQ(weft_monitor_info(&after), 0);
    clean = after.stalls == before.stalls;
  }
  EXPECT_TRUE(clean) << "the shutdown's wait was taken for a stall at every try";
  ASSERT_EQ(weft_sem_signal(&g_never), 0);
  ASSERT_EQ(weft_shutdown(), 0);
}

// With a bundle other than the root in existence (here an empty FIFO one) and 2+ VPs,
// weft_shutdown with a thread blocked for good must still answer EBUSY. Each of its
// waiting sleeps brought its VP back from the idle loop with the main thread, and
// leaving the idle loop woke another VP whenever a bundle existed: that VP was still
// spinning at every check for "every other VP asleep", and the answer never came.
TEST_P(RuntimeVpTest, ShutdownIsBusyWithABundleAround) {
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, WEFT_SCHED_FIFO), 0);
  weft_sem_init(&g_never, 0);
  weft_thread_t *t = Spawn(+[](void *) -> void * {
    weft_sem_wait(&g_never);
    return nullptr;
  });
  weft_sleep_ns(1000000);
  alarm(60);  // a hang fails the test
  EXPECT_EQ(weft_shutdown(), WEFT_EBUSY);
  alarm(0);
  ASSERT_EQ(weft_sem_signal(&g_never), 0);
  EXPECT_EQ(Join(t), nullptr);
  EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
}

// Joinable threads nobody joins (finished or still runnable) are reclaimed by
// weft_shutdown(); TearDown checks that nothing leaked.
TEST_P(RuntimeVpTest, ShutdownReclaimsUnjoinedThreads) {
  for (int i = 0; i < 100; ++i) {
    weft_thread_t *t = Spawn(+[](void *a) {
      for (intptr_t k = 0; k < I(a) % 5; ++k) weft_yield();
      return a;
    }, P(i));
    ASSERT_NE(t, nullptr);
  }
  for (int i = 0; i < 10; ++i) weft_yield();
  EXPECT_EQ(weft_shutdown(), 0);
}

// After weft_shutdown() the caller is back on the OS thread that called weft_init(),
// even if the main weft thread moved between VPs meanwhile.
TEST_P(RuntimeVpTest, ShutdownReturnsCallerToItsOsThread) {
  const long tid = Tid();
  for (int round = 0; round < 20; ++round) {
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < 4 * nvps(); ++i) ts.push_back(Spawn(+[](void *) {
      for (int k = 0; k < 10; ++k) weft_yield();
      return P(0);
    }));
    for (weft_thread_t *t : ts) Join(t);
    weft_yield();
  }
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(Tid(), tid);
}

// weft_shutdown() returns on the caller's own OS thread also when it had to wait
// (running other threads) for runnable threads to finish, across repeated runs.
TEST_F(RuntimeTest, ShutdownAfterWaitingReturnsToCallerOsThread) {
  const long tid = Tid();
  for (int round = 0; round < 40; ++round) {
    ASSERT_EQ(InitWithVps(2 + round % 3), 0) << "round " << round;
    weft_attr_t attr = DetachedAttr();
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(weft_create(nullptr, &attr, +[](void *) {
        for (int k = 0; k < 50; ++k) weft_yield();
        return P(0);
      }, nullptr), 0);
    }
    ASSERT_EQ(weft_shutdown(), 0) << "round " << round;
    ASSERT_EQ(Tid(), tid) << "round " << round << ": weft_shutdown returned on another kernel thread";
    ASSERT_EQ(weft_debug_live_blocks(), 0) << "round " << round;
  }
}

// weft_init()/weft_shutdown() can be repeated; each run's main weft thread gets a
// fresh id, and each shutdown leaves nothing allocated.
TEST_F(RuntimeTest, InitShutdownRepeated) {
  std::set<uint64_t> main_ids;
  for (int round = 0; round < 6; ++round) {
    ASSERT_EQ(InitWithVps(1 + round % 3), 0) << "round " << round;
    EXPECT_EQ(weft_vp_count(), 1 + round % 3);
    weft_thread_t *self = weft_self();
    ASSERT_NE(self, nullptr);
    uint64_t id = weft_thread_id(self);
    EXPECT_NE(id, 0u);
    EXPECT_TRUE(main_ids.insert(id).second) << "main thread id reused: " << id;
    std::vector<weft_thread_t *> ts;
    for (intptr_t i = 0; i < 20; ++i) ts.push_back(Spawn(ReturnArg, P(i)));
    for (intptr_t i = 0; i < 20; ++i) EXPECT_EQ(Join(ts[i]), P(i));
    ASSERT_EQ(weft_shutdown(), 0) << "round " << round;
    EXPECT_EQ(weft_is_running(), 0);
    EXPECT_EQ(weft_debug_live_blocks(), 0) << "round " << round;
  }
}

// weft_init() may be called from any plain OS thread, not just the process's first.
TEST_F(RuntimeTest, InitFromPlainOsThread) {
  int init_rc = -100, shutdown_rc = -100;
  void *result = nullptr;
  std::thread plain([&] {
    init_rc = InitWithVps(2);
    if (init_rc != 0) return;
    weft_thread_t *t = nullptr;
    if (weft_create(&t, nullptr, ReturnArg, P(11)) == 0) weft_join(t, &result);
    shutdown_rc = weft_shutdown();
  });
  plain.join();
  EXPECT_EQ(init_rc, 0);
  EXPECT_EQ(result, P(11));
  EXPECT_EQ(shutdown_rc, 0);
  EXPECT_EQ(weft_is_running(), 0);
}

// With pin set, VP i runs on CPU (i mod online CPUs).
TEST_P(RuntimeVpTest, PinnedVpsRunOnTheirCpu) {
  ASSERT_EQ(weft_shutdown(), 0);  // restart with pinning
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps();
  cfg.pin = 1;
  ASSERT_EQ(weft_init(&cfg), 0);
  struct Sample {
    int vp, cpu;
  };
  std::vector<weft_thread_t *> ts;
  std::vector<Sample> samples(64);
  for (size_t i = 0; i < samples.size(); ++i) {
    ts.push_back(Spawn(+[](void *arg) {
      auto *s = static_cast<Sample *>(arg);
      weft_yield();
      s->vp = weft_vp_self();  // no switch can happen between these two calls
      s->cpu = sched_getcpu();
      return P(0);
    }, &samples[i]));
  }
  for (weft_thread_t *t : ts) Join(t);
  for (const Sample &s : samples) {
    ASSERT_GE(s.vp, 0);
    EXPECT_EQ(s.cpu, s.vp % OnlineCpus()) << "VP " << s.vp;
  }
}

}  // namespace
