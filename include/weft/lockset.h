/* weft/lockset.h - atomic acquisition of a set of locks (Active Threads §3.5 and §6,
 * "multi-object synchronization").
 *
 * weft_lockset_acquire() takes every lock of a set, each in its mode (mutex,
 * reader or writer), as one operation: it never blocks while holding part of the
 * set. It blocks on one lock, then tries the others; if one is busy it releases
 * what it holds, and blocks on that busy one first next time. So it cannot
 * deadlock with other lock-set acquisitions nor with threads that take the same
 * locks one at a time in any order. Usable from weft threads and plain OS threads.
 */
#ifndef WEFT_LOCKSET_H
#define WEFT_LOCKSET_H

#include "weft/mutex.h"
#include "weft/rwlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_lock_kind {
  WEFT_LOCK_MUTEX = 1,   /* lock is a weft_mutex_t */
  WEFT_LOCK_HYBRID = 2,  /* lock is a weft_hybrid_t */
  WEFT_LOCK_READ = 3,    /* lock is a weft_rwlock_t, taken in read mode */
  WEFT_LOCK_WRITE = 4    /* lock is a weft_rwlock_t, taken in write mode */
} weft_lock_kind_t;

typedef struct weft_lockref {
  weft_lock_kind_t kind;
  void *lock;
} weft_lockref_t;

/* The most locks in one set. */
#define WEFT_LOCKSET_MAX 64

/* weft_lockset_acquire() acquires all n locks of set[]. May switch.
 * Errors: WEFT_EINVAL (set NULL with n > 0, n > WEFT_LOCKSET_MAX, a NULL lock, an
 * unknown kind, or the same lock twice); nothing is held after an error. */
WEFT_API int weft_lockset_acquire(const weft_lockref_t *set, int n);

/* weft_lockset_timedacquire() is weft_lockset_acquire() that gives up at
 * `deadline` (weft_time_now() clock), holding none of the locks.
 * Errors: WEFT_ETIMEDOUT, WEFT_ENOMEM (no memory for a timer, see
 * weft_mutex_timedlock()) and those of weft_lockset_acquire(); after any error none
 * of the locks is held. */
WEFT_API int weft_lockset_timedacquire(const weft_lockref_t *set, int n, uint64_t deadline);

/* weft_lockset_tryacquire() acquires all of set[] if each is free now, else none.
 * Never switches. Errors: WEFT_EBUSY and those of weft_lockset_acquire(). */
WEFT_API int weft_lockset_tryacquire(const weft_lockref_t *set, int n);

/* weft_lockset_release() releases every lock of set[] (held by the caller in the
 * given modes). Never switches. Errors: WEFT_EINVAL; WEFT_EPERM when a lock of set[]
 * was not held (what that lock's own unlock reports; the others are still released;
 * releasing a lock another thread holds is undefined, as with each lock's unlock). */
WEFT_API int weft_lockset_release(const weft_lockref_t *set, int n);

#ifdef __cplusplus
}
#endif
#endif
