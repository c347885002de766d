// L4 - uncontested mutex lock+unlock; uncontested semaphore wait+signal.
// (BENCHMARKS.md L4; Active Threads Table 5.)
//
// One thread, nothing else runnable: every lock finds the mutex free, every wait finds
// the unit the preceding signal left (the semaphore starts at 0; each operation is
// signal then wait, so the count goes 0 -> 1 -> 0). Time per pair.
#include <semaphore.h>

#include "sync_common.h"
#include "weft/sync.h"

namespace {

constexpr int kBatch = 10000;  // pairs per batch

template <class Lock, class Unlock>
void pairs(benchmark::State &state, Lock lock, Unlock unlock) {
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (benchmark::IterationCount i = 0; i < n; i++) {
      lock();
      unlock();
    }
    return bench_now_ns() - t0;
  });
}

// Timed: n x (weft_mutex_lock + weft_mutex_unlock) by the main weft thread (nvps=1).
void L4_weft_mutex(benchmark::State &state) {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  pairs(state, [&] { weft_mutex_lock(&m); }, [&] { weft_mutex_unlock(&m); });
}
BENCHMARK(L4_weft_mutex)->Name("L4_mutex/weft")->Apply(weft_bench::defaults);

// As above with the hybrid lock (weft_hybrid_lock + weft_hybrid_unlock).
void L4_weft_hybrid(benchmark::State &state) {
  weft_hybrid_t m = WEFT_HYBRID_INIT;
  pairs(state, [&] { weft_hybrid_lock(&m); }, [&] { weft_hybrid_unlock(&m); });
}
BENCHMARK(L4_weft_hybrid)->Name("L4_hybrid/weft")->Apply(weft_bench::defaults);

// Timed: n x (weft_sem_signal + weft_sem_wait), count 0 -> 1 -> 0.
void L4_weft_sem(benchmark::State &state) {
  weft_sem_t s = WEFT_SEM_INIT(0);
  pairs(state, [&] { weft_sem_signal(&s); }, [&] { weft_sem_wait(&s); });
}
BENCHMARK(L4_weft_sem)->Name("L4_sem/weft")->Apply(weft_bench::defaults);

// pthreads: pthread_mutex_t (default type), pthread_spinlock_t, sem_t.
void L4_pthread_mutex(benchmark::State &state) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pairs(state, [&] { pthread_mutex_lock(&m); }, [&] { pthread_mutex_unlock(&m); });
}
BENCHMARK(L4_pthread_mutex)->Name("L4_mutex/pthreads")->Apply(weft_bench::defaults);

void L4_pthread_spin(benchmark::State &state) {
  pthread_spinlock_t m;
  pthread_spin_init(&m, PTHREAD_PROCESS_PRIVATE);
  pairs(state, [&] { pthread_spin_lock(&m); }, [&] { pthread_spin_unlock(&m); });
  pthread_spin_destroy(&m);
}
BENCHMARK(L4_pthread_spin)->Name("L4_spinlock/pthreads")->Apply(weft_bench::defaults);

void L4_pthread_sem(benchmark::State &state) {
  sem_t s;
  sem_init(&s, 0, 0);
  pairs(state, [&] { sem_post(&s); }, [&] { sem_wait(&s); });
  sem_destroy(&s);
}
BENCHMARK(L4_pthread_sem)->Name("L4_sem/pthreads")->Apply(weft_bench::defaults);

#ifdef WEFT_BENCH_BOOST
// Boost.Fiber: boost::fibers::mutex from the thread's main fiber; the semaphore is
// weft_bench::FiberSem (mutex + condition_variable).
void L4_boost_mutex(benchmark::State &state) {
  boost::fibers::mutex m;
  pairs(state, [&] { m.lock(); }, [&] { m.unlock(); });
}
BENCHMARK(L4_boost_mutex)->Name("L4_mutex/boost_fiber")->Apply(weft_bench::defaults);

void L4_boost_sem(benchmark::State &state) {
  weft_bench::FiberSem s;
  pairs(state, [&] { s.signal(); }, [&] { s.wait(); });
}
BENCHMARK(L4_boost_sem)->Name("L4_sem/boost_fiber(mutex+cv)")->Apply(weft_bench::defaults);
#endif

}  // namespace
