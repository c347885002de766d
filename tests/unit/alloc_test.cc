// tests/unit/alloc_test.cc - allocation accounting and failure injection
// (weft_debug_fail_alloc): every allocation weft makes can fail cleanly.
#include <mutex>
#include <string>

#include "weft_test.h"

#include <weft/schedlib.h>
#include <weft/trace.h>
#include <weft/io.h>
#include <weft/wire.h>

using namespace weft_test;

namespace {

class AllocTest : public WeftTest {
 protected:
  void TearDown() override {
    weft_debug_fail_alloc(0);
    WeftTest::TearDown();
  }
};

bool OkOrNomem(int rc) { return rc == 0 || rc == WEFT_ENOMEM; }

// Arms injection so that the next allocation weft asks of the system fails.
void FailNextAlloc() { weft_debug_fail_alloc(1); }

// With one VP and no switch, the main thread's weft_create() that needs a new
// control block fails with WEFT_ENOMEM and leaves *out untouched; creation works
// again once injection is off.
TEST_F(AllocTest, CreateReportsEnomem) {
  StartWeft(1);
  std::vector<weft_thread_t *> ts;
  bool saw_enomem = false;
  for (int i = 0; i < 5000 && !saw_enomem; ++i) {
    long before = weft_debug_alloc_count();
    FailNextAlloc();
    weft_thread_t *sentinel = reinterpret_cast<weft_thread_t *>(0x1234);
    weft_thread_t *t = sentinel;
    int rc = weft_create(&t, nullptr, +[](void *a) { return a; }, P(i));
    weft_debug_fail_alloc(0);
    if (rc == WEFT_ENOMEM) {
      saw_enomem = true;
      EXPECT_EQ(t, sentinel);
      EXPECT_GT(weft_debug_alloc_count(), before) << "failed without an allocation";
    } else {
      ASSERT_EQ(rc, 0) << weft_err_name(rc);
      EXPECT_EQ(weft_debug_alloc_count(), before) << "allocated, but the injected failure was ignored";
      ts.push_back(t);
    }
  }
  EXPECT_TRUE(saw_enomem) << "no weft_create() ever needed a system allocation";
  for (intptr_t i = 0; i < static_cast<intptr_t>(ts.size()); ++i) EXPECT_EQ(Join(ts[i]), P(i));
  EXPECT_EQ(Join(Spawn(+[](void *a) { return a; }, P(-1))), P(-1));
}

// weft_init() fails cleanly (WEFT_ENOMEM, nothing left allocated) when its first
// allocation fails, and can be called again.
TEST_F(AllocTest, InitReportsEnomem) {
  long before = weft_debug_alloc_count();
  FailNextAlloc();
  int rc = InitWithVps(2);
  weft_debug_fail_alloc(0);
  EXPECT_EQ(rc, WEFT_ENOMEM) << weft_err_name(rc);
  EXPECT_GT(weft_debug_alloc_count(), before);
  EXPECT_EQ(weft_is_running(), 0);
  EXPECT_EQ(weft_debug_live_blocks(), 0);
  StartWeft(2);
}

// The first weft_key_set() in a thread allocates its table: when that fails it
// returns WEFT_ENOMEM and the value stays NULL.
TEST_F(AllocTest, KeySetReportsEnomem) {
  StartWeft(1);
  weft_key_t key;
  ASSERT_EQ(weft_key_create(&key, nullptr), 0);
  FailNextAlloc();
  int rc = weft_key_set(key, P(5));
  weft_debug_fail_alloc(0);
  EXPECT_EQ(rc, WEFT_ENOMEM) << weft_err_name(rc);
  EXPECT_EQ(weft_key_get(key), nullptr);
  EXPECT_EQ(weft_key_set(key, P(5)), 0);
  EXPECT_EQ(weft_key_get(key), P(5));
  EXPECT_EQ(weft_key_delete(key), 0);
}

// weft_bundle_create() fails with WEFT_ENOMEM, leaving *out untouched.
TEST_F(AllocTest, BundleCreateReportsEnomem) {
  StartWeft(1);
  weft_sched_ops_t ops = weft_sched_default;
  weft_bundle_t *sentinel = reinterpret_cast<weft_bundle_t *>(0x1234);
  weft_bundle_t *b = sentinel;
  FailNextAlloc();
  int rc = weft_bundle_create(&b, nullptr, &ops, nullptr);
  weft_debug_fail_alloc(0);
  EXPECT_EQ(rc, WEFT_ENOMEM) << weft_err_name(rc);
  EXPECT_EQ(b, sentinel);
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), 0);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// weft_sched_bind_stack() fails with WEFT_ENOMEM when it needs a new stack and
// the system has none; the thread still runs later (its stack is bound when it
// starts). With one VP and no switch, the threads created here have not run.
TEST_F(AllocTest, BindStackReportsEnomem) {
  StartWeft(1);
  std::vector<weft_thread_t *> ts;
  bool saw_enomem = false;
  for (intptr_t i = 0; i < 1000 && !saw_enomem; ++i) {
    weft_thread_t *t = Spawn(+[](void *a) { return a; }, P(i));
    ASSERT_NE(t, nullptr);
    ts.push_back(t);
    long before = weft_debug_alloc_count();
    FailNextAlloc();
    int rc = weft_sched_bind_stack(t);
    weft_debug_fail_alloc(0);
    if (rc == WEFT_ENOMEM) {
      saw_enomem = true;
      EXPECT_GT(weft_debug_alloc_count(), before) << "failed without an allocation";
    } else {
      ASSERT_EQ(rc, 0) << weft_err_name(rc);
      EXPECT_EQ(weft_debug_alloc_count(), before) << "allocated, but the injected failure was ignored";
    }
  }
  EXPECT_TRUE(saw_enomem) << "no weft_sched_bind_stack() ever needed a system allocation";
  for (intptr_t i = 0; i < static_cast<intptr_t>(ts.size()); ++i) EXPECT_EQ(Join(ts[i]), P(i));
}

// Each live block is counted, and the free lists reuse blocks: running many
// threads one after another costs only a few system allocations.
TEST_F(AllocTest, FreeListsReuseBlocks) {
  StartWeft(1);
  EXPECT_GT(weft_debug_live_blocks(), 0) << "a running runtime holds at least its VP";
  Join(Spawn(+[](void *a) { return a; }));  // warm the free lists
  long before = weft_debug_alloc_count();
  for (int i = 0; i < 1000; ++i) Join(Spawn(+[](void *a) { return a; }));
  EXPECT_LT(weft_debug_alloc_count() - before, 50);
  weft_debug_stats_t st;
  weft_debug_stats(&st);
  EXPECT_GE(st.tcb_cached, 1u);
  EXPECT_GE(st.stacks_cached, 1u);
}

// weft_config_t.tcb_local: a VP keeps up to tcb_local freed control blocks itself
// (beyond 2T, the stacks' bound), so a burst of threads created and then joined on
// one VP is reused from that VP's own list; with a small tcb_local the blocks beyond
// it go to the global pool, which keeps freelist_global of them and gives the rest
// back to the system.
void CachedAfterBurst(int tcb_local, long n, uint64_t *cached) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  cfg.freelist_local = 4;
  cfg.freelist_global = 16;
  if (tcb_local) cfg.tcb_local = tcb_local;
  ASSERT_EQ(weft_init(&cfg), 0);
  std::vector<weft_thread_t *> ts(static_cast<size_t>(n));
  for (auto &t : ts) ASSERT_EQ(weft_create(&t, nullptr, +[](void *a) { return a; }, nullptr), 0);
  for (auto *t : ts) ASSERT_EQ(weft_join(t, nullptr), 0);
  weft_debug_stats_t st;
  weft_debug_stats(&st);
  *cached = st.tcb_cached;
  ASSERT_EQ(weft_shutdown(), 0);
}

TEST_F(AllocTest, VpKeepsTcbLocalControlBlocks) {
  const long n = 600;
  uint64_t cached = 0;
  CachedAfterBurst(0, n, &cached);  // the default, 1024
  EXPECT_GE(cached, static_cast<uint64_t>(n)) << "the VP kept fewer than the burst";
  CachedAfterBurst(8, n, &cached);
  EXPECT_LE(cached, 8u + 16u + 4u) << "more cached than tcb_local + freelist_global (+ T)";
  weft_config_t bad;
  weft_config_init(&bad);
  bad.tcb_local = -1;
  EXPECT_EQ(weft_init(&bad), WEFT_EINVAL);
}

// ---- the failure-injection sweep ------------------------------------------------------

// Results other than success or WEFT_ENOMEM seen inside weft threads.
std::mutex g_unexpected_mu;
std::vector<std::string> g_unexpected;  // under g_unexpected_mu
void Unexpected(const std::string &what) {
  std::lock_guard<std::mutex> lock(g_unexpected_mu);
  g_unexpected.push_back(what);
}
weft_key_t g_key;

void *Child(void *arg) { return arg; }

// Sets a key (the first set allocates), yields, creates and joins a child.
void *Worker(void *arg) {
  int rc = weft_key_set(g_key, arg);
  if (!OkOrNomem(rc)) Unexpected(std::string("weft_key_set: ") + weft_err_name(rc));
  if (rc == 0 && weft_key_get(g_key) != arg) Unexpected("weft_key_get: wrong value");
  weft_yield();
  weft_thread_t *c = nullptr;
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.stack_size = (I(arg) % 2) ? 32 * 1024 : 0;
  rc = weft_create(&c, &attr, Child, arg);
  if (!OkOrNomem(rc)) Unexpected(std::string("child weft_create: ") + weft_err_name(rc));
  if (rc == 0) {
    void *r = nullptr;
    rc = weft_join(c, &r);
    if (rc != 0) Unexpected(std::string("child weft_join: ") + weft_err_name(rc));
    if (rc == 0 && r != arg) Unexpected("child result wrong");
  }
  return arg;
}

// One run of the workload. Every call must succeed or fail with WEFT_ENOMEM (init
// also WEFT_ESYS); whatever happened, weft must hold no memory afterwards.
void RunWorkload() {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 2;
  int rc = weft_init(&cfg);
  if (rc != 0) {
    EXPECT_TRUE(rc == WEFT_ENOMEM || rc == WEFT_ESYS) << weft_err_name(rc);
    EXPECT_EQ(weft_is_running(), 0);
    EXPECT_EQ(weft_debug_live_blocks(), 0) << "weft_init failed but left memory behind";
    return;
  }
  EXPECT_EQ(weft_key_create(&g_key, nullptr), 0);
  rc = weft_key_set(g_key, P(-1));
  EXPECT_TRUE(OkOrNomem(rc)) << weft_err_name(rc);

  weft_sched_ops_t ops = weft_sched_default;
  weft_bundle_t *bundle = nullptr;
  rc = weft_bundle_create(&bundle, nullptr, &ops, nullptr);
  EXPECT_TRUE(OkOrNomem(rc)) << weft_err_name(rc);
  if (rc != 0) bundle = nullptr;

  const int kThreads = 50;
  std::vector<weft_thread_t *> ts(kThreads, nullptr);
  for (int i = 0; i < kThreads; ++i) {
    weft_attr_t attr;
    weft_attr_init(&attr);
    static const size_t kSizes[] = {0, 64 * 1024, 1024 * 1024, WEFT_MIN_STACK_SIZE};
    attr.stack_size = kSizes[i % 4];
    attr.detached = (i % 10 == 9);
    attr.vproc = (i % 3 == 0) ? WEFT_VPROC(i) : 0;
    if (i % 2 == 0 && !attr.detached) attr.bundle = bundle;
    rc = weft_create(attr.detached ? nullptr : &ts[i], &attr, Worker, P(i));
    EXPECT_TRUE(OkOrNomem(rc)) << "create " << i << ": " << weft_err_name(rc);
    if (rc != 0) ts[i] = nullptr;
  }
  for (int i = 0; i < kThreads; ++i) {
    if (ts[i] == nullptr) continue;
    void *r = nullptr;
    EXPECT_EQ(weft_join(ts[i], &r), 0);
    EXPECT_EQ(r, P(i));
  }
  if (bundle != nullptr) {
    EXPECT_EQ(weft_bundle_destroy(bundle), 0);
  }
  rc = weft_shutdown();  // also waits for the detached workers
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  EXPECT_EQ(weft_key_delete(g_key), 0);
  if (rc == 0) {
    EXPECT_EQ(weft_debug_live_blocks(), 0) << "leak after an injected failure";
  }
}

// For k = 1, 2, 3, ...: the k-th allocation of the workload fails. Every run must
// end cleanly, until a run makes fewer than k allocations (no failure injected).
TEST_F(AllocTest, EveryAllocationCanFail) {
  g_unexpected.clear();
  const long kMaxK = 20000;
  long k = 1;
  for (;; ++k) {
    ASSERT_LT(k, kMaxK) << "the workload never completed without an injected failure";
    long before = weft_debug_alloc_count();
    weft_debug_fail_alloc(k);
    RunWorkload();
    weft_debug_fail_alloc(0);
    long used = weft_debug_alloc_count() - before;
    {
      std::lock_guard<std::mutex> lock(g_unexpected_mu);
      for (const std::string &what : g_unexpected) ADD_FAILURE() << "in a weft thread: " << what;
      g_unexpected.clear();
    }
    if (HasFailure()) {
      ADD_FAILURE() << "first failing run: allocation " << k << " of " << used << " failed";
      break;
    }
    if (used < k) break;  // the k-th allocation never came: a clean run
  }
  EXPECT_GT(k, 10) << "the workload made suspiciously few allocations";
  RecordProperty("injection_points", static_cast<int>(k - 1));
}

// ---- allocation sites outside the core ------------------------------------------------

// The scheduler library: bundle state and the growth of its run lists and heap. For
// k = 1, 2, ...: the k-th allocation fails while a bundle is made and 300 threads are
// created into it by a thread that never switches (so they pile up in the bundle's
// lists or heap, which grow). Each create either fails with WEFT_ENOMEM or its thread
// runs: a list or heap that cannot grow hands the thread to a dispatch queue.
TEST_F(AllocTest, SchedLibGrowthCanFail) {
  StartWeft(1);
  static std::atomic<int> ran;
  const unsigned kinds[] = {WEFT_SCHED_FIFO | WEFT_SCHED_LAZY, WEFT_SCHED_LIFO | WEFT_SCHED_LAZY,
                            WEFT_SCHED_PRIORITY};
  for (unsigned kind : kinds) {
    long k = 1;
    for (;; ++k) {
      ASSERT_LT(k, 2000) << weft_schedlib_kind_name(kind) << ": never ran clean";
      ran = 0;
      long before = weft_debug_alloc_count();
      weft_debug_fail_alloc(k);
      weft_bundle_t *b = nullptr;
      int rc = weft_schedlib_bundle_create(&b, nullptr, kind);
      ASSERT_TRUE(OkOrNomem(rc)) << weft_err_name(rc);
      std::vector<weft_thread_t *> ts;
      if (rc == 0) {
        weft_attr_t attr;
        weft_attr_init(&attr);
        attr.bundle = b;
        for (int i = 0; i < 300; ++i) {
          weft_thread_t *t = nullptr;
          int c = weft_create(
              &t, &attr, +[](void *) -> void * {
                ran++;
                return nullptr;
              },
              nullptr);
          ASSERT_TRUE(OkOrNomem(c)) << weft_err_name(c);
          if (c == 0) ts.push_back(t);
        }
      }
      long used = weft_debug_alloc_count() - before;
      weft_debug_fail_alloc(0);
      for (weft_thread_t *t : ts) EXPECT_EQ(weft_join(t, nullptr), 0);
      EXPECT_EQ(ran.load(), static_cast<int>(ts.size()))
          << weft_schedlib_kind_name(kind) << ", allocation " << k << " failed";
      if (b) {
        EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
      }
      if (HasFailure()) return;
      if (used < k) break;
    }
    EXPECT_GT(k, 3) << weft_schedlib_kind_name(kind) << ": its lists never grew";
  }
}

// The same, aimed: the bundle's state, and the growth of a run list (or the heap)
// when the 65th thread is created into it, are allocations that injection reaches:
// state creation fails with WEFT_ENOMEM, a list that cannot grow hands its thread to
// a dispatch queue (the create succeeds and the thread runs).
TEST_F(AllocTest, SchedLibAllocationsAreInjectable) {
  StartWeft(1);
  static std::atomic<int> ran;
  auto body = +[](void *) -> void * {
    ran++;
    return nullptr;
  };
  // fill the control-block caches, so that the creates below allocate nothing else
  std::vector<weft_thread_t *> warm;
  for (int i = 0; i < 200; ++i) warm.push_back(Spawn(body));
  for (weft_thread_t *t : warm) Join(t);
  const unsigned kinds[] = {WEFT_SCHED_FIFO | WEFT_SCHED_LAZY, WEFT_SCHED_LIFO | WEFT_SCHED_LAZY,
                            WEFT_SCHED_PRIORITY};
  for (unsigned kind : kinds) {
    const char *name = weft_schedlib_kind_name(kind);
    weft_bundle_t *b = nullptr;
    FailNextAlloc();
    EXPECT_EQ(weft_schedlib_bundle_create(&b, nullptr, kind), WEFT_ENOMEM) << name;
    weft_debug_fail_alloc(0);
    ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, kind), 0) << name;
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.bundle = b;
    ran = 0;
    std::vector<weft_thread_t *> ts;
    weft_thread_t *t = nullptr;
    for (int i = 0; i < 64; ++i) {  // fills the list (or heap) without a switch
      ASSERT_EQ(weft_create(&t, &attr, body, nullptr), 0) << name;
      ts.push_back(t);
    }
    long before = weft_debug_alloc_count();
    FailNextAlloc();
    int rc = weft_create(&t, &attr, body, nullptr);
    weft_debug_fail_alloc(0);
    ASSERT_EQ(rc, 0) << name << ": a full list that cannot grow must not fail the create";
    ts.push_back(t);
    EXPECT_GT(weft_debug_alloc_count(), before) << name << ": the growth was not injectable";
    for (weft_thread_t *x : ts) Join(x);
    EXPECT_EQ(ran.load(), 65) << name;
    EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0) << name;
  }
}

// Wiring: a wire that must start a pool thread (none idle) reports an injected
// failure of the start with WEFT_ESYS, the pool unchanged; the caller stays an ordinary
// weft thread and can wire afterwards. A wire that reuses an idle pool thread starts
// nothing and has no failure point: with the thread kept, an injected failure is not
// consumed by it.
TEST_F(AllocTest, WireReportsInjectedFailures) {
  StartWeft(1);
  ASSERT_EQ(weft_blocking_limits(64, 1000000), 0);  // let idle pool threads go
  ASSERT_TRUE(YieldUntil([] { return weft_blocking_threads() == 0; }));
  ASSERT_EQ(weft_blocking_limits(0, 3600ull * 1000000000ull), 0);  // then keep them
  RunInThread([]() -> void * {
    weft_debug_fail_alloc(1);
    EXPECT_EQ(weft_wire(), WEFT_ESYS);
    weft_debug_fail_alloc(0);
    EXPECT_EQ(weft_is_wired(), 0);
    EXPECT_EQ(weft_blocking_threads(), 0);
    EXPECT_EQ(weft_wire(), 0);
    EXPECT_EQ(weft_is_wired(), 1);
    EXPECT_EQ(weft_unwire(), 0);
    EXPECT_EQ(weft_blocking_threads(), 1);
    long before = weft_debug_alloc_count();
    weft_debug_fail_alloc(1);
    EXPECT_EQ(weft_wire(), 0);  // the idle thread is reused: nothing to fail
    EXPECT_EQ(weft_unwire(), 0);
    weft_debug_fail_alloc(0);
    EXPECT_EQ(weft_debug_alloc_count(), before);
    return nullptr;
  });
  EXPECT_EQ(weft_wired_count(), 0);
  EXPECT_EQ(weft_blocking_limits(64, 10000000000ull), 0);  // the pool's defaults
}

// Tracing: every buffer of weft_trace_start() (the table, one per VP and one for
// OS threads, the copied path) can fail: WEFT_ENOMEM, nothing left on, and a later
// start works.
TEST_F(AllocTest, TraceStartReportsEnomem) {
  StartWeft(2);
  weft_trace_config_t cfg;
  weft_trace_config_init(&cfg);
  cfg.capacity = 64;
  cfg.path = "/nonexistent/trace.json";
  int rc = weft_trace_start(&cfg);
  if (rc == WEFT_EPERM) GTEST_SKIP() << "built with WEFT_HOOKS=OFF";
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(weft_trace_stop(), 0);
  weft_trace_discard();
  long k = 1;
  for (;; ++k) {
    ASSERT_LT(k, 100);
    long before = weft_debug_alloc_count();
    weft_debug_fail_alloc(k);
    rc = weft_trace_start(&cfg);
    long used = weft_debug_alloc_count() - before;
    weft_debug_fail_alloc(0);
    if (rc == 0) {
      EXPECT_GE(used, 0);
      EXPECT_EQ(weft_trace_stop(), 0);
      weft_trace_discard();
      if (used < k) break;
      continue;
    }
    EXPECT_EQ(rc, WEFT_ENOMEM) << "allocation " << k;
    EXPECT_EQ(weft_trace_is_on(), 0);
  }
  EXPECT_GE(k, 5) << "fewer injectable allocations than buffers";
}

}  // namespace
