/* tests/c/steal_backoff_test.c - the idle loop's steal back-off (src/core/idle.c).
 *
 * 1. The policy: a steal whose busy period gave less than WEFT__STEAL_PAYS_NS per
 *    thread taken starts a back-off of WEFT__STEAL_WAIT_MIN_NS, each further one
 *    doubles it up to WEFT__STEAL_WAIT_MAX_NS, and a steal that pays ends it; no steal
 *    is allowed before the back-off ends, and every steal is allowed after it.
 * 2. No lost or stranded thread at 2 VPs under a storm of pushes, steals, back-offs
 *    and sleeps: rounds of a fork-join of null threads (the steals that do not pay,
 *    which put the idle VP into back-off), each followed by a thread that only the
 *    other VP can run, because the main thread spins on its VP without yielding until
 *    that thread has run; every few rounds the main thread sleeps first, long
 *    enough for the idle VP to go to sleep, so that the push must wake it. A thread
 *    that nobody runs would hang the test: the watchdog (alarm) turns that into a
 *    failure.
 *
 * Plain C (the library's private headers: the back-off state is a C11 struct).
 * WEFT_TEST_SCALE scales the number of rounds. Exits 0 on success. */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h>

#include "core/idle.h"

static int failures;
#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                      \
    }                                                                  \
  } while (0)

#ifndef WEFT_TEST_DEFAULT_SCALE
#define WEFT_TEST_DEFAULT_SCALE 1.0
#endif

/* WEFT_TEST_SCALE, else the build's default (as tests/weft_test.h) */
static double scale(void) {
  const char *s = getenv("WEFT_TEST_SCALE");
  double v = s && *s ? strtod(s, NULL) : WEFT_TEST_DEFAULT_SCALE;
  return v > 0 ? v : WEFT_TEST_DEFAULT_SCALE;
}

static void policy(void) {
  weft__steal_bo_t bo;
  memset(&bo, 0, sizeof bo);
  CHECK(weft__steal_allowed(&bo, 0));
  CHECK(weft__steal_allowed(&bo, 123456789));

  /* a steal that pays (exactly the threshold per thread) leaves no back-off */
  weft__steal_judge(&bo, 10, 10 * (uint64_t)WEFT__STEAL_PAYS_NS, 1000);
  CHECK(bo.wait == 0);
  CHECK(weft__steal_allowed(&bo, 1000));

  /* one that does not pay: no steal before the minimum back-off ends, then any */
  uint64_t now = 1000000;
  weft__steal_judge(&bo, 10, 10 * (uint64_t)WEFT__STEAL_PAYS_NS - 1, now);
  CHECK(bo.wait == WEFT__STEAL_WAIT_MIN_NS);
  CHECK(!weft__steal_allowed(&bo, now));
  CHECK(!weft__steal_allowed(&bo, now + WEFT__STEAL_WAIT_MIN_NS - 1));
  CHECK(weft__steal_allowed(&bo, now + WEFT__STEAL_WAIT_MIN_NS));

  /* each further one doubles it, up to the maximum */
  uint32_t want = WEFT__STEAL_WAIT_MIN_NS;
  for (int i = 0; i < 40; i++) {
    now += bo.wait;
    weft__steal_judge(&bo, 1, 0, now);
    want = want * 2 < WEFT__STEAL_WAIT_MAX_NS ? want * 2 : WEFT__STEAL_WAIT_MAX_NS;
    CHECK(bo.wait == want);
    CHECK(!weft__steal_allowed(&bo, now + bo.wait - 1));
    CHECK(weft__steal_allowed(&bo, now + bo.wait));
  }
  CHECK(bo.wait == WEFT__STEAL_WAIT_MAX_NS);

  /* a steal that pays ends it at once */
  weft__steal_judge(&bo, 3, 3 * (uint64_t)WEFT__STEAL_PAYS_NS + 1, now);
  CHECK(bo.wait == 0);
  CHECK(weft__steal_allowed(&bo, now));
}

/* ---- the storm at 2 VPs ------------------------------------------------------------ */

enum { BATCH = 256 };
static _Atomic int ran, ran_on;

static void *null_body(void *arg) { return arg; }

static void *marker(void *arg) {
  (void)arg;
  atomic_store(&ran_on, weft_vp_self());
  atomic_store(&ran, 1);
  return NULL;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "steal_backoff_test: watchdog: a queued thread never ran\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  _exit(1);
}

static void storm(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 2;
  /* the marker must run on the regular VP the main thread does not hold: the system
   * monitor, seeing the main thread's VP hardly use its CPU on a loaded machine, may
   * move the main thread to a spare, and the count below would be off */
  cfg.monitor_us = WEFT_MONITOR_OFF;
  if (weft_init(&cfg) != 0) {
    fprintf(stderr, "weft_init failed\n");
    failures++;
    return;
  }
  int rounds = (int)(120 * scale());
  if (rounds < 16) rounds = 16;
  signal(SIGALRM, on_alarm);
  alarm((unsigned)(30 * scale() + 30));
  static weft_thread_t *b[BATCH];
  int other = 0;
  for (int r = 0; r < rounds; r++) {
    /* null threads: the steals of the idle VP do not pay, it backs off */
    for (int j = 0; j < BATCH; j++) CHECK(weft_create(&b[j], NULL, null_body, NULL) == 0);
    for (int j = 0; j < BATCH; j++) CHECK(weft_join(b[j], NULL) == 0);
    /* now and then long enough idle for the other VP to go to sleep (cfg.spin_us) */
    if (r % 8 == 7) CHECK(weft_sleep_ns(200000) == 0);
    /* a thread only the other VP can run: the main thread keeps its VP */
    atomic_store(&ran, 0);
    weft_thread_t *m;
    CHECK(weft_create(&m, NULL, marker, NULL) == 0);
    int me = weft_vp_self();
    while (!atomic_load(&ran)) {
    }
    CHECK(weft_vp_self() == me);
    other += atomic_load(&ran_on) != me;
    CHECK(weft_join(m, NULL) == 0);
  }
  alarm(0);
  CHECK(other == rounds);  /* every marker ran on the VP the main thread did not hold */
  CHECK(weft_shutdown() == 0);
}

int main(void) {
  policy();
  storm();
  if (failures) {
    fprintf(stderr, "steal_backoff_test: %d check(s) failed\n", failures);
    return 1;
  }
  puts("steal_backoff_test: ok");
  return 0;
}
