/* weft/spinlock/backoff.h - test-and-test-and-set with Ethernet-style exponential
 * backoff (FastThreads §4.2). A waiter spins reading the word; when it reads "free" it
 * does not rush to the exchange but first waits a random delay drawn from [0, limit)
 * and tries only if the word still reads free. Every failed try doubles `limit` (up to
 * WEFT_SPIN_BACKOFF_MAX), so the more a waiter has collided, the longer it stays away,
 * and after a release usually one waiter tries instead of all of them.
 *
 * Unfair, like the paper says: a newcomer whose first exchange succeeds overtakes
 * waiters that are backing off. The paper's other drawback holds too: a newly freed
 * lock sits idle for up to one delay.
 *
 * The delay is randomised per lock call, cheaply and only on the slow path: a
 * xorshift32 generator seeded from the cycle counter (x86 rdtsc, AArch64 cntvct_el0)
 * mixed with the caller's stack address (distinct per thread), stepped once per delay.
 *
 * Rules for every spinlock kind are in weft/spinlock.h.
 */
#ifndef WEFT_SPINLOCK_BACKOFF_H
#define WEFT_SPINLOCK_BACKOFF_H

#include "weft/spinlock/relax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of the backoff window, in weft_spin_relax() steps: the first delay after a
 * failed exchange is drawn from [0, MIN), and each further failure doubles the window
 * up to [0, MAX). Powers of two. Define them before including to tune them. */
#ifndef WEFT_SPIN_BACKOFF_MIN
#define WEFT_SPIN_BACKOFF_MIN 4u
#endif
#ifndef WEFT_SPIN_BACKOFF_MAX
#define WEFT_SPIN_BACKOFF_MAX 1024u
#endif

/* Lock word: 0 = free, 1 = held. Set by __atomic_exchange_n, cleared by
 * __atomic_store_n, read by waiters with relaxed loads. The backoff state (window,
 * generator) lives in the waiter's frame, not in the lock. */
typedef struct weft_spin_backoff {
  uint32_t held;
} weft_spin_backoff_t;

/* Static initializer: an unlocked lock (so is an all-zero object). */
#define WEFT_SPIN_BACKOFF_INIT WEFT__SPIN_ZERO

/* weft_spin_backoff_init() makes *l an unlocked lock. Not concurrently with any other
 * use of *l. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_backoff_init(weft_spin_backoff_t *l) {
  __atomic_store_n(&l->held, 0u, __ATOMIC_RELAXED); /* published by whatever hands *l over */
}

/* weft_spin_backoff_trylock() takes the lock if it is free: 0 with the lock held, or
 * WEFT_EBUSY (nothing changed). One try, no delay. Callable from anywhere; never
 * switches. */
static inline int weft_spin_backoff_trylock(weft_spin_backoff_t *l) {
  /* Relaxed: only a hint; the exchange below is what acquires. */
  if (__atomic_load_n(&l->held, __ATOMIC_RELAXED) != 0) return WEFT_EBUSY;
  /* free -> held. Acquire pairs with the release store in weft_spin_backoff_unlock(). */
  return __atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) == 0 ? 0 : WEFT_EBUSY;
}

/* A seed for the per-call generator: the cycle counter mixed with a stack address
 * (never 0: xorshift32 would stay at 0). Slow path only. Internal. */
static inline uint32_t weft__spin_backoff_seed(const void *frame) {
  uint64_t t;
#if defined(__x86_64__) || defined(__i386__)
  t = __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(t));
#else
  t = 0;
#endif
  uint64_t x = (t ^ ((uint64_t)(uintptr_t)frame >> 4)) * 0x9E3779B97F4A7C15ull;
  uint32_t s = (uint32_t)(x >> 32);
  return s != 0 ? s : 0x9E3779B9u;
}

/* The slow path of weft_spin_backoff_lock(), entered after a failed exchange. */
static inline void weft__spin_backoff_slow(weft_spin_backoff_t *l) {
  unsigned spins = 0;
  uint32_t limit = WEFT_SPIN_BACKOFF_MIN;
  uint32_t rng = weft__spin_backoff_seed(&spins);
  for (;;) {
    /* Wait, reading our cached copy, until the word reads free. Relaxed: the
     * exchange below is what acquires. */
    while (__atomic_load_n(&l->held, __ATOMIC_RELAXED) != 0) weft__spin_wait(&spins);
    /* Back off a random time in [0, limit) before trying (xorshift32 step). */
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    for (uint32_t d = rng & (limit - 1); d > 0; d--) weft_spin_relax();
    /* Still free? Then try. free -> held; acquire pairs with the release store in
     * weft_spin_backoff_unlock(). */
    if (__atomic_load_n(&l->held, __ATOMIC_RELAXED) == 0 &&
        __atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) == 0)
      return;
    if (limit < WEFT_SPIN_BACKOFF_MAX) limit <<= 1; /* one more collision */
  }
}

/* weft_spin_backoff_lock() waits until it takes the lock: one exchange on the fast
 * path; after a failure, test-and-test-and-set with randomised exponential backoff
 * (above). Not reentrant. Callable from weft threads (never switches the caller),
 * plain OS threads and scheduler handlers. Cannot fail. */
static inline void weft_spin_backoff_lock(weft_spin_backoff_t *l) {
  /* free -> held. Acquire pairs with the release store in weft_spin_backoff_unlock(). */
  if (__atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) != 0) weft__spin_backoff_slow(l);
}

/* weft_spin_backoff_unlock() releases a lock the caller holds (undefined otherwise);
 * any thread may release it (no owner is recorded). Never switches; cannot fail. */
static inline void weft_spin_backoff_unlock(weft_spin_backoff_t *l) {
  /* held -> free. Release pairs with the acquire exchange of the next locker. */
  __atomic_store_n(&l->held, 0u, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
