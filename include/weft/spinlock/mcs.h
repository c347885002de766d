/* weft/spinlock/mcs.h - MCS list-based queue lock (Mellor-Crummey and Scott 1991;
 * the "implicit queue" of Presto §3.1). Each locker appends a queue node with one
 * exchange on the tail and spins on a flag in its own node; the holder hands the lock
 * to its successor by clearing that flag. FIFO; a release touches one waiter's line;
 * the lock is two pointers however many lock it.
 *
 * Two interfaces on the same lock object, which may be mixed freely:
 *
 *   - Classic MCS, caller-provided node: weft_spin_mcs_lock_node(l, n) ...
 *     weft_spin_mcs_unlock_node(l, n). The node must stay valid and untouched from
 *     lock until unlock returns (a frame variable of the function that holds the
 *     lock is the usual place), and is passed to both calls.
 *
 *   - The uniform interface of every weft spinlock, weft_spin_mcs_lock(l) ...
 *     weft_spin_mcs_unlock(l), with no node: the K42 variant of MCS (Scott, "Shared-
 *     Memory Synchronization", 2013, §4.3.2). A waiter queues a node in its own frame
 *     and spins on it as above; once it owns the lock it moves the link to its
 *     successor into a node embedded in the lock (`q`) and leaves the queue, so its
 *     frame may go as lock() returns. The lock's own node then stands for the holder:
 *     unlock needs no argument. The cost, against the classic form: one more CAS when
 *     a waiter with no successor takes over (to swing the tail from its node to `q`).
 *
 * Rules for every spinlock kind are in weft/spinlock.h.
 */
#ifndef WEFT_SPINLOCK_MCS_H
#define WEFT_SPINLOCK_MCS_H

#include <stddef.h>

#include "weft/spinlock/relax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A queue node. In a locker's node: `next` is its successor (NULL until the successor
 * links itself in), `wait` is WEFT__SPIN_MCS_WAITING while the locker must wait and
 * NULL once the lock is handed to it (written by the previous holder). The lock's
 * embedded node `q` uses the same two words differently, see weft_spin_mcs_t. */
typedef struct weft_spin_mcs_node {
  struct weft_spin_mcs_node *next;
  struct weft_spin_mcs_node *wait;
} weft_spin_mcs_node_t;

/* "Must wait": a value no node has as its address. Internal. */
#define WEFT__SPIN_MCS_WAITING ((weft_spin_mcs_node_t *)(uintptr_t)1)

/* Lock words, in the embedded node q:
 *   q.wait is the TAIL of the queue: NULL = free; otherwise the node of the last
 *     locker, which is the holder itself when nobody waits. A holder that came through
 *     the uniform interface is represented by &q (the K42 trick), so tail == &q means
 *     "held through lock(), no waiters".
 *   q.next is the first waiter behind a holder represented by &q, and NULL in every
 *     other state (also whenever the tail is NULL): a waiter whose predecessor is &q
 *     links itself here, and the uniform unlock clears it before handing over.
 * Zero (tail NULL, next NULL) is an unlocked lock. */
typedef struct weft_spin_mcs {
  weft_spin_mcs_node_t q;
} weft_spin_mcs_t;

/* Static initializer: an unlocked lock (so is an all-zero object). */
#define WEFT_SPIN_MCS_INIT WEFT__SPIN_ZERO

/* weft_spin_mcs_init() makes *l an unlocked lock. Not concurrently with any other use
 * of *l. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_mcs_init(weft_spin_mcs_t *l) {
  /* Relaxed: published by whatever hands *l over. */
  __atomic_store_n(&l->q.wait, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&l->q.next, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
}

/* Spins until *n is handed the lock. Internal. */
static inline void weft__spin_mcs_wait(weft_spin_mcs_node_t *n) {
  unsigned spins = 0;
  /* WAITING -> NULL. Acquire pairs with the release store in weft__spin_mcs_hand_over()
   * (the previous holder's unlock). */
  while (__atomic_load_n(&n->wait, __ATOMIC_ACQUIRE) != NULL) weft__spin_wait(&spins);
}

/* Hands the lock to the waiter `succ`. Internal. */
static inline void weft__spin_mcs_hand_over(weft_spin_mcs_node_t *succ) {
  /* succ: WAITING -> NULL (it holds the lock now). Release pairs with the acquire load
   * in weft__spin_mcs_wait(); after this store succ's frame may be gone. */
  __atomic_store_n(&succ->wait, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELEASE);
}

/* Waits until `pred`'s successor link is set and returns it. Internal. */
static inline weft_spin_mcs_node_t *weft__spin_mcs_await_next(weft_spin_mcs_node_t *pred) {
  weft_spin_mcs_node_t *succ;
  unsigned spins = 0;
  /* Acquire pairs with the release store of the successor's link (lock paths). */
  while ((succ = __atomic_load_n(&pred->next, __ATOMIC_ACQUIRE)) == NULL) weft__spin_wait(&spins);
  return succ;
}

/* ---- classic MCS: the caller provides the node -------------------------------------- */

/* weft_spin_mcs_lock_node() appends *n to the queue and waits for its turn (FIFO).
 * *n must stay valid and unused for anything else until weft_spin_mcs_unlock_node(l, n)
 * returns; its previous contents do not matter. Not reentrant. Callable from weft
 * threads (never switches the caller), plain OS threads and scheduler handlers. Cannot
 * fail. */
static inline void weft_spin_mcs_lock_node(weft_spin_mcs_t *l, weft_spin_mcs_node_t *n) {
  /* Relaxed: the exchange below publishes them (release). */
  __atomic_store_n(&n->next, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&n->wait, WEFT__SPIN_MCS_WAITING, __ATOMIC_RELAXED);
  /* tail -> n. Release publishes *n to whoever next reads the tail; acquire pairs with
   * the release of the previous tail write (its node's contents) or, when the lock was
   * free, with the release CAS of the last unlock (the critical sections before us). */
  weft_spin_mcs_node_t *pred = __atomic_exchange_n(&l->q.wait, n, __ATOMIC_ACQ_REL);
  if (pred == NULL) return; /* free -> held by n, no waiters */
  /* Link in behind pred (pred may be &l->q: a holder through the uniform interface).
   * Release pairs with the acquire load of pred's link in the unlock paths. */
  __atomic_store_n(&pred->next, n, __ATOMIC_RELEASE);
  weft__spin_mcs_wait(n);
}

/* weft_spin_mcs_trylock_node() takes the lock with node *n if the lock is free: 0 with
 * the lock held (release it with weft_spin_mcs_unlock_node(l, n)), or WEFT_EBUSY
 * (nothing changed). Callable from anywhere; never switches. */
static inline int weft_spin_mcs_trylock_node(weft_spin_mcs_t *l, weft_spin_mcs_node_t *n) {
  __atomic_store_n(&n->next, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&n->wait, WEFT__SPIN_MCS_WAITING, __ATOMIC_RELAXED);
  weft_spin_mcs_node_t *expect = NULL;
  /* tail NULL -> n. Release publishes *n; acquire pairs with the last unlock's release. */
  return __atomic_compare_exchange_n(&l->q.wait, &expect, n, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED)
             ? 0
             : WEFT_EBUSY;
}

/* weft_spin_mcs_unlock_node() releases a lock taken with node *n (undefined
 * otherwise): hands it to the successor, or frees it when none. Once it returns *n is
 * no longer referenced. Waits (spinning) only if a successor is between its tail
 * exchange and its link. Never switches; cannot fail. */
static inline void weft_spin_mcs_unlock_node(weft_spin_mcs_t *l, weft_spin_mcs_node_t *n) {
  /* Acquire pairs with the successor's release store of our link. */
  weft_spin_mcs_node_t *succ = __atomic_load_n(&n->next, __ATOMIC_ACQUIRE);
  if (succ == NULL) {
    weft_spin_mcs_node_t *expect = n;
    /* tail n -> NULL: held -> free. Release pairs with the acquire of the next tail
     * exchange/CAS (the next locker sees our critical section). */
    if (__atomic_compare_exchange_n(&l->q.wait, &expect, (weft_spin_mcs_node_t *)NULL, 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      return;
    succ = weft__spin_mcs_await_next(n); /* a locker swapped the tail, link is coming */
  }
  weft__spin_mcs_hand_over(succ);
}

/* ---- uniform interface: K42 MCS, no node in the caller's hands ---------------------- */

/* weft_spin_mcs_trylock() takes the lock if it is free: 0 with the lock held (release
 * it with weft_spin_mcs_unlock()), or WEFT_EBUSY (nothing changed). Callable from
 * anywhere; never switches. */
static inline int weft_spin_mcs_trylock(weft_spin_mcs_t *l) {
  weft_spin_mcs_node_t *expect = NULL;
  /* tail NULL -> &q (held, no waiters). Acquire pairs with the last unlock's release
   * CAS. q.next is already NULL (invariant above). */
  return __atomic_compare_exchange_n(&l->q.wait, &expect, &l->q, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)
             ? 0
             : WEFT_EBUSY;
}

/* weft_spin_mcs_lock() waits for its turn in the MCS queue (FIFO), spinning on a node
 * in its own frame, then folds its place into the lock (see the top of this file). Not
 * reentrant. Callable from weft threads (never switches the caller), plain OS threads
 * and scheduler handlers. Cannot fail. */
static inline void weft_spin_mcs_lock(weft_spin_mcs_t *l) {
  weft_spin_mcs_node_t *q = &l->q;
  unsigned spins = 0;
  for (;;) {
    /* Relaxed: the CAS below decides. */
    weft_spin_mcs_node_t *pred = __atomic_load_n(&q->wait, __ATOMIC_RELAXED);
    if (pred == NULL) {
      weft_spin_mcs_node_t *expect = NULL;
      /* tail NULL -> &q: free -> held, no waiters. Acquire pairs with the release CAS
       * of the last unlock. */
      if (__atomic_compare_exchange_n(&q->wait, &expect, q, 0, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED))
        return;
    } else {
      weft_spin_mcs_node_t n;
      __atomic_store_n(&n.next, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
      __atomic_store_n(&n.wait, WEFT__SPIN_MCS_WAITING, __ATOMIC_RELAXED);
      weft_spin_mcs_node_t *expect = pred;
      /* tail pred -> &n. Release publishes n; acquire pairs with the release of the
       * write that made pred the tail. */
      if (__atomic_compare_exchange_n(&q->wait, &expect, &n, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED)) {
        /* Release pairs with the acquire load of pred's link in the unlock paths. */
        __atomic_store_n(&pred->next, &n, __ATOMIC_RELEASE);
        weft__spin_mcs_wait(&n);
        /* We hold the lock; leave the queue: move our successor link into q. */
        weft_spin_mcs_node_t *succ = __atomic_load_n(&n.next, __ATOMIC_ACQUIRE);
        if (succ == NULL) {
          /* Relaxed: q.next is NULL already (nobody could link behind &q since our
           * predecessor left it); stated again before we make &q the tail. */
          __atomic_store_n(&q->next, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
          expect = &n;
          /* tail &n -> &q: "held by n, no waiters" -> "held through q". Release orders
           * the q.next store before any waiter can link behind &q; acquire is not
           * needed (we hold the lock already). */
          if (__atomic_compare_exchange_n(&q->wait, &expect, q, 0, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED))
            return;
          succ = weft__spin_mcs_await_next(&n); /* someone queued behind n meanwhile */
        }
        /* Relaxed: only the holder writes q.next while the tail is not &q; our unlock
         * (this thread, or one the lock is passed to with release/acquire) reads it. */
        __atomic_store_n(&q->next, succ, __ATOMIC_RELAXED);
        return; /* nobody references n any more: the tail is past it, succ is in q */
      }
    }
    weft__spin_wait(&spins); /* the tail moved under us: retry */
  }
}

/* weft_spin_mcs_unlock() releases a lock taken with weft_spin_mcs_lock() or
 * weft_spin_mcs_trylock() (undefined otherwise): hands it to the first waiter, or frees
 * it when none. Any thread may release it (the holder is the lock's own node). Waits
 * (spinning) only if a waiter is between its tail CAS and its link. Never switches;
 * cannot fail. */
static inline void weft_spin_mcs_unlock(weft_spin_mcs_t *l) {
  weft_spin_mcs_node_t *q = &l->q;
  /* Acquire pairs with the release store of the first waiter's link into q.next. */
  weft_spin_mcs_node_t *succ = __atomic_load_n(&q->next, __ATOMIC_ACQUIRE);
  if (succ == NULL) {
    weft_spin_mcs_node_t *expect = q;
    /* tail &q -> NULL: held -> free. Release pairs with the acquire of the next tail
     * exchange/CAS. */
    if (__atomic_compare_exchange_n(&q->wait, &expect, (weft_spin_mcs_node_t *)NULL, 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      return;
    succ = weft__spin_mcs_await_next(q);
  }
  /* Keep q.next NULL unless a holder represented by &q has a waiter (invariant above):
   * succ may hold the lock through its own node now. Ordered before the hand-over by
   * its release. */
  __atomic_store_n(&q->next, (weft_spin_mcs_node_t *)NULL, __ATOMIC_RELAXED);
  weft__spin_mcs_hand_over(succ);
}

#ifdef __cplusplus
}
#endif
#endif
