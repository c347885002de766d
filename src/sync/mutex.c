/* src/sync/mutex.c - the two-phase mutex and the hybrid lock (weft/mutex.h).
 *
 * Lock word (weft__mutex_t.word):
 *   0  free
 *   1  held, no thread queued
 *   2  held, threads may be queued: unlock must look at the queue
 *   3  held, its holder is releasing it (unlock's slow path, between setting 3 under
 *      the queue lock and its compare-exchange to 0)
 * Transitions:
 *   lock fast     0 -> 1   CAS, acquire (pairs with unlock's release)
 *   spin phase    0 -> 1   CAS, acquire (a thread that never queued)
 *   polling/queue 0 -> 2   CAS or exchange, acquire: a thread on its way to the
 *                          queue, or woken from it, takes the lock as 2, because
 *                          others may still be queued behind it
 *   queueing    1|3 -> 2   exchange under the queue lock, just before linking
 *   unlock fast   1 -> 0   CAS, release
 *   unlock slow   2 -> 3   under the queue lock, after claiming the oldest waiter
 *                 3 -> 0   CAS, release, after the queue lock is released; if it
 *                          fails, a thread queued meanwhile (the word is 2): again
 * No lost wake-up: a thread queues only after its exchange under the queue lock
 * returned nonzero. If the holder had not yet taken the queue lock, its unlock CAS
 * then fails (the word is 2) and it takes the queue lock and finds the queuer; if
 * the holder had set 3, its CAS 3 -> 0 fails and it goes round again. A woken waiter
 * that loses the race to a barging thread re-queues, re-setting 2.
 *
 * Nothing touches the mutex after the release that frees it (the CAS to 0): once it
 * is free, another thread may take it, release it and destroy it. So the slow unlock
 * claims its waiter and releases the queue lock while the mutex is still held, frees
 * the mutex last, and only then wakes the waiter (whose waiter record lives on the
 * waiter's own stack, not in the mutex). A plain OS waiter would see a claim at once
 * and go back to competing before the mutex is free; the unlock claims it as CLAIMED,
 * which it keeps waiting on, and says SIGNALED after the release (claim_waiter, grant).
 */
#include <pthread.h>

#include "sync/sync.h"

extern _Atomic int weft__spin_max, weft__spin_polling;

#ifdef WEFT_CHECKED
/* Who holds a mutex: the running weft thread, a wired one, or the plain OS thread.
 * The main weft thread is the OS thread that called weft_init, before it and after
 * weft_shutdown too: it gets that OS thread's token, so a lock held across
 * weft_init or weft_shutdown is still the caller's. */
static void *holder_token(void) {
  weft_vp_t *vp = weft__vp();
  weft_thread_t *w;
  if (vp) {
    w = vp->current;  /* NULL on the VP's own context (a continuation, the idle loop) */
    if (!w) return NULL;
  } else if (!(w = weft__wired_self())) {  /* a lock may be held across wire/unwire */
    return (void *)((uintptr_t)pthread_self() | 1);
  }
  return w == weft__rt.main ? (void *)(weft__rt.main_os | 1) : (void *)w;
}
#define OWNER_SET(m) atomic_store_explicit(&(m)->owner, holder_token(), memory_order_relaxed)
#define OWNER_IS_ME(m) (atomic_load_explicit(&(m)->owner, memory_order_relaxed) == holder_token())
#else
#define OWNER_SET(m) ((void)0)
#endif

static inline int cas_word(weft__mutex_t *m, uint32_t from, uint32_t to) {
  /* acquire on success: pairs with the release exchange of the previous unlock */
  return atomic_compare_exchange_strong_explicit(&m->word, &from, to, memory_order_acquire,
                                                 memory_order_relaxed);
}

/* Busy Spinning: polls the word up to an adaptive bound; the hybrid lock backs off
 * exponentially between polls. Returns 1 if it took the lock. */
static __attribute__((noinline)) int spin_phase_run(weft__mutex_t *m, int smax, int hybrid);
/* Spinning helps only if the holder can run meanwhile: another VP, or the caller is
 * a plain OS thread. The test inline, the spinning out of line. */
static inline __attribute__((always_inline)) int spin_phase(weft__mutex_t *m, weft_vp_t *vp,
                                                           int hybrid) {
  if (vp && weft__rt.nvps < 2) return 0;
  int smax = atomic_load_explicit(&weft__spin_max, memory_order_relaxed);
  if (smax == 0) return 0;
  return spin_phase_run(m, smax, hybrid);
}
static int spin_phase_run(weft__mutex_t *m, int smax, int hybrid) {
  int est = atomic_load_explicit(&m->spin, memory_order_relaxed);
  int limit = est * 2 + 16;
  if (limit > smax) limit = smax;
  unsigned delay = 1;
  for (int i = 0; i < limit; i++) {
    if (hybrid) {
      for (unsigned d = 0; d < delay; d++) weft__os_relax();
      if (delay < 64) delay *= 2;
    } else {
      weft__os_relax();
    }
    if (atomic_load_explicit(&m->word, memory_order_relaxed) == 0 && cas_word(m, 0, 1)) {
      /* relaxed: an estimate; races only blur it. It moves 1/8 of the way towards
       * the polls this acquisition took. */
      atomic_store_explicit(&m->spin, est + (i - est) / 8, memory_order_relaxed);
      return 1;
    }
  }
  /* spinning did not pay (the holder was not running, or holds the lock long):
   * spin a quarter less next time; the bound never drops below 16 polls */
  atomic_store_explicit(&m->spin, est - est / 4, memory_order_relaxed);
  return 0;
}

/* Takes the queue lock, polling the lock word meanwhile (Spin Polling). Returns 1
 * with the mutex taken (and the queue lock not held), 0 with the queue lock held. */
static int qlock_polling(weft__mutex_t *m) {
  int polling = atomic_load_explicit(&weft__spin_polling, memory_order_relaxed);
  for (;;) {
    if (polling && atomic_load_explicit(&m->word, memory_order_relaxed) == 0 && cas_word(m, 0, 2))
      return 1;
    if (weft__spin_trylock(&m->qlock)) return 0;
    weft__os_relax();
  }
}

static void unlock_slow(weft__mutex_t *m);

/* Pops and claims the oldest waiter that has not timed out; NULL if none. Caller
 * holds m->qlock. A weft thread is claimed as SIGNALED (it cannot run before it is
 * unblocked); a plain OS thread as CLAIMED (wait_os keeps waiting: it must not go
 * back to the lock word before the unlock has freed it), made SIGNALED by grant(). */
static weft__waiter_t *claim_waiter(weft__mutex_t *m) {
  weft__waiter_t *w;
  while ((w = weft__wq_pop(&m->q)) != NULL) {
    if (weft__waiter_claim_locked(w, w->t ? WEFT__W_SIGNALED : WEFT__W_CLAIMED)) return w;
    /* it timed out: it returns on its own */
  }
  return NULL;
}

/* Wakes w, claimed by claim_waiter; t is w->t, read under the queue lock. Touches
 * nothing of the mutex. */
static void grant(weft_thread_t *t, weft__waiter_t *w) {
  if (t) {
    weft__unblock(weft__vp(), t);
  } else {
    /* release: pairs with wait_os's acquire load of the state. A claimed OS waiter
     * waits for this store, so w is alive here. */
    atomic_store_explicit(&w->state, WEFT__W_SIGNALED, memory_order_release);
    weft__os_futex_wake(&w->state, 1);
  }
}

/* A woken waiter that gives up (its deadline passed) consumed a wake-up meant to
 * keep the queue moving: pass it on. If threads are still queued, make sure the
 * word says so (1 -> 2), or, if the mutex is free, wake the next one. The caller
 * does not hold the mutex; it still waits on it, so the mutex is alive. */
static void pass_on(weft__mutex_t *m) {
  weft__qlock_lock(&m->qlock);
  weft__waiter_t *w = NULL;
  if (m->q.head != NULL) {
    uint32_t v = atomic_load_explicit(&m->word, memory_order_relaxed);
    while (v == 1 && !atomic_compare_exchange_weak_explicit(&m->word, &v, 2, memory_order_relaxed,
                                                            memory_order_relaxed)) {
    }
    if (v == 0) w = claim_waiter(m);
  }
  weft_thread_t *t = w ? w->t : NULL;
  weft__spin_unlock(&m->qlock);
  if (w) grant(t, w);
}

/* The blocking part of lock. w: the caller's waiter. woken: the caller has been
 * queued before (takes the word as 2). vp: the caller's VP as weft__vp() gave it (not
 * read by a woken caller: read again after the CAS below fails, since a wait may have
 * moved the thread to another VP). */
static inline __attribute__((always_inline)) int lock_queue(weft__mutex_t *m, weft__waiter_t *w,
                                                           int woken, uint64_t deadline,
                                                           weft_vp_t *vp) {
  for (;;) {
    if (woken) {
      if (cas_word(m, 0, 2)) return 0;
      vp = weft__vp();
      /* to be queued again: a fresh wait (waiter_init did this for the first) */
      atomic_store_explicit(&w->state, WEFT__W_WAITING, memory_order_relaxed);
      w->morphed = 0;
    }
    /* deadline is w->deadline, passed as a value: a constant for the untimed callers
     * (w's address escapes to the queue, so w->deadline would be loaded again) */
    if (deadline != WEFT_FOREVER) {
      int rc = weft__os_now_ns() >= deadline ? WEFT_ETIMEDOUT : 0;
      if (!rc && w->t) rc = weft__timer_reserve(vp);
      if (rc) {
        if (woken) pass_on(m);
        if (rc == WEFT_ETIMEDOUT) weft__sync_count(WEFT__ST_TIMEOUT);
        return rc;
      }
    }
    if (qlock_polling(m)) {
      weft__sync_count(WEFT__ST_POLL);
      return 0;
    }
    /* acquire if it returns 0 (we own it); pairs with unlock's release */
    if (atomic_exchange_explicit(&m->word, 2, memory_order_acquire) == 0) {
      weft__spin_unlock(&m->qlock);
      weft__sync_count(WEFT__ST_POLL);
      return 0;
    }
    weft__wq_push(&m->q, w);
    if (!woken) weft__sync_count_on(vp, WEFT__ST_BLOCKED);  /* once per lock call, as Fig 5-5 */
    if (weft__wait_block_on(w, vp, WEFT__WAITING(m, WEFT__WK_MUTEX), &m->qlock, 0) ==
        WEFT__W_TIMEDOUT) {
      weft__qlock_lock(&m->qlock);
      if (w->linked) weft__wq_remove(&m->q, w);
      weft__spin_unlock(&m->qlock);
      weft__sync_count(WEFT__ST_TIMEOUT);
      return WEFT_ETIMEDOUT;
    }
    woken = 1;
  }
}

/* lock_queue is inlined into each of its three callers below (out of line
 * themselves): the untimed ones keep the deadline a constant, so its timer tests fold
 * away. */
static inline __attribute__((always_inline)) int lock_slow(weft__mutex_t *m, uint64_t deadline,
                                                          int hybrid) {
  weft_vp_t *vp = weft__vp();  /* this thread's VP until the wait in lock_queue */
  weft__sync_count_on(vp, WEFT__ST_MISSED);
  WEFT__ASSERT(!OWNER_IS_ME(m), hybrid ? "weft_hybrid_lock of a mutex the caller holds"
                                 : deadline == WEFT_FOREVER
                                     ? "weft_mutex_lock of a mutex the caller holds"
                                     : "weft_mutex_timedlock of a mutex the caller holds");
  if (spin_phase(m, vp, hybrid)) {
    weft__sync_count_on(vp, WEFT__ST_SPIN);
    return 0;
  }
  weft__waiter_t w;
  weft__waiter_init_on(&w, vp, deadline);
  return lock_queue(m, &w, 0, deadline, vp);
}

static __attribute__((noinline)) int lock_slow_forever(weft__mutex_t *m, int hybrid) {
  return lock_slow(m, WEFT_FOREVER, hybrid);
}
static __attribute__((noinline)) int lock_slow_until(weft__mutex_t *m, uint64_t deadline,
                                                     int hybrid) {
  return lock_slow(m, deadline, hybrid);
}

int weft__mutex_lock_woken(weft__mutex_t *m, weft__waiter_t *w) {
  w->deadline = WEFT_FOREVER;
  w->heap = NULL;
  int rc = lock_queue(m, w, 1, WEFT_FOREVER, NULL);  /* woken: vp is read when needed */
  if (rc == 0) OWNER_SET(m);
  return rc;
}

static inline int lock_common(weft__mutex_t *m, uint64_t deadline, int hybrid) {
  if (WEFT__UNLIKELY(!m)) return WEFT_EINVAL;
  uint32_t seen = 0;
  /* acquire on success: pairs with the release exchange of the previous unlock.
   * Returns `seen`, which a successful CAS leaves 0: the compiler then returns the
   * register the CAS already cleared (one instruction less than a literal 0) */
  if (WEFT__LIKELY(atomic_compare_exchange_strong_explicit(&m->word, &seen, 1, memory_order_acquire,
                                                           memory_order_relaxed))) {
    OWNER_SET(m);
    return (int)seen;
  }
  /* a constant in weft_mutex_lock and weft_hybrid_lock: the test folds away */
  int rc = deadline == WEFT_FOREVER ? lock_slow_forever(m, hybrid)
                                    : lock_slow_until(m, deadline, hybrid);
  if (rc == 0) OWNER_SET(m);
  return rc;
}

/* unlock_slow's CAS 3 -> 0 failed: a thread queued since the claim (the word is 2).
 * w (NULL: none was claimed), if claimed, takes the lock as 2 and finds the new one
 * at its own unlock; if none was, claim the new one. Then release again. */
static __attribute__((noinline, cold)) void unlock_retry(weft__mutex_t *m, weft__waiter_t *w) {
  weft_thread_t *t = w ? w->t : NULL;
  for (;;) {
    weft__qlock_lock(&m->qlock);
    if (!w) {
      w = claim_waiter(m);
      t = w ? w->t : NULL;
    }
    /* relaxed: under the queue lock, as in unlock_slow */
    atomic_store_explicit(&m->word, 3, memory_order_relaxed);
    weft__spin_unlock(&m->qlock);
    uint32_t v = 3;
    /* release: pairs with the acquire of the next lock. The last access to *m. */
    if (atomic_compare_exchange_strong_explicit(&m->word, &v, 0, memory_order_release,
                                                memory_order_relaxed))
      break;
  }
  if (w) grant(t, w);
}

/* The holder releases a mutex whose word is 2: threads may be queued. */
static void unlock_slow(weft__mutex_t *m) {
  weft__qlock_lock(&m->qlock);
  weft__waiter_t *w = claim_waiter(m);
  weft_thread_t *t = w ? w->t : NULL;
  /* relaxed: under the queue lock; a queuer's exchange (under it too) turns 3 into
   * 2, and the CAS below then fails */
  atomic_store_explicit(&m->word, 3, memory_order_relaxed);
  weft__spin_unlock(&m->qlock);
  uint32_t v = 3;
  /* release: pairs with the acquire of the next lock. The last access to *m. */
  if (WEFT__UNLIKELY(!atomic_compare_exchange_strong_explicit(&m->word, &v, 0, memory_order_release,
                                                              memory_order_relaxed))) {
    unlock_retry(m, w);
    return;
  }
  if (t) {
    weft__unblock(weft__vp(), t);
    return;
  }
  if (w) grant(NULL, w);
}

/* Checked builds: the caller must hold m (or nobody does: WEFT_EPERM follows); the
 * holder is forgotten before the release. */
static inline void check_release(weft__mutex_t *m) {
#ifdef WEFT_CHECKED
  WEFT__ASSERT(atomic_load_explicit(&m->word, memory_order_relaxed) == 0 || OWNER_IS_ME(m),
               "weft_mutex_unlock by a thread that does not hold it");
  atomic_store_explicit(&m->owner, NULL, memory_order_relaxed);
#else
  (void)m;
#endif
}

static inline int unlock_common(weft__mutex_t *m) {
  if (WEFT__UNLIKELY(!m)) return WEFT_EINVAL;
  check_release(m);
  uint32_t old = 1;
  /* release: pairs with the acquire of the next lock */
  if (WEFT__LIKELY(atomic_compare_exchange_strong_explicit(&m->word, &old, 0, memory_order_release,
                                                           memory_order_relaxed)))
    return 0;
  if (old == 0) return WEFT_EPERM;
  unlock_slow(m);
  return 0;
}

void weft__mutex_took(weft_mutex_t *m) {
#ifdef WEFT_CHECKED
  if (m) OWNER_SET(WEFT__M(m));
#else
  (void)m;
#endif
}

void weft__mutex_releasing(weft_mutex_t *m) { check_release(WEFT__M(m)); }

/* The inline fast paths' slow halves (weft/mutex.h): their compare-and-swap failed,
 * so the fast path is not tried again. */
int weft__mutex_lock_contended(weft_mutex_t *m) {
  weft__mutex_t *x = WEFT__M(m);
  int rc = lock_slow_forever(x, 0);
  if (rc == 0) OWNER_SET(x);
  return rc;
}

int weft__mutex_unlock_contended(weft_mutex_t *m, uint32_t seen) {
  if (seen == 0) return WEFT_EPERM;
  unlock_slow(WEFT__M(m));
  return 0;
}

#ifdef WEFT_CHECKED
void weft__mutex_owner_take(weft__mutex_t *m) { OWNER_SET(m); }

void weft__mutex_assert_mine(weft__mutex_t *m) {
  WEFT__ASSERT(OWNER_IS_ME(m), "weft_cond_wait with a mutex held by another thread");
}
#endif

/* cond_wait's continuation: the waiter (already saved) gives up its mutex. */
void weft__mutex_unlock_cont(void *p) {
  weft__mutex_t *m = p;  /* the waiter dropped its holder token (weft__mutex_owner_drop) */
  uint32_t old = 1;
  /* release: pairs with the acquire of the next lock */
  if (!atomic_compare_exchange_strong_explicit(&m->word, &old, 0, memory_order_release,
                                               memory_order_relaxed))
    unlock_slow(m);
}

/* Wait morphing (cond.c): w, a weft-thread waiter already claimed by the
 * signaller and with no timer armed, goes onto m's queue if m is held (it runs
 * when the holder unlocks), or is woken to compete if m is free. */
void weft__mutex_morph(weft__mutex_t *m, weft__waiter_t *w) {
  weft_thread_t *t = w->t;
  weft__qlock_lock(&m->qlock);
  uint32_t v = atomic_load_explicit(&m->word, memory_order_relaxed);
  while (v != 0) {
    /* relaxed: under the queue lock, which the unlocker takes when it sees 2 */
    if (v == 2 || atomic_compare_exchange_weak_explicit(&m->word, &v, 2, memory_order_relaxed,
                                                        memory_order_relaxed)) {
      atomic_store_explicit(&w->state, WEFT__W_WAITING, memory_order_relaxed);
      w->morphed = WEFT__MORPH_QUEUED;
      /* it waits on the mutex now (weft_dump; relaxed, as weft__wait_on's store:
       * the waiter, still blocked, clears it when it runs again) */
      atomic_store_explicit(&t->waiting, WEFT__WAITING(m, WEFT__WK_MUTEX), memory_order_relaxed);
      weft__wq_push(&m->q, w);
      weft__spin_unlock(&m->qlock);
      return;
    }
  }
  weft__spin_unlock(&m->qlock);
  weft__wake(t, w);
}

/* ---- public: mutex -------------------------------------------------------------- */

int weft_mutex_init(weft_mutex_t *m) {
  if (!m) return WEFT_EINVAL;
  *m = (weft_mutex_t)WEFT_MUTEX_INIT;
  return 0;
}

int weft_mutex_destroy(weft_mutex_t *m) {
  if (!m) return WEFT_EINVAL;
  weft__mutex_t *x = WEFT__M(m);
  weft__qlock_lock(&x->qlock);
  int busy = atomic_load_explicit(&x->word, memory_order_acquire) != 0 || x->q.head != NULL;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

int weft_mutex_lock(weft_mutex_t *m) { return lock_common(WEFT__M(m), WEFT_FOREVER, 0); }

int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline) {
  return lock_common(WEFT__M(m), deadline, 0);
}

int weft_mutex_trylock(weft_mutex_t *m) {
  if (WEFT__UNLIKELY(!m)) return WEFT_EINVAL;
  weft__mutex_t *x = WEFT__M(m);
  if (atomic_load_explicit(&x->word, memory_order_relaxed) == 0 && cas_word(x, 0, 1)) {
    OWNER_SET(x);
    return 0;
  }
  return WEFT_EBUSY;
}

int weft_mutex_unlock(weft_mutex_t *m) { return unlock_common(WEFT__M(m)); }

/* ---- public: hybrid lock -------------------------------------------------------- */

int weft_hybrid_init(weft_hybrid_t *h) { return h ? weft_mutex_init(&h->m_) : WEFT_EINVAL; }
int weft_hybrid_destroy(weft_hybrid_t *h) { return h ? weft_mutex_destroy(&h->m_) : WEFT_EINVAL; }
int weft_hybrid_lock(weft_hybrid_t *h) {
  return lock_common(h ? WEFT__M(&h->m_) : NULL, WEFT_FOREVER, 1);
}
int weft_hybrid_timedlock(weft_hybrid_t *h, uint64_t deadline) {
  return lock_common(h ? WEFT__M(&h->m_) : NULL, deadline, 1);
}
int weft_hybrid_trylock(weft_hybrid_t *h) { return h ? weft_mutex_trylock(&h->m_) : WEFT_EINVAL; }
int weft_hybrid_unlock(weft_hybrid_t *h) { return unlock_common(h ? WEFT__M(&h->m_) : NULL); }
