// L7 - condition-variable ping-pong: PingPong of C-Threads §5.1 (two threads, one
// mutex, one condition, a turn variable; each waits until it is its turn, flips the
// turn, signals, unlocks). Time per round (each thread passes once).
// (BENCHMARKS.md L7; C-Threads Figure 5-1.)
//
// Set-ups (C-Threads ran "1 Thread", "2 Threads" and "Wired"):
//   L7_cond_pingpong/weft               1 kernel thread: nvps=1
//   L7_cond_pingpong_2vp/weft           2 kernel threads: nvps=2, both threads free to
//                                       run on either VP (A is the main weft thread)
//   L7_cond_pingpong_2vp_affinity/weft  nvps=2, A created with affinity 0, B with 1
//   L7_cond_pingpong_wired/weft         "Wired": A and B each wired (weft_wire, the
//                                       runtime side of cthread_wire) to a kernel thread
//                                       of its own; every hand-off goes through the
//                                       kernel (futex), as with pthreads. nvps=1 (the
//                                       VP only starts and joins them).
// Baselines: pthreads pinned to one CPU, and to two different CPUs (_2cpu);
// Boost.Fiber, two fibers on one thread.
#include <utility>

#include "sync_common.h"
#include "weft/wire.h"

namespace {

using namespace weft_bench;

void L7_weft_1vp(benchmark::State &state) {
  WeftSpawn sp;
  run_pingpong<CondPingPong<WeftCondOps>>(state, sp, true);
}
BENCHMARK(L7_weft_1vp)->Name("L7_cond_pingpong/weft")->Apply(defaults);

// nvps=2 for the duration of the row (WithVps re-starts the runtime); B is created by
// the main weft thread without affinity.
void L7_weft_2vp(benchmark::State &state) {
  WithVps vps(2);
  WeftSpawn sp;
  run_pingpong<CondPingPong<WeftCondOps, true>>(state, sp, true);
}
BENCHMARK(L7_weft_2vp)->Name("L7_cond_pingpong_2vp/weft")->Apply(defaults);

// nvps=2; A is a weft thread with affinity 0 that runs the timed loop, B has affinity 1.
struct AffinityArgs {
  benchmark::State *state;
};
void *affinity_a(void *arg) {
  WeftSpawn sp;
  sp.affinity = 1;
  run_pingpong<CondPingPong<WeftCondOps, true>>(*static_cast<AffinityArgs *>(arg)->state, sp, true);
  return nullptr;
}
void L7_weft_2vp_affinity(benchmark::State &state) {
  WithVps vps(2);
  AffinityArgs args{&state};
  WeftSpawn a;
  a.affinity = 0;
  a.start(affinity_a, &args);
  a.join();
}
BENCHMARK(L7_weft_2vp_affinity)->Name("L7_cond_pingpong_2vp_affinity/weft")->Apply(defaults);

// Wired: the partner wires itself before it starts (WiredSpawn); A is a weft thread
// that wires itself and runs the timed loop.
void *wired_body(void *arg) {
  auto *fa = static_cast<std::pair<void *(*)(void *), void *> *>(arg);
  bench_check(weft_wire(), "weft_wire");
  void *r = fa->first(fa->second);
  bench_check(weft_unwire(), "weft_unwire");
  return r;
}
struct WiredSpawn {
  WeftSpawn inner;
  std::pair<void *(*)(void *), void *> fa;
  void start(void *(*fn)(void *), void *arg) {
    fa = {fn, arg};
    inner.start(wired_body, &fa);
  }
  static void wait_for(const std::atomic<bool> &f) {
    while (!f.load(std::memory_order_acquire)) weft_yield();  // sched_yield when wired
  }
  void join() { inner.join(); }
};
void *wired_a(void *arg) {
  WiredSpawn sp;
  run_pingpong<CondPingPong<WeftCondOps>>(*static_cast<benchmark::State *>(arg), sp, true);
  return nullptr;
}
void L7_weft_wired(benchmark::State &state) {
  std::pair<void *(*)(void *), void *> fa{wired_a, &state};
  WeftSpawn a;
  a.start(wired_body, &fa);
  a.join();
}
BENCHMARK(L7_weft_wired)->Name("L7_cond_pingpong_wired/weft")->Apply(defaults);

void L7_pthread(benchmark::State &state) {
  PthreadSpawn sp(sched_getcpu(), sched_getcpu());
  run_pingpong<CondPingPong<PthreadCondOps>>(state, sp);
}
BENCHMARK(L7_pthread)->Name("L7_cond_pingpong/pthreads")->Apply(defaults);

void L7_pthread_2cpu(benchmark::State &state) {
  int a = sched_getcpu();
  PthreadSpawn sp(a, bench_other_cpu(a));
  run_pingpong<CondPingPong<PthreadCondOps>>(state, sp);
}
BENCHMARK(L7_pthread_2cpu)->Name("L7_cond_pingpong_2cpu/pthreads")->Apply(defaults);

#ifdef WEFT_BENCH_BOOST
void L7_boost(benchmark::State &state) {
  BoostSpawn sp;
  run_pingpong<CondPingPong<BoostCondOps>>(state, sp);
}
BENCHMARK(L7_boost)->Name("L7_cond_pingpong/boost_fiber")->Apply(defaults);
#endif

}  // namespace
