// tests/unit/stack_policy_test.cc - user stack-allocation policies (OpenThreads
// §3.1.4): stacks the caller provides per thread (weft_attr_t.stack_addr), and a
// runtime-wide allocate/free policy (weft_config_t.stack_alloc/stack_free) whose
// free hook gets back every stack it handed out, exactly once.
#include <alloca.h>
#include <stdlib.h>

#include <map>
#include <mutex>
#include <vector>

#include "weft_test.h"

using namespace weft_test;

namespace {

constexpr size_t KiB = 1024;

// Where the calling thread's stack is: its frame address (not a local's address,
// which ASan may place on its heap-allocated fake stack).
__attribute__((noinline)) uintptr_t StackHere() {
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
}

// Uses `bytes` of stack (one write per KiB), so that a thread really runs on it.
__attribute__((noinline)) int TouchStack(size_t bytes) {
  volatile char *p = static_cast<volatile char *>(alloca(bytes));
  for (size_t i = 0; i < bytes; i += KiB) p[i] = 1;
  int s = 0;
  for (size_t i = 0; i < bytes; i += KiB) s += p[i];
  return s;
}

struct Probe {
  uintptr_t before = 0, after = 0;  // a local's address before and after switches
  int touched = 0;
};

void *ProbeThread(void *arg) {
  auto *p = static_cast<Probe *>(arg);
  p->before = StackHere();
  weft_yield();  // resume, maybe on another VP, on the same stack
  p->touched = TouchStack(24 * KiB);
  weft_yield();
  p->after = StackHere();
  return nullptr;
}

class CallerStackTest : public VpTest {};
WEFT_INSTANTIATE_VPS(CallerStackTest);

// A caller-provided stack is the one the thread runs on, before and after switches,
// and it can be reused for another thread once the first was joined.
TEST_P(CallerStackTest, ThreadRunsOnTheCallersMemory) {
  const size_t size = 64 * KiB;
  void *mem = nullptr;
  ASSERT_EQ(posix_memalign(&mem, 64, size), 0);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(mem), hi = lo + size;
  for (int round = 0; round < 3; round++) {
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.stack_addr = mem;
    attr.stack_size = size;
    Probe p;
    Join(Spawn(ProbeThread, &p, &attr));
    EXPECT_GE(p.before, lo) << "round " << round;
    EXPECT_LT(p.before, hi) << "round " << round;
    EXPECT_GE(p.after, lo) << "round " << round;
    EXPECT_LT(p.after, hi) << "round " << round;
    EXPECT_EQ(p.touched, 24);
  }
  free(mem);
}

// Many threads at once, each on its own caller-provided stack, none outside it.
TEST_P(CallerStackTest, ManyThreadsEachOnItsOwnStack) {
  const int n = static_cast<int>(Scaled(64, 8));
  const size_t size = 32 * KiB;
  std::vector<void *> mem(n);
  std::vector<Probe> probes(n);
  std::vector<weft_thread_t *> ts(n);
  for (int i = 0; i < n; i++) {
    ASSERT_EQ(posix_memalign(&mem[i], 16, size), 0);
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.stack_addr = mem[i];
    attr.stack_size = size;
    ts[i] = Spawn(ProbeThread, &probes[i], &attr);
  }
  for (int i = 0; i < n; i++) Join(ts[i]);
  for (int i = 0; i < n; i++) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(mem[i]);
    EXPECT_TRUE(probes[i].before >= lo && probes[i].before < lo + size) << "thread " << i;
    EXPECT_TRUE(probes[i].after >= lo && probes[i].after < lo + size) << "thread " << i;
    free(mem[i]);
  }
}

class StackAttrErrorTest : public OneVpTest {};

// Bad caller stacks are refused with WEFT_EINVAL, and nothing is created.
TEST_F(StackAttrErrorTest, BadCallerStacksAreRefused) {
  alignas(64) static char buf[64 * 1024];
  weft_thread_t *t = nullptr;
  auto fn = +[](void *) -> void * { return nullptr; };
  weft_attr_t attr;

  weft_attr_init(&attr);
  attr.stack_addr = buf + 8;  // misaligned
  attr.stack_size = 32 * KiB;
  EXPECT_EQ(weft_create(&t, &attr, fn, nullptr), WEFT_EINVAL);

  weft_attr_init(&attr);
  attr.stack_addr = buf;
  attr.stack_size = WEFT_MIN_STACK_SIZE - 16;  // too small
  EXPECT_EQ(weft_create(&t, &attr, fn, nullptr), WEFT_EINVAL);

  weft_attr_init(&attr);
  attr.stack_addr = buf;
  attr.stack_size = 0;  // no size
  EXPECT_EQ(weft_create(&t, &attr, fn, nullptr), WEFT_EINVAL);

  weft_attr_init(&attr);
  attr.stack_addr = buf;
  attr.stack_size = sizeof buf;
  attr.detached = 1;  // nobody could know when the memory is free again
  EXPECT_EQ(weft_create(nullptr, &attr, fn, nullptr), WEFT_EINVAL);

  EXPECT_EQ(t, nullptr);

  // the smallest accepted one works
  weft_attr_init(&attr);
  attr.stack_addr = buf;
  attr.stack_size = WEFT_MIN_STACK_SIZE;
  uintptr_t here = I(Join(Spawn(+[](void *) -> void * {
    weft_yield();
    return P(static_cast<intptr_t>(StackHere()));
  }, nullptr, &attr)));
  EXPECT_GE(here, reinterpret_cast<uintptr_t>(buf));
  EXPECT_LT(here, reinterpret_cast<uintptr_t>(buf) + WEFT_MIN_STACK_SIZE);
}

// ---- a runtime-wide policy ----------------------------------------------------------

// A policy that is also a cache ("create-heavy runtimes"): freed stacks are kept
// and handed out again; it records every stack it handed out and checks each
// comes back once. Its hooks run on VPs' kernel threads, concurrently: a spinlock.
struct CachePolicy {
  SpinLock lock;
  std::map<uintptr_t, size_t> out;               // handed out, not yet back
  std::map<size_t, std::vector<void *>> cache;   // freed, by size
  long allocs = 0, frees = 0, fresh = 0, bad_frees = 0;

  static void *Alloc(size_t size, void *arg) {
    auto *p = static_cast<CachePolicy *>(arg);
    p->lock.lock();
    void *m = nullptr;
    auto &c = p->cache[size];
    if (!c.empty()) {
      m = c.back();
      c.pop_back();
    }
    p->lock.unlock();
    if (!m) {
      if (posix_memalign(&m, 64, size) != 0) return nullptr;
      p->lock.lock();
      p->fresh++;
      p->lock.unlock();
    }
    p->lock.lock();
    p->allocs++;
    p->out[reinterpret_cast<uintptr_t>(m)] = size;
    p->lock.unlock();
    return m;
  }
  static void Free(void *lo, size_t size, void *arg) {
    auto *p = static_cast<CachePolicy *>(arg);
    p->lock.lock();
    p->frees++;
    auto it = p->out.find(reinterpret_cast<uintptr_t>(lo));
    if (it == p->out.end() || it->second != size) p->bad_frees++;
    else p->out.erase(it);
    p->cache[size].push_back(lo);
    p->lock.unlock();
  }
  // Is [addr] inside a stack handed out now?
  bool Owns(uintptr_t addr) {
    lock.lock();
    bool in = false;
    auto it = out.upper_bound(addr);
    if (it != out.begin()) {
      --it;
      in = addr < it->first + it->second;
    }
    lock.unlock();
    return in;
  }
  ~CachePolicy() {
    for (auto &kv : cache)
      for (void *m : kv.second) free(m);
  }
};

CachePolicy *g_policy;

void *PolicyThread(void *arg) {
  auto ok = static_cast<std::atomic<int> *>(arg);
  if (g_policy->Owns(StackHere())) ok->fetch_add(1);
  weft_yield();
  if (g_policy->Owns(StackHere())) ok->fetch_add(1);
  return nullptr;
}

class StackPolicyTest : public WeftTest, public ::testing::WithParamInterface<int> {};
WEFT_INSTANTIATE_VPS(StackPolicyTest);

// Every thread runs on a stack from the policy; after shutdown the free hook has
// seen every stack the alloc hook handed out, each once with its size; the cache
// makes far fewer fresh allocations than threads.
TEST_P(StackPolicyTest, FreeHookSeesEveryStack) {
  CachePolicy policy;
  g_policy = &policy;
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = GetParam();
  cfg.stack_size = 64 * KiB;
  cfg.stack_alloc = CachePolicy::Alloc;
  cfg.stack_free = CachePolicy::Free;
  cfg.stack_arg = &policy;
  ASSERT_EQ(weft_init(&cfg), 0);
  const int rounds = 4, per_round = static_cast<int>(Scaled(200, 16));
  std::atomic<int> ok{0};
  for (int r = 0; r < rounds; r++) {
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < per_round; i++) {
      weft_attr_t attr;
      weft_attr_init(&attr);
      if (i % 4 == 3) attr.stack_size = 48 * KiB;  // a second size
      ts.push_back(Spawn(PolicyThread, &ok, &attr));
    }
    // a detached thread's stack comes back too
    weft_attr_t det = DetachedAttr();
    ASSERT_EQ(weft_create(nullptr, &det, PolicyThread, &ok), 0);
    for (weft_thread_t *t : ts) Join(t);
  }
  ASSERT_EQ(weft_shutdown(), 0);
  const int threads = rounds * (per_round + 1);
  EXPECT_EQ(ok.load(), 2 * threads) << "a thread ran off the policy's stacks";
  EXPECT_EQ(policy.allocs, threads);
  EXPECT_EQ(policy.frees, policy.allocs);
  EXPECT_EQ(policy.bad_frees, 0);
  EXPECT_TRUE(policy.out.empty()) << policy.out.size() << " stacks never came back";
  EXPECT_LT(policy.fresh, threads) << "the cache was never reused";
  g_policy = nullptr;
}

// A policy with only one of its two hooks is refused.
TEST(StackPolicyConfig, HalfAPolicyIsInvalid) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  EXPECT_EQ(cfg.stack_alloc, nullptr);
  EXPECT_EQ(cfg.stack_free, nullptr);
  cfg.nvps = 1;
  cfg.stack_alloc = CachePolicy::Alloc;
  EXPECT_EQ(weft_init(&cfg), WEFT_EINVAL);
  cfg.stack_alloc = nullptr;
  cfg.stack_free = CachePolicy::Free;
  EXPECT_EQ(weft_init(&cfg), WEFT_EINVAL);
  EXPECT_FALSE(weft_is_running());
}

// A policy whose alloc fails makes eager binding report WEFT_ENOMEM; the thread
// runs once the policy gives a stack.
std::atomic<int> g_fail_allocs;
void *FailingAlloc(size_t size, void *) {
  if (g_fail_allocs.load() > 0) {
    g_fail_allocs.fetch_sub(1);
    return nullptr;
  }
  void *m = nullptr;
  return posix_memalign(&m, 16, size) == 0 ? m : nullptr;
}
void FreeingFree(void *lo, size_t, void *) { free(lo); }

TEST(StackPolicyFailure, FailedAllocIsRetried) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  cfg.stack_alloc = FailingAlloc;
  cfg.stack_free = FreeingFree;
  ASSERT_EQ(weft_init(&cfg), 0);
  g_fail_allocs = 1;
  std::atomic<int> ran{0};
  weft_thread_t *t = Spawn(+[](void *a) -> void * {
    static_cast<std::atomic<int> *>(a)->fetch_add(1);
    return nullptr;
  }, &ran);
  EXPECT_EQ(weft_sched_bind_stack(t), WEFT_ENOMEM);
  Join(t);  // the lazy bind retries and succeeds
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_debug_live_blocks(), 0);
}

}  // namespace
