// tests/unit/cthreads_test.cc - the C-Threads interface (weft/cthreads.h): every call.
// No test calls weft_init: the interface starts weft on first use and stops it at
// exit (ctest runs each test in a process of its own).
#include <weft/cthreads.h>
#include <fcntl.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "weft_test.h"

using namespace weft_test;

namespace {

void *Echo(void *arg) { return arg; }

TEST(CThreads, ForkJoinSelfNamesDataAndAutoStart) {
  EXPECT_EQ(weft_is_running(), 0);
  cthread_t t = cthread_fork(Echo, P(42));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(weft_is_running(), 1);  // started by the first call
  cthread_set_name(t, "echo");
  EXPECT_STREQ(cthread_name(t), "echo");
  EXPECT_EQ(I(cthread_join(t)), 42);
  cthread_t me = cthread_self();
  ASSERT_NE(me, nullptr);
  EXPECT_EQ(cthread_self(), me);
  EXPECT_EQ(cthread_name(me), nullptr);
  cthread_set_name(me, "main");
  EXPECT_STREQ(cthread_name(me), "main");
  cthread_set_data(me, P(7));
  EXPECT_EQ(cthread_data(me), P(7));
  EXPECT_EQ(cthread_join(me), nullptr);       // the main thread is not joinable
  EXPECT_EQ(cthread_join(nullptr), nullptr);
  cthread_yield();
}

void *SelfCheck(void *arg) {
  auto *slot = static_cast<cthread_t *>(arg);
  *slot = cthread_self();
  cthread_yield();
  return P(cthread_self() == *slot ? 1 : 0);
}

TEST(CThreads, SelfInForkedThreadsIsTheirHandle) {
  cthread_t seen[8] = {};
  cthread_t ts[8];
  for (int i = 0; i < 8; i++) ts[i] = cthread_fork(SelfCheck, &seen[i]);
  for (int i = 0; i < 8; i++) {
    EXPECT_EQ(I(cthread_join(ts[i])), 1);
    EXPECT_EQ(seen[i], ts[i]);
  }
}

void *ExitWith(void *arg) {
  cthread_exit(arg);
  return nullptr;  // not reached
}

TEST(CThreads, ExitGivesTheStatusToTheJoiner) {
  cthread_t t = cthread_fork(ExitWith, P(9));
  EXPECT_EQ(I(cthread_join(t)), 9);
}

TEST(CThreads, ExitFromMainStopsWeftAndExitsWithTheStatus) {
  EXPECT_EXIT(
      {
        cthread_t t = cthread_fork(Echo, nullptr);
        cthread_detach(t);
        cthread_exit(P(3));
      },
      ::testing::ExitedWithCode(3), "");
}

std::atomic<int> g_finished{0};
void *SlowFinisher(void *) {
  for (int i = 0; i < 100; i++) cthread_yield();
  g_finished.fetch_add(1);
  fprintf(stderr, "finisher done\n");
  return nullptr;
}

// A program that started weft itself: cthread_exit from its main thread (the main
// C-Thread) still waits for the threads that can run, then exits (it exited under
// them: found by a prober).
TEST(CThreads, ExitFromMainWaitsWhenTheProgramStartedWeft) {
  EXPECT_EXIT(
      {
        if (!weft_is_running() && weft_init(nullptr) != 0) exit(2);
        cthread_detach(cthread_fork(SlowFinisher, nullptr));
        cthread_exit(P(5));
      },
      ::testing::ExitedWithCode(5), "finisher done");
}

// Returning from main (exit) waits for the threads that can still run, then stops weft.
TEST(CThreads, ExitWaitsForRunningThreads) {
  EXPECT_EXIT(
      {
        cthread_detach(cthread_fork(SlowFinisher, nullptr));
        exit(0);
      },
      ::testing::ExitedWithCode(0), "finisher done");
}

void *LateThread(void *) {
  for (int i = 0; i < 10; i++) cthread_yield();
  fprintf(stderr, "late thread ran\n");
  return nullptr;
}
void LateExitHandler() { cthread_detach(cthread_fork(LateThread, nullptr)); }

// An exit handler registered before weft started runs after the one that stops weft;
// a thread it forks starts weft again and still runs before the process ends (it
// was lost: found by a prober).
TEST(CThreads, ThreadForkedByALateExitHandlerRuns) {
  EXPECT_EXIT(
      {
        if (weft_is_running()) exit(3);  // the handler must be registered first
        atexit(LateExitHandler);
        cthread_detach(cthread_fork(SlowFinisher, nullptr));
        exit(0);
      },
      ::testing::ExitedWithCode(0), "late thread ran");
}

void *Bump(void *arg) {
  static_cast<std::atomic<int> *>(arg)->fetch_add(1);
  return nullptr;
}

TEST(CThreads, DetachedThreadsReclaimThemselves) {
  std::atomic<int> n{0};
  const int k = 50;
  for (int i = 0; i < k; i++) {
    cthread_t t = cthread_fork(Bump, &n);
    if (i % 2) cthread_yield();  // some finish before the detach, some after
    cthread_detach(t);
  }
  EXPECT_TRUE(YieldUntil([&] { return n.load() == k; }));
}

struct Counter {
  mutex_t m;
  long v = 0;
  long per = 0;
};

void *Add(void *arg) {
  auto *c = static_cast<Counter *>(arg);
  for (long i = 0; i < c->per; i++) {
    mutex_lock(c->m);
    c->v++;
    mutex_unlock(c->m);
    if (i % 16 == 0) cthread_yield();
  }
  return nullptr;
}

// Out of memory is NULL, never an abort: cthread_fork's record (or weft's control
// block), mutex_alloc and condition_alloc, driven by weft's failure injection. For
// k = 1, 2, ...: the k-th allocation of a fork fails; a NULL fork leaves nothing
// behind, a non-NULL one runs and joins.
TEST(CThreads, OutOfMemoryIsNull) {
  cthread_t first = cthread_fork(Echo, P(1));  // starts weft if no test did
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(I(cthread_join(first)), 1);
  weft_debug_fail_alloc(1);
  EXPECT_EQ(cthread_fork(Echo, P(2)), nullptr) << "the record's allocation failed";
  weft_debug_fail_alloc(1);
  EXPECT_EQ(mutex_alloc(), nullptr);
  weft_debug_fail_alloc(1);
  EXPECT_EQ(condition_alloc(), nullptr);
  weft_debug_fail_alloc(0);
  for (long k = 1;; ++k) {
    ASSERT_LT(k, 1000);
    long before = weft_debug_alloc_count();
    weft_debug_fail_alloc(k);
    cthread_t t = cthread_fork(Echo, P(k));
    long used = weft_debug_alloc_count() - before;
    weft_debug_fail_alloc(0);
    if (t != nullptr) {
      EXPECT_EQ(I(cthread_join(t)), k);
    }
    if (used < k) break;
  }
  mutex_t m = mutex_alloc();
  ASSERT_NE(m, nullptr);
  mutex_free(m);
  condition_t c = condition_alloc();
  ASSERT_NE(c, nullptr);
  condition_free(c);
}

TEST(CThreads, MutexAllocLockTryLockUnlockFree) {
  Counter c;
  c.m = mutex_alloc();
  ASSERT_NE(c.m, nullptr);
  mutex_set_name(c.m, "counter");
  EXPECT_STREQ(mutex_name(c.m), "counter");
  c.per = Scaled(5000, 100);
  cthread_t ts[4];
  for (auto &t : ts) t = cthread_fork(Add, &c);
  for (auto &t : ts) cthread_join(t);
  EXPECT_EQ(c.v, 4 * c.per);
  EXPECT_EQ(mutex_try_lock(c.m), 1);
  EXPECT_EQ(mutex_try_lock(c.m), 0);
  mutex_unlock(c.m);
  mutex_free(c.m);
  // a mutex in user memory
  static struct mutex sm = MUTEX_INITIALIZER;
  mutex_lock(&sm);
  mutex_unlock(&sm);
  struct mutex um;
  mutex_init(&um);
  EXPECT_EQ(mutex_try_lock(&um), 1);
  mutex_unlock(&um);
  mutex_free(nullptr);
}

TEST(CThreads, MutexWorksBeforeWeftStarts) {
  EXPECT_EQ(weft_is_running(), 0);
  mutex_t m = mutex_alloc();
  mutex_lock(m);
  EXPECT_EQ(mutex_try_lock(m), 0);
  mutex_unlock(m);
  mutex_free(m);
  EXPECT_EQ(weft_is_running(), 0);  // mutexes need no threads
}

struct Queue {
  mutex_t m;
  condition_t nonempty;
  long items = 0, taken = 0;   // m
  bool closed = false;         // m
};

void *Consumer(void *arg) {
  auto *q = static_cast<Queue *>(arg);
  long got = 0;
  mutex_lock(q->m);
  for (;;) {
    while (q->items == 0 && !q->closed) condition_wait(q->nonempty, q->m);
    if (q->items == 0) break;
    q->items--;
    q->taken++;
    got++;
  }
  mutex_unlock(q->m);
  return P(got);
}

TEST(CThreads, ConditionWaitSignalBroadcast) {
  Queue q;
  q.m = mutex_alloc();
  q.nonempty = condition_alloc();
  ASSERT_NE(q.nonempty, nullptr);
  condition_set_name(q.nonempty, "nonempty");
  EXPECT_STREQ(condition_name(q.nonempty), "nonempty");
  cthread_t ts[3];
  for (auto &t : ts) t = cthread_fork(Consumer, &q);
  const long n = Scaled(3000, 100);
  for (long i = 0; i < n; i++) {
    mutex_lock(q.m);
    q.items++;
    condition_signal(q.nonempty);
    mutex_unlock(q.m);
    if (i % 8 == 0) cthread_yield();
  }
  mutex_lock(q.m);
  q.closed = true;
  condition_broadcast(q.nonempty);  // every consumer must wake to see `closed`
  mutex_unlock(q.m);
  long sum = 0;
  for (auto &t : ts) sum += I(cthread_join(t));
  EXPECT_EQ(sum, n);
  EXPECT_EQ(q.taken, n);
  condition_free(q.nonempty);
  mutex_free(q.m);
  struct condition uc;
  condition_init(&uc);
  condition_signal(&uc);  // no waiter: nothing happens
  static struct condition sc = CONDITION_INITIALIZER;
  condition_broadcast(&sc);
  condition_free(nullptr);
}

TEST(CThreads, KernelLimitBeforeStartAndRestart) {
  EXPECT_EQ(cthread_kernel_limit(), 0);  // no limit set, weft not running
  cthread_set_kernel_limit(1);
  EXPECT_EQ(cthread_kernel_limit(), 1);
  cthread_t me = cthread_self();  // starts weft
  EXPECT_EQ(weft_vp_count(), 1);
  EXPECT_EQ(cthread_kernel_limit(), 1);
  cthread_set_kernel_limit(2);  // only the main thread is alive: weft restarts
  EXPECT_EQ(weft_vp_count(), 2);
  EXPECT_EQ(cthread_kernel_limit(), 2);
  EXPECT_EQ(cthread_self(), me);  // the main C-Thread keeps its handle
  cthread_t t = cthread_fork(Echo, P(5));
  EXPECT_EQ(I(cthread_join(t)), 5);
  cthread_set_kernel_limit(-1);  // ignored
  EXPECT_EQ(cthread_kernel_limit(), 2);
  // a finished C-Thread not joined yet keeps weft as it is (a restart reclaimed it,
  // and its join then waited for ever); once joined, the restart happens
  cthread_t f = cthread_fork(Echo, P(7));
  weft_debug_stats_t st;
  do {
    cthread_yield();
    weft_debug_stats(&st);
  } while (st.created != st.finished);
  cthread_set_kernel_limit(1);
  EXPECT_EQ(weft_vp_count(), 2) << "restarted under a finished, unjoined C-Thread";
  EXPECT_EQ(I(cthread_join(f)), 7);
  cthread_set_kernel_limit(1);
  EXPECT_EQ(weft_vp_count(), 1);
  cthread_set_kernel_limit(2);
  EXPECT_EQ(weft_vp_count(), 2);
}

// Plain OS threads fork and join C-Threads while the main C-Thread restarts weft
// with cthread_set_kernel_limit: a fork that passes its "weft is running" check just
// before a restart waits for it and goes on (it once aborted: "cthread_fork: weft is
// not initialized"), and a fork never lands between the restart's check that no
// forked C-Thread is left and its weft_shutdown (that shutdown reclaimed the new
// thread under its handle: the join returned NULL, or read freed memory). The OS
// threads pause now and then, so that restarts happen between their forks.
TEST(CThreads, ForkFromAnOsThreadRacingARestart) {
  cthread_join(cthread_fork(Echo, P(0)));  // weft started by the main C-Thread
  std::atomic<int> stop{0}, forks{0}, bad{0};
  std::vector<std::thread> os;
  for (int k = 0; k < 3; k++)
    os.emplace_back([&] {
      while (!stop.load()) {
        cthread_t t = cthread_fork(Echo, P(5));
        if (!t) continue;  // out of memory: allowed, not expected here
        if (I(cthread_join(t)) != 5) bad++;
        if (++forks % 4 == 0) usleep(200);
      }
    });
  long rounds = Scaled(3000, 300), restarts = 0;
  int last = cthread_kernel_limit();
  for (long i = 0; i < rounds && !bad.load(); i++) {
    cthread_set_kernel_limit(1 + static_cast<int>(i % 2));
    int k = cthread_kernel_limit();
    restarts += k != last;
    last = k;
    if (i % 8 == 0) usleep(50);
  }
  stop = 1;
  for (auto &t : os) t.join();
  EXPECT_GT(forks.load(), 0);
  EXPECT_EQ(bad.load(), 0) << "a join lost its C-Thread's status across " << restarts << " restarts";
}

struct PipeRun {
  int fd[2];
  std::atomic<int> ready{0};
  std::atomic<int> wrote{0};
  char got = 0;
  int vp_wired = 0;
};

void *WiredReader(void *arg) {
  auto *r = static_cast<PipeRun *>(arg);
  cthread_t me = cthread_self();
  cthread_wire();
  r->vp_wired = weft_vp_self();
  int same = cthread_self() == me;
  r->ready.store(1);
  ssize_t n = read(r->fd[0], &r->got, 1);
  cthread_unwire();
  return P(n == 1 && same);
}

void *PipeWriter(void *arg) {
  auto *r = static_cast<PipeRun *>(arg);
  while (!r->ready.load()) cthread_yield();
  char c = 'c';
  r->wrote.store(1);
  return P(write(r->fd[1], &c, 1));
}

// One kernel thread for C-Threads; the wired reader's read() must not stall it.
TEST(CThreads, WiredReadWithOneKernelThread) {
  cthread_set_kernel_limit(1);
  PipeRun r;
  ASSERT_EQ(pipe(r.fd), 0);
  std::atomic<int> done{0}, fired{0};
  std::thread watchdog([&] {
    for (int i = 0; i < 3000 && !done.load(); i++) usleep(10000);
    if (!done.load()) {
      fired.store(1);
      char c = 'w';
      ssize_t n = write(r.fd[1], &c, 1);
      (void)n;
    }
  });
  cthread_t a = cthread_fork(WiredReader, &r), b = cthread_fork(PipeWriter, &r);
  EXPECT_EQ(I(cthread_join(a)), 1);
  EXPECT_EQ(I(cthread_join(b)), 1);
  done.store(1);
  watchdog.join();
  EXPECT_EQ(fired.load(), 0) << "the writer never ran";
  EXPECT_EQ(weft_vp_count(), 1);
  EXPECT_EQ(r.got, 'c');
  EXPECT_EQ(r.vp_wired, -1);
  cthread_unwire();  // not wired: nothing to do
  close(r.fd[0]);
  close(r.fd[1]);
}

void *WiredReturns(void *) {
  cthread_wire();
  return P(1);  // the C-Threads layer unwires it on the way out
}

TEST(CThreads, WiredThreadMayReturn) {
  cthread_t t = cthread_fork(WiredReturns, nullptr);
  EXPECT_EQ(I(cthread_join(t)), 1);
  EXPECT_EQ(weft_wired_count(), 0);
}

std::atomic<int> g_ops[5];
void CountFilter(cthread_t, cthread_filter_op_t op, void *arg) {
  g_ops[op].fetch_add(1);
  static_cast<std::atomic<int> *>(arg)->fetch_add(1);
}

struct Gate {
  mutex_t m;
  condition_t c;
  bool open = false;
};

void *WaitAtGate(void *arg) {
  auto *g = static_cast<Gate *>(arg);
  mutex_lock(g->m);
  while (!g->open) condition_wait(g->c, g->m);
  mutex_unlock(g->m);
  return nullptr;
}

TEST(CThreads, FiltersSeeEachContinuationPoint) {
  cthread_set_kernel_limit(1);  // the forked thread runs only when main blocks
  Gate g;
  g.m = mutex_alloc();
  g.c = condition_alloc();
  std::atomic<int> calls{0};
  cthread_t t = cthread_fork(WaitAtGate, &g);
  EXPECT_EQ(cthread_filter(t), nullptr);  // the default filter
  cthread_set_filter(t, CountFilter, &calls);
  EXPECT_EQ(cthread_filter(t), CountFilter);
  // let it run and block on the condition
  ASSERT_TRUE(YieldUntil([&] { return g_ops[CTHREAD_FILTER_INTERNAL_BUILD].load() >= 1; }));
  mutex_lock(g.m);
  g.open = true;
  condition_signal(g.c);
  mutex_unlock(g.m);
  cthread_join(t);
  EXPECT_EQ(g_ops[CTHREAD_FILTER_PREPARE].load(), 1);
  EXPECT_GE(g_ops[CTHREAD_FILTER_USER_BUILD].load(), 2);   // mutex_lock, condition_wait
  EXPECT_EQ(g_ops[CTHREAD_FILTER_USER_BUILD].load(), g_ops[CTHREAD_FILTER_USER_INVOKE].load());
  EXPECT_GE(g_ops[CTHREAD_FILTER_INTERNAL_BUILD].load(), 1);
  EXPECT_GE(g_ops[CTHREAD_FILTER_INTERNAL_INVOKE].load(), 1);
  int before = calls.load();
  EXPECT_GT(before, 0);
  // the main thread's own filter, then back to the default
  cthread_t me = cthread_self();
  cthread_set_filter(me, CountFilter, &calls);
  mutex_lock(g.m);
  mutex_unlock(g.m);
  EXPECT_EQ(calls.load(), before + 2);  // USER_BUILD and USER_INVOKE of mutex_lock
  cthread_set_filter(me, nullptr, nullptr);
  EXPECT_EQ(cthread_filter(me), nullptr);
  mutex_lock(g.m);
  mutex_unlock(g.m);
  EXPECT_EQ(calls.load(), before + 2);
  condition_free(g.c);
  mutex_free(g.m);
}

void NopFilter(cthread_t, cthread_filter_op_t, void *) {}

void *AdoptedWithFilter(void *arg) {
  cthread_t me = cthread_self();  // a record made on first use
  cthread_set_filter(me, NopFilter, nullptr);
  cthread_set_name(me, "adopted");
  *static_cast<int *>(arg) = cthread_filter(me) == NopFilter;
  return nullptr;  // its record (filter listed) is dropped when it ends
}

// A program that starts weft itself may use C-Threads; weft is left to it. A thread made
// with weft_create gets a C-Thread record on first use, freed (and unlisted) at its end.
TEST(CThreads, WeftStartedByTheProgram) {
  ASSERT_EQ(weft_test::InitWithVps(2), 0);
  cthread_t t = cthread_fork(Echo, P(8));
  EXPECT_EQ(I(cthread_join(t)), 8);
  int ok = 0;
  weft_thread_t *w = weft_test::Spawn(AdoptedWithFilter, &ok);
  EXPECT_EQ(weft_join(w, nullptr), 0);
  EXPECT_EQ(ok, 1);
  cthread_t fresh = cthread_fork(Echo, P(1));  // filters stay installed: runs with them
  EXPECT_EQ(I(cthread_join(fresh)), 1);
  cthread_t me = cthread_self();
  EXPECT_NE(me, nullptr);
  EXPECT_EQ(cthread_join(me), nullptr);  // not forked: not joinable
  EXPECT_EQ(weft_shutdown(), 0);         // the program's own shutdown
}

// A second cthread_join of a joined C-Thread (undefined, weft/cthreads.h) is caught by a
// checked build with a message. The layer had freed the thread's record, and the
// second join read freed memory (ASan: heap-use-after-free; unchecked: SIGSEGV).
TEST(CThreadsDeathTest, DoubleJoinIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse: cthread_join of a C-Thread that was already joined",
    cthread_t t = cthread_fork(+[](void *a) -> void * { return a; }, nullptr);
    cthread_join(t);
    cthread_join(t));
}

// The same for a join of a detached C-Thread that has finished and reclaimed itself.
TEST(CThreadsDeathTest, JoinOfAReclaimedDetachedThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse: cthread_join of a C-Thread that was already joined",
    cthread_t t = cthread_fork(+[](void *a) -> void * { return a; }, nullptr);
    cthread_detach(t);
    for (int i = 0; i < 100; i++) cthread_yield();  // it runs, finishes, is reclaimed
    cthread_join(t));
}

}  // namespace
