// tests/unit/cpp_future_test.cc - weft::promise, future, shared_future and async
// (weft/cpp/future.hpp): values, references and void; exceptions carried to get();
// std::future_error codes on misuse (broken_promise, promise_already_satisfied,
// future_already_retrieved, no_state); share(); wait_for/wait_until statuses;
// many waiters on one shared_future; a plain OS thread waiting; async with both
// launch policies, and the last future of an async call waiting in its destructor.
#include <weft/weft.hpp>

#include <stdexcept>
#include <string>

#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class CppFutureTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(CppFutureTest);

template <class F>
std::future_errc ErrcOf(F f) {
  try {
    f();
  } catch (const std::future_error &e) {
    if (e.code() == std::future_errc::broken_promise) return std::future_errc::broken_promise;
    if (e.code() == std::future_errc::promise_already_satisfied)
      return std::future_errc::promise_already_satisfied;
    if (e.code() == std::future_errc::future_already_retrieved)
      return std::future_errc::future_already_retrieved;
    if (e.code() == std::future_errc::no_state) return std::future_errc::no_state;
  }
  return static_cast<std::future_errc>(-1);
}

TEST_P(CppFutureTest, ValueAcrossThreads) {
  weft::promise<std::string> p;
  weft::future<std::string> f = p.get_future();
  EXPECT_TRUE(f.valid());
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(1)), std::future_status::timeout);
  weft::thread t([&p] { p.set_value(std::string(100, 'x')); });
  EXPECT_EQ(f.get(), std::string(100, 'x'));
  EXPECT_FALSE(f.valid()) << "get() releases the state";
  t.join();
}

TEST_P(CppFutureTest, ReferenceAndVoid) {
  int x = 1;
  weft::promise<int &> pr;
  auto fr = pr.get_future();
  weft::promise<void> pv;
  auto fv = pv.get_future();
  weft::thread t([&] {
    pr.set_value(x);
    pv.set_value();
  });
  int &r = fr.get();
  EXPECT_EQ(&r, &x);
  fv.get();
  t.join();
}

TEST_P(CppFutureTest, ExceptionCarried) {
  weft::promise<int> p;
  auto f = p.get_future();
  weft::thread t([&p] {
    try {
      throw std::runtime_error("boom");
    } catch (...) {
      p.set_exception(std::current_exception());
    }
  });
  try {
    f.get();
    ADD_FAILURE() << "get() did not throw";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  t.join();
}

TEST_P(CppFutureTest, Misuse) {
  {
    weft::future<int> f;
    {
      weft::promise<int> p;
      f = p.get_future();
    }  // broken
    EXPECT_EQ(ErrcOf([&] { f.get(); }), std::future_errc::broken_promise);
  }
  weft::promise<int> p;
  auto f = p.get_future();
  EXPECT_EQ(ErrcOf([&] { p.get_future(); }), std::future_errc::future_already_retrieved);
  p.set_value(1);
  EXPECT_EQ(ErrcOf([&] { p.set_value(2); }), std::future_errc::promise_already_satisfied);
  EXPECT_EQ(ErrcOf([&] { p.set_exception(std::make_exception_ptr(1)); }),
            std::future_errc::promise_already_satisfied);
  EXPECT_EQ(f.get(), 1);
  EXPECT_EQ(ErrcOf([&] { f.get(); }), std::future_errc::no_state);
  EXPECT_EQ(ErrcOf([&] { f.wait(); }), std::future_errc::no_state);
  weft::promise<int> moved(std::move(p));
  EXPECT_EQ(ErrcOf([&] { p.set_value(3); }), std::future_errc::no_state);
  EXPECT_EQ(ErrcOf([&] { p.get_future(); }), std::future_errc::no_state);
  weft::shared_future<int> none;
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(ErrcOf([&] { none.get(); }), std::future_errc::no_state);
}

// A value whose copy or move throws: set_value passes the exception on and leaves
// the promise unsatisfied, as std::promise does (a later set_exception satisfies it;
// destroyed, it breaks); an async call whose result cannot be moved into the state
// delivers that exception through get(). Both used to leave the future never ready.
struct ThrowsOnCopy {
  ThrowsOnCopy() = default;
  ThrowsOnCopy(const ThrowsOnCopy &) { throw std::runtime_error("copy failed"); }
  ThrowsOnCopy(ThrowsOnCopy &&) { throw std::runtime_error("move failed"); }
};

TEST_P(CppFutureTest, ValueThatThrowsLeavesThePromiseUnsatisfied) {
  {
    weft::promise<ThrowsOnCopy> p;
    auto f = p.get_future();
    ThrowsOnCopy v;
    EXPECT_THROW(p.set_value(v), std::runtime_error);
    EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
    p.set_exception(std::make_exception_ptr(std::logic_error("instead")));
    EXPECT_THROW(f.get(), std::logic_error);
  }
  {
    weft::future<ThrowsOnCopy> f;
    {
      weft::promise<ThrowsOnCopy> p;
      f = p.get_future();
      ThrowsOnCopy v;
      EXPECT_THROW(p.set_value(v), std::runtime_error);
    }  // destroyed unsatisfied
    EXPECT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_EQ(ErrcOf([&] { f.get(); }), std::future_errc::broken_promise);
  }
  // Shared, so that this thread holds the state (and the stored exception) until after
  // it has read the message: with get() it let go first, the async thread's release
  // of the state could destroy the exception, and TSan, which does not see the C++
  // runtime's own reference count on exception objects, reported that destruction as
  // a race with the read (once, in a local CI run).
  auto a = weft::async(std::launch::async, [] { return ThrowsOnCopy{}; }).share();
  EXPECT_EQ(a.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  try {
    a.get();
    ADD_FAILURE() << "get() did not throw";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "move failed");
  }
}

// One shared_future, many waiters (weft threads and a plain OS thread), each gets
// the same object.
TEST_P(CppFutureTest, SharedManyWaiters) {
  weft::promise<std::vector<int>> p;
  weft::shared_future<std::vector<int>> sf = p.get_future().share();
  int nweft = static_cast<int>(Scaled(100, 4));
  std::atomic<int> ok{0};
  std::vector<weft::thread> ts;
  for (int i = 0; i < nweft; ++i)
    ts.emplace_back([sf, &ok] {
      const std::vector<int> &v = sf.get();
      if (v.size() == 3 && v[2] == 3) ok.fetch_add(1);
    });
  std::thread os([sf, &ok] {
    EXPECT_EQ(sf.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    if (sf.get().size() == 3) ok.fetch_add(1);
  });
  p.set_value({1, 2, 3});
  for (auto &t : ts) t.join();
  os.join();
  EXPECT_EQ(ok.load(), nweft + 1);
  EXPECT_EQ(&sf.get(), &weft::shared_future<std::vector<int>>(sf).get());
}

TEST_P(CppFutureTest, WaitUntilStatuses) {
  weft::promise<int> p;
  auto f = p.get_future();
  EXPECT_EQ(f.wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(1)),
            std::future_status::timeout);
  EXPECT_EQ(f.wait_until(std::chrono::system_clock::now()), std::future_status::timeout);
  p.set_value(4);
  EXPECT_EQ(f.wait_until(std::chrono::steady_clock::now()), std::future_status::ready);
  EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(f.get(), 4);
}

TEST_P(CppFutureTest, AsyncPolicies) {
  auto a = weft::async([](int x) { return x * 2; }, 21);
  EXPECT_EQ(a.get(), 42);
  std::atomic<bool> ran{false};
  auto d = weft::async(std::launch::deferred, [&ran] {
    ran = true;
    return std::string("late");
  });
  EXPECT_EQ(d.wait_for(std::chrono::seconds(0)), std::future_status::deferred);
  EXPECT_FALSE(ran.load()) << "a deferred call runs at the first wait";
  EXPECT_EQ(d.get(), "late");
  EXPECT_TRUE(ran.load());
  auto e = weft::async(std::launch::async, [] { throw std::logic_error("async"); });
  EXPECT_THROW(e.get(), std::logic_error);
  // a chain of async calls, each waiting on the previous one's future
  weft::future<long> prev = weft::async([] { return 0L; });
  for (int i = 0; i < 20; ++i)
    prev = weft::async([](weft::future<long> p) { return p.get() + 1; }, std::move(prev));
  EXPECT_EQ(prev.get(), 20);
}

// The last future of an async call waits for it in its destructor (as std::async).
TEST_P(CppFutureTest, AsyncFutureDestructorWaits) {
  std::atomic<int> done{0};
  weft::promise<void> gate;
  weft::shared_future<void> g = gate.get_future().share();
  weft::thread opener([&gate] {
    for (int i = 0; i < 50; ++i) weft::this_thread::yield();
    gate.set_value();
  });
  {
    auto f = weft::async(std::launch::async, [g, &done] {
      g.wait();
      done = 1;
    });
  }
  EXPECT_EQ(done.load(), 1);
  opener.join();
}

}  // namespace
