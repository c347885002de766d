/* X2_icount.c - X2's rows in instructions: the L2, L3 and T1 loops run by threads of a
 * bundle, for callgrind (bench/icount.sh's method: N and 2N, difference / N).
 *
 *   weft_x2_icount --mode l2|l3|t1 --sched default|example|fifo --n N [--vps P]
 *
 * default: the root bundle with an attribute (the bundle field NULL), so that the
 * attribute path is in both columns; example: examples/custom_sched.c's scheduler;
 * fifo: weft/schedlib.h's FIFO with lazy stacks. One VP unless --vps (for timing at P=2:
 * ns_per_op; the counts are taken at one VP). Only the loop is collected
 * (run under callgrind with --collect-atstart=no); prints "ops=<count>" and
 * "ns_per_op=<t>" (meaningless under callgrind). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

extern const weft_sched_ops_t custom_fifo_ops; /* examples/custom_sched.c */

static weft_attr_t attr; /* .bundle: the bundle under test */
static long n;
static long ops;
static uint64_t t0, t1;

static void *empty_body(void *arg) { return arg; }

static void l2(long k) {
  for (long i = 0; i < k; i++) {
    weft_thread_t *t;
    bench_check(weft_create(&t, &attr, empty_body, NULL), "weft_create");
    bench_check(weft_join(t, NULL), "weft_join");
  }
}

static long partner_yields;
static int partner_stop;
static void *partner(void *arg) {
  while (!partner_stop) {
    weft_yield();
    partner_yields++;
  }
  return arg;
}

/* T1: a chain of detached threads, each creating its successor; the last one
 * posts the semaphore. */
static weft_sem_t chain_done;
static weft_attr_t detached;
static void *cycle(void *arg) {
  long left = (long)(intptr_t)arg;
  if (left > 1)
    bench_check(weft_create(NULL, &detached, cycle, (void *)(intptr_t)(left - 1)), "weft_create");
  else
    weft_sem_signal(&chain_done);
  return NULL;
}
static void t1_chain(long k) {
  bench_check(weft_create(NULL, &detached, cycle, (void *)(intptr_t)k), "weft_create");
  weft_sem_wait(&chain_done);
}

static int mode;
static void *driver(void *arg) {
  (void)arg;
  if (mode == 0) {
    l2(1000);
    t0 = weft_time_now();
    CALLGRIND_TOGGLE_COLLECT;
    l2(n);
    CALLGRIND_TOGGLE_COLLECT;
    t1 = weft_time_now();
    ops = n;
  } else if (mode == 1) {
    weft_thread_t *t;
    bench_check(weft_create(&t, &attr, partner, NULL), "weft_create");
    for (int i = 0; i < 1000; i++) weft_yield(); /* start the partner, warm up */
    while (!partner_yields) weft_yield();       /* a scheduler may start it late */
    long p0 = partner_yields;
    t0 = weft_time_now();
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < n; i++) weft_yield();
    CALLGRIND_TOGGLE_COLLECT;
    t1 = weft_time_now();
    ops = n + (partner_yields - p0);
    partner_stop = 1;
    bench_check(weft_join(t, NULL), "weft_join");
  } else {
    t1_chain(1000);
    t0 = weft_time_now();
    CALLGRIND_TOGGLE_COLLECT;
    t1_chain(n);
    CALLGRIND_TOGGLE_COLLECT;
    t1 = weft_time_now();
    ops = n;
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode_name = NULL, *sched = "default";
  long vps = 1;
  const bench_opt_t opts[] = {
      {"--mode", BENCH_STR, &mode_name, NULL, 0, "l2|l3|t1"},
      {"--sched", BENCH_STR, &sched, NULL, 0, "default|example|fifo"},
      {"--n", BENCH_LONG, &n, NULL, 0, "operations"},
      {"--vps", BENCH_LONG, &vps, NULL, 0, "virtual processors (1)"},
  };
  bench_args(argc, argv, opts, 4, "X2's loops under a bundle's scheduler, for callgrind");
  mode = !mode_name ? -1 : !strcmp(mode_name, "l2") ? 0 : !strcmp(mode_name, "l3") ? 1
                         : !strcmp(mode_name, "t1") ? 2 : -1;
  int which = !strcmp(sched, "default") ? 0 : !strcmp(sched, "example") ? 1
              : !strcmp(sched, "fifo") ? 2 : -1;
  if (mode < 0 || which < 0 || n < 1 || vps < 1 || vps > 64) bench_die(argv[0], "--mode l2|l3|t1, --sched, --n >= 1");
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = (int)vps;
  bench_check(weft_init(&cfg), "weft_init");
  weft_bundle_t *b = NULL;
  if (which == 1) bench_check(weft_bundle_create(&b, NULL, &custom_fifo_ops, NULL), "bundle");
  if (which == 2) bench_check(weft_schedlib_bundle_create(&b, NULL, WEFT_SCHED_FIFO), "bundle");
  weft_attr_init(&attr);
  attr.bundle = b;
  detached = attr;
  detached.detached = 1;
  weft_sem_init(&chain_done, 0);
  weft_thread_t *d;
  bench_check(weft_create(&d, &attr, driver, NULL), "weft_create");
  bench_check(weft_join(d, NULL), "weft_join");
  int rc;
  while (b && (rc = weft_schedlib_bundle_destroy(b)) == WEFT_EBUSY) weft_sleep_ns(10000);
  if (b) bench_check(rc, "bundle destroy");
  bench_check(weft_shutdown(), "weft_shutdown");
  if (t1 > t0) printf("ns_per_op=%.2f\n", (double)(t1 - t0) / (double)ops);
  printf("ops=%ld\n", ops);
  return 0;
}
