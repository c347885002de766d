// latency_main.cc - main() of weft_bench_latency: rows L1, L2, L3 and L8.
//
// weft runs for the whole process with one virtual processor (nvps=1): the benchmark's
// own thread is the main weft thread, so weft_create/weft_join/weft_yield work straight
// from a benchmark body, and no other VP can steal a thread the body creates.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench.h"
#include "latency.h"
#include "weft/weft.h"

int main(int argc, char **argv) {
  // Defaults, before the user's flags so that theirs win: 5 repetitions, aggregates
  // (mean, median, stddev, cv) only, and run times that keep the binary under a minute.
  std::vector<char *> args(argv, argv + argc);
  static char reps[] = "--benchmark_repetitions=5", aggr[] = "--benchmark_report_aggregates_only=true",
              min[] = "--benchmark_min_time=0.15", warm[] = "--benchmark_min_warmup_time=0.02";
  args.insert(args.begin() + 1, {reps, aggr, min, warm});
  argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  bench_machine_t m;
  bench_machine_read(&m);
  benchmark::AddCustomContext("cpu_model", m.model);
  benchmark::AddCustomContext("cores", std::to_string(m.cores));
  benchmark::AddCustomContext("kernel", m.kernel);
  benchmark::AddCustomContext("weft_nvps", "1");

  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  bench_check(weft_init(&cfg), "weft_init");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  bench_check(weft_shutdown(), "weft_shutdown");
  return 0;
}
