/* src/sync/lockset.c - atomic acquisition of a set of locks (weft/lockset.h).
 *
 * The algorithm never blocks while holding part of the set: block on one lock
 * (the "pivot"), try every other; if one is busy, release all and make the busy
 * one the next pivot. A thread holding some of the locks never waits for the
 * caller, so no cycle of waits can form through a lock set. Each retry starts by
 * blocking on the lock that was busy, which lets its holder finish first.
 */
#include "sync/sync.h"

static int lock_one(const weft_lockref_t *r, uint64_t deadline) {
  switch (r->kind) {
    case WEFT_LOCK_MUTEX: return weft_mutex_timedlock(r->lock, deadline);
    case WEFT_LOCK_HYBRID: return weft_hybrid_timedlock(r->lock, deadline);
    case WEFT_LOCK_READ: return weft_rwlock_timedrdlock(r->lock, deadline);
    case WEFT_LOCK_WRITE: return weft_rwlock_timedwrlock(r->lock, deadline);
  }
  return WEFT_EINVAL;
}

static int try_one(const weft_lockref_t *r) {
  switch (r->kind) {
    case WEFT_LOCK_MUTEX: return weft_mutex_trylock(r->lock);
    case WEFT_LOCK_HYBRID: return weft_hybrid_trylock(r->lock);
    case WEFT_LOCK_READ: return weft_rwlock_tryrdlock(r->lock);
    case WEFT_LOCK_WRITE: return weft_rwlock_trywrlock(r->lock);
  }
  return WEFT_EINVAL;
}

/* The lock's own unlock; its error (WEFT_EPERM: not held) for weft_lockset_release. */
static int unlock_one(const weft_lockref_t *r) {
  switch (r->kind) {
    case WEFT_LOCK_MUTEX: return weft_mutex_unlock(r->lock);
    case WEFT_LOCK_HYBRID: return weft_hybrid_unlock(r->lock);
    case WEFT_LOCK_READ:
    case WEFT_LOCK_WRITE: return weft_rwlock_unlock(r->lock);
  }
  return 0;
}

static int check(const weft_lockref_t *set, int n) {
  if (n < 0 || n > WEFT_LOCKSET_MAX || (n > 0 && !set)) return WEFT_EINVAL;
  for (int i = 0; i < n; i++) {
    if (!set[i].lock || set[i].kind < WEFT_LOCK_MUTEX || set[i].kind > WEFT_LOCK_WRITE)
      return WEFT_EINVAL;
    for (int j = 0; j < i; j++)
      if (set[j].lock == set[i].lock) return WEFT_EINVAL;
  }
  return 0;
}

/* Releases what the caller holds when set[upto] was busy: the pivot and every
 * other lock before upto. */
static void release_held(const weft_lockref_t *set, int upto, int pivot) {
  for (int i = 0; i < upto; i++)
    if (i != pivot) unlock_one(&set[i]);
  unlock_one(&set[pivot]);
}

int weft_lockset_timedacquire(const weft_lockref_t *set, int n, uint64_t deadline) {
  int rc = check(set, n);
  if (rc || n == 0) return rc;
  int pivot = 0;
  for (;;) {
    rc = lock_one(&set[pivot], deadline);
    if (rc) return rc;
    int busy = -1;
    for (int i = 0; i < n && busy < 0; i++) {
      if (i == pivot) continue;
      int r = try_one(&set[i]);
      if (r == 0) continue;
      release_held(set, i, pivot);
      if (r != WEFT_EBUSY) return r;     /* e.g. WEFT_EAGAIN: too many readers */
      busy = i;
    }
    if (busy < 0) return 0;
    pivot = busy;
    weft_yield();  /* let the holder of the busy lock run before we block on it */
  }
}

int weft_lockset_acquire(const weft_lockref_t *set, int n) {
  return weft_lockset_timedacquire(set, n, WEFT_FOREVER);
}

int weft_lockset_tryacquire(const weft_lockref_t *set, int n) {
  int rc = check(set, n);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    rc = try_one(&set[i]);
    if (rc) {
      for (int j = 0; j < i; j++) unlock_one(&set[j]);
      return rc;
    }
  }
  return 0;
}

int weft_lockset_release(const weft_lockref_t *set, int n) {
  int rc = check(set, n);
  if (rc) return rc;
  int first = 0;
  for (int i = n - 1; i >= 0; i--) {
    int e = unlock_one(&set[i]);
    if (e && !first) first = e;
  }
  return first;
}
