/* weft/future.h - single-assignment futures: one value, set once, waited for by
 * any number of threads.
 *
 * A future starts unset. weft_future_set() stores a pointer-sized value and wakes
 * every waiter; a second set fails. weft_future_wait() returns the value, blocking
 * while the future is unset; a wait that finds it set returns at once without
 * blocking (one acquire load). Usable from weft threads and plain OS threads, like
 * the other sync objects (weft/sync.h). An all-zero object is an unset future;
 * WEFT_FUTURE_INIT is the static initializer. The C++ layer's weft::promise,
 * weft::future, weft::shared_future and weft::async (weft/cpp/future.hpp) are
 * built on it.
 */
#ifndef WEFT_FUTURE_H
#define WEFT_FUTURE_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/time.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_future {
  uint32_t state_;     /* bits: set, claimed by a setter, waiters (src/sync/future.c) */
  uint32_t qlock_;
  void *value_;        /* valid once set */
  void *head_, *tail_; /* waiters */
} weft_future_t;

#define WEFT_FUTURE_INIT {0, 0, 0, 0, 0}

/* weft_future_init() makes *f an unset future. Errors: WEFT_EINVAL (NULL). Never
 * switches. */
WEFT_API int weft_future_init(weft_future_t *f);

/* weft_future_destroy(): Errors: WEFT_EINVAL (NULL), WEFT_EBUSY if threads wait on
 * it (in every build; the object is left untouched). Never switches. */
WEFT_API int weft_future_destroy(weft_future_t *f);

/* weft_future_set() sets f's value to `value` and wakes every waiter. What the
 * setter did before the set happens before what a waiter does after its wait
 * returns. Never switches; when nobody waits it takes no lock (two atomic
 * instructions, as weft_sem_signal). Errors: WEFT_EINVAL (NULL); WEFT_EALREADY (f was set
 * before: the value is not changed). */
WEFT_API int weft_future_set(weft_future_t *f, void *value);

/* weft_future_wait() blocks until f is set and stores its value in *value (if not
 * NULL). May switch (not when f is already set). Errors: WEFT_EINVAL (f NULL). */
WEFT_API int weft_future_wait(weft_future_t *f, void **value);

/* weft_future_timedwait() is weft_future_wait() that gives up at `deadline`
 * (absolute, weft_time_now() clock). A waiter whose deadline passes while the
 * value is being set may still return 0 with the value: a timeout means the future
 * was not set when the waiter gave up. May switch. Errors: WEFT_EINVAL (f NULL),
 * WEFT_ETIMEDOUT (*value untouched), WEFT_ENOMEM (a weft thread that must block
 * finds no memory for its timer). */
WEFT_API int weft_future_timedwait(weft_future_t *f, uint64_t deadline, void **value);

/* weft_future_tryget() stores f's value in *value (if not NULL) if f is set. Never
 * switches. Errors: WEFT_EINVAL (f NULL), WEFT_EBUSY (not set yet). */
WEFT_API int weft_future_tryget(const weft_future_t *f, void **value);

/* weft_future_is_set() returns 1 if f is set, else 0 (also for NULL). Never
 * switches; a 1 orders like a successful wait. */
WEFT_API int weft_future_is_set(const weft_future_t *f);

#ifdef __cplusplus
}
#endif
#endif
