/* src/sync/future.c - single-assignment futures (weft/future.h).
 *
 * state: 0 unset, 1 set. The value is written before the state is set to 1, and
 * the state only changes under qlock (so one set wins and a second sees 1); its
 * store is a release that pairs with the acquire load of every wait's fast path
 * (the value, and what the setter did before, are visible to a waiter that sees
 * 1). A waiter that finds 0 takes qlock, looks again (the setter sets 1 and
 * empties the queue under the same lock, so either it sees 1 or the setter sees it
 * queued), and blocks. The setter claims every waiter under the lock and wakes
 * them after releasing it (weft__wakeset_t). A claimed waiter reads the value
 * after its acquire of the state word of its waiter (pairs with the claim's
 * release, which the setter makes after its store of the value).
 */
#include "sync/sync.h"
#include "weft/future.h"

typedef struct weft__future {
  _Atomic uint32_t state;
  weft__spin_t qlock;
  void *value;           /* written once, under qlock, before state becomes 1 */
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

int weft_future_set(weft_future_t *f, void *value) {
  if (!f) return WEFT_EINVAL;
  weft__future_t *x = F(f);
  weft__qlock_lock(&x->qlock);
  /* relaxed: state changes only under qlock, which we hold */
  if (atomic_load_explicit(&x->state, memory_order_relaxed)) {
    weft__spin_unlock(&x->qlock);
    return WEFT_EALREADY;
  }
  x->value = value;
  /* release: pairs with the acquire load of the waits' fast path and of is_set */
  atomic_store_explicit(&x->state, 1, memory_order_release);
  weft__wakeset_t s;
  weft__wakeset_init(&s);
  weft__waiter_t *w;
  while ((w = weft__wq_pop(&x->q)) != NULL) weft__wakeset_claim(&s, w);  /* timed out: dropped */
  weft__spin_unlock(&x->qlock);
  weft__wakeset_run(&s);
  return 0;
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
  if (atomic_load_explicit(&x->state, memory_order_relaxed)) {  /* qlock orders it */
    weft__spin_unlock(&x->qlock);
    if (value) *value = x->value;
    return 0;
  }
  weft__wq_push(&x->q, &w);
  if (weft__wait_on(&w, WEFT__WAITING(x, WEFT__WK_FUTURE), &x->qlock, NULL, NULL) ==
      WEFT__W_SIGNALED) {
    if (value) *value = x->value;  /* ordered by the acquire of w.state in weft__wait */
    return 0;
  }
  /* timed out: leave the queue unless the setter already dropped us; a set that
   * came meanwhile still counts */
  weft__qlock_lock(&x->qlock);
  if (w.linked) weft__wq_remove(&x->q, &w);
  int set = atomic_load_explicit(&x->state, memory_order_relaxed) != 0;
  weft__spin_unlock(&x->qlock);
  if (set) {
    if (value) *value = x->value;
    return 0;
  }
  weft__sync_count(WEFT__ST_TIMEOUT);
  return WEFT_ETIMEDOUT;
timed_out_unlocked:
  /* acquire: as the fast path */
  if (atomic_load_explicit(&x->state, memory_order_acquire)) {
    if (value) *value = x->value;
    return 0;
  }
  weft__sync_count(WEFT__ST_TIMEOUT);
  return WEFT_ETIMEDOUT;
}

int weft_future_timedwait(weft_future_t *f, uint64_t deadline, void **value) {
  if (!f) return WEFT_EINVAL;
  weft__future_t *x = F(f);
  /* acquire: pairs with set's release store (the value is visible) */
  if (WEFT__LIKELY(atomic_load_explicit(&x->state, memory_order_acquire))) {
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
  /* acquire: pairs with set's release store */
  if (!atomic_load_explicit(&x->state, memory_order_acquire)) return WEFT_EBUSY;
  if (value) *value = x->value;
  return 0;
}

int weft_future_is_set(const weft_future_t *f) {
  /* acquire: pairs with set's release store */
  return f && atomic_load_explicit(&F(f)->state, memory_order_acquire) != 0;
}
