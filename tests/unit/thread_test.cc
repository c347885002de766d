// tests/unit/thread_test.cc - create, join, detach, exit, yield, self, ids, the local
// pointer, affinity, and weft threads used from plain OS threads.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "weft_test.h"

using namespace weft_test;

namespace {

class ThreadTest : public VpTest {};
WEFT_INSTANTIATE_VPS(ThreadTest);
class ThreadOneVpTest : public OneVpTest {};

void *ReturnArg(void *arg) { return arg; }
void *Double(void *arg) { return P(2 * I(arg)); }

// A gate a thread can wait on (yielding) until the test opens it.
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> done{false};
};
void *WaitAtGate(void *arg) {
  auto *g = static_cast<Gate *>(arg);
  YieldUntil([g] { return g->open.load(); });
  g->done = true;
  return P(1);
}

// weft_attr_init() fills in the documented defaults.
TEST(ThreadAttr, Defaults) {
  weft_attr_t attr;
  std::memset(&attr, 0x5A, sizeof attr);
  weft_attr_init(&attr);
  EXPECT_EQ(attr.stack_size, 0u);
  EXPECT_EQ(attr.detached, 0);
  EXPECT_EQ(attr.vproc, 0);
  EXPECT_EQ(attr.bundle, nullptr);
}

// Joined threads hand back their function's return value.
TEST_P(ThreadTest, CreateJoinReturnsResult) {
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 100; ++i) ts.push_back(Spawn(Double, P(i)));
  for (intptr_t i = 99; i >= 0; --i) EXPECT_EQ(Join(ts[i]), P(2 * i));  // reverse order
}

// weft_join() accepts a NULL result pointer.
TEST_P(ThreadTest, JoinWithNullResult) {
  std::atomic<int> ran{0};
  weft_thread_t *t = Spawn(+[](void *a) {
    static_cast<std::atomic<int> *>(a)->store(1);
    return P(5);
  }, &ran);
  EXPECT_EQ(weft_join(t, nullptr), 0);
  EXPECT_EQ(ran.load(), 1);
}

// Joining a thread that has already finished returns its result at once.
TEST_P(ThreadTest, JoinFinishedThread) {
  Gate g;
  g.open = true;
  weft_thread_t *t = Spawn(WaitAtGate, &g);
  ASSERT_TRUE(YieldUntil([&] { return g.done.load(); }));
  for (int i = 0; i < 10; ++i) weft_yield();
  EXPECT_EQ(Join(t), P(1));
}

// Threads create and join their own children (a tree of joins: fib via threads).
void *Fib(void *arg) {
  intptr_t n = I(arg);
  if (n < 2) return P(n);
  weft_thread_t *a = Spawn(Fib, P(n - 1));
  weft_thread_t *b = Spawn(Fib, P(n - 2));
  return P(I(Join(a)) + I(Join(b)));
}
TEST_P(ThreadTest, NestedCreateAndJoin) { EXPECT_EQ(Join(Spawn(Fib, P(14))), P(377)); }

// A detached thread may be created with a NULL out pointer, and runs.
TEST_P(ThreadTest, DetachedCreateWithNullOut) {
  static std::atomic<int> ran;
  ran = 0;
  weft_attr_t attr = DetachedAttr();
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(weft_create(nullptr, &attr, +[](void *) {
      ran.fetch_add(1);
      return P(0);
    }, nullptr), 0);
  }
  EXPECT_TRUE(YieldUntil([] { return ran.load() == 10; }));
}

// A thread created detached cannot be joined or detached again (WEFT_ESRCH).
TEST_P(ThreadTest, CreatedDetachedCannotBeJoined) {
  Gate g;
  weft_attr_t attr = DetachedAttr();
  weft_thread_t *t = nullptr;
  ASSERT_EQ(weft_create(&t, &attr, WaitAtGate, &g), 0);
  ASSERT_NE(t, nullptr);
  void *result = P(3);
  EXPECT_EQ(weft_join(t, &result), WEFT_ESRCH);  // still alive: waits at the gate
  EXPECT_EQ(result, P(3));
  EXPECT_EQ(weft_detach(t), WEFT_ESRCH);
  g.open = true;
  EXPECT_TRUE(YieldUntil([&] { return g.done.load(); }));
}

// After weft_detach(), joining fails with WEFT_ESRCH, and detaching again too.
TEST_P(ThreadTest, DetachThenJoinIsEsrch) {
  Gate g;
  weft_thread_t *t = Spawn(WaitAtGate, &g);
  EXPECT_EQ(weft_detach(t), 0);
  EXPECT_EQ(weft_join(t, nullptr), WEFT_ESRCH);
  EXPECT_EQ(weft_detach(t), WEFT_ESRCH);
  g.open = true;
  EXPECT_TRUE(YieldUntil([&] { return g.done.load(); }));
}

// Detaching a thread that has already finished reclaims it (TearDown checks).
TEST_P(ThreadTest, DetachFinishedThread) {
  Gate g;
  g.open = true;
  weft_thread_t *t = Spawn(WaitAtGate, &g);
  ASSERT_TRUE(YieldUntil([&] { return g.done.load(); }));
  for (int i = 0; i < 10; ++i) weft_yield();
  EXPECT_EQ(weft_detach(t), 0);
}

// Spawns a joinable thread that returns at once and waits until it has finished
// (the finish counter moved, then some yields so that its exit continuation ran).
weft_thread_t *SpawnFinished() {
  weft_debug_stats_t st;
  weft_debug_stats(&st);
  const uint64_t before = st.finished;
  weft_thread_t *t = Spawn(ReturnArg, P(5));
  EXPECT_TRUE(YieldUntil([&] {
    weft_debug_stats(&st);
    return st.finished > before;
  }));
  for (int i = 0; i < 20; ++i) weft_yield();
  return t;
}

// Counts the runs of its body.
std::atomic<int> g_bodies{0};
void *CountBody(void *arg) {
  g_bodies++;
  return arg;
}

// After a reclaimed handle was misused, the free lists are intact: the next two
// creates get two different control blocks and both bodies run.
void ExpectNextTwoCreatesDistinct() {
  g_bodies = 0;
  weft_thread_t *a = Spawn(CountBody, P(1));
  weft_thread_t *b = Spawn(CountBody, P(2));
  ASSERT_NE(a, b) << "two live threads share a control block (freed twice)";
  EXPECT_EQ(Join(a), P(1));
  EXPECT_EQ(Join(b), P(2));
  EXPECT_EQ(g_bodies.load(), 2);
}

// Detaching a finished thread twice: the second call returns WEFT_ESRCH and frees
// nothing (it used to free the control block a second time).
TEST_P(ThreadTest, DoubleDetachOfFinishedThreadIsEsrch) {
  for (int i = 0; i < 20; ++i) {
    weft_thread_t *t = SpawnFinished();
    EXPECT_EQ(weft_detach(t), 0);
    EXPECT_EQ(weft_detach(t), WEFT_ESRCH) << "iteration " << i;
    ExpectNextTwoCreatesDistinct();
    if (HasFatalFailure()) return;
  }
}

// Joining a finished thread after detaching it returns WEFT_ESRCH and frees nothing.
TEST_P(ThreadTest, JoinAfterDetachOfFinishedThreadIsEsrch) {
  for (int i = 0; i < 20; ++i) {
    weft_thread_t *t = SpawnFinished();
    EXPECT_EQ(weft_detach(t), 0);
    void *r = P(9);
    EXPECT_EQ(weft_join(t, &r), WEFT_ESRCH) << "iteration " << i;
    EXPECT_EQ(r, P(9));
    ExpectNextTwoCreatesDistinct();
    if (HasFatalFailure()) return;
  }
}

// A thread created detached that has finished (and reclaimed itself): detach and
// join of its handle return WEFT_ESRCH until the block is reused.
TEST_P(ThreadTest, DetachAndJoinOfFinishedDetachedThreadAreEsrch) {
  weft_attr_t attr = DetachedAttr();
  for (int i = 0; i < 20; ++i) {
    weft_debug_stats_t st;
    weft_debug_stats(&st);
    const uint64_t before = st.finished;
    weft_thread_t *t = nullptr;
    ASSERT_EQ(weft_create(&t, &attr, ReturnArg, nullptr), 0);
    ASSERT_TRUE(YieldUntil([&] {
      weft_debug_stats(&st);
      return st.finished > before;
    }));
    for (int k = 0; k < 20; ++k) weft_yield();
    EXPECT_EQ(weft_detach(t), WEFT_ESRCH);
    EXPECT_EQ(weft_join(t, nullptr), WEFT_ESRCH);
    ExpectNextTwoCreatesDistinct();
    if (HasFatalFailure()) return;
  }
}

// The same from a plain OS thread (the kernel-blocking join path).
TEST_P(ThreadTest, PlainThreadDetachTwiceAndJoinAfterDetachAreEsrch) {
  for (int i = 0; i < 10; ++i) {
    weft_thread_t *t1 = SpawnFinished();
    weft_thread_t *t2 = SpawnFinished();
    int d1 = -100, d2 = -100, d3 = -100, j = -100;
    std::thread plain([&] {
      d1 = weft_detach(t1);
      d2 = weft_detach(t1);
      d3 = weft_detach(t2);
      j = weft_join(t2, nullptr);
    });
    plain.join();
    EXPECT_EQ(d1, 0);
    EXPECT_EQ(d2, WEFT_ESRCH) << "iteration " << i;
    EXPECT_EQ(d3, 0);
    EXPECT_EQ(j, WEFT_ESRCH) << "iteration " << i;
    ExpectNextTwoCreatesDistinct();
    if (HasFatalFailure()) return;
  }
}

// A detach racing a join for a finished thread: exactly one of them reclaims it.
TEST_P(ThreadTest, DetachRacingJoinOfFinishedThreadReclaimsOnce) {
  for (int i = 0; i < 50; ++i) {
    weft_thread_t *t = SpawnFinished();
    std::atomic<int> go{0};
    int jr = -100;
    std::thread plain([&] {
      while (!go.load()) {
      }
      jr = weft_join(t, nullptr);
    });
    go = 1;
    int dr = weft_detach(t);
    plain.join();
    EXPECT_TRUE((dr == 0 && jr == WEFT_ESRCH) || (dr == WEFT_ESRCH && jr == 0))
        << "detach " << weft_err_name(dr) << ", join " << weft_err_name(jr);
    ExpectNextTwoCreatesDistinct();
    if (HasFatalFailure()) return;
  }
}

// A detach racing the thread's own finish on another VP: the finisher that loads
// DETACHED reaps with a plain store, one that loads 0 goes through its CAS loop, which
// a detach between the two turns into the reap as well. Checked: every detach
// succeeds, every body runs, and no block is reclaimed twice (the free lists then hand
// out distinct blocks; a block on a free list twice would be given to two threads).
std::atomic<long> g_race_bodies{0};
void *SpinBriefly(void *arg) {
  for (long i = 0, n = (long)(intptr_t)arg; i < n; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
  g_race_bodies++;
  return arg;
}
TEST_P(ThreadTest, DetachRacingFinishOnAnotherVpReclaimsOnce) {
  g_race_bodies = 0;
  weft_attr_t a;
  weft_attr_init(&a);
  a.vproc = WEFT_VPROC(nvps() - 1);  // the last VP; the creator runs on VP 0
  const int kThreads = 2000;
  int esrch = 0;
  for (int i = 0; i < kThreads; ++i) {
    weft_thread_t *t = Spawn(SpinBriefly, P(i % 64), &a);
    if (!t) return;
    if ((i & 7) == 0) weft_yield();  // some finish before their detach, some after
    int rc = weft_detach(t);
    EXPECT_TRUE(rc == 0) << weft_err_name(rc);
    esrch += rc == WEFT_ESRCH;
  }
  EXPECT_EQ(esrch, 0);
  EXPECT_TRUE(YieldUntil([&] { return g_race_bodies.load() == kThreads; }));
  ExpectNextTwoCreatesDistinct();
}

// Two joiners of one live thread: exactly one gets the result, the other WEFT_ESRCH.
struct JoinRace {
  Gate target_gate;
  weft_thread_t *target = nullptr;
  std::atomic<int> ok{0}, esrch{0};
};
void *RaceJoiner(void *arg) {
  auto *r = static_cast<JoinRace *>(arg);
  void *result = nullptr;
  int rc = weft_join(r->target, &result);
  if (rc == 0 && result == P(1)) r->ok++;
  if (rc == WEFT_ESRCH) {
    r->esrch++;
    r->target_gate.open = true;  // only now may the target finish
  }
  return nullptr;
}
TEST_P(ThreadTest, SecondJoinerIsEsrch) {
  JoinRace r;
  r.target = Spawn(WaitAtGate, &r.target_gate);
  weft_thread_t *a = Spawn(RaceJoiner, &r);
  weft_thread_t *b = Spawn(RaceJoiner, &r);
  Join(a);
  Join(b);
  EXPECT_EQ(r.ok.load(), 1);
  EXPECT_EQ(r.esrch.load(), 1);
}

// Detaching a thread another thread is joining fails with WEFT_ESRCH. Which call
// comes first is up to the scheduler (with 1 VP the joiner is surely waiting);
// either way exactly one of the two calls is rejected with WEFT_ESRCH.
struct DetachRace {
  Gate target_gate;
  weft_thread_t *target = nullptr;
  std::atomic<bool> joining{false};
  std::atomic<int> join_rc{-100};
  void *join_result = nullptr;
};
void *DetachRaceJoiner(void *arg) {
  auto *r = static_cast<DetachRace *>(arg);
  r->joining = true;
  r->join_rc = weft_join(r->target, &r->join_result);
  return nullptr;
}
TEST_P(ThreadTest, DetachWhileJoinedIsEsrch) {
  DetachRace r;
  r.target = Spawn(WaitAtGate, &r.target_gate);
  weft_thread_t *joiner = Spawn(DetachRaceJoiner, &r);
  ASSERT_TRUE(YieldUntil([&] { return r.joining.load(); }));
  for (int i = 0; i < 10; ++i) weft_yield();
  int rc = weft_detach(r.target);  // the target is alive: it waits at the gate
  if (nvps() == 1) {
    EXPECT_EQ(rc, WEFT_ESRCH) << "the joiner was already waiting";
  }
  if (rc == 0) {
    Join(joiner);  // its join came second and must have been rejected
    EXPECT_EQ(r.join_rc.load(), WEFT_ESRCH);
    r.target_gate.open = true;
    EXPECT_TRUE(YieldUntil([&] { return r.target_gate.done.load(); }));
  } else {
    EXPECT_EQ(rc, WEFT_ESRCH);
    r.target_gate.open = true;
    Join(joiner);
    EXPECT_EQ(r.join_rc.load(), 0);
    EXPECT_EQ(r.join_result, P(1));
  }
}

// Joining oneself fails with WEFT_EDEADLK, from a created and the main weft thread.
TEST_P(ThreadTest, JoinSelfIsEdeadlk) {
  EXPECT_EQ(weft_join(weft_self(), nullptr), WEFT_EDEADLK);
  EXPECT_EQ(I(RunInThread([] { return P(weft_join(weft_self(), nullptr)); })), WEFT_EDEADLK);
}

// NULL handles are rejected with WEFT_EINVAL.
TEST_P(ThreadTest, NullHandleIsEinval) {
  void *result = P(1);
  EXPECT_EQ(weft_join(nullptr, &result), WEFT_EINVAL);
  EXPECT_EQ(result, P(1));
  EXPECT_EQ(weft_detach(nullptr), WEFT_EINVAL);
}

// weft_create() rejects a NULL function and a NULL out pointer for a joinable
// thread, leaving *out untouched.
TEST_P(ThreadTest, CreateRejectsBadArguments) {
  weft_thread_t *sentinel = reinterpret_cast<weft_thread_t *>(0x1234);
  weft_thread_t *t = sentinel;
  EXPECT_EQ(weft_create(&t, nullptr, nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(t, sentinel);
  EXPECT_EQ(weft_create(nullptr, nullptr, ReturnArg, nullptr), WEFT_EINVAL);
  weft_attr_t attr;
  weft_attr_init(&attr);
  EXPECT_EQ(weft_create(nullptr, &attr, ReturnArg, nullptr), WEFT_EINVAL);
  attr.detached = 1;
  EXPECT_EQ(weft_create(nullptr, &attr, nullptr, nullptr), WEFT_EINVAL);
}

// A stack size below WEFT_MIN_STACK_SIZE is rejected with WEFT_EINVAL.
TEST_P(ThreadTest, TooSmallStackIsEinval) {
  const size_t sizes[] = {1, 4096, WEFT_MIN_STACK_SIZE / 2, WEFT_MIN_STACK_SIZE - 1};
  for (size_t size : sizes) {
    SCOPED_TRACE(size);
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.stack_size = size;
    weft_thread_t *sentinel = reinterpret_cast<weft_thread_t *>(0x1234);
    weft_thread_t *t = sentinel;
    EXPECT_EQ(weft_create(&t, &attr, ReturnArg, nullptr), WEFT_EINVAL);
    EXPECT_EQ(t, sentinel);
  }
}

// Stack sizes of exactly the minimum and not a page multiple are accepted.
TEST_P(ThreadTest, MinimumAndOddStackSizesWork) {
  const size_t sizes[] = {WEFT_MIN_STACK_SIZE, WEFT_MIN_STACK_SIZE + 1, 3 * WEFT_MIN_STACK_SIZE + 17};
  for (size_t size : sizes) {
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.stack_size = size;
    EXPECT_EQ(Join(Spawn(+[](void *) {
      volatile char buf[4096];
      for (size_t i = 0; i < sizeof buf; ++i) buf[i] = static_cast<char>(i);
      weft_yield();
      return P(buf[100]);
    }, nullptr, &attr)), P(100)) << "stack_size " << size;
  }
}

// weft_exit() ends the thread with its value, even from a nested frame; code after
// it never runs.
std::atomic<int> g_after_exit{0};
__attribute__((noinline)) void ExitFromNestedFrame(intptr_t v) {
  weft_exit(P(v));
  g_after_exit = 1;
}
TEST_P(ThreadTest, ExitReturnsValueToJoiner) {
  g_after_exit = 0;
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 20; ++i) {
    ts.push_back(Spawn(+[](void *a) {
      weft_yield();
      ExitFromNestedFrame(I(a) + 1000);
      return P(-1);
    }, P(i)));
  }
  for (intptr_t i = 0; i < 20; ++i) EXPECT_EQ(Join(ts[i]), P(i + 1000));
  EXPECT_EQ(g_after_exit.load(), 0);
}

// The main weft thread never finishes as other threads do (weft_exit from it is
// WEFT_EPERM): a join of it, from a weft thread or a plain OS thread, and a detach of
// it give WEFT_ESRCH. The join waited for ever, and weft_shutdown then found the
// joiner still blocked (WEFT_EBUSY).
TEST_P(ThreadTest, JoinOrDetachOfTheMainThreadIsEsrch) {
  struct A { weft_thread_t *m; int rc; } a{weft_self(), -1};
  Join(Spawn(+[](void *p) -> void * {
    auto *x = static_cast<A *>(p);
    x->rc = weft_join(x->m, nullptr);
    return nullptr;
  }, &a));
  EXPECT_EQ(a.rc, WEFT_ESRCH);
  int rc = -1;
  std::thread plain([&] { rc = weft_join(a.m, nullptr); });
  plain.join();
  EXPECT_EQ(rc, WEFT_ESRCH);
  EXPECT_EQ(weft_detach(a.m), WEFT_ESRCH);
  EXPECT_EQ(weft_join(a.m, nullptr), WEFT_EDEADLK);  // itself: as before
}

// weft_exit() from the main weft thread and from a plain OS thread is WEFT_EPERM;
// with weft not running, WEFT_ENOTINIT (from any thread).
TEST_P(ThreadTest, ExitFromMainOrPlainThreadIsEperm) {
  EXPECT_EQ(weft_exit(P(1)), WEFT_EPERM);
  int rc = 0;
  std::thread plain([&] { rc = weft_exit(P(1)); });
  plain.join();
  EXPECT_EQ(rc, WEFT_EPERM);
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_exit(P(1)), WEFT_ENOTINIT);
  std::thread after([&] { rc = weft_exit(P(1)); });
  after.join();
  EXPECT_EQ(rc, WEFT_ENOTINIT);
}

// With one VP, three threads that each append their id and yield, three times,
// interleave round robin: 1 2 3 1 2 3 1 2 3.
struct Trace {
  std::mutex mu;
  std::vector<int> seq;
};
Trace *g_trace;
void *AppendAndYield(void *arg) {
  for (int i = 0; i < 3; ++i) {
    {
      std::lock_guard<std::mutex> lock(g_trace->mu);
      g_trace->seq.push_back(static_cast<int>(I(arg)));
    }
    weft_yield();
  }
  return nullptr;
}
TEST_F(ThreadOneVpTest, YieldInterleavesRoundRobin) {
  Trace trace;
  g_trace = &trace;
  weft_thread_t *t1 = Spawn(AppendAndYield, P(1));
  weft_thread_t *t2 = Spawn(AppendAndYield, P(2));
  weft_thread_t *t3 = Spawn(AppendAndYield, P(3));
  Join(t1);
  Join(t2);
  Join(t3);
  // newest first (depth-first creation order), then round robin: each yield goes
  // behind every other ready thread
  EXPECT_EQ(trace.seq, (std::vector<int>{3, 2, 1, 3, 2, 1, 3, 2, 1}));
}

// With one VP, a created thread does not run before weft_create() returns, and
// weft_yield() from the main thread lets it run.
TEST_F(ThreadOneVpTest, CreatedThreadRunsOnlyAfterCallerSwitches) {
  static std::atomic<int> ran;
  ran = 0;
  weft_thread_t *t = Spawn(+[](void *) {
    ran = 1;
    return P(0);
  });
  EXPECT_EQ(ran.load(), 0);
  weft_yield();
  EXPECT_EQ(ran.load(), 1);
  Join(t);
}

// weft_yield() with nothing else ready returns at once.
TEST_P(ThreadTest, YieldAloneReturns) {
  for (int i = 0; i < 1000; ++i) weft_yield();
  SUCCEED();
}

// weft_self() is the thread's own handle; ids are unique, nonzero and match.
TEST_P(ThreadTest, SelfAndIdsAreUnique) {
  const int kThreads = 200;
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < kThreads; ++i) ts.push_back(Spawn(+[](void *) {
    weft_yield();
    return static_cast<void *>(weft_self());
  }));
  std::set<uint64_t> ids;
  weft_thread_t *main_thread = weft_self();
  ASSERT_NE(main_thread, nullptr);
  ids.insert(weft_thread_id(main_thread));
  EXPECT_NE(weft_thread_id(main_thread), 0u);
  for (weft_thread_t *t : ts) {
    uint64_t id = weft_thread_id(t);  // read before the handle dangles
    EXPECT_NE(id, 0u);
    EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id;
    EXPECT_EQ(Join(t), static_cast<void *>(t));
  }
  EXPECT_EQ(weft_thread_id(nullptr), 0u);
}

// Ids are never reused, even when control blocks are.
TEST_P(ThreadTest, IdsAreNotReusedAcrossRecycledThreads) {
  std::set<uint64_t> ids;
  for (int round = 0; round < 50; ++round) {
    weft_thread_t *t = Spawn(+[](void *) { return P(static_cast<intptr_t>(weft_thread_id(weft_self()))); });
    uint64_t id = static_cast<uint64_t>(I(Join(t)));
    EXPECT_TRUE(ids.insert(id).second) << "id reused: " << id;
  }
}

// The local pointer is per thread, starts NULL, and survives switches.
TEST_P(ThreadTest, LocalPointerIsPerThread) {
  const int kThreads = 50;
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 1; i <= kThreads; ++i) {
    ts.push_back(Spawn(+[](void *a) {
      if (weft_local_get() != nullptr) return P(-1);
      if (weft_local_set(a) != 0) return P(-2);
      for (int k = 0; k < 20; ++k) {
        weft_yield();
        if (weft_local_get() != a) return P(-3);
      }
      return a;
    }, P(i)));
  }
  EXPECT_EQ(weft_local_set(P(999)), 0);
  for (intptr_t i = 1; i <= kThreads; ++i) EXPECT_EQ(Join(ts[i - 1]), P(i));
  EXPECT_EQ(weft_local_get(), P(999));
  EXPECT_EQ(weft_local_set(nullptr), 0);
}

// From a plain OS thread the local pointer reads NULL and cannot be set.
TEST_P(ThreadTest, LocalPointerFromPlainThread) {
  void *got = P(1);
  int rc = 0;
  std::thread plain([&] {
    got = weft_local_get();
    rc = weft_local_set(P(5));
  });
  plain.join();
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(rc, WEFT_EPERM);
}

// The affinity hint is kept in the control block as given (-1 by default).
TEST_P(ThreadTest, AffinityHintIsRecorded) {
  Gate g;
  weft_attr_t attr;
  weft_attr_init(&attr);
  weft_thread_t *plain_t = Spawn(WaitAtGate, &g, &attr);
  attr.vproc = WEFT_VPROC(7);
  weft_thread_t *hinted = Spawn(WaitAtGate, &g, &attr);
  EXPECT_EQ(weft_sched_thread_affinity(plain_t), -1);
  EXPECT_EQ(weft_sched_thread_affinity(hinted), 7);
  g.open = true;
  Join(plain_t);
  Join(hinted);
}

// A zeroed weft_attr_t means the defaults, as weft_attr_init's does: no virtual
// processor (vproc 0 is "none", not VP 0), so the thread is not pinned anywhere;
// WEFT_VPROC(v) asks for v; a negative vproc is refused.
TEST_P(ThreadTest, ZeroedAttrIsTheDefaults) {
  static std::atomic<int> seen_affinity;
  auto report = +[](void *) {
    seen_affinity = weft_get_affinity();
    return P(0);
  };
  weft_attr_t zeroed{};
  weft_attr_t init{};  // zeroed first: padding, if any, compares equal
  weft_attr_init(&init);
  EXPECT_EQ(std::memcmp(&zeroed, &init, sizeof zeroed), 0) << "weft_attr_init sets a nonzero default";
  Gate g;
  weft_thread_t *t = Spawn(WaitAtGate, &g, &zeroed);
  EXPECT_EQ(weft_sched_thread_affinity(t), -1);
  g.open = true;
  Join(t);
  seen_affinity = -2;
  Join(Spawn(report, nullptr, &zeroed));
  EXPECT_EQ(seen_affinity.load(), -1);
  weft_attr_t pinned{};
  pinned.vproc = WEFT_VPROC(1);
  seen_affinity = -2;
  Join(Spawn(report, nullptr, &pinned));
  EXPECT_EQ(seen_affinity.load(), 1);
  for (int bad : {-1, INT_MIN}) {
    weft_attr_t b{};
    b.vproc = bad;
    weft_thread_t *none = nullptr;
    EXPECT_EQ(weft_create(&none, &b, report, nullptr), WEFT_EINVAL) << bad;
  }
}

// A thread with an affinity hint starts on VP (affinity mod nvps). Deterministic
// only when no third VP can steal it: the main thread keeps its own VP busy
// (spinning, never switching), so with 2 VPs the hinted VP is the only one that
// can start the thread; with 1 VP the check is trivial. With 4 VPs an idle VP may
// legitimately steal the thread first, so the placement is not checked there.
TEST_P(ThreadTest, AffinityPlacesThreadOnItsVp) {
  if (nvps() > 2) GTEST_SKIP() << "placement is not deterministic with idle VPs that steal";
  static std::atomic<int> started_on;
  for (int round = 0; round < 5; ++round) {
    started_on = -2;
    int here = weft_vp_self();
    int target = (here + 1) % nvps();
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.vproc = WEFT_VPROC(target + nvps() * (round + 1));  // checks the "mod nvps"
    weft_thread_t *t = Spawn(+[](void *) {
      started_on = weft_vp_self();
      return P(0);
    }, nullptr, &attr);
    if (nvps() > 1) {
      EXPECT_TRUE(SpinUntil([] { return started_on.load() != -2; }, 20.0))
          << "the thread never started on VP " << target << " while VP " << here << " was busy";
    }
    Join(t);
    EXPECT_EQ(started_on.load(), target);
  }
}

// The main weft thread can block: it joins a thread that yields 100 times.
TEST_P(ThreadTest, MainThreadBlocksInJoin) {
  static std::atomic<int> yields;
  yields = 0;
  weft_thread_t *t = Spawn(+[](void *) {
    for (int i = 0; i < 100; ++i) {
      yields++;
      weft_yield();
    }
    return P(100);
  });
  EXPECT_EQ(Join(t), P(100));
  EXPECT_EQ(yields.load(), 100);
}

// A default-size stack is enough for glibc's stdio formatting.
TEST_P(ThreadTest, DefaultStackRunsStdio) {
  EXPECT_EQ(Join(Spawn(+[](void *) {
    char buf[256];
    int n = std::snprintf(buf, sizeof buf, "%s %d %.3f %Lg %p", "weft", 42, 3.14159, 2.5L,
                          static_cast<void *>(buf));
    return P(n > 0 && std::strncmp(buf, "weft 42 3.142 2.5", 17) == 0);
  })), P(1));
}

// ---- plain OS threads ----------------------------------------------------------

// A plain OS thread creates weft threads and joins them (blocking in the kernel);
// weft_self() is NULL there and weft_yield() returns. The main weft thread waits
// on an Event so its VP is free to run the new threads.
TEST_P(ThreadTest, PlainThreadCreatesAndJoins) {
  Event done;
  void *self_in_plain = P(1);
  int vp_in_plain = 0;
  intptr_t sum = 0;
  int errors = 0;
  std::thread plain([&] {
    self_in_plain = weft_self();
    vp_in_plain = weft_vp_self();
    weft_yield();
    std::vector<weft_thread_t *> ts(20);
    for (intptr_t i = 0; i < 20; ++i) {
      if (weft_create(&ts[i], nullptr, Double, P(i)) != 0) errors++;
    }
    for (intptr_t i = 0; i < 20; ++i) {
      void *r = nullptr;
      if (weft_join(ts[i], &r) != 0) errors++;
      sum += I(r);
    }
    done.Set();
  });
  done.Wait();
  plain.join();
  EXPECT_EQ(self_in_plain, nullptr);
  EXPECT_EQ(vp_in_plain, -1);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(sum, 2 * (19 * 20 / 2));
}

// A plain OS thread joins a thread the main weft thread created, and a weft thread
// joins one a plain OS thread created.
TEST_P(ThreadTest, JoinAcrossPlainAndWeftThreads) {
  Gate g;
  weft_thread_t *by_main = Spawn(WaitAtGate, &g);
  std::atomic<weft_thread_t *> by_plain{nullptr};
  Event done;
  void *joined_by_plain = nullptr;
  int join_rc = -100;
  std::thread plain([&] {
    weft_thread_t *t = nullptr;
    if (weft_create(&t, nullptr, Double, P(21)) == 0) by_plain = t;
    g.open = true;
    join_rc = weft_join(by_main, &joined_by_plain);
    done.Set();
  });
  ASSERT_TRUE(YieldUntil([&] { return by_plain.load() != nullptr; }));
  EXPECT_EQ(Join(by_plain.load()), P(42));
  done.Wait();
  plain.join();
  EXPECT_EQ(join_rc, 0);
  EXPECT_EQ(joined_by_plain, P(1));
}

// From a plain OS thread, joining a detached thread fails with WEFT_ESRCH, NULL
// with WEFT_EINVAL, and weft_detach() works.
TEST_P(ThreadTest, PlainThreadJoinErrorsAndDetach) {
  Gate detached_gate, joinable_gate;
  weft_attr_t attr = DetachedAttr();
  weft_thread_t *detached = nullptr;
  ASSERT_EQ(weft_create(&detached, &attr, WaitAtGate, &detached_gate), 0);
  weft_thread_t *joinable = Spawn(WaitAtGate, &joinable_gate);
  int join_detached = 0, join_null = 0, detach_rc = -100, join_after_detach = 0;
  std::thread plain([&] {
    join_detached = weft_join(detached, nullptr);
    join_null = weft_join(nullptr, nullptr);
    detach_rc = weft_detach(joinable);
    join_after_detach = weft_join(joinable, nullptr);
  });
  plain.join();  // none of these calls waits
  EXPECT_EQ(join_detached, WEFT_ESRCH);
  EXPECT_EQ(join_null, WEFT_EINVAL);
  EXPECT_EQ(detach_rc, 0);
  EXPECT_EQ(join_after_detach, WEFT_ESRCH);
  detached_gate.open = true;
  joinable_gate.open = true;
  EXPECT_TRUE(YieldUntil([&] { return detached_gate.done.load() && joinable_gate.done.load(); }));
}

// Several plain OS threads create and join weft threads concurrently.
TEST_P(ThreadTest, ManyPlainThreadsCreateAndJoin) {
  const int kPlain = 4, kEach = 50;
  std::atomic<int> finished{0};
  std::atomic<intptr_t> sum{0};
  Event all_done;
  std::vector<std::thread> plains;
  for (int p = 0; p < kPlain; ++p) {
    plains.emplace_back([&, p] {
      std::vector<weft_thread_t *> ts(kEach);
      for (int i = 0; i < kEach; ++i) {
        if (weft_create(&ts[i], nullptr, Double, P(p * kEach + i)) != 0) ts[i] = nullptr;
      }
      for (weft_thread_t *t : ts) {
        void *r = nullptr;
        if (t != nullptr && weft_join(t, &r) == 0) sum += I(r);
      }
      if (finished.fetch_add(1) + 1 == kPlain) all_done.Set();
    });
  }
  all_done.Wait();
  for (std::thread &t : plains) t.join();
  const intptr_t n = kPlain * kEach;
  EXPECT_EQ(sum.load(), 2 * (n * (n - 1) / 2));
}

// weft_debug_waiters(WEFT_DEBUG_JOIN, t) is 1 while a weft thread or a plain OS
// thread waits in weft_join for t, else 0; NULL or an unknown kind is WEFT_EINVAL.
TEST_P(ThreadTest, WaitersCountsTheJoiner) {
  for (int os = 0; os < 2; ++os) {
    Event go;
    weft_thread_t *t = Spawn(+[](void *a) -> void * {
      static_cast<Event *>(a)->Wait();
      return P(9);
    }, &go);
    EXPECT_EQ(Waiters(t), 0) << "nobody joins yet";
    void *r = nullptr;
    std::atomic<bool> joined{false};
    auto joiner = [&] {
      EXPECT_EQ(weft_join(t, &r), 0);
      joined = true;
    };
    weft_thread_t *jt = os ? nullptr : SpawnCall(&joiner);
    std::thread jos;
    if (os) jos = std::thread(joiner);
    EXPECT_TRUE(WaitForWaiters(t, 1)) << (os ? "OS" : "weft") << " joiner not counted";
    go.Set();
    if (jt) Join(jt);
    if (os) {
      EXPECT_TRUE(YieldUntil([&] { return joined.load(); }));
      jos.join();
    }
    EXPECT_EQ(r, P(9));
  }
  weft_mutex_t m = WEFT_MUTEX_INIT;
  EXPECT_EQ(weft_debug_waiters(WEFT_DEBUG_MUTEX, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_debug_waiters(WEFT_DEBUG_JOIN, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_debug_waiters(static_cast<weft_debug_obj_t>(0), &m), WEFT_EINVAL);
  EXPECT_EQ(weft_debug_waiters(static_cast<weft_debug_obj_t>(99), &m), WEFT_EINVAL);
  EXPECT_EQ(weft_debug_waiters(WEFT_DEBUG_MUTEX, &m), 0);
}

// ---- misuse caught by checked builds ------------------------------------------------------

// In a checked build, joining a thread a second time (its handle dangles) is caught
// while its control block has not been reused.
constexpr const char *kDoubleJoin = "weft: misuse: weft_join of a thread that was already joined";

void JoinTwice(weft_thread_t *t) {
  weft_join(t, nullptr);
  weft_join(t, nullptr);
}

TEST(ThreadDeathTest, DoubleJoinIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH(kDoubleJoin, JoinTwice(Spawn(ReturnArg)));
}

// The same from a plain OS thread.
TEST(ThreadDeathTest, DoubleJoinFromPlainThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH(kDoubleJoin,
    weft_thread_t *t = Spawn(ReturnArg);
    // let t finish first: at 1 VP, std::thread::join below holds the only VP
    for (int i = 0; i < 20; ++i) weft_yield();
    std::thread plain(JoinTwice, t);
    plain.join());
}

}  // namespace
