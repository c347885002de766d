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
/* Thread-local variables of the library: the initial-exec model, a load from the
 * thread pointer, as weft__tls_vp has. The default for -fPIC code (general or local
 * dynamic) calls __tls_get_addr on every access from libweft.so: two calls per
 * own-bundle idle question and per steal's random victim. (The library is not meant
 * to be dlopen'ed late into a process that has used up its static TLS; weft__tls_vp
 * already asks for initial-exec.) */
#define WEFT__TLS __thread __attribute__((tls_model("initial-exec")))
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
