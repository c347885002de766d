/* weft/debug.h - hooks for tests and diagnostics. Not for production use. */
#ifndef WEFT_DEBUG_H
#define WEFT_DEBUG_H

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* weft_debug_fail_alloc() makes the n-th allocation from now (n >= 1) that weft
 * asks of the system (malloc or mmap, not a free-list hit) fail as if the system
 * were out of memory; n = 0 turns injection off. Used by failure-injection tests.
 * Process-wide, callable anywhere. */
WEFT_API void weft_debug_fail_alloc(long n);

/* weft_debug_fail_point() lets a library layered on weft (the C-Threads layer) take
 * part in failure injection: it counts as one allocation (weft_debug_alloc_count())
 * and returns 1 if that allocation must fail as weft_debug_fail_alloc() asked, else
 * 0. The caller then skips its own allocation and reports out-of-memory. Callable
 * anywhere. */
WEFT_API int weft_debug_fail_point(void);

/* weft_debug_alloc_count() returns how many system allocations weft has made since
 * the process started (malloc and mmap calls, counted whether or not they failed). */
WEFT_API long weft_debug_alloc_count(void);

/* weft_debug_live_blocks() returns how many blocks weft currently holds from the
 * system (control blocks, stacks, tables, VP structures), cached ones included.
 * 0 after a successful weft_shutdown() means nothing leaked. */
WEFT_API long weft_debug_live_blocks(void);

/* Per-VP counters, summed over VPs. Readable any time; exact only when quiescent. */
typedef struct weft_debug_stats {
  uint64_t created, finished, steals, sleeps;
  uint64_t tcb_cached, stacks_cached;   /* free-list contents, local and global */
} weft_debug_stats_t;
WEFT_API void weft_debug_stats(weft_debug_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
