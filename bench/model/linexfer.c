/* linexfer.c - the M1 model's cache-line transfer time: two pthreads pinned to CPUs 0
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

#include "bench_common.h"

static _Alignas(64) _Atomic long line;
static long n = 200000;

static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

#define CHUNK 64
static double *stamp; /* A's time at every CHUNK-th increment */

static void *side(void *arg) {
  long parity = (long)arg;
  pin((int)parity);
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
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
  }
  if (reps < 1 || reps > 50 || n < 1) return 1;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    printf("{\"error\": \"one CPU: no transfer to measure\"}\n");
    return 0;
  }
  long nchunks = n / CHUNK;
  if (nchunks < 2) return 1;
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
  printf("{\"transfer_ns\": %.4g, \"min_ns\": %.4g, \"max_ns\": %.4g, \"mean_ns\": %.4g, "
         "\"chunks\": %ld, \"increments\": %ld, \"reps\": %d}\n",
         c.median, c.min, c.max, s.median, nc, 2 * n, reps);
  return 0;
}
