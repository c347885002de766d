/* weft/spinlock/ticket.h - ticket lock: a locker takes the next ticket with one
 * fetch-and-add and waits until the "now serving" counter reaches it. FIFO (fair), one
 * atomic read-modify-write per acquisition, an ordinary store to release; every
 * waiter spins on the same word, so each release invalidates all of them.
 *
 * Rules for every spinlock kind are in weft/spinlock.h.
 */
#ifndef WEFT_SPINLOCK_TICKET_H
#define WEFT_SPINLOCK_TICKET_H

#include "weft/spinlock/relax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lock words: `next` is the ticket the next locker gets (fetch-and-add by lockers,
 * CAS by trylock); `serving` is the ticket allowed to hold the lock (written only by
 * the holder, in unlock). Free when next == serving; held with next - serving - 1
 * waiters otherwise. Both start at 0, so zero is an unlocked lock. Tickets wrap modulo
 * 2^32, which only compares them for equality: correct with fewer than 2^32 threads. */
typedef struct weft_spin_ticket {
  uint32_t next;
  uint32_t serving;
} weft_spin_ticket_t;

/* Static initializer: an unlocked lock (so is an all-zero object). */
#define WEFT_SPIN_TICKET_INIT WEFT__SPIN_ZERO

/* weft_spin_ticket_init() makes *l an unlocked lock. Not concurrently with any other
 * use of *l. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_ticket_init(weft_spin_ticket_t *l) {
  __atomic_store_n(&l->next, 0u, __ATOMIC_RELAXED); /* published by whatever hands *l over */
  __atomic_store_n(&l->serving, 0u, __ATOMIC_RELAXED);
}

/* weft_spin_ticket_trylock() takes the lock if it is free (no ticket is outstanding):
 * 0 with the lock held, or WEFT_EBUSY (nothing changed). Callable from anywhere; never
 * switches. */
static inline int weft_spin_ticket_trylock(weft_spin_ticket_t *l) {
  /* Acquire pairs with the release store of `serving` in weft_spin_ticket_unlock(). */
  uint32_t s = __atomic_load_n(&l->serving, __ATOMIC_ACQUIRE);
  /* next == s -> next == s + 1: take ticket s only if nobody holds or waits. `serving`
   * only grows and next >= serving, so next == s also means serving is still s. */
  uint32_t expect = s;
  return __atomic_compare_exchange_n(&l->next, &expect, s + 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)
             ? 0
             : WEFT_EBUSY;
}

/* weft_spin_ticket_lock() takes a ticket and waits for its turn: acquisitions are
 * granted in the order of the fetch-and-adds. Not reentrant. Callable from weft
 * threads (never switches the caller), plain OS threads and scheduler handlers. Cannot
 * fail. */
static inline void weft_spin_ticket_lock(weft_spin_ticket_t *l) {
  /* Relaxed: the ticket only orders us among lockers; the wait below acquires. */
  uint32_t me = __atomic_fetch_add(&l->next, 1u, __ATOMIC_RELAXED);
  unsigned spins = 0;
  /* Acquire pairs with the release store of `serving` in weft_spin_ticket_unlock(). */
  while (__atomic_load_n(&l->serving, __ATOMIC_ACQUIRE) != me) weft__spin_wait(&spins);
}

/* weft_spin_ticket_unlock() releases a lock the caller holds (undefined otherwise),
 * handing it to the next ticket. Any thread may release it (the ticket is read from
 * the lock). Never switches; cannot fail. */
static inline void weft_spin_ticket_unlock(weft_spin_ticket_t *l) {
  /* Relaxed: only the holder writes `serving`. */
  uint32_t s = __atomic_load_n(&l->serving, __ATOMIC_RELAXED);
  /* serving s -> s + 1. Release pairs with the acquire load of the next ticket's waiter
   * (or of a trylock). */
  __atomic_store_n(&l->serving, s + 1, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
