// tests/stress/unstarted_test.cc - a million created-but-unstarted threads cost one
// control block each: no stack is bound before a thread first runs.
#include "weft_test.h"

using namespace weft_test;

namespace {

// The property under test ("none can start before its creator switches") is the
// scheduler's; the system monitor's spare VPs may legitimately break it, so it is off.
class UnstartedTest : public OneVpTest {
  MonitorOffEnv monitor_off_;  // before SetUp's weft_init
};

// With one VP, the main thread creates 1e6 threads (times WEFT_TEST_SCALE) without
// switching, so none can start: each costs about one system allocation (its
// control block; no stack), and the counters see every creation. Then all are
// joined and return their argument.
TEST_F(UnstartedTest, MillionUnstartedThreadsHaveNoStacks) {
  const long total = Scaled(1000000, 1000);
  weft_debug_stats_t before, after;
  weft_debug_stats(&before);
  const long allocs_before = weft_debug_alloc_count();
  static std::atomic<long> ran;
  ran = 0;
  std::vector<weft_thread_t *> ts(total);
  for (long i = 0; i < total; ++i) {
    int rc = weft_create(&ts[i], nullptr, +[](void *a) {
      ran.fetch_add(1, std::memory_order_relaxed);
      return a;
    }, P(i));
    ASSERT_EQ(rc, 0) << "thread " << i << ": " << weft_err_name(rc);
  }
  const long allocs = weft_debug_alloc_count() - allocs_before;
  weft_debug_stats(&after);
  EXPECT_EQ(ran.load(), 0) << "a thread ran before its creator switched";
  EXPECT_EQ(after.created - before.created, static_cast<uint64_t>(total));
  EXPECT_EQ(after.stacks_cached, before.stacks_cached);
  // One control block per thread at most (fewer if they come in slabs), plus a
  // little slack for queue growth; a stack per thread would double it.
  EXPECT_LE(allocs, total + total / 4 + 64)
      << allocs << " allocations for " << total << " unstarted threads";
  RecordProperty("allocations_per_thread_x1000", static_cast<int>(1000 * allocs / total));
  for (long i = 0; i < total; ++i) {
    void *r = nullptr;
    ASSERT_EQ(weft_join(ts[i], &r), 0);
    ASSERT_EQ(r, P(i));
  }
  EXPECT_EQ(ran.load(), total);
}

}  // namespace
