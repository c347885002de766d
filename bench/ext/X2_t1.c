/* X2_t1.c - X2's T1 row: chains of null threads (as bench/sweep/sweep.c T1: each of P
 * workers starts one chain in which every thread creates its successor, detached, and
 * finishes) with every thread in a bundle scheduled by
 *   default       the root bundle (the built-in scheduler, inlined): T_sweep.c's T1
 *   example_fifo  examples/custom_sched.c (compiled in)
 *   fifo_lazy     weft/schedlib.h's FIFO with lazy stacks
 * Timed: from creating the P chain heads until the last thread of the last chain has
 * finished and woken the main thread. One warm-up, then --reps runs; median, min..max.
 *
 * usage: weft_x2_t1 [--n 1000000] [--reps 5] [--procs 1,2] [--out DIR]
 * With --out, also writes DIR/X2.json. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

extern const weft_sched_ops_t custom_fifo_ops; /* examples/custom_sched.c */

/* The main thread blocks; whichever of its release function and the last chain comes
 * second unblocks it (as in T_sweep.c). */
enum { W_IDLE, W_WAITING, W_DONE };
static _Atomic int waiter_state;
static weft_thread_t *waiter;
static _Atomic long chains_left;
static weft_attr_t detached; /* .bundle: the bundle under test */

static void waiter_release(void *arg) {
  (void)arg;
  if (atomic_exchange(&waiter_state, W_WAITING) == W_DONE) weft_thread_unblock(waiter);
}

static void *cycle(void *arg) {
  long left = (long)(intptr_t)arg;
  if (left > 1)
    bench_check(weft_create(NULL, &detached, cycle, (void *)(intptr_t)(left - 1)), "weft_create");
  else if (atomic_fetch_sub(&chains_left, 1) == 1 &&
           atomic_exchange(&waiter_state, W_DONE) == W_WAITING)
    weft_thread_unblock(waiter);
  return NULL;
}

static double t1(int p, long n) {
  atomic_store(&waiter_state, W_IDLE);
  atomic_store(&chains_left, p);
  waiter = weft_self();
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) {
    weft_attr_t a = detached;
    a.vproc = WEFT_VPROC(i);
    bench_check(weft_create(NULL, &a, cycle, (void *)(intptr_t)(n / p + (i < n % p))), "weft_create");
  }
  weft_thread_block(waiter_release, NULL);
  return bench_now_ns() - t0;
}

int main(int argc, char **argv) {
  long n = 1000000;
  int reps = 5, procs[8] = {1, 2}, nprocs = 2;
  const char *out = NULL;
  const bench_opt_t opts[] = {
      BENCH_OPT_N(n, "null threads per run (1000000)"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_PROCS(procs, nprocs, 8),
      BENCH_OPT_OUT(out, "X2.json"),
  };
  bench_args(argc, argv, opts, 4, "X2: T1 under user-defined schedulers");
  if (reps < 1 || reps > 50) bench_die(argv[0], "--reps must be 1..50");
  if (n < 1) bench_die(argv[0], "--n must be at least 1");
  bench_machine_t m;
  bench_machine_read(&m);
  printf("X2 T1: %ld null threads in chains; machine %s, %d cores; 1 warm-up + %d runs\n", n,
         m.model, m.cores, reps);
  printf("%-3s %-14s %10s  %-21s %9s  %s\n", "P", "scheduler", "median s", "[min .. max] s",
         "ns/thread", "vs default");
  bench_json_t json;
  if (out) {
    if (bench_json_start(&json, out, "X2.json", &m) != 0) return 2;
    bench_json_obj(&json, "config");
    bench_json_int(&json, "threads", n);
    bench_json_int(&json, "reps", reps);
    bench_json_int(&json, "warmup_runs", 1);
    bench_json_end(&json);
    bench_json_arr(&json, "results");
  }
  for (int k = 0; k < nprocs; k++) {
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = procs[k];
    bench_check(weft_init(&cfg), "weft_init");
    double base = 0;
    for (int which = 0; which < 3; which++) {
      weft_bundle_t *b = NULL;
      if (which == 1) bench_check(weft_bundle_create(&b, NULL, &custom_fifo_ops, NULL), "bundle");
      if (which == 2) bench_check(weft_schedlib_bundle_create(&b, NULL, WEFT_SCHED_FIFO), "bundle");
      weft_attr_init(&detached);
      detached.detached = 1;
      detached.bundle = b;
      double s[50];
      for (int r = -1; r < reps; r++) {
        double ns = t1(procs[k], n);
        if (r >= 0) s[r] = ns * 1e-9;
      }
      bench_summary_t sum = bench_summarize(s, reps);
      if (which == 0) base = sum.median;
      printf("%-3d %-14s %10.4f  [%8.4f .. %8.4f]  %9.1f  %.2fx\n", procs[k],
             which == 0 ? "default" : which == 1 ? "example_fifo" : "fifo_lazy", sum.median,
             sum.min, sum.max, sum.median * 1e9 / (double)n, sum.median / base);
      if (out) {
        bench_json_record(&json, "scheduler",
                          which == 0 ? "default" : which == 1 ? "example_fifo" : "fifo_lazy",
                          procs[k], procs[k] > m.cores);
        bench_json_str(&json, "test", "T1");
        bench_json_int(&json, "threads", n);
        bench_json_summary(&json, "_s", sum, 1);
        bench_json_num(&json, "ratio_to_default", sum.median / base);
        bench_json_end(&json);
      }
      /* the last thread wakes us just before it finishes: wait until it has */
      int rc;
      while (b && (rc = weft_schedlib_bundle_destroy(b)) == WEFT_EBUSY) weft_sleep_ns(10000);
      if (b) bench_check(rc, "bundle destroy");
    }
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  if (out && bench_json_finish(&json) != 0) return 2;
  return 0;
}
