/* src/core/spin.h - the spinlock of the runtime's internal queues. */
#ifndef WEFT_CORE_SPIN_H
#define WEFT_CORE_SPIN_H

#include <stdatomic.h>
#include <stdint.h>

#include "os/os.h"

/* ---- spinlock for internal queues ----------------------------------------------
 * Lock word: 0 = free, 1 = held. lock: 0 -> 1 by exchange (acquire; pairs with the
 * release store in unlock), spinning on plain loads while held (test-and-test-and-
 * set). unlock: 1 -> 0 (release; pairs with the acquire exchange of the next owner).
 */
typedef struct { _Atomic uint32_t word; } weft__spin_t;

static inline void weft__spin_lock(weft__spin_t *l) {
  while (atomic_exchange_explicit(&l->word, 1, memory_order_acquire)) {
    while (atomic_load_explicit(&l->word, memory_order_relaxed)) weft__os_relax();
  }
}
/* One attempt: 0 -> 1 by exchange (acquire, as in lock) if it looks free. */
static inline int weft__spin_trylock(weft__spin_t *l) {
  return !atomic_load_explicit(&l->word, memory_order_relaxed) &&
         !atomic_exchange_explicit(&l->word, 1, memory_order_acquire);
}
static inline void weft__spin_unlock(weft__spin_t *l) {
  atomic_store_explicit(&l->word, 0, memory_order_release);
}
/* Continuation form of unlock, run after a switch (see weft_yield). */
void weft__spin_unlock_cont(void *lock);

#endif
