/* M1_linexfer.c - the M1 model's cache-line transfer time: two pthreads pinned to CPUs 0
 * and 1 hand one cache line back and forth (A waits for the line to hold an even value
 * and increments it; B waits for odd and increments), so every increment needs the line
 * to move from the other core. A timestamps every 64th of its increments; the time per
 * increment of each 64-round chunk (128 transfers) is one sample, and the reported
 * transfer time is the median chunk: on a shared machine a chunk in which either
 * thread was preempted is an outlier, not the hardware. Also: min and max chunk, and
 * the plain mean (total time / increments) that preemption inflates.
 *
 * usage: weft_m1_linexfer [--n 200000] [--reps 5]      prints one JSON object. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static _Alignas(64) _Atomic long line;
static long n = 200000;

#define CHUNK 64
static double *stamp; /* A's time at every CHUNK-th increment */

static void *side(void *arg) {
  long parity = (long)arg;
  bench_pin_self(bench_cpu_nth((int)parity));
  for (long i = 0; i < n; i++) {
    while ((atomic_load_explicit(&line, memory_order_acquire) & 1) != parity) {
    }
    if (parity == 0 && i % CHUNK == 0) stamp[i / CHUNK] = bench_now_ns();
    atomic_fetch_add_explicit(&line, 1, memory_order_release); /* pairs with the loads */
  }
  return NULL;
}

int main(int argc, char **argv) {
  int reps = 5;
  const bench_opt_t opts[] = {
      BENCH_OPT_N(n, "increments per thread (200000)"),
      BENCH_OPT_REPS(reps),
  };
  bench_args(argc, argv, opts, 2, "cache-line transfer time between two CPUs; one JSON object on stdout");
  if (reps < 1 || reps > 50) bench_die(argv[0], "--reps must be 1..50");
  if (n < 2 * CHUNK) bench_die(argv[0], "--n must be at least 128");
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    printf("{\"error\": \"one CPU: no transfer to measure\"}\n");
    return 0;
  }
  long nchunks = n / CHUNK;
  stamp = calloc((size_t)nchunks + 1, sizeof *stamp);
  double *chunk = calloc((size_t)(nchunks * reps), sizeof *chunk);
  long nc = 0;
  double v[50];
  for (int r = 0; r < reps; r++) {
    atomic_store(&line, 0);
    pthread_t a, b;
    double t0 = bench_now_ns();
    pthread_create(&a, NULL, side, (void *)0L);
    pthread_create(&b, NULL, side, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    v[r] = (bench_now_ns() - t0) / (2.0 * (double)n);
    for (long c = 1; c < nchunks; c++) chunk[nc++] = (stamp[c] - stamp[c - 1]) / (2.0 * CHUNK);
  }
  bench_summary_t s = bench_summarize(v, reps), c = bench_summarize(chunk, (int)nc);
  bench_json_t j;
  bench_json_stream(&j, stdout);
  bench_json_obj(&j, NULL);
  bench_json_num(&j, "transfer_ns", c.median);
  bench_json_num(&j, "min_ns", c.min);
  bench_json_num(&j, "max_ns", c.max);
  bench_json_num(&j, "mean_ns", s.median);
  bench_json_int(&j, "chunks", nc);
  bench_json_int(&j, "increments", 2 * n);
  bench_json_int(&j, "reps", reps);
  return bench_json_finish(&j) == 0 ? 0 : 2;
}
