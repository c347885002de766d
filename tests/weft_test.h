// tests/weft_test.h - fixtures and small helpers shared by weft's GoogleTest suite.
//
// Every test that needs a running runtime derives from WeftTest: its TearDown shuts
// weft down (if the test has not) and checks that nothing leaked. VpTest runs a test
// body once per virtual-processor count (1, 2 and 4; 4 oversubscribes a 2-core box).
//
// Between weft_init() and weft_shutdown() the test body is the main weft thread and
// may resume on another VP's kernel thread after any call that can switch. Do not
// use SCOPED_TRACE (gtest keeps the trace stack per OS thread: popping it on
// another one crashes) or C++ thread_local across such calls; put the context in
// the assertion's message instead.
#ifndef WEFT_TEST_H
#define WEFT_TEST_H

#include <gtest/gtest.h>
#include <weft/debug.h>
#include <weft/weft.h>

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

// The sanitizer this test is built with (GCC defines __SANITIZE_*, Clang has
// __has_feature): WEFT_TEST_ASAN, WEFT_TEST_TSAN, and WEFT_TEST_SANITIZED for either.
#if defined(__SANITIZE_ADDRESS__)
#define WEFT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define WEFT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TEST_TSAN 1
#endif
#endif
#if defined(WEFT_TEST_ASAN) || defined(WEFT_TEST_TSAN)
#define WEFT_TEST_SANITIZED 1
#endif

namespace weft_test {

#ifndef WEFT_TEST_DEFAULT_SCALE
#define WEFT_TEST_DEFAULT_SCALE 1.0
#endif

// The environment variable WEFT_TEST_SCALE (default: the build's
// WEFT_TEST_DEFAULT_SCALE, 1.0 in a plain build) scales the size of the
// long-running tests, so that emulated (qemu) and sanitizer builds run them with
// fewer threads.
inline double Scale() {
  const char *s = std::getenv("WEFT_TEST_SCALE");
  if (s == nullptr || *s == '\0') return WEFT_TEST_DEFAULT_SCALE;
  char *end = nullptr;
  double v = std::strtod(s, &end);
  return (end != s && v > 0) ? v : WEFT_TEST_DEFAULT_SCALE;
}

// n scaled by WEFT_TEST_SCALE, but never below min_n.
inline long Scaled(long n, long min_n = 1) {
  long v = std::lround(static_cast<double>(n) * Scale());
  return v < min_n ? min_n : v;
}

inline void *P(intptr_t v) { return reinterpret_cast<void *>(v); }
inline intptr_t I(void *p) { return reinterpret_cast<intptr_t>(p); }

// The kernel thread the caller runs on (a system call: never cached across switches).
inline long Tid() { return static_cast<long>(syscall(SYS_gettid)); }

// Waits, letting other weft threads run, until pred() holds or `seconds` pass.
// Returns pred(). Works from weft threads and (via sched_yield) plain OS threads.
template <class Pred>
bool YieldUntil(Pred pred, double seconds = 30.0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    weft_yield();
  }
  return true;
}

// Waits without ever switching the calling weft thread (its VP stays busy), until
// pred() holds or `seconds` pass. Returns pred().
template <class Pred>
bool SpinUntil(Pred pred, double seconds = 30.0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
  return true;
}

// Waits by sleeping 1 ms at a time (so that the caller's VP goes idle, and a
// scheduler that hands out threads in processor_idle runs them; a yield with an
// empty dispatch queue returns at once) until pred() holds or `seconds` pass.
// Returns pred(). From a weft thread only.
template <class Pred>
bool SleepUntil(Pred pred, double seconds = 30.0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    weft_sleep_ns(1000 * 1000);
  }
  return true;
}

// A test-and-set spinlock that never switches the weft thread (allowed in
// scheduler handlers and release callbacks). Gives the CPU back to the kernel
// while spinning, since 4 VPs on 2 cores can preempt the holder.
class SpinLock {
 public:
  void lock() {
    for (unsigned spins = 0; flag_.test_and_set(std::memory_order_acquire); ++spins) {
      if ((spins & 63) == 63) sched_yield();
    }
  }
  void unlock() { flag_.clear(std::memory_order_release); }
  // Release callback for weft_thread_block(): unlocks the SpinLock at `self`.
  static void Unlock(void *self) { static_cast<SpinLock *>(self)->unlock(); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// The smallest synchronization object built on weft_thread_block/unblock: a
// spinlock-protected list of blocked weft threads. The lock is released by the
// block's release callback, so a waker can see a waiter only once its context is
// saved. Also checks that the release callback never runs on the blocked thread.
class WaitList {
 public:
  // Blocks the calling weft thread until some Wake*() picks it.
  void Wait() {
    lock_.lock();
    weft_thread_t *self = weft_self();
    waiters_.push_back(self);
    blocker_ = self;
    weft_thread_block(&WaitList::Release, this);
  }
  // Unblocks one waiter (the oldest). Returns false if there was none.
  bool WakeOne() {
    lock_.lock();
    if (waiters_.empty()) {
      lock_.unlock();
      return false;
    }
    weft_thread_t *t = waiters_.front();
    waiters_.erase(waiters_.begin());
    lock_.unlock();
    weft_thread_unblock(t);
    return true;
  }
  size_t Size() {
    lock_.lock();
    size_t n = waiters_.size();
    lock_.unlock();
    return n;
  }
  // How many release callbacks ran while weft_self() was still the blocked thread.
  int ReleaseViolations() const { return violations_.load(); }

 private:
  static void Release(void *arg) {
    auto *wl = static_cast<WaitList *>(arg);
    if (weft_self() == wl->blocker_) wl->violations_.fetch_add(1);
    wl->lock_.unlock();
  }
  SpinLock lock_;
  std::vector<weft_thread_t *> waiters_;  // under lock_
  weft_thread_t *blocker_ = nullptr;      // under lock_: the thread now blocking
  std::atomic<int> violations_{0};
};

// A one-shot event: Wait() blocks a weft thread (or spins a plain OS thread) until
// Set() is called from anywhere. Unlike a yield loop it lets the waiter's VP go
// idle, which a scheduler that hands out threads in processor_idle needs.
class Event {
 public:
  void Wait() {
    if (weft_self() == nullptr) {
      while (!set_.load(std::memory_order_acquire)) sched_yield();
      return;
    }
    lock_.lock();
    if (set_.load(std::memory_order_relaxed)) {
      lock_.unlock();
      return;
    }
    waiter_ = weft_self();
    weft_thread_block(&SpinLock::Unlock, &lock_);
  }
  void Set() {
    lock_.lock();
    set_.store(true, std::memory_order_release);
    weft_thread_t *t = waiter_;
    waiter_ = nullptr;
    lock_.unlock();
    if (t != nullptr) weft_thread_unblock(t);
  }
  bool IsSet() const { return set_.load(std::memory_order_acquire); }

 private:
  SpinLock lock_;
  std::atomic<bool> set_{false};
  weft_thread_t *waiter_ = nullptr;  // under lock_
};

// weft_init() with `nvps` VPs and every other field at its default.
// The descriptors of this process's table whose /proc/self/fd link satisfies match
// (the link's target: a path, or "anon_inode:[io_uring]" and the like); -1 if the
// table cannot be listed.
template <typename Match>
inline int FdsWhoseTarget(Match match) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (struct dirent *e = readdir(d)) {
    char path[300], target[512];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = '\0';
    if (match(static_cast<const char *>(target))) n++;
  }
  closedir(d);
  return n;
}

inline int InitWithVps(int nvps) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps;
  return weft_init(&cfg);
}

// Creates a joinable thread running fn(arg) (EXPECTs success); NULL on failure.
inline weft_thread_t *Spawn(weft_thread_fn fn, void *arg = nullptr,
                            const weft_attr_t *attr = nullptr) {
  weft_thread_t *t = nullptr;
  int rc = weft_create(&t, attr, fn, arg);
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  return t;
}

// Joins t (EXPECTs success) and returns its result.
inline void *Join(weft_thread_t *t) {
  void *r = nullptr;
  int rc = weft_join(t, &r);
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  return r;
}

// Creates a joinable thread that runs (*f)() (EXPECTs success); NULL on failure.
// f (a lambda, typically) must outlive the thread. The thread returns f's result
// (a pointer), or NULL if f returns void.
template <class F>
weft_thread_t *SpawnCall(F *f, const weft_attr_t *attr = nullptr) {
  return Spawn(
      +[](void *a) -> void * {
        F *fn = static_cast<F *>(a);
        if constexpr (std::is_void_v<decltype((*fn)())>) {
          (*fn)();
          return nullptr;
        } else {
          return (*fn)();
        }
      },
      f, attr);
}

// Attributes (defaults otherwise) that create a detached thread.
inline weft_attr_t DetachedAttr() {
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.detached = 1;
  return attr;
}

// Attributes (defaults otherwise) that create a thread in bundle b.
inline weft_attr_t InBundle(weft_bundle_t *b) {
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = b;
  return attr;
}

// How many threads wait on a synchronization object, or (for a thread) in
// weft_join() for it: weft_debug_waiters() by the object's type.
inline int Waiters(const weft_mutex_t *m) { return weft_debug_waiters(WEFT_DEBUG_MUTEX, m); }
inline int Waiters(const weft_hybrid_t *h) { return weft_debug_waiters(WEFT_DEBUG_HYBRID, h); }
inline int Waiters(const weft_cond_t *c) { return weft_debug_waiters(WEFT_DEBUG_COND, c); }
inline int Waiters(const weft_sem_t *s) { return weft_debug_waiters(WEFT_DEBUG_SEM, s); }
inline int Waiters(const weft_rwlock_t *l) { return weft_debug_waiters(WEFT_DEBUG_RWLOCK, l); }
inline int Waiters(const weft_barrier_t *b) { return weft_debug_waiters(WEFT_DEBUG_BARRIER, b); }
inline int Waiters(const weft_thread_t *t) { return weft_debug_waiters(WEFT_DEBUG_JOIN, t); }

// Waits (yielding) until exactly n threads wait on obj (Waiters): how a test lets
// a waiter block before it acts, instead of sleeping "long enough". Returns false
// if the count is still not n after `seconds` (the watchdog).
template <class Obj>
bool WaitForWaiters(const Obj *obj, int n, double seconds = 30.0) {
  return YieldUntil([&] { return Waiters(obj) == n; }, seconds);
}

// Runs f() (returning void*) in a new weft thread, joins it, returns its result.
template <class F>
void *RunInThread(F f, const weft_attr_t *attr = nullptr) {
  weft_thread_t *t = SpawnCall(&f, attr);
  return t ? Join(t) : nullptr;
}

// Sets WEFT_MONITOR=off while it lives and puts back what was there. For a fixture
// member, so that weft_init (in SetUp) starts without the system monitor: tests of a
// property that the monitor's spare VPs legitimately break (a VP index always on one
// kernel thread, a queued thread never starting while its creator runs) use it; on a
// loaded machine the monitor may take a VP whose kernel thread waits in the kernel
// (under TSan, on its own futex) for stalled. monitor_test.cc tests the spares.
class MonitorOffEnv {
 public:
  MonitorOffEnv() {
    const char *m = getenv("WEFT_MONITOR");
    had_ = m != nullptr;
    if (m) saved_ = m;
    setenv("WEFT_MONITOR", "off", 1);
  }
  ~MonitorOffEnv() {
    if (had_) setenv("WEFT_MONITOR", saved_.c_str(), 1);
    else unsetenv("WEFT_MONITOR");
  }
  MonitorOffEnv(const MonitorOffEnv &) = delete;
  MonitorOffEnv &operator=(const MonitorOffEnv &) = delete;

 private:
  std::string saved_;
  bool had_ = false;
};

// Base fixture: TearDown shuts weft down if the test left it running, requires that
// to succeed, and requires that weft holds no memory afterwards.
class WeftTest : public ::testing::Test {
 protected:
  void StartWeft(int nvps) {
    int rc = InitWithVps(nvps);
    ASSERT_EQ(rc, 0) << weft_err_name(rc);
  }
  void TearDown() override {
    if (weft_is_running()) {
      int rc = weft_shutdown();
      EXPECT_EQ(rc, 0) << "weft_shutdown: " << weft_err_name(rc);
    }
    EXPECT_EQ(weft_debug_live_blocks(), 0) << "weft still holds memory after shutdown";
  }
};

// Runs each test with GetParam() virtual processors.
class VpTest : public WeftTest, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override { StartWeft(GetParam()); }
  int nvps() const { return GetParam(); }
};

// Runs each test with a single virtual processor (deterministic scheduling).
class OneVpTest : public WeftTest {
 protected:
  void SetUp() override { StartWeft(1); }
};

// Death tests re-execute the test binary ("threadsafe" style). Under a user-mode
// emulator (qemu-aarch64 without binfmt_misc) the binary cannot exec itself, so
// there they fork only ("fast" style); that is safe because every death test here
// starts the runtime inside the statement, when the parent has only one thread.
inline void SetDeathTestStyle() {
#ifdef WEFT_TEST_EMULATED
  GTEST_FLAG_SET(death_test_style, "fast");
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#endif
}

inline std::string VpName(const ::testing::TestParamInfo<int> &info) {
  return std::to_string(info.param) + "vp";
}

}  // namespace weft_test

// The body of a death test for misuse that checked builds (WEFT_CHECKED) catch:
// skips the test in an unchecked build; otherwise, in the death-test child, starts
// weft with one VP, runs the statements given after `regex`, and expects the
// process to die with a message that matches regex (it exits 0 if they return).
// The statements are separated by semicolons; the last needs none.
#ifdef WEFT_TEST_CHECKED
#define WEFT_TEST_SKIP_UNCHECKED() ((void)0)
#else
#define WEFT_TEST_SKIP_UNCHECKED() GTEST_SKIP() << "the library is not built with WEFT_CHECKED"
#endif
#define WEFT_EXPECT_MISUSE_DEATH(regex, ...) \
  do {                                       \
    WEFT_TEST_SKIP_UNCHECKED();              \
    ::weft_test::SetDeathTestStyle();        \
    EXPECT_DEATH(                            \
        {                                    \
          ::weft_test::InitWithVps(1);       \
          __VA_ARGS__;                       \
          std::_Exit(0);                     \
        },                                   \
        regex);                              \
  } while (0)

// Instantiates a VpTest-derived suite for 1, 2 and 4 virtual processors.
#define WEFT_INSTANTIATE_VPS(suite) \
  INSTANTIATE_TEST_SUITE_P(Vps, suite, ::testing::Values(1, 2, 4), ::weft_test::VpName)

#endif  // WEFT_TEST_H
