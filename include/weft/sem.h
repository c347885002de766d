/* weft/sem.h - counting semaphores (Active Threads appendix).
 *
 * wait takes one unit, blocking while there is none; signal adds one and, if a
 * thread is blocked, hands that unit straight to the longest waiter. A thread that
 * arrives while no one is blocked may take a free unit first (no FIFO guarantee
 * against arrivals). Usable from weft threads and plain OS threads. An all-zero
 * object is a semaphore with count 0; WEFT_SEM_INIT(n) is the static initializer.
 */
#ifndef WEFT_SEM_H
#define WEFT_SEM_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_sem {
  int32_t count_;      /* free units (>= 0) */
  uint32_t nwait_;     /* threads queued or about to queue */
  uint32_t qlock_;
  uint32_t pad_;
  void *head_, *tail_;
} weft_sem_t;

#define WEFT_SEM_INIT(n) {(n), 0, 0, 0, 0, 0}
#define WEFT_SEM_MAX INT32_MAX

/* weft_sem_init() sets the count to `count`. Errors: WEFT_EINVAL (NULL, count <
 * 0). Never switches. */
WEFT_API int weft_sem_init(weft_sem_t *s, int32_t count);

/* weft_sem_destroy(): Errors: WEFT_EINVAL, WEFT_EBUSY if threads wait on it (in
 * every build; the object is left untouched). A thread that has taken the last unit
 * it expects may destroy the semaphore, and once this returns 0 reuse its memory,
 * even while the weft_sem_signal() that gave the unit is still returning. */
WEFT_API int weft_sem_destroy(weft_sem_t *s);

/* weft_sem_wait() takes a unit, blocking while the count is 0. May switch.
 * Errors: WEFT_EINVAL. */
WEFT_API int weft_sem_wait(weft_sem_t *s);

/* weft_sem_trywait() takes a unit if one is free. Never switches.
 * Errors: WEFT_EBUSY (none free), WEFT_EINVAL. */
WEFT_API int weft_sem_trywait(weft_sem_t *s);

/* weft_sem_timedwait() is weft_sem_wait() that gives up at `deadline` (absolute,
 * weft_time_now() clock). A timed-out wait takes no unit. May switch.
 * Errors: WEFT_ETIMEDOUT, WEFT_EINVAL, WEFT_ENOMEM (a weft thread that must block
 * finds no memory for its timer; like a timeout, it takes no unit). */
WEFT_API int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline);

/* weft_sem_signal() adds a unit, waking one waiter. Never switches.
 * Errors: WEFT_EINVAL, WEFT_EAGAIN (the count would exceed WEFT_SEM_MAX). */
WEFT_API int weft_sem_signal(weft_sem_t *s);

/* weft_sem_value() returns the current count (a snapshot), or 0 for NULL. */
WEFT_API int32_t weft_sem_value(const weft_sem_t *s);

#ifdef __cplusplus
}
#endif
#endif
