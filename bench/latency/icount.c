/* icount.c - the L2 and L3 loops of weft, alone, for instruction counting under
 * callgrind (bench/icount.sh runs it with N and 2N iterations and takes the
 * difference, which cancels start-up, warm-up and shutdown).
 *
 *   weft_icount l2 N   N x (weft_create + weft_join) of an empty thread, nvps=1
 *   weft_icount l3 N   N yields of the main thread against one yielding partner
 *
 * Only the loop is collected (CALLGRIND_TOGGLE_COLLECT, run with
 * --collect-atstart=no). It prints "ops=<count>": the operations in the loop (for l3,
 * the yields of both threads, i.e. the switches). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft.h"

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, weft_strerror(rc));
    exit(2);
  }
}

static void *empty_body(void *arg) { return arg; }

static void l2(long n) {
  for (long i = 0; i < n; i++) {
    weft_thread_t *t;
    check(weft_create(&t, NULL, empty_body, NULL), "weft_create");
    check(weft_join(t, NULL), "weft_join");
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

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "l2") && strcmp(argv[1], "l3"))) {
    fprintf(stderr, "usage: %s l2|l3 N\n", argv[0]);
    return 1;
  }
  long n = atol(argv[2]);
  int is_l2 = strcmp(argv[1], "l2") == 0;
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  check(weft_init(&cfg), "weft_init");

  long ops;
  if (is_l2) {
    l2(1000); /* warm the free lists */
    CALLGRIND_TOGGLE_COLLECT;
    l2(n);
    CALLGRIND_TOGGLE_COLLECT;
    ops = n;
  } else {
    weft_thread_t *t;
    check(weft_create(&t, NULL, partner, NULL), "weft_create");
    for (int i = 0; i < 1000; i++) weft_yield(); /* start the partner, warm up */
    long p0 = partner_yields;
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < n; i++) weft_yield();
    CALLGRIND_TOGGLE_COLLECT;
    ops = n + (partner_yields - p0);
    partner_stop = 1;
    check(weft_join(t, NULL), "weft_join");
  }
  check(weft_shutdown(), "weft_shutdown");
  printf("ops=%ld\n", ops);
  return 0;
}
