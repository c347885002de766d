/* src/sync/cond.c - condition variables with wait morphing (weft/cond.h).
 *
 * A waiter links itself on the condition's queue under the queue lock, and gives
 * up the queue lock and then its mutex in the block continuation (a plain OS
 * thread: just before it sleeps). A signaller that holds the mutex therefore sees
 * every waiter that released the mutex before it, with no lost wake-up: the
 * waiter's link (under qlock) and count store precede its mutex release, which
 * precedes the signaller's mutex acquire.
 *
 * Signal claims the oldest live waiter (WAITING -> SIGNALED, under qlock). A weft
 * thread is then moved onto its mutex's queue if the mutex is held (wait morphing,
 * C-Threads §4.4): it runs when the holder unlocks, instead of waking only to
 * block on the mutex. Its timer is cancelled first, so no timeout can fire while it
 * sits on the mutex queue. A signaller on the only VP wakes the waiter instead
 * (deliver says why).
 */
#include "sync/sync.h"

typedef struct weft__cond {
  weft__spin_t qlock;
  _Atomic uint32_t nwait;  /* linked waiters: written under qlock; read relaxed by
                              signal's fast path (ordered by the user's mutex) */
  weft__wq_t q;            /* qlock */
} weft__cond_t;

_Static_assert(sizeof(weft__cond_t) == sizeof(weft_cond_t), "cond layout");
_Static_assert(offsetof(weft__cond_t, q) == offsetof(weft_cond_t, head_), "cond layout");
#define C(c) ((weft__cond_t *)(void *)(c))

int weft__cond_waiting(const weft_cond_t *c) {
  weft__cond_t *x = C((weft_cond_t *)(uintptr_t)c);
  return weft__wq_waiting(&x->qlock, &x->q);
}

int weft_cond_init(weft_cond_t *c) {
  if (!c) return WEFT_EINVAL;
  *c = (weft_cond_t)WEFT_COND_INIT;
  return 0;
}

int weft_cond_destroy(weft_cond_t *c) {
  if (!c) return WEFT_EINVAL;
  weft__cond_t *x = C(c);
  weft__qlock_lock(&x->qlock);
  int busy = x->q.head != NULL;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

static void nwait_add(weft__cond_t *x, int d) {
  atomic_store_explicit(&x->nwait, atomic_load_explicit(&x->nwait, memory_order_relaxed) + (uint32_t)d,
                        memory_order_relaxed);
}

/* Both waits, inlined into each: weft_cond_wait keeps its deadline a constant, so the
 * timer tests fold away. */
static inline __attribute__((always_inline)) int cond_wait(weft_cond_t *c, weft_mutex_t *m,
                                                          uint64_t deadline) {
  if (!c || !m) return WEFT_EINVAL;
  int held = weft__mutex_check_held(WEFT__M(m));
  if (held) return held;
  weft__cond_t *x = C(c);
  weft__waiter_t w;
  weft_vp_t *vp = weft__vp();
  weft__waiter_init_on(&w, vp, deadline);
  w.mutex = m;
  if (w.t && deadline != WEFT_FOREVER) {
    int rc = weft__timer_reserve(vp);
    if (rc) return rc;
  }
  /* the waiter, for the continuation of a thread that blocks in cond_wait on the
   * same mutex and switches to this one: it may hand the mutex over held
   * (weft__wait_cont_cond; valid while the waiting word says COND) */
  if (w.t) w.t->blocked_on = &w;
  weft__qlock_lock(&x->qlock);
  weft__wq_push(&x->q, &w);
  nwait_add(x, 1);
  weft__mutex_owner_drop(WEFT__M(m));
  uint32_t st = weft__wait_block_on(&w, vp, WEFT__WAITING(c, WEFT__WK_COND), &x->qlock, 1);
  int handed = 0;
  if (w.morphed) {
    if (w.morphed != WEFT__MORPH_HANDED) return weft__mutex_lock_woken(WEFT__M(m), &w);
    handed = 1;  /* m is ours, held */
  }
  int rc = 0;
  if (st == WEFT__W_TIMEDOUT) {
    weft__qlock_lock(&x->qlock);
    if (w.linked) {
      weft__wq_remove(&x->q, &w);
      nwait_add(x, -1);
    }
    weft__spin_unlock(&x->qlock);
    weft__sync_count(WEFT__ST_TIMEOUT);
    rc = WEFT_ETIMEDOUT;
  }
  if (handed) weft__mutex_owner_take(WEFT__M(m));
  else weft__mutex_relock(m);
  return rc;
}

int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline) {
  return cond_wait(c, m, deadline);
}

int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m) { return cond_wait(c, m, WEFT_FOREVER); }

/* Hands a claimed weft-thread waiter to its mutex (or wakes it).
 * Morphing pays only where the waiter could run while the mutex is still held:
 * on another VP. A signaller on the only VP (rt.nvps is 1) keeps that VP until it
 * blocks or yields, and the usual next step is to unlock: the woken waiter then
 * finds the mutex free and takes it on the fast path. Morphing there would cost a
 * trip through the mutex's queue (its queue lock, the word set to 2, unlock's slow
 * path, the waiter's re-lock as 2 and then its own slow unlock), about a fifth of
 * a round of condition ping-pong (the L7 row). If the signaller blocks while
 * holding the mutex (or a monitor spare runs the waiter), the waiter only blocks
 * again on the mutex. A plain OS thread's signal (no VP) still morphs: the VP runs
 * the waiter at once. rt.nvps is fixed while weft runs. */
static void deliver(weft__waiter_t *w) {
  if (w->heap) weft__timer_cancel(w);
  weft_vp_t *vp = weft__vp();
  if (vp && weft__rt.nvps < 2) {
    weft__unblock(vp, w->t);
    return;
  }
  weft__mutex_morph(WEFT__M(w->mutex), w);
}

int weft_cond_signal(weft_cond_t *c) {
  if (!c) return WEFT_EINVAL;
  weft__cond_t *x = C(c);
  if (!atomic_load_explicit(&x->nwait, memory_order_relaxed)) return 0;
  weft__qlock_lock(&x->qlock);
  weft__waiter_t *w;
  weft_thread_t *t = NULL;
  while ((w = weft__wq_pop(&x->q)) != NULL) {
    nwait_add(x, -1);
    t = w->t;
    if (weft__waiter_claim_locked(w, WEFT__W_SIGNALED)) break;
  }
  weft__spin_unlock(&x->qlock);
  if (!w) return 0;
  if (t) deliver(w);
  else weft__wake(NULL, w);
  return 0;
}

int weft_cond_broadcast(weft_cond_t *c) {
  if (!c) return WEFT_EINVAL;
  weft__cond_t *x = C(c);
  if (!atomic_load_explicit(&x->nwait, memory_order_relaxed)) return 0;
  weft__waiter_t *list = NULL, *w;
  weft__wakeset_t os;  /* OS waiters, woken after the lock is dropped */
  weft__wakeset_init(&os);
  weft__qlock_lock(&x->qlock);
  while ((w = weft__wq_pop(&x->q)) != NULL) {
    nwait_add(x, -1);
    if (!w->t) {
      weft__wakeset_claim(&os, w);
      continue;
    }
    if (!weft__waiter_claim_locked(w, WEFT__W_SIGNALED)) continue;
    w->next = list;   /* a claimed weft thread cannot run: w stays valid */
    list = w;
  }
  weft__spin_unlock(&x->qlock);
  weft__wakeset_run(&os);
  /* the list is newest-first; deliver oldest first to keep the queue order */
  weft__waiter_t *rev = NULL;
  while (list) {
    w = list;
    list = w->next;
    w->next = rev;
    rev = w;
  }
  while (rev) {
    w = rev;
    rev = w->next;
    deliver(w);
  }
  return 0;
}
