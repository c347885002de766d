/* src/sync/future.c - single-assignment futures (weft/future.h).
 *
 * The state word holds three bits: SET (the value is there), CLAIMED (a setter
 * won the right to write the value and has not finished), WAITERS (a thread has
 * queued, or is about to). A set claims with a CAS (SET or CLAIMED there: a second
 * set, WEFT_EALREADY). If the word had no WAITERS, it writes the value and CASes
 * CLAIMED -> SET (release: pairs with the acquire loads of the waits' fast path, of
 * tryget and is_set): when nobody waits, two atomic instructions and no lock, as a
 * semaphore's signal. Otherwise, or if that CAS fails because a waiter came, it
 * takes qlock, writes the value and SET under it, claims every queued waiter and
 * wakes them after releasing qlock (weft__wakeset_t, set_locked).
 *
 * A waiter that finds no SET takes qlock, adds WAITERS with a CAS (which fails,
 * reading SET, if the set came first) and queues itself before it releases qlock.
 * Bits are only added until SET, so the setter's CLAIMED -> SET CAS fails once a
 * waiter has added WAITERS, and the setter then goes through qlock: either the
 * waiter reads SET (acquire: it has the value), or it is queued before the setter's
 * critical section, which claims it. A claimed waiter reads the value after its
 * acquire of the state word of its waiter (pairs with the claim's release, which
 * the setter makes after its store of the value). docs/memory-ordering.md §15.
 */
#include "sync/sync.h"
#include "weft/future.h"

#define FS_SET 1u
#define FS_CLAIMED 2u
#define FS_WAITERS 4u

typedef struct weft__future {
  _Atomic uint32_t state; /* FS_* */
  weft__spin_t qlock;
  void *value;           /* written once, by the claiming setter, before SET */
  weft__wq_t q;          /* qlock */
} weft__future_t;

_Static_assert(sizeof(weft__future_t) == sizeof(weft_future_t), "future layout");
_Static_assert(offsetof(weft__future_t, q) == offsetof(weft_future_t, head_), "future layout");
_Static_assert(offsetof(weft__future_t, value) == offsetof(weft_future_t, value_), "future layout");
#define F(f) ((weft__future_t *)(void *)(f))

int weft_future_init(weft_future_t *f) {
  if (!f) return WEFT_EINVAL;
  *f = (weft_future_t)WEFT_FUTURE_INIT;
  return 0;
}

int weft_future_destroy(weft_future_t *f) {
  if (!f) return WEFT_EINVAL;
  weft__future_t *x = F(f);
  weft__qlock_lock(&x->qlock);
  int busy = x->q.head != NULL;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

/* The set's slow path, apart so that the fast path keeps no frame: with WAITERS in
 * the word, the value and SET are written under qlock (waiters change the word only
 * under qlock, other setters not at all while we hold CLAIMED), every queued waiter
 * is claimed, and they are woken after qlock is released. So a waiter that ever
 * queued sees SET only under qlock, after this critical section (the timed-out
 * re-check in wait_slow): once it returns, the setter touches the future no more. */
static __attribute__((noinline)) void set_locked(weft__future_t *x, void *value) {
  weft__wakeset_t ws;
  weft__wakeset_init(&ws);
  weft__waiter_t *w;
  weft__qlock_lock(&x->qlock);
  x->value = value;
  /* release: pairs with the acquire loads of the waits (fast path, mark_waiters),
   * of tryget and of is_set (queued waiters are ordered by qlock and the claim) */
  atomic_store_explicit(&x->state, FS_SET, memory_order_release);
  while ((w = weft__wq_pop(&x->q)) != NULL) weft__wakeset_claim(&ws, w);  /* timed out: dropped */
  weft__spin_unlock(&x->qlock);
  weft__wakeset_run(&ws);
}

int weft_future_set(weft_future_t *f, void *value) {
  if (!f) return WEFT_EINVAL;
  weft__future_t *x = F(f);
  /* relaxed: the claim orders nothing; the value is published by the release below
   * (or set_locked's) */
  uint32_t s = atomic_load_explicit(&x->state, memory_order_relaxed);
  do {
    if (s & (FS_SET | FS_CLAIMED)) return WEFT_EALREADY;
  } while (!atomic_compare_exchange_weak_explicit(&x->state, &s, s | FS_CLAIMED,
                                                  memory_order_relaxed, memory_order_relaxed));
  if (WEFT__LIKELY(!(s & FS_WAITERS))) {
    x->value = value;
    uint32_t c = FS_CLAIMED;
    /* release: pairs with the acquire loads of the waits (fast path, mark_waiters'
     * load and failing CAS), of tryget and of is_set. Fails only if a waiter added
     * WAITERS meanwhile (relaxed: set_locked takes qlock, which orders the queue). */
    if (WEFT__LIKELY(atomic_compare_exchange_strong_explicit(
            &x->state, &c, FS_SET, memory_order_release, memory_order_relaxed)))
      return 0;
  }
  set_locked(x, value);
  return 0;
}

/* Under qlock: adds WAITERS unless the future is set. Returns 1 if it is set (the
 * value is visible), 0 if the caller may queue itself (the setter will then find
 * WAITERS and claim it under qlock). */
static int mark_waiters(weft__future_t *x) {
  /* acquire: pairs with set's release (its CAS, or set_locked's store): a SET read
   * here makes the value visible */
  uint32_t s = atomic_load_explicit(&x->state, memory_order_acquire);
  for (;;) {
    if (s & FS_SET) return 1;
    if (s & FS_WAITERS) return 0;
    /* acquire (both: C11 lets failure be no stronger than success): as the load
     * above, for a SET a failing CAS reads; a success needs none (the queue is
     * published by qlock, not by the word) */
    if (atomic_compare_exchange_weak_explicit(&x->state, &s, s | FS_WAITERS,
                                              memory_order_acquire, memory_order_acquire))
      return 0;
  }
}

static int wait_slow(weft__future_t *x, uint64_t deadline, void **value) {
  weft__waiter_t w;
  weft__waiter_init(&w, deadline);
  if (w.t && deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) goto timed_out_unlocked;
    int rc = weft__timer_reserve(weft__vp());
    if (rc) return rc;
  }
  weft__qlock_lock(&x->qlock);
  if (mark_waiters(x)) {
    weft__spin_unlock(&x->qlock);
    if (value) *value = x->value;
    return 0;
  }
  weft__wq_push(&x->q, &w);
  if (weft__wait_q(&w, WEFT__WAITING(x, WEFT__WK_FUTURE), &x->qlock) ==
      WEFT__W_SIGNALED) {
    if (value) *value = x->value;  /* ordered by the acquire of w.state in weft__wait */
    return 0;
  }
  /* timed out: leave the queue unless the setter already dropped us; a set that
   * came meanwhile still counts */
  weft__qlock_lock(&x->qlock);
  if (w.linked) weft__wq_remove(&x->q, &w);
  /* relaxed: we queued, so SET is written only under qlock (set_locked), which orders
   * the value; read under qlock, after that critical section if at all */
  int set = (atomic_load_explicit(&x->state, memory_order_relaxed) & FS_SET) != 0;
  weft__spin_unlock(&x->qlock);
  if (set) {
    if (value) *value = x->value;
    return 0;
  }
  weft__sync_count(WEFT__ST_TIMEOUT);
  return WEFT_ETIMEDOUT;
timed_out_unlocked:
  /* acquire: as the fast path */
  if (atomic_load_explicit(&x->state, memory_order_acquire) & FS_SET) {
    if (value) *value = x->value;
    return 0;
  }
  weft__sync_count(WEFT__ST_TIMEOUT);
  return WEFT_ETIMEDOUT;
}

int weft_future_timedwait(weft_future_t *f, uint64_t deadline, void **value) {
  if (!f) return WEFT_EINVAL;
  weft__future_t *x = F(f);
  /* acquire: pairs with set's release (CAS or set_locked's store) (the value is visible) */
  if (WEFT__LIKELY(atomic_load_explicit(&x->state, memory_order_acquire) & FS_SET)) {
    if (value) *value = x->value;
    return 0;
  }
  return wait_slow(x, deadline, value);
}

int weft_future_wait(weft_future_t *f, void **value) {
  return weft_future_timedwait(f, WEFT_FOREVER, value);
}

int weft_future_tryget(const weft_future_t *f, void **value) {
  if (!f) return WEFT_EINVAL;
  weft__future_t *x = F(f);
  /* acquire: pairs with set's release (CAS or set_locked's store) */
  if (!(atomic_load_explicit(&x->state, memory_order_acquire) & FS_SET)) return WEFT_EBUSY;
  if (value) *value = x->value;
  return 0;
}

int weft_future_is_set(const weft_future_t *f) {
  /* acquire: pairs with set's release (CAS or set_locked's store) */
  return f && (atomic_load_explicit(&F(f)->state, memory_order_acquire) & FS_SET) != 0;
}
