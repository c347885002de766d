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
/* A detached root-bundle thread for fn(arg), created but not made ready: the caller
 * makes it ready with weft__unblock when it wants it run (io.c, weft_fd_spawn;
 * thread.c). 0, WEFT_EAGAIN (cfg.max_threads), WEFT_ENOMEM. */
int weft__create_unready(weft_vp_t *vp, weft_thread_t **out, weft_thread_fn fn, void *arg);

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

/* ---- the hand-off slot (vp->q.next; docs/design.md "Hand-off on wake") ------------- */

/* Moves the slot's thread, if any, into vp's queue (queue lock held): it becomes the
 * front, which it logically was (the slot is filled only while the queue is empty).
 * Out of line (dispatch.c): the inlined test is all a push pays. */
void weft__slot_flush_slow(weft_vp_t *vp);
static inline void weft__slot_flush_locked(weft_vp_t *vp) {
  /* relaxed: a hint; the exchange in the slow path decides */
  if (WEFT__UNLIKELY(atomic_load_explicit(&vp->q.next, memory_order_relaxed) != NULL))
    weft__slot_flush_slow(vp);
}

/* Empties vp's slot: its thread, or NULL. Anyone may call it, with or without the
 * queue lock. acquire: pairs with the filler's release store (the woken thread's
 * saved context and everything its waker did before the wake). */
static inline weft_thread_t *weft__slot_take(weft_vp_t *vp) {
  if (WEFT__LIKELY(!atomic_load_explicit(&vp->q.next, memory_order_relaxed))) return NULL;
  return atomic_exchange_explicit(&vp->q.next, NULL, memory_order_acquire);
}

/* Something ready on vp, as a hint: the queue's front or the slot (relaxed: idle
 * pollers and the shutdown loop re-check through the locked paths). */
static inline int weft__vp_ready_hint(weft_vp_t *vp) {
  return atomic_load_explicit(&vp->q.head, memory_order_relaxed) != NULL ||
         atomic_load_explicit(&vp->q.next, memory_order_relaxed) != NULL;
}

/* The back append under vp's queue lock (held by the caller): the run first..last,
 * linked through next from first to last and through prev from last to first, goes
 * behind every thread queued on vp, in its order. Returns rt.idle read inside the
 * lock (see weft__enqueue). */
static inline uint32_t weft__append_locked(weft_vp_t *vp, weft_thread_t *first,
                                           weft_thread_t *last) {
  weft__slot_flush_locked(vp);  /* the slot's thread is older: it stays in front */
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
/* weft__push_locked without the slot's flush, for a caller that found vp's slot
 * empty (only vp's own running thread fills it). */
static inline uint32_t weft__push_locked_noslot(weft_vp_t *vp, weft_thread_t *t) {
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
static inline uint32_t weft__push_locked(weft_vp_t *vp, weft_thread_t *t) {
  /* keep "slot full => queue empty": the slot's thread goes to the queue first, so
   * that a rotation yield, which looks only at the queue, cannot pass it over */
  weft__slot_flush_locked(vp);
  return weft__push_locked_noslot(vp, t);
}

/* Puts t at the front of vp's dispatch queue (a new thread: the VP runs the threads
 * it created most recently first); wakes a VP as weft__enqueue does. */
static inline void weft__push(weft_vp_t *vp, weft_thread_t *t) {
  weft__spin_lock(&vp->q.lock);
  uint32_t idle = weft__push_locked(vp, t);
  weft__spin_unlock(&vp->q.lock);
  weft__enqueue_wake(idle);
}

/* Makes t, just woken by vp's running thread, ready on vp (the root bundle's
 * wake-up: weft__unblock): into the hand-off slot if the queue and the slot are
 * empty, where the next dispatch on vp takes it without the queue lock; else at the
 * back of the queue, as weft__enqueue (FIFO: with other threads ready, the woken one
 * waits its turn). The fill is under the queue lock, so that a push by another VP
 * cannot slip a thread into the queue beside a full slot, and rt.idle is read
 * inside the lock as weft__enqueue does (a VP going to sleep looks at every slot
 * under the same locks). */
static inline void weft__ready_here(weft_vp_t *vp, weft_thread_t *t) {
  weft__spin_lock(&vp->q.lock);
  uint32_t idle;
  /* relaxed: q.head and the slot are written under this lock (a take only empties
   * the slot, which at worst sends t to the queue) */
  if (WEFT__LIKELY(!atomic_load_explicit(&vp->q.head, memory_order_relaxed) &&
                   !atomic_load_explicit(&vp->q.next, memory_order_relaxed))) {
    /* release: pairs with weft__slot_take's acquire exchange */
    atomic_store_explicit(&vp->q.next, t, memory_order_release);
    /* relaxed: ordered after a sleeper's seq_cst update by the queue lock */
    idle = atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
  } else {
    idle = weft__append_locked(vp, t, t);
  }
  weft__spin_unlock(&vp->q.lock);
  weft__enqueue_wake(idle);
}

/* Removes the next thread to run on vp: the slot's, else the front of the dispatch
 * queue; NULL if neither. */
static inline weft_thread_t *weft__dequeue(weft_vp_t *vp) {
  weft_thread_t *s = weft__slot_take(vp);
  if (s) return s;
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
