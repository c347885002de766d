/* L_icount.cc - the L1-L7 loops of weft, alone, for instruction counting under
 * callgrind (bench/icount.sh runs it with N and 2N iterations and takes the
 * difference, which cancels start-up, warm-up and shutdown).
 *
 *   weft_icount --mode MODE --n N [--verify | --hooked]   (MODE N below)
 *
 *   weft_icount l1 N   N x weft_create of an empty thread that has not run (batches of
 *                      500; only the creations are collected, the joins are not)
 *   weft_icount l2 N   N x (weft_create + weft_join) of an empty thread, nvps=1
 *   weft_icount l3 N   N yields of the main thread against one yielding partner
 *   weft_icount l4m N  N x (weft_mutex_lock + weft_mutex_unlock), uncontested
 *   weft_icount l4s N  N x (weft_sem_signal + weft_sem_wait), count 0 -> 1 -> 0
 *   weft_icount l5m N  N x (weft_mutex_trylock + weft_mutex_unlock)
 *   weft_icount l5s N  N x (weft_sem_trywait + weft_sem_signal)
 *   weft_icount l6m N  N rounds of mutex ping-pong (three mutexes hand over hand)
 *                      against a partner thread (the patterns of pingpong.h)
 *   weft_icount l6s N  N rounds of semaphore ping-pong
 *   weft_icount l7 N   N rounds of condition-variable ping-pong (C-Threads PingPong)
 * (ping-pong: ops = rounds, a round = one pass of each thread; nvps=1.)
 * For l2 and l3 it also prints "ns_per_op=<t>", the loop's wall time per operation
 * (run natively for that; under callgrind it is meaningless).
 * --hooked installs one counting callback on every event
 * (weft/hook.h) before the loop: X1's third column. It prints "events=<count>".
 * --verify (debug run, nothing is collected) checks after every round
 * that the partner made exactly one pass per round of the main thread, and for l6m
 * that each round blocked both threads once (weft_sync_stats); it prints the result.
 *
 * Only the loop is collected (CALLGRIND_TOGGLE_COLLECT, run with
 * --collect-atstart=no). It prints "ops=<count>": the operations in the loop (for l3,
 * the yields of both threads, i.e. the switches). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pingpong.h"
#include "weft/hook.h"
#include "weft/sync.h"
#include "weft/weft.h"

/* X1: one counting callback on every event (runs on the one VP: a plain counter) */
static unsigned long hook_events;
static void count_event(weft_hook_event_t ev, weft_thread_t *t, int vp, void *obj, void *arg) {
  (void)ev; (void)t; (void)vp; (void)obj; (void)arg;
  hook_events++;
}

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

static void *empty_body(void *arg) { return arg; }

/* ---- L4/L5 ---- */
static weft_mutex_t mx = WEFT_MUTEX_INIT;
static weft_sem_t sm = WEFT_SEM_INIT(0);
static long failed;

static void l4m(long n) {
  for (long i = 0; i < n; i++) {
    weft_mutex_lock(&mx);
    weft_mutex_unlock(&mx);
  }
}
static void l4s(long n) {
  for (long i = 0; i < n; i++) {
    weft_sem_signal(&sm);
    weft_sem_wait(&sm);
  }
}
static void l5m(long n) {
  for (long i = 0; i < n; i++) {
    failed += weft_mutex_trylock(&mx) != 0;
    weft_mutex_unlock(&mx);
  }
}
static void l5s(long n) { /* the count is 1 between iterations */
  for (long i = 0; i < n; i++) {
    failed += weft_sem_trywait(&sm) != 0;
    weft_sem_signal(&sm);
  }
}

/* ---- L6/L7: the patterns of pingpong.h, weft's ops, the partner a weft thread ---- */
using namespace weft_bench;

/* n rounds collected (or, with verify, checked round by round: nothing collected). */
template <class P>
static void pingpong(const char *name, long n, int verify) {
  WeftSpawn spawn;
  pingpong_rounds<P>(spawn, verify ? 0 : n, [&](P &p, bool start) {
    if (!verify) {
      CALLGRIND_TOGGLE_COLLECT;
      return;
    }
    if (!start) return;
    long b0 = p.b_steps, bad = 0;
    weft_sync_stats_t st0, st1;
    weft_sync_stats(&st0);
    for (long i = 1; i <= n; i++) {
      p.step();
      bad += p.b_steps - b0 != i;
    }
    weft_sync_stats(&st1);
    long passes = p.b_steps - b0;
    uint64_t blocks = st1.blocked - st0.blocked;
    printf("verify %s: %ld rounds, partner passes %ld, rounds out of step %ld, "
           "mutex blocks per round %.3f, mutex misses per round %.3f\n",
           name, n, passes, bad, (double)blocks / (double)n,
           (double)(st1.mutex_missed - st0.mutex_missed) / (double)n);
    if (bad || passes != n || (strcmp(name, "l6m") == 0 && blocks != 2 * (uint64_t)n)) {
      printf("verify FAILED\n");
      exit(3);
    }
  });
}

static void l2(long n) {
  for (long i = 0; i < n; i++) {
    weft_thread_t *t;
    bench_check(weft_create(&t, NULL, empty_body, NULL), "weft_create");
    bench_check(weft_join(t, NULL), "weft_join");
  }
}

/* L1: creations only, in batches; the joins run outside the collected part. */
static void l1(long n, int collect) {
  enum { B = 500 };
  static weft_thread_t *t[B];
  for (long done = 0; done < n; done += B) {
    long k = n - done < B ? n - done : (long)B;
    if (collect) CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < k; i++) bench_check(weft_create(&t[i], NULL, empty_body, NULL), "weft_create");
    if (collect) CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < k; i++) bench_check(weft_join(t[i], NULL), "weft_join");
  }
}

static long partner_yields;
static int partner_stop;

/* WEFT_ICOUNT_SWITCH_ALL=1: the main thread (every mode) and the l3 partner run in
 * the all-registers switch mode
 * (weft/thread.h), to count what that mode costs. */
static int switch_all(void) {
  const char *e = getenv("WEFT_ICOUNT_SWITCH_ALL");
  return e && strcmp(e, "1") == 0;
}

static void *partner(void *arg) {
  if (switch_all()) bench_check(weft_switch_mode_set(WEFT_SWITCH_ALL), "weft_switch_mode_set");
  while (!partner_stop) {
    weft_yield();
    partner_yields++;
  }
  return arg;
}

static void simple(void (*loop)(long), long n) {
  loop(1000); /* warm up */
  CALLGRIND_TOGGLE_COLLECT;
  loop(n);
  CALLGRIND_TOGGLE_COLLECT;
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"l2", "l3", "l4m", "l4s", "l5m", "l5s", "l6m", "l6s", "l7", "l1"};
  const char *mode_name = NULL;
  long n = 0;
  int verify = 0, hooked = 0;
  const bench_opt_t opts[] = {
      {"--mode", BENCH_STR, &mode_name, NULL, 0, "l1|l2|l3|l4m|l4s|l5m|l5s|l6m|l6s|l7"},
      {"--n", BENCH_LONG, &n, NULL, 0, "operations (ping-pong: rounds)"},
      {"--verify", BENCH_FLAG, &verify, NULL, 0, "l6m|l6s|l7: check every round, count nothing"},
      {"--hooked", BENCH_FLAG, &hooked, NULL, 0, "one counting callback on every event (X1)"},
  };
  bench_args(argc, argv, opts, 4, "the L1-L7 loops of weft for callgrind (bench/icount.sh)");
  int mode = -1;
  for (int i = 0; mode_name && i < (int)(sizeof modes / sizeof *modes); i++)
    if (strcmp(mode_name, modes[i]) == 0) mode = i;
  if (mode < 0 || n < 1 || (verify && hooked) || (verify && (mode < 6 || mode > 8)))
    bench_die(argv[0], "--mode (one of the list) and --n >= 1 are needed; --verify only for l6m|l6s|l7, "
              "not with --hooked");
  int is_l2 = mode == 0;
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  bench_check(weft_init(&cfg), "weft_init");
  for (int e = 0; hooked && e < WEFT_HOOK_NEVENTS; e++)
    bench_check(weft_hook_push((weft_hook_event_t)e, count_event, NULL), "weft_hook_push");
  if (switch_all()) bench_check(weft_switch_mode_set(WEFT_SWITCH_ALL), "weft_switch_mode_set");

  long ops;
  uint64_t t0 = 0, t1 = 0; /* l2, l3: the loop's wall time (meaningless under callgrind) */
  if (mode == 9) {
    l1(1000, 0); /* warm the free lists */
    l1(n, 1);
    ops = n;
  } else if (mode >= 2) {
    switch (mode) {
    case 2: simple(l4m, n); break;
    case 3: simple(l4s, n); break;
    case 4: simple(l5m, n); break;
    case 5:
      weft_sem_signal(&sm);
      simple(l5s, n);
      break;
    case 6: pingpong<MutexPingPong<WeftMutexOps>>("l6m", n, verify); break;
    case 7: pingpong<SemPingPong<WeftSemOps>>("l6s", n, verify); break;
    default: pingpong<CondPingPong<WeftCondOps>>("l7", n, verify); break;
    }
    if (failed) {
      fprintf(stderr, "a try did not succeed\n");
      return 3;
    }
    ops = n;
  } else if (is_l2) {
    l2(1000); /* warm the free lists */
    t0 = weft_time_now();
    CALLGRIND_TOGGLE_COLLECT;
    l2(n);
    CALLGRIND_TOGGLE_COLLECT;
    t1 = weft_time_now();
    ops = n;
  } else {
    weft_thread_t *t;
    bench_check(weft_create(&t, NULL, partner, NULL), "weft_create");
    for (int i = 0; i < 1000; i++) weft_yield(); /* start the partner, warm up */
    long p0 = partner_yields;
    t0 = weft_time_now();
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < n; i++) weft_yield();
    CALLGRIND_TOGGLE_COLLECT;
    t1 = weft_time_now();
    ops = n + (partner_yields - p0);
    partner_stop = 1;
    bench_check(weft_join(t, NULL), "weft_join");
  }
  bench_check(weft_shutdown(), "weft_shutdown");
  if (hooked) printf("events=%lu\n", hook_events);
  if (t1 > t0) printf("ns_per_op=%.2f\n", (double)(t1 - t0) / (double)ops);
  printf("ops=%ld\n", ops);
  return 0;
}
