// latency.h - the one harness every latency row (L1, L2, L3, L8) uses.
//
// A benchmark body performs a batch of n operations and returns the nanoseconds of
// the part that is timed; Google Benchmark counts n iterations per batch and uses that
// time as manual time, so the reported Time is nanoseconds per operation and anything
// a batch does outside its timed part (joining, tearing down) costs nothing.
#ifndef WEFT_BENCH_LATENCY_H
#define WEFT_BENCH_LATENCY_H

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include "bench.h"
#include "weft/weft.h"

namespace weft_bench {

// Runs batch(n) until Google Benchmark has enough manual time. batch(n) performs n
// operations and returns the nanoseconds it spent on them.
template <class Batch>
void run_batches(benchmark::State &state, benchmark::IterationCount n, Batch batch) {
  while (state.KeepRunningBatch(n)) state.SetIterationTime(batch(n) * 1e-9);
}

// What every latency row declares; repetitions and run times are defaults of the
// command line (latency_main.cc), so they can be overridden there.
inline void defaults(benchmark::internal::Benchmark *b) {
  b->UseManualTime()->Unit(benchmark::kNanosecond);
}

inline void *empty_body(void *) { return nullptr; }

}  // namespace weft_bench

#endif
