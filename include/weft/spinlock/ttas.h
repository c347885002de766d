/* weft/spinlock/ttas.h - test-and-test-and-set spinlock: a waiter spins reading the
 * word in its own cache and tries the exchange only when it reads "free" (FastThreads §4
 * "spinning on a read"). Quiet while the lock is held; every release still sends all
 * waiters to the exchange at once.
 *
 * Rules for every spinlock kind are in weft/spinlock.h.
 */
#ifndef WEFT_SPINLOCK_TTAS_H
#define WEFT_SPINLOCK_TTAS_H

#include "weft/spinlock/relax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lock word: 0 = free, 1 = held. Set by __atomic_exchange_n, cleared by
 * __atomic_store_n, read by waiters with relaxed loads. */
typedef struct weft_spin_ttas {
  uint32_t held;
} weft_spin_ttas_t;

/* Static initializer: an unlocked lock (so is an all-zero object). */
#define WEFT_SPIN_TTAS_INIT WEFT__SPIN_ZERO

/* weft_spin_ttas_init() makes *l an unlocked lock. Not concurrently with any other
 * use of *l. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_ttas_init(weft_spin_ttas_t *l) {
  __atomic_store_n(&l->held, 0u, __ATOMIC_RELAXED); /* published by whatever hands *l over */
}

/* weft_spin_ttas_trylock() takes the lock if it is free: 0 with the lock held, or
 * WEFT_EBUSY (nothing changed). Reads first, so a failing trylock does not take the
 * line exclusive. Callable from anywhere; never switches. */
static inline int weft_spin_ttas_trylock(weft_spin_ttas_t *l) {
  /* Relaxed: only a hint; the exchange below is what acquires. */
  if (__atomic_load_n(&l->held, __ATOMIC_RELAXED) != 0) return WEFT_EBUSY;
  /* free -> held. Acquire pairs with the release store in weft_spin_ttas_unlock(). */
  return __atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) == 0 ? 0 : WEFT_EBUSY;
}

/* weft_spin_ttas_lock() waits until it takes the lock: it tries the exchange, and
 * after a failure spins on plain reads until the word reads free. Not reentrant.
 * Callable from weft threads (never switches the caller), plain OS threads and
 * scheduler handlers. Cannot fail. */
static inline void weft_spin_ttas_lock(weft_spin_ttas_t *l) {
  unsigned spins = 0;
  /* free -> held. Acquire pairs with the release store in weft_spin_ttas_unlock(). */
  while (__atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) != 0) {
    /* Relaxed: the spin only waits for "free"; the next exchange acquires. */
    do weft__spin_wait(&spins);
    while (__atomic_load_n(&l->held, __ATOMIC_RELAXED) != 0);
  }
}

/* weft_spin_ttas_unlock() releases a lock the caller holds (undefined otherwise); any
 * thread may release it (no owner is recorded). Never switches; cannot fail. */
static inline void weft_spin_ttas_unlock(weft_spin_ttas_t *l) {
  /* held -> free. Release pairs with the acquire exchange of the next locker. */
  __atomic_store_n(&l->held, 0u, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
