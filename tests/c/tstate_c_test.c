/* tests/c/tstate_c_test.c - errno travels with a weft thread in a program without a
 * C++ runtime, which gets the context switch that carries errno only (the C++
 * suites all run the one that also carries the C++ exception state). Plain C, no
 * GoogleTest: linking it would bring the C++ runtime in. Exits 0 on success.
 *
 * Eight threads, each with its own errno values (one by a failed write, EBADF, one by
 * a failed open, ENOENT, the others set directly), block on a contended mutex, yield,
 * join a child that waits for the join to block, and sleep, at 1 and 2 VPs; every read must give the thread's
 * own value. errno is accessed through non-inlined helpers: the compiler may keep
 * errno's address across a call in one function (docs/design.md "State that travels
 * with a thread"). A watchdog (alarm) turns a hang into a failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <weft/debug.h>
#include <weft/weft.h>

int weft__ctx_tstate_cxx(void); /* src/arch/tstate.c (hidden; linked statically) */

__attribute__((noinline)) static int get_errno(void) {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));
  return *p;
}
__attribute__((noinline)) static void set_errno(int v) {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));
  *p = v;
}

enum { NTHREADS = 8 };
static weft_mutex_t m;
static long rounds;
static _Atomic long bad_free, moved;

static void check(int want, int vp_before) {
  int got = get_errno();
  if (got != want) {
    if (bad_free++ == 0) fprintf(stderr, "errno %d, wanted %d\n", got, want);
  }
  if (weft_vp_self() != vp_before) moved++;
}

/* Overwrites errno, then yields until its joiner blocks (the alarm is the watchdog). */
static void *child(void *p) {
  set_errno((int)(intptr_t)p);
  while (weft_debug_waiters(WEFT_DEBUG_JOIN, weft_self()) != 1) weft_yield();
  set_errno((int)(intptr_t)p + 1);
  return NULL;
}

static void *body(void *p) {
  int id = (int)(intptr_t)p;
  for (long r = 0; r < rounds; r++) {
    int want;
    if (id == 0) {
      if (write(-1, "x", 1) != -1) bad_free++;
      want = EBADF;
    } else if (id == 1) {
      if (open("/nonexistent/weft-tstate", O_RDONLY) != -1) bad_free++;
      want = ENOENT;
    } else {
      want = 1000 + id * 100 + (int)(r % 100);
      set_errno(want);
    }
    int vp = weft_vp_self();
    weft_mutex_lock(&m);
    check(want, vp);
    vp = weft_vp_self();
    weft_yield();
    check(want, vp);
    vp = weft_vp_self();
    weft_mutex_unlock(&m);
    check(want, vp);
    if (r % 16 == 0) {
      weft_thread_t *c;
      if (weft_create(&c, NULL, child, (void *)(intptr_t)(50000 + id)) != 0) {
        bad_free++;
        continue;
      }
      vp = weft_vp_self();
      weft_join(c, NULL);
      check(want, vp);
      vp = weft_vp_self();
      weft_sleep_ns(50000);
      check(want, vp);
    }
  }
  return NULL;
}

static int run(int nvps) {
  bad_free = 0;
  moved = 0;
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps;
  if (weft_init(&cfg) != 0) return 1;
  /* a sanitizer runtime could bring C++ in; the release, ucontext and AArch64 builds
   * have none, and there this runs the switch without the C++ state */
  printf("%d VP(s), switch %s the C++ exception state\n", nvps,
         weft__ctx_tstate_cxx() ? "with" : "without");
  weft_mutex_init(&m);
  weft_thread_t *t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    if (weft_create(&t[i], NULL, body, (void *)(intptr_t)i) != 0) return 1;
  for (int i = 0; i < NTHREADS; i++) weft_join(t[i], NULL);
  weft_mutex_destroy(&m);
  if (weft_shutdown() != 0) return 1;
  printf("%d VP(s): %ld wrong errno reads, %ld resumes on another VP\n", nvps,
         (long)bad_free, (long)moved);
  return bad_free != 0;
}

int main(void) {
  alarm(120);
  const char *s = getenv("WEFT_TEST_SCALE");
  double scale = s && *s ? atof(s) : 1.0;
  rounds = (long)(2000 * (scale > 0 ? scale : 1.0));
  if (rounds < 20) rounds = 20;
  int rc = run(1);
  rc |= run(2);
  return rc;
}
