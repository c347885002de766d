// Depth-first unfolding of recursive fine-grained parallelism (docs/schedulers.md,
// "Run order and stealing"): a VP runs the threads it created most recently first,
// idle VPs steal the oldest, yields and wake-ups stay fair; work-first creation
// (weft_attr_t.work_first, WEFT_SCHED_WORK_FIRST).
//
// Every test runs under a watchdog: a hang (a breadth-first unfolding that runs out
// of stacks, a starved thread) ends the process with a message instead of blocking
// the suite.
#include "weft_test.h"

#include <fenv.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include <weft/hook.h>
#include <weft/schedlib.h>

using namespace weft_test;

namespace {

// ---- the watchdog ----------------------------------------------------------------

extern "C" void WatchdogFired(int) {
  static const char msg[] = "unfold_test: watchdog: the test did not finish in time (a hang)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(3);
}

// Arms SIGALRM for the test's lifetime: generous against the test's normal run
// (seconds), and scaled up where the scale says the build is slow.
class Watchdog {
 public:
  Watchdog() {
    signal(SIGALRM, WatchdogFired);
    double slow = Scale() < 1.0 ? 4.0 : 1.0;
    alarm(static_cast<unsigned>(120 * slow));
  }
  ~Watchdog() { alarm(0); }
};

// ---- fib, one thread per call ------------------------------------------------------

// How to create the child: help-first (the default), work-first by attribute, or in
// a WEFT_SCHED_WORK_FIRST bundle.
enum Mode { kHelpFirst, kWorkFirstAttr, kWorkFirstBundle };

const weft_attr_t *g_attr;             // the child's attributes (NULL: default)
std::atomic<long> g_live{0};           // started and not finished: stack holders
std::atomic<long> g_live_max{0};

void NoteStart() {
  long v = g_live.fetch_add(1) + 1;
  long m = g_live_max.load();
  while (v > m && !g_live_max.compare_exchange_weak(m, v)) {
  }
}
void NoteEnd() { g_live.fetch_sub(1); }

long FibSeq(long n) {
  long a = 0, b = 1;
  for (long i = 0; i < n; ++i) {
    long t = a + b;
    a = b;
    b = t;
  }
  return a;
}

void *Fib(void *arg) {
  NoteStart();
  long n = static_cast<long>(I(arg));
  long r = n;
  if (n >= 2) {
    weft_thread_t *t = nullptr;
    int rc = weft_create(&t, g_attr, Fib, P(n - 1));
    if (rc != 0) {
      ADD_FAILURE() << "weft_create: " << weft_err_name(rc);
      NoteEnd();
      return P(-1);
    }
    g_live.fetch_sub(1);  // the caller runs fib(n - 2) as a plain call
    long y = static_cast<long>(I(Fib(P(n - 2))));
    g_live.fetch_add(1);
    void *x = nullptr;
    EXPECT_EQ(weft_join(t, &x), 0);
    r = static_cast<long>(I(x)) + y;
  }
  NoteEnd();
  return P(r);
}

// The largest n whose thread count (fib(n + 1) - 1) stays within `spawns`, at least 12.
long FibSizeFor(long spawns) {
  long n = 12;
  while (FibSeq(n + 2) - 1 <= spawns) ++n;
  return n;
}

class UnfoldTest : public ::testing::TestWithParam<std::tuple<int, Mode>> {
 protected:
  int nvps() const { return std::get<0>(GetParam()); }
  Mode mode() const { return std::get<1>(GetParam()); }
  void SetUp() override { ASSERT_EQ(InitWithVps(nvps()), 0); }
  void TearDown() override {
    if (weft_is_running()) {
      EXPECT_EQ(weft_shutdown(), 0);
    }
  }
  // Sets g_attr for the mode; returns the bundle to destroy (or NULL).
  weft_bundle_t *Configure() {
    static weft_attr_t attr;
    weft_attr_init(&attr);
    weft_bundle_t *b = nullptr;
    g_attr = nullptr;
    if (mode() == kWorkFirstAttr) {
      attr.work_first = 1;
      g_attr = &attr;
    } else if (mode() == kWorkFirstBundle) {
      EXPECT_EQ(weft_schedlib_bundle_create(&b, nullptr, WEFT_SCHED_WORK_FIRST), 0);
      attr.bundle = b;
      g_attr = &attr;
    }
    return b;
  }
  Watchdog watchdog_;
};

// fib(n) with a thread per call (fib(30): 1,346,268 threads at scale 1) finishes with the
// exact result, and the threads that hold a stack at once stay few: depth-first, a
// VP's started threads form one chain of calls (n deep), so at one VP no more than
// n + 1 exist. Each further VP adds chains of its own, and so does every steal that
// follows a join blocked on a stolen child: a VP whose kernel thread the machine preempts
// leaves the other to steal from it again and again (297 at 2 VPs for fib(23), 6.4 n P,
// under TSan beside a CPU hog; 4 n P was exceeded there). The bound at several VPs is
// therefore 16 n P, still two orders of magnitude under the tens of thousands a
// breadth-first unfolding starts.
TEST_P(UnfoldTest, FibThreadPerCall) {
  weft_bundle_t *b = Configure();
  long n = FibSizeFor(Scaled(1500000, 2000));
  g_live = 0;
  g_live_max = 0;
  NoteStart();  // the main thread
  long got = static_cast<long>(I(Fib(P(n))));
  NoteEnd();
  EXPECT_EQ(got, FibSeq(n)) << "fib(" << n << ")";
  long bound = nvps() == 1 ? n + 1 : 16 * n * nvps();
  EXPECT_LE(g_live_max.load(), bound) << "fib(" << n << ") at " << nvps() << " VPs";
  if (b != nullptr) {
    EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
  }
}

// ---- N-queens, one thread per placement tried ----------------------------------------

struct Board {
  int n, row;
  int cols[16];
};

bool Safe(const Board &bd, int col) {
  for (int r = 0; r < bd.row; ++r) {
    int c = bd.cols[r];
    if (c == col || c - col == r - bd.row || c - col == bd.row - r) return false;
  }
  return true;
}

// Counts the solutions below the placement in *arg (freed here): one thread for each
// safe placement of the next queen.
void *Queens(void *arg) {
  Board *bd = static_cast<Board *>(arg);
  long count = 0;
  if (bd->row == bd->n) {
    count = 1;
  } else {
    weft_thread_t *kids[16];
    int k = 0;
    for (int col = 0; col < bd->n; ++col) {
      if (!Safe(*bd, col)) continue;
      Board *child = new Board(*bd);
      child->cols[child->row++] = col;
      int rc = weft_create(&kids[k], g_attr, Queens, child);
      if (rc != 0) {
        ADD_FAILURE() << "weft_create: " << weft_err_name(rc);
        delete child;
        continue;
      }
      ++k;
    }
    for (int j = 0; j < k; ++j) {
      void *r = nullptr;
      EXPECT_EQ(weft_join(kids[j], &r), 0);
      count += static_cast<long>(I(r));
    }
  }
  delete bd;
  return P(count);
}

TEST_P(UnfoldTest, NQueensThreadPerPlacement) {
  weft_bundle_t *b = Configure();
  // solutions for n = 8..11; 10 tries about 35,000 placements, 11 about 167,000
  const long solutions[] = {92, 352, 724, 2680};
  double s = Scale();
  int n = s >= 1.0 ? 11 : s >= 0.2 ? 10 : s >= 0.05 ? 9 : 8;
  Board *bd = new Board();
  bd->n = n;
  bd->row = 0;
  long got = static_cast<long>(I(Queens(bd)));
  EXPECT_EQ(got, solutions[n - 8]) << n << "-queens";
  if (b != nullptr) {
    EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, UnfoldTest,
    ::testing::Combine(::testing::Values(1, 2, 4),
                       ::testing::Values(kHelpFirst, kWorkFirstAttr, kWorkFirstBundle)),
    [](const ::testing::TestParamInfo<std::tuple<int, Mode>> &i) {
      Mode m = std::get<1>(i.param);
      return std::string(m == kHelpFirst ? "help_first" : m == kWorkFirstAttr ? "work_first_attr"
                                                                               : "work_first_bundle") +
             "_" + std::to_string(std::get<0>(i.param)) + "vp";
    });

// ---- run order at one VP -------------------------------------------------------------

class UnfoldOneVpTest : public OneVpTest {
 protected:
  Watchdog watchdog_;
};

std::mutex g_mu;
std::vector<int> g_order;

void Record(int v) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_order.push_back(v);
}

void *RecordArg(void *arg) {
  Record(static_cast<int>(I(arg)));
  return arg;
}

// The threads a VP created most recently run first: created 0..4 without switching,
// then joined in creation order, they run 4, 3, 2, 1, 0. The same holds inside a
// thread: its children run newest first, before the threads created before it.
TEST_F(UnfoldOneVpTest, NewestCreatedRunsFirst) {
  g_order.clear();
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 5; ++i) ts.push_back(Spawn(RecordArg, P(i)));
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(g_order, (std::vector<int>{4, 3, 2, 1, 0}));

  g_order.clear();
  weft_thread_t *older = Spawn(RecordArg, P(100));
  weft_thread_t *parent = Spawn(+[](void *) -> void * {
    Record(10);
    weft_thread_t *a = Spawn(RecordArg, P(11));
    weft_thread_t *b = Spawn(RecordArg, P(12));
    Join(a);  // runs 12, then 11: both before `older`
    Join(b);
    Record(13);
    return nullptr;
  });
  Join(parent);
  Join(older);
  EXPECT_EQ(g_order, (std::vector<int>{10, 12, 11, 13, 100}));
}

// Work-first: the new thread runs before weft_create() returns; the creator resumes
// as soon as the child blocks (it waits at the front of the queue).
TEST_F(UnfoldOneVpTest, WorkFirstRunsChildAtOnce) {
  g_order.clear();
  weft_attr_t wf;
  weft_attr_init(&wf);
  EXPECT_EQ(wf.work_first, 0) << "help-first is the default";
  wf.work_first = 1;
  weft_thread_t *t = Spawn(RecordArg, P(1), &wf);
  Record(2);
  Join(t);
  static Event ev;
  ev.~Event();
  new (&ev) Event();
  weft_thread_t *w = Spawn(+[](void *) -> void * {
    Record(3);
    ev.Wait();  // blocks: the creator runs next
    Record(5);
    return nullptr;
  }, nullptr, &wf);
  Record(4);
  ev.Set();
  Join(w);
  EXPECT_EQ(g_order, (std::vector<int>{1, 2, 3, 4, 5}));
}

// Work-first creation down its general path (the creator has callbacks installed, or
// saves all registers): the creator is queued by a continuation instead of under the
// held queue lock. The result stays exact, every thread raises ENTRY once, and the
// all-registers creator keeps its FP control state across the work-first switches.
std::atomic<long> g_entries{0};

TEST_F(UnfoldOneVpTest, WorkFirstGeneralPaths) {
  static weft_attr_t wf;
  weft_attr_init(&wf);
  wf.work_first = 1;
  g_attr = &wf;
  const long n = 14;
  g_entries = 0;
  ASSERT_EQ(weft_hook_push(WEFT_HOOK_ENTRY,
                           [](weft_hook_event_t, weft_thread_t *, int, void *, void *) {
                             g_entries.fetch_add(1);
                           },
                           nullptr),
            0);
  EXPECT_EQ(static_cast<long>(I(Fib(P(n)))), FibSeq(n));
  EXPECT_EQ(weft_hook_pop(WEFT_HOOK_ENTRY), 0);
  EXPECT_EQ(g_entries.load(), FibSeq(n + 1) - 1) << "one ENTRY per thread";

  ASSERT_EQ(weft_switch_mode_set(WEFT_SWITCH_ALL), 0);
  fesetround(FE_DOWNWARD);
  EXPECT_EQ(static_cast<long>(I(Fib(P(n)))), FibSeq(n));
  // a work-first child that changes the rounding mode runs before the creator resumes
  weft_thread_t *t = Spawn(+[](void *) -> void * {
    fesetround(FE_UPWARD);
    return nullptr;
  }, nullptr, &wf);
  EXPECT_EQ(fegetround(), FE_DOWNWARD) << "the all-registers creator's rounding mode";
  fesetround(FE_TONEAREST);
  Join(t);
  ASSERT_EQ(weft_switch_mode_set(WEFT_SWITCH_INTEGER), 0);
  g_attr = nullptr;
}

// ---- joining the un-stolen child -----------------------------------------------------

// A join whose joinee is still at the front of the joiner's own queue switches straight
// to it (docs/design.md, "Joining the un-stolen child"). Each variant must give the
// child's result, run the child as itself, and resume the joiner only once the child
// finished: a child never run (stack from the free list), a child with a stack size of
// its own (the join falls back to the general block), a child that already ran and
// blocked, then was woken, and one that blocks again inside that join.
weft_thread_t *g_expect_self;
std::atomic<int> g_child_done{0};

void *SelfCheck(void *arg) {
  EXPECT_EQ(weft_self(), g_expect_self) << "the joinee runs as itself";
  weft_yield();  // the joiner is not ready: nothing else to run, back here
  g_child_done.fetch_add(1);
  return arg;
}

TEST_F(UnfoldOneVpTest, JoinRunsUnstolenChild) {
  for (int i = 0; i < 100; ++i) {
    g_child_done = 0;
    weft_thread_t *t = Spawn(SelfCheck, P(i));
    g_expect_self = t;
    EXPECT_EQ(I(Join(t)), i);
    EXPECT_EQ(g_child_done.load(), 1);
  }

  // a stack size of its own: not from the VP's free list
  weft_attr_t big;
  weft_attr_init(&big);
  big.stack_size = 256 * 1024;
  for (int i = 0; i < 10; ++i) {
    g_child_done = 0;
    weft_thread_t *t = Spawn(SelfCheck, P(1000 + i), &big);
    g_expect_self = t;
    EXPECT_EQ(I(Join(t)), 1000 + i);
    EXPECT_EQ(g_child_done.load(), 1);
  }

  // a joinee that already ran and is at the front again: c and w2 block, w1 wakes c
  // then w2 (both go to the back: c, w2), and the join finds c at the front; c blocks
  // once more inside that join, w2 wakes it
  static Event first, go2, second;
  for (Event *e : {&first, &go2, &second}) {
    e->~Event();
    new (e) Event();
  }
  g_child_done = 0;
  weft_thread_t *c = Spawn(+[](void *) -> void * {
    first.Wait();
    second.Wait();
    g_child_done.fetch_add(1);
    return P(7);
  });
  weft_thread_t *w2 = Spawn(+[](void *) -> void * {
    go2.Wait();
    second.Set();
    return nullptr;
  });
  weft_yield();  // w2 and c run and block
  weft_thread_t *w1 = Spawn(+[](void *) -> void * {
    first.Set();
    go2.Set();
    return nullptr;
  });
  Join(w1);
  EXPECT_EQ(I(Join(c)), 7);
  EXPECT_EQ(g_child_done.load(), 1);
  Join(w2);
}

// ---- fairness at one VP ----------------------------------------------------------------

std::atomic<bool> g_stop{false};
std::atomic<long> g_progress{0};

// The third thread of the tests below: arg (a count) yields, each counted in
// g_progress, then sets g_stop.
void *ProgressThenStop(void *arg) {
  long n = static_cast<long>(I(arg));
  for (long i = 0; i < n; ++i) {
    g_progress.fetch_add(1);
    weft_yield();
  }
  g_stop = true;
  return nullptr;
}

// Two threads that yield in a loop never starve a third: each yield goes behind
// every other ready thread, so the three take turns (checked by counts: between two
// steps of the third, each yielder runs at most once... or twice at the start).
TEST_F(UnfoldOneVpTest, YieldersDoNotStarveAThird) {
  const long steps = Scaled(20000, 500);
  g_stop = false;
  g_progress = 0;
  static std::atomic<long> turns[2];
  static std::atomic<long> worst_gap;
  turns[0] = turns[1] = 0;
  worst_gap = 0;
  auto yielder = +[](void *arg) -> void * {
    int me = static_cast<int>(I(arg));
    long last = -1, runs = 0;
    while (!g_stop.load()) {
      long p = g_progress.load();
      runs = p == last ? runs + 1 : 1;  // my turns since the third last moved
      last = p;
      if (runs > worst_gap.load()) worst_gap = runs;
      turns[me].fetch_add(1);
      weft_yield();
    }
    return nullptr;
  };
  weft_thread_t *a = Spawn(yielder, P(0));
  weft_thread_t *b = Spawn(yielder, P(1));
  weft_thread_t *c = Spawn(ProgressThenStop, P(steps));
  Join(c);
  Join(a);
  Join(b);
  EXPECT_EQ(g_progress.load(), steps);
  EXPECT_LE(worst_gap.load(), 2) << "a yielder ran again before the third moved";
  EXPECT_GE(turns[0].load(), steps - 2);
  EXPECT_GE(turns[1].load(), steps - 2);
}

// Two threads that wake each other in turn (semaphore ping-pong, never yielding) do
// not starve a third ready thread: a woken thread goes behind the threads already
// ready, not in front of them.
TEST_F(UnfoldOneVpTest, PingPongDoesNotStarveAThird) {
  const long steps = Scaled(2000, 100);
  g_stop = false;
  g_progress = 0;
  static weft_sem_t sa, sb;
  ASSERT_EQ(weft_sem_init(&sa, 0), 0);
  ASSERT_EQ(weft_sem_init(&sb, 0), 0);
  weft_thread_t *a = Spawn(+[](void *) -> void * {
    while (!g_stop.load()) {
      weft_sem_signal(&sb);
      weft_sem_wait(&sa);
    }
    weft_sem_signal(&sb);  // let the partner see the stop
    return nullptr;
  });
  weft_thread_t *b = Spawn(+[](void *) -> void * {
    while (!g_stop.load()) {
      weft_sem_wait(&sb);
      weft_sem_signal(&sa);
    }
    return nullptr;
  });
  weft_thread_t *c = Spawn(ProgressThenStop, P(steps));
  Join(c);
  Join(a);
  Join(b);
  EXPECT_EQ(g_progress.load(), steps);
  EXPECT_EQ(weft_sem_destroy(&sa), 0);
  EXPECT_EQ(weft_sem_destroy(&sb), 0);
}

}  // namespace
