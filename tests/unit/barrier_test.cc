// tests/unit/barrier_test.cc - barriers (weft/barrier.h): exactly one
// WEFT_BARRIER_SERIAL per round, no thread enters round r+1 before all arrived at
// round r, immediate reuse, weft and plain OS threads together, 1/2/4 VPs with
// more threads than VPs, size 1 and all-zero barriers, EINVAL, destroy busy.
#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class BarrierTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(BarrierTest);

// n threads (nos of them plain OS threads) go through `rounds` rounds back to back.
// Per round: an arrival counter bumped before waiting; after passing the barrier
// every thread must see all n arrivals of its round, and none of round r+2 (which
// would mean someone passed round r+1 early).
void Rounds(int nweft, int nos, long rounds) {
  const int n = nweft + nos;
  weft_barrier_t b;
  ASSERT_EQ(weft_barrier_init(&b, static_cast<uint32_t>(n)), 0);
  std::vector<std::atomic<int>> arrived(static_cast<size_t>(rounds) + 2);
  std::vector<std::atomic<int>> serial(static_cast<size_t>(rounds));
  std::atomic<long> early{0}, ahead{0}, bad{0};
  std::atomic<int> last{0};
  RunMixed(nweft, nos, [&](int i) {
    for (long r = 0; r < rounds; ++r) {
      arrived[static_cast<size_t>(r)].fetch_add(1);
      int rc = weft_barrier_wait(&b);
      if (rc == WEFT_BARRIER_SERIAL) {
        serial[static_cast<size_t>(r)].fetch_add(1);
      } else if (rc != 0) {
        bad.fetch_add(1);
        last.store(rc);
      }
      if (arrived[static_cast<size_t>(r)].load() != n) early.fetch_add(1);
      if (arrived[static_cast<size_t>(r) + 2].load() != 0) ahead.fetch_add(1);
      if (weft_self() && ((r + i) % 7) == 0) weft_yield();
    }
  });
  EXPECT_EQ(bad.load(), 0) << "barrier wait returned " << last.load();
  EXPECT_EQ(early.load(), 0) << "a thread passed a round before all had arrived";
  EXPECT_EQ(ahead.load(), 0) << "a thread reached round r+2 while another was in round r";
  long wrong_serial = 0;
  for (long r = 0; r < rounds; ++r) {
    EXPECT_EQ(arrived[static_cast<size_t>(r)].load(), n);
    if (serial[static_cast<size_t>(r)].load() != 1) ++wrong_serial;
  }
  EXPECT_EQ(wrong_serial, 0) << "rounds without exactly one serial thread";
  EXPECT_EQ(weft_barrier_destroy(&b), 0);
}

TEST_P(BarrierTest, OneSerialPerRoundWeftThreads) { Rounds(2 * nvps() + 3, 0, Scaled(2000, 20)); }
TEST_P(BarrierTest, OneSerialPerRoundMixedWithOsThreads) { Rounds(nvps() + 2, 2, Scaled(1000, 20)); }
TEST_P(BarrierTest, TwoThreadsManyRounds) { Rounds(2, 0, Scaled(20000, 50)); }
TEST_P(BarrierTest, ManyThreads) { Rounds(64, 0, Scaled(200, 5)); }

// A barrier of size 1 (and an all-zero one, which is size 1): every wait returns
// WEFT_BARRIER_SERIAL at once, from weft and OS threads.
TEST_P(BarrierTest, SizeOneAndZeroObject) {
  weft_barrier_t one;
  ASSERT_EQ(weft_barrier_init(&one, 1), 0);
  weft_barrier_t zero;
  std::memset(&zero, 0, sizeof zero);
  weft_barrier_t st = WEFT_BARRIER_INIT(1);
  for (weft_barrier_t *b : {&one, &zero, &st}) {
    for (int i = 0; i < 5; ++i) EXPECT_EQ(weft_barrier_wait(b), WEFT_BARRIER_SERIAL);
    int os_rc = 0;
    std::thread([&] { os_rc = weft_barrier_wait(b); }).join();
    EXPECT_EQ(os_rc, WEFT_BARRIER_SERIAL);
    EXPECT_EQ(weft_barrier_destroy(b), 0);
  }
}

// WEFT_BARRIER_INIT(n) is a usable barrier of n.
TEST_P(BarrierTest, StaticInitializer) {
  weft_barrier_t b = WEFT_BARRIER_INIT(3);
  std::atomic<int> serial{0};
  RunMixed(2, 1, [&](int) {
    for (int r = 0; r < 10; ++r)
      if (weft_barrier_wait(&b) == WEFT_BARRIER_SERIAL) serial.fetch_add(1);
  });
  EXPECT_EQ(serial.load(), 10);
  EXPECT_EQ(weft_barrier_destroy(&b), 0);
}

TEST_P(BarrierTest, Einval) {
  weft_barrier_t b;
  std::memset(&b, 0x5A, sizeof b);
  weft_barrier_t before = b;
  EXPECT_EQ(weft_barrier_init(&b, 0), WEFT_EINVAL);
  EXPECT_EQ(std::memcmp(&b, &before, sizeof b), 0) << "failed init wrote the object";
  EXPECT_EQ(weft_barrier_init(nullptr, 2), WEFT_EINVAL);
  EXPECT_EQ(weft_barrier_wait(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_barrier_destroy(nullptr), WEFT_EINVAL);
}

// destroy while a thread waits: WEFT_EBUSY and the barrier still works (the
// round completes); 0 afterwards.
TEST_P(BarrierTest, DestroyBusy) {
  weft_barrier_t b;
  ASSERT_EQ(weft_barrier_init(&b, 2), 0);
  for (int os = 0; os < 2; ++os) {
    std::atomic<int> state{0};
    std::atomic<int> rc{-1};
    auto waiter = [&] {
      state = 1;
      rc = weft_barrier_wait(&b);
      state = 2;
    };
    ThreadOfKind th(os, &waiter);
    ASSERT_TRUE(WaitForWaiters(&b, 1)) << th.Kind() << " waiter never queued";
    EXPECT_EQ(state.load(), 1);
    EXPECT_EQ(weft_barrier_destroy(&b), WEFT_EBUSY) << th.Kind() << " waiter";
    EXPECT_EQ(weft_barrier_wait(&b), WEFT_BARRIER_SERIAL) << "the last arrival is serial";
    EXPECT_TRUE(WaitFor([&] { return state.load() == 2; }));
    EXPECT_EQ(rc.load(), 0);
    th.Join();
    EXPECT_EQ(Waiters(&b), 0);
  }
  EXPECT_EQ(weft_barrier_destroy(&b), 0);
}

}  // namespace
