// tests/unit/future_test.cc - single-assignment futures (weft/future.h): set once
// (a second set is WEFT_EALREADY), set before any wait (no block), many waiters
// (weft and plain OS threads, 1/2/4 VPs) all get the value, timed waits time out
// while unset and race sets without losing a value, racing setters (one wins, every
// waiter sees its value), the all-zero object and
// WEFT_FUTURE_INIT, destroy with waiters, EINVAL.
#include <weft/future.h>

#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class FutureTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(FutureTest);

TEST_P(FutureTest, SetOnceThenGet) {
  weft_future_t f;
  ASSERT_EQ(weft_future_init(&f), 0);
  void *v = P(7);
  EXPECT_EQ(weft_future_is_set(&f), 0);
  EXPECT_EQ(weft_future_tryget(&f, &v), WEFT_EBUSY);
  EXPECT_EQ(v, P(7)) << "tryget of an unset future leaves *value";
  EXPECT_EQ(weft_future_set(&f, P(42)), 0);
  EXPECT_EQ(weft_future_set(&f, P(43)), WEFT_EALREADY);
  EXPECT_EQ(weft_future_is_set(&f), 1);
  EXPECT_EQ(weft_future_tryget(&f, &v), 0);
  EXPECT_EQ(v, P(42)) << "the second set did not change the value";
  EXPECT_EQ(weft_future_wait(&f, &v), 0);
  EXPECT_EQ(v, P(42));
  EXPECT_EQ(weft_future_wait(&f, nullptr), 0);
  EXPECT_EQ(weft_future_timedwait(&f, weft_time_now() - 1, &v), 0) << "set: past deadline ok";
  EXPECT_EQ(weft_future_destroy(&f), 0);
}

// A future set before anyone waits: the wait returns at once, without blocking
// (the sync counters show no block and no timeout on any path).
TEST_P(FutureTest, SetBeforeWaitDoesNotBlock) {
  weft_future_t f = WEFT_FUTURE_INIT;
  ASSERT_EQ(weft_future_set(&f, P(5)), 0);
  weft_sync_stats_reset();
  long n = Scaled(1000, 10);
  for (long i = 0; i < n; ++i) {
    void *v = nullptr;
    ASSERT_EQ(weft_future_wait(&f, &v), 0);
    ASSERT_EQ(v, P(5));
  }
  weft_sync_stats_t st;
  weft_sync_stats(&st);
  EXPECT_EQ(st.idled, 0u);
  EXPECT_EQ(st.timeouts, 0u);
}

TEST_P(FutureTest, ZeroObjectAndErrors) {
  weft_future_t z;
  std::memset(&z, 0, sizeof z);
  EXPECT_EQ(weft_future_is_set(&z), 0);
  EXPECT_EQ(weft_future_init(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_future_destroy(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_future_set(nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_future_wait(nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_future_timedwait(nullptr, 0, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_future_tryget(nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_future_is_set(nullptr), 0);
  // a waiter on the zero object is woken by the set
  weft_thread_t *t = Spawn(+[](void *a) -> void * {
    void *v = nullptr;
    return weft_future_wait(static_cast<weft_future_t *>(a), &v) == 0 ? v : P(-1);
  }, &z);
  for (int i = 0; i < 10; ++i) weft_yield();
  EXPECT_EQ(weft_future_set(&z, P(9)), 0);
  EXPECT_EQ(Join(t), P(9));
}

// Many waiters, weft threads and plain OS threads, blocked before the set (most of
// them): every one gets the value; the value's target is visible to each.
TEST_P(FutureTest, ManyWaiters) {
  int nweft = static_cast<int>(Scaled(200, 8));
  int nos = 4;
  weft_future_t f = WEFT_FUTURE_INIT;
  static int payload;
  payload = 0;
  std::atomic<int> got{0}, started{0};
  std::pair<weft_future_t *, std::atomic<int> *> sa(&f, &started);
  weft_thread_t *setter = Spawn(+[](void *a) -> void * {
    auto *x = static_cast<std::pair<weft_future_t *, std::atomic<int> *> *>(a);
    // let most waiters block first (no time assumed: any order is correct)
    for (int i = 0; i < 100 && x->second->load() == 0; ++i) weft_yield();
    payload = 1234;
    EXPECT_EQ(weft_future_set(x->first, &payload), 0);
    return nullptr;
  }, &sa);
  RunMixed(nweft, nos, [&](int) {
    started.fetch_add(1);
    void *v = nullptr;
    EXPECT_EQ(weft_future_wait(&f, &v), 0);
    EXPECT_EQ(v, &payload);
    EXPECT_EQ(*static_cast<int *>(v), 1234);
    got.fetch_add(1);
  });
  Join(setter);
  EXPECT_EQ(got.load(), nweft + nos);
  EXPECT_EQ(weft_future_destroy(&f), 0);
}

// A plain OS thread waits (blocked in the kernel) for a weft thread's set, and a
// weft thread waits for a plain OS thread's set.
TEST_P(FutureTest, PlainOsThreads) {
  weft_future_t a = WEFT_FUTURE_INIT, b = WEFT_FUTURE_INIT;
  void *va = nullptr;
  std::thread os([&] {
    EXPECT_EQ(weft_future_wait(&a, &va), 0);
    EXPECT_EQ(weft_future_set(&b, P(2)), 0);
  });
  EXPECT_EQ(weft_future_set(&a, P(1)), 0);
  void *vb = nullptr;
  EXPECT_EQ(weft_future_wait(&b, &vb), 0);
  EXPECT_EQ(vb, P(2));
  os.join();
  EXPECT_EQ(va, P(1));
}

// Timed waits on an unset future time out (weft thread and plain OS thread), take
// nothing, and leave the future usable.
TEST_P(FutureTest, TimedWaitTimesOut) {
  weft_future_t f = WEFT_FUTURE_INIT;
  void *v = P(3);
  EXPECT_EQ(weft_future_timedwait(&f, weft_time_now() - 1, &v), WEFT_ETIMEDOUT);
  EXPECT_EQ(weft_future_timedwait(&f, weft_deadline_after(2 * kMs), &v), WEFT_ETIMEDOUT);
  EXPECT_EQ(v, P(3));
  std::thread os([&] {
    void *w = P(4);
    EXPECT_EQ(weft_future_timedwait(&f, weft_deadline_after(2 * kMs), &w), WEFT_ETIMEDOUT);
    EXPECT_EQ(w, P(4));
  });
  os.join();
  EXPECT_EQ(weft_future_destroy(&f), 0) << "timed-out waiters left the queue";
  EXPECT_EQ(weft_future_set(&f, P(8)), 0);
  EXPECT_EQ(weft_future_timedwait(&f, weft_deadline_after(kMs), &v), 0);
  EXPECT_EQ(v, P(8));
}

// Deadlines racing the set: each waiter either times out (and then the set came
// after it gave up: tryget may now succeed) or gets exactly the value; none hangs
// and none gets anything else. Rounds of fresh futures.
TEST_P(FutureTest, DeadlineRacingSet) {
  int rounds = static_cast<int>(Scaled(200, 10));
  int nw = 6;
  for (int r = 0; r < rounds; ++r) {
    weft_future_t f = WEFT_FUTURE_INIT;
    std::atomic<int> ok{0}, timedout{0};
    RunMixed(nw, r % 8 == 0 ? 1 : 0, [&](int i) {
      if (i == 0) {
        for (int k = 0; k < r % 5; ++k) weft_yield();
        EXPECT_EQ(weft_future_set(&f, P(r + 1)), 0);
        return;
      }
      void *v = nullptr;
      int rc = weft_future_timedwait(&f, weft_deadline_after((uint64_t)(i % 3) * 20 * kUs), &v);
      if (rc == 0) {
        EXPECT_EQ(v, P(r + 1));
        ok.fetch_add(1);
      } else {
        EXPECT_EQ(rc, WEFT_ETIMEDOUT);
        timedout.fetch_add(1);
      }
    });
    EXPECT_EQ(ok.load() + timedout.load(), nw - 1 + (r % 8 == 0 ? 1 : 0));
    EXPECT_EQ(weft_future_destroy(&f), 0) << "round " << r;
    void *v = nullptr;
    EXPECT_EQ(weft_future_tryget(&f, &v), 0);
    EXPECT_EQ(v, P(r + 1));
  }
}

// Setters race each other and the waiters: exactly one set succeeds (the others get
// WEFT_EALREADY, also while the winner is still writing its value), and every waiter,
// blocked or not, and tryget afterwards see the winner's value, never a loser's.
TEST_P(FutureTest, RacingSetters) {
  int rounds = static_cast<int>(Scaled(200, 10));
  int nset = 4, nwait = 4;
  for (int r = 0; r < rounds; ++r) {
    weft_future_t f = WEFT_FUTURE_INIT;
    std::atomic<int> won{0}, already{0};
    std::atomic<intptr_t> winner{0};
    int nos = r % 4 == 0 ? 1 : 0;  // a plain OS thread waits too, every fourth round
    std::vector<intptr_t> got(static_cast<size_t>(nwait + nos), 0);
    RunMixed(nset + nwait, nos, [&](int i) {
      if (i < nset) {
        for (int k = 0; k < (r + i) % 3; ++k) weft_yield();
        int rc = weft_future_set(&f, P(100 * r + i + 1));
        if (rc == 0) {
          won.fetch_add(1);
          winner.store(100 * r + i + 1);
        } else {
          EXPECT_EQ(rc, WEFT_EALREADY);
          already.fetch_add(1);
        }
        return;
      }
      void *v = nullptr;
      EXPECT_EQ(weft_future_wait(&f, &v), 0);
      got[static_cast<size_t>(i - nset)] = reinterpret_cast<intptr_t>(v);
    });
    ASSERT_EQ(won.load(), 1) << "round " << r;
    EXPECT_EQ(already.load(), nset - 1);
    for (intptr_t g : got)
      EXPECT_EQ(g, reinterpret_cast<intptr_t>(P(winner.load()))) << "round " << r;
    void *v = nullptr;
    EXPECT_EQ(weft_future_tryget(&f, &v), 0);
    EXPECT_EQ(v, P(winner.load()));
    EXPECT_EQ(weft_future_set(&f, P(-1)), WEFT_EALREADY);
    EXPECT_EQ(weft_future_destroy(&f), 0);
  }
}

// destroy with a waiter: WEFT_EBUSY, the object untouched.
TEST_P(FutureTest, DestroyWithWaiterIsBusy) {
  weft_future_t f = WEFT_FUTURE_INIT;
  std::atomic<int> in{0};
  struct A { weft_future_t *f; std::atomic<int> *in; } a{&f, &in};
  weft_thread_t *t = Spawn(+[](void *p) -> void * {
    auto *x = static_cast<A *>(p);
    x->in->store(1);
    void *v = nullptr;
    return weft_future_wait(x->f, &v) == 0 ? v : P(-1);
  }, &a);
  ASSERT_TRUE(YieldUntil([&] { return in.load() == 1; }, 30.0));
  // it is queued once destroy reports busy; until then it is on its way
  ASSERT_TRUE(YieldUntil([&] { return weft_future_destroy(&f) == WEFT_EBUSY; }, 30.0));
  EXPECT_EQ(weft_future_set(&f, P(6)), 0);
  EXPECT_EQ(Join(t), P(6));
  EXPECT_EQ(weft_future_destroy(&f), 0);
}

}  // namespace
