// tests/unit/sync_test_util.h - helpers shared by the synchronization-object tests
// (sync_conformance, cond, sem, barrier, rwlock, lockset, time).
//
// Every blocking test here can hang if the library loses a wake-up. Tests never
// rely on ctest's timeout for that: each fixture owns a Watchdog that aborts the
// process with a message when one test runs too long, so a hang is a failure with
// a name, not a stuck CI job.
#ifndef WEFT_SYNC_TEST_UTIL_H
#define WEFT_SYNC_TEST_UTIL_H

#include <weft/sync.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "weft_test.h"

namespace weft_sync_test {

using namespace weft_test;

constexpr uint64_t kUs = 1000ull;
constexpr uint64_t kMs = 1000ull * 1000ull;

// Aborts the process (with the test's name) if it is still alive `seconds` after
// construction. Lives in each fixture: constructed before SetUp, destroyed after
// TearDown, on the OS thread that runs the test.
class Watchdog {
 public:
  explicit Watchdog(double seconds = 120.0) {
    const ::testing::TestInfo *info = ::testing::UnitTest::GetInstance()->current_test_info();
    name_ = info ? std::string(info->test_suite_name()) + "." + info->name() : "?";
    th_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lk(mu_);
      if (!cv_.wait_for(lk, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "\nWATCHDOG: %s still running after %.0f s: hang (lost wake-up?)\n",
                     name_.c_str(), seconds);
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    th_.join();
  }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string name_;
  std::thread th_;
};

// VpTest with a watchdog.
class SyncVpTest : public VpTest {
 protected:
  Watchdog watchdog_;
};

// OneVpTest with a watchdog.
class SyncOneVpTest : public OneVpTest {
 protected:
  Watchdog watchdog_;
};

// Runs body(i) for i in [0, nweft) in weft threads and for i in [nweft, nweft + nos)
// in plain OS threads, all at the same time, and waits for all of them. Called from
// a weft thread (the test body). The OS threads are awaited by yielding (never by
// blocking this VP in pthread_join while they might still need it), then joined.
template <class F>
void RunMixed(int nweft, int nos, F body) {
  struct Arg {
    F *f;
    int i;
  };
  std::vector<Arg> args(static_cast<size_t>(nweft));
  std::vector<weft_thread_t *> ts;
  std::atomic<int> os_done{0};
  std::vector<std::thread> os;
  for (int j = 0; j < nos; ++j) {
    os.emplace_back([&body, &os_done, i = nweft + j] {
      body(i);
      os_done.fetch_add(1);
    });
  }
  for (int i = 0; i < nweft; ++i) {
    args[static_cast<size_t>(i)] = Arg{&body, i};
    ts.push_back(Spawn(
        +[](void *a) -> void * {
          auto *x = static_cast<Arg *>(a);
          (*x->f)(x->i);
          return nullptr;
        },
        &args[static_cast<size_t>(i)]));
  }
  for (weft_thread_t *t : ts)
    if (t) Join(t);
  EXPECT_TRUE(YieldUntil([&] { return os_done.load() == nos; }, 100.0))
      << "plain OS threads did not finish";
  for (auto &t : os) t.join();
}

// Waits (yielding, or sleeping from an OS thread) until pred() holds; false after
// `seconds`. For conditions that another thread makes true soon.
template <class Pred>
bool WaitFor(Pred pred, double seconds = 30.0) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    if (weft_self() != nullptr) weft_yield();
    else std::this_thread::yield();
  }
  return true;
}

// Runs (*f)() in a weft thread (os false) or in a plain OS thread (os true), for
// tests that check the same wait from both kinds of thread. f must outlive it;
// Join() waits for it (from a weft thread: the weft thread by weft_join, the OS
// thread by pthread_join once it has been woken).
class ThreadOfKind {
 public:
  template <class F>
  ThreadOfKind(bool os, F *f) : os_(os) {
    if (os) th_ = std::thread([f] { (*f)(); });
    else t_ = SpawnCall(f);
  }
  void Join() {
    if (t_) weft_test::Join(t_);
    t_ = nullptr;
    if (th_.joinable()) th_.join();
  }
  const char *Kind() const { return os_ ? "OS" : "weft"; }

 private:
  bool os_;
  weft_thread_t *t_ = nullptr;
  std::thread th_;
};

// A small busy loop the compiler cannot drop (lengthens critical sections).
inline void Work(int n) {
  for (volatile int i = 0; i < n; i = i + 1) {
  }
}

inline std::string Err(int rc) { return std::string(weft_err_name(rc)) + " (" + std::to_string(rc) + ")"; }

// Every weft_sem_* call with a NULL semaphore: WEFT_EINVAL (weft_sem_value: 0).
inline void ExpectSemNullEinval() {
  EXPECT_EQ(weft_sem_init(nullptr, 1), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_wait(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_trywait(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_timedwait(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_signal(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_destroy(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_sem_value(nullptr), 0);
}

inline weft_sync_stats_t Stats() {
  weft_sync_stats_t s;
  weft_sync_stats(&s);
  return s;
}

}  // namespace weft_sync_test

#endif
