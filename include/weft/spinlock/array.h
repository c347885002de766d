/* weft/spinlock/array.h - Anderson's array-based queue lock (FastThreads Table 4.1):
 * each locker takes a sequence number with one fetch-and-add ("ReadAndIncrement(
 * queueLast)") and spins on its own slot, slots[myPlace mod N], each slot on its own
 * cache line; the holder releases by writing the next slot only. FIFO, one atomic
 * read-modify-write per acquisition, and a release invalidates one waiter's line, not
 * every waiter's.
 *
 * Encoding (differs from Table 4.1 so that zero is an unlocked lock and so that no
 * waiter has to reset its flag): a slot holds the sequence number that may take the
 * lock next through it, instead of a HAS_LOCK/MUST_WAIT flag. Waiter t spins until
 * slots[t mod N] == t; the holder t releases by storing t + 1 into slots[(t + 1) mod N].
 * With every slot 0, slot 0 "has the lock" (ticket 0 may go) and slot i > 0 "must wait"
 * (0 != i): Table 4.1's initial state.
 *
 * More than WEFT_SPIN_ARRAY_SLOTS concurrent lockers: still correct and still FIFO.
 * Tickets t and t + N share a slot, but t + N waits for the value t + N, which only
 * ticket t + N - 1 writes, on release; the values written to one slot only grow (by
 * N each time; N divides 2^32, so wrap-around keeps this). The waiters that share a
 * slot lose the one-waiter-per-line property and see each other's releases, as with a
 * ticket lock. Keep N at least the number of processors that may spin on one lock.
 *
 * Size: (2 + N) cache lines, 4.2 KB with the defaults. Rules for every spinlock kind
 * are in weft/spinlock.h.
 */
#ifndef WEFT_SPINLOCK_ARRAY_H
#define WEFT_SPINLOCK_ARRAY_H

#include "weft/spinlock/relax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Slots per lock: a power of two, at most 2^31. See above for more lockers. */
#ifndef WEFT_SPIN_ARRAY_SLOTS
#define WEFT_SPIN_ARRAY_SLOTS 64
#endif
#if (WEFT_SPIN_ARRAY_SLOTS & (WEFT_SPIN_ARRAY_SLOTS - 1)) != 0 || WEFT_SPIN_ARRAY_SLOTS < 2
#error "WEFT_SPIN_ARRAY_SLOTS must be a power of two >= 2"
#endif

/* One waiter's flag, alone on its cache line. `seq`: the sequence number allowed to take
 * the lock through this slot (see the encoding above); written by the releasing
 * holder, read by the waiter(s) of this slot. */
typedef struct weft__spin_array_slot {
  uint32_t seq;
  char pad[WEFT_SPIN_CACHE_LINE - sizeof(uint32_t)];
} __attribute__((aligned(WEFT_SPIN_CACHE_LINE))) weft__spin_array_slot_t;

/* Lock words: `next` ("queueLast") is the next sequence number, taken by fetch-and-add
 * (CAS in trylock); `holder` is the sequence number of the current holder ("myPlace"),
 * written by the new holder after it acquires and read by it in unlock (holder only);
 * slots as above. Free when slots[next mod N].seq == next. Each on its own line. */
typedef struct weft_spin_array {
  uint32_t next;
  char pad0[WEFT_SPIN_CACHE_LINE - sizeof(uint32_t)];
  uint32_t holder;
  char pad1[WEFT_SPIN_CACHE_LINE - sizeof(uint32_t)];
  weft__spin_array_slot_t slots[WEFT_SPIN_ARRAY_SLOTS];
} __attribute__((aligned(WEFT_SPIN_CACHE_LINE))) weft_spin_array_t;

/* Static initializer: an unlocked lock (so is an all-zero object). */
#define WEFT_SPIN_ARRAY_INIT WEFT__SPIN_ZERO

/* weft_spin_array_init() makes *l an unlocked lock. Not concurrently with any other
 * use of *l. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_array_init(weft_spin_array_t *l) {
  /* Relaxed: published by whatever hands *l over. */
  __atomic_store_n(&l->next, 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&l->holder, 0u, __ATOMIC_RELAXED);
  for (uint32_t i = 0; i < WEFT_SPIN_ARRAY_SLOTS; i++)
    __atomic_store_n(&l->slots[i].seq, 0u, __ATOMIC_RELAXED);
}

/* weft_spin_array_trylock() takes the lock if it is free (the next sequence number may
 * go and nobody has taken it): 0 with the lock held, or WEFT_EBUSY (nothing changed).
 * Callable from anywhere; never switches. */
static inline int weft_spin_array_trylock(weft_spin_array_t *l) {
  /* Relaxed: the CAS below confirms it. */
  uint32_t t = __atomic_load_n(&l->next, __ATOMIC_RELAXED);
  /* Acquire pairs with the release store into this slot in weft_spin_array_unlock(). */
  if (__atomic_load_n(&l->slots[t % WEFT_SPIN_ARRAY_SLOTS].seq, __ATOMIC_ACQUIRE) != t)
    return WEFT_EBUSY;
  /* next t -> t + 1: take number t if still nobody has. Value t in its slot can only
   * have been written by the release of t - 1 (or be the initial 0 for t = 0), and
   * stays until t + N - 1 releases, which needs t taken: so t may go. */
  uint32_t expect = t;
  if (!__atomic_compare_exchange_n(&l->next, &expect, t + 1, 0, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED))
    return WEFT_EBUSY;
  __atomic_store_n(&l->holder, t, __ATOMIC_RELAXED); /* holder only: read by our unlock */
  return 0;
}

/* weft_spin_array_lock() takes a sequence number and spins on its slot until the
 * previous holder passes the lock on: FIFO. Not reentrant. Callable from weft threads
 * (never switches the caller), plain OS threads and scheduler handlers. Cannot fail. */
static inline void weft_spin_array_lock(weft_spin_array_t *l) {
  /* Relaxed: the number only orders us among lockers; the wait below acquires. */
  uint32_t t = __atomic_fetch_add(&l->next, 1u, __ATOMIC_RELAXED);
  uint32_t *flag = &l->slots[t % WEFT_SPIN_ARRAY_SLOTS].seq;
  unsigned spins = 0;
  /* Acquire pairs with the release store into this slot in weft_spin_array_unlock(). */
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != t) weft__spin_wait(&spins);
  __atomic_store_n(&l->holder, t, __ATOMIC_RELAXED); /* holder only: read by our unlock */
}

/* weft_spin_array_unlock() releases a lock the caller holds (undefined otherwise) by
 * writing the next sequence number into the next slot. Any thread may release it
 * (the holder's number is kept in the lock). Never switches; cannot fail. */
static inline void weft_spin_array_unlock(weft_spin_array_t *l) {
  /* Relaxed: written by this holder after it acquired (or by a thread that handed the
   * lock to us with a release/acquire pair). */
  uint32_t t = __atomic_load_n(&l->holder, __ATOMIC_RELAXED) + 1;
  /* slots[t mod N]: "must wait" -> "has the lock" for number t. Release pairs with the
   * acquire load of that slot's waiter (lock) or of a trylock. */
  __atomic_store_n(&l->slots[t % WEFT_SPIN_ARRAY_SLOTS].seq, t, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
