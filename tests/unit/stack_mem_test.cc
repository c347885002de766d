// tests/unit/stack_mem_test.cc - stack memory: default-size stacks share a few large
// mappings (no kernel memory area per stack) with either guard mechanism, the pages
// of stacks beyond the caches go back to the kernel, stack sizes that RLIMIT_AS can
// never map fail at weft_create, and every new allocation site (chunk mapping,
// header, guard install, discard) fails cleanly under injection and is described.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "weft_test.h"


// The library's internal failure description (src/core/internal.h).
extern "C" int weft__stack_describe_failure(char *buf, size_t n);

using namespace weft_test;

namespace {

constexpr size_t KiB = 1024;
[[maybe_unused]] constexpr size_t MiB = 1024 * 1024;

long MapsLines() {
  std::ifstream f("/proc/self/maps");
  std::string line;
  long n = 0;
  while (std::getline(f, line)) ++n;
  return n;
}

long StatusKib(const char *key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t k = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, k, key) == 0) return std::atol(line.c_str() + k);
  return -1;
}

std::string Describe() {
  char buf[512];
  weft__stack_describe_failure(buf, sizeof buf);
  return buf;
}

// Selects the guard mechanism for the next weft_init (WEFT_STACK_GUARD).
void SelectMechanism(const char *mech) {
  if (mech == nullptr) unsetenv("WEFT_STACK_GUARD");
  else setenv("WEFT_STACK_GUARD", mech, 1);
}

// ---- many live threads: mappings and memory ----------------------------------------

weft_sem_t g_sem;
std::atomic<long> g_arrived{0};

// Touches `bytes` of its stack (arg), counts itself in, blocks on g_sem.
__attribute__((noinline)) void *BlockBody(void *arg) {
  size_t bytes = static_cast<size_t>(I(arg));
  if (bytes) {
    volatile char *p = static_cast<volatile char *>(alloca(bytes));
    for (size_t i = 0; i < bytes; i += 4 * KiB) p[i] = 1;
  }
  g_arrived.fetch_add(1);
  weft_sem_wait(&g_sem);
  return arg;
}

struct Burst {
  std::vector<weft_thread_t *> ts;
};

// Creates n threads running BlockBody(touch) and waits (yielding) until all block.
bool StartBurst(Burst &b, long n, size_t touch) {
  g_arrived = 0;
  b.ts.assign(static_cast<size_t>(n), nullptr);
  for (long i = 0; i < n; ++i) {
    int rc = weft_create(&b.ts[static_cast<size_t>(i)], nullptr, BlockBody, P(static_cast<intptr_t>(touch)));
    if (rc != 0) {
      ADD_FAILURE() << "weft_create " << i << ": " << weft_err_name(rc);
      return false;
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (g_arrived.load() < n) {
    weft_yield();
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "only " << g_arrived.load() << " of " << n << " threads ever started";
      return false;
    }
  }
  return true;
}

void EndBurst(Burst &b) {
  for (size_t i = 0; i < b.ts.size(); ++i) weft_sem_signal(&g_sem);
  for (weft_thread_t *t : b.ts)
    if (t) Join(t);
}

class StackMemTest : public WeftTest, public ::testing::WithParamInterface<const char *> {
 protected:
  bool skipped_ = false;
  // Starts weft with the mechanism of the parameter; false (test skipped) when the
  // kernel lacks MADV_GUARD_INSTALL and the parameter asks for it.
  bool Start(int nvps, int freelist_local = 0, int freelist_global = 0) {
    std::string p = GetParam();
    SelectMechanism(p == "madvise" ? nullptr : p.c_str());
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = nvps;
    if (freelist_local) cfg.freelist_local = freelist_local;
    if (freelist_global) cfg.freelist_global = freelist_global;
    int rc = weft_init(&cfg);
    SelectMechanism(nullptr);
    EXPECT_EQ(rc, 0) << weft_err_name(rc);
    if (rc != 0) return false;
    EXPECT_EQ(weft_sem_init(&g_sem, 0), 0);
    weft_stack_info_t info;
    EXPECT_EQ(weft_stack_info(&info), 0);
    EXPECT_EQ(info.guard_size, WEFT_DEFAULT_STACK_GUARD);
    if (p != "madvise") {
      EXPECT_EQ(info.guard_mechanism, WEFT_STACK_GUARD_MPROTECT);
    } else if (info.guard_mechanism != WEFT_STACK_GUARD_MADVISE) {
      skipped_ = true;  // the kernel has no MADV_GUARD_INSTALL
      return false;
    }
    return true;
  }
};

// More live threads than vm.max_map_count / 2 (the old limit of one mapping and
// one guard per stack) at full scale: default-size stacks are carved from chunks,
// so the process gains at most one mapping per chunk with MADV_GUARD_INSTALL, and
// two per guarded stack with the mprotect fallback, whose budget bounds them.
TEST_P(StackMemTest, LiveThreadsShareMappings) {
  if (!Start(2)) {
    if (skipped_) GTEST_SKIP() << "this kernel has no MADV_GUARD_INSTALL";
    return;
  }
  weft_stack_info_t before;
  ASSERT_EQ(weft_stack_info(&before), 0);
  const long n = Scaled(40000, 500);
  const long maps0 = MapsLines();
  Burst b;
  ASSERT_TRUE(StartBurst(b, n, 0));
  const long maps1 = MapsLines();
  weft_stack_info_t info;
  ASSERT_EQ(weft_stack_info(&info), 0);
  EXPECT_GE(info.stacks_carved, n);
  EXPECT_GE(info.chunks, (n + info.stacks_per_chunk - 1) / info.stacks_per_chunk);
  EXPECT_GE(info.bytes_reserved, static_cast<size_t>(n) * (info.stack_size + info.guard_size));
  const long added = maps1 - maps0;
  const long slack = 64 + n / 100;  // mappings of the C library and ASan
#ifdef WEFT_TEST_TSAN
  const bool count_maps = false;  // TSan maps state of its own for every fiber
#else
  const bool count_maps = true;
#endif
  if (info.guard_mechanism == WEFT_STACK_GUARD_MADVISE) {
    if (count_maps) {
      EXPECT_LE(added, info.chunks + slack) << "more than one mapping per chunk";
    }
    EXPECT_EQ(info.stacks_unguarded, 0);
    EXPECT_EQ(info.guard_budget, -1);
  } else {
    const long guarded = info.stacks_carved - info.stacks_unguarded;
    EXPECT_LE(guarded, before.guard_budget);
    if (count_maps) {
      EXPECT_LE(added, 2 * guarded + info.chunks + slack);
    }
    EXPECT_EQ(info.stacks_unguarded, n > before.guard_budget ? info.stacks_carved - guarded : 0);
  }
  if (count_maps && (info.guard_mechanism == WEFT_STACK_GUARD_MADVISE || before.guard_budget == 0)) {
    EXPECT_LT(added, n / 10 + slack) << "mappings grow with the number of threads";
  }
  EndBurst(b);
  // the caches keep at most nvps * 2T + G stacks; the rest went back to their chunks.
  // A spare VP of the system monitor runs threads with a cache of its own (up to 2T),
  // which goes to the pool when it stops: under load the monitor may take a VP busy
  // in the kernel (mapping stacks) for a stalled one and start a spare, and the count
  // read while that spare still runs was one over (1153). Spares started since
  // weft_init (read after the count) cover every spare that could have been running.
  weft_stack_info_t after;
  ASSERT_EQ(weft_stack_info(&after), 0);
  weft_monitor_info_t mi;
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_LE(after.stacks_carved, (2 + static_cast<long>(mi.spares_started)) * 2 * 32 + 1024)
      << mi.spares_started << " spares started";
  EXPECT_EQ(after.stacks_cached, after.stacks_carved);
  EXPECT_LT(after.chunks, info.chunks + 1);
}

// A burst of threads that each touched 64 KiB of stack does not pin that memory:
// beyond the caches (here 2T + G = 24 stacks) the stacks' pages go back to the
// kernel. Resident memory is checked without sanitizers (their shadow keeps pages).
TEST_P(StackMemTest, PagesGoBackBeyondTheCaches) {
  if (!Start(1, 4, 16)) {
    if (skipped_) GTEST_SKIP() << "this kernel has no MADV_GUARD_INSTALL";
    return;
  }
  const long n = Scaled(2000, 200);
  const size_t touch = 64 * KiB;
  const long rss0 = StatusKib("VmRSS:");
  Burst b;
  ASSERT_TRUE(StartBurst(b, n, touch));
  const long rss1 = StatusKib("VmRSS:");
  EndBurst(b);
  const long rss2 = StatusKib("VmRSS:");
  weft_stack_info_t info;
  ASSERT_EQ(weft_stack_info(&info), 0);
  EXPECT_LE(info.stacks_carved, 2 * 4 + 16);
#ifndef WEFT_TEST_SANITIZED
  EXPECT_GE(rss1 - rss0, n * static_cast<long>(touch / KiB) * 9 / 10) << "the threads never touched their stacks";
  // the cached stacks' pages, the control blocks' slabs and slack
  const long bound = 24 * static_cast<long>((touch + 8 * KiB) / KiB) + n / 2 + 4096;
  EXPECT_LT(rss2 - rss0, bound) << "VmRSS " << rss0 << " -> " << rss1 << " -> " << rss2 << " KiB";
#else
  (void)rss0;
  (void)rss1;
  (void)rss2;
#endif
}

#ifdef WEFT_TEST_ASAN
// Under ASan the stacks' chunks given back to the kernel do not leave their shadow
// resident: a burst of threads, then the end of the run (every chunk unmapped), leaves
// resident memory near where it started. Unpoisoning each 32 MiB chunk before its unmap
// wrote 4 MiB of shadow that stayed: 48 KiB a thread of the burst.
TEST_P(StackMemTest, UnmappedChunksLeaveNoShadowUnderAsan) {
  if (!Start(1, 4, 16)) {
    if (skipped_) GTEST_SKIP() << "this kernel has no MADV_GUARD_INSTALL";
    return;
  }
  const long n = Scaled(4000, 1000);
  const long rss0 = StatusKib("VmRSS:");
  Burst b;
  ASSERT_TRUE(StartBurst(b, n, 4 * KiB));
  EndBurst(b);
  ASSERT_EQ(weft_sem_destroy(&g_sem), 0);
  ASSERT_EQ(weft_shutdown(), 0);
  const long rss1 = StatusKib("VmRSS:");
  // one slot of 384 KiB per thread: 48 KiB of shadow each when it stayed
  EXPECT_LT(rss1 - rss0, n * 48 / 4 + 16384) << "VmRSS " << rss0 << " -> " << rss1 << " KiB";
  ASSERT_EQ(weft_init(nullptr), 0);  // the fixture's TearDown shuts down
}
#endif

INSTANTIATE_TEST_SUITE_P(Guards, StackMemTest, ::testing::Values("madvise", "mprotect", "mprotect:0"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string s = info.param;
                           return s == "mprotect:0" ? std::string("mprotect_no_budget") : s;
                         });

// A budget that is not a number ("mprotect:abc") was read as 0: every stack ran
// unguarded, silently. It is reported and the default budget is used.
TEST(StackGuardEnv, GarbageBudgetIsReportedAndTheDefaultKept) {
  SelectMechanism("mprotect:abc");
  testing::internal::CaptureStderr();
  ASSERT_EQ(weft_init(nullptr), 0);
  std::string err = testing::internal::GetCapturedStderr();
  weft_stack_info_t info;
  ASSERT_EQ(weft_stack_info(&info), 0);
  EXPECT_EQ(info.guard_mechanism, WEFT_STACK_GUARD_MPROTECT);
  EXPECT_GT(info.guard_budget, 0);
  EXPECT_NE(err.find("WEFT_STACK_GUARD=mprotect:abc"), std::string::npos) << err;
  EXPECT_EQ(weft_shutdown(), 0);
  SelectMechanism(nullptr);
}

// ---- failure injection on the new allocation sites -----------------------------------

class StackFailTest : public WeftTest {
 protected:
  void TearDown() override {
    weft_debug_fail_alloc(0);
    WeftTest::TearDown();
  }
  // Without the system monitor: an injected failure counts allocations, and a spare VP
  // the monitor starts while the main thread maps a chunk (slow under qemu, taken for a
  // stall with a thread queued) allocates too, and binds the queued thread's stack
  // itself (ChunkFailuresAreErrors then saw a chunk mapped, once in a CI run on aarch64).
  MonitorOffEnv monitor_off_;
};

void *Ident(void *a) { return a; }

// The first default-size stack of a runtime needs a chunk: its mapping (1), its
// header (2) and its guard regions (3) each fail cleanly with WEFT_ENOMEM under
// injection, the failure is described, and the thread still runs later.
TEST_F(StackFailTest, ChunkFailuresAreErrors) {
  for (long k = 1; k <= 3; ++k) {
    StartWeft(1);
    weft_thread_t *t = Spawn(Ident, P(k));
    ASSERT_NE(t, nullptr);
    long before = weft_debug_alloc_count();
    weft_debug_fail_alloc(k);
    int rc = weft_sched_bind_stack(t);
    weft_debug_fail_alloc(0);
    EXPECT_EQ(rc, WEFT_ENOMEM) << "k=" << k << ": " << weft_err_name(rc);
    EXPECT_GE(weft_debug_alloc_count() - before, k);
    const std::string d = Describe();
    EXPECT_NE(d.find("injected"), std::string::npos) << d;
    EXPECT_NE(d.find("weft: cannot get a thread stack"), std::string::npos) << d;
    weft_stack_info_t info;
    ASSERT_EQ(weft_stack_info(&info), 0);
    EXPECT_EQ(info.chunks, 0) << "k=" << k << ": a failed chunk stayed mapped";
    EXPECT_EQ(Join(t), P(k));
    ASSERT_EQ(weft_shutdown(), 0);
    EXPECT_EQ(weft_debug_live_blocks(), 0) << "k=" << k << ": leak";
  }
}

// Giving a stack's pages back can fail (injected here on every allocation point in
// turn): the stack keeps its pages, and nothing else changes.
TEST_F(StackFailTest, DiscardFailuresKeepWorking) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  cfg.freelist_local = 1;
  cfg.freelist_global = 1;
  ASSERT_EQ(weft_init(&cfg), 0);
  ASSERT_EQ(weft_sem_init(&g_sem, 0), 0);
  for (long k = 1; k <= 12; ++k) {
    Burst b;
    ASSERT_TRUE(StartBurst(b, 8, 0));
    weft_debug_fail_alloc(k);
    EndBurst(b);  // 8 stacks released: at most 3 cached, the rest discarded
    weft_debug_fail_alloc(0);
    weft_stack_info_t info;
    ASSERT_EQ(weft_stack_info(&info), 0);
    EXPECT_LE(info.stacks_carved, 3);
  }
}

// ---- RLIMIT_AS -------------------------------------------------------------------------
// Not under the sanitizers (they reserve terabytes: no RLIMIT_AS for them) nor under
// qemu-user (it ignores a guest's RLIMIT_AS, which would limit the emulator).
#if !defined(WEFT_TEST_SANITIZED) && !defined(WEFT_TEST_EMULATED)

void Fail(const char *what, long v) {
  std::fprintf(stderr, "FAILED: %s (%ld)\n", what, v);
  std::exit(1);
}

// In a child: under a 4 GiB RLIMIT_AS an 8 GiB stack can never be mapped, so
// weft_create refuses it (it used to accept it, and the thread could never run);
// a 1 GiB stack is accepted and runs; a default stack size of 8 GiB fails weft_init.
void ImpossibleSizeChild() {
  struct rlimit rl = {4ul << 30, 4ul << 30};
  if (setrlimit(RLIMIT_AS, &rl) != 0) Fail("setrlimit", errno);
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  cfg.stack_size = 8ul << 30;
  int rc = weft_init(&cfg);
  if (rc != WEFT_EINVAL) Fail("weft_init with an 8 GiB default stack", rc);
  cfg.stack_size = 0;
  if ((rc = weft_init(&cfg)) != 0) Fail("weft_init", rc);
  weft_stack_info_t info;
  weft_stack_info(&info);
  if (info.stack_size_max >= (4ul << 30)) Fail("stack_size_max", static_cast<long>(info.stack_size_max >> 20));
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.stack_size = 8ul << 30;
  weft_thread_t *t = nullptr;
  if ((rc = weft_create(&t, &attr, Ident, nullptr)) != WEFT_EINVAL) Fail("weft_create 8 GiB", rc);
  attr.stack_size = info.stack_size_max + 4096;
  if ((rc = weft_create(&t, &attr, Ident, nullptr)) != WEFT_EINVAL) Fail("weft_create above the max", rc);
  attr.stack_size = 1ul << 30;
  if ((rc = weft_create(&t, &attr, Ident, P(7))) != 0) Fail("weft_create 1 GiB", rc);
  void *r = nullptr;
  if ((rc = weft_join(t, &r)) != 0 || r != P(7)) Fail("weft_join 1 GiB", rc);
  if ((rc = weft_shutdown()) != 0) Fail("weft_shutdown", rc);
  std::exit(0);
}

TEST(StackLimitDeathTest, ImpossibleStackSizeFailsAtCreate) {
  SetDeathTestStyle();
  EXPECT_EXIT(ImpossibleSizeChild(), ::testing::ExitedWithCode(0), "");
}

// In a child: with RLIMIT_AS 256 MiB above what the process maps, binding stacks
// eventually fails with WEFT_ENOMEM (not a crash); the description names
// RLIMIT_AS; every thread, the failed one included, still runs once others finish.
void ExhaustionChild() {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  int rc = weft_init(&cfg);
  if (rc != 0) Fail("weft_init", rc);
  // the threads (control blocks) first: only stacks are to run out
  std::vector<weft_thread_t *> ts(4000, nullptr);
  for (size_t i = 0; i < ts.size(); ++i)
    if ((rc = weft_create(&ts[i], nullptr, Ident, P(static_cast<intptr_t>(i)))) != 0) Fail("weft_create", rc);
  const size_t vm = static_cast<size_t>(StatusKib("VmSize:")) * KiB;
  struct rlimit rl = {vm + 256 * MiB, vm + 256 * MiB};
  if (setrlimit(RLIMIT_AS, &rl) != 0) Fail("setrlimit", errno);
  rc = 0;
  for (size_t i = 0; i < ts.size() && rc == 0; ++i) rc = weft_sched_bind_stack(ts[i]);
  if (rc != WEFT_ENOMEM) Fail("weft_sched_bind_stack never ran out", rc);
  const std::string d = Describe();
  std::fprintf(stderr, "%s\n", d.c_str());
  if (d.find("limit hit: RLIMIT_AS") == std::string::npos) Fail("description without RLIMIT_AS", 0);
  for (size_t i = 0; i < ts.size(); ++i) {
    void *r = nullptr;
    if ((rc = weft_join(ts[i], &r)) != 0 || r != P(static_cast<intptr_t>(i))) Fail("weft_join", rc);
  }
  if ((rc = weft_shutdown()) != 0) Fail("weft_shutdown", rc);
  std::exit(0);
}

TEST(StackLimitDeathTest, ExhaustionIsDescribed) {
  SetDeathTestStyle();
  EXPECT_EXIT(ExhaustionChild(), ::testing::ExitedWithCode(0), "limit hit: RLIMIT_AS");
}

#endif  // !WEFT_TEST_SANITIZED && !WEFT_TEST_EMULATED

}  // namespace
