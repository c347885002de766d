// tests/stress/yield_test.cc - many threads yielding random numbers of times.
#include <random>

#include "weft_test.h"

using namespace weft_test;

namespace {

class RandomYieldTest : public VpTest {};
WEFT_INSTANTIATE_VPS(RandomYieldTest);

struct YieldJob {
  int yields;
  std::atomic<long> *total;
};

void *YieldN(void *arg) {
  auto *job = static_cast<YieldJob *>(arg);
  for (int i = 0; i < job->yields; ++i) {
    job->total->fetch_add(1, std::memory_order_relaxed);
    weft_yield();
  }
  return P(job->yields);
}

// Threads yield a random number of times each (fixed seed); every yield returns
// and is counted exactly, and each thread reports its own count.
TEST_P(RandomYieldTest, RandomYieldsAreCountedExactly) {
  const int kThreads = static_cast<int>(Scaled(2000, 20));
  std::mt19937 rng(12345 + nvps());
  std::uniform_int_distribution<int> dist(0, 200);
  std::atomic<long> total{0};
  std::vector<YieldJob> jobs(kThreads);
  long expected = 0;
  for (YieldJob &job : jobs) {
    job = {dist(rng), &total};
    expected += job.yields;
  }
  std::vector<weft_thread_t *> ts;
  for (YieldJob &job : jobs) ts.push_back(Spawn(YieldN, &job));
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(Join(ts[i]), P(jobs[i].yields));
  EXPECT_EQ(total.load(), expected);
}

}  // namespace
