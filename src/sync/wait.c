/* src/sync/wait.c - the shared block/wake path, sleeping, the clock, the
 * counters and the process-wide mutex tuning. */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "sync/sync.h"
#include "weft/hook.h"

/* ---- counters ------------------------------------------------------------------- */

/* Plain OS threads have no VP: their events go here, and so do a VP's when it is
 * destroyed at shutdown (relaxed: counts only). */
_Atomic uint64_t weft__sync_os_counts[WEFT__ST_N];

void weft_sync_stats(weft_sync_stats_t *out) {
  if (!out) return;
  uint64_t c[WEFT__ST_N];
  for (int k = 0; k < WEFT__ST_N; k++) c[k] = atomic_load_explicit(&weft__sync_os_counts[k], memory_order_relaxed);
  /* a plain OS thread reads the VPs inside its gate: weft_shutdown() folds their
   * counts into the process-wide ones and frees them once no such call is inside */
  int g = weft__os_read_enter();
  if (g && weft_is_running())
    for (int i = 0; i < weft__rt.nvps_all; i++)  /* the monitor's spares count too */
      for (int k = 0; k < WEFT__ST_N; k++)
        c[k] += atomic_load_explicit(&weft__rt.vps[i]->sync_st[k], memory_order_relaxed);
  weft__os_read_leave(g);
  out->mutex_missed = c[WEFT__ST_MISSED];
  out->acquired_spinning = c[WEFT__ST_SPIN];
  out->acquired_polling = c[WEFT__ST_POLL];
  out->blocked = c[WEFT__ST_BLOCKED];
  out->idled = c[WEFT__ST_IDLED];
  out->timeouts = c[WEFT__ST_TIMEOUT];
}

/* Shutdown: a VP's counts join the process-wide ones before the VP goes, so that the
 * counters never go backwards (relaxed: counts only; the runtime is quiescent). */
void weft__sync_stats_fold(weft_vp_t *vp) {
  for (int k = 0; k < WEFT__ST_N; k++)
    atomic_fetch_add_explicit(&weft__sync_os_counts[k],
                              atomic_load_explicit(&vp->sync_st[k], memory_order_relaxed),
                              memory_order_relaxed);
}

void weft_sync_stats_reset(void) {
  for (int k = 0; k < WEFT__ST_N; k++) atomic_store_explicit(&weft__sync_os_counts[k], 0, memory_order_relaxed);
  int g = weft__os_read_enter();  /* as weft_sync_stats */
  if (g && weft_is_running())
    for (int i = 0; i < weft__rt.nvps_all; i++)
      for (int k = 0; k < WEFT__ST_N; k++)
        atomic_store_explicit(&weft__rt.vps[i]->sync_st[k], 0, memory_order_relaxed);
  weft__os_read_leave(g);
}

/* ---- tuning --------------------------------------------------------------------- */

_Atomic int weft__spin_max = 100;   /* relaxed: a tuning knob read on slow paths */
_Atomic int weft__spin_polling = 1;

int weft_sync_set_spin(int spin_max, int polling) {
  if (spin_max < 0 || spin_max > 1000000) return WEFT_EINVAL;
  atomic_store_explicit(&weft__spin_max, spin_max, memory_order_relaxed);
  atomic_store_explicit(&weft__spin_polling, polling != 0, memory_order_relaxed);
  return 0;
}

/* ---- queue locks ---------------------------------------------------------------- */

void weft__qlock_lock_slow(weft__spin_t *l) {
  for (unsigned n = 0;; n++) {
    /* acquire: pairs with weft__spin_unlock's release */
    if (!atomic_load_explicit(&l->word, memory_order_relaxed) &&
        !atomic_exchange_explicit(&l->word, 1, memory_order_acquire))
      return;
    if (n < 100) weft__os_relax();
    else sched_yield();  /* the holder may be preempted: let it run */
  }
}

/* ---- block and wake ------------------------------------------------------------- */

struct wait_cont {
  weft__waiter_t *w;
  weft__spin_t *qlock;
  void (*extra)(void *);
  void *arg;
};

/* Runs on the next thread's (or the idle loop's) stack once the waiter's context
 * is saved. Copies everything first: once the queue lock is released (or the
 * timer armed) the waiter may be resumed elsewhere and its stack reused. */
/* Every wait continuation's steps once the waiter is saved, up to the release of its
 * queue lock: the BLOCKED events, the idle count, the timer. From the release on, w
 * (on the waiter's stack) may be resumed and reused: callers use only locals after. */
static inline __attribute__((always_inline)) void cont_publish(weft__waiter_t *w,
                                                               weft__spin_t *qlock,
                                                               int may_be_null) {
  weft_thread_t *self = w->t;
  uint32_t f = weft__tflags(self);
  /* obj for the BLOCKED callback: the wait queue's lock word identifies the object
   * (NULL for a sleep) */
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) weft__blocked_slow(self, f, qlock);
  weft_vp_t *vp = weft__vp();
  if (!vp->current) weft__stat_inc(&vp->sync_st[WEFT__ST_IDLED]); /* nothing else to run */
  if (WEFT__UNLIKELY(w->deadline != WEFT_FOREVER)) weft__timer_arm(vp, w);
  /* release: pairs with the waker's lock */
  if (!may_be_null || qlock) weft__spin_unlock(qlock);
}

static void wait_cont(void *p) {
  struct wait_cont *c = p;
  void (*extra)(void *) = c->extra;
  void *arg = c->arg;
  cont_publish(c->w, c->qlock, 1);
  if (extra) extra(arg);
}

uint32_t weft__wait_os(weft__waiter_t *w, weft__spin_t *qlock, void (*extra)(void *), void *arg) {
  if (qlock) weft__spin_unlock(qlock);
  if (extra) extra(arg);
  for (;;) {
    /* acquire: pairs with the waker's acq_rel claim */
    uint32_t st = atomic_load_explicit(&w->state, memory_order_acquire);
    if (st == WEFT__W_CLAIMED) {  /* a mutex unlock claimed it: SIGNALED follows */
      weft__os_futex_wait_until(&w->state, WEFT__W_CLAIMED, WEFT_FOREVER);
      continue;
    }
    if (st != WEFT__W_WAITING) return st;
    if (w->deadline != WEFT_FOREVER && weft__os_now_ns() >= w->deadline) {
      uint32_t exp = WEFT__W_WAITING;
      if (atomic_compare_exchange_strong_explicit(&w->state, &exp, WEFT__W_TIMEDOUT,
                                                  memory_order_acq_rel, memory_order_acquire))
        return WEFT__W_TIMEDOUT;
      continue;  /* a waker claimed it first */
    }
    weft__os_futex_wait_until(&w->state, WEFT__W_WAITING, w->deadline);
  }
}

uint32_t weft__wait_on(weft__waiter_t *w, uintptr_t what, weft__spin_t *qlock,
                       void (*extra)(void *), void *arg) {
  weft_thread_t *self = w->t;
  if (!self) return weft__wait_os(w, qlock, extra, arg);
  weft_vp_t *vp = weft__vp();
  struct wait_cont c = {w, qlock, extra, arg};
  /* relaxed (both): read only by weft_dump, which orders nothing by it */
  atomic_store_explicit(&self->waiting, what, memory_order_relaxed);
  weft__block(vp, self, wait_cont, &c);
  atomic_store_explicit(&self->waiting, 0, memory_order_relaxed);
  /* acquire: pairs with the waker's (or the timer's) acq_rel CAS */
  uint32_t st = atomic_load_explicit(&w->state, memory_order_acquire);
  if (w->heap) weft__timer_cancel(w);
  return st;
}

/* The continuations of weft__wait_block (sync.h): wait_cont's steps with the waiter
 * as the argument; a cond waiter (_cond) also gives up its mutex. Everything is read
 * from w before qlock is released. The common case (no callbacks or other slow-path
 * flag, another thread to run, no deadline) is a leaf that releases qlock and
 * tail-calls the mutex release; the rest goes out of line (wait_cont_rare), so that
 * the fast path saves no registers. */
static __attribute__((noinline)) void wait_cont_rare(weft__waiter_t *w, weft__mutex_t *m) {
  cont_publish(w, w->qlock, 0);  /* never NULL here */
  if (m) weft__mutex_unlock_cont(m);
}
static inline __attribute__((always_inline)) void wait_cont_w(weft__waiter_t *w, int cond) {
  weft__mutex_t *m = cond ? WEFT__M(w->mutex) : NULL;  /* never NULL for a cond waiter */
  weft_vp_t *vp = weft__vp();
  weft_thread_t *next = vp->current;  /* the thread this VP switched to */
  /* the tests of cont_publish, as one */
  if (WEFT__UNLIKELY((weft__tflags(w->t) & WEFT__TF_SLOW) || !next ||
                     w->deadline != WEFT_FOREVER)) {
    wait_cont_rare(w, m);
    return;
  }
  /* release: pairs with the waker's lock. w may be resumed from here on. */
  weft__spin_unlock(w->qlock);
  if (!cond) return;
  /* Continuation recognition (C-Threads with continuations, 4.4): the thread this VP
   * switches to waits in cond_wait (its waiting word says COND until it resumes; wait
   * morphing rewrites it to MUTEX) and will take back this same mutex first thing.
   * The mutex goes to it held (its waiter marked HANDED): no release here and no
   * acquire there, the word unchanged (2 stays 2: whoever is queued is woken by its
   * unlock). next is off every queue, its context not yet resumed: nobody else reads
   * or writes its waiter now (relaxed: its own word, written by next itself before
   * it blocked, on this VP or published by the queue lock it came through), and it
   * runs next on this kernel thread, after everything this thread did under m. */
  uintptr_t wk = atomic_load_explicit(&next->waiting, memory_order_relaxed);
  if ((wk & 7) == WEFT__WK_COND) {
    weft__waiter_t *nw = next->blocked_on;  /* cond_wait's waiter, on next's stack */
    if (WEFT__M(nw->mutex) == m) {
      nw->morphed = WEFT__MORPH_HANDED;
      return;
    }
  }
  weft__mutex_unlock_cont(m);
}
void weft__wait_cont_q(void *p) { wait_cont_w(p, 0); }
void weft__wait_cont_cond(void *p) { wait_cont_w(p, 1); }

uint32_t weft__wait_q(weft__waiter_t *w, uintptr_t what, weft__spin_t *qlock) {
  return weft__wait_block(w, what, qlock, 0);
}

uint32_t weft__wait(weft__waiter_t *w, weft__spin_t *qlock, void (*extra)(void *), void *arg) {
  return weft__wait_on(w, 0, qlock, extra, arg);
}

/* ---- waiter counts (weft/debug.h) ------------------------------------------------ */

int weft__wq_waiting(weft__spin_t *qlock, const weft__wq_t *q) {
  int n = 0;
  weft__qlock_lock(qlock);
  for (const weft__waiter_t *w = q->head; w; w = w->next)
    /* relaxed: the state of a linked waiter changes from WAITING only by a claim
     * or a timeout; either is a moment's difference to a snapshot */
    if (atomic_load_explicit(&w->state, memory_order_relaxed) == WEFT__W_WAITING) n++;
  weft__spin_unlock(qlock);
  return n;
}

int weft_debug_waiters(weft_debug_obj_t kind, const void *obj) {
  if (!obj) return WEFT_EINVAL;
  switch (kind) {
    case WEFT_DEBUG_MUTEX:
    case WEFT_DEBUG_HYBRID: {  /* a weft_hybrid_t is a weft_mutex_t (its first member) */
      weft__mutex_t *m = WEFT__M((weft_mutex_t *)(uintptr_t)obj);
      return weft__wq_waiting(&m->qlock, &m->q);
    }
    case WEFT_DEBUG_COND: return weft__cond_waiting(obj);
    case WEFT_DEBUG_SEM: return weft__sem_waiting(obj);
    case WEFT_DEBUG_RWLOCK: return weft__rwlock_waiting(obj);
    case WEFT_DEBUG_BARRIER: return weft__barrier_waiting(obj);
    case WEFT_DEBUG_JOIN: {
      /* relaxed: a snapshot of the join word (encoding in core/internal.h) */
      uintptr_t jw = atomic_load_explicit(&((const weft_thread_t *)obj)->join, memory_order_relaxed);
      return WEFT__JW_TAG(jw) == WEFT__JW_WEFT || WEFT__JW_TAG(jw) == WEFT__JW_OS;
    }
  }
  return WEFT_EINVAL;
}

/* ---- time ----------------------------------------------------------------------- */

uint64_t weft_time_now(void) { return weft__os_now_ns(); }

uint64_t weft_deadline_after(uint64_t ns) {
  uint64_t now = weft__os_now_ns();
  return ns >= WEFT_FOREVER - 1 - now ? WEFT_FOREVER - 1 : now + ns;
}

int weft_sleep_until(uint64_t deadline) {
  if (deadline == WEFT_FOREVER) return WEFT_EINVAL;
  weft_vp_t *vp = weft__vp();
  if (!vp) {
    struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
    return 0;
  }
  if (deadline <= weft__os_now_ns()) {
    weft_yield();
    return 0;
  }
  int rc = weft__timer_reserve(vp);
  if (rc) return rc;
  weft__waiter_t w;
  weft__waiter_init(&w, deadline);
  weft__wait_on(&w, WEFT__WK_SLEEP, NULL, NULL, NULL);
  return 0;
}

int weft_sleep_ns(uint64_t ns) { return weft_sleep_until(weft_deadline_after(ns)); }
