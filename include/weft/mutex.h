/* weft/mutex.h - blocking mutual-exclusion locks: the two-phase mutex and the
 * hybrid lock (Active Threads appendix, C-Threads §4.2-4.3).
 *
 * weft_mutex_t is two-phase: a thread that misses the lock spins for a bounded,
 * adaptive number of polls ("Busy Spinning"), and only then blocks. While it
 * prepares to block (waiting for the wait queue's internal lock) it keeps polling
 * the lock word and takes the mutex if it frees up ("Spin Polling"), so it never
 * takes the internal lock needlessly. Spinning happens only where it can help: if
 * the runtime has more than one VP, or the caller is a plain OS thread.
 *
 * Unlocking is competitive, like C-Threads and Active Threads: unlock frees the
 * lock word and makes one blocked waiter ready; that waiter retries and may lose
 * to a thread that arrives first (barging). This keeps the lock's throughput high
 * under contention (no lock convoys); it is not FIFO-fair.
 *
 * weft_hybrid_t has the same semantics; its spin phase backs off exponentially
 * between polls (Active Threads appendix "Hybrid Implementation").
 *
 * Both are usable from weft threads and from plain OS threads (which block in the
 * kernel). An all-zero object is a valid unlocked lock; WEFT_MUTEX_INIT and
 * WEFT_HYBRID_INIT are the static initializers. Unlocking a lock the caller does
 * not hold, relocking a lock the caller holds, and using a destroyed lock are
 * undefined: checked builds (WEFT_CHECKED) abort with a message on the first two.
 * The caller is a weft thread, or a plain OS thread; the main weft thread and the OS
 * thread that called weft_init are the same caller, so a lock may be taken before
 * weft_init and released after it (or across weft_shutdown).
 *
 * Blocked-thread waits and counters are described in weft/sync.h.
 */
#ifndef WEFT_MUTEX_H
#define WEFT_MUTEX_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/time.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Layout is public only so that objects can live in user memory and be statically
 * initialized; the fields are private (src/sync/sync.h gives their meaning). */
typedef struct weft_mutex {
  uint32_t word_;      /* 0 free, 1 held, 2 held and threads may be queued */
  uint32_t qlock_;     /* internal spinlock of the wait queue */
  int32_t spin_;       /* adaptive spin estimate (polls) */
  uint32_t pad_;
  void *head_, *tail_; /* wait queue */
  void *owner_;        /* checked builds only: the holder */
} weft_mutex_t;

#define WEFT_MUTEX_INIT {0, 0, 0, 0, 0, 0, 0}

/* weft_mutex_init() makes *m an unlocked mutex (same as all-zero).
 * Errors: WEFT_EINVAL (m NULL). Never switches. */
WEFT_API int weft_mutex_init(weft_mutex_t *m);

/* weft_mutex_destroy() checks that *m is unlocked with no waiters and leaves it
 * unusable until re-initialized. Errors: WEFT_EINVAL (m NULL); WEFT_EBUSY if it is
 * held or has waiters (in every build: the object is left untouched). A thread that
 * has just taken and released *m may destroy it and reuse its memory at once, even
 * while the previous holder's weft_mutex_unlock() is still returning: an unlock does
 * not touch the mutex after freeing it. */
WEFT_API int weft_mutex_destroy(weft_mutex_t *m);

/* weft_mutex_lock() acquires *m, spinning briefly and then blocking the caller
 * (a weft thread blocks without holding its VP; a plain OS thread blocks in the
 * kernel). May switch the caller. Errors: WEFT_EINVAL (m NULL). */
WEFT_API int weft_mutex_lock(weft_mutex_t *m);

/* weft_mutex_trylock() acquires *m if it is free, without waiting. Never
 * switches. Errors: WEFT_EBUSY (held), WEFT_EINVAL (m NULL). */
WEFT_API int weft_mutex_trylock(weft_mutex_t *m);

/* weft_mutex_timedlock() is weft_mutex_lock() that gives up at `deadline`
 * (absolute, weft_time_now() clock; WEFT_FOREVER waits forever). A timed-out call
 * leaves the mutex consistent and the caller not holding it. May switch.
 * Errors: WEFT_ETIMEDOUT, WEFT_EINVAL (m NULL), WEFT_ENOMEM (a weft thread that
 * must block with a deadline and finds no memory for its timer: it gives up as on
 * a timeout, not holding the mutex). */
WEFT_API int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline);

/* weft_mutex_unlock() releases *m and makes one waiter (if any) ready. Callable
 * by the holder only, from any thread kind. Never switches.
 * Errors: WEFT_EINVAL (m NULL), WEFT_EPERM (it was not locked). */
WEFT_API int weft_mutex_unlock(weft_mutex_t *m);

/* ---- hybrid lock: the same operations, exponential backoff while spinning ---- */
typedef struct weft_hybrid { weft_mutex_t m_; } weft_hybrid_t;

#define WEFT_HYBRID_INIT {WEFT_MUTEX_INIT}

/* The weft_hybrid_* functions have the contracts of the weft_mutex_* ones. An
 * all-zero weft_hybrid_t is valid and behaves as a hybrid lock. */
WEFT_API int weft_hybrid_init(weft_hybrid_t *h);
WEFT_API int weft_hybrid_destroy(weft_hybrid_t *h);
WEFT_API int weft_hybrid_lock(weft_hybrid_t *h);
WEFT_API int weft_hybrid_trylock(weft_hybrid_t *h);
WEFT_API int weft_hybrid_timedlock(weft_hybrid_t *h, uint64_t deadline);
WEFT_API int weft_hybrid_unlock(weft_hybrid_t *h);

#ifdef __cplusplus
}
#endif
#endif
