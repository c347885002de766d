/* icount.c - the L2-L7 loops of weft, alone, for instruction counting under
 * callgrind (bench/icount.sh runs it with N and 2N iterations and takes the
 * difference, which cancels start-up, warm-up and shutdown).
 *
 *   weft_icount l1 N   N x weft_create of an empty thread that has not run (batches of
 *                      500; only the creations are collected, the joins are not)
 *   weft_icount l2 N   N x (weft_create + weft_join) of an empty thread, nvps=1
 *   weft_icount l3 N   N yields of the main thread against one yielding partner
 *   weft_icount l4m N  N x (weft_mutex_lock + weft_mutex_unlock), uncontested
 *   weft_icount l4s N  N x (weft_sem_signal + weft_sem_wait), count 0 -> 1 -> 0
 *   weft_icount l5m N  N x (weft_mutex_trylock + weft_mutex_unlock)
 *   weft_icount l5s N  N x (weft_sem_trywait + weft_sem_signal)
 *   weft_icount l6m N  N rounds of mutex ping-pong (three mutexes hand over hand,
 *                      bench/latency/pingpong.h) against a partner thread
 *   weft_icount l6s N  N rounds of semaphore ping-pong
 *   weft_icount l7 N   N rounds of condition-variable ping-pong (C-Threads PingPong)
 * (ping-pong: ops = rounds, a round = one pass of each thread; nvps=1.)
 * For l2 and l3 it also prints "ns_per_op=<t>", the loop's wall time per operation
 * (run natively for that; under callgrind it is meaningless).
 * A third argument "hooked" installs one counting callback on every event
 * (weft/hook.h) before the loop: X1's third column. It prints "events=<count>".
 * A third argument "verify" (debug run, nothing is collected) checks after every round
 * that the partner made exactly one pass per round of the main thread, and for l6m
 * that each round blocked both threads once (weft_sync_stats); it prints the result.
 *
 * Only the loop is collected (CALLGRIND_TOGGLE_COLLECT, run with
 * --collect-atstart=no). It prints "ops=<count>": the operations in the loop (for l3,
 * the yields of both threads, i.e. the switches). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, weft_strerror(rc));
    exit(2);
  }
}

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

/* ---- L6/L7: the patterns of bench/latency/pingpong.h, in C ---- */
static weft_mutex_t pm[3] = {WEFT_MUTEX_INIT, WEFT_MUTEX_INIT, WEFT_MUTEX_INIT};
static weft_sem_t s1 = WEFT_SEM_INIT(0), s2 = WEFT_SEM_INIT(0);
static weft_cond_t cv = WEFT_COND_INIT;
static int turn, stop, ready;
static long b_steps;
static int a_older; /* l6m: A holds pm[a_older] and pm[a_older + 1 mod 3] */

static void *l6m_partner(void *arg) {
  int older = 2;
  weft_mutex_lock(&pm[older]);
  ready = 1;
  for (;;) {
    int next = older == 2 ? 0 : older + 1;
    weft_mutex_lock(&pm[next]);
    if (stop) {
      weft_mutex_unlock(&pm[next]);
      weft_mutex_unlock(&pm[older]);
      return arg;
    }
    b_steps++;
    weft_mutex_unlock(&pm[older]);
    older = next;
  }
}
static inline void l6m_step(void) {
  int next = a_older == 0 ? 2 : a_older - 1;
  weft_mutex_unlock(&pm[a_older]);
  weft_mutex_lock(&pm[next]);
  a_older = a_older == 2 ? 0 : a_older + 1;
}
static void *l6s_partner(void *arg) {
  ready = 1;
  for (;;) {
    weft_sem_wait(&s1);
    if (stop) return arg;
    b_steps++;
    weft_sem_signal(&s2);
  }
}
static inline void l6s_step(void) {
  weft_sem_signal(&s1);
  weft_sem_wait(&s2);
}
static void *l7_partner(void *arg) {
  ready = 1;
  for (;;) {
    weft_mutex_lock(&mx);
    while (turn != 1 && !stop) weft_cond_wait(&cv, &mx);
    if (stop) {
      weft_mutex_unlock(&mx);
      return arg;
    }
    turn = 0;
    b_steps++;
    weft_cond_signal(&cv);
    weft_mutex_unlock(&mx);
  }
}
static inline void l7_step(void) {
  weft_mutex_lock(&mx);
  while (turn != 0) weft_cond_wait(&cv, &mx);
  turn = 1;
  weft_cond_signal(&cv);
  weft_mutex_unlock(&mx);
}

enum { L6M, L6S, L7 };

static void pp_steps(int kind, long n) {
  switch (kind) {
  case L6M: for (long i = 0; i < n; i++) l6m_step(); break;
  case L6S: for (long i = 0; i < n; i++) l6s_step(); break;
  default: for (long i = 0; i < n; i++) l7_step(); break;
  }
}

/* Runs n rounds of ping-pong `kind` (collected unless verify); returns the rounds. */
static long pingpong(int kind, long n, int verify) {
  static void *(*const partner_fn[])(void *) = {l6m_partner, l6s_partner, l7_partner};
  if (kind == L6M) {
    weft_mutex_lock(&pm[0]);
    weft_mutex_lock(&pm[1]);
  }
  weft_thread_t *t;
  check(weft_create(&t, NULL, partner_fn[kind], NULL), "weft_create");
  while (!ready) weft_yield();
  pp_steps(kind, 1000); /* warm up */
  if (verify) {
    long bad = 0, b0 = b_steps;
    weft_sync_stats_t st0, st1;
    weft_sync_stats(&st0);
    for (long i = 1; i <= n; i++) {
      pp_steps(kind, 1);
      bad += b_steps - b0 != i;
    }
    weft_sync_stats(&st1);
    printf("verify %s: %ld rounds, partner passes %ld, rounds out of step %ld, "
           "mutex blocks per round %.3f, mutex misses per round %.3f\n",
           kind == L6M ? "l6m" : kind == L6S ? "l6s" : "l7", n, b_steps - b0, bad,
           (double)(st1.blocked - st0.blocked) / (double)n,
           (double)(st1.mutex_missed - st0.mutex_missed) / (double)n);
    if (bad || b_steps - b0 != n || (kind == L6M && st1.blocked - st0.blocked != 2 * (uint64_t)n)) {
      printf("verify FAILED\n");
      exit(3);
    }
  } else {
    CALLGRIND_TOGGLE_COLLECT;
    pp_steps(kind, n);
    CALLGRIND_TOGGLE_COLLECT;
  }
  stop = 1;
  switch (kind) {
  case L6M:
    weft_mutex_unlock(&pm[a_older]);
    weft_mutex_unlock(&pm[a_older == 2 ? 0 : a_older + 1]);
    break;
  case L6S: weft_sem_signal(&s1); break;
  default:
    weft_mutex_lock(&mx);
    weft_cond_signal(&cv);
    weft_mutex_unlock(&mx);
  }
  check(weft_join(t, NULL), "weft_join");
  return n;
}

static void l2(long n) {
  for (long i = 0; i < n; i++) {
    weft_thread_t *t;
    check(weft_create(&t, NULL, empty_body, NULL), "weft_create");
    check(weft_join(t, NULL), "weft_join");
  }
}

/* L1: creations only, in batches; the joins run outside the collected part. */
static void l1(long n, int collect) {
  enum { B = 500 };
  static weft_thread_t *t[B];
  for (long done = 0; done < n; done += B) {
    long k = n - done < B ? n - done : B;
    if (collect) CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < k; i++) check(weft_create(&t[i], NULL, empty_body, NULL), "weft_create");
    if (collect) CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < k; i++) check(weft_join(t[i], NULL), "weft_join");
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
  if (switch_all()) check(weft_switch_mode_set(WEFT_SWITCH_ALL), "weft_switch_mode_set");
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
  int mode = -1;
  for (int i = 0; argc >= 3 && i < (int)(sizeof modes / sizeof *modes); i++)
    if (strcmp(argv[1], modes[i]) == 0) mode = i;
  int verify = argc == 4 && strcmp(argv[3], "verify") == 0;
  int hooked = argc == 4 && strcmp(argv[3], "hooked") == 0;
  if (mode < 0 || argc > 4 || (argc == 4 && !verify && !hooked)) {
    fprintf(stderr, "usage: %s l1|l2|l3|l4m|l4s|l5m|l5s|l6m|l6s|l7 N [verify|hooked]\n", argv[0]);
    return 1;
  }
  long n = atol(argv[2]);
  int is_l2 = mode == 0;
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1;
  check(weft_init(&cfg), "weft_init");
  for (int e = 0; hooked && e < WEFT_HOOK_NEVENTS; e++)
    check(weft_hook_push((weft_hook_event_t)e, count_event, NULL), "weft_hook_push");
  if (switch_all()) check(weft_switch_mode_set(WEFT_SWITCH_ALL), "weft_switch_mode_set");

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
    default: pingpong(mode - 6, n, verify); break;
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
    check(weft_create(&t, NULL, partner, NULL), "weft_create");
    for (int i = 0; i < 1000; i++) weft_yield(); /* start the partner, warm up */
    long p0 = partner_yields;
    t0 = weft_time_now();
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < n; i++) weft_yield();
    CALLGRIND_TOGGLE_COLLECT;
    t1 = weft_time_now();
    ops = n + (partner_yields - p0);
    partner_stop = 1;
    check(weft_join(t, NULL), "weft_join");
  }
  check(weft_shutdown(), "weft_shutdown");
  if (hooked) printf("events=%lu\n", hook_events);
  if (t1 > t0) printf("ns_per_op=%.2f\n", (double)(t1 - t0) / (double)ops);
  printf("ops=%ld\n", ops);
  return 0;
}
