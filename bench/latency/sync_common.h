// sync_common.h - what the synchronization latency rows L4-L7 share beyond the patterns
// of pingpong.h: the weft runtime re-start for the rows that need more than one VP, and
// run_pingpong, the Google Benchmark driver of the ping-pong patterns.
#ifndef WEFT_BENCH_SYNC_COMMON_H
#define WEFT_BENCH_SYNC_COMMON_H

#include "latency.h"
#include "pingpong.h"

namespace weft_bench {

// The latency binary runs weft with nvps=1 (latency_main.cc). A row that needs another
// VP count re-starts the runtime for its duration: with_vps(n) shuts weft down and
// starts it with n VPs; the destructor goes back to nvps=1. Called from the main weft
// thread with no other weft thread alive.
struct WithVps {
  int n;
  explicit WithVps(int nvps) : n(nvps) {
    if (n == 1) return;
    restart(n);
  }
  static void restart(int nvps) {
    bench_check(weft_shutdown(), "weft_shutdown");
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = nvps;
    bench_check(weft_init(&cfg), "weft_init");
  }
  ~WithVps() {
    if (n != 1) restart(1);
  }
};

// Runs pattern P with the partner started by `spawn`: batches of n rounds timed on the
// calling thread (A). Counters: partner_per_round (1 = strict alternation) and, when
// `weft_stats`, weft's blocks and idles per round (weft_sync_stats deltas).
template <class P, class Spawn>
void run_pingpong(benchmark::State &state, Spawn &spawn, bool weft_stats = false,
                  benchmark::IterationCount batch = 1000) {
  P p;
  p.begin();
  spawn.start(&P::partner, &p);
  Spawn::wait_for(p.ready);
  for (int i = 0; i < 100; i++) p.step();  // warm up
  long b0 = p.b_steps;
  weft_sync_stats_t s0, s1;
  weft_sync_stats(&s0);
  double rounds = 0;
  run_batches(state, batch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (benchmark::IterationCount i = 0; i < n; i++) p.step();
    rounds += static_cast<double>(n);
    return bench_now_ns() - t0;
  });
  weft_sync_stats(&s1);
  state.counters["partner_per_round"] = static_cast<double>(p.b_steps - b0) / rounds;
  if (weft_stats) {
    state.counters["mutex_blocked_per_round"] = static_cast<double>(s1.blocked - s0.blocked) / rounds;
    state.counters["idled_per_round"] = static_cast<double>(s1.idled - s0.idled) / rounds;
  }
  if constexpr (P::kTrackVp) state.counters["b_on_other_vp"] = p.b_other_vp / rounds;
  p.end();
  spawn.join();
}

}  // namespace weft_bench

#endif
