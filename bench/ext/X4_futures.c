/* X4_futures.c - X4: futures against semaphores on the same two patterns, so that a
 * future's set and wait are seen to cost what a semaphore's signal and wait do.
 *   chain     one chain of n threads (T1's shape): thread i waits for the completion
 *             object of thread i-1 (already set, on one VP: the fast path), creates
 *             thread i+1, detached, then sets (future) or signals (semaphore) its own
 *   forkjoin  T5's shape: the main thread creates n threads, detached, in batches of
 *             1000; each sets / signals its object; the main thread waits for each
 *             object of the batch before the next batch
 * One object per thread (a weft_future_t, or a weft_sem_t from 0), made before the
 * timed part.
 *
 * usage: weft_x4_futures [--n 200000] [--reps 5] [--out DIR]
 *        times every pattern with each object on one VP (median, min..max);
 *        with --out, also writes DIR/X4.json
 *        weft_x4_futures --mode chain_future|chain_sem|forkjoin_future|forkjoin_sem --n N
 *        one run on one VP, only it collected by callgrind (run with
 *        --collect-atstart=no); prints "ops=N" for bench/icount.sh */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

enum { BATCH = 1000 };

static int use_future;
static long nthreads;
static weft_future_t *futs;
static weft_sem_t *sems;
static weft_attr_t detached;

static void obj_done(long i) {
  if (use_future)
    bench_check(weft_future_set(&futs[i], NULL), "weft_future_set");
  else
    bench_check(weft_sem_signal(&sems[i]), "weft_sem_signal");
}

static void obj_wait(long i) {
  if (use_future)
    bench_check(weft_future_wait(&futs[i], NULL), "weft_future_wait");
  else
    bench_check(weft_sem_wait(&sems[i]), "weft_sem_wait");
}

static void *chain_body(void *arg) {
  long i = (long)(intptr_t)arg;
  if (i > 0) obj_wait(i - 1);
  if (i + 1 < nthreads)
    bench_check(weft_create(NULL, &detached, chain_body, (void *)(intptr_t)(i + 1)), "weft_create");
  obj_done(i);
  return NULL;
}

static void *fj_body(void *arg) {
  obj_done((long)(intptr_t)arg);
  return NULL;
}

static void prepare(long n) {
  nthreads = n;
  for (long i = 0; i < n; i++) {
    if (use_future)
      bench_check(weft_future_init(&futs[i]), "weft_future_init");
    else
      bench_check(weft_sem_init(&sems[i], 0), "weft_sem_init");
  }
}

/* one run of the pattern; returns after every thread has set / signalled */
static void run(int chain, long n) {
  if (chain) {
    bench_check(weft_create(NULL, &detached, chain_body, (void *)(intptr_t)0), "weft_create");
    obj_wait(n - 1);
    return;
  }
  for (long b = 0; b < n; b += BATCH) {
    long e = b + BATCH < n ? b + BATCH : n;
    for (long i = b; i < e; i++)
      bench_check(weft_create(NULL, &detached, fj_body, (void *)(intptr_t)i), "weft_create");
    for (long i = b; i < e; i++) obj_wait(i);
  }
}

static const char *const MODES[4] = {"chain_future", "chain_sem", "forkjoin_future",
                                     "forkjoin_sem"};

static void alloc_objs(long n) {
  futs = calloc((size_t)n, sizeof *futs);
  sems = calloc((size_t)n, sizeof *sems);
  if (!futs || !sems) {
    fprintf(stderr, "weft_x4_futures: out of memory for %ld objects\n", n);
    exit(2);
  }
}

int main(int argc, char **argv) {
  long n = 200000;
  int reps = 5;
  const char *out = NULL, *mode = NULL;
  const bench_opt_t opts[] = {
      BENCH_OPT_N(n, "threads per run (200000)"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_OUT(out, "X4.json"),
      {"--mode", BENCH_STR, &mode, NULL, 0,
       "one collected run for callgrind: chain_future|chain_sem|forkjoin_future|forkjoin_sem"},
  };
  bench_args(argc, argv, opts, 4, "X4: futures against semaphores (chain, fork-join)");
  if (reps < 1 || reps > 50) bench_die(argv[0], "--reps must be 1..50");
  if (n < 1) bench_die(argv[0], "--n must be at least 1");
  alloc_objs(n);
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  bench_check(weft_init(&cfg), "weft_init");
  weft_attr_init(&detached);
  detached.detached = 1;
  if (mode) {
    int m = -1;
    for (int k = 0; k < 4; k++)
      if (strcmp(mode, MODES[k]) == 0) m = k;
    if (m < 0) bench_die(argv[0], "--mode: chain_future|chain_sem|forkjoin_future|forkjoin_sem");
    use_future = m == 0 || m == 2;
    prepare(n);
    run(m < 2, n); /* warm-up: stacks and control blocks are cached */
    prepare(n);
    CALLGRIND_TOGGLE_COLLECT;
    run(m < 2, n);
    CALLGRIND_TOGGLE_COLLECT;
    printf("ops=%ld\n", n);
    bench_check(weft_shutdown(), "weft_shutdown");
    return 0;
  }
  bench_machine_t m;
  bench_machine_read(&m);
  printf("X4: %ld threads per run, 1 VP; machine %s, %d cores; 1 warm-up + %d runs\n", n, m.model,
         m.cores, reps);
  printf("%-16s %10s  %-21s %9s\n", "pattern", "median s", "[min .. max] s", "ns/thread");
  bench_json_t json;
  if (out) {
    if (bench_json_start(&json, out, "X4.json", &m) != 0) return 2;
    bench_json_obj(&json, "config");
    bench_json_int(&json, "threads", n);
    bench_json_int(&json, "batch", BATCH);
    bench_json_int(&json, "reps", reps);
    bench_json_int(&json, "warmup_runs", 1);
    bench_json_end(&json);
    bench_json_arr(&json, "results");
  }
  for (int k = 0; k < 4; k++) {
    use_future = k == 0 || k == 2;
    double s[50];
    for (int r = -1; r < reps; r++) {
      prepare(n);
      double t0 = bench_now_ns();
      run(k < 2, n);
      if (r >= 0) s[r] = (bench_now_ns() - t0) * 1e-9;
    }
    bench_summary_t sum = bench_summarize(s, reps);
    printf("%-16s %10.4f  [%8.4f .. %8.4f]  %9.1f\n", MODES[k], sum.median, sum.min, sum.max,
           sum.median * 1e9 / (double)n);
    if (out) {
      bench_json_record(&json, "lib", "weft", 1, 0);
      bench_json_str(&json, "test", MODES[k]);
      bench_json_str(&json, "object", use_future ? "future" : "semaphore");
      bench_json_str(&json, "pattern", k < 2 ? "chain" : "forkjoin");
      bench_json_int(&json, "threads", n);
      bench_json_summary(&json, "_s", sum, 1);
      bench_json_num(&json, "ns_per_thread", sum.median * 1e9 / (double)n);
      bench_json_end(&json);
    }
  }
  bench_check(weft_shutdown(), "weft_shutdown");
  if (out && bench_json_finish(&json) != 0) return 2;
  return 0;
}
