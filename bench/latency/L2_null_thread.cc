// L2 - null thread: create + run + finish of a thread with an empty body, control back
// to the creator. (BENCHMARKS.md L2; Active Threads Table 5, Table 6.)
#include <pthread.h>

#include "latency.h"
#ifdef WEFT_BENCH_BOOST
#include <boost/fiber/all.hpp>
#endif

namespace {

// Timed: n x (weft_create() + weft_join()) of an empty thread on one VP: the join
// blocks the creator, the thread starts (binding a cached stack), returns, and the
// creator resumes and reclaims it.
void L2_weft(benchmark::State &state) {
  weft_bench::run_batches(state, 1000, [](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) {
      weft_thread_t *t;
      bench_check(weft_create(&t, nullptr, weft_bench::empty_body, nullptr), "weft_create");
      bench_check(weft_join(t, nullptr), "weft_join");
    }
    return bench_now_ns() - t0;
  });
}
BENCHMARK(L2_weft)->Name("L2_null_thread/weft")->Apply(weft_bench::defaults);

void *l2_empty(void *) { return nullptr; }

// Timed: n x (pthread_create() + pthread_join()) of an empty thread.
void L2_pthread(benchmark::State &state) {
  weft_bench::run_batches(state, 100, [](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) {
      pthread_t t;
      if (pthread_create(&t, nullptr, l2_empty, nullptr) != 0) std::abort();
      pthread_join(t, nullptr);
    }
    return bench_now_ns() - t0;
  });
}
BENCHMARK(L2_pthread)->Name("L2_null_thread/pthreads")->Apply(weft_bench::defaults);

#ifdef WEFT_BENCH_BOOST
// Timed: n x (construct boost::fibers::fiber + join()) of an empty fiber, default
// round_robin scheduler on this thread.
void L2_boost(benchmark::State &state) {
  weft_bench::run_batches(state, 1000, [](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) boost::fibers::fiber([] {}).join();
    return bench_now_ns() - t0;
  });
}
BENCHMARK(L2_boost)->Name("L2_null_thread/boost_fiber")->Apply(weft_bench::defaults);

// As L2_boost with stacks from a boost::fibers::pooled_fixedsize_stack.
void L2_boost_pooled(benchmark::State &state) {
  boost::fibers::pooled_fixedsize_stack pool;
  weft_bench::run_batches(state, 1000, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) boost::fibers::fiber(std::allocator_arg, pool, [] {}).join();
    return bench_now_ns() - t0;
  });
}
BENCHMARK(L2_boost_pooled)->Name("L2_null_thread/boost_fiber_pooled")->Apply(weft_bench::defaults);
#endif

}  // namespace
