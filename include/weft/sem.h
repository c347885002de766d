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

#include "weft/build.h"
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

/* For the inline fast paths below only, not for programs to call:
 * weft__sem_wait_contended() is weft_sem_wait() of a non-NULL s whose count the
 * caller found 0 (or lost a race for), without the fast path again;
 * weft__sem_signal_contended() is weft_sem_signal() of a non-NULL s on which the
 * caller saw a waiter registered (the hand-off). */
WEFT_API int weft__sem_wait_contended(weft_sem_t *s);
WEFT_API int weft__sem_signal_contended(weft_sem_t *s);

/* ---- inline fast paths ----
 * weft_sem_wait, weft_sem_trywait and weft_sem_signal are also macros that make the
 * common case inline: count_ and nwait_ are one 64-bit word (src/sync/sem.c), and a
 * wait that finds a unit takes it with one compare-and-swap (count - 1, acquire), a
 * signal that finds no waiter registered adds its unit with one (count + 1, release:
 * pairs with a take's acquire), the library's own orders. Everything else (no unit, a
 * waiter registered, WEFT_SEM_MAX, NULL) calls the library. The word's layout is
 * therefore part of the binary interface. Off with a ThreadSanitizer build of the
 * library (weft/build.h) and with WEFT_NO_INLINE_LOCKS, as weft/mutex.h's. */
#if !defined(WEFT_BUILDING) && !defined(WEFT_NO_INLINE_LOCKS) && !WEFT_BUILD_TSAN && \
    (defined(__GNUC__) || defined(__clang__))
typedef uint64_t __attribute__((may_alias)) weft__sem_word_t;
/* The word of s. The empty asm hides where the pointer came from: gcc 12 otherwise
 * warns (-Wstringop-overflow, "region of size 0") on the 8-byte atomic load through
 * a semaphore that is a member of a larger object. It emits no instruction. */
static inline weft__sem_word_t *weft__sem_word(weft_sem_t *s) {
  weft__sem_word_t *w = (weft__sem_word_t *)(void *)s; /* count_, nwait_ */
  __asm__("" : "+r"(w));
  return w;
}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define WEFT__SEM_CNT_SHIFT 32
#define WEFT__SEM_NW_SHIFT 0
#else
#define WEFT__SEM_CNT_SHIFT 0
#define WEFT__SEM_NW_SHIFT 32
#endif
static inline int weft__sem_take_inline(weft_sem_t *s) {
  weft__sem_word_t *w = weft__sem_word(s);
  uint64_t c = __atomic_load_n(w, __ATOMIC_RELAXED);
  return (int32_t)(uint32_t)(c >> WEFT__SEM_CNT_SHIFT) > 0 &&
         __atomic_compare_exchange_n(w, &c, c - ((uint64_t)1 << WEFT__SEM_CNT_SHIFT), 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}
static inline int weft__sem_wait_inline(weft_sem_t *s) {
  if (!s) return (weft_sem_wait)(s);
  if (weft__sem_take_inline(s)) return 0;
  return weft__sem_wait_contended(s);
}
static inline int weft__sem_trywait_inline(weft_sem_t *s) {
  if (s && weft__sem_take_inline(s)) return 0;
  return (weft_sem_trywait)(s);
}
static inline int weft__sem_signal_inline(weft_sem_t *s) {
  if (s) {
    weft__sem_word_t *w = weft__sem_word(s);
    uint64_t c = __atomic_load_n(w, __ATOMIC_RELAXED);
    if ((uint32_t)(c >> WEFT__SEM_NW_SHIFT) != 0) return weft__sem_signal_contended(s);
    if ((int32_t)(uint32_t)(c >> WEFT__SEM_CNT_SHIFT) != WEFT_SEM_MAX &&
        __atomic_compare_exchange_n(w, &c, c + ((uint64_t)1 << WEFT__SEM_CNT_SHIFT), 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      return 0;
  }
  return (weft_sem_signal)(s);
}
#define weft_sem_wait(s) weft__sem_wait_inline(s)
#define weft_sem_trywait(s) weft__sem_trywait_inline(s)
#define weft_sem_signal(s) weft__sem_signal_inline(s)
#endif

#ifdef __cplusplus
}
#endif
#endif
