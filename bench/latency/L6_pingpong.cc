// L6 - mutex ping-pong and semaphore ping-pong: two threads on one worker synchronise
// alternately; time per round (each thread passes once). (BENCHMARKS.md L6; Active Threads
// Table 5, Table 6 "synchronization".)
//
// Mutex ping-pong: three mutexes handed over hand (pingpong.h MutexPingPong): a legal
// use of owned mutexes, where each round is 2 lock+unlock pairs, each lock blocking
// once and each unlock waking the other thread. Semaphore ping-pong: A signal(s1);
// wait(s2) / B wait(s1); signal(s2). The same patterns for every library.
// weft: nvps=1, both threads on the one VP. pthreads: both pinned to one CPU (as L3),
// and a "_2cpu" variant with the two pinned to different CPUs. Boost.Fiber: two fibers
// on one thread; its semaphore is mutex + condition_variable.
#include <semaphore.h>

#include "sync_common.h"

namespace {

using namespace weft_bench;

void L6_weft_mutex(benchmark::State &state) {
  WeftSpawn sp;
  run_pingpong<MutexPingPong<WeftMutexOps>>(state, sp, true);
}
BENCHMARK(L6_weft_mutex)->Name("L6_mutex_pingpong/weft")->Apply(defaults);

void L6_weft_hybrid(benchmark::State &state) {
  WeftSpawn sp;
  run_pingpong<MutexPingPong<WeftHybridOps>>(state, sp, true);
}
BENCHMARK(L6_weft_hybrid)->Name("L6_hybrid_pingpong/weft")->Apply(defaults);

void L6_weft_sem(benchmark::State &state) {
  WeftSpawn sp;
  run_pingpong<SemPingPong<WeftSemOps>>(state, sp, true);
}
BENCHMARK(L6_weft_sem)->Name("L6_sem_pingpong/weft")->Apply(defaults);

void L6_pthread_mutex(benchmark::State &state) {
  PthreadSpawn sp(sched_getcpu(), sched_getcpu());
  run_pingpong<MutexPingPong<PthreadMutexOps>>(state, sp);
}
BENCHMARK(L6_pthread_mutex)->Name("L6_mutex_pingpong/pthreads")->Apply(defaults);

void L6_pthread_mutex_2cpu(benchmark::State &state) {
  int a = sched_getcpu();
  PthreadSpawn sp(a, bench_other_cpu(a));
  run_pingpong<MutexPingPong<PthreadMutexOps>>(state, sp);
}
BENCHMARK(L6_pthread_mutex_2cpu)->Name("L6_mutex_pingpong_2cpu/pthreads")->Apply(defaults);

void L6_pthread_sem(benchmark::State &state) {
  PthreadSpawn sp(sched_getcpu(), sched_getcpu());
  run_pingpong<SemPingPong<PthreadSemOps>>(state, sp);
}
BENCHMARK(L6_pthread_sem)->Name("L6_sem_pingpong/pthreads")->Apply(defaults);

void L6_pthread_sem_2cpu(benchmark::State &state) {
  int a = sched_getcpu();
  PthreadSpawn sp(a, bench_other_cpu(a));
  run_pingpong<SemPingPong<PthreadSemOps>>(state, sp);
}
BENCHMARK(L6_pthread_sem_2cpu)->Name("L6_sem_pingpong_2cpu/pthreads")->Apply(defaults);

#ifdef WEFT_BENCH_BOOST
void L6_boost_mutex(benchmark::State &state) {
  BoostSpawn sp;
  run_pingpong<MutexPingPong<BoostMutexOps>>(state, sp);
}
BENCHMARK(L6_boost_mutex)->Name("L6_mutex_pingpong/boost_fiber")->Apply(defaults);

void L6_boost_sem(benchmark::State &state) {
  BoostSpawn sp;
  run_pingpong<SemPingPong<BoostSemOps>>(state, sp);
}
BENCHMARK(L6_boost_sem)->Name("L6_sem_pingpong/boost_fiber(mutex+cv)")->Apply(defaults);
#endif

}  // namespace
