// tests/unit/cpp_test.cc - the C++17 layer (weft/weft.hpp): every class and function,
// the lockables inside the standard wrappers (lock_guard, unique_lock, scoped_lock,
// shared_lock), errors as std::system_error, the documented std::terminate cases,
// Hoare monitors, and a scheduler derived from weft::scheduler.
#include <weft/weft.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <unordered_set>

#include "weft_test.h"

using namespace std::chrono_literals;
using weft_test::Scaled;

namespace {

// ---- errors ------------------------------------------------------------------------

TEST(CppError, CategoryMessagesAndConditions) {
  const std::error_category &c = weft::error_category();
  EXPECT_STREQ(c.name(), "weft");
  EXPECT_EQ(c.message(WEFT_EINVAL), weft_strerror(WEFT_EINVAL));
  EXPECT_EQ(weft::make_error_code(WEFT_ETIMEDOUT), std::errc::timed_out);
  EXPECT_EQ(weft::make_error_code(WEFT_EBUSY), std::errc::device_or_resource_busy);
  EXPECT_EQ(weft::make_error_code(WEFT_EDEADLK), std::errc::resource_deadlock_would_occur);
  EXPECT_EQ(weft::make_error_code(WEFT_ENOMEM), std::errc::not_enough_memory);
  EXPECT_EQ(weft::make_error_code(WEFT_EPERM), std::errc::operation_not_permitted);
  EXPECT_EQ(weft::make_error_code(WEFT_EAGAIN), std::errc::resource_unavailable_try_again);
  EXPECT_EQ(weft::make_error_code(WEFT_ESRCH), std::errc::no_such_process);
  EXPECT_EQ(weft::make_error_code(WEFT_EINVAL), std::errc::invalid_argument);
  EXPECT_NE(weft::make_error_code(WEFT_ENOTINIT), std::errc::invalid_argument);
}

TEST(CppError, FailingCallsThrowSystemError) {
  // no runtime: creating a thread fails with ENOTINIT
  try {
    weft::thread t([] {});
    t.join();
    ADD_FAILURE() << "no exception";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code().value(), WEFT_ENOTINIT);
    EXPECT_EQ(&e.code().category(), &weft::error_category());
  }
  weft::runtime rt(1);
  EXPECT_THROW(weft::runtime again(1), std::system_error);  // EALREADY
  weft::thread none;
  try {
    none.join();
    ADD_FAILURE() << "no exception";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code(), std::errc::invalid_argument);
  }
  EXPECT_THROW(none.detach(), std::system_error);
  EXPECT_THROW(weft::counting_semaphore<> bad(-1), std::system_error);
  EXPECT_THROW(weft::barrier bad(0), std::system_error);
  EXPECT_THROW(weft::bundle bad(0xffu), std::system_error);
}

// ---- runtime -----------------------------------------------------------------------

TEST(CppRuntime, RaiiAndExplicitShutdown) {
  {
    weft::runtime rt(2);
    EXPECT_EQ(weft_is_running(), 1);
    EXPECT_EQ(weft::runtime::vp_count(), 2);
    EXPECT_EQ(weft::thread::hardware_concurrency(), 2u);
  }
  EXPECT_EQ(weft_is_running(), 0);
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  weft::runtime rt(cfg);
  EXPECT_EQ(weft::runtime::vp_count(), 1);
  rt.shutdown();
  EXPECT_EQ(weft_is_running(), 0);
  rt.shutdown();  // once is enough
  EXPECT_GT(weft::thread::hardware_concurrency(), 0u);
}

// weft stopped by other means while a weft::runtime lives (weft_shutdown() from C,
// or cthread_exit() of the main C-Thread, which stops weft before the process exits
// and so before a static runtime's destructor runs): neither shutdown() nor the
// destructor fails (the destructor called std::terminate()).
static void StoppedByOtherMeans() {
  {
    weft::runtime rt(1);
    if (weft_shutdown() != 0) std::exit(3);
    rt.shutdown();  // weft is not running: nothing to do
  }
  {
    weft::runtime rt(1);
    if (weft_shutdown() != 0) std::exit(4);
  }  // the destructor
  std::exit(7);
}

TEST(CppRuntime, StoppedByOtherMeansIsNotAFailure) {
  EXPECT_EXIT(StoppedByOtherMeans(), ::testing::ExitedWithCode(7), "");
}

// A weft::thread nobody joined when weft_shutdown() waited for it and reclaimed it:
// join() says ENOTINIT and detach() lets go; either way the object is no longer
// joinable and its destruction does not terminate the program (it did: join and
// detach threw and left it joinable).
static void JoinOrDetachAfterShutdown() {
  weft::thread a, b;
  {
    weft::runtime rt(1);
    a = weft::thread([] {});
    b = weft::thread([] {});
  }  // weft_shutdown waits for both, and reclaims them
  try {
    a.join();
    std::exit(3);
  } catch (const std::system_error &e) {
    if (e.code().value() != WEFT_ENOTINIT) std::exit(4);
  }
  if (a.joinable()) std::exit(5);
  b.detach();
  if (b.joinable()) std::exit(6);
  std::exit(7);
}

TEST(CppThread, JoinOrDetachAfterShutdownLetsGo) {
  EXPECT_EXIT(JoinOrDetachAfterShutdown(), ::testing::ExitedWithCode(7), "");
}

#if WEFT_BUILD_CHECKED
// A library built checked stops an unlock of a lock nobody holds (undefined use; the
// C call's WEFT_EPERM was dropped by the noexcept unlock).
TEST(CppCheckedDeathTest, UnlockOfALockNobodyHoldsAborts) {
  EXPECT_DEATH(
      {
        weft::runtime rt(1);
        weft::mutex m;
        m.unlock();
      },
      "weft::mutex::unlock of a lock nobody holds");
  EXPECT_DEATH(
      {
        weft::runtime rt(1);
        weft::shared_mutex m;
        m.unlock_shared();
      },
      "weft::shared_mutex::unlock_shared of a lock nobody holds");
}
#endif

// ---- threads -----------------------------------------------------------------------

int g_plain = 0;
void PlainFn() { g_plain = 1; }

struct Adder {
  long total = 0;
  void add(long a, long b) { total += a + b; }
  long get() const { return total; }
};

TEST(CppThread, CallablesArgumentsAndPrestoStart) {
  weft::runtime rt(2);
  weft::thread a(PlainFn);  // a function pointer: travels in the argument word
  a.join();
  EXPECT_EQ(g_plain, 1);
  int x = 0;
  weft::thread b([&x] { x = 5; });  // one reference: the argument word too
  b.join();
  EXPECT_EQ(x, 5);
  std::string s;
  weft::thread c([&s](std::string v, int n) { s = v + std::to_string(n); }, std::string("n="), 3);
  c.join();
  EXPECT_EQ(s, "n=3");
  auto up = std::make_unique<int>(9);
  int got = 0;
  weft::thread d([&got](std::unique_ptr<int> p) { got = *p; }, std::move(up));  // move-only arg
  d.join();
  EXPECT_EQ(got, 9);
  Adder obj;
  weft::thread e = weft::thread::start(obj, &Adder::add, 2L, 3L);  // Presto: lvalue, in place
  e.join();
  weft::thread f = weft::thread::start(&obj, &Adder::add, 10L, 0L);  // a pointer
  f.join();
  EXPECT_EQ(obj.total, 15);
  weft::thread g = weft::thread::start(Adder{}, &Adder::add, 1L, 1L);  // an rvalue, moved in
  g.join();
  weft::thread h = weft::thread::start(obj, &Adder::get);  // a const operation
  h.join();
}

TEST(CppThread, JoinDetachMoveSwapIds) {
  weft::runtime rt(2);
  std::atomic<int> ran{0};
  weft::thread::id inside;
  weft::thread t([&] {
    inside = weft::this_thread::get_id();
    ran++;
  });
  EXPECT_TRUE(t.joinable());
  weft::thread::id tid = t.get_id();
  EXPECT_NE(tid, weft::thread::id());
  EXPECT_NE(t.native_handle(), nullptr);
  weft::thread u(std::move(t));
  EXPECT_FALSE(t.joinable());
  EXPECT_TRUE(u.joinable());
  EXPECT_EQ(u.get_id(), tid);
  weft::thread v;
  swap(u, v);
  EXPECT_FALSE(u.joinable());
  v.join();
  EXPECT_FALSE(v.joinable());
  EXPECT_EQ(inside, tid);
  EXPECT_EQ(weft::thread().get_id(), weft::thread::id());
  EXPECT_NE(weft::this_thread::get_id(), tid);  // main
  std::ostringstream os;
  os << tid;
  EXPECT_EQ(os.str(), std::to_string(tid.value()));
  EXPECT_TRUE(tid > weft::thread::id() && weft::thread::id() < tid && tid >= tid && tid <= tid);
  std::unordered_set<weft::thread::id> ids{tid, weft::this_thread::get_id()};
  EXPECT_EQ(ids.size(), 2u);
  weft::thread w([&] { ran++; });
  w.detach();
  EXPECT_FALSE(w.joinable());
  EXPECT_TRUE(weft_test::YieldUntil([&] { return ran.load() == 2; }));
  weft::thread y;
  y = weft::thread([&] { ran++; });  // move-assign into an empty thread
  y.join();
  EXPECT_EQ(ran.load(), 3);
}

TEST(CppThread, AttributesBundleStackAffinity) {
  weft::runtime rt(2);
  weft::bundle b(WEFT_SCHED_LIFO | WEFT_SCHED_EAGER);
  weft::thread::attributes a;
  a.bundle = b.native_handle();
  a.stack_size = 64 * 1024;
  a.affinity = 1;
  weft_bundle_t *seen = nullptr;
  weft::thread t(a, [&seen] { seen = weft_thread_bundle(weft_self()); });
  t.join();
  EXPECT_EQ(seen, b.native_handle());
  b.destroy();
  EXPECT_EQ(b.native_handle(), nullptr);
}

using CppThreadDeathTest = ::testing::Test;

TEST_F(CppThreadDeathTest, ThrowingBodyTerminates) {
  EXPECT_DEATH(
      {
        weft::runtime rt(1);
        weft::thread t([] { throw std::runtime_error("boom"); });
        t.join();
      },
      "");
}

TEST_F(CppThreadDeathTest, DestroyingAJoinableThreadTerminates) {
  EXPECT_DEATH(
      {
        weft::runtime rt(1);
        weft::thread t([] {});
      },
      "");
}

// ---- this_thread ---------------------------------------------------------------------

TEST(CppThisThread, YieldSleepForSleepUntil) {
  weft::runtime rt(1);
  std::atomic<int> ticks{0};
  std::atomic<bool> awake{false};
  // One VP, and main never yields before its sleep: `other` can only tick while main
  // sleeps, so a tick shows that the sleep blocked the thread, not the VP.
  weft::thread other([&] {
    while (!awake.load()) {
      ticks++;
      weft::this_thread::yield();
    }
  });
  auto t0 = std::chrono::steady_clock::now();
  weft::this_thread::sleep_for(2ms);
  awake = true;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 2ms);
  EXPECT_GE(ticks.load(), 1);
  auto until = std::chrono::steady_clock::now() + 1ms;
  weft::this_thread::sleep_until(until);
  EXPECT_GE(std::chrono::steady_clock::now(), until);
  auto suntil = std::chrono::system_clock::now() + 1ms;
  weft::this_thread::sleep_until(suntil);
  EXPECT_GE(std::chrono::system_clock::now(), suntil);
  weft::this_thread::sleep_for(-1s);  // in the past: returns
  other.join();
}

TEST(CppThisThread, WiredScopeBlockingReadOnOneVp) {
  weft::runtime rt(1);
  int fd[2];
  ASSERT_EQ(pipe(fd), 0);
  std::atomic<int> ready{0};
  char got = 0;
  int vp_inside = 0, nested_ok = 0;
  weft::thread reader([&] {
    weft::this_thread::wired w;
    {
      weft::this_thread::wired inner;  // nested: the outer scope stays in charge
    }
    nested_ok = weft_is_wired();
    vp_inside = weft_vp_self();
    ready = 1;
    ssize_t n = read(fd[0], &got, 1);
    (void)n;
  });
  weft::thread writer([&] {
    while (!ready.load()) weft::this_thread::yield();
    char c = 'z';
    ssize_t n = write(fd[1], &c, 1);
    (void)n;
  });
  reader.join();
  writer.join();
  EXPECT_EQ(got, 'z');
  EXPECT_EQ(vp_inside, -1);
  EXPECT_EQ(nested_ok, 1);
  EXPECT_EQ(weft_wired_count(), 0);
  close(fd[0]);
  close(fd[1]);
}

// ---- lockables in the standard wrappers ---------------------------------------------

class CppVp : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Vps, CppVp, ::testing::Values(1, 2));

TEST_P(CppVp, MutexInLockGuardUniqueLockScopedLock) {
  weft::runtime rt(GetParam());
  weft::mutex m1, m2;
  long a = 0, b = 0;
  const long n = Scaled(5000, 100);
  std::vector<weft::thread> ts;
  for (int k = 0; k < 4; k++) {
    ts.emplace_back([&, k] {
      for (long i = 0; i < n; i++) {
        if (i % 3 == 0) {
          std::lock_guard<weft::mutex> g(m1);
          a++;
        } else if (i % 3 == 1) {
          std::unique_lock<weft::mutex> l(m1, std::defer_lock);
          l.lock();
          a++;
          l.unlock();
          if (l.try_lock()) {  // may fail under contention
            a++;
            b++;
          }
        } else {
          // both, in opposite orders on odd and even threads: scoped_lock avoids deadlock
          if (k % 2) {
            std::scoped_lock s(m1, m2);
            a++;
          } else {
            std::scoped_lock s(m2, m1);
            a++;
          }
        }
        if (i % 64 == 0) weft::this_thread::yield();
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(a, 4 * n + b);
  EXPECT_TRUE(m1.try_lock());
  EXPECT_FALSE(m1.try_lock());
  m1.unlock();
  EXPECT_NE(m1.native_handle(), nullptr);
}

TEST_P(CppVp, TimedMutex) {
  weft::runtime rt(GetParam());
  weft::timed_mutex m;
  std::unique_lock<weft::timed_mutex> held(m);
  std::atomic<bool> r1{true}, r2{true}, r3{false};
  weft::thread t([&] {
    r1 = m.try_lock_for(1ms);  // held by main: times out
    r2 = m.try_lock_until(std::chrono::steady_clock::now() + 1ms);
    r3 = m.try_lock_for(10s);  // main unlocks
    if (r3.load()) m.unlock();
  });
  while (r2.load()) weft::this_thread::yield();  // until both timed out
  held.unlock();
  t.join();
  EXPECT_FALSE(r1.load());
  EXPECT_FALSE(r2.load());
  EXPECT_TRUE(r3.load());
  std::unique_lock<weft::timed_mutex> l(m, 1ms);  // unique_lock's timed constructor
  EXPECT_TRUE(l.owns_lock());
  EXPECT_FALSE(m.try_lock());
}

TEST_P(CppVp, SharedMutexWithSharedLockAndUniqueLock) {
  weft::runtime rt(GetParam());
  weft::shared_mutex sm;
  std::atomic<int> readers{0}, max_readers{0};
  long value = 0;
  std::atomic<int> bad{0};
  const long n = Scaled(2000, 50);
  std::vector<weft::thread> ts;
  for (int k = 0; k < 4; k++) {
    ts.emplace_back([&, k] {
      for (long i = 0; i < n; i++) {
        if (k == 0 && i % 4 == 0) {
          std::unique_lock<weft::shared_mutex> w(sm);
          if (readers.load() != 0) bad++;
          value++;
        } else {
          std::shared_lock<weft::shared_mutex> r(sm);
          int now = ++readers;
          int m = max_readers.load();
          while (now > m && !max_readers.compare_exchange_weak(m, now)) {
          }
          if (value < 0) bad++;
          weft::this_thread::yield();  // let other readers in
          --readers;
        }
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(value, (n + 3) / 4);
  // try and timed forms
  {
    std::shared_lock<weft::shared_mutex> r1(sm), r2(sm, std::try_to_lock);
    EXPECT_TRUE(r2.owns_lock());  // readers share
    EXPECT_FALSE(sm.try_lock());
    EXPECT_FALSE(sm.try_lock_for(1ms));
    EXPECT_FALSE(sm.try_lock_until(std::chrono::steady_clock::now() + 1ms));
  }
  {
    std::unique_lock<weft::shared_mutex> w(sm);
    EXPECT_FALSE(sm.try_lock_shared());
    EXPECT_FALSE(sm.try_lock_shared_for(1ms));
    EXPECT_FALSE(sm.try_lock_shared_until(std::chrono::steady_clock::now() + 1ms));
  }
  EXPECT_TRUE(sm.try_lock_shared_for(1ms));
  sm.unlock_shared();
  EXPECT_TRUE(sm.try_lock_for(1ms));
  sm.unlock();
  EXPECT_NE(sm.native_handle(), nullptr);
}

template <class Kind>
class CppSpin : public ::testing::Test {};
using SpinKinds = ::testing::Types<weft::spin::tas, weft::spin::ttas, weft::spin::backoff,
                                   weft::spin::ticket, weft::spin::array, weft::spin::mcs>;
TYPED_TEST_SUITE(CppSpin, SpinKinds);

TYPED_TEST(CppSpin, MutualExclusionInLockGuard) {
  weft::runtime rt(2);
  weft::spinlock<TypeParam> l;
  long count = 0;
  const long n = Scaled(5000, 100);
  std::vector<weft::thread> ts;
  for (int k = 0; k < 3; k++) {
    ts.emplace_back([&] {
      for (long i = 0; i < n; i++) {
        std::lock_guard<weft::spinlock<TypeParam>> g(l);
        count++;
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(count, 3 * n);
  {
    std::unique_lock<weft::spinlock<TypeParam>> u(l);
    EXPECT_FALSE(l.try_lock());
  }
  EXPECT_TRUE(l.try_lock());
  l.unlock();
  EXPECT_NE(l.native_handle(), nullptr);
}

TEST(CppSpin, DefaultKindIsTheCDefault) {
  EXPECT_TRUE((std::is_same_v<weft::spinlock<>::native_handle_type, weft_spin_t *>));
}

// ---- condition variables ------------------------------------------------------------

TEST_P(CppVp, ConditionVariableProducerConsumer) {
  weft::runtime rt(GetParam());
  weft::mutex m;
  weft::condition_variable cv;
  std::deque<long> q;
  bool done = false;
  const long n = Scaled(4000, 100);
  long sum = 0;
  std::vector<weft::thread> cons;
  std::vector<long> sums(3, 0);
  for (int k = 0; k < 3; k++) {
    cons.emplace_back([&, k] {
      std::unique_lock<weft::mutex> l(m);
      for (;;) {
        cv.wait(l, [&] { return !q.empty() || done; });
        if (q.empty()) return;
        sums[k] += q.front();
        q.pop_front();
      }
    });
  }
  for (long i = 1; i <= n; i++) {
    {
      std::lock_guard<weft::mutex> g(m);
      q.push_back(i);
    }
    cv.notify_one();
    if (i % 16 == 0) weft::this_thread::yield();
  }
  {
    std::lock_guard<weft::mutex> g(m);
    done = true;
  }
  cv.notify_all();
  for (auto &t : cons) t.join();
  for (long v : sums) sum += v;
  EXPECT_EQ(sum, n * (n + 1) / 2);
}

TEST(CppCondVar, TimedWaits) {
  weft::runtime rt(1);
  weft::mutex m;
  weft::condition_variable cv;
  std::unique_lock<weft::mutex> l(m);
  EXPECT_EQ(cv.wait_for(l, 1ms), std::cv_status::timeout);
  EXPECT_TRUE(l.owns_lock());
  EXPECT_EQ(cv.wait_until(l, std::chrono::steady_clock::now() + 1ms), std::cv_status::timeout);
  EXPECT_FALSE(cv.wait_for(l, 1ms, [] { return false; }));
  EXPECT_TRUE(cv.wait_for(l, 1ms, [] { return true; }));
  bool flag = false;
  weft::thread t([&] {
    std::lock_guard<weft::mutex> g(m);
    flag = true;
    cv.notify_one();
  });
  EXPECT_TRUE(cv.wait_until(l, std::chrono::steady_clock::now() + 30s, [&] { return flag; }));
  l.unlock();
  t.join();
  EXPECT_NE(cv.native_handle(), nullptr);
}

TEST_P(CppVp, ConditionVariableAnyWithOtherLockables) {
  weft::runtime rt(GetParam());
  weft::shared_mutex sm;
  weft::spinlock<> sl;
  weft::condition_variable_any cv;
  int stage = 0;
  weft::thread a([&] {
    std::unique_lock<weft::shared_mutex> l(sm);
    cv.wait(l, [&] { return stage == 1; });
    stage = 2;
    l.unlock();
    cv.notify_all();
  });
  weft::thread b([&] {
    std::unique_lock<weft::spinlock<>> l(sl);  // a spinlock: waits do not hold it
    int s;
    do {
      l.unlock();
      {
        std::shared_lock<weft::shared_mutex> r(sm);
        s = stage;
      }
      l.lock();
      if (s != 2) cv.wait_for(l, 1ms);
    } while (s != 2);
  });
  {
    std::unique_lock<weft::shared_mutex> l(sm);
    stage = 1;
  }
  cv.notify_one();
  cv.notify_all();
  a.join();
  b.join();
  EXPECT_EQ(stage, 2);
  std::unique_lock<weft::shared_mutex> l(sm);
  EXPECT_EQ(cv.wait_for(l, 1ms), std::cv_status::timeout);
  EXPECT_FALSE(cv.wait_until(l, std::chrono::steady_clock::now() + 1ms, [] { return false; }));
  EXPECT_FALSE(cv.wait_for(l, 1ms, [] { return false; }));
  std::shared_lock<weft::shared_mutex> *none = nullptr;
  (void)none;
}

// condition_variable_any over a spinlock with consumers and a notifier at once: a waiter
// used to take the internal mutex while still holding the user's spinlock, and blocked
// there when a notifier held it; the other consumers then spun for the spinlock on
// every VP and the waiter never ran again (2 VPs: a hang). Every item is consumed once.
TEST_P(CppVp, ConditionVariableAnyOverASpinlockWithManyWaiters) {
  weft::runtime rt(GetParam());
  weft::spinlock<> sl;
  weft::condition_variable_any cv;
  long items = 0, consumed = 0;
  bool done = false;
  const long n = Scaled(20000, 2000);
  std::vector<weft::thread> ts;
  for (int c = 0; c < 4; c++)
    ts.emplace_back([&] {
      std::unique_lock<weft::spinlock<>> lk(sl);
      for (;;) {
        while (items == 0 && !done) cv.wait(lk);
        if (items == 0) return;
        items--;
        consumed++;
      }
    });
  for (long i = 0; i < n; i++) {
    {
      std::lock_guard<weft::spinlock<>> g(sl);
      items++;
    }
    cv.notify_one();
  }
  {
    std::lock_guard<weft::spinlock<>> g(sl);
    done = true;
  }
  cv.notify_all();
  for (auto &t : ts) t.join();
  EXPECT_EQ(consumed, n);
}

// std allows destroying a condition_variable_any once every waiter has been notified,
// before the waiters return from wait: the waiters then still used its internal mutex
// (a use after free under ASan, a hang without it).
TEST_P(CppVp, ConditionVariableAnyDestroyedRightAfterNotifyAll) {
  weft::runtime rt(GetParam());
  weft::mutex m;
  bool flag = false;
  const int rounds = static_cast<int>(Scaled(300, 30));
  for (int i = 0; i < rounds; i++) {
    auto *cv = new weft::condition_variable_any;
    flag = false;
    std::vector<weft::thread> ts;
    for (int k = 0; k < 3; k++)
      ts.emplace_back([&m, &flag, cv] {
        std::unique_lock<weft::mutex> lk(m);
        cv->wait(lk, [&flag] { return flag; });
      });
    for (int k = 0; k < 5; k++) weft::this_thread::yield();
    {
      std::lock_guard<weft::mutex> g(m);
      flag = true;
      cv->notify_all();
    }
    delete cv;
    for (auto &t : ts) t.join();
  }
}

// The largest durations wait (chrono.hpp clamps them to ~31 years, never "at once"):
// the predicate forms of wait_for and condition_variable_any's wait_for computed
// now() + d, which overflowed for hours::max() and returned at once.
TEST(CppCondVar, HugeDurationsWaitForTheNotify) {
  weft::runtime rt(2);
  weft::mutex m;
  weft::condition_variable cv;
  weft::condition_variable_any cva;
  weft::shared_mutex sm;
  int stage = 0;
  weft::thread t([&] {
    for (int s = 1; s <= 3; s++) {
      weft::this_thread::sleep_for(20ms);
      {
        std::lock_guard<weft::mutex> g(m);
        std::lock_guard<weft::shared_mutex> h(sm);
        stage = s;
      }
      cv.notify_all();
      cva.notify_all();
    }
  });
  {
    std::unique_lock<weft::mutex> l(m);
    EXPECT_TRUE(cv.wait_for(l, std::chrono::hours::max(), [&] { return stage >= 1; }));
  }
  {
    std::unique_lock<weft::shared_mutex> l(sm);
    EXPECT_TRUE(cva.wait_for(l, std::chrono::hours::max(), [&] { return stage >= 2; }));
    while (stage < 3) EXPECT_EQ(cva.wait_for(l, std::chrono::nanoseconds::max()), std::cv_status::no_timeout);
  }
  t.join();
  EXPECT_EQ(stage, 3);
}

// Time points at the ends of their range, on steady and system clocks and in a coarse
// unit: a point long past times out at once (tp - now() overflowed for
// time_point::min() and the waits slept about for ever), a point far ahead waits
// for the notify.
TEST(CppCondVar, ExtremeTimePointsDoNotOverflow) {
  using namespace std::chrono;
  weft::runtime rt(1);
  weft::mutex m;
  weft::condition_variable cv;
  weft::condition_variable_any cva;
  weft::timed_mutex tm;
  std::unique_lock<weft::mutex> l(m);
  EXPECT_EQ(cv.wait_until(l, steady_clock::time_point::min()), std::cv_status::timeout);
  EXPECT_EQ(cv.wait_until(l, system_clock::time_point::min()), std::cv_status::timeout);
  EXPECT_EQ(cv.wait_until(l, time_point<system_clock, hours>::min()), std::cv_status::timeout);
  EXPECT_EQ(cva.wait_until(l, steady_clock::time_point::min()), std::cv_status::timeout);
  EXPECT_FALSE(cv.wait_until(l, steady_clock::time_point::min(), [] { return false; }));
  EXPECT_EQ(cv.wait_until(l, steady_clock::now() - 1s), std::cv_status::timeout);
  l.unlock();
  std::unique_lock<weft::timed_mutex> held(tm);
  weft::thread t([&] {
    EXPECT_FALSE(tm.try_lock_until(steady_clock::time_point::min()));
    EXPECT_FALSE(tm.try_lock_until(time_point<steady_clock, hours>::min()));
  });
  t.join();
  held.unlock();
  // far ahead: waits for the notify (clamped, not "at once")
  bool ready = false;
  weft::thread n([&] {
    weft::this_thread::sleep_for(5ms);
    std::lock_guard<weft::mutex> g(m);
    ready = true;
    cv.notify_all();
  });
  l.lock();
  EXPECT_TRUE(cv.wait_until(l, time_point<system_clock, hours>::max(), [&] { return ready; }));
  l.unlock();
  n.join();
}

// ---- semaphores, barriers, atomic_int ---------------------------------------------------

TEST_P(CppVp, CountingSemaphoreAndBinarySemaphore) {
  weft::runtime rt(GetParam());
  weft::counting_semaphore<> s(2);
  EXPECT_EQ(s.value(), 2);
  EXPECT_TRUE(s.try_acquire());
  s.acquire();
  EXPECT_FALSE(s.try_acquire());
  EXPECT_FALSE(s.try_acquire_for(1ms));
  EXPECT_FALSE(s.try_acquire_until(std::chrono::steady_clock::now() + 1ms));
  weft::thread t([&] { s.release(3); });
  s.acquire();
  t.join();
  EXPECT_EQ(s.value(), 2);
  EXPECT_TRUE(s.try_acquire_for(1ms));
  EXPECT_EQ(weft::counting_semaphore<>::max(), WEFT_SEM_MAX);
  weft::binary_semaphore b(0);
  EXPECT_EQ(weft::binary_semaphore::max(), 1);
  int order = 0;
  weft::thread u([&] {
    order = 1;
    b.release();
  });
  b.acquire();
  EXPECT_EQ(order, 1);
  u.join();
  EXPECT_NE(b.native_handle(), nullptr);
}

TEST_P(CppVp, BarrierRounds) {
  weft::runtime rt(GetParam());
  const int n = 4, rounds = 20;
  weft::barrier bar(n);
  std::atomic<int> serial{0}, arrived{0}, bad{0};
  std::vector<weft::thread> ts;
  for (int k = 0; k < n; k++) {
    ts.emplace_back([&] {
      for (int r = 0; r < rounds; r++) {
        arrived++;
        if (bar.arrive_and_wait()) serial++;
        if (arrived.load() < (r + 1) * n) bad++;  // everyone of this round arrived
        bar.arrive_and_wait();
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(serial.load(), rounds);
  EXPECT_NE(bar.native_handle(), nullptr);
}

TEST_P(CppVp, AtomicInt) {
  weft::runtime rt(GetParam());
  weft::atomic_int a(5);
  EXPECT_EQ(a.load(), 5);
  EXPECT_EQ(a.add(2), 7);
  EXPECT_EQ(a.sub(1), 6);
  EXPECT_EQ(a.inc(), 7);
  EXPECT_EQ(a.dec(), 6);
  EXPECT_EQ(a.fetch_add(4), 6);
  EXPECT_EQ(a.fetch_sub(4), 10);
  EXPECT_EQ(a.exchange(1), 6);
  long e = 2;
  EXPECT_FALSE(a.compare_exchange(e, 3));
  EXPECT_EQ(e, 1);
  EXPECT_TRUE(a.compare_exchange(e, 3));
  EXPECT_EQ(++a, 4);
  EXPECT_EQ(a++, 4);
  EXPECT_EQ(--a, 4);
  EXPECT_EQ(a--, 4);
  EXPECT_EQ(a += 10, 13);
  EXPECT_EQ(a -= 3, 10);
  a = 0;
  EXPECT_EQ(static_cast<long>(a), 0);
  const long n = Scaled(20000, 100);
  std::vector<weft::thread> ts;
  for (int k = 0; k < 4; k++)
    ts.emplace_back([&] {
      for (long i = 0; i < n; i++) a++;
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(a.load(), 4 * n);
}

// ---- Hoare monitors ------------------------------------------------------------------

// A bounded buffer written with `if`, not `while`: correct only under Hoare semantics
// (the woken thread runs at once, with the state the signaller left).
class BoundedBuffer : weft::monitor {
 public:
  void put(long v) {
    entry e(*this);
    if (n_ == kCap) not_full_.wait();
    if (n_ == kCap) bad_++;
    buf_[(head_ + n_++) % kCap] = v;
    not_empty_.signal();
  }
  long get() {
    entry e(*this);
    if (n_ == 0) not_empty_.wait();
    if (n_ == 0) {
      bad_++;
      return 0;
    }
    long v = buf_[head_];
    head_ = (head_ + 1) % kCap;
    n_--;
    not_full_.signal();
    return v;
  }
  int bad() const { return bad_; }

 private:
  static constexpr int kCap = 2;
  long buf_[kCap] = {};
  int head_ = 0, n_ = 0, bad_ = 0;
  condition not_empty_{*this}, not_full_{*this};
};

TEST_P(CppVp, HoareMonitorBoundedBufferWithIf) {
  weft::runtime rt(GetParam());
  BoundedBuffer bb;
  const long n = Scaled(3000, 100);
  std::atomic<long> sum{0};
  std::vector<weft::thread> ts;
  for (int k = 0; k < 2; k++)
    ts.emplace_back([&] {
      for (long i = 1; i <= n; i++) bb.put(i);
    });
  for (int k = 0; k < 3; k++)
    ts.emplace_back([&, k] {
      long cnt = 2 * n / 3 + (k < (2 * n) % 3 ? 1 : 0);
      for (long i = 0; i < cnt; i++) sum += bb.get();
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(bb.bad(), 0);
  EXPECT_EQ(sum.load(), n * (n + 1));
}

// Hoare's order: the signaller waits until the woken thread leaves the monitor.
class Handoff : weft::monitor {
 public:
  void waiter() {
    entry e(*this);
    ready_ = true;
    cond_.wait();
    log_.push_back("woken");
  }
  void signaller() {
    entry e(*this);
    EXPECT_TRUE(cond_.queue());
    log_.push_back("signal");
    cond_.signal();
    log_.push_back("after");
    cond_.signal();  // nobody waits: nothing happens
    EXPECT_FALSE(cond_.queue());
  }
  bool ready() {
    entry e(*this);
    return ready_;
  }
  std::vector<std::string> log_;

 private:
  bool ready_ = false;
  condition cond_{*this};
};

TEST(CppMonitor, SignalHandsTheMonitorToTheWaiter) {
  weft::runtime rt(2);
  Handoff h;
  weft::thread w([&] { h.waiter(); });
  while (!h.ready()) weft::this_thread::yield();
  h.signaller();
  w.join();
  ASSERT_EQ(h.log_.size(), 3u);
  EXPECT_EQ(h.log_[0], "signal");
  EXPECT_EQ(h.log_[1], "woken");
  EXPECT_EQ(h.log_[2], "after");
}

// ---- schedulers ----------------------------------------------------------------------

// A scheduler in a few lines: one global FIFO, linked through each thread's scheduler
// word, handed out by processor_idle.
struct GlobalFifo : weft::scheduler {
  weft::spinlock<> lock;
  weft_thread_t *head = nullptr, *tail = nullptr;
  std::atomic<int> created{0}, started{0}, terminated{0}, blocked{0}, unblocked{0}, idle_hits{0};

  void push(weft_thread_t *t) {
    std::lock_guard<weft::spinlock<>> g(lock);
    data(t) = 0;
    if (tail) data(tail) = reinterpret_cast<uintptr_t>(t);
    else head = t;
    tail = t;
  }
  void thread_created(weft_thread_t *t) override {
    created++;
    push(t);
  }
  void thread_unblocked(weft_thread_t *t) override {
    unblocked++;
    push(t);
  }
  void thread_started(weft_thread_t *) override { started++; }
  void thread_terminated(weft_thread_t *) override { terminated++; }
  void thread_blocked(weft_thread_t *) override { blocked++; }
  weft_thread_t *processor_idle(weft_vp_t *) override {
    std::lock_guard<weft::spinlock<>> g(lock);
    weft_thread_t *t = head;
    if (t) {
      head = reinterpret_cast<weft_thread_t *>(data(t));
      if (!head) tail = nullptr;
      idle_hits++;
    }
    return t;
  }
};

TEST_P(CppVp, DerivedSchedulerRunsABundle) {
  weft::runtime rt(GetParam());
  GlobalFifo s;
  weft::bundle b(s);
  weft::thread::attributes a;
  a.bundle = b.native_handle();
  weft::mutex m;
  long count = 0;
  std::vector<weft::thread> ts;
  for (int k = 0; k < 6; k++)
    ts.emplace_back(a, [&] {
      for (int i = 0; i < 50; i++) {
        std::lock_guard<weft::mutex> g(m);
        count++;
        if (i % 10 == 0) weft::this_thread::yield();
      }
      EXPECT_GE(weft::scheduler::vp_index(weft::scheduler::vp_self()), 0);
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(count, 300);
  EXPECT_EQ(s.created.load(), 6);
  EXPECT_EQ(s.started.load(), 6);
  EXPECT_EQ(s.terminated.load(), 6);
  EXPECT_GE(s.idle_hits.load(), 6);
  EXPECT_EQ(s.unblocked.load() - s.blocked.load() >= 0, true);
  EXPECT_NE(weft::scheduler::vp(0), nullptr);
  b.destroy();
}

TEST(CppScheduler, BuiltInKindsAndBusyDestroy) {
  weft::runtime rt(2);
  for (unsigned kind : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    weft::bundle b(kind);
    weft::thread::attributes a;
    a.bundle = b.native_handle();
    int ran = 0;
    weft::thread t(a, [&ran] { ran = 1; });
    t.join();
    EXPECT_EQ(ran, 1) << weft_schedlib_kind_name(kind);
  }
  weft::bundle parent(WEFT_SCHED_FIFO);
  weft::bundle child(WEFT_SCHED_FIFO, &parent);
  EXPECT_THROW(parent.destroy(), std::system_error);  // it has a child: EBUSY
  child.destroy();
  parent.destroy();
  weft::bundle moved(std::move(child));  // an empty (destroyed) bundle moves too
  EXPECT_EQ(moved.native_handle(), nullptr);
}

}  // namespace
