/* src/sync/rwlock.c - reader/writer locks (weft/rwlock.h).
 *
 * Lock word:  bit 0  W  a writer holds it
 *             bit 1  Q  the wait queue is not empty (changed only under qlock)
 *             bit 2  C  a waiter woken to compete has not come back yet (qlock)
 *             bits 3+   readers holding it (R, in units of 8)
 * Fast paths (no qlock) work only while Q is clear (C does not matter to them):
 *   read lock    (W|Q) clear: CAS +8, acquire (pairs with unlock's release)
 *   write lock   word 0 (or C) -> |W CAS, acquire
 *   write unlock clear W by CAS, release; with Q set: slow
 *   read unlock  -8 fetch_sub, release; the last reader with Q set (old == 8|Q,
 *                C aside) takes the slow path
 * While Q is set the only change made outside qlock is a reader's -8, so the
 * slow paths, under qlock, decide who gets the lock: grant() serves the queue
 * from its head, a writer alone or every reader up to the next writer.
 *
 * Hand-off and competition. A weft waiter, or any waiter that runs grant itself,
 * is handed the lock: grant sets the word for it before waking it. A plain OS
 * waiter asleep in the kernel takes microseconds to run once woken, and a lock
 * handed to it would sit idle that long. So when the head is such a waiter and
 * the lock is free for it, grant only dequeues it, sets C and wakes it to
 * compete: while C is set, slow-path arrivals take the lock when it is free for
 * them (barge) even though others wait, and grant serves nobody (the competitor
 * goes first). The competitor, back under qlock, clears C and takes the lock if
 * it can; if a barger holds it, it goes back to the head of the queue, having
 * lost once. A waiter that has lost RW_PASS_MAX times is handed the lock like a
 * weft waiter. So each waiter is overtaken only during its own (at most
 * RW_PASS_MAX) competition windows, and the queue behind it does not move
 * meanwhile: neither readers nor writers starve.
 */
#include "sync/sync.h"

enum {
  RW_W = 1u, RW_Q = 2u, RW_C = 4u, RW_R = 8u,
  MODE_READ = 1, MODE_WRITE = 2, MODE_COMPETE = 4,  /* waiter.mode */
  MODE_EAGAIN = 8,  /* a reader served while the readers' count was full: it fails */
  RW_PASS_MAX = 8  /* competitions an OS waiter may lose before it is handed the lock */
};
#define RW_RMAX (UINT32_MAX & ~7u)

typedef struct weft__rwlock {
  _Atomic uint32_t word;
  weft__spin_t qlock;
  weft__wq_t q;            /* qlock */
} weft__rwlock_t;

_Static_assert(sizeof(weft__rwlock_t) == sizeof(weft_rwlock_t), "rwlock layout");
_Static_assert(offsetof(weft__rwlock_t, q) == offsetof(weft_rwlock_t, head_), "rwlock layout");
#define L(l) ((weft__rwlock_t *)(void *)(l))

int weft__rwlock_waiting(const weft_rwlock_t *l) {
  weft__rwlock_t *x = L((weft_rwlock_t *)(uintptr_t)l);
  return weft__wq_waiting(&x->qlock, &x->q);
}

int weft_rwlock_init(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  *l = (weft_rwlock_t)WEFT_RWLOCK_INIT;
  return 0;
}

int weft_rwlock_destroy(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  weft__qlock_lock(&x->qlock);
  int busy = atomic_load_explicit(&x->word, memory_order_acquire) != 0 || x->q.head != NULL;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

static inline int cas(weft__rwlock_t *x, uint32_t *v, uint32_t to) {
  /* acq_rel: acquire when taking the lock (pairs with unlock's release); release
   * when a granter publishes the word for the threads it hands the lock to */
  return atomic_compare_exchange_strong_explicit(&x->word, v, to, memory_order_acq_rel,
                                                 memory_order_relaxed);
}

/* Serves the queue (qlock held). Claimed waiters go into *ws, woken by the caller
 * after qlock is dropped. `self` (the caller's own waiter, or NULL) is claimed but
 * not added: the caller sees its state instead. A plain OS waiter other than self
 * at the head, with passes to spare, is woken to compete instead (see the top). */
static void grant(weft__rwlock_t *x, weft__wakeset_t *ws, weft__waiter_t *self) {
  weft__waiter_t *w;
  int served = 0;
  while ((w = x->q.head) != NULL) {
    uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
    if (v & RW_C) break;                         /* the competitor goes first */
    uint32_t mode = w->mode;  /* read before the claim: an OS waiter may leave */
    if (mode == MODE_WRITE ? v != RW_Q : (v & RW_W) != 0) break;  /* held */
    if (!served && w != self && !w->t && w->passes < RW_PASS_MAX) {
      weft__wq_pop(&x->q);
      w->mode = mode | MODE_COMPETE;  /* published by the claim's release */
      atomic_fetch_or_explicit(&x->word, RW_C, memory_order_relaxed); /* under qlock */
      if (weft__wakeset_claim(ws, w)) break;
      atomic_fetch_and_explicit(&x->word, ~RW_C, memory_order_relaxed); /* timed out */
      continue;
    }
    if (mode == MODE_WRITE) {
      v = RW_Q;
      if (!cas(x, &v, RW_Q | RW_W)) break;     /* a reader came in meanwhile */
    } else if (v >= RW_RMAX) {
      /* the readers' count is full: this reader fails with WEFT_EAGAIN, as take() and
       * the fast paths do (added, the count wrapped to 0 and the lock looked free to a
       * writer while every reader still held it). The mode is published by the claim's
       * release; the word is untouched. */
      weft__wq_pop(&x->q);
      w->mode = mode | MODE_EAGAIN;
      if (w == self) (void)weft__waiter_claim(w);
      else (void)weft__wakeset_claim(ws, w);
      continue;
    } else {
      atomic_fetch_add_explicit(&x->word, RW_R, memory_order_acq_rel);
    }
    weft__wq_pop(&x->q);
    int won = w == self ? weft__waiter_claim(w) : weft__wakeset_claim(ws, w);
    if (!won) {                                 /* it timed out: undo, go on */
      if (mode == MODE_WRITE) atomic_fetch_and_explicit(&x->word, ~RW_W, memory_order_release);
      else atomic_fetch_sub_explicit(&x->word, RW_R, memory_order_release);
      continue;
    }
    served = 1;
    if (mode == MODE_WRITE) break;
  }
  if (!x->q.head) atomic_fetch_and_explicit(&x->word, ~RW_Q, memory_order_release);
}

/* Takes the lock in `mode` if it is free for that mode, whoever waits (qlock
 * held): 0, 1 if held, or WEFT_EAGAIN (too many readers). */
static int take(weft__rwlock_t *x, int mode) {
  uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
  if (mode == MODE_READ) {
    while (!(v & RW_W)) {
      if (v >= RW_RMAX) return WEFT_EAGAIN;
      if (cas(x, &v, v + RW_R)) return 0;
    }
    return 1;
  }
  while (!(v & ~(RW_Q | RW_C)))
    if (cas(x, &v, v | RW_W)) return 0;
  return 1;
}

static int lock_slow(weft__rwlock_t *x, int mode, uint64_t deadline) {
  weft__waiter_t w;
  weft__waiter_init(&w, deadline);
  w.mode = (uint32_t)mode;
  w.passes = 0;
  /* a deadline already past still gets the lock if it is free for this mode (the
   * fast path's one CAS may have lost to another reader's): it only does not wait */
  int expired = 0;
  if (w.t && deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) {
      expired = 1;
    } else {
      int rc = weft__timer_reserve(weft__vp());
      if (rc) return rc;
    }
  }
  weft__qlock_lock(&x->qlock);
  /* nobody waits, or the waiter at the head is on its way to compete: barge */
  if (!x->q.head || (atomic_load_explicit(&x->word, memory_order_relaxed) & RW_C)) {
    int rc = take(x, mode);
    if (rc <= 0) {
      weft__spin_unlock(&x->qlock);
      return rc;
    }
  }
  if (expired) {  /* timed out before it waited: counted too */
    weft__spin_unlock(&x->qlock);
    weft__sync_count(WEFT__ST_TIMEOUT);
    return WEFT_ETIMEDOUT;
  }
  weft__wq_push(&x->q, &w);
  weft__wakeset_t ws;
  for (;;) {
    atomic_fetch_or_explicit(&x->word, RW_Q, memory_order_relaxed); /* under qlock */
    /* the holder may have left before Q was set, on a fast path: serve the queue */
    weft__wakeset_init(&ws);
    grant(x, &ws, &w);
    if (atomic_load_explicit(&w.state, memory_order_relaxed) == WEFT__W_SIGNALED) {
      weft__spin_unlock(&x->qlock);
      weft__wakeset_run(&ws);
      return w.mode & MODE_EAGAIN ? WEFT_EAGAIN : 0;
    }
    /* grant may have served waiters ahead of ours (those behind a writer that has
     * since gone): wake them now, under qlock (rare), since the wait below drops it
     * only once this thread is blocked */
    weft__wakeset_run(&ws);
    if (weft__wait_q(&w, WEFT__WAITING(x, WEFT__WK_RWLOCK), &x->qlock) != WEFT__W_SIGNALED) break;
    if (w.mode & MODE_EAGAIN) return WEFT_EAGAIN;  /* the readers' count was full */
    if (!(w.mode & MODE_COMPETE)) return 0;   /* handed the lock */
    /* woken to compete: it goes before every waiter, but bargers may hold it */
    w.mode &= ~(uint32_t)MODE_COMPETE;
    weft__qlock_lock(&x->qlock);
    atomic_fetch_and_explicit(&x->word, ~RW_C, memory_order_relaxed); /* under qlock */
    int rc = take(x, mode);
    if (rc <= 0) {
      weft__wakeset_init(&ws);
      grant(x, &ws, NULL);  /* a reader lets the readers queued behind it in */
      weft__spin_unlock(&x->qlock);
      weft__wakeset_run(&ws);
      return rc;
    }
    /* lost: back to the head, to be handed the lock once it has lost too often.
     * Nobody else sees w while it is unlinked: a plain store resets it. */
    w.passes++;
    atomic_store_explicit(&w.state, WEFT__W_WAITING, memory_order_relaxed);
    weft__wq_push_front(&x->q, &w);
  }
  weft__qlock_lock(&x->qlock);
  weft__wakeset_init(&ws);
  if (w.linked) {
    weft__wq_remove(&x->q, &w);
    grant(x, &ws, NULL);   /* a writer leaving the head may let readers in */
  }
  weft__spin_unlock(&x->qlock);
  weft__wakeset_run(&ws);
  weft__sync_count(WEFT__ST_TIMEOUT);
  return WEFT_ETIMEDOUT;
}

static void unlock_slow(weft__rwlock_t *x, int writer) {
  weft__wakeset_t ws;
  weft__wakeset_init(&ws);
  weft__qlock_lock(&x->qlock);
  if (writer) atomic_fetch_and_explicit(&x->word, ~RW_W, memory_order_release);
  grant(x, &ws, NULL);
  weft__spin_unlock(&x->qlock);
  weft__wakeset_run(&ws);
}

int weft_rwlock_timedrdlock(weft_rwlock_t *l, uint64_t deadline) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
  if (WEFT__LIKELY(!(v & (RW_W | RW_Q)) && v < RW_RMAX && cas(x, &v, v + RW_R))) return 0;
  return lock_slow(x, MODE_READ, deadline);
}

int weft_rwlock_rdlock(weft_rwlock_t *l) { return weft_rwlock_timedrdlock(l, WEFT_FOREVER); }

int weft_rwlock_tryrdlock(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
  while (!(v & (RW_W | RW_Q))) {
    if (v >= RW_RMAX) return WEFT_EAGAIN;
    if (cas(x, &v, v + RW_R)) return 0;
  }
  return WEFT_EBUSY;
}

int weft_rwlock_timedwrlock(weft_rwlock_t *l, uint64_t deadline) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  uint32_t v = 0;
  if (WEFT__LIKELY(cas(x, &v, RW_W))) return 0;
  if (v == RW_C && cas(x, &v, RW_C | RW_W)) return 0;  /* nobody queued: barge */
  return lock_slow(x, MODE_WRITE, deadline);
}

int weft_rwlock_wrlock(weft_rwlock_t *l) { return weft_rwlock_timedwrlock(l, WEFT_FOREVER); }

int weft_rwlock_trywrlock(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  uint32_t v = 0;
  if (cas(x, &v, RW_W)) return 0;
  return v == RW_C && cas(x, &v, RW_C | RW_W) ? 0 : WEFT_EBUSY;
}

int weft_rwlock_unlock(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
  if (v & RW_W) {
    v = RW_W;
    if (WEFT__LIKELY(cas(x, &v, 0))) return 0;
    while (!(v & RW_Q))                        /* C set, nobody queued */
      if (cas(x, &v, v & ~RW_W)) return 0;
    unlock_slow(x, 1);
    return 0;
  }
  if (v < RW_R) return WEFT_EPERM;
  /* release: pairs with the acquire of the next writer */
  uint32_t old = atomic_fetch_sub_explicit(&x->word, RW_R, memory_order_release);
  if (WEFT__UNLIKELY((old & ~RW_C) == (RW_R | RW_Q))) unlock_slow(x, 0);
  return 0;
}
