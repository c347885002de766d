/* weft/cond.h - condition variables (C-Threads §2.1.3, §4.4; Active Threads appendix).
 *
 * Mesa semantics: a woken waiter re-acquires the mutex and must re-check its
 * predicate; spurious wake-ups are allowed by the contract (weft produces them
 * only when a timed wait races with a signal). When the mutex is held at the time
 * of weft_cond_signal()/broadcast() (the usual case: the signaller holds it), a
 * blocked weft-thread waiter is moved straight onto the mutex's wait queue instead
 * of being woken only to block again on the mutex: C-Threads §4.4's continuation
 * recognition, today called wait morphing. It runs when the holder unlocks. With
 * one VP (weft_config_t.nvps 1) a signal from a weft thread makes the waiter ready
 * instead: it cannot run before the signaller gives up the VP, by when the mutex
 * is usually free, and the trip through the mutex's queue would cost more than it
 * saves.
 *
 * Usable from weft threads and plain OS threads (which block in the kernel). An
 * all-zero object is valid; WEFT_COND_INIT is the static initializer. Waiting with
 * different mutexes on one condition at the same time is undefined.
 */
#ifndef WEFT_COND_H
#define WEFT_COND_H

#include "weft/mutex.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_cond {
  uint32_t qlock_;     /* internal spinlock of the wait queue */
  uint32_t nwait_;     /* waiters queued (qlock) */
  void *head_, *tail_;
} weft_cond_t;

#define WEFT_COND_INIT {0, 0, 0, 0}

/* weft_cond_init() makes *c a condition with no waiters. Errors: WEFT_EINVAL. */
WEFT_API int weft_cond_init(weft_cond_t *c);

/* weft_cond_destroy(): Errors: WEFT_EINVAL (NULL), WEFT_EBUSY if threads wait on
 * it (in every build; the object is left untouched). */
WEFT_API int weft_cond_destroy(weft_cond_t *c);

/* weft_cond_wait() atomically releases *m (which the caller holds) and blocks
 * until signalled, then re-acquires *m before returning. May switch.
 * Errors: WEFT_EINVAL (c or m NULL); WEFT_EPERM if *m is not locked at all (in
 * every build, as weft_mutex_unlock(); the call then returns at once, without
 * waiting and without locking *m). Waiting with a mutex that another thread holds
 * is undefined: checked builds (WEFT_CHECKED) abort with a message. */
WEFT_API int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m);

/* weft_cond_timedwait() is weft_cond_wait() that stops waiting at `deadline`
 * (absolute, weft_time_now() clock). It re-acquires *m in every case, timeout
 * included. Errors: WEFT_ETIMEDOUT; WEFT_EINVAL; WEFT_EPERM as weft_cond_wait()
 * (*m not locked; returns at once, *m left unlocked); WEFT_ENOMEM (a weft thread
 * with a deadline: no memory for its timer; returns at once, *m still held, as on
 * entry). */
WEFT_API int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline);

/* weft_cond_signal() wakes (or morphs onto the mutex queue, as above) the
 * longest-waiting thread, if any. Callable from any thread, mutex held or not. Never switches.
 * Errors: WEFT_EINVAL. */
WEFT_API int weft_cond_signal(weft_cond_t *c);

/* weft_cond_broadcast() does the same for every waiter. Never switches. */
WEFT_API int weft_cond_broadcast(weft_cond_t *c);

#ifdef __cplusplus
}
#endif
#endif
