/* mem_per_thread.c - memory per created-but-unstarted weft thread.
 *
 * Measured: VmRSS (from /proc/self/status) before and after creating N = 1,000,000
 * joinable threads on one VP (nvps=1) that the creator, never yielding, leaves
 * unstarted; (after - before) / N. The handle array is allocated and touched before
 * the first reading, so it is not counted. weft binds a stack only when a thread first
 * runs, so this is the control block (plus allocator overhead). The threads are then
 * joined (they run an empty body) and weft is shut down.
 *
 * usage: weft_mem_per_thread [--n N] [--out DIR]   (writes DIR/memory.json if --out) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

static void *empty_body(void *arg) { return arg; }

int main(int argc, char **argv) {
  long n = 1000000;
  const char *out = NULL;
  const bench_opt_t opts[] = {
      BENCH_OPT_N(n, "threads (1000000)"),
      BENCH_OPT_OUT(out, "memory.json"),
  };
  bench_args(argc, argv, opts, 2, "memory per created-but-unstarted weft thread");
  if (n < 1) bench_die(argv[0], "--n must be at least 1");
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  bench_check(weft_init(&cfg), "weft_init");

  weft_thread_t **t = malloc((size_t)n * sizeof *t);
  if (!t) return 2;
  memset(t, 0, (size_t)n * sizeof *t);
  long before = bench_rss_kib();
  for (long i = 0; i < n; i++) bench_check(weft_create(&t[i], NULL, empty_body, NULL), "weft_create");
  long after = bench_rss_kib();
  for (long i = 0; i < n; i++) bench_check(weft_join(t[i], NULL), "weft_join");
  long joined = bench_rss_kib();
  bench_check(weft_shutdown(), "weft_shutdown");
  free(t);

  double per = (double)(after - before) * 1024.0 / (double)n;
  bench_machine_t m;
  bench_machine_read(&m);
  printf("machine: %s, %d cores, Linux %s\n", m.model, m.cores, m.kernel);
  printf("weft: %ld unstarted threads: VmRSS %ld -> %ld KiB: %.1f bytes per thread"
         " (after joining them all: %ld KiB)\n", n, before, after, per, joined);
  bench_json_t j;
  if (out) {
    if (bench_json_start(&j, out, "memory.json", &m) != 0) return 2;
    bench_json_str(&j, "lib", "weft");
    bench_json_int(&j, "threads", n);
    bench_json_int(&j, "rss_before_kib", before);
    bench_json_int(&j, "rss_after_kib", after);
    bench_json_int(&j, "rss_after_join_kib", joined);
    bench_json_num(&j, "bytes_per_thread", per);
    if (bench_json_finish(&j) != 0) return 2;
  }
  return 0;
}
