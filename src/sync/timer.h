/* src/sync/timer.h - the per-VP timer heaps of timed waits and sleeps (timer.c). */
#ifndef WEFT_SYNC_TIMER_H
#define WEFT_SYNC_TIMER_H

#include <stdatomic.h>
#include <stdint.h>

#include "weft/sched.h"
#include "core/spin.h"

/* ---- per-VP timers (src/sync/timer.c) ---------------------------------------------
 * A binary min-heap of the waiters (src/sync/sync.h) of timed waits and sleeps made
 * by threads running on this VP. Only threads of this VP arm timers here (in a
 * block continuation); any VP may fire or cancel them, under the lock. */
struct weft__waiter;
typedef struct weft__tmheap {
  weft__spin_t lock;
  struct weft__waiter **v;       /* heap ordered by deadline: lock */
  int cap;                       /* lock (grown by this VP's threads only) */
  _Atomic int n;                 /* entries: written under lock; read relaxed by
                                    this VP's scheduler as a hint (it re-checks
                                    under the lock) */
  _Atomic uint64_t earliest;     /* v[0]'s deadline or UINT64_MAX: written under
                                    lock, read relaxed by pollers as a hint */
} weft__tmheap_t;

/* Fires the expired timers of this VP (out of line; called only when n > 0). */
void weft__timers_check(weft_vp_t *vp);

/* Fires the expired timers of every VP and spare slot; returns how many threads it
 * woke. Called by idle VPs, and by the system monitor off any VP (then the threads
 * it wakes are placed as a plain OS thread's wake-ups are; core/monitor.c says why). */
int weft__timers_poll_all(void);
/* The earliest armed deadline of any VP, or WEFT_FOREVER. */
uint64_t weft__timers_earliest(void);
/* 1 if no timer is armed in any heap and no fire is between taking waiters out of a
 * heap and making their threads ready (a fire off any VP, by the monitor, can be
 * preempted there): the deadlock check and weft_shutdown's EBUSY test read it
 * (docs/memory-ordering.md §11). */
int weft__timers_quiet(void);
void weft__timers_free(weft_vp_t *vp);
/* Makes room for one more timer in the caller's VP heap: 0 or WEFT_ENOMEM. Called
 * before the wait queue's lock is taken; the entry is armed in the continuation. */
int weft__timer_reserve(weft_vp_t *vp);
/* Arms w's timer in vp's heap (continuation of the blocking thread, vp's kernel
 * thread). May fire at once on a later poll. */
void weft__timer_arm(weft_vp_t *vp, struct weft__waiter *w);
/* Removes w's timer from its heap if it is still armed (idempotent; w->heap is kept). */
void weft__timer_cancel(struct weft__waiter *w);
/* If w is still armed in its heap and WAITING: copies w into `by` (heap memory) and
 * puts `by` in w's place in the heap, and in the same critical section sets `mark` in
 * the waiting word of w's thread, which the fire reads to tell the two apart
 * (weft__io_idle_fired). 1 if it did; 0 if w is not armed (fired: its thread is about
 * to run), and then `by` is untouched. For the stacks
 * of idle threads (io.c), with the descriptor record's lock held. */
int weft__timer_swap(struct weft__waiter *w, struct weft__waiter *by, uintptr_t mark);

#endif
