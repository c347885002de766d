/* X2_t1.c - X2 at P virtual processors: T1, L2 and L3 with every thread in a bundle
 * scheduled by
 *   default       the root bundle (the built-in scheduler, inlined)
 *   example_fifo  examples/custom_sched.c (compiled in)
 *   fifo_lazy     weft/schedlib.h's FIFO with lazy stacks
 * in one process per P (weft_init with nvps = P), so that the built-in's figure and the
 * user schedulers' come from the same runtime:
 *   T1  chains of null threads (as bench/sweep/T_sweep.c's T1: each of P workers starts
 *       one chain in which every thread creates its successor, detached, and finishes).
 *       Timed from creating the P chain heads until the last thread of the last chain
 *       has finished and woken the main thread; per thread.
 *   L2  a thread of the bundle creates an empty thread of the same bundle and joins it,
 *       n times; per create + join. At P > 1 the other VPs are idle and may take
 *       the new threads (as the scheduler decides).
 *   L3  on each VP a thread of the root bundle creates two threads of the bundle,
 *       which each yield n times (a user scheduler places them: the example's puts
 *       them on their creator's VP); timed from the start until the last has been
 *       joined; per switch of one VP (elapsed / (2 x yields each)).
 * One warm-up, then --reps runs; median, min..max.
 *
 * usage: weft_x2_t1 [--n 1000000] [--reps 5] [--procs 1,2] [--tests T1,L2,L3] [--out DIR]
 * With --out, also writes DIR/X2.json (one record per test, P and scheduler). */
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

/* L2: n create + join pairs of an empty thread, by a thread of the bundle (untimed
 * set-up: that thread's own creation). */
static void *empty(void *arg) { return arg; }
struct l2_arg { long n; double ns; };
static void *l2_body(void *p) {
  struct l2_arg *a = p;
  weft_attr_t at = detached;
  at.detached = 0;
  double t0 = bench_now_ns();
  for (long i = 0; i < a->n; i++) {
    weft_thread_t *t;
    bench_check(weft_create(&t, &at, empty, NULL), "weft_create");
    bench_check(weft_join(t, NULL), "weft_join");
  }
  a->ns = bench_now_ns() - t0;
  return NULL;
}
static double l2(long n) {
  struct l2_arg a = {n, 0};
  weft_attr_t at = detached;
  at.detached = 0;
  at.vproc = WEFT_VPROC(0);
  weft_thread_t *t;
  bench_check(weft_create(&t, &at, l2_body, &a), "weft_create");
  bench_check(weft_join(t, NULL), "weft_join");
  return a.ns;
}

/* L3: on each of the p VPs, a spawner of the root bundle (placed there: attr.vproc)
 * creates two threads of the bundle under test, which each yield n times, and joins
 * them. A user scheduler places a new thread as it decides (examples/custom_sched.c:
 * on the creator's VP), so the pairs start on their spawners' VPs whichever scheduler
 * runs them. */
static void *l3_body(void *arg) {
  long n = (long)(intptr_t)arg;
  for (long i = 0; i < n; i++) weft_yield();
  return NULL;
}
static void *l3_spawner(void *arg) {
  weft_attr_t at = detached;
  at.detached = 0;
  weft_thread_t *t[2];
  for (int i = 0; i < 2; i++) bench_check(weft_create(&t[i], &at, l3_body, arg), "weft_create");
  for (int i = 0; i < 2; i++) bench_check(weft_join(t[i], NULL), "weft_join");
  return NULL;
}
static double l3(int p, long n) {
  weft_thread_t *t[8];
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) {
    weft_attr_t at;
    weft_attr_init(&at);
    at.vproc = WEFT_VPROC(i);
    bench_check(weft_create(&t[i], &at, l3_spawner, (void *)(intptr_t)n), "weft_create");
  }
  for (int i = 0; i < p; i++) bench_check(weft_join(t[i], NULL), "weft_join");
  return bench_now_ns() - t0;
}

int main(int argc, char **argv) {
  long n = 1000000;
  const char *tests = "T1,L2,L3";
  int reps = 5, procs[8] = {1, 2}, nprocs = 2;
  const char *out = NULL;
  const bench_opt_t opts[] = {
      BENCH_OPT_N(n, "null threads per run (1000000)"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_PROCS(procs, nprocs, 8),
      BENCH_OPT_OUT(out, "X2.json"),
      {"--tests", BENCH_STR, &tests, NULL, 0, "T1,L2,L3"},
  };
  bench_args(argc, argv, opts, 5, "X2: T1, L2 and L3 under user-defined schedulers, at P VPs");
  if (reps < 1 || reps > 50) bench_die(argv[0], "--reps must be 1..50");
  if (n < 10) bench_die(argv[0], "--n must be at least 10");
  for (int k = 0; k < nprocs; k++)
    if (procs[k] < 1 || procs[k] > 8) bench_die(argv[0], "--procs: 1..8");
  bench_machine_t m;
  bench_machine_read(&m);
  printf("X2: T1 %ld null threads in chains, L2 %ld create+join, L3 %ld yields per thread; "
         "machine %s, %d cores; 1 warm-up + %d runs\n", n, n, n, m.model, m.cores, reps);
  printf("%-4s %-3s %-14s %10s  %-21s %9s  %s\n", "test", "P", "scheduler", "median s",
         "[min .. max] s", "ns/op", "vs default");
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
    static const char *const all[] = {"T1", "L2", "L3"};
    for (int ti = 0; ti < 3; ti++) {
    const char *test = all[ti];
    if (!bench_list_has(tests, test)) continue;
    /* operations per run: T1 threads, L2 pairs, L3 switches of one VP */
    long ops = ti == 2 ? 2 * n : n;
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
        double ns = ti == 0 ? t1(procs[k], n) : ti == 1 ? l2(n) : l3(procs[k], n);
        if (r >= 0) s[r] = ns * 1e-9;
      }
      bench_summary_t sum = bench_summarize(s, reps);
      if (which == 0) base = sum.median;
      printf("%-4s %-3d %-14s %10.4f  [%8.4f .. %8.4f]  %9.1f  %.2fx\n", test, procs[k],
             which == 0 ? "default" : which == 1 ? "example_fifo" : "fifo_lazy", sum.median,
             sum.min, sum.max, sum.median * 1e9 / (double)ops, sum.median / base);
      if (out) {
        bench_json_record(&json, "scheduler",
                          which == 0 ? "default" : which == 1 ? "example_fifo" : "fifo_lazy",
                          procs[k], procs[k] > m.cores);
        bench_json_str(&json, "test", test);
        bench_json_int(&json, "threads", ops); /* operations: T1 threads, L2 pairs, L3 switches */
        bench_json_summary(&json, "_s", sum, 1);
        bench_json_num(&json, "ratio_to_default", sum.median / base);
        bench_json_end(&json);
      }
      /* the last thread wakes us just before it finishes: wait until it has */
      int rc;
      while (b && (rc = weft_schedlib_bundle_destroy(b)) == WEFT_EBUSY) weft_sleep_ns(10000);
      if (b) bench_check(rc, "bundle destroy");
    }
    }
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  if (out && bench_json_finish(&json) != 0) return 2;
  return 0;
}
