// tests/stress/million_test.cc - a million threads created and joined, in batches.
#include "weft_test.h"

using namespace weft_test;

namespace {

class MillionTest : public VpTest {};
WEFT_INSTANTIATE_VPS(MillionTest);

void *Square(void *arg) { return P(I(arg) * I(arg) % 1000003); }

// 1e6 threads (times WEFT_TEST_SCALE) run to completion in batches of 1000: every
// result arrives, and the counters account for every thread.
TEST_P(MillionTest, CreateAndJoinAMillionThreads) {
  const long total = Scaled(1000000, 1000);
  const long kBatch = 1000;
  weft_debug_stats_t before, after;
  weft_debug_stats(&before);
  std::vector<weft_thread_t *> ts(kBatch);
  long checked = 0;
  for (long base = 0; base < total; base += kBatch) {
    long n = std::min(kBatch, total - base);
    for (long i = 0; i < n; ++i) {
      int rc = weft_create(&ts[i], nullptr, Square, P(base + i));
      ASSERT_EQ(rc, 0) << "thread " << base + i << ": " << weft_err_name(rc);
    }
    for (long i = 0; i < n; ++i) {
      void *r = nullptr;
      ASSERT_EQ(weft_join(ts[i], &r), 0);
      intptr_t v = base + i;
      ASSERT_EQ(r, P(v * v % 1000003)) << "thread " << v;
      ++checked;
    }
  }
  EXPECT_EQ(checked, total);
  weft_debug_stats(&after);
  EXPECT_EQ(after.created - before.created, static_cast<uint64_t>(total));
  EXPECT_EQ(after.finished - before.finished, static_cast<uint64_t>(total));
}

}  // namespace
