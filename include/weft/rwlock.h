/* weft/rwlock.h - reader/writer locks (Active Threads appendix).
 *
 * Policy: arrivals are served in FIFO order once anyone waits. A reader that
 * arrives while the lock is read-held and nobody waits enters at once; once a
 * writer waits, later readers queue behind it, so writers do not starve. When a
 * writer leaves, the queue is served from its head: a writer alone, or every
 * reader up to the next queued writer together, so readers do not starve either.
 * A weft thread is handed the lock as it is woken (it never retries). A plain OS
 * thread at the head is instead woken to compete, so that the lock does not sit
 * idle while the kernel schedules it: until it runs again, arrivals may take the
 * lock if it is free for them; if one holds it then, the OS thread keeps its
 * place at the head, and after a few (8) such losses it is handed the lock. So
 * every waiter is overtaken only a bounded number of times, and starvation-
 * freedom holds for both modes. Try variants fail rather than jump the queue.
 * Usable from weft threads and plain OS threads.
 * An all-zero object is a valid unlocked lock; WEFT_RWLOCK_INIT is the static
 * initializer. Unlocking a mode the caller does not hold is undefined.
 */
#ifndef WEFT_RWLOCK_H
#define WEFT_RWLOCK_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_rwlock {
  uint32_t word_;      /* bit 0 writer, bit 1 waiters queued, bit 2 competitor
                          woken, bits 3.. readers */
  uint32_t qlock_;
  void *head_, *tail_;
} weft_rwlock_t;

#define WEFT_RWLOCK_INIT {0, 0, 0, 0}

/* weft_rwlock_init(): unlocked. Errors: WEFT_EINVAL. */
WEFT_API int weft_rwlock_init(weft_rwlock_t *l);

/* weft_rwlock_destroy(): Errors: WEFT_EINVAL, WEFT_EBUSY if held or waited on (in
 * every build; left untouched). */
WEFT_API int weft_rwlock_destroy(weft_rwlock_t *l);

/* Read mode: shared with other readers. rdlock may switch; tryrdlock never does
 * and fails with WEFT_EBUSY if a writer holds the lock or anyone waits;
 * timedrdlock gives up at `deadline` (weft_time_now() clock) with WEFT_ETIMEDOUT,
 * leaving the lock consistent. Errors also: WEFT_EINVAL, WEFT_EAGAIN (2^29 - 1
 * readers hold it already), WEFT_ENOMEM (timed forms: a weft thread that must block finds no memory
 * for its timer; it gives up as on a timeout). */
WEFT_API int weft_rwlock_rdlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_tryrdlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_timedrdlock(weft_rwlock_t *l, uint64_t deadline);

/* Write mode: exclusive. Same conventions as the read-mode calls. */
WEFT_API int weft_rwlock_wrlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_trywrlock(weft_rwlock_t *l);
WEFT_API int weft_rwlock_timedwrlock(weft_rwlock_t *l, uint64_t deadline);

/* weft_rwlock_unlock() releases the mode the caller holds, handing the lock to
 * waiters as the policy says. Never switches. Errors: WEFT_EINVAL, WEFT_EPERM (not
 * held in any mode). */
WEFT_API int weft_rwlock_unlock(weft_rwlock_t *l);

#ifdef __cplusplus
}
#endif
#endif
