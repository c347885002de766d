// L3 - context switch: two threads on one worker yield to each other; time per switch.
// (BENCHMARKS.md L3; Active Threads Table 5, OpenThreads Table 1.)
//
// Each yield that hands the worker to the other thread is one switch. The benchmark
// thread yields n/2 times per batch and the partner yields in between; the time is
// divided by the total number of yields of both threads, counted, not assumed.
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>

#include "latency.h"
#ifdef WEFT_BENCH_BOOST
#include <boost/fiber/all.hpp>
#endif

namespace {

constexpr int kBatch = 2000;  // switches per batch

// Written by the partner only; read by the benchmark thread, which runs on the same
// worker between the partner's yields.
long partner_yields;
bool partner_stop;

void *weft_partner(void *) {
  while (!partner_stop) {
    weft_yield();
    partner_yields++;
  }
  return nullptr;
}

// Timed: n/2 weft_yield() calls of the benchmark thread, with one partner weft thread
// yielding back, both on the one VP. Reported: time / (yields of both threads).
// Counter partner_per_main_yield: 1 when the two strictly alternate.
void L3_weft(benchmark::State &state) {
  partner_stop = false;
  weft_thread_t *partner;
  bench_check(weft_create(&partner, nullptr, weft_partner, nullptr), "weft_create");
  weft_yield();  // let the partner start
  double mine = 0, theirs = 0;
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    long p0 = partner_yields;
    double t0 = bench_now_ns();
    for (int i = 0; i < n / 2; i++) weft_yield();
    double ns = bench_now_ns() - t0;
    mine += static_cast<double>(n / 2);
    theirs += static_cast<double>(partner_yields - p0);
    return ns * static_cast<double>(n) / static_cast<double>(n / 2 + (partner_yields - p0));
  });
  partner_stop = true;
  bench_check(weft_join(partner, nullptr), "weft_join");
  state.counters["partner_per_main_yield"] = theirs / mine;
}
BENCHMARK(L3_weft)->Name("L3_switch/weft")->Apply(weft_bench::defaults);

// pthreads: yielding is not a switch between two given threads, so the pair hands the
// CPU to each other through two semaphores, both pinned to the same CPU: each
// sem_post + sem_wait of one thread blocks it and wakes the other (one hand-off).
sem_t ping, pong;

void *pthread_partner(void *) {
  for (;;) {
    sem_wait(&ping);
    if (partner_stop) return nullptr;
    sem_post(&pong);
  }
}

// Timed: n/2 round trips (sem_post(ping); sem_wait(pong)) = n hand-offs between two
// pthreads pinned to one CPU. Reported: time per hand-off (kernel switch included).
void L3_pthread(benchmark::State &state) {
  cpu_set_t saved;
  bench_affinity_save(&saved);
  int cpu = sched_getcpu();
  bench_pin_self(cpu);
  sem_init(&ping, 0, 0);
  sem_init(&pong, 0, 0);
  partner_stop = false;
  pthread_t partner = bench_start_pinned(cpu, pthread_partner, nullptr);
  weft_bench::run_batches(state, kBatch, [](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n / 2; i++) {
      sem_post(&ping);
      sem_wait(&pong);
    }
    return bench_now_ns() - t0;
  });
  partner_stop = true;
  sem_post(&ping);
  pthread_join(partner, nullptr);
  sem_destroy(&ping);
  sem_destroy(&pong);
  bench_affinity_restore(&saved);
}
BENCHMARK(L3_pthread)->Name("L3_switch/pthreads")->Apply(weft_bench::defaults);

#ifdef WEFT_BENCH_BOOST
// Timed: n/2 boost::this_fiber::yield() calls of the benchmark thread's main fiber with
// one partner fiber yielding back (round_robin). Reported: time / (yields of both).
void L3_boost(benchmark::State &state) {
  partner_stop = false;
  boost::fibers::fiber partner([] {
    while (!partner_stop) {
      boost::this_fiber::yield();
      partner_yields++;
    }
  });
  boost::this_fiber::yield();  // let the partner start
  weft_bench::run_batches(state, kBatch, [](benchmark::IterationCount n) {
    long p0 = partner_yields;
    double t0 = bench_now_ns();
    for (int i = 0; i < n / 2; i++) boost::this_fiber::yield();
    double ns = bench_now_ns() - t0;
    double y = static_cast<double>(n / 2 + (partner_yields - p0));
    return ns * static_cast<double>(n) / y;
  });
  partner_stop = true;
  partner.join();
}
BENCHMARK(L3_boost)->Name("L3_switch/boost_fiber")->Apply(weft_bench::defaults);
#endif

}  // namespace
