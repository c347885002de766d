/* src/core/dispatch.h - dispatch: putting ready threads on the VPs' dispatch queues
 * and taking them off, and switching to the next one. The queue operations here are
 * inlined into every hot path (create, yield, block, unblock); the general paths
 * (a bundle's handlers, plain OS threads) and the stealing services of weft/sched.h
 * are in dispatch.c. Waking a sleeping VP is idle.c's (core/idle.h).
 */
#ifndef WEFT_CORE_DISPATCH_H
#define WEFT_CORE_DISPATCH_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/alloc.h"
#include "core/idle.h"
#include "core/runtime.h"
#include "core/spin.h"
#include "core/switch.h"
#include "core/tcb.h"
#include "core/vp.h"

/* ---- making threads ready (dispatch.c) ---------------------------------------------- */
void weft__unblock(weft_vp_t *vp, weft_thread_t *t);   /* raises UNBLOCKED */
void weft__ready(weft_vp_t *vp, weft_thread_t *t);     /* the scheduler part only */
/* The VP a plain OS thread hands a thread without affinity to: round robin. Only
 * inside the OS-thread gate, where nvps and vps are those of the running runtime. */
weft_vp_t *weft__os_target_vp(void);

/* ---- placement: the default scheduler's one policy ----------------------------------
 * Where the default scheduler puts a thread. The root bundle's inlined paths
 * (thread.c, dispatch.c) and the table of src/sched/default.c both decide here, so the
 * two cannot drift apart (tests/unit/sched_conformance_test.cc, SchedPlacement):
 *   created (WEFT__PLACE_CREATED; the caller pushes it at the front): its affinity VP
 *     (affinity mod nvps) if it has one, else the creator's VP, else (created by a
 *     plain OS thread) round robin over the VPs;
 *   made ready again (WEFT__PLACE_READY: unblocked; the caller enqueues it at the
 *     back): the waker's VP, affinity or not (FIFO behind what that VP has ready); made
 *     ready by a plain OS thread: its affinity VP, else round robin, as created.
 * vp: the caller's VP, NULL on a plain OS thread (then inside the OS-thread gate).
 * Inlined: where vp is known not to be NULL the root's paths keep their shape (a
 * wake-up is the waker's VP with no test at all). */
enum { WEFT__PLACE_CREATED, WEFT__PLACE_READY };
static inline __attribute__((always_inline)) weft_vp_t *weft__place(int why, weft_vp_t *vp,
                                                                    const weft_thread_t *t) {
  if (why == WEFT__PLACE_READY && WEFT__LIKELY(vp != NULL)) return vp;
  if (t->affinity >= 0) return weft__rt.vps[(unsigned)t->affinity % (unsigned)weft__rt.nvps];
  if (WEFT__LIKELY(vp != NULL)) return vp;
  return weft__os_target_vp();
}

/* Wakes a VP after an enqueue if one sleeps and none spins (idle: rt.idle as read
 * inside the queue lock). */
static inline void weft__enqueue_wake(uint32_t idle) {
  if (WEFT__UNLIKELY(idle != 0 && (idle & 0xffff) == 0)) weft__wake_one();
}

/* The back append under vp's queue lock (held by the caller): the run first..last,
 * linked through next from first to last and through prev from last to first, goes
 * behind every thread queued on vp, in its order. Returns rt.idle read inside the
 * lock (see weft__enqueue). */
static inline uint32_t weft__append_locked(weft_vp_t *vp, weft_thread_t *first,
                                           weft_thread_t *last) {
  weft_thread_t *back = vp->q.tail;
  last->next = NULL;
  first->prev = back;
  if (back) back->next = first;
  else atomic_store_explicit(&vp->q.head, first, memory_order_relaxed);
  vp->q.tail = last;
  /* relaxed: ordered after the sleeper's seq_cst update by the queue lock */
  return atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
}

/* Puts t at the back of vp's dispatch queue (it runs after every thread queued now:
 * FIFO among threads made ready this way); wakes a VP if one sleeps and none spins.
 * The idle word is read inside the queue lock: a VP going to sleep bumps the idle
 * word and then takes every queue lock to look, so either it sees t or we see it
 * asleep (docs/memory-ordering.md). */
static inline void weft__enqueue(weft_vp_t *vp, weft_thread_t *t) {
  weft__spin_lock(&vp->q.lock);
  uint32_t idle = weft__append_locked(vp, t, t);
  weft__spin_unlock(&vp->q.lock);
  weft__enqueue_wake(idle);
}

/* The front push under vp's queue lock (held by the caller): t runs next on vp and
 * is the last a thief takes. Returns rt.idle read inside the lock (see above). */
static inline uint32_t weft__push_locked(weft_vp_t *vp, weft_thread_t *t) {
  /* relaxed (load and store): q.head is ordered by the queue lock; the atomic is
   * only for the unlocked hint reads of idle pollers */
  weft_thread_t *front = atomic_load_explicit(&vp->q.head, memory_order_relaxed);
  t->next = front;
  if (front) front->prev = t;
  else vp->q.tail = t;
  atomic_store_explicit(&vp->q.head, t, memory_order_relaxed);
  /* relaxed: ordered after the sleeper's seq_cst update by the queue lock */
  return atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
}

/* Puts t at the front of vp's dispatch queue (a new thread: the VP runs the threads
 * it created most recently first); wakes a VP as weft__enqueue does. */
static inline void weft__push(weft_vp_t *vp, weft_thread_t *t) {
  weft__spin_lock(&vp->q.lock);
  uint32_t idle = weft__push_locked(vp, t);
  weft__spin_unlock(&vp->q.lock);
  weft__enqueue_wake(idle);
}

/* Removes the front of vp's dispatch queue, or returns NULL. */
static inline weft_thread_t *weft__dequeue(weft_vp_t *vp) {
  if (!atomic_load_explicit(&vp->q.head, memory_order_relaxed)) return NULL;
  weft__spin_lock(&vp->q.lock);
  weft_thread_t *t = atomic_load_explicit(&vp->q.head, memory_order_relaxed);
  if (t) {
    weft_thread_t *n = t->next;
    atomic_store_explicit(&vp->q.head, n, memory_order_relaxed);
    if (!n) vp->q.tail = NULL;
  }
  weft__spin_unlock(&vp->q.lock);
  return t;
}

/* If *next has never run, bind its stack. If that fails (out of memory), hand it to
 * the list of threads waiting for a stack (weft__bind_failed, idle.c) and report NULL: the caller switches to
 * the idle loop, which keeps timers and other threads going and retries it. */
static inline __attribute__((always_inline)) void weft__prepare(weft_vp_t *vp,
                                                               weft_thread_t **next) {
  weft_thread_t *t = *next;
  if (WEFT__LIKELY(t->ctx.sp != NULL)) return;
  if (WEFT__UNLIKELY(weft__stack_bind(vp, t) != 0)) {
    weft__bind_failed(vp, t);
    *next = NULL;
  }
}

/* Switches the calling thread `self` away: runs the next ready thread of this VP or
 * the idle loop, and runs fn(arg) once self is saved. Returns when self is resumed. */
void weft__block_timers(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg);

static inline void weft__block_now(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg) {
  weft_thread_t *next = weft__dequeue(vp);
  if (next) weft__prepare(vp, &next);
  weft_ctx_t *to = next ? &next->ctx : &vp->idle_ctx;
  vp->current = next;
  weft__switch(&self->ctx, to, fn, arg);
}

/* The same, after firing this VP's due timers if it has any (relaxed: a hint, the
 * timers are re-checked under their lock). The timer path is a tail call out of
 * line, so that the common path keeps nothing live across a call. */
static inline void weft__block(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg) {
  if (WEFT__UNLIKELY(atomic_load_explicit(&vp->tm.n, memory_order_relaxed))) {
    weft__block_timers(vp, self, fn, arg);
    return;
  }
  weft__block_now(vp, self, fn, arg);
}

#endif
