// X3 - the C++ layer (weft/weft.hpp) against the C interface on L1-L3 (and L4, the
// lockable most C++ code goes through). Presto §3.4: Presto's layers cost it; the
// C++ layer should cost nothing or a few instructions. The C rows (L1_create/weft,
// L2_null_thread/weft, L3_switch/weft, L4_mutex/weft) run in the same binary and run;
// instruction counts: bench/icount.sh (weft_icount vs weft_icount_cpp).
//
//   X3_L1_create/weft_cpp          weft::thread t(fn): a function pointer, no allocation
//   X3_L2_null_thread/weft_cpp     weft::thread(fn).join()
//   X3_L2_null_thread/weft_cpp_heap  the same with a lambda capturing two words: its
//                                  closure does not fit the argument word and is
//                                  allocated (std::thread allocates for every thread)
//   X3_L3_switch/weft_cpp          weft::this_thread::yield() against a weft::thread
//   X3_L4_mutex/weft_cpp           std::lock_guard<weft::mutex>, uncontested
#include <mutex>
#include <vector>

#include "latency.h"
#include "weft/weft.hpp"

namespace {

constexpr int kBatch = 1000;

void empty_fn() {}

void X3_L1(benchmark::State &state) {
  std::vector<weft::thread> t(kBatch);
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) t[i] = weft::thread(empty_fn);
    double ns = bench_now_ns() - t0;
    for (int i = 0; i < n; i++) t[i].join();
    return ns;
  });
}
BENCHMARK(X3_L1)->Name("X3_L1_create/weft_cpp")->Apply(weft_bench::defaults);

void X3_L2(benchmark::State &state) {
  weft_bench::run_batches(state, kBatch, [](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++) weft::thread(empty_fn).join();
    return bench_now_ns() - t0;
  });
}
BENCHMARK(X3_L2)->Name("X3_L2_null_thread/weft_cpp")->Apply(weft_bench::defaults);

void X3_L2_heap(benchmark::State &state) {
  long a = 1, b = 2;
  weft_bench::run_batches(state, kBatch, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
      weft::thread([a, b] { benchmark::DoNotOptimize(a + b); }).join();
    return bench_now_ns() - t0;
  });
}
BENCHMARK(X3_L2_heap)->Name("X3_L2_null_thread/weft_cpp_heap")->Apply(weft_bench::defaults);

long partner_yields;
bool partner_stop;

void X3_L3(benchmark::State &state) {
  partner_stop = false;
  weft::thread partner([] {
    while (!partner_stop) {
      weft::this_thread::yield();
      partner_yields++;
    }
  });
  weft::this_thread::yield();  // let the partner start
  double mine = 0, theirs = 0;
  weft_bench::run_batches(state, 2000, [&](benchmark::IterationCount n) {
    long p0 = partner_yields;
    double t0 = bench_now_ns();
    for (int i = 0; i < n / 2; i++) weft::this_thread::yield();
    double ns = bench_now_ns() - t0;
    mine += static_cast<double>(n / 2);
    theirs += static_cast<double>(partner_yields - p0);
    return ns * static_cast<double>(n) / static_cast<double>(n / 2 + (partner_yields - p0));
  });
  partner_stop = true;
  partner.join();
  state.counters["partner_per_main_yield"] = theirs / mine;
}
BENCHMARK(X3_L3)->Name("X3_L3_switch/weft_cpp")->Apply(weft_bench::defaults);

// As L4_mutex/weft (a local mutex, lock + unlock per operation), through lock_guard.
void X3_L4(benchmark::State &state) {
  weft::mutex m;
  weft_bench::run_batches(state, 10000, [&](benchmark::IterationCount n) {
    double t0 = bench_now_ns();
    for (benchmark::IterationCount i = 0; i < n; i++) std::lock_guard<weft::mutex> g(m);
    return bench_now_ns() - t0;
  });
}
BENCHMARK(X3_L4)->Name("X3_L4_mutex/weft_cpp")->Apply(weft_bench::defaults);

}  // namespace
