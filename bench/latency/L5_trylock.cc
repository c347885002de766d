// L5 - succeeding mutex trylock, semaphore trywait. (BENCHMARKS.md L5; Active Threads Table 5.)
//
// One thread, no contention. Each operation is a trylock that succeeds plus the unlock
// that makes the next one succeed (trywait that succeeds plus the signal that refills
// the unit): a trylock cannot be repeated without it. Time per pair; a failed try
// aborts the benchmark.
#include <semaphore.h>

#include "sync_common.h"
#include "weft/sync.h"

namespace {

constexpr int kBatch = 10000;

template <class Try, class Undo>
void pairs(benchmark::State &state, Try attempt, Undo undo) {
  long failed = 0;
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (benchmark::IterationCount i = 0; i < n; i++) {
      failed += !attempt();
      undo();
    }
    return bench_now_ns() - t0;
  });
  if (failed) state.SkipWithError("a try did not succeed");
}

// Timed: n x (weft_mutex_trylock (succeeds) + weft_mutex_unlock), main weft thread.
void L5_weft_mutex(benchmark::State &state) {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  pairs(state, [&] { return weft_mutex_trylock(&m) == 0; }, [&] { weft_mutex_unlock(&m); });
}
BENCHMARK(L5_weft_mutex)->Name("L5_trylock/weft")->Apply(weft_bench::defaults);

void L5_weft_hybrid(benchmark::State &state) {
  weft_hybrid_t m = WEFT_HYBRID_INIT;
  pairs(state, [&] { return weft_hybrid_trylock(&m) == 0; }, [&] { weft_hybrid_unlock(&m); });
}
BENCHMARK(L5_weft_hybrid)->Name("L5_trylock_hybrid/weft")->Apply(weft_bench::defaults);

// Timed: n x (weft_sem_trywait (succeeds) + weft_sem_signal); the count starts at 1.
void L5_weft_sem(benchmark::State &state) {
  weft_sem_t s = WEFT_SEM_INIT(1);
  pairs(state, [&] { return weft_sem_trywait(&s) == 0; }, [&] { weft_sem_signal(&s); });
}
BENCHMARK(L5_weft_sem)->Name("L5_trywait/weft")->Apply(weft_bench::defaults);

void L5_pthread_mutex(benchmark::State &state) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pairs(state, [&] { return pthread_mutex_trylock(&m) == 0; }, [&] { pthread_mutex_unlock(&m); });
}
BENCHMARK(L5_pthread_mutex)->Name("L5_trylock/pthreads")->Apply(weft_bench::defaults);

void L5_pthread_spin(benchmark::State &state) {
  pthread_spinlock_t m;
  pthread_spin_init(&m, PTHREAD_PROCESS_PRIVATE);
  pairs(state, [&] { return pthread_spin_trylock(&m) == 0; }, [&] { pthread_spin_unlock(&m); });
  pthread_spin_destroy(&m);
}
BENCHMARK(L5_pthread_spin)->Name("L5_trylock_spinlock/pthreads")->Apply(weft_bench::defaults);

void L5_pthread_sem(benchmark::State &state) {
  sem_t s;
  sem_init(&s, 0, 1);
  pairs(state, [&] { return sem_trywait(&s) == 0; }, [&] { sem_post(&s); });
  sem_destroy(&s);
}
BENCHMARK(L5_pthread_sem)->Name("L5_trywait/pthreads")->Apply(weft_bench::defaults);

#ifdef WEFT_BENCH_BOOST
void L5_boost_mutex(benchmark::State &state) {
  boost::fibers::mutex m;
  pairs(state, [&] { return m.try_lock(); }, [&] { m.unlock(); });
}
BENCHMARK(L5_boost_mutex)->Name("L5_trylock/boost_fiber")->Apply(weft_bench::defaults);

void L5_boost_sem(benchmark::State &state) {
  weft_bench::FiberSem s;
  s.count = 1;
  pairs(state, [&] { return s.trywait(); }, [&] { s.signal(); });
}
BENCHMARK(L5_boost_sem)->Name("L5_trywait/boost_fiber(mutex+cv)")->Apply(weft_bench::defaults);
#endif

}  // namespace
