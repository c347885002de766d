// tests/unit/sched_conformance_test.cc - one conformance suite that every built-in
// scheduler passes: the root bundle (default scheduler, inlined), a bundle with a copy
// of weft_sched_default, the eight FIFO/LIFO variants and the priority scheduler of
// weft/schedlib.h, the example custom FIFO scheduler (examples/custom_sched.c,
// compiled in below), and weft_sched_threadlist over a FIFO and a LIFO thread list
// (weft/threadlist.h); each for 1, 2 and 4 (oversubscribed) VPs. Then checks of what
// each policy promises where one VP makes it deterministic, and the default
// scheduler's placement decisions, the same through the root and through a bundle.
//
// Bundles other than the root are created with a wrapper table that counts events and
// forwards each to the scheduler under test (same bundle, same data).
#include <weft/schedlib.h>
#include <weft/threadlist.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "weft_test.h"

// examples/custom_sched.c, compiled into this test with WEFT_EXAMPLE_NO_MAIN.
extern "C" const weft_sched_ops_t custom_fifo_ops;

using namespace weft_test;

namespace {

// kListFifo/kListLifo: weft_sched_threadlist over a FIFO / LIFO thread list
// (weft/threadlist.h).
enum Family { kRoot, kDefaultCopy, kExample, kLib, kListFifo, kListLifo };

struct SchedParam {
  Family family;
  unsigned kind;  // kLib: a weft_schedlib kind
  int nvps;
  std::string Name() const {
    std::string s = family == kRoot ? "root" : family == kDefaultCopy ? "default_copy"
                  : family == kExample ? "example_fifo" : family == kListFifo ? "threadlist_fifo"
                  : family == kListLifo ? "threadlist_lifo" : weft_schedlib_kind_name(kind);
    return s + "_" + std::to_string(nvps) + "vp";
  }
  // Whether new threads run newest first at one VP: the LIFO lists, and the default
  // scheduler (depth-first: new threads go to the front of the dispatch queue).
  bool Lifo() const {
    return family == kListLifo || family == kRoot || family == kDefaultCopy ||
           (family == kLib && kind != WEFT_SCHED_PRIORITY && (kind & WEFT_SCHED_LIFO));
  }
  // Work-first creation: a new thread runs before weft_create() returns.
  bool WorkFirst() const { return family == kLib && kind == WEFT_SCHED_WORK_FIRST; }
  bool Eager() const { return family == kLib && kind != WEFT_SCHED_PRIORITY && (kind & WEFT_SCHED_EAGER); }
  bool Priority() const { return family == kLib && kind == WEFT_SCHED_PRIORITY; }
  bool Affinity() const {
    return family == kLib && kind != WEFT_SCHED_PRIORITY && (kind & WEFT_SCHED_AFFINITY);
  }
  // Whether every ready thread of the bundle is reachable by weft_yield() (see
  // weft/schedlib.h: the library keeps never-run threads, and the priority scheduler
  // all threads, in its own structures, which a yield does not consult).
  // weft_sched_threadlist keeps every ready thread on its list.
  // The work-first scheduler keeps nothing to itself.
  bool YieldReachesAll() const {
    return (family != kLib || WorkFirst()) && family != kListFifo && family != kListLifo;
  }
};

// ---- the wrapper table: counts, then forwards to the scheduler under test ----------
struct Counts {
  std::atomic<long> created{0}, started{0}, terminated{0}, blocked{0}, unblocked{0}, idle{0};
  std::atomic<long> idle_handed{0};
};
Counts g_counts;
// The table under test. Atomic: a second bundle of a test stores it again while idle
// VPs read it through the first (relaxed: the same value; the bundle's creation
// publishes it to the handlers of the new bundle).
std::atomic<const weft_sched_ops_t *> g_inner_{nullptr};
const weft_sched_ops_t *Inner() { return g_inner_.load(std::memory_order_relaxed); }

void WCreated(weft_bundle_t *b, weft_thread_t *t) {
  g_counts.created++;
  Inner()->thread_created(b, t);
}
void WStarted(weft_bundle_t *b, weft_thread_t *t) {
  g_counts.started++;
  if (Inner()->thread_started) Inner()->thread_started(b, t);
}
void WTerminated(weft_bundle_t *b, weft_thread_t *t) {
  g_counts.terminated++;
  if (Inner()->thread_terminated) Inner()->thread_terminated(b, t);
}
void WBlocked(weft_bundle_t *b, weft_thread_t *t) {
  g_counts.blocked++;
  if (Inner()->thread_blocked) Inner()->thread_blocked(b, t);
}
void WUnblocked(weft_bundle_t *b, weft_thread_t *t) {
  g_counts.unblocked++;
  Inner()->thread_unblocked(b, t);
}
weft_thread_t *WIdle(weft_bundle_t *b, weft_vp_t *vp) {
  g_counts.idle++;
  weft_thread_t *t = Inner()->processor_idle ? Inner()->processor_idle(b, vp) : nullptr;
  if (t) g_counts.idle_handed++;
  return t;
}
const weft_sched_ops_t kWrapper = {WCreated, WStarted, WTerminated, WBlocked,
                                   WUnblocked, nullptr, nullptr, WIdle, 0};

class SchedConformance : public WeftTest, public ::testing::WithParamInterface<SchedParam> {
 protected:
  void SetUp() override {
    StartWeft(Param().nvps);
    for (auto *c : {&g_counts.created, &g_counts.started, &g_counts.terminated, &g_counts.blocked,
                    &g_counts.unblocked, &g_counts.idle, &g_counts.idle_handed})
      c->store(0);
    bundle_ = MakeBundle(&data_);
    if (Param().family != kRoot) {
      ASSERT_NE(bundle_, nullptr);
    }
  }
  void TearDown() override {
    if (bundle_ != nullptr) {
      EXPECT_EQ(DestroyBundle(bundle_, data_), 0);
    }
    WeftTest::TearDown();
  }
  const SchedParam &Param() const { return GetParam(); }
  int nvps() const { return Param().nvps; }

  // A new bundle scheduled by the scheduler under test through the wrapper (NULL for
  // the root family: the root bundle itself).
  weft_bundle_t *MakeBundle(void **data) {
    *data = nullptr;
    const SchedParam &p = Param();
    if (p.family == kRoot) return nullptr;
    if (p.family == kDefaultCopy) {
      g_inner_.store(&weft_sched_default, std::memory_order_relaxed);
    } else if (p.family == kExample) {
      g_inner_.store(&custom_fifo_ops, std::memory_order_relaxed);
    } else if (p.family == kListFifo || p.family == kListLifo) {
      g_inner_.store(&weft_sched_threadlist, std::memory_order_relaxed);
      weft_threadlist_t *l = nullptr;
      EXPECT_EQ(weft_threadlist_create(&l, p.family == kListFifo ? &weft_threadlist_fifo
                                                                  : &weft_threadlist_lifo,
                                       nullptr), 0);
      *data = l;
    } else {
      g_inner_.store(weft_schedlib_ops(p.kind), std::memory_order_relaxed);
      EXPECT_EQ(weft_schedlib_data_create(p.kind, data), 0);
    }
    weft_bundle_t *b = nullptr;
    EXPECT_EQ(weft_bundle_create(&b, nullptr, &kWrapper, *data), 0);
    return b;
  }
  int DestroyBundle(weft_bundle_t *b, void *data) const {
    int rc = weft_bundle_destroy(b);
    if (rc != 0) return rc;
    if (Param().family == kListFifo || Param().family == kListLifo)
      EXPECT_EQ(weft_threadlist_destroy(static_cast<weft_threadlist_t *>(data)), 0);
    else weft_schedlib_data_destroy(data);
    return rc;
  }
  weft_attr_t Attr(int affinity = -1) const {
    weft_attr_t a;
    weft_attr_init(&a);
    a.bundle = bundle_;
    a.vproc = WEFT_VPROC(affinity);
    return a;
  }
  bool Wrapped() const { return Param().family != kRoot; }

  weft_bundle_t *bundle_ = nullptr;
  void *data_ = nullptr;
};

std::vector<SchedParam> AllParams() {
  std::vector<SchedParam> v;
  for (int n : {1, 2, 4}) {
    v.push_back({kRoot, 0, n});
    v.push_back({kDefaultCopy, 0, n});
    v.push_back({kExample, 0, n});
    for (unsigned k = 0; k < 8; ++k) v.push_back({kLib, k, n});
    v.push_back({kLib, WEFT_SCHED_PRIORITY, n});
    v.push_back({kLib, WEFT_SCHED_WORK_FIRST, n});
    v.push_back({kListFifo, 0, n});
    v.push_back({kListLifo, 0, n});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, SchedConformance, ::testing::ValuesIn(AllParams()),
                         [](const ::testing::TestParamInfo<SchedParam> &i) { return i.param.Name(); });

struct RunCounts {
  std::vector<std::atomic<int>> runs;
  explicit RunCounts(size_t n) : runs(n) {}
};
struct Arg {
  RunCounts *rc;
  long i;
};

// Every thread runs exactly once: many threads created from the main thread, each
// counted by index; created/started/terminated events once per thread.
TEST_P(SchedConformance, EveryThreadRunsExactlyOnce) {
  const long n = Scaled(3000, 50);
  RunCounts rc(n);
  std::vector<Arg> args(n);
  std::vector<weft_thread_t *> ts(n);
  weft_attr_t a = Attr();
  for (long i = 0; i < n; ++i) {
    args[i] = {&rc, i};
    ASSERT_EQ(weft_create(&ts[i], &a, +[](void *p) {
      auto *x = static_cast<Arg *>(p);
      x->rc->runs[x->i]++;
      return p;
    }, &args[i]), 0);
  }
  for (long i = 0; i < n; ++i) EXPECT_EQ(Join(ts[i]), &args[i]);
  for (long i = 0; i < n; ++i) ASSERT_EQ(rc.runs[i].load(), 1) << "thread " << i;
  if (Wrapped()) {
    EXPECT_EQ(g_counts.created.load(), n);
    EXPECT_EQ(g_counts.started.load(), n);
    EXPECT_EQ(g_counts.terminated.load(), n);
  }
}

// Threads that create threads (a binary tree, detached leaves counted): all run once.
TEST_P(SchedConformance, NestedCreationRunsEveryThreadOnce) {
  static std::atomic<long> ran;
  static weft_bundle_t *b;
  ran = 0;
  b = bundle_;
  const long depth = Scale() < 0.5 ? 8 : 11;
  struct Node {
    static void *Run(void *p) {
      long d = reinterpret_cast<intptr_t>(p);
      ran++;
      if (d == 0) return nullptr;
      weft_attr_t a;
      weft_attr_init(&a);
      a.bundle = b;
      weft_thread_t *t[2];
      for (auto &x : t) EXPECT_EQ(weft_create(&x, &a, Run, P(d - 1)), 0);
      for (auto *x : t) Join(x);
      return nullptr;
    }
  };
  weft_attr_t a = Attr();
  weft_thread_t *root = nullptr;
  ASSERT_EQ(weft_create(&root, &a, Node::Run, P(depth)), 0);
  Join(root);
  EXPECT_EQ(ran.load(), (2L << depth) - 1);
}

// No thread is lost under blocking and unblocking: threads of the bundle block on a
// mutex, a semaphore, a condition variable and joins, many times; exact totals.
TEST_P(SchedConformance, NoThreadLostUnderBlocking) {
  struct Shared {
    weft_mutex_t m = WEFT_MUTEX_INIT;
    weft_cond_t c = WEFT_COND_INIT;
    weft_sem_t items = WEFT_SEM_INIT(0);
    long counter = 0;  // under m
    long turn = 0;     // under m
    std::atomic<long> consumed{0};
    long rounds = 0;
    int nthreads = 0;
    weft_bundle_t *b = nullptr;
  } sh;
  sh.rounds = Scaled(400, 20);
  sh.nthreads = 6;
  sh.b = bundle_;
  weft_attr_t a = Attr();
  std::vector<weft_thread_t *> ts;
  // mutex: counter increments
  for (int i = 0; i < sh.nthreads; ++i)
    ts.push_back(Spawn(+[](void *p) {
      auto *s = static_cast<Shared *>(p);
      for (long r = 0; r < s->rounds; ++r) {
        weft_mutex_lock(&s->m);
        s->counter++;
        weft_mutex_unlock(&s->m);
      }
      return P(0);
    }, &sh, &a));
  // semaphore: 2 producers, 2 consumers
  for (int i = 0; i < 2; ++i) {
    ts.push_back(Spawn(+[](void *p) {
      auto *s = static_cast<Shared *>(p);
      for (long r = 0; r < s->rounds; ++r) weft_sem_signal(&s->items);
      return P(0);
    }, &sh, &a));
    ts.push_back(Spawn(+[](void *p) {
      auto *s = static_cast<Shared *>(p);
      for (long r = 0; r < s->rounds; ++r) {
        weft_sem_wait(&s->items);
        s->consumed++;
      }
      return P(0);
    }, &sh, &a));
  }
  // condition variable: two threads take strict turns
  static Shared *sp;
  sp = &sh;  // before any of the threads that read it exists
  for (long me = 0; me < 2; ++me) {
    ts.push_back(Spawn(+[](void *p) {
      long me = I(p);
      Shared *s = sp;
      for (long r = 0; r < s->rounds; ++r) {
        weft_mutex_lock(&s->m);
        while (s->turn % 2 != me) weft_cond_wait(&s->c, &s->m);
        s->turn++;
        weft_cond_broadcast(&s->c);
        weft_mutex_unlock(&s->m);
      }
      return P(0);
    }, P(me), &a));
  }
  // joins: a chain of threads, each joining the one it created
  static std::atomic<long> chain_ran;
  static weft_bundle_t *cb;
  chain_ran = 0;
  cb = bundle_;
  struct Chain {
    static void *Run(void *p) {
      long left = I(p);
      chain_ran++;
      if (left == 0) return nullptr;
      weft_attr_t a;
      weft_attr_init(&a);
      a.bundle = cb;
      weft_thread_t *t = nullptr;
      EXPECT_EQ(weft_create(&t, &a, Run, P(left - 1)), 0);
      Join(t);
      return nullptr;
    }
  };
  const long chain = Scaled(300, 10);
  ts.push_back(Spawn(Chain::Run, P(chain), &a));
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(sh.counter, sh.nthreads * sh.rounds);
  EXPECT_EQ(sh.consumed.load(), 2 * sh.rounds);
  EXPECT_EQ(sh.turn, 2 * sh.rounds);
  EXPECT_EQ(chain_ran.load(), chain + 1);
  if (Wrapped()) {
    EXPECT_EQ(g_counts.terminated.load(), g_counts.created.load());
  }
}

// processor_idle events reach the bundle's scheduler: the main thread blocks (its VP
// goes idle) until a plain OS thread wakes it.
TEST_P(SchedConformance, ProcessorIdleEventsAreDelivered) {
  if (!Wrapped()) GTEST_SKIP() << "the root bundle's table cannot be wrapped";
  weft_attr_t a = Attr();
  weft_thread_t *t = Spawn(+[](void *p) { return p; }, P(5), &a);
  EXPECT_EQ(Join(t), P(5));
  Event ev;
  std::thread waker([&] {
    while (g_counts.idle.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ev.Set();
  });
  ev.Wait();
  waker.join();
  EXPECT_GT(g_counts.idle.load(), 0);
}

// Stacks are bound before a thread runs: threads use a large local array. With one
// VP and the creator never switching, eager variants take a stack at creation (the
// stack cache shrinks) and lazy ones do not.
TEST_P(SchedConformance, StacksAreBoundBeforeRunning) {
  const int k = 16;
  weft_attr_t a = Attr();
  auto big = +[](void *p) -> void * {
    volatile char buf[96 * 1024];
    for (size_t i = 0; i < sizeof buf; i += 512) buf[i] = static_cast<char>(i);
    return P(I(p) + buf[512]);
  };
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < k; ++i) ts.push_back(Spawn(big, P(i), &a));
  for (int i = 0; i < k; ++i) EXPECT_EQ(Join(ts[i]), P(i + static_cast<char>(512)));
  if (nvps() != 1) return;
  weft_debug_stats_t before, after;
  weft_debug_stats(&before);
  ASSERT_GE(before.stacks_cached, 1u) << "the warm-up left no cached stack";
  ts.clear();
  for (int i = 0; i < k; ++i) ts.push_back(Spawn(big, P(i), &a));
  weft_debug_stats(&after);  // nothing has run yet: one VP, and we did not switch
  if (Param().Eager()) {
    EXPECT_LT(after.stacks_cached, before.stacks_cached) << "eager binding took no stack at create";
  } else {
    EXPECT_EQ(after.stacks_cached, before.stacks_cached) << "lazy binding took a stack at create";
  }
  for (int i = 0; i < k; ++i) EXPECT_EQ(Join(ts[i]), P(i + static_cast<char>(512)));
}

// Threads created (and joined) by plain OS threads run exactly once.
TEST_P(SchedConformance, ThreadsCreatedFromPlainOsThreads) {
  const long per = Scaled(300, 20);
  std::atomic<long> ran{0};
  std::atomic<int> os_done{0};
  Event all_done;
  weft_attr_t a = Attr();
  std::vector<std::thread> os;
  for (int o = 0; o < 3; ++o)
    os.emplace_back([&] {
      std::vector<weft_thread_t *> ts(per);
      for (long i = 0; i < per; ++i)
        ASSERT_EQ(weft_create(&ts[i], &a, +[](void *p) {
          static_cast<std::atomic<long> *>(p)->fetch_add(1);
          return p;
        }, &ran), 0);
      for (long i = 0; i < per; ++i) ASSERT_EQ(weft_join(ts[i], nullptr), 0);
      if (++os_done == 3) all_done.Set();
    });
  // std::thread::join would hold this VP in the kernel (with one VP, nothing else
  // could run): block the weft thread until the last OS thread is done instead
  all_done.Wait();
  for (auto &t : os) t.join();
  EXPECT_EQ(ran.load(), 3 * per);
}

// Yield inside bundle threads: each thread yields many times and finishes; and two
// started threads that wait for each other by yielding make progress (only where a
// yield reaches every ready thread, see YieldReachesAll).
TEST_P(SchedConformance, YieldInsideBundleThreads) {
  const long yields = Scaled(2000, 50);
  static std::atomic<long> total;
  total = 0;
  weft_attr_t a = Attr();
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 8; ++i)
    ts.push_back(Spawn(+[](void *p) {
      for (long y = 0; y < I(p); ++y) {
        weft_yield();
        total++;
      }
      return P(0);
    }, P(yields), &a));
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(total.load(), 8 * yields);
  if (!Param().YieldReachesAll() && nvps() == 1) return;
  // ping-pong by yields, after both have started (a barrier: blocking wakes them)
  struct Pp {
    weft_barrier_t bar;
    std::atomic<long> turn{0};
    long rounds;
  } pp;
  weft_barrier_init(&pp.bar, 2);
  pp.rounds = Scaled(500, 20);
  static Pp *ppp;
  ppp = &pp;
  ts.clear();
  for (long me = 0; me < 2; ++me)
    ts.push_back(Spawn(+[](void *p) {
      long me = I(p);
      weft_barrier_wait(&ppp->bar);
      for (long r = 0; r < ppp->rounds; ++r) {
        EXPECT_TRUE(YieldUntil([&] { return ppp->turn.load() % 2 == me; }, 30));
        ppp->turn++;
      }
      return P(0);
    }, P(me), &a));
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(pp.turn.load(), 2 * pp.rounds);
  weft_barrier_destroy(&pp.bar);
}

// weft_bundle_destroy: WEFT_EBUSY while a thread lives, 0 once all have finished.
TEST_P(SchedConformance, DestroyBusyThenEmpty) {
  if (!Wrapped()) GTEST_SKIP() << "the root bundle is never destroyed";
  void *data = nullptr;
  weft_bundle_t *b = MakeBundle(&data);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(DestroyBundle(b, data), 0) << "a new bundle is empty";
  b = MakeBundle(&data);
  Event ev;
  weft_attr_t a;
  weft_attr_init(&a);
  a.bundle = b;
  weft_thread_t *t = Spawn(+[](void *p) {
    static_cast<Event *>(p)->Wait();
    return P(3);
  }, &ev, &a);
  EXPECT_EQ(DestroyBundle(b, data), WEFT_EBUSY);
  ev.Set();
  EXPECT_EQ(Join(t), P(3));
  EXPECT_EQ(DestroyBundle(b, data), 0);
}

// The bundle's live count is kept per VP: a thread created on any VP keeps the bundle
// busy, and chains whose links are created and finish on different VPs leave it
// empty, never empty early (weft_bundle_destroy returning 0 while a link lives would
// free the bundle under it: ASan).
namespace destroy_count {
std::atomic<long> chains_left, heads_made;
weft_attr_t link_attr;
void *Link(void *p) {
  long left = I(p);
  if (left > 1) EXPECT_EQ(weft_create(nullptr, &link_attr, Link, P(left - 1)), 0);
  else chains_left--;
  return nullptr;
}
}  // namespace destroy_count

TEST_P(SchedConformance, DestroyCountsThreadsOfEveryVp) {
  if (!Wrapped()) GTEST_SKIP() << "the root bundle is never destroyed";
  // one thread of the bundle created from each VP (by a root thread bound there)
  for (int v = 0; v < nvps(); v++) {
    Event ev;
    struct Ctx {
      weft_attr_t a;
      Event *ev;
      weft_thread_t *t;
    } ctx{Attr(), &ev, nullptr};
    weft_attr_t on_v;
    weft_attr_init(&on_v);
    on_v.vproc = WEFT_VPROC(v);
    Join(Spawn(+[](void *p) {
      auto *c = static_cast<Ctx *>(p);
      c->t = Spawn(+[](void *e) {
        static_cast<Event *>(e)->Wait();
        return P(7);
      }, c->ev, &c->a);
      return P(0);
    }, &ctx, &on_v));
    ASSERT_NE(ctx.t, nullptr);
    EXPECT_EQ(weft_bundle_destroy(bundle_), WEFT_EBUSY) << "a thread created on VP " << v;
    ev.Set();
    EXPECT_EQ(Join(ctx.t), P(7));
  }
  // detached chains started on every VP, the bundle polled for empty while they run
  using namespace destroy_count;
  const long links = 2000;
  link_attr = Attr();
  link_attr.detached = 1;
  chains_left = nvps();
  heads_made = 0;
  for (int v = 0; v < nvps(); v++) {
    weft_attr_t on_v;
    weft_attr_init(&on_v);
    on_v.vproc = WEFT_VPROC(v);
    on_v.detached = 1;
    ASSERT_EQ(weft_create(nullptr, &on_v, +[](void *) -> void * {
      EXPECT_EQ(weft_create(nullptr, &link_attr, Link, P(links)), 0);
      heads_made++;
      return nullptr;
    }, nullptr), 0);
  }
  // from here the bundle has a live thread until the last link finishes
  ASSERT_TRUE(YieldUntil([&] { return heads_made.load() == nvps(); }));
  int rc = WEFT_EBUSY;
  EXPECT_TRUE(YieldUntil([&] { return (rc = weft_bundle_destroy(bundle_)) != WEFT_EBUSY; }));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(chains_left.load(), 0) << "the bundle was empty before its last links finished";
  if (Param().family == kListFifo || Param().family == kListLifo)
    EXPECT_EQ(weft_threadlist_destroy(static_cast<weft_threadlist_t *>(data_)), 0);
  else weft_schedlib_data_destroy(data_);
  bundle_ = nullptr;
}

// ---- policy checks with one VP (deterministic) -------------------------------------

// Main creates n threads (never switching), then joins them in creation order; each
// records when it ran. FIFO schedulers run them in creation order, LIFO ones (and
// the default scheduler, depth-first) in reverse (the resumed main thread runs
// before new work, so joins do not reorder); work-first runs each as it is created.
TEST_P(SchedConformance, OneVpOrder) {
  if (nvps() != 1) GTEST_SKIP() << "deterministic with one VP only";
  const int n = 12;
  static std::vector<int> order;
  static SpinLock lock;
  order.clear();
  std::vector<weft_thread_t *> ts;
  std::vector<int> prio(n);
  for (int i = 0; i < n; ++i) {
    weft_attr_t a = Attr();
    auto body = +[](void *p) {
      lock.lock();
      order.push_back(static_cast<int>(I(p)));
      lock.unlock();
      return p;
    };
    weft_thread_t *t = nullptr;
    if (Param().Priority()) {
      prio[i] = (i * 7) % 4;  // priorities 0..3, several threads per level
      ASSERT_EQ(weft_schedlib_create_priority(&t, &a, prio[i], body, P(i)), 0);
      EXPECT_EQ(weft_schedlib_priority(t), prio[i]);
    } else {
      t = Spawn(body, P(i), &a);
    }
    ts.push_back(t);
  }
  for (weft_thread_t *t : ts) Join(t);
  ASSERT_EQ(order.size(), static_cast<size_t>(n));
  std::vector<int> want(n);
  for (int i = 0; i < n; ++i) want[i] = i;
  if (Param().Lifo()) std::reverse(want.begin(), want.end());
  if (Param().Priority())
    std::stable_sort(want.begin(), want.end(), [&](int x, int y) { return prio[x] > prio[y]; });
  EXPECT_EQ(order, want);
}

// Priority: a thread made ready again runs by the priority it has then; a running
// thread is not preempted (non-preemptive). With one VP: a low thread raises its own
// priority and yields... instead, blocked threads woken together run by priority.
TEST_P(SchedConformance, OneVpPriorityOfWokenThreads) {
  if (!Param().Priority() || nvps() != 1) GTEST_SKIP() << "priority scheduler, one VP";
  static std::vector<int> order;
  static SpinLock lock;
  static Event go;
  order.clear();
  go.~Event();
  new (&go) Event();
  weft_sem_t sem = WEFT_SEM_INIT(0);
  static weft_sem_t *semp;
  semp = &sem;
  std::vector<weft_thread_t *> ts;
  const int n = 6;
  for (int i = 0; i < n; ++i) {
    weft_attr_t a = Attr();
    weft_thread_t *t = nullptr;
    auto body = +[](void *p) {
      weft_schedlib_set_priority(weft_self(), static_cast<int>(I(p)));  // takes effect when woken
      weft_sem_wait(semp);
      lock.lock();
      order.push_back(static_cast<int>(I(p)));
      lock.unlock();
      return p;
    };
    ASSERT_EQ(weft_schedlib_create_priority(&t, &a, 0, body, P(i)), 0);
    ts.push_back(t);
  }
  // let all of them block: the main thread blocks until a plain thread wakes it
  Event started;
  std::thread waker([&] {
    while (g_counts.blocked.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    started.Set();
  });
  started.Wait();
  waker.join();
  for (int i = 0; i < n; ++i) weft_sem_signal(&sem);  // all ready; main keeps the VP
  for (weft_thread_t *t : ts) Join(t);
  std::vector<int> want = {5, 4, 3, 2, 1, 0};
  EXPECT_EQ(order, want);
}

// Affinity (two VPs): VP 1 is kept busy by a root thread; the main thread creates
// threads with affinity 0 and 1 alternately, then joins them, so VP 0 runs them all.
// An affinity scheduler placed the affinity-0 threads on VP 0's own list, which VP 0
// empties before it steals VP 1's: every affinity-0 thread runs before any affinity-1.
TEST_P(SchedConformance, AffinityOwnListBeforeStealing) {
  if (!Param().Affinity() || nvps() != 2) GTEST_SKIP() << "affinity variants, two VPs";
  if (weft_vp_self() != 0) GTEST_SKIP() << "the main thread is not on VP 0";
  static std::atomic<int> hog_state;  // 0 new, 1 running on VP 1, 2 released
  hog_state = 0;
  weft_attr_t ha;
  weft_attr_init(&ha);
  ha.vproc = WEFT_VPROC(1);
  weft_thread_t *hog = Spawn(+[](void *) {
    hog_state = weft_vp_self() == 1 ? 1 : 3;
    SpinUntil([] { return hog_state.load() == 2; });
    return P(0);
  }, nullptr, &ha);
  ASSERT_TRUE(SpinUntil([] { return hog_state.load() != 0; }));
  ASSERT_EQ(hog_state.load(), 1) << "the hog did not run on VP 1";
  static std::vector<std::pair<int, int>> ran;  // (affinity, vp)
  static SpinLock lock;
  ran.clear();
  std::vector<weft_thread_t *> ts;
  const int n = 16;
  for (int i = 0; i < n; ++i) {
    weft_attr_t a = Attr(i % 2 == 0 ? 0 : 3);  // 3 mod 2 = VP 1
    ts.push_back(Spawn(+[](void *p) {
      lock.lock();
      ran.emplace_back(static_cast<int>(I(p)), weft_vp_self());
      lock.unlock();
      return p;
    }, P(a.vproc - 1), &a));  // the virtual processor
  }
  for (weft_thread_t *t : ts) Join(t);
  hog_state = 2;
  Join(hog);
  ASSERT_EQ(ran.size(), static_cast<size_t>(n));
  bool seen_other = false;
  for (auto &r : ran) {
    EXPECT_EQ(r.second, 0) << "VP 1 was busy";
    if (r.first == 3) {
      seen_other = true;
    } else {
      EXPECT_FALSE(seen_other) << "an affinity-1 thread was stolen while VP 0 had its own";
    }
  }
}

// ---- placement: one policy, inlined for the root and called by sched/default.c ------
// The default scheduler's placement decisions are made by one function, which the root
// bundle's inlined paths and the table of src/sched/default.c (run here by a bundle
// given a copy of weft_sched_default) both call; these cases fail if the two drift
// apart. Each decision is observed with every VP busy: VP i runs a "holder" (a root
// thread that never blocks) that only yields while a probe thread is due to run, so no
// VP is idle and nothing is stolen, and a probe queued on VP k runs on VP k. Each case
// runs 2 * nvps rounds, so a round-robin decision where the policy says "affinity
// VP" (or the reverse) lands on another VP at least once.
struct PlaceRig {
  int n = 0;
  std::atomic<int> on_vp{0};  // holders that reached their VP
  std::atomic<int> phase{0};  // 0 hold; 1 yield (a probe is due); 2 finish
  std::atomic<int> cmd{0};    // for holder 0: 1 create a probe, 2 wake the probe
  weft_attr_t attr{};         // the probe's attributes (bundle under test, affinity)
  std::atomic<weft_thread_t *> probe{nullptr};
  std::atomic<int> ran_on{-1};   // the VP the probe ran on, this round
  std::atomic<int> blocked{0};   // 1 once the waking probe is saved (release callback)
  std::atomic<bool> quit{false};
  std::vector<weft_thread_t *> created;  // probes to join: holder 0 and the driver
  SpinLock created_lock;
};
PlaceRig *g_rig = nullptr;

void *PlaceCreatedProbe(void *) {
  g_rig->ran_on.store(weft_vp_self());
  return nullptr;
}
void *PlaceWakeProbe(void *) {
  for (;;) {
    weft_thread_block(+[](void *) { g_rig->blocked.store(1); }, nullptr);
    if (g_rig->quit.load()) return nullptr;
    g_rig->ran_on.store(weft_vp_self());
  }
}
void PlaceCreate(PlaceRig *r) {
  weft_thread_t *t = nullptr;
  ASSERT_EQ(weft_create(&t, &r->attr, PlaceCreatedProbe, nullptr), 0);
  r->created_lock.lock();
  r->created.push_back(t);
  r->created_lock.unlock();
}
void *PlaceHolder(void *p) {
  PlaceRig *r = g_rig;
  const int i = static_cast<int>(I(p));
  while (weft_vp_self() != i && r->phase.load() != 2) weft_set_affinity(i);
  r->on_vp.fetch_add(1);
  for (;;) {
    int ph = r->phase.load();
    if (ph == 2) break;
    if (ph == 1) {
      weft_yield();
      continue;
    }
    if (i == 0) {
      if (int c = r->cmd.load()) {
        if (c == 1) PlaceCreate(r);
        else weft_thread_unblock(r->probe.load());
        r->cmd.store(0);
      }
    }
    sched_yield();  // the kernel thread only: 4 VPs share 2 cores
  }
  return nullptr;
}
template <class Pred>
bool OsWait(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    sched_yield();
  }
  return true;
}

enum class PlaceEvent { kCreateFromOs, kCreateFromVp, kWakeFromOs, kWakeFromVp };

class SchedPlacement : public SchedConformance {
 protected:
  // The VP each of 2 * nvps rounds of `ev` ran the probe on (empty on a failure,
  // with the failure reported). affinity: the probe's (-1 none).
  std::vector<int> Observe(PlaceEvent ev, int affinity) {
    PlaceRig rig;
    g_rig = &rig;
    rig.n = nvps();
    rig.attr = Attr(affinity);
    const bool wake = ev == PlaceEvent::kWakeFromOs || ev == PlaceEvent::kWakeFromVp;
    const bool from_vp = ev == PlaceEvent::kCreateFromVp || ev == PlaceEvent::kWakeFromVp;
    weft_thread_t *probe = nullptr;
    if (wake) {  // blocked before the holders take the VPs
      probe = Spawn(PlaceWakeProbe, nullptr, &rig.attr);
      rig.probe.store(probe);
      EXPECT_TRUE(YieldUntil([&] { return rig.blocked.load() == 1; }));
    }
    std::vector<weft_thread_t *> holders;
    for (int i = 0; i < rig.n; ++i) holders.push_back(Spawn(PlaceHolder, P(i)));
    std::vector<int> seen;
    bool ok = true;
    Event done;
    std::thread driver([&] {
      ok = OsWait([&] { return rig.on_vp.load() == rig.n; });
      for (int round = 0; ok && round < 2 * rig.n; ++round) {
        rig.ran_on.store(-1);
        if (wake) rig.blocked.store(0);
        if (from_vp) {
          rig.cmd.store(wake ? 2 : 1);
          ok = OsWait([&] { return rig.cmd.load() == 0; });
        } else if (wake) {
          weft_thread_unblock(probe);
        } else {
          PlaceCreate(&rig);
        }
        rig.phase.store(1);
        ok = ok && OsWait([&] { return rig.ran_on.load() >= 0; });
        if (wake) ok = ok && OsWait([&] { return rig.blocked.load() == 1; });
        rig.phase.store(0);
        if (ok) seen.push_back(rig.ran_on.load());
      }
      rig.phase.store(2);
      done.Set();
    });
    done.Wait();  // the main thread off the VPs while the rounds run
    driver.join();
    EXPECT_TRUE(ok) << "a placement round did not finish (watchdog)";
    for (weft_thread_t *h : holders) Join(h);
    if (wake) {
      rig.quit.store(true);
      EXPECT_TRUE(YieldUntil([&] { return rig.blocked.load() == 1; }));
      weft_thread_unblock(probe);
      Join(probe);
    }
    for (weft_thread_t *t : rig.created) Join(t);
    g_rig = nullptr;
    return ok ? seen : std::vector<int>();
  }
  // The rules under test name regular VPs; the system monitor, seeing a holder's
  // VP hardly use its CPU on a loaded machine, may lend it a spare, which runs the
  // probe or a holder somewhere the rules do not describe. Placement is tested
  // without it (monitor_test.cc tests the spares).
  void SetUp() override {
    SchedConformance::SetUp();  // monitor_off_ (below) is set before weft_init
    if (Param().family != kRoot && Param().family != kDefaultCopy)
      GTEST_SKIP() << "the default scheduler's placement";
    if (nvps() < 2) GTEST_SKIP() << "placement needs two VPs or more";
  }
  // An affinity hint past nvps: it names VP (hint mod nvps) = the last VP.
  int Hint() const { return 2 * nvps() - 1; }
  MonitorOffEnv monitor_off_;
};

std::vector<SchedParam> PlacementParams() {
  std::vector<SchedParam> v;
  for (int n : {2, 4}) {
    v.push_back({kRoot, 0, n});
    v.push_back({kDefaultCopy, 0, n});
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Default, SchedPlacement, ::testing::ValuesIn(PlacementParams()),
                         [](const ::testing::TestParamInfo<SchedParam> &i) { return i.param.Name(); });

// Woken by a plain OS thread, a thread with affinity goes to its affinity VP.
TEST_P(SchedPlacement, WakeFromOsThreadHonoursAffinity) {
  for (int vp : Observe(PlaceEvent::kWakeFromOs, Hint())) EXPECT_EQ(vp, nvps() - 1);
}

// Woken by a weft thread, a thread goes to the back of the waker's VP, affinity or not.
TEST_P(SchedPlacement, WakeFromVpGoesToTheWakersVp) {
  for (int vp : Observe(PlaceEvent::kWakeFromVp, Hint())) EXPECT_EQ(vp, 0);
}

// Created by a plain OS thread: its affinity VP, or round robin without one (each VP
// exactly twice in 2 * nvps creations in a row).
TEST_P(SchedPlacement, CreateFromOsThread) {
  for (int vp : Observe(PlaceEvent::kCreateFromOs, Hint())) EXPECT_EQ(vp, nvps() - 1);
  std::vector<int> per(nvps());
  std::vector<int> seen = Observe(PlaceEvent::kCreateFromOs, -1);
  ASSERT_EQ(seen.size(), static_cast<size_t>(2 * nvps()));
  for (int vp : seen) per.at(vp)++;
  for (int i = 0; i < nvps(); ++i) EXPECT_EQ(per[i], 2) << "VP " << i;
}

// Created by a weft thread: its affinity VP, or the creator's VP without one.
TEST_P(SchedPlacement, CreateFromVp) {
  for (int vp : Observe(PlaceEvent::kCreateFromVp, Hint())) EXPECT_EQ(vp, nvps() - 1);
  for (int vp : Observe(PlaceEvent::kCreateFromVp, -1)) EXPECT_EQ(vp, 0);
}

// ---- the library's own entry points ------------------------------------------------

class SchedLibApi : public OneVpTest {};

TEST_F(SchedLibApi, KindsNamesAndErrors) {
  for (unsigned k = 0; k < 8; ++k) {
    EXPECT_TRUE(weft_schedlib_kind_valid(k));
    EXPECT_NE(weft_schedlib_ops(k), nullptr);
  }
  EXPECT_TRUE(weft_schedlib_kind_valid(WEFT_SCHED_PRIORITY));
  EXPECT_FALSE(weft_schedlib_kind_valid(WEFT_SCHED_PRIORITY | WEFT_SCHED_LIFO));
  EXPECT_TRUE(weft_schedlib_kind_valid(WEFT_SCHED_WORK_FIRST));
  EXPECT_FALSE(weft_schedlib_kind_valid(WEFT_SCHED_WORK_FIRST | WEFT_SCHED_LIFO));
  EXPECT_STREQ(weft_schedlib_kind_name(WEFT_SCHED_WORK_FIRST), "work_first");
  EXPECT_EQ(weft_schedlib_ops(99), nullptr);
  EXPECT_STREQ(weft_schedlib_kind_name(WEFT_SCHED_LIFO | WEFT_SCHED_AFFINITY), "lifo_lazy_affinity");
  EXPECT_STREQ(weft_schedlib_kind_name(WEFT_SCHED_FIFO | WEFT_SCHED_EAGER), "fifo_eager");
  weft_bundle_t *b = reinterpret_cast<weft_bundle_t *>(1);
  EXPECT_EQ(weft_schedlib_bundle_create(nullptr, nullptr, 0), WEFT_EINVAL);
  EXPECT_EQ(weft_schedlib_bundle_create(&b, nullptr, 42), WEFT_EINVAL);
  EXPECT_EQ(b, reinterpret_cast<weft_bundle_t *>(1)) << "out-parameter changed on error";
  EXPECT_EQ(weft_schedlib_bundle_destroy(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_schedlib_set_priority(nullptr, 1), WEFT_EINVAL);
  void *d = nullptr;
  EXPECT_EQ(weft_schedlib_data_create(3, nullptr), WEFT_EINVAL);
  ASSERT_EQ(weft_schedlib_data_create(3, &d), 0);
  weft_schedlib_data_destroy(d);
  weft_schedlib_data_destroy(nullptr);
  ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, WEFT_SCHED_LIFO), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
}

TEST(SchedLibNotRunning, DataCreateIsEnotinit) {
  void *d = nullptr;
  weft_bundle_t *b = nullptr;
  EXPECT_EQ(weft_schedlib_data_create(0, &d), WEFT_ENOTINIT);
  EXPECT_EQ(weft_schedlib_bundle_create(&b, nullptr, 0), WEFT_ENOTINIT);
}

}  // namespace
