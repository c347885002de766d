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

#include "weft/build.h"
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

/* For the inline fast paths below only, not for programs to call:
 * weft__mutex_took() records the caller as *m's holder, and weft__mutex_releasing()
 * checks that the caller holds *m (aborting with a message if not) and forgets the
 * holder, in a checked build (elsewhere they do nothing);
 * weft__mutex_lock_contended() is weft_mutex_lock() of a non-NULL m whose word_ the
 * caller found nonzero; weft__mutex_unlock_contended() is weft_mutex_unlock() of a
 * non-NULL m whose word_ the caller found to be `seen`, not 1 (0: WEFT_EPERM), after
 * weft__mutex_releasing(). */
WEFT_API void weft__mutex_took(weft_mutex_t *m);
WEFT_API void weft__mutex_releasing(weft_mutex_t *m);
WEFT_API int weft__mutex_lock_contended(weft_mutex_t *m);
WEFT_API int weft__mutex_unlock_contended(weft_mutex_t *m, uint32_t seen);

/* ---- inline fast paths ----
 * weft_mutex_lock, weft_mutex_trylock and weft_mutex_unlock are also macros that try
 * the uncontended case inline (one compare-and-swap on word_: 0 -> 1 to take, 1 -> 0
 * to release, the orders the library's own paths use: the acquire of a take pairs
 * with the release of the previous holder's unlock) and call the function for
 * everything else (a held mutex, waiters, a NULL m, an error). The functions keep
 * their addresses and contracts; (weft_mutex_lock)(m) calls the function directly.
 * So the meaning of word_'s values 0 and 1 is part of the library's binary interface.
 * With a library built with WEFT_CHECKED (weft/build.h) the inline paths also call
 * the library to record the holder after a take and to check it before a release.
 * A library built for ThreadSanitizer has no inline paths (TSan must see every lock's
 * ordering, and sees it only in code it instruments). Define WEFT_NO_INLINE_LOCKS
 * before including weft headers to call the functions always. */
#if !defined(WEFT_BUILDING) && !defined(WEFT_NO_INLINE_LOCKS) && !WEFT_BUILD_TSAN && \
    (defined(__GNUC__) || defined(__clang__))
static inline int weft__mutex_lock_inline(weft_mutex_t *m) {
  uint32_t seen = 0;
  if (!m) return (weft_mutex_lock)(m);
  if (__atomic_compare_exchange_n(&m->word_, &seen, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    if (WEFT_BUILD_CHECKED) weft__mutex_took(m);
    return 0;
  }
  return weft__mutex_lock_contended(m);
}
static inline int weft__mutex_trylock_inline(weft_mutex_t *m) {
  uint32_t seen = 0;
  if (m && __atomic_load_n(&m->word_, __ATOMIC_RELAXED) == 0 &&
      __atomic_compare_exchange_n(&m->word_, &seen, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    if (WEFT_BUILD_CHECKED) weft__mutex_took(m);
    return 0;
  }
  return (weft_mutex_trylock)(m);
}
static inline int weft__mutex_unlock_inline(weft_mutex_t *m) {
  uint32_t held = 1;
  if (!m) return (weft_mutex_unlock)(m);
  if (WEFT_BUILD_CHECKED) weft__mutex_releasing(m);
  if (__atomic_compare_exchange_n(&m->word_, &held, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    return 0;
  return weft__mutex_unlock_contended(m, held);
}
#define weft_mutex_lock(m) weft__mutex_lock_inline(m)
#define weft_mutex_trylock(m) weft__mutex_trylock_inline(m)
#define weft_mutex_unlock(m) weft__mutex_unlock_inline(m)
#endif

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
