/* src/core/dispatch.c - making threads ready: the unblock and ready paths (the root
 * bundle's inlined default scheduler, or a bundle's handlers), from a VP or from a
 * plain OS thread, and the dispatch-queue services schedulers call (enqueue, push,
 * steal). The inlined queue operations and the placement policy are in
 * core/dispatch.h. */
#include "core/internal.h"
#include "weft/hook.h"

/* Makes t ready through its scheduler: the default scheduler's placement, inlined
 * for the root bundle, or the bundle's thread_unblocked. vp: the caller's, NULL on a
 * plain OS thread (inside the gate). */
static inline __attribute__((always_inline)) void ready_on(weft_vp_t *vp, weft_thread_t *t) {
  uint32_t tf = weft__tflags(t);
  /* a bundle's declared fast path (WEFT_SCHED_LOCAL_READY) covers VPs only: off a VP
   * its handler places the thread */
  if (WEFT__LIKELY(!(tf & WEFT__TF_CUSTOM) && (vp || !(tf & WEFT__TF_BUNDLE)))) {
    weft__enqueue(weft__place(WEFT__PLACE_READY, vp, t), t);
    return;
  }
  weft_bundle_t *b = t->bundle;
  /* read before the handler: once t is queued it may run, finish, and its bundle
   * be destroyed */
  unsigned f = b->ops.flags;
  b->ops.thread_unblocked(b, t);
  /* the scheduler may have kept t in its own structure, unless it never does (the
   * light notify: b exists, so sleepers make the heavy fence) */
  if (!(f & WEFT_SCHED_DISPATCH_ONLY)) weft__notify_light();
}

/* A wake-up from a plain OS thread (or a wire kernel thread), with the UNBLOCKED
 * callbacks if `raise`: inside the gate, so that shutdown never frees the queues and
 * the sleeper stack under it. A closed gate means no weft thread is alive, so there
 * is nothing to wake (misuse). */
static __attribute__((noinline, cold)) void ready_os(weft_thread_t *t, int raise) {
  if (weft__os_enter(WEFT__GATE_OTHER)) return;
#ifdef WEFT_HOOKS
  if (raise && (weft__tflags(t) & WEFT__TF_HOOK)) weft__hook_raise(WEFT_HOOK_UNBLOCKED, t, NULL);
#else
  (void)raise;
#endif
  ready_on(NULL, t);
  weft__os_leave(WEFT__GATE_OTHER);
}

/* Makes t ready through its scheduler; raises no callback (yield uses it directly). */
void weft__ready(weft_vp_t *vp, weft_thread_t *t) {
  if (WEFT__UNLIKELY(!vp)) {
    ready_os(t, 0);
    return;
  }
  ready_on(vp, t);
}

/* The general path of weft__unblock on a VP: callbacks, then the scheduler (cold and
 * out of line, so the inlined path keeps its registers: measured 6 instructions a
 * wake). */
static __attribute__((noinline, cold)) void unblock_slow(weft_vp_t *vp, weft_thread_t *t) {
#ifdef WEFT_HOOKS
  if (weft__tflags(t) & WEFT__TF_HOOK) weft__hook_raise(WEFT_HOOK_UNBLOCKED, t, vp->current);
#endif
  ready_on(vp, t);
}

/* weft__unblock's call of ready_os, with t still its first argument: called from
 * weft__unblock directly, ready_os(t, 1) moved t to another register on the inlined
 * path (1 instruction a wake). */
static __attribute__((noinline, cold)) void unblock_os(weft_thread_t *t) { ready_os(t, 1); }

/* Raises thread_unblocked (and the UNBLOCKED callbacks). */
void weft__unblock(weft_vp_t *vp, weft_thread_t *t) {
  if (WEFT__UNLIKELY(!vp)) {
    unblock_os(t);
    return;
  }
  if (WEFT__LIKELY(!(weft__tflags(t) & WEFT__TF_SLOW))) {
    /* weft__place(WEFT__PLACE_READY, vp, t) is vp itself: the hand-off slot, or
     * the back of the queue */
    weft__ready_here(vp, t);
    return;
  }
  unblock_slow(vp, t);
}

/* The slot's thread goes to the queue (core/dispatch.h); the caller holds the queue
 * lock. The slot is filled only under this lock and only while the queue is empty,
 * so the queue is empty here: the thread becomes its only element. */
void weft__slot_flush_slow(weft_vp_t *vp) {
  weft_thread_t *s = weft__slot_take(vp);
  if (!s) return;  /* taken meanwhile (its owner's dispatch, or a thief) */
  WEFT__ASSERT(atomic_load_explicit(&vp->q.head, memory_order_relaxed) == NULL,
               "hand-off slot full beside a non-empty dispatch queue");
  s->next = NULL;
  /* relaxed: under the queue lock (the atomic is for the unlocked hint reads) */
  atomic_store_explicit(&vp->q.head, s, memory_order_relaxed);
  vp->q.tail = s;
}

/* Round robin (core/dispatch.h). */
weft_vp_t *weft__os_target_vp(void) {
  unsigned i = atomic_fetch_add_explicit(&weft__rt.rr, 1, memory_order_relaxed);
  return weft__rt.vps[i % (unsigned)weft__rt.nvps];
}

/* ---- dispatch-queue services of weft/sched.h ----------------------------------------- */

#define WEFT__STEAL_MAX 64 /* most threads one steal moves */

void weft_sched_enqueue(weft_vp_t *vp, weft_thread_t *t) { weft__enqueue(vp, t); }

void weft_sched_push(weft_vp_t *vp, weft_thread_t *t) { weft__push(vp, t); }

/* Counts a steal of n threads from victim, first among them, on the caller's VP and
 * raises STEAL (cold: one relaxed load when no callback is installed). */
static void steal_note(weft_vp_t *me, weft_vp_t *victim, int n, weft_thread_t *first) {
  weft__stat_inc(&me->n_steals);
  weft__stat_add(&me->n_stolen, (uint64_t)n);  /* the idle loop's steal back-off reads it */
#ifdef WEFT_HOOKS
  if (WEFT__UNLIKELY(atomic_load_explicit(&weft__hooks_on, memory_order_relaxed))) {
    weft_hook_steal_t s = {victim->index, n};
    weft__hook_raise(WEFT_HOOK_STEAL, first, &s);
  }
#else
  (void)victim;
  (void)n;
  (void)first;
#endif
}

void weft_sched_steal_note(weft_vp_t *victim, int n, weft_thread_t *first) {
  weft_vp_t *me = weft__vp();
  if (!me || !victim || victim == me || n <= 0) return;
  steal_note(me, victim, n, first);
}

weft_thread_t *weft_sched_steal(weft_vp_t *vp) {
  weft_thread_t *t = weft__dequeue(vp);
  if (t) {
    weft_vp_t *me = weft__vp();
    if (me && me != vp) steal_note(me, vp, 1, t);
  }
  return t;
}

/* A victim with an empty queue may still hold a ready thread in its hand-off slot
 * (its running thread woke it and has not blocked yet): take it, as Go's stealers
 * take runnext, so that a waker that keeps running never strands it while this VP
 * idles. The exchange decides between the thief and the owner's dispatch. */
static weft_thread_t *steal_slot(weft_vp_t *victim) {
  weft_thread_t *t = weft__slot_take(victim);
  if (t) {
    t->next = NULL;
    weft_vp_t *me = weft__vp();
    if (me && me != victim) steal_note(me, victim, 1, t);
  }
  return t;
}

weft_thread_t *weft_sched_steal_half(weft_vp_t *victim, weft_vp_t *to) {
  if (!victim || !to) return NULL;
  if (victim == to) return weft__dequeue(to);
  if (!atomic_load_explicit(&victim->q.head, memory_order_relaxed)) return steal_slot(victim);
  /* take the back half (at most WEFT__STEAL_MAX: the walk happens under the
   * victim's lock), back thread first: the work the victim would reach last, i.e.
   * the oldest threads it created (the biggest subtrees of a depth-first unfolding)
   * and the threads it made ready again */
  weft__spin_lock(&victim->q.lock);
  weft_thread_t *last = victim->q.tail;  /* the back: runs first on the thief */
  if (!last) {
    weft__spin_unlock(&victim->q.lock);
    return steal_slot(victim);
  }
  /* Find the middle without a count: grow the stolen run [first, last] one thread
   * toward the front and the kept run [head, keep] one thread toward the back, in
   * turn, until they meet (k = ceil(n / 2)) or k reaches the cap. Every thread but
   * the front one has a valid prev. */
  /* relaxed: under the victim's lock, which orders q.head (the atomic serves the
   * unlocked hint reads) */
  weft_thread_t *head = atomic_load_explicit(&victim->q.head, memory_order_relaxed);
  weft_thread_t *first = last, *keep = NULL;
  long k = 1;
  while (k < WEFT__STEAL_MAX) {
    weft_thread_t *kn = keep ? keep->next : head;
    if (kn == first) break;
    keep = kn;
    if (first->prev == keep) break;
    first = first->prev;
    k++;
  }
  if (!keep) {                           /* everything is stolen */
    atomic_store_explicit(&victim->q.head, NULL, memory_order_relaxed);
    victim->q.tail = NULL;
  } else {
    weft_thread_t *back = first->prev;   /* the new back (keep, unless capped) */
    back->next = NULL;
    victim->q.tail = back;
  }
  weft__spin_unlock(&victim->q.lock);
  /* run the back one (last); the others [first, last) keep their order and go to
   * the back of `to`'s queue */
  if (first != last) {
    weft_thread_t *before = last->prev;  /* the new back of the moved run */
    weft__spin_lock(&to->q.lock);
    uint32_t idle = weft__append_locked(to, first, before);
    weft__spin_unlock(&to->q.lock);
    weft__enqueue_wake(idle);
  }
  last->next = NULL;
  weft_vp_t *me = weft__vp();
  if (me) steal_note(me, victim, (int)k, last);
  return last;
}
