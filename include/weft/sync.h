/* weft/sync.h - every synchronization object, their tuning and their counters.
 *
 * Blocking objects (mutex, hybrid lock, condition, semaphore, barrier,
 * reader/writer lock, lock sets, futures) block a weft thread without holding its virtual
 * processor, and block a plain OS thread in the kernel. A weft thread is published
 * on an object's wait queue only after its context is saved: the wait queue's
 * internal lock is released by the switch's continuation, on the next thread's
 * stack (C-Threads §3; docs/memory-ordering.md "block and wake").
 *
 * Destroying an object that is held or has waiters returns WEFT_EBUSY in every
 * build and leaves the object as it was.
 */
#ifndef WEFT_SYNC_H
#define WEFT_SYNC_H

#include "weft/common.h"
#include "weft/time.h"
#include "weft/mutex.h"
#include "weft/cond.h"
#include "weft/sem.h"
#include "weft/barrier.h"
#include "weft/rwlock.h"
#include "weft/lockset.h"
#include "weft/future.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counters of C-Threads Fig 5-5, summed over every VP and plain OS threads. They
 * are always on: each is a plain add to a per-VP counter on a slow path (a missed
 * mutex, a block, an idle VP), so the uncontended lock and unlock paths carry no
 * counting at all. */
typedef struct weft_sync_stats_s {
  uint64_t mutex_missed;      /* lock attempts that found the mutex held */
  uint64_t acquired_spinning; /* ... then got it while Busy Spinning */
  uint64_t acquired_polling;  /* ... then got it while preparing to block (Spin Polling) */
  uint64_t blocked;           /* ... then blocked (once per lock call) */
  uint64_t idled;             /* blocks of weft threads in any wait (every sync object,
                                 and weft_sleep_*) that left their VP with nothing else
                                 to run: not a subset of `blocked`, which counts the
                                 mutex only */
  uint64_t timeouts;          /* timed waits of the sync objects that timed out
                                 (including a deadline already past when called); a
                                 sleep's end is not counted */
} weft_sync_stats_t;

/* weft_sync_stats() fills *out with the counts since the last reset, for the whole
 * process: plain OS threads' events (before weft_init and after weft_shutdown too),
 * weft threads' events, and those of earlier runs (a VP's counts are kept when
 * weft_shutdown ends it, so the counts never go backwards). Exact when the system is
 * quiescent. Callable anywhere; never switches. */
WEFT_API void weft_sync_stats(weft_sync_stats_t *out);

/* weft_sync_stats_reset() zeroes the counters. Call while quiescent. */
WEFT_API void weft_sync_stats_reset(void);

/* Mutex tuning, process-wide (benchmark S6 runs with spinning on and off).
 * spin_max: the most polls of the spin phase (0 turns Busy Spinning off; default
 * 100); the adaptive estimate stays below it. polling: nonzero keeps Spin Polling
 * on (default 1). Errors: WEFT_EINVAL (spin_max < 0 or > 1000000). */
WEFT_API int weft_sync_set_spin(int spin_max, int polling);

#ifdef __cplusplus
}
#endif
#endif
