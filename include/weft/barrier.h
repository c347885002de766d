/* weft/barrier.h - barriers (Active Threads appendix, FastThreads Fig 4.3).
 *
 * A barrier of size n releases its waiters each time the n-th thread arrives; it
 * is then ready for the next round at once. Exactly one caller per round (the
 * last to arrive) is told it is the serial thread. Usable from weft threads and
 * plain OS threads. There is no static initializer: the size must be set by
 * weft_barrier_init(); an all-zero object is a barrier of size 1 (every wait
 * returns at once, as the serial thread).
 */
#ifndef WEFT_BARRIER_H
#define WEFT_BARRIER_H

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_barrier {
  uint32_t qlock_;
  uint32_t size_;      /* 0 means 1 */
  uint32_t arrived_;   /* this round (qlock) */
  uint32_t round_;     /* round number (qlock) */
  void *head_, *tail_;
} weft_barrier_t;

/* Returned by weft_barrier_wait() to the serial thread of each round. */
#define WEFT_BARRIER_SERIAL 1

#define WEFT_BARRIER_INIT(n) {0, (n), 0, 0, 0, 0}

/* weft_barrier_init() makes *b a barrier for `count` threads.
 * Errors: WEFT_EINVAL (NULL, count == 0). Never switches. */
WEFT_API int weft_barrier_init(weft_barrier_t *b, uint32_t count);

/* weft_barrier_destroy(): Errors: WEFT_EINVAL, WEFT_EBUSY if threads wait on it
 * (in every build; left untouched). */
WEFT_API int weft_barrier_destroy(weft_barrier_t *b);

/* weft_barrier_wait() blocks until `count` threads have called it this round.
 * Returns WEFT_BARRIER_SERIAL to one of them and 0 to the others. May switch.
 * Errors: WEFT_EINVAL. */
WEFT_API int weft_barrier_wait(weft_barrier_t *b);

#ifdef __cplusplus
}
#endif
#endif
