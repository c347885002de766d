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
 * The wire kernel threads are the weft_blocking pool's (src/io/blocking.c): a wire
 * holds a pool thread K (an idle one, or a new one, past the pool's limit if need
 * be) until it unwires; then K is an idle pool thread again.
 *
 *   weft_wire() on VP v                         pool thread K
 *   ---------------------                       ---------------------
 *   weft__pool_hold_reserve(): an idle K        (idle, or starting)
 *     is spared for us, or K is started               |
 *   weft__block(v, t, wire_cont)                      |
 *     v runs its next thread;                         |
 *     wire_cont (t saved): thread_blocked,            |
 *     lock pool; queue r; signal; unlock  ----> lock pool; take r; unlock
 *                                               wire_run: tls_wire = &w (on K's
 *                                               stack); switch base -> t
 *                                               t returns from weft_wire() on K
 *   ...                                         t blocks in read(): only K waits
 *                                               weft_unwire(): switch t -> base,
 *                                               unwire_cont (t saved): K counted
 *                                               idle (pool lock), nwired--,
 *   some VP runs t again           <------      weft__unblock(t) (thread_unblocked)
 *                                               tls_wire = NULL; K back to the pool
 *                                               (idle: next wire or job, or exits
 *                                               after the idle time)
 *
 * Memory ordering: the hand-over to K is ordered by the pool's mutex: wire_cont's
 * unlock after queueing r (weft__pool_hold_submit) pairs with the lock of the pool
 * thread that takes r, so t's saved context (written by the switch on v) and r are
 * visible to K before K resumes t. The request r lives on t's stack (weft_wire's
 * frame): wire_cont touches it no more after the unlock, and K reads r->t before it
 * resumes t, after which the frame is gone. The hand-back is ordered by the dispatch
 * queue's lock (weft__unblock), as any wake-up from a plain OS thread. nwired: seq_cst;
 * weft_shutdown() reads it to tell a wired thread (which can run) from a deadlock.
 * nreturning: seq_cst; shutdown waits until no K is inside unwire_cont.
 */

#include <sys/syscall.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/io.h"
#include "weft/hook.h"
#include "weft/wire.h"

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

/* K's record while a weft thread is wired to it: on K's own stack (wire_run). */
struct weft__wire {
  weft_thread_t *t;             /* the wired thread */
  struct weft__wire *next, *prev;  /* the registry of wired threads (wired_lock) */
  long tid;                     /* K's kernel thread id */
  weft_ctx_t base;              /* K's own context (its pthread stack): K only */
  unsigned char ctx_storage[WEFT__CTX_SELF_SIZE + 1] __attribute__((aligned(16)));
};

/* A wire request: on the wiring thread's stack, in weft_wire's frame. */
struct wire_req {
  weft__pool_hold_t hold;       /* first: the pool hands back &hold */
  weft_thread_t *t;
};

/* On a wire kernel thread: its record (set by K itself while t is wired to it). */
static WEFT__TLS struct weft__wire *tls_wire;
static _Atomic int nwired;      /* threads wired now (seq_cst) */
/* The wired threads, for weft_dump (a wired thread's saved context is stale while it
 * runs on K): added by K before it resumes t, removed in unwire_cont before t can
 * run elsewhere. Wires and unwires are slow paths (a kernel thread hand-over). */
static weft__spin_t wired_lock;
static struct weft__wire *wired_head;  /* wired_lock */
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

long weft__wired_tid(const weft_thread_t *t) {
  /* a dump may run in a signal handler that interrupted a wire on this kernel
   * thread: try the lock a while, never wait for ever */
  int got = 0;
  for (int i = 0; i < 100000 && !(got = weft__spin_trylock(&wired_lock)); i++) weft__os_relax();
  if (!got) return -1;
  long tid = 0;
  for (struct weft__wire *w = wired_head; w; w = w->next)
    if (w->t == t) {
      tid = w->tid;
      break;
    }
  weft__spin_unlock(&wired_lock);
  return tid;
}

int weft_wired_count(void) { return atomic_load(&nwired); }

int weft__wire_returning(void) { return atomic_load(&nreturning); }

static void nop_cont(void *p) { (void)p; }

/* Runs on the pool thread K that took the request (weft__pool_hold_t.run): resumes t
 * and returns once t has unwired; K then goes back to the pool. */
static void wire_run(weft__pool_hold_t *h) {
  struct weft__wire w;
  /* the pool lock (taken by K to dequeue h) ordered t's saved context and *h before
   * this point: see the top comment. h is gone once t runs. */
  w.t = ((struct wire_req *)h)->t;
  weft__ctx_init_self(&w.base, w.ctx_storage);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__san_init_self(&w.base);
#endif
  tls_wire = &w;
  w.tid = (long)syscall(SYS_gettid);
  weft__spin_lock(&wired_lock);
  w.prev = NULL;
  w.next = wired_head;
  if (wired_head) wired_head->prev = &w;
  wired_head = &w;
  weft__spin_unlock(&wired_lock);
  weft__switch(&w.base, &w.t->ctx, nop_cont, NULL);
  /* t has unwired: unwire_cont made it ready; nothing else refers to w */
  tls_wire = NULL;
}

/* Runs on the VP's next context once t is saved. */
static void wire_cont(void *p) {
  struct wire_req *r = p;
  weft_thread_t *t = r->t;
  uint32_t f = weft__tflags(t);
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) weft__blocked_slow(t, f, NULL);
  /* queues r under the pool lock (its unlock pairs with the lock of the pool thread
   * that takes r); r may be gone once this returns */
  weft__pool_hold_submit(&r->hold);
}

int weft_wire(void) {
  weft_vp_t *vp = weft__vp();
  if (!vp) {
    if (wire_get()) return 0;
    return atomic_load(&weft__rt.state) ? WEFT_EPERM : WEFT_ENOTINIT;
  }
  weft_thread_t *self = vp->current;
  struct wire_req r = {.hold = {.next = NULL, .run = wire_run}, .t = self};
  /* a pool thread is spared or started for r (a failed start is injectable:
   * weft_debug_fail_alloc stands for the system's EAGAIN) */
  int err = weft__pool_hold_reserve();
  if (err != 0) return err;
  atomic_fetch_add(&nwired, 1);
  weft__block(vp, self, wire_cont, &r);
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
  struct weft__wire *w = wire_get();  /* K's record: out of the registry first */
  weft__spin_lock(&wired_lock);
  if (w->prev) w->prev->next = w->next;
  else wired_head = w->next;
  if (w->next) w->next->prev = w->prev;
  weft__spin_unlock(&wired_lock);
  weft__pool_hold_done();  /* K counts as idle for the next wire or job from now */
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
