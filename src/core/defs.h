/* src/core/defs.h - what every internal header uses: branch hints, the cache-line
 * size, and WEFT__ASSERT (checked builds).
 *
 * Ownership vocabulary used on every field of the internal structures:
 *   owner      - only the VP's own kernel thread touches it (no atomics needed).
 *   q.lock     - only while holding that dispatch queue's lock.
 *   pool.lock  - only while holding the global pool's lock.
 *   atomic     - an _Atomic; each access names its order and partner.
 * docs/memory-ordering.md describes each protocol once.
 */
#ifndef WEFT_CORE_DEFS_H
#define WEFT_CORE_DEFS_H



#define WEFT__LIKELY(x) __builtin_expect(!!(x), 1)
#define WEFT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define WEFT__CACHELINE 64
#define WEFT__ALIGNED __attribute__((aligned(WEFT__CACHELINE)))

#ifdef WEFT_CHECKED
#include <stdio.h>
#include <stdlib.h>
#define WEFT__ASSERT(c, msg)                                                        \
  do {                                                                              \
    if (WEFT__UNLIKELY(!(c))) {                                                     \
      fprintf(stderr, "weft: misuse: %s (%s:%d)\n", msg, __FILE__, __LINE__);      \
      abort();                                                                      \
    }                                                                               \
  } while (0)
#else
#define WEFT__ASSERT(c, msg) ((void)0)
#endif

#endif
