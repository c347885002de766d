// tests/unit/bundle_tree_test.cc - the bundle tree, the focus bundle and the routing
// of processor-idle events (passing them up and down the tree), and stopping and
// continuing a bundle (weft/sched.h). Run at 1, 2 and 4 (oversubscribed) VPs; the
// orders that only one VP makes deterministic are checked at one VP.
#include <weft/schedlib.h>

#include <atomic>
#include <string>
#include <tuple>
#include <vector>

#include "weft_test.h"

using namespace weft_test;

namespace {

class BundleTreeTest : public VpTest {};
WEFT_INSTANTIATE_VPS(BundleTreeTest);

weft_bundle_t *Lib(unsigned kind, weft_bundle_t *parent = nullptr) {
  weft_bundle_t *b = nullptr;
  int rc = weft_schedlib_bundle_create(&b, parent, kind);
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  return b;
}

// A log of which group each thread belonged to, in the order the threads started.
struct RunLog {
  SpinLock lock;
  std::vector<int> order;  // under lock
  std::atomic<int> started{0};
  void Add(int group) {
    lock.lock();
    order.push_back(group);
    lock.unlock();
    started++;
  }
};

struct Job {
  RunLog *log;
  int group;
};

void *LogWorker(void *a) {
  Job *j = static_cast<Job *>(a);
  j->log->Add(j->group);
  return nullptr;
}

// Creates n threads in b that log `group`; returns them (jobs must outlive them).
std::vector<weft_thread_t *> SpawnGroup(weft_bundle_t *b, int n, std::vector<Job> *jobs,
                                        RunLog *log, int group) {
  std::vector<weft_thread_t *> ts;
  weft_attr_t attr = InBundle(b);
  for (int i = 0; i < n; i++) jobs->push_back({log, group});
  Job *base = jobs->data() + jobs->size() - n;
  for (int i = 0; i < n; i++) ts.push_back(Spawn(LogWorker, base + i, &attr));
  return ts;
}

// A scheduler that keeps no threads (it enqueues at once on the caller's VP, round
// robin from plain OS threads) and whose processor_idle only passes the event on:
// down to every child (mode kDown), or up to the parent (kUp), or to itself (kSelf:
// a cycle, cut by WEFT_SCHED_PASS_MAX). It counts what the passes returned.
struct PassSched {
  enum Mode { kDown, kUp, kSelf } mode = kDown;
  std::atomic<int> calls{0}, got{0}, max_depth{0};
  std::atomic<unsigned> rr{0};

  static PassSched *Of(weft_bundle_t *b) { return static_cast<PassSched *>(weft_bundle_data(b)); }
  static void Ready(weft_bundle_t *b, weft_thread_t *t) {
    weft_vp_t *vp = weft_sched_vp_self();
    if (vp == nullptr) vp = weft_sched_vp(static_cast<int>(Of(b)->rr++ % weft_vp_count()));
    weft_sched_enqueue(vp, t);
  }
  static weft_thread_t *Idle(weft_bundle_t *b, weft_vp_t *vp) {
    static thread_local int depth = 0;  // per kernel thread: handlers never switch
    PassSched *s = Of(b);
    s->calls++;
    depth++;
    int m = s->max_depth.load();
    while (depth > m && !s->max_depth.compare_exchange_weak(m, depth)) {
    }
    weft_thread_t *t = nullptr;
    if (s->mode == kDown) {
      for (weft_bundle_t *c = weft_bundle_first_child(b); c && !t; c = weft_bundle_next_sibling(c))
        t = weft_sched_idle_pass(c, vp);
    } else if (s->mode == kUp) {
      t = weft_sched_idle_pass(weft_bundle_parent(b), vp);
    } else {
      t = weft_sched_idle_pass(b, vp);
    }
    depth--;
    if (t) s->got++;
    return t;
  }
  static constexpr weft_sched_ops_t kOps = {Ready,   nullptr, nullptr, nullptr, Ready,
                                            nullptr, nullptr, Idle,    WEFT_SCHED_DISPATCH_ONLY};
};
constexpr weft_sched_ops_t PassSched::kOps;

weft_bundle_t *MakePass(PassSched *s, weft_bundle_t *parent) {
  weft_bundle_t *b = nullptr;
  int rc = weft_bundle_create(&b, parent, &PassSched::kOps, s);
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  return b;
}

// Lets every VP go idle a few times (each would start a held-back thread).
void IdleAWhile() {
  for (int i = 0; i < 10; i++) weft_sleep_ns(500 * 1000);
}

void JoinAll(const std::vector<weft_thread_t *> &ts) {
  for (weft_thread_t *t : ts) Join(t);
}

// ---- the tree ------------------------------------------------------------------------

TEST_P(BundleTreeTest, TreeLinksFollowCreateAndDestroy) {
  weft_bundle_t *root = weft_bundle_root();
  EXPECT_EQ(weft_bundle_parent(root), nullptr);
  EXPECT_EQ(weft_bundle_first_child(root), nullptr);
  weft_bundle_t *a = Lib(WEFT_SCHED_FIFO);
  weft_bundle_t *b = Lib(WEFT_SCHED_LIFO);
  weft_bundle_t *c = Lib(WEFT_SCHED_FIFO, a);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(weft_bundle_parent(a), root);
  EXPECT_EQ(weft_bundle_parent(c), a);
  // newest child first
  EXPECT_EQ(weft_bundle_first_child(root), b);
  EXPECT_EQ(weft_bundle_next_sibling(b), a);
  EXPECT_EQ(weft_bundle_next_sibling(a), nullptr);
  EXPECT_EQ(weft_bundle_first_child(a), c);
  EXPECT_EQ(weft_bundle_next_sibling(c), nullptr);
  EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
  EXPECT_EQ(weft_bundle_first_child(root), a);
  EXPECT_EQ(weft_schedlib_bundle_destroy(a), WEFT_EBUSY) << "a has a child";
  EXPECT_EQ(weft_schedlib_bundle_destroy(c), 0);
  EXPECT_EQ(weft_bundle_first_child(a), nullptr);
  EXPECT_EQ(weft_schedlib_bundle_destroy(a), 0);
  EXPECT_EQ(weft_bundle_first_child(root), nullptr);
  EXPECT_EQ(weft_bundle_parent(nullptr), nullptr);
  EXPECT_EQ(weft_bundle_first_child(nullptr), nullptr);
  EXPECT_EQ(weft_bundle_next_sibling(nullptr), nullptr);
}

// ---- the focus -------------------------------------------------------------------------

TEST_P(BundleTreeTest, FocusIsSetReadAndMovesUpWhenDestroyed) {
  weft_bundle_t *root = weft_bundle_root();
  EXPECT_EQ(weft_bundle_focus(), root) << "the root has the focus at first";
  weft_bundle_t *a = Lib(WEFT_SCHED_FIFO);
  weft_bundle_t *c = Lib(WEFT_SCHED_FIFO, a);
  ASSERT_TRUE(a && c);
  EXPECT_EQ(weft_bundle_set_focus(c), 0);
  EXPECT_EQ(weft_bundle_focus(), c);
  EXPECT_EQ(weft_schedlib_bundle_destroy(c), 0);
  EXPECT_EQ(weft_bundle_focus(), a) << "the focus moves to the destroyed bundle's parent";
  EXPECT_EQ(weft_bundle_set_focus(nullptr), 0);
  EXPECT_EQ(weft_bundle_focus(), root);
  // a pointer that is not a live bundle (never dereferenced)
  alignas(64) char fake[256] = {};
  EXPECT_EQ(weft_bundle_set_focus(reinterpret_cast<weft_bundle_t *>(fake)), WEFT_EINVAL);
  EXPECT_EQ(weft_bundle_focus(), root);
  EXPECT_EQ(weft_bundle_set_focus(a), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(a), 0);
  EXPECT_EQ(weft_bundle_focus(), root);
}

// Idle events on every VP share the bundle lock while bundles are created, focused and
// destroyed: a handler never runs on a bundle that weft_bundle_destroy has returned
// for (its data is poisoned, then freed: ASan, or the magic check), and a destroy
// waits for handlers under way. Idle VPs sweep the probes; the worker bundle's threads
// (the library's FIFO) raise processor_idle on their own bundle at every yield.
struct Probe {
  static constexpr int kMagic = 0x5eed;
  std::atomic<int> magic{kMagic};
  static std::atomic<long> calls, bad;
  static void Ready(weft_bundle_t *, weft_thread_t *t) {
    weft_vp_t *vp = weft_sched_vp_self();
    weft_sched_enqueue(vp ? vp : weft_sched_vp(0), t);
  }
  static weft_thread_t *Idle(weft_bundle_t *b, weft_vp_t *) {
    auto *p = static_cast<Probe *>(weft_bundle_data(b));
    if (p->magic.load() != kMagic) bad++;
    calls++;
    return nullptr;
  }
  static constexpr weft_sched_ops_t kOps = {Ready,   nullptr, nullptr, nullptr, Ready,
                                            nullptr, nullptr, Idle,    0};
};
constexpr weft_sched_ops_t Probe::kOps;
std::atomic<long> Probe::calls, Probe::bad;

// Each test at 1, 2 and 4 VPs, with the asymmetric fences on membarrier(2) where the
// kernel allows it and with WEFT_MEMBARRIER=0 (seq_cst fences on both sides).
class FenceModeTest : public WeftTest,
                      public ::testing::WithParamInterface<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    const char *m = getenv("WEFT_MEMBARRIER");
    had_ = m != nullptr;
    if (m) saved_ = m;
    if (std::get<1>(GetParam())) unsetenv("WEFT_MEMBARRIER");
    else setenv("WEFT_MEMBARRIER", "0", 1);
    StartWeft(nvps());
  }
  void TearDown() override {
    WeftTest::TearDown();
    if (had_) setenv("WEFT_MEMBARRIER", saved_.c_str(), 1);
    else unsetenv("WEFT_MEMBARRIER");
  }
  int nvps() const { return std::get<0>(GetParam()); }

 private:
  std::string saved_;
  bool had_ = false;
};
INSTANTIATE_TEST_SUITE_P(Fences, FenceModeTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>> &i) {
                           return std::to_string(std::get<0>(i.param)) + "vp_" +
                                  (std::get<1>(i.param) ? "membarrier" : "fences");
                         });

TEST_P(FenceModeTest, TreeChangesRaceIdleEvents) {
  Probe::calls = 0;
  Probe::bad = 0;
  weft_bundle_t *work = Lib(WEFT_SCHED_FIFO);
  ASSERT_NE(work, nullptr);
  std::atomic<bool> done{false};
  auto churn = [&]() -> void * {
    while (!done.load()) {
      for (int i = 0; i < 20; i++) weft_yield();
      weft_sleep_ns(20 * 1000);  // the VP goes idle: it sweeps the bundles
    }
    return nullptr;
  };
  weft_attr_t wa = InBundle(work);
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < nvps(); i++) ts.push_back(SpawnCall(&churn, &wa));
  for (int round = 0; round < 300; round++) {
    auto *p = new Probe;
    weft_bundle_t *b = nullptr;
    ASSERT_EQ(weft_bundle_create(&b, round % 2 ? work : nullptr, &Probe::kOps, p), 0);
    if (round % 3 == 0) {
      EXPECT_EQ(weft_bundle_set_focus(b), 0);
    }
    if (round % 5 == 0) {
      EXPECT_EQ(weft_bundle_stop(b), 0);
      EXPECT_EQ(weft_bundle_continue(b), 0);
    }
    weft_sleep_ns(30 * 1000);
    EXPECT_EQ(weft_bundle_destroy(b), 0);
    p->magic = 0;  // any handler call from here on is a violation
    weft_yield();
    delete p;
  }
  done = true;
  JoinAll(ts);
  EXPECT_EQ(Probe::bad.load(), 0) << Probe::calls.load() << " probe calls";
  int rc = WEFT_EBUSY;
  EXPECT_TRUE(YieldUntil([&] { return (rc = weft_schedlib_bundle_destroy(work)) != WEFT_EBUSY; }));
  EXPECT_EQ(rc, 0);
}

// The kernel's notify after it raises thread_created on a scheduler that keeps the
// thread is the light side of a fence pair whose heavy side a VP makes on its way to
// sleep: a VP that goes to sleep just as the thread is kept must either find it or be
// woken. The creator never switches, so only another VP can run the thread; it is
// created at varying moments of the other VPs' way from polling to sleeping (they poll
// for cfg.spin_us, 50 us, after their last thread). A lost wake-up leaves it unrun.
struct Keeper {
  SpinLock lock;
  std::vector<weft_thread_t *> held;  // under lock
  static Keeper *Of(weft_bundle_t *b) { return static_cast<Keeper *>(weft_bundle_data(b)); }
  static void Ready(weft_bundle_t *b, weft_thread_t *t) {
    Keeper *k = Of(b);
    k->lock.lock();
    k->held.push_back(t);
    k->lock.unlock();
  }
  static weft_thread_t *Idle(weft_bundle_t *b, weft_vp_t *) {
    Keeper *k = Of(b);
    weft_thread_t *t = nullptr;
    k->lock.lock();
    if (!k->held.empty()) {
      t = k->held.front();
      k->held.erase(k->held.begin());
    }
    k->lock.unlock();
    return t;
  }
  static constexpr weft_sched_ops_t kOps = {Ready,   nullptr, nullptr, nullptr, Ready,
                                            nullptr, nullptr, Idle,    0};
};
constexpr weft_sched_ops_t Keeper::kOps;

TEST_P(FenceModeTest, KeptThreadWakesAVpOnItsWayToSleep) {
  if (nvps() == 1) GTEST_SKIP() << "needs a VP other than the creator's";
  Keeper k;
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &Keeper::kOps, &k), 0);
  weft_attr_t a = InBundle(b);
  static std::atomic<int> ran;
  const long rounds = Scaled(400, 20);
  for (long i = 0; i < rounds; i++) {
    // 0 to 120 us after the last thread ran: before, during and after the others' sleep
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(i * 7 % 121);
    while (std::chrono::steady_clock::now() < until) {
    }
    ran = 0;
    weft_thread_t *t = Spawn(+[](void *) {
      ran = 1;
      return P(1);
    }, nullptr, &a);
    ASSERT_TRUE(SpinUntil([] { return ran.load() == 1; }, 20.0))
        << "round " << i << ": no VP ran a thread the scheduler kept";
    EXPECT_EQ(Join(t), P(1));
  }
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// A leaf scheduler (WEFT_SCHED_IDLE_LEAF) is asked for the next thread by its own
// threads without the bundle lock; weft_bundle_stop must still be exact: once it has
// returned, processor_idle is not raised on the bundle until weft_bundle_continue. Its
// threads yield all the time (each yield with nothing queued asks the scheduler), and
// the handler counts the calls that begin, or are still under way, after stop returned.
struct LeafSched {
  SpinLock lock;
  std::vector<weft_thread_t *> held;  // under lock
  std::atomic<bool> stop_returned{false};
  std::atomic<long> calls{0}, late{0};
  static LeafSched *Of(weft_bundle_t *b) { return static_cast<LeafSched *>(weft_bundle_data(b)); }
  static void Ready(weft_bundle_t *b, weft_thread_t *t) {
    LeafSched *k = Of(b);
    k->lock.lock();
    k->held.push_back(t);
    k->lock.unlock();
  }
  static weft_thread_t *Idle(weft_bundle_t *b, weft_vp_t *) {
    LeafSched *k = Of(b);
    if (k->stop_returned.load()) k->late++;
    k->calls++;
    weft_thread_t *t = nullptr;
    k->lock.lock();
    if (!k->held.empty()) {
      t = k->held.front();
      k->held.erase(k->held.begin());
    }
    k->lock.unlock();
    // a call under way when stop returns must have ended before: look again at its end,
    // after a moment's work that widens the window
    for (volatile int i = 0; i < 200; i = i + 1) {
    }
    if (k->stop_returned.load()) k->late++;
    return t;
  }
  static constexpr weft_sched_ops_t kOps = {Ready,   nullptr, nullptr, nullptr, Ready,
                                            nullptr, nullptr, Idle,    WEFT_SCHED_IDLE_LEAF};
};
constexpr weft_sched_ops_t LeafSched::kOps;

TEST_P(FenceModeTest, StopWaitsForLeafQuestionsUnderWay) {
  LeafSched k;
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &LeafSched::kOps, &k), 0);
  std::atomic<bool> done{false};
  auto spinner = [&]() -> void * {
    while (!done.load()) weft_yield();  // asks the bundle whenever nothing is queued
    return nullptr;
  };
  weft_attr_t a = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 2 * nvps(); i++) ts.push_back(SpawnCall(&spinner, &a));
  const long rounds = Scaled(200, 20);
  for (long r = 0; r < rounds; r++) {
    ASSERT_TRUE(YieldUntil([&] { return k.calls.load() > 0; }));  // questions under way
    ASSERT_EQ(weft_bundle_stop(b), 0);
    k.stop_returned = true;
    for (int i = 0; i < 50; i++) weft_yield();  // let the spinners run: they must not ask
    k.stop_returned = false;
    ASSERT_EQ(weft_bundle_continue(b), 0);
    k.calls = 0;
  }
  EXPECT_EQ(k.late.load(), 0) << "processor_idle raised after weft_bundle_stop returned";
  done = true;
  ASSERT_EQ(weft_bundle_continue(b), 0);
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

TEST(BundleTreeApi, NotRunning) {
  EXPECT_EQ(weft_bundle_focus(), nullptr);
  EXPECT_EQ(weft_bundle_set_focus(nullptr), WEFT_ENOTINIT);
  EXPECT_EQ(weft_bundle_stop(nullptr), WEFT_ENOTINIT);
  EXPECT_EQ(weft_bundle_continue(nullptr), WEFT_ENOTINIT);
  EXPECT_EQ(weft_bundle_is_stopped(nullptr), 0);
}

// Idle VPs ask the focus bundle first. With one VP: threads of the focused (older)
// bundle all run before any of the other, although the sweep alone asks the newest
// bundle first (checked too, as the contrast). With more VPs: every thread runs once.
TEST_P(BundleTreeTest, IdleEventsGoToTheFocusFirst) {
  const int n = 20;
  for (int focus_older = 0; focus_older < 2; focus_older++) {
    weft_bundle_t *older = Lib(WEFT_SCHED_FIFO);
    weft_bundle_t *newer = Lib(WEFT_SCHED_FIFO);
    ASSERT_TRUE(older && newer);
    RunLog log;
    std::vector<Job> jobs;
    jobs.reserve(2 * n);
    auto ts = SpawnGroup(older, n, &jobs, &log, 0);
    auto ts2 = SpawnGroup(newer, n, &jobs, &log, 1);
    ts.insert(ts.end(), ts2.begin(), ts2.end());
    if (focus_older) {
      ASSERT_EQ(weft_bundle_set_focus(older), 0);
    }
    JoinAll(ts);
    ASSERT_EQ(log.order.size(), static_cast<size_t>(2 * n));
    if (nvps() == 1) {
      int first = focus_older ? 0 : 1;  // focus: older; no focus: the sweep, newest first
      for (int i = 0; i < 2 * n; i++)
        EXPECT_EQ(log.order[i], i < n ? first : 1 - first) << "position " << i << " focus_older "
                                                          << focus_older;
    }
    EXPECT_EQ(weft_bundle_set_focus(nullptr), 0);
    EXPECT_EQ(weft_schedlib_bundle_destroy(newer), 0);
    EXPECT_EQ(weft_schedlib_bundle_destroy(older), 0);
  }
}

// A focus bundle that holds no threads passes idle events down to its children.
TEST_P(BundleTreeTest, FocusPassesIdleEventsDown) {
  PassSched ps;
  weft_bundle_t *p = MakePass(&ps, nullptr);
  ASSERT_NE(p, nullptr);
  weft_bundle_t *c1 = Lib(WEFT_SCHED_FIFO, p);
  weft_bundle_t *c2 = Lib(WEFT_SCHED_LIFO | WEFT_SCHED_AFFINITY, p);
  ASSERT_TRUE(c1 && c2);
  ASSERT_EQ(weft_bundle_set_focus(p), 0);
  const int n = 25;
  RunLog log;
  std::vector<Job> jobs;
  jobs.reserve(2 * n);
  auto ts = SpawnGroup(c1, n, &jobs, &log, 1);
  auto ts2 = SpawnGroup(c2, n, &jobs, &log, 2);
  ts.insert(ts.end(), ts2.begin(), ts2.end());
  JoinAll(ts);
  EXPECT_EQ(log.started.load(), 2 * n);
  EXPECT_GT(ps.calls.load(), 0) << "the focus is asked";
  // one VP: every thread is found by the focus first, so through its pass
  if (nvps() == 1) {
    EXPECT_EQ(ps.got.load(), 2 * n);
  }
  EXPECT_EQ(weft_schedlib_bundle_destroy(c1), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(c2), 0);
  EXPECT_EQ(weft_bundle_focus(), p);
  EXPECT_EQ(weft_bundle_destroy(p), 0);
  EXPECT_EQ(weft_bundle_focus(), weft_bundle_root());
}

// A focus bundle below the one with the threads passes idle events up.
TEST_P(BundleTreeTest, FocusPassesIdleEventsUp) {
  weft_bundle_t *lib = Lib(WEFT_SCHED_FIFO | WEFT_SCHED_EAGER);
  ASSERT_NE(lib, nullptr);
  PassSched ps;
  ps.mode = PassSched::kUp;
  weft_bundle_t *leaf = MakePass(&ps, lib);
  ASSERT_NE(leaf, nullptr);
  ASSERT_EQ(weft_bundle_set_focus(leaf), 0);
  const int n = 25;
  RunLog log;
  std::vector<Job> jobs;
  jobs.reserve(n);
  auto ts = SpawnGroup(lib, n, &jobs, &log, 0);
  JoinAll(ts);
  EXPECT_EQ(log.started.load(), n);
  if (nvps() == 1) {
    EXPECT_EQ(ps.got.load(), n);
  }
  EXPECT_EQ(weft_bundle_destroy(leaf), 0);
  EXPECT_EQ(weft_bundle_focus(), lib);
  EXPECT_EQ(weft_schedlib_bundle_destroy(lib), 0);
}

// A cycle of passes ends at WEFT_SCHED_PASS_MAX; the runtime goes on.
TEST_P(BundleTreeTest, PassCycleIsCut) {
  PassSched ps;
  ps.mode = PassSched::kSelf;
  weft_bundle_t *self_passer = MakePass(&ps, nullptr);
  weft_bundle_t *lib = Lib(WEFT_SCHED_LIFO);
  ASSERT_TRUE(self_passer && lib);
  ASSERT_EQ(weft_bundle_set_focus(self_passer), 0);
  RunLog log;
  std::vector<Job> jobs;
  jobs.reserve(10);
  auto ts = SpawnGroup(lib, 10, &jobs, &log, 0);
  JoinAll(ts);
  EXPECT_EQ(log.started.load(), 10);
  EXPECT_GT(ps.calls.load(), 0);
  EXPECT_EQ(ps.max_depth.load(), WEFT_SCHED_PASS_MAX + 1) << "the first call, then the passes";
  EXPECT_EQ(ps.got.load(), 0);
  EXPECT_EQ(weft_bundle_set_focus(nullptr), 0);
  EXPECT_EQ(weft_bundle_destroy(self_passer), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(lib), 0);
}

// ---- virtual processors ------------------------------------------------------------------

struct WhereRan {
  int affinity = -2, vp = -2, vp_count = 0;
};

void *ReportWhere(void *a) {
  WhereRan *w = static_cast<WhereRan *>(a);
  w->affinity = weft_get_affinity();
  w->vp = weft_vp_self();
  w->vp_count = weft_vp_count();
  return nullptr;
}

// A thread carries a virtual processor number of any size (up to INT_MAX) under the
// default and the affinity schedulers; it reports its virtual processor and the VP it
// runs on. With one VP every virtual processor maps onto VP 0.
TEST_P(BundleTreeTest, VirtualProcessorsOfAnySize) {
  const int vprocs[] = {0, 1, 63, 64, 1000003, 1 << 30, 2147483646};  // the largest: WEFT_VPROC(v) = v + 1
  weft_bundle_t *aff = Lib(WEFT_SCHED_LIFO | WEFT_SCHED_AFFINITY);
  ASSERT_NE(aff, nullptr);
  for (weft_bundle_t *b : {static_cast<weft_bundle_t *>(nullptr), aff}) {
    WhereRan w[sizeof vprocs / sizeof vprocs[0]];
    std::vector<weft_thread_t *> ts;
    for (size_t i = 0; i < sizeof vprocs / sizeof vprocs[0]; i++) {
      weft_attr_t attr = InBundle(b);
      attr.vproc = WEFT_VPROC(vprocs[i]);
      ts.push_back(Spawn(ReportWhere, &w[i], &attr));
    }
    JoinAll(ts);
    for (size_t i = 0; i < sizeof vprocs / sizeof vprocs[0]; i++) {
      EXPECT_EQ(w[i].affinity, vprocs[i]);
      EXPECT_GE(w[i].vp, 0);
      EXPECT_LT(w[i].vp, nvps());
      EXPECT_EQ(w[i].vp_count, nvps());
      if (nvps() == 1) {
        EXPECT_EQ(w[i].vp, 0);
      }
    }
  }
  EXPECT_EQ(weft_schedlib_bundle_destroy(aff), 0);
  weft_attr_t bad;
  weft_attr_init(&bad);
  bad.vproc = -1;
  weft_thread_t *t = nullptr;
  EXPECT_EQ(weft_create(&t, &bad, ReportWhere, nullptr), WEFT_EINVAL);
}

// ---- stop and continue ----------------------------------------------------------------

struct StopShared {
  weft_sem_t go;
  std::atomic<int> new_started{0};
  std::atomic<int> first_resumed{0};
  std::atomic<int> new_seen_by_first{-1};
  std::atomic<int> first_started{0};
};

void *NewWorker(void *a) {
  static_cast<StopShared *>(a)->new_started++;
  return nullptr;
}

// Started before the stop: blocks, resumes while the bundle is stopped, and yields
// (a yield must not start a held-back thread either).
void *FirstWorker(void *a) {
  StopShared *s = static_cast<StopShared *>(a);
  s->first_started = 1;
  EXPECT_EQ(weft_sem_wait(&s->go), 0);
  s->first_resumed = 1;
  for (int i = 0; i < 20; i++) weft_yield();
  s->new_seen_by_first = s->new_started.load();
  return nullptr;
}

// While a bundle is stopped its new threads do not start; a thread that had started
// blocks and resumes as usual (FIFO/LIFO hand woken threads to a dispatch queue);
// after continue everything runs. At 2 and 4 VPs the main thread does not switch
// after continue: another VP must be woken to run them.
TEST_P(BundleTreeTest, StopHoldsBackNewThreadsUntilContinue) {
  for (unsigned kind : {unsigned{WEFT_SCHED_FIFO},
                        unsigned{WEFT_SCHED_LIFO | WEFT_SCHED_EAGER | WEFT_SCHED_AFFINITY}}) {
    // no SCOPED_TRACE: its stack is per kernel thread, and the test thread migrates
    const char *name = weft_schedlib_kind_name(kind);
    weft_bundle_t *b = Lib(kind);
    ASSERT_NE(b, nullptr);
    StopShared s;
    ASSERT_EQ(weft_sem_init(&s.go, 0), 0);
    weft_attr_t attr = InBundle(b);
    weft_thread_t *first = Spawn(FirstWorker, &s, &attr);
    ASSERT_TRUE(SleepUntil([&] { return s.first_started.load() == 1; }))
        << "the first thread has started (and waits on the semaphore, or is about to)";
    EXPECT_EQ(weft_bundle_is_stopped(b), 0);
    ASSERT_EQ(weft_bundle_stop(b), 0);
    EXPECT_EQ(weft_bundle_stop(b), 0) << "stopping again changes nothing";
    EXPECT_EQ(weft_bundle_is_stopped(b), 1);
    const int n = 16;
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < n; i++) ts.push_back(Spawn(NewWorker, &s, &attr));
    EXPECT_EQ(weft_sem_signal(&s.go), 0);
    Join(first);  // resumes although its bundle is stopped
    EXPECT_EQ(s.first_resumed.load(), 1);
    EXPECT_EQ(s.new_seen_by_first.load(), 0) << name << ": its yields started no new thread";
    IdleAWhile();
    EXPECT_EQ(s.new_started.load(), 0) << name << ": no new thread started while stopped";
    ASSERT_EQ(weft_bundle_continue(b), 0);
    EXPECT_EQ(weft_bundle_is_stopped(b), 0);
    if (nvps() > 1) {
      EXPECT_TRUE(SpinUntil([&] { return s.new_started.load() == n; }))
          << name << ": continue wakes a VP to run the held-back threads";
    }
    JoinAll(ts);
    EXPECT_EQ(s.new_started.load(), n) << name;
    EXPECT_EQ(weft_bundle_continue(b), 0) << "continuing again changes nothing";
    EXPECT_EQ(weft_sem_destroy(&s.go), 0);
    EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
  }
}

// Stopping a bundle stops the bundles below it; stopping the root stops them all.
TEST_P(BundleTreeTest, StopCoversTheSubtree) {
  weft_bundle_t *root = weft_bundle_root();
  weft_bundle_t *a = Lib(WEFT_SCHED_FIFO);
  weft_bundle_t *c = Lib(WEFT_SCHED_LIFO, a);
  weft_bundle_t *other = Lib(WEFT_SCHED_FIFO);
  ASSERT_TRUE(a && c && other);
  ASSERT_EQ(weft_bundle_stop(a), 0);
  EXPECT_EQ(weft_bundle_is_stopped(c), 1);
  EXPECT_EQ(weft_bundle_is_stopped(other), 0);
  ASSERT_EQ(weft_bundle_continue(c), 0);
  EXPECT_EQ(weft_bundle_is_stopped(c), 1) << "still stopped through its parent";

  StopShared s;
  weft_attr_t attr = InBundle(c);
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 8; i++) ts.push_back(Spawn(NewWorker, &s, &attr));
  IdleAWhile();
  EXPECT_EQ(s.new_started.load(), 0);
  ASSERT_EQ(weft_bundle_continue(a), 0);
  JoinAll(ts);
  EXPECT_EQ(s.new_started.load(), 8);

  ASSERT_EQ(weft_bundle_stop(root), 0);
  EXPECT_EQ(weft_bundle_is_stopped(a), 1);
  EXPECT_EQ(weft_bundle_is_stopped(other), 1);
  // the root's own threads still run: its scheduler hands them to dispatch queues
  EXPECT_EQ(RunInThread([] { return P(7); }), P(7));
  attr = InBundle(other);
  ts.clear();
  for (int i = 0; i < 8; i++) ts.push_back(Spawn(NewWorker, &s, &attr));
  IdleAWhile();
  EXPECT_EQ(s.new_started.load(), 8);
  ASSERT_EQ(weft_bundle_continue(root), 0);
  JoinAll(ts);
  EXPECT_EQ(s.new_started.load(), 16);

  // a stopped bundle can be destroyed; the others are unaffected
  ASSERT_EQ(weft_bundle_stop(other), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(other), 0);
  EXPECT_EQ(weft_bundle_is_stopped(a), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(c), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(a), 0);
}

TEST_P(BundleTreeTest, StopRejectsBadBundles) {
  EXPECT_EQ(weft_bundle_stop(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_bundle_continue(nullptr), WEFT_EINVAL);
  alignas(64) char fake[256] = {};
  EXPECT_EQ(weft_bundle_stop(reinterpret_cast<weft_bundle_t *>(fake)), WEFT_EINVAL);
  EXPECT_EQ(weft_bundle_is_stopped(nullptr), 0);
}

// In a checked build, a processor_idle handler that calls a function taking the bundle
// lock itself (here weft_bundle_focus) is caught instead of deadlocking.
weft_thread_t *FocusFromIdle(weft_bundle_t *, weft_vp_t *) {
  (void)weft_bundle_focus();
  return nullptr;
}

TEST(BundleTreeDeathTest, BundleCallFromIdleHandlerIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse",
    weft_sched_ops_t ops = PassSched::kOps;
    ops.processor_idle = FocusFromIdle;
    PassSched ps;
    weft_bundle_t *b = nullptr;
    weft_bundle_create(&b, nullptr, &ops, &ps);
    // The VP goes idle and asks b. One short sleep is not enough: where the idle
    // loop's first pass is slow (qemu translating it), the sleep's timer is due by
    // the time the VP looks for work, and it resumes this thread before it asks any
    // bundle. So sleep again, for up to 10 s in all; the handler ends it at once.
    for (int i = 0; i < 10000; i++) weft_sleep_ns(1000 * 1000));
}

// The same from a leaf scheduler's handler raised by its own thread's yield (the
// question made without the bundle lock): weft_bundle_stop there would wait for the
// question it is called from.
weft_thread_t *StopFromLeafIdle(weft_bundle_t *b, weft_vp_t *vp) {
  static int calls;
  // the first call (the idle VP's sweep, under the lock) hands out the kept thread; the
  // second comes from that thread's yield (the leaf question)
  if (calls++ == 0) return LeafSched::Idle(b, vp);
  (void)weft_bundle_stop(b);
  return nullptr;
}

TEST(BundleTreeDeathTest, BundleCallFromLeafQuestionIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse",
    weft_sched_ops_t ops = LeafSched::kOps;
    ops.processor_idle = StopFromLeafIdle;
    LeafSched k;
    weft_bundle_t *b = nullptr;
    weft_bundle_create(&b, nullptr, &ops, &k);
    weft_attr_t a = InBundle(b);
    a.detached = 1;
    // kept by the scheduler: started by the idle VP's sweep while the main thread
    // sleeps, then its yield with nothing queued asks its own bundle
    weft_create(nullptr, &a, +[](void *) -> void * { weft_yield(); return nullptr; }, nullptr);
    for (int i = 0; i < 10000; i++) weft_sleep_ns(1000 * 1000));
}

}  // namespace
