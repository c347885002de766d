/* src/core/wire.c - wiring a weft thread to a kernel thread of its own
 * (weft/wire.h; C-Threads §2.1.5 and §2.2.2).
 *
 * A wired thread runs on a "wire" kernel thread that is not a VP: its TLS VP pointer
 * is NULL, so every part of weft that asks "am I on a VP?" (weft__vp()) treats the
 * wired thread as a plain OS thread: synchronization objects block it in the kernel
 * (futex) and wake it there, sleeps are kernel sleeps, yields are sched_yield(). Only
 * the questions "which weft thread am I" (weft_self, weft_local_*, keys, the mutex
 * owner of checked builds, weft_exit) look one step further, at weft__tls_wire, and
 * only on their cold "no VP" branch: no VP hot path pays anything.
 *
 *   weft_wire() on VP v                         wire kernel thread K
 *   ---------------------                       ---------------------
 *   start K (detached)            ----->        tls_wire = w; wait for w->go
 *   weft__block(v, t, wire_cont)                      |
 *     v runs its next thread;                         |
 *     wire_cont (t saved): thread_blocked,            |
 *     w->go = 1 (release), futex wake  ------>  acquire w->go; switch base -> t
 *                                               t returns from weft_wire() on K
 *   ...                                         t blocks in read(): only K waits
 *                                               weft_unwire(): switch t -> base,
 *                                               unwire_cont (t saved): nwired--,
 *   some VP runs t again           <------      weft__unblock(t) (thread_unblocked)
 *                                               K frees w and ends
 *
 * Memory ordering: w->go: wire_cont's release store pairs with K's acquire load, so
 * t's saved context (written by the switch on v) is visible to K before K resumes
 * it. The hand-back is ordered by the dispatch queue's lock (weft__unblock), as any
 * wake-up from a plain OS thread. nwired: seq_cst; weft_shutdown() reads it to tell
 * a wired thread (which can run) from a deadlock. The futex wake after the store of
 * w->go may reach K's record after K has resumed t, t has unwired and K has freed
 * the record: a wake on a stale address is at worst a spurious wake-up of another
 * futex at that address, which every futex user tolerates (the argument glibc makes
 * for waking after a mutex unlock). Nothing of w is read or written after the store.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/internal.h"
#include "weft/hook.h"
#include "weft/wire.h"

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

struct weft__wire {
  weft_thread_t *t;             /* the wired thread: set before K starts, then read-only */
  _Atomic uint32_t go;          /* 0: t not yet saved on its VP; 1: K may resume t */
  weft_ctx_t base;              /* K's own context (its pthread stack): K only */
  unsigned char ctx_storage[WEFT__CTX_SELF_SIZE + 1] __attribute__((aligned(16)));
};

/* On a wire kernel thread: its record (set by K itself, cleared before it ends). */
static __thread struct weft__wire *tls_wire;
static _Atomic int nwired;      /* threads wired now (seq_cst) */
static _Atomic int nreturning;  /* Ks inside unwire_cont (seq_cst) */

/* The record of the calling kernel thread. Out of line and never inlined: TLS is read
 * only here, so no caller can keep a TLS address across a switch to another kernel
 * thread (see weft__vp()). */
static __attribute__((noinline)) struct weft__wire *wire_get(void) {
  struct weft__wire *w = tls_wire;
  __asm__ volatile("" : "+r"(w));
  return w;
}

weft_thread_t *weft__wired_self(void) {
  struct weft__wire *w = wire_get();
  return w ? w->t : NULL;
}

int weft_is_wired(void) { return wire_get() != NULL; }

int weft_wired_count(void) { return atomic_load(&nwired); }

int weft__wire_returning(void) { return atomic_load(&nreturning); }

static void nop_cont(void *p) { (void)p; }

static void *wire_main(void *p) {
  struct weft__wire *w = p;
  tls_wire = w;
  weft__ctx_init_self(&w->base, w->ctx_storage);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__san_init_self(&w->base);
#endif
  /* acquire: pairs with the release store in wire_cont (t's context is saved) */
  while (!atomic_load_explicit(&w->go, memory_order_acquire)) weft__os_futex_wait(&w->go, 0);
  weft__switch(&w->base, &w->t->ctx, nop_cont, NULL);
  /* t has unwired: unwire_cont made it ready; nothing else refers to w */
  tls_wire = NULL;
  free(w);
  return NULL;
}

/* Runs on the VP's next context once t is saved. */
static void wire_cont(void *p) {
  struct weft__wire *w = p;
  weft_thread_t *t = w->t;
  uint32_t f = weft__tflags(t);
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) weft__blocked_slow(t, f, NULL);
  /* release: pairs with K's acquire load; t's saved context is published */
  atomic_store_explicit(&w->go, 1, memory_order_release);
  weft__os_futex_wake(&w->go, 1);  /* w may be gone by now: see the top comment */
}

int weft_wire(void) {
  weft_vp_t *vp = weft__vp();
  if (!vp) {
    if (wire_get()) return 0;
    return atomic_load(&weft__rt.state) ? WEFT_EPERM : WEFT_ENOTINIT;
  }
  weft_thread_t *self = vp->current;
  /* not counted (K frees it with free() after t is back on a VP, possibly after
   * weft_shutdown() has checked the runtime's own allocations), but injectable */
  struct weft__wire *w = weft__sys_aligned_uncounted(64, (sizeof *w + 63) & ~(size_t)63);
  if (!w) return WEFT_ENOMEM;
  w->t = self;
  atomic_init(&w->go, 0);
  pthread_attr_t a;
  pthread_t kt;
  if (pthread_attr_init(&a) != 0) {
    free(w);
    return WEFT_ESYS;
  }
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  /* an injected failure (weft_debug_fail_alloc) stands for the system's EAGAIN */
  int err = weft__sys_fail_injected() ? EAGAIN : pthread_create(&kt, &a, wire_main, w);
  pthread_attr_destroy(&a);
  if (err != 0) {
    free(w);
    return err == ENOMEM ? WEFT_ENOMEM : WEFT_ESYS;
  }
  atomic_fetch_add(&nwired, 1);
  weft__block(vp, self, wire_cont, w);
  /* running on K now */
  return 0;
}

/* Runs on K's own stack once t is saved: t goes back to its scheduler. */
static void unwire_cont(void *p) {
  weft_thread_t *t = p;
  /* switch mode ALL: t resumes on a VP through its saved frame (docs/meta-interface.md) */
  if (weft__tflags(t) & WEFT__TF_FPALL) weft__ctx_fp_save(&t->ctx);
  /* t may run, finish and let weft_shutdown() go on while K is still inside
   * weft__unblock (seen under TSan: weft_sched_notify against the teardown), so
   * shutdown waits until no K is between these two counts (weft__wire_returning).
   * The increment happens before t can run again: t's finish, which shutdown waits
   * for, comes after it through the dispatch queue's lock. */
  atomic_fetch_add(&nreturning, 1);
  atomic_fetch_sub(&nwired, 1);
  weft__unblock(NULL, t);
  atomic_fetch_sub(&nreturning, 1);  /* last: K touches no runtime state after this */
}

int weft_unwire(void) {
  if (weft__vp()) return 0;
  struct weft__wire *w = wire_get();
  if (!w) return atomic_load(&weft__rt.state) ? WEFT_EPERM : WEFT_ENOTINIT;
  weft_thread_t *t = w->t;
  weft__switch(&t->ctx, &w->base, unwire_cont, t);
  /* running on a VP again */
  return 0;
}
