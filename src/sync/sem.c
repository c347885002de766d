/* src/sync/sem.c - counting semaphores (weft/sem.h).
 *
 * count: free units. nwait: threads registered as waiting (written under qlock).
 * wait registers itself (nwait++, seq_cst) and then re-reads count; signal adds a
 * unit (seq_cst RMW) and then reads nwait. Store-buffering with seq_cst on both
 * sides: either the waiter's re-read sees the unit, or the signaller sees the
 * waiter and takes the slow path, which hands a unit to the oldest waiter under
 * qlock (it takes the unit from count itself, then claims the waiter; a waiter
 * that was claimed returns owning the unit it was handed). A signal that sees a
 * registered waiter before it adds (relaxed hint) hands its unit over directly
 * (signal_handoff), leaving count alone.
 */
#include "sync/sync.h"

typedef struct weft__sem {
  _Atomic int32_t count;
  _Atomic uint32_t nwait;
  weft__spin_t qlock;
  uint32_t pad;
  weft__wq_t q;          /* qlock */
} weft__sem_t;

_Static_assert(sizeof(weft__sem_t) == sizeof(weft_sem_t), "sem layout");
_Static_assert(offsetof(weft__sem_t, q) == offsetof(weft_sem_t, head_), "sem layout");
#define S(s) ((weft__sem_t *)(void *)(s))

int weft__sem_waiting(const weft_sem_t *s) {
  weft__sem_t *x = S((weft_sem_t *)(uintptr_t)s);
  return weft__wq_waiting(&x->qlock, &x->q);
}

int weft_sem_init(weft_sem_t *s, int32_t count) {
  if (!s || count < 0) return WEFT_EINVAL;
  *s = (weft_sem_t)WEFT_SEM_INIT(count);
  return 0;
}

int weft_sem_destroy(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  weft__sem_t *x = S(s);
  weft__qlock_lock(&x->qlock);
  int busy = x->q.head != NULL || atomic_load_explicit(&x->nwait, memory_order_relaxed) != 0;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

int32_t weft_sem_value(const weft_sem_t *s) {
  return s ? atomic_load_explicit(&S(s)->count, memory_order_relaxed) : 0;
}

/* Takes a unit if there is one: CAS count -> count-1, acquire (pairs with the
 * release of signal's add). */
static inline int take(weft__sem_t *x) {
  int32_t c = atomic_load_explicit(&x->count, memory_order_relaxed);
  while (c > 0)
    if (atomic_compare_exchange_weak_explicit(&x->count, &c, c - 1, memory_order_acquire,
                                              memory_order_relaxed))
      return 1;
  return 0;
}

int weft_sem_trywait(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  return take(S(s)) ? 0 : WEFT_EBUSY;
}

/* always inlined (into wait_slow_forever and wait_slow_until, below) */
static inline __attribute__((always_inline)) int wait_slow(weft__sem_t *x, uint64_t deadline) {
  weft__waiter_t w;
  weft__waiter_init(&w, deadline);
  if (w.t && deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) return WEFT_ETIMEDOUT;
    int rc = weft__timer_reserve(weft__vp());
    if (rc) return rc;
  }
  weft__qlock_lock(&x->qlock);
  /* seq_cst: the store-buffering pair with signal's add and load (above) */
  atomic_store_explicit(&x->nwait, atomic_load_explicit(&x->nwait, memory_order_relaxed) + 1,
                        memory_order_seq_cst);
  if (take(x)) {
    atomic_store_explicit(&x->nwait, atomic_load_explicit(&x->nwait, memory_order_relaxed) - 1,
                          memory_order_relaxed);
    weft__spin_unlock(&x->qlock);
    return 0;
  }
  weft__wq_push(&x->q, &w);
  if (weft__wait_q(&w, WEFT__WAITING(x, WEFT__WK_SEM), &x->qlock) == WEFT__W_SIGNALED) return 0;
  /* timed out: leave the queue unless a signaller already dropped us */
  weft__qlock_lock(&x->qlock);
  if (w.linked) {
    weft__wq_remove(&x->q, &w);
    atomic_store_explicit(&x->nwait, atomic_load_explicit(&x->nwait, memory_order_relaxed) - 1,
                          memory_order_relaxed);
  }
  weft__spin_unlock(&x->qlock);
  weft__sync_count(WEFT__ST_TIMEOUT);
  return WEFT_ETIMEDOUT;
}

/* wait_slow for each caller, out of line, so that weft_sem_wait and
 * weft_sem_timedwait are leaves whose fast path (a unit there) saves no registers
 * (7 instructions); the untimed one keeps its deadline a constant (the timer tests
 * fold away: as inlined into weft_sem_wait itself, 7 fewer per block than a shared
 * out-of-line wait_slow taking the deadline as an argument). */
static __attribute__((noinline)) int wait_slow_forever(weft__sem_t *x) {
  return wait_slow(x, WEFT_FOREVER);
}
static __attribute__((noinline)) int wait_slow_until(weft__sem_t *x, uint64_t deadline) {
  return wait_slow(x, deadline);
}

int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline) {
  if (!s) return WEFT_EINVAL;
  weft__sem_t *x = S(s);
  if (WEFT__LIKELY(take(x))) return 0;
  return wait_slow_until(x, deadline);
}

int weft_sem_wait(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  weft__sem_t *x = S(s);
  if (WEFT__LIKELY(take(x))) return 0;
  return wait_slow_forever(x);
}

static __attribute__((noinline)) void signal_slow(weft__sem_t *x) {
  weft__qlock_lock(&x->qlock);
  while (x->q.head && take(x)) {
    /* we hold one unit for the oldest live waiter */
    weft__waiter_t *w;
    while ((w = weft__wq_pop(&x->q)) != NULL) {
      atomic_store_explicit(&x->nwait, atomic_load_explicit(&x->nwait, memory_order_relaxed) - 1,
                            memory_order_relaxed);
      weft_thread_t *t = w->t;
      if (weft__waiter_claim(w)) {
        weft__spin_unlock(&x->qlock);
        weft__wake(t, w);
        return;
      }
      /* timed out: try the next one with the same unit */
    }
    /* nobody left: give the unit back (release: pairs with take's acquire) */
    atomic_fetch_add_explicit(&x->count, 1, memory_order_release);
  }
  weft__spin_unlock(&x->qlock);
}

/* A signal that finds a waiter registered (relaxed: a hint, confirmed under qlock)
 * hands its unit to the oldest live waiter directly, count untouched: no add that the
 * slow path would take back (two read-modify-writes of count saved per wake-up, the
 * ping-pong's case). Under qlock every registered waiter is on the queue (a waiter
 * registers and queues itself within one hold of qlock), so a claimed one returns
 * owning the unit as after signal_slow. Returns 0 if no waiter could be claimed (all
 * timed out, or the hint was stale): the caller adds the unit the usual way. */
static __attribute__((noinline)) int signal_handoff(weft__sem_t *x) {
  weft__qlock_lock(&x->qlock);
  weft__waiter_t *w;
  while ((w = weft__wq_pop(&x->q)) != NULL) {
    atomic_store_explicit(&x->nwait, atomic_load_explicit(&x->nwait, memory_order_relaxed) - 1,
                          memory_order_relaxed);
    weft_thread_t *t = w->t;
    if (weft__waiter_claim(w)) {
      weft__spin_unlock(&x->qlock);
      weft__wake(t, w);
      return 1;
    }
    /* timed out: it leaves on its own; try the next one */
  }
  weft__spin_unlock(&x->qlock);
  return 0;
}

/* Adds a unit and, if a waiter registered meanwhile, hands one over (signal_slow).
 * Always inlined: into weft_sem_signal's fast path, which stays a leaf whose other
 * exits are tail calls, and into signal_waiters. */
static inline __attribute__((always_inline)) int signal_add(weft__sem_t *x) {
  int32_t c = atomic_load_explicit(&x->count, memory_order_relaxed);
  do {
    if (c == WEFT_SEM_MAX) return WEFT_EAGAIN;
    /* seq_cst: release for take's acquire, and the store-buffering pair with
     * wait_slow's nwait store */
  } while (!atomic_compare_exchange_weak_explicit(&x->count, &c, c + 1, memory_order_seq_cst,
                                                  memory_order_relaxed));
  if (WEFT__UNLIKELY(atomic_load_explicit(&x->nwait, memory_order_seq_cst))) signal_slow(x);
  return 0;
}

/* weft_sem_signal when a waiter is registered: the hand-off, else the usual add. */
static __attribute__((noinline)) int signal_waiters(weft__sem_t *x) {
  if (signal_handoff(x)) return 0;
  return signal_add(x);
}

int weft_sem_signal(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  weft__sem_t *x = S(s);
  if (WEFT__UNLIKELY(atomic_load_explicit(&x->nwait, memory_order_relaxed))) return signal_waiters(x);
  return signal_add(x);
}
