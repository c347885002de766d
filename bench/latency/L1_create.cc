// L1 - thread create: the cost to the creator of creating a thread that has not run yet.
// (BENCHMARKS.md L1; Active Threads §7 Table 5.)
#include <pthread.h>

#include <vector>

#include "latency.h"
#ifdef WEFT_BENCH_BOOST
#include <boost/fiber/all.hpp>
#endif

namespace {

constexpr int kWeftBatch = 1000;  // fits the default free lists: the paper's "warm start"
constexpr int kPthreadBatch = 100;

// Timed: n weft_create() calls of joinable threads, nvps=1, the creator never yields,
// so none of them has run. Not timed: joining them (they run then). weft binds a stack
// when a thread first runs (FastThreads §2), so this creates control blocks only; the
// "+bind_stack" row below adds the stack.
void L1_weft(benchmark::State &state) {
  std::vector<weft_thread_t *> t(kWeftBatch);
  weft_bench::run_batches(state, kWeftBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
      bench_check(weft_create(&t[i], nullptr, weft_bench::empty_body, nullptr), "weft_create");
    double ns = bench_now_ns() - t0;
    for (int i = 0; i < n; i++) bench_check(weft_join(t[i], nullptr), "weft_join");
    return ns;
  });
}
BENCHMARK(L1_weft)->Name("L1_create/weft")->Apply(weft_bench::defaults);

// Timed: n x (weft_create() + weft_sched_bind_stack()): create with the stack bound
// eagerly, the closest match to the paper's "stack included". Not timed: joining.
void L1_weft_stack(benchmark::State &state) {
  std::vector<weft_thread_t *> t(kWeftBatch);
  weft_bench::run_batches(state, kWeftBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) {
      bench_check(weft_create(&t[i], nullptr, weft_bench::empty_body, nullptr), "weft_create");
      bench_check(weft_sched_bind_stack(t[i]), "weft_sched_bind_stack");
    }
    double ns = bench_now_ns() - t0;
    for (int i = 0; i < n; i++) bench_check(weft_join(t[i], nullptr), "weft_join");
    return ns;
  });
}
BENCHMARK(L1_weft_stack)->Name("L1_create/weft+bind_stack")->Apply(weft_bench::defaults);

pthread_barrier_t l1_barrier;
void *l1_wait(void *) {
  pthread_barrier_wait(&l1_barrier);
  return nullptr;
}

// Timed: n pthread_create() calls of threads that wait on a barrier. Not timed:
// releasing the barrier and joining. A kernel thread starts at once (possibly on the
// other core), so "has not run yet" cannot be held; this is the creator's cost.
void L1_pthread(benchmark::State &state) {
  std::vector<pthread_t> t(kPthreadBatch);
  weft_bench::run_batches(state, kPthreadBatch, [&](benchmark::IterationCount n) {
    pthread_barrier_init(&l1_barrier, nullptr, static_cast<unsigned>(n) + 1);
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
      if (pthread_create(&t[i], nullptr, l1_wait, nullptr) != 0) std::abort();
    double ns = bench_now_ns() - t0;
    pthread_barrier_wait(&l1_barrier);
    for (int i = 0; i < n; i++) pthread_join(t[i], nullptr);
    pthread_barrier_destroy(&l1_barrier);
    return ns;
  });
}
BENCHMARK(L1_pthread)->Name("L1_create/pthreads")->Apply(weft_bench::defaults);

#ifdef WEFT_BENCH_BOOST
// Timed: n constructions of boost::fibers::fiber(launch::post, empty) - the fiber is
// ready but has not run; its stack (default fixedsize_stack) is allocated here.
// Not timed: joining them.
void L1_boost(benchmark::State &state) {
  std::vector<boost::fibers::fiber> f;
  f.reserve(kWeftBatch);
  weft_bench::run_batches(state, kWeftBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) f.emplace_back(boost::fibers::launch::post, [] {});
    double ns = bench_now_ns() - t0;
    for (auto &x : f) x.join();
    f.clear();
    return ns;
  });
}
BENCHMARK(L1_boost)->Name("L1_create/boost_fiber")->Apply(weft_bench::defaults);

// As L1_boost with boost::fibers::pooled_fixedsize_stack: stacks come from a pool that
// keeps freed stacks, as weft's free lists do (safe here: one thread only).
void L1_boost_pooled(benchmark::State &state) {
  boost::fibers::pooled_fixedsize_stack pool;
  std::vector<boost::fibers::fiber> f;
  f.reserve(kWeftBatch);
  weft_bench::run_batches(state, kWeftBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
      f.emplace_back(boost::fibers::launch::post, std::allocator_arg, pool, [] {});
    double ns = bench_now_ns() - t0;
    for (auto &x : f) x.join();
    f.clear();
    return ns;
  });
}
BENCHMARK(L1_boost_pooled)->Name("L1_create/boost_fiber_pooled")->Apply(weft_bench::defaults);
#endif

}  // namespace
