/* weft/spinlock/tas.h - test-and-set spinlock: every waiter spins on the atomic
 * exchange itself (FastThreads §4 "spinning on the xchgb instruction", Presto's original
 * Spinlock of Presto §3.1). The smallest and, uncontended, the fastest lock; under
 * contention each failed exchange takes the line exclusive and slows the holder.
 *
 * Rules for every spinlock kind are in weft/spinlock.h: short critical sections that
 * never block, yield or otherwise switch the holder.
 */
#ifndef WEFT_SPINLOCK_TAS_H
#define WEFT_SPINLOCK_TAS_H

#include "weft/spinlock/relax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lock word: 0 = free, 1 = held. Written only by __atomic_exchange_n (lock) and
 * __atomic_store_n (unlock); no owner is recorded. */
typedef struct weft_spin_tas {
  uint32_t held;
} weft_spin_tas_t;

/* Static initializer: an unlocked lock (so is an all-zero object). */
#define WEFT_SPIN_TAS_INIT WEFT__SPIN_ZERO

/* weft_spin_tas_init() makes *l an unlocked lock. Not concurrently with any other use
 * of *l. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_tas_init(weft_spin_tas_t *l) {
  __atomic_store_n(&l->held, 0u, __ATOMIC_RELAXED); /* published by whatever hands *l over */
}

/* weft_spin_tas_trylock() takes the lock if it is free. Returns 0 with the lock held,
 * or WEFT_EBUSY (nothing changed) if it is held, by anyone including the caller.
 * Callable from weft threads, plain OS threads, scheduler handlers; never switches. */
static inline int weft_spin_tas_trylock(weft_spin_tas_t *l) {
  /* free -> held. Acquire pairs with the release store in weft_spin_tas_unlock(). */
  return __atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) == 0 ? 0 : WEFT_EBUSY;
}

/* weft_spin_tas_lock() waits, spinning on the exchange, until it takes the lock. Not
 * reentrant: locking a lock the caller holds spins forever. Callable from weft threads
 * (never switches the caller: see weft/spinlock.h for what that demands of the holder),
 * plain OS threads and scheduler handlers. Cannot fail. */
static inline void weft_spin_tas_lock(weft_spin_tas_t *l) {
  unsigned spins = 0;
  /* free -> held. Acquire pairs with the release store in weft_spin_tas_unlock(). */
  while (__atomic_exchange_n(&l->held, 1u, __ATOMIC_ACQUIRE) != 0) weft__spin_wait(&spins);
}

/* weft_spin_tas_unlock() releases a lock the caller holds (undefined otherwise). Any
 * thread, including a plain OS thread, may release a lock another thread took: no
 * owner is recorded. Never switches; cannot fail. */
static inline void weft_spin_tas_unlock(weft_spin_tas_t *l) {
  /* held -> free. Release pairs with the acquire exchange of the next locker. */
  __atomic_store_n(&l->held, 0u, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
