/* src/sync/sem.c - counting semaphores (weft/sem.h).
 *
 * One 64-bit word holds both halves of the state: count (free units, the public
 * count_) and nwait (threads registered as waiting, the public nwait_). Every
 * change to either is a read-modify-write of the whole word, so the two are never
 * seen apart:
 *   take      count > 0: count - 1            CAS, acquire (pairs with a signal's
 *                                             release add)
 *   signal    nwait == 0: count + 1           CAS, release; the signal's only access
 *             nwait != 0: the hand-off under qlock (signal_waiters)
 *   register  count == 0: nwait + 1           CAS, under qlock, then link
 *   leave     nwait - 1                       atomic add, under qlock
 * No lost wake-up: a waiter registers only by a CAS that saw count 0, and a signal
 * adds only by a CAS that saw nwait 0; whichever comes second in the word's
 * modification order sees the other (the waiter then takes the unit, the signal
 * hands its unit over). The hand-off pops and claims the oldest live waiter under
 * qlock (every registered waiter is linked there: it registers and links within one
 * hold); if none can be claimed it adds the unit under qlock.
 *
 * A signal touches the semaphore after making its unit available only to release
 * qlock (hand-off and fallback), and weft_sem_destroy takes qlock: the memory of a
 * semaphore may be reused once weft_sem_destroy has returned 0, even if a signal
 * is still returning. The fast signal's CAS is its last access.
 */
#include "sync/sync.h"

typedef struct weft__sem {
  _Atomic uint64_t cw;   /* count (low half of count_/nwait_ in memory) | nwait */
  weft__spin_t qlock;
  uint32_t pad;
  weft__wq_t q;          /* qlock */
} weft__sem_t;

_Static_assert(sizeof(weft__sem_t) == sizeof(weft_sem_t), "sem layout");
_Static_assert(offsetof(weft__sem_t, q) == offsetof(weft_sem_t, head_), "sem layout");
_Static_assert(offsetof(weft_sem_t, nwait_) == offsetof(weft_sem_t, count_) + 4, "sem layout");
#define S(s) ((weft__sem_t *)(void *)(s))

/* count_ is the first 4 bytes of the word, nwait_ the next 4: which half of the
 * integer each is depends on the byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CNT_SHIFT 32
#define NW_SHIFT 0
#else
#define CNT_SHIFT 0
#define NW_SHIFT 32
#endif
#define CNT_ONE ((uint64_t)1 << CNT_SHIFT)
#define NW_ONE ((uint64_t)1 << NW_SHIFT)
static inline int32_t cnt_of(uint64_t c) { return (int32_t)(uint32_t)(c >> CNT_SHIFT); }
static inline uint32_t nw_of(uint64_t c) { return (uint32_t)(c >> NW_SHIFT); }

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
  int busy = x->q.head != NULL || nw_of(atomic_load_explicit(&x->cw, memory_order_relaxed)) != 0;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

int32_t weft_sem_value(const weft_sem_t *s) {
  return s ? cnt_of(atomic_load_explicit(&S(s)->cw, memory_order_relaxed)) : 0;
}

/* Takes a unit if there is one: CAS count -> count-1, acquire (pairs with the
 * release of a signal's add). */
static inline int take(weft__sem_t *x) {
  uint64_t c = atomic_load_explicit(&x->cw, memory_order_relaxed);
  while (cnt_of(c) > 0)
    if (atomic_compare_exchange_weak_explicit(&x->cw, &c, c - CNT_ONE, memory_order_acquire,
                                              memory_order_relaxed))
      return 1;
  return 0;
}

/* Under qlock: one registered waiter fewer. relaxed: qlock orders it for the other
 * registrations; signals only test nwait against 0 and then take qlock. */
static inline void leave(weft__sem_t *x) {
  atomic_fetch_sub_explicit(&x->cw, NW_ONE, memory_order_relaxed);
}

int weft_sem_trywait(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  return take(S(s)) ? 0 : WEFT_EBUSY;
}

/* always inlined (into wait_slow_forever and wait_slow_until, below) */
static inline __attribute__((always_inline)) int wait_slow(weft__sem_t *x, uint64_t deadline) {
  weft__waiter_t w;
  weft_vp_t *vp = weft__vp();
  weft__waiter_init_on(&w, vp, deadline);
  if (w.t && deadline != WEFT_FOREVER) {
    if (deadline <= weft__os_now_ns()) {  /* timed out before it waited: counted too */
      weft__sync_count(WEFT__ST_TIMEOUT);
      return WEFT_ETIMEDOUT;
    }
    int rc = weft__timer_reserve(vp);
    if (rc) return rc;
  }
  weft__qlock_lock(&x->qlock);
  /* take a unit, or register (nwait + 1) if there is none: one CAS decides, against
   * the signals' CAS on the same word */
  uint64_t c = atomic_load_explicit(&x->cw, memory_order_relaxed);
  for (;;) {
    if (cnt_of(c) > 0) {
      /* acquire: pairs with the release of a signal's add */
      if (atomic_compare_exchange_weak_explicit(&x->cw, &c, c - CNT_ONE, memory_order_acquire,
                                                memory_order_relaxed)) {
        weft__spin_unlock(&x->qlock);
        return 0;
      }
    } else if (atomic_compare_exchange_weak_explicit(&x->cw, &c, c + NW_ONE,
                                                     memory_order_relaxed,
                                                     memory_order_relaxed)) {
      /* relaxed: a signal that sees nwait takes qlock, which orders the rest */
      break;
    }
  }
  weft__wq_push(&x->q, &w);
  if (weft__wait_block_on(&w, vp, WEFT__WAITING(x, WEFT__WK_SEM), &x->qlock, 0) ==
      WEFT__W_SIGNALED)
    return 0;
  /* timed out: leave the queue unless a signaller already dropped us */
  weft__qlock_lock(&x->qlock);
  if (w.linked) {
    weft__wq_remove(&x->q, &w);
    leave(x);
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

int weft__sem_wait_contended(weft_sem_t *s) { return wait_slow_forever(S(s)); }

int weft_sem_wait(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  weft__sem_t *x = S(s);
  if (WEFT__LIKELY(take(x))) return 0;
  return wait_slow_forever(x);
}

/* weft_sem_signal when a waiter is registered: hands the unit to the oldest live
 * waiter directly, count untouched. Under qlock every registered waiter is on the
 * queue, so a claimed one returns owning the unit (the claim's acq_rel CAS on its
 * state publishes what the signaller did before). If none can be claimed (all timed
 * out), adds the unit under qlock: nobody can register meanwhile. */
static __attribute__((noinline)) int signal_waiters(weft__sem_t *x) {
  weft__qlock_lock(&x->qlock);
  weft__waiter_t *w;
  while ((w = weft__wq_pop(&x->q)) != NULL) {
    leave(x);
    weft_thread_t *t = w->t;
    if (weft__waiter_claim_locked(w, WEFT__W_SIGNALED)) {
      weft__spin_unlock(&x->qlock);
      weft__wake(t, w);
      return 0;
    }
    /* timed out: it leaves on its own; try the next one */
  }
  uint64_t c = atomic_load_explicit(&x->cw, memory_order_relaxed);
  int rc = 0;
  do {
    if (cnt_of(c) == WEFT_SEM_MAX) {
      rc = WEFT_EAGAIN;
      break;
    }
    /* release: pairs with take's acquire */
  } while (!atomic_compare_exchange_weak_explicit(&x->cw, &c, c + CNT_ONE, memory_order_release,
                                                  memory_order_relaxed));
  weft__spin_unlock(&x->qlock);
  return rc;
}

int weft__sem_signal_contended(weft_sem_t *s) { return signal_waiters(S(s)); }

int weft_sem_signal(weft_sem_t *s) {
  if (!s) return WEFT_EINVAL;
  weft__sem_t *x = S(s);
  uint64_t c = atomic_load_explicit(&x->cw, memory_order_relaxed);
  for (;;) {
    if (WEFT__UNLIKELY(nw_of(c) != 0)) return signal_waiters(x);
    if (WEFT__UNLIKELY(cnt_of(c) == WEFT_SEM_MAX)) return WEFT_EAGAIN;
    /* release: pairs with take's acquire. The signal's last access to *x. */
    if (WEFT__LIKELY(atomic_compare_exchange_weak_explicit(&x->cw, &c, c + CNT_ONE,
                                                           memory_order_release,
                                                           memory_order_relaxed)))
      return 0;
  }
}
