// tests/unit/sched_fastpath_test.cc - the declared fast path of the scheduler interface
// (weft/sched.h WEFT_SCHED_LOCAL_CREATE, WEFT_SCHED_LOCAL_READY) and the own-bundle
// processor_idle asked when a thread of a non-root bundle joins, finishes or yields
// on an empty dispatch queue.
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "weft_test.h"

using namespace weft_test;

namespace {

// A scheduler whose thread_created and thread_unblocked are, on a VP, exactly an
// enqueue on the caller's VP (what the flags declare), counting where they are raised.
// Off a VP they go to VP 0. processor_idle steals from another VP's dispatch queue.
std::atomic<int> g_created_on_vp, g_created_off_vp, g_unblocked_on_vp, g_unblocked_off_vp;
std::atomic<int> g_blocked;

void Ready(weft_thread_t *t, std::atomic<int> &on_vp, std::atomic<int> &off_vp) {
  weft_vp_t *vp = weft_sched_vp_self();
  (vp ? on_vp : off_vp)++;
  weft_sched_enqueue(vp ? vp : weft_sched_vp(0), t);
}
void Created(weft_bundle_t *, weft_thread_t *t) { Ready(t, g_created_on_vp, g_created_off_vp); }
void Unblocked(weft_bundle_t *, weft_thread_t *t) {
  Ready(t, g_unblocked_on_vp, g_unblocked_off_vp);
}
void Blocked(weft_bundle_t *, weft_thread_t *) { g_blocked++; }
weft_thread_t *Idle(weft_bundle_t *, weft_vp_t *vp) {
  int n = weft_vp_count(), me = weft_sched_vp_index(vp);
  for (int k = 1; k < n; k++)
    if (weft_thread_t *t = weft_sched_steal(weft_sched_vp((me + k) % n))) return t;
  return nullptr;
}

constexpr unsigned kFast =
    WEFT_SCHED_DISPATCH_ONLY | WEFT_SCHED_LOCAL_CREATE | WEFT_SCHED_LOCAL_READY;
const weft_sched_ops_t kFastOps = {Created, nullptr, nullptr, nullptr, Unblocked,
                                   nullptr, nullptr, Idle, kFast};
// The same, with a thread_blocked handler: the general paths must still raise it.
const weft_sched_ops_t kFastBlockedOps = {Created, nullptr, nullptr, Blocked, Unblocked,
                                          nullptr, nullptr, Idle, kFast};

void ResetCounts() {
  for (auto *c : {&g_created_on_vp, &g_created_off_vp, &g_unblocked_on_vp, &g_unblocked_off_vp,
                  &g_blocked})
    c->store(0);
}

class FastPathTest : public VpTest {
 protected:
  void SetUp() override {
    VpTest::SetUp();
    ResetCounts();
  }
};
WEFT_INSTANTIATE_VPS(FastPathTest);
class FastPathOneVpTest : public OneVpTest {
 protected:
  void SetUp() override {
    OneVpTest::SetUp();
    ResetCounts();
  }
};

TEST_F(FastPathOneVpTest, UnknownFlagsRejected) {
  weft_sched_ops_t ops = kFastOps;
  ops.flags = 1u << 7;
  weft_bundle_t *b = nullptr;
  EXPECT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), WEFT_EINVAL);
  ops.flags = WEFT_SCHED_FLAGS_ALL;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), 0);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// On a VP the kernel does the declared enqueue itself: the handlers are not called, and
// new threads go to the back (FIFO start order at one VP, where the root would push
// them at the front and run the newest first).
TEST_F(FastPathOneVpTest, LocalCreateIsFifoWithoutHandler) {
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &kFastOps, nullptr), 0);
  weft_attr_t a = InBundle(b);
  std::vector<int> order;
  RunInThread(
      [&]() -> void * {
        struct Arg { std::vector<int> *order; int i; weft_bundle_t *b; int in_bundle; };
        Arg args[4];
        weft_thread_t *t[4];
        for (int i = 0; i < 4; i++) {
          args[i] = {&order, i, b, 0};
          EXPECT_EQ(weft_create(&t[i], &a, [](void *p) -> void * {
                      Arg *x = static_cast<Arg *>(p);
                      x->order->push_back(x->i);
                      x->in_bundle = weft_thread_bundle(weft_self()) == x->b;
                      return nullptr;
                    }, &args[i]), 0);
        }
        for (int i = 0; i < 4; i++) EXPECT_EQ(weft_join(t[i], nullptr), 0);
        for (int i = 0; i < 4; i++) EXPECT_TRUE(args[i].in_bundle) << i;
        return nullptr;
      },
      &a);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g_created_on_vp.load(), 0);    // the kernel did it
  EXPECT_EQ(g_unblocked_on_vp.load(), 0);  // joins and yields too
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// A WEFT_SCHED_DISPATCH_ONLY bundle does not see yields: its threads' yields raise no
// thread_unblocked, also when the yield goes through the general path (a never-run
// thread at the front of the queue: each thread's first yield here). It once raised
// it there, for threads that never blocked.
TEST_P(FastPathTest, DispatchOnlyYieldsRaiseNoUnblocked) {
  const weft_sched_ops_t ops = {Created, nullptr, nullptr, Blocked, Unblocked,
                                nullptr, nullptr, Idle, WEFT_SCHED_DISPATCH_ONLY};
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), 0);
  weft_attr_t a = InBundle(b);
  const int n = static_cast<int>(Scaled(50, 5));
  static std::atomic<int> done;
  done = 0;
  std::vector<weft_thread_t *> ts(static_cast<size_t>(n));
  for (auto &t : ts)
    ASSERT_EQ(weft_create(&t, &a, [](void *) -> void * {
      for (int k = 0; k < 10; k++) weft_yield();
      done++;
      return nullptr;
    }, nullptr), 0);
  for (auto *t : ts) EXPECT_EQ(weft_join(t, nullptr), 0);
  EXPECT_EQ(done.load(), n);
  EXPECT_EQ(g_blocked.load(), 0);
  EXPECT_EQ(g_unblocked_on_vp.load() + g_unblocked_off_vp.load(), 0);
  EXPECT_EQ(g_created_on_vp.load(), n);  // no LOCAL_CREATE: the handler places them
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// Every thread runs exactly once with creations, yields and wake-ups from VPs and from
// a plain OS thread; off a VP the handlers are raised; the bundle counts its live
// threads (EBUSY while one is blocked).
TEST_P(FastPathTest, ExactlyOnceAndCounted) {
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &kFastOps, nullptr), 0);
  weft_attr_t a = InBundle(b);
  const int n = static_cast<int>(Scaled(2000, 50));
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
  struct Arg { std::vector<std::atomic<int>> *runs; int i; };
  std::vector<Arg> args(static_cast<size_t>(n));
  std::vector<weft_thread_t *> ts(static_cast<size_t>(n));
  auto body = [](void *p) -> void * {
    Arg *x = static_cast<Arg *>(p);
    weft_yield();
    (*x->runs)[static_cast<size_t>(x->i)]++;
    weft_yield();
    return nullptr;
  };
  RunInThread(
      [&]() -> void * {
        for (int i = 0; i < n / 2; i++) {
          args[static_cast<size_t>(i)] = {&runs, i};
          EXPECT_EQ(weft_create(&ts[static_cast<size_t>(i)], &a, body, &args[static_cast<size_t>(i)]), 0);
        }
        return nullptr;
      },
      &a);
  std::thread os([&] {  // the other half from a plain OS thread
    for (int i = n / 2; i < n; i++) {
      args[static_cast<size_t>(i)] = {&runs, i};
      EXPECT_EQ(weft_create(&ts[static_cast<size_t>(i)], &a, body, &args[static_cast<size_t>(i)]), 0);
    }
  });
  os.join();
  for (int i = 0; i < n; i++) EXPECT_EQ(weft_join(ts[static_cast<size_t>(i)], nullptr), 0);
  for (int i = 0; i < n; i++) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << i;
  EXPECT_EQ(g_created_off_vp.load(), n - n / 2);
  EXPECT_EQ(g_created_on_vp.load(), 0);

  // a blocked thread keeps the bundle busy; woken by a plain OS thread it goes through
  // thread_unblocked, by a VP it does not
  for (int from_os = 0; from_os < 2; from_os++) {
    weft_sem_t s;
    weft_sem_init(&s, 0);
    auto wait = [&]() -> void * {
      weft_sem_wait(&s);
      return nullptr;
    };
    weft_thread_t *t = SpawnCall(&wait, &a);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(weft_bundle_destroy(b), WEFT_EBUSY);
    ASSERT_TRUE(WaitForWaiters(&s, 1));
    EXPECT_EQ(weft_bundle_destroy(b), WEFT_EBUSY);
    int before_off = g_unblocked_off_vp.load();
    if (from_os) {
      std::thread waker([&] { weft_sem_signal(&s); });
      waker.join();
    } else {
      RunInThread([&]() -> void * {
        weft_sem_signal(&s);
        return nullptr;
      });
    }
    EXPECT_EQ(weft_join(t, nullptr), 0);
    EXPECT_EQ(g_unblocked_off_vp.load() - before_off, from_os);
    weft_sem_destroy(&s);
  }
  EXPECT_EQ(g_unblocked_on_vp.load(), 0);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// With a thread_blocked handler the fast path is not taken for the events after
// creation: thread_blocked is raised for every block.
TEST_F(FastPathOneVpTest, HandlersStillRaisedWhenPresent) {
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &kFastBlockedOps, nullptr), 0);
  weft_attr_t a = InBundle(b);
  RunInThread(
      [&]() -> void * {
        weft_sem_t s;
        weft_sem_init(&s, 0);
        auto poster = [&]() -> void * {
          weft_sem_signal(&s);
          return nullptr;
        };
        weft_thread_t *p = SpawnCall(&poster, &a);
        weft_sem_wait(&s);  // blocks: p has not run yet
        EXPECT_EQ(weft_join(p, nullptr), 0);
        weft_sem_destroy(&s);
        return nullptr;
      },
      &a);
  EXPECT_GE(g_blocked.load(), 1);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// The own-bundle ask: a thread of a scheduler that keeps new threads to itself (the
// library's FIFO) that joins, finishes or yields with nothing queued gets its own
// bundle's next thread, ahead of a newer bundle that holds a thread (the idle loop's
// sweep asks the newest bundle first). With a focus set, the focus goes first.
class OwnBundleTest : public FastPathOneVpTest {
 protected:
  void SetUp() override {
    FastPathOneVpTest::SetUp();
    ASSERT_EQ(weft_schedlib_bundle_create(&mine_, nullptr, WEFT_SCHED_FIFO), 0);
    ASSERT_EQ(weft_schedlib_bundle_create(&focus_, nullptr, WEFT_SCHED_FIFO), 0);  // newer
  }
  void TearDown() override {
    EXPECT_EQ(weft_bundle_set_focus(nullptr), 0);
    // detached threads may still be finishing: wait (bounded) until the bundles are empty
    for (weft_bundle_t *b : {mine_, focus_}) {
      int rc = WEFT_EBUSY;
      EXPECT_TRUE(YieldUntil([&] { return (rc = weft_schedlib_bundle_destroy(b)) != WEFT_EBUSY; }));
      EXPECT_EQ(rc, 0);
    }
    FastPathOneVpTest::TearDown();
  }
  // Runs step(log) in a thread of mine_ after a thread of focus_ (which logs 'F') has
  // been created (and, if focus, the focus set on focus_); returns the log.
  template <class F>
  std::string Run(F step, bool focus = false) {
    std::string log;
    std::mutex mu;
    auto add = [&](char c) {
      std::lock_guard<std::mutex> g(mu);
      log.push_back(c);
    };
    weft_attr_t fa = InBundle(focus_), ma = InBundle(mine_);
    auto other = [&]() -> void * {
      add('F');
      return nullptr;
    };
    weft_thread_t *f = nullptr;
    auto driver = [&]() -> void * {
      f = SpawnCall(&other, &fa);  // held in focus_'s run list
      if (focus) {
        EXPECT_EQ(weft_bundle_set_focus(focus_), 0);
      }
      step(add, ma);
      return nullptr;
    };
    weft_thread_t *d = SpawnCall(&driver, &ma);
    if (d) Join(d);
    if (f) Join(f);
    return log;
  }
  weft_bundle_t *mine_ = nullptr, *focus_ = nullptr;
};

TEST_F(OwnBundleTest, JoinRunsOwnBundleFirst) {
  std::string log = Run([](auto add, weft_attr_t ma) {
    auto child = [&]() -> void * {
      add('C');
      return nullptr;
    };
    weft_thread_t *c = SpawnCall(&child, &ma);  // held in mine_'s run list
    if (c) Join(c);
    add('J');
  });
  EXPECT_EQ(log.substr(0, 2), "CJ") << log;
}

// The driver creates a detached thread of its bundle and finishes with nothing queued
// (the main thread waits on an event that the second thread to run sets).
TEST_F(OwnBundleTest, JoinLeavesTheOrderToAFocus) {
  std::string log = Run(
      [](auto add, weft_attr_t ma) {
        auto child = [&]() -> void * {
          add('C');
          return nullptr;
        };
        weft_thread_t *c = SpawnCall(&child, &ma);
        if (c) Join(c);
        add('J');
      },
      true);
  EXPECT_EQ(log.substr(0, 1), "F") << log;
}

TEST_F(OwnBundleTest, FinishRunsOwnBundleFirst) {
  std::string log;
  std::mutex mu;
  Event two;
  auto add = [&](char c) {
    std::lock_guard<std::mutex> g(mu);
    log.push_back(c);
    if (log.size() == 2) two.Set();
  };
  weft_attr_t fa = InBundle(focus_), da = InBundle(mine_);
  fa.detached = 1;
  da.detached = 1;
  auto logger = [](void *p) -> void * {
    auto *x = static_cast<std::pair<decltype(add) *, char> *>(p);
    (*x->first)(x->second);
    return nullptr;
  };
  std::pair<decltype(add) *, char> f_arg{&add, 'F'}, c_arg{&add, 'C'};
  struct D { weft_attr_t fa, da; void *(*logger)(void *); void *f_arg, *c_arg; };
  D d{fa, da, logger, &f_arg, &c_arg};
  weft_attr_t dda = da;
  EXPECT_EQ(weft_create(nullptr, &dda, [](void *p) -> void * {
              D *x = static_cast<D *>(p);
              EXPECT_EQ(weft_create(nullptr, &x->fa, x->logger, x->f_arg), 0);  // held by focus_ (newer)
              EXPECT_EQ(weft_create(nullptr, &x->da, x->logger, x->c_arg), 0);  // held by mine_
              return nullptr;  // nothing queued: mine_ is asked before the idle loop
            }, &d), 0);
  two.Wait();
  EXPECT_EQ(log, "CF");
}

TEST_F(OwnBundleTest, YieldReachesOwnBundle) {
  std::string log = Run([](auto add, weft_attr_t ma) {
    auto child = [&]() -> void * {
      add('C');
      return nullptr;
    };
    weft_thread_t *c = SpawnCall(&child, &ma);
    weft_yield();  // nothing queued: mine_'s processor_idle hands out the child
    add('Y');
    if (c) Join(c);
  });
  EXPECT_EQ(log.substr(0, 2), "CY") << log;
}

// ---- the library's FIFO/LIFO on its short paths (src/sched/queue.c's leaf handlers, the
// join that runs a joinee handed over by the own-bundle question in the joiner's place,
// the inline bundle count at finish) -------------------------------------------------

void *ReturnArg(void *p) { return p; }

// One VP, each of the eight kinds (the leaf handlers serve lazy without affinity, the
// general ones the others): a thread of the bundle creates n threads (kept in its VP's
// run list), then joins one of them; the own-bundle question hands them out oldest
// first (FIFO) or newest first (LIFO), and each returns its argument to its joiner.
class KeptOrderTest : public OneVpTest, public ::testing::WithParamInterface<unsigned> {};

TEST_P(KeptOrderTest, JoinRunsKeptThreadsInOrder) {
  const unsigned kind = GetParam();
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, kind), 0);
  weft_attr_t ba = InBundle(b);
  constexpr int n = 8;
  static std::vector<int> order;
  order.clear();
  auto driver = [&]() -> void * {
    weft_thread_t *ts[n] = {};
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(weft_create(&ts[i], &ba, +[](void *p) -> void * {
                  order.push_back(static_cast<int>(reinterpret_cast<intptr_t>(p)));
                  return p;
                }, reinterpret_cast<void *>(static_cast<intptr_t>(i))), 0);
    // FIFO: join the newest, so that the oldest, handed out first, is not the joinee;
    // LIFO: join the oldest, likewise
    int first = (kind & WEFT_SCHED_LIFO) ? 0 : n - 1;
    void *r = nullptr;
    EXPECT_EQ(weft_join(ts[first], &r), 0);
    EXPECT_EQ(r, reinterpret_cast<void *>(static_cast<intptr_t>(first)));
    for (int i = 0; i < n; ++i) {
      if (i == first) continue;
      EXPECT_EQ(weft_join(ts[i], &r), 0);
      EXPECT_EQ(r, reinterpret_cast<void *>(static_cast<intptr_t>(i)));
    }
    return nullptr;
  };
  weft_thread_t *d = SpawnCall(&driver, &ba);
  if (d) Join(d);
  std::vector<int> want(n);
  for (int i = 0; i < n; ++i) want[i] = (kind & WEFT_SCHED_LIFO) ? n - 1 - i : i;
  EXPECT_EQ(order, want);
  EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
}

// The L2 pattern (create, then join the thread just created, which the own-bundle
// question hands back: the joiner runs it in its place), many times, with the results
// and the bundle's thread count right afterwards.
TEST_P(KeptOrderTest, CreateJoinRunsTheJoineeInPlace) {
  const unsigned kind = GetParam();
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, kind), 0);
  weft_attr_t ba = InBundle(b);
  auto driver = [&]() -> void * {
    for (intptr_t i = 1; i <= 1000; ++i) {
      weft_thread_t *t = nullptr;
      EXPECT_EQ(weft_create(&t, &ba, ReturnArg, reinterpret_cast<void *>(i)), 0);
      void *r = nullptr;
      EXPECT_EQ(weft_join(t, &r), 0);
      EXPECT_EQ(r, reinterpret_cast<void *>(i));
    }
    return nullptr;
  };
  weft_thread_t *d = SpawnCall(&driver, &ba);
  if (d) Join(d);
  // every thread of b has finished and been counted down
  EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, KeptOrderTest,
                         ::testing::Range(0u, 8u),  // FIFO/LIFO x lazy/eager x affinity
                         [](const ::testing::TestParamInfo<unsigned> &i) {
                           return std::string(weft_schedlib_kind_name(i.param));
                         });

// Two VPs: a FIFO thread creates n threads into its VP's run list and then keeps its VP
// (spins, no yield) until all of them have run, which only a steal by the other VP's
// processor_idle can bring about: each runs once, on the other VP, oldest first.
class KeptStealTest : public WeftTest {
 protected:
  void SetUp() override { StartWeft(2); }
};

TEST_F(KeptStealTest, IdleVpStealsFromTheRunListOldestFirst) {
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, WEFT_SCHED_FIFO), 0);
  weft_attr_t ba = InBundle(b);
  ba.detached = 1;
  constexpr int n = 16;
  static std::atomic<int> ran;
  static std::vector<std::pair<int, int>> log;  // (index, VP)
  static SpinLock lock;
  ran = 0;
  log.clear();
  int driver_vp = -1;
  bool all_ran = false;
  auto driver = [&]() -> void * {
    driver_vp = weft_vp_self();
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(weft_create(nullptr, &ba, +[](void *p) -> void * {
                  lock.lock();
                  log.emplace_back(static_cast<int>(reinterpret_cast<intptr_t>(p)), weft_vp_self());
                  lock.unlock();
                  ran++;
                  return nullptr;
                }, reinterpret_cast<void *>(static_cast<intptr_t>(i))), 0);
    all_ran = SpinUntil([&] { return ran.load() == n; });  // the watchdog: 30 s
    return nullptr;
  };
  weft_attr_t da = InBundle(b);
  weft_thread_t *d = SpawnCall(&driver, &da);
  if (d) Join(d);
  EXPECT_TRUE(all_ran) << "the threads kept on the busy VP were not stolen";
  ASSERT_EQ(log.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(log[i].first, i) << "not oldest first";
    EXPECT_NE(log[i].second, driver_vp) << "ran on the VP that was kept busy";
  }
  int rc = WEFT_EBUSY;
  EXPECT_TRUE(YieldUntil([&] { return (rc = weft_schedlib_bundle_destroy(b)) != WEFT_EBUSY; }));
  EXPECT_EQ(rc, 0);
}

}  // namespace
