// L8 - create + delete a thread that is never started (Presto "create/delete",
// BENCHMARKS.md L8; Presto §3.3 Fig 3).
//
// weft cannot delete a thread that has not run (there is no cancel), and neither can
// Boost.Fiber or pthreads. The honest nearest operation, used here and in T4: create a
// batch of threads that have not started, then let each run an empty body and be
// reclaimed. Because weft binds a stack only when a thread first runs, the batch's
// threads hold no stack while they wait. The label says "create+reclaim".
#include <pthread.h>

#include <vector>

#include "latency.h"
#ifdef WEFT_BENCH_BOOST
#include <boost/fiber/all.hpp>
#endif

namespace {

constexpr int kBatch = 1000;

// Timed: n weft_create() calls (none runs: one VP, the creator does not yield), then n
// weft_join() calls, during which each thread runs its empty body and is reclaimed.
void L8_weft(benchmark::State &state) {
  std::vector<weft_thread_t *> t(kBatch);
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
      bench_check(weft_create(&t[i], nullptr, weft_bench::empty_body, nullptr), "weft_create");
    for (int i = 0; i < n; i++) bench_check(weft_join(t[i], nullptr), "weft_join");
    return bench_now_ns() - t0;
  });
}
BENCHMARK(L8_weft)
    ->Name("L8_create+reclaim(never-blocking empty body)/weft")
    ->Apply(weft_bench::defaults);

void *l8_empty(void *) { return nullptr; }

// pthreads cannot create a thread without starting it: this is L2 again
// (n x pthread_create + pthread_join of an empty thread), labelled so.
void L8_pthread(benchmark::State &state) {
  weft_bench::run_batches(state, 100, [](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) {
      pthread_t t;
      if (pthread_create(&t, nullptr, l8_empty, nullptr) != 0) std::abort();
      pthread_join(t, nullptr);
    }
    return bench_now_ns() - t0;
  });
}
BENCHMARK(L8_pthread)
    ->Name("L8_create+reclaim(never-blocking empty body)/pthreads(=L2)")
    ->Apply(weft_bench::defaults);

#ifdef WEFT_BENCH_BOOST
// Timed: n fiber constructions (launch::post: ready, not run), then n join() calls,
// during which each fiber runs its empty body and is reclaimed.
void L8_boost(benchmark::State &state) {
  std::vector<boost::fibers::fiber> f;
  f.reserve(kBatch);
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) f.emplace_back(boost::fibers::launch::post, [] {});
    for (auto &x : f) x.join();
    double ns = bench_now_ns() - t0;
    f.clear();
    return ns;
  });
}
BENCHMARK(L8_boost)
    ->Name("L8_create+reclaim(never-blocking empty body)/boost_fiber")
    ->Apply(weft_bench::defaults);

// As L8_boost with stacks from a boost::fibers::pooled_fixedsize_stack.
void L8_boost_pooled(benchmark::State &state) {
  boost::fibers::pooled_fixedsize_stack pool;
  std::vector<boost::fibers::fiber> f;
  f.reserve(kBatch);
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
      f.emplace_back(boost::fibers::launch::post, std::allocator_arg, pool, [] {});
    for (auto &x : f) x.join();
    double ns = bench_now_ns() - t0;
    f.clear();
    return ns;
  });
}
BENCHMARK(L8_boost_pooled)
    ->Name("L8_create+reclaim(never-blocking empty body)/boost_fiber_pooled")
    ->Apply(weft_bench::defaults);
#endif

}  // namespace
