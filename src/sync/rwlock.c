/* src/sync/rwlock.c - reader/writer locks (weft/rwlock.h).
 *
 * Lock word:  bit 0  W  a writer holds it
 *             bit 1  Q  the wait queue is not empty (changed only under qlock)
 *             bits 2+   readers holding it (R, in units of 4)
 * Fast paths (no qlock) work only while Q is clear:
 *   read lock    (W|Q) clear: CAS +4, acquire (pairs with unlock's release)
 *   write lock   word 0 -> 1 CAS, acquire
 *   write unlock 1 -> 0 CAS, release; with Q set: slow
 *   read unlock  -4 fetch_sub, release; the last reader with Q set (old == 4|Q)
 *                takes the slow path
 * While Q is set the only change made outside qlock is a reader's -4, so the
 * slow paths, under qlock, decide who gets the lock: grant() serves the queue from
 * its head, a writer alone or every reader up to the next writer, and sets the
 * word for them before waking them (the lock is handed over, never retried).
 */
#include "sync/sync.h"

enum { RW_W = 1u, RW_Q = 2u, RW_R = 4u, MODE_READ = 1, MODE_WRITE = 2 };
#define RW_RMAX (UINT32_MAX & ~3u)

typedef struct weft__rwlock {
  _Atomic uint32_t word;
  weft__spin_t qlock;
  weft__wq_t q;            /* qlock */
} weft__rwlock_t;

_Static_assert(sizeof(weft__rwlock_t) == sizeof(weft_rwlock_t), "rwlock layout");
_Static_assert(offsetof(weft__rwlock_t, q) == offsetof(weft_rwlock_t, head_), "rwlock layout");
#define L(l) ((weft__rwlock_t *)(void *)(l))

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
 * not added: the caller sees its state instead. */
static void grant(weft__rwlock_t *x, weft__wakeset_t *ws, weft__waiter_t *self) {
  weft__waiter_t *w;
  while ((w = x->q.head) != NULL) {
    uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
    if (w->mode == MODE_WRITE) {
      v = RW_Q;
      if (!cas(x, &v, RW_Q | RW_W)) break;     /* held by someone */
    } else {
      if (v & RW_W) break;
      atomic_fetch_add_explicit(&x->word, RW_R, memory_order_acq_rel);
    }
    weft__wq_pop(&x->q);
    uint32_t mode = w->mode;  /* read before the claim: an OS waiter may leave */
    int won = w == self ? weft__waiter_claim(w) : weft__wakeset_claim(ws, w);
    if (!won) {                                 /* it timed out: undo, go on */
      if (mode == MODE_WRITE) atomic_fetch_and_explicit(&x->word, ~RW_W, memory_order_release);
      else atomic_fetch_sub_explicit(&x->word, RW_R, memory_order_release);
      continue;
    }
    if (mode == MODE_WRITE) break;
  }
  if (!x->q.head) atomic_fetch_and_explicit(&x->word, ~RW_Q, memory_order_release);
}

static int lock_slow(weft__rwlock_t *x, int mode, uint64_t deadline) {
  weft__waiter_t w;
  weft__waiter_init(&w, deadline);
  w.mode = (uint32_t)mode;
  if (w.t && deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) return WEFT_ETIMEDOUT;
    int rc = weft__timer_reserve(weft__vp());
    if (rc) return rc;
  }
  weft__qlock_lock(&x->qlock);
  uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
  if (!x->q.head) {
    if (mode == MODE_READ) {
      while (!(v & RW_W)) {
        if (v >= RW_RMAX) {
          weft__spin_unlock(&x->qlock);
          return WEFT_EAGAIN;
        }
        if (cas(x, &v, v + RW_R)) {
          weft__spin_unlock(&x->qlock);
          return 0;
        }
      }
    } else {
      v = 0;
      if (cas(x, &v, RW_W)) {
        weft__spin_unlock(&x->qlock);
        return 0;
      }
    }
  }
  weft__wq_push(&x->q, &w);
  atomic_fetch_or_explicit(&x->word, RW_Q, memory_order_relaxed); /* under qlock */
  /* the holder may have left before Q was set, on a fast path: serve the queue */
  weft__wakeset_t ws;
  weft__wakeset_init(&ws);
  grant(x, &ws, &w);
  if (atomic_load_explicit(&w.state, memory_order_relaxed) == WEFT__W_SIGNALED) {
    weft__spin_unlock(&x->qlock);
    weft__wakeset_run(&ws);
    return 0;
  }
  /* grant may have served waiters ahead of ours (those behind a writer that has
   * since gone): wake them now, under qlock (rare), since the wait below drops it
   * only once this thread is blocked */
  weft__wakeset_run(&ws);
  if (weft__wait(&w, &x->qlock, NULL, NULL) == WEFT__W_SIGNALED) return 0;
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
  return lock_slow(x, MODE_WRITE, deadline);
}

int weft_rwlock_wrlock(weft_rwlock_t *l) { return weft_rwlock_timedwrlock(l, WEFT_FOREVER); }

int weft_rwlock_trywrlock(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  uint32_t v = 0;
  return cas(L(l), &v, RW_W) ? 0 : WEFT_EBUSY;
}

int weft_rwlock_unlock(weft_rwlock_t *l) {
  if (!l) return WEFT_EINVAL;
  weft__rwlock_t *x = L(l);
  uint32_t v = atomic_load_explicit(&x->word, memory_order_relaxed);
  if (v & RW_W) {
    v = RW_W;
    if (WEFT__LIKELY(cas(x, &v, 0))) return 0;
    unlock_slow(x, 1);
    return 0;
  }
  if (v < RW_R) return WEFT_EPERM;
  /* release: pairs with the acquire of the next writer */
  uint32_t old = atomic_fetch_sub_explicit(&x->word, RW_R, memory_order_release);
  if (WEFT__UNLIKELY(old == (RW_R | RW_Q))) unlock_slow(x, 0);
  return 0;
}
