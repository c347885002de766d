/* weft/time.h - the clock that every timed wait uses, and sleeping.
 *
 * Deadlines are absolute times in nanoseconds of CLOCK_MONOTONIC, as returned by
 * weft_time_now(). A weft thread that sleeps or waits with a deadline is blocked,
 * not polling: its VP keeps a timer structure (a heap of deadlines) that the
 * scheduler consults whenever it picks a thread, and an idle VP sleeps in the
 * kernel no longer than its earliest deadline (docs/design.md "Time").
 */
#ifndef WEFT_TIME_H
#define WEFT_TIME_H

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No deadline: a timed call given this waits forever. */
#define WEFT_FOREVER UINT64_MAX

/* weft_time_now() returns CLOCK_MONOTONIC in nanoseconds. Callable anywhere,
 * never switches, never fails. */
WEFT_API uint64_t weft_time_now(void);

/* weft_sleep_until() blocks the caller until weft_time_now() >= deadline.
 * From a weft thread it blocks the thread (never its VP) and other threads run;
 * from a plain OS thread it sleeps in the kernel. A deadline in the past returns
 * at once (a weft thread still yields). May switch the caller.
 * Errors: WEFT_EINVAL if deadline is WEFT_FOREVER; WEFT_ENOMEM (a weft thread
 * finds no memory for its timer; it returns at once without sleeping). */
WEFT_API int weft_sleep_until(uint64_t deadline);

/* weft_sleep_ns() is weft_sleep_until(weft_time_now() + ns), saturating. */
WEFT_API int weft_sleep_ns(uint64_t ns);

/* weft_deadline_after() returns weft_time_now() + ns, saturating at
 * WEFT_FOREVER - 1 (so a finite timeout never means "forever"). */
WEFT_API uint64_t weft_deadline_after(uint64_t ns);

#ifdef __cplusplus
}
#endif
#endif
