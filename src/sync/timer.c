/* src/sync/timer.c - the per-VP timer heaps behind every timed wait and sleep.
 *
 * A weft thread with a deadline arms a timer in the heap of the VP it blocks on,
 * in its block continuation (after its context is saved, so a timer that fires at
 * once still finds it blocked). The scheduler of that VP checks the heap whenever
 * it switches (weft__block, weft_yield: one relaxed load when the heap is empty);
 * an idle VP checks every heap while it polls, and sleeps in the kernel no longer
 * than the earliest deadline of any heap (core/idle.c vp_sleep).
 *
 * Firing: under the heap lock, pop an expired waiter and try WAITING -> TIMEDOUT;
 * the CAS is made under the heap lock so that a waiter which was signalled and
 * cancels its timer (taking the same lock) never returns while a firing VP still
 * touches its waiter. Winners are woken after the lock is dropped: a TIMEDOUT
 * waiter cannot run until then, so its waiter stays valid.
 */
#include <string.h>

#include "io/io.h"
#include "sync/sync.h"

static inline int earlier(weft__waiter_t *a, weft__waiter_t *b) { return a->deadline < b->deadline; }

static void set_at(weft__tmheap_t *h, int i, weft__waiter_t *w) {
  h->v[i] = w;
  w->tidx = i;
}

static void sift_up(weft__tmheap_t *h, int i) {
  weft__waiter_t *w = h->v[i];
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!earlier(w, h->v[p])) break;
    set_at(h, i, h->v[p]);
    i = p;
  }
  set_at(h, i, w);
}

static void sift_down(weft__tmheap_t *h, int i, int n) {
  weft__waiter_t *w = h->v[i];
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && earlier(h->v[c + 1], h->v[c])) c++;
    if (!earlier(h->v[c], w)) break;
    set_at(h, i, h->v[c]);
    i = c;
  }
  set_at(h, i, w);
}

/* Fire calls between their first pop and the last wake-up of the threads they woke:
 * such threads are in no heap and not yet queued. The deadlock check (quiet, in
 * core/deadlock.c) reads it through weft__timers_quiet. */
static _Atomic long firing;

/* Both under h->lock. release on earliest: a reader's acquire load of it
 * (weft__timers_quiet) then sees every increment of `firing` made before this store,
 * in this critical section or an earlier one of this heap (the lock orders them). */
static void publish(weft__tmheap_t *h, int n) {
  atomic_store_explicit(&h->n, n, memory_order_relaxed);
  atomic_store_explicit(&h->earliest, n ? h->v[0]->deadline : WEFT_FOREVER, memory_order_release);
}

static void remove_at(weft__tmheap_t *h, int i) {
  int n = atomic_load_explicit(&h->n, memory_order_relaxed) - 1;
  h->v[i]->tidx = -1;
  if (i != n) {
    set_at(h, i, h->v[n]);
    if (i > 0 && earlier(h->v[i], h->v[(i - 1) / 2])) sift_up(h, i);
    else sift_down(h, i, n);
  }
  publish(h, n);
}

int weft__timer_reserve(weft_vp_t *vp) {
  weft__tmheap_t *h = &vp->tm;
  /* Only threads of this VP add entries, and none runs until we block: a slot free
   * now is still free in our continuation. */
  weft__spin_lock(&h->lock);
  int need = atomic_load_explicit(&h->n, memory_order_relaxed) + 1, cap = h->cap;
  weft__spin_unlock(&h->lock);
  if (need <= cap) return 0;
  int ncap = cap ? cap * 2 : 16;
  weft__waiter_t **nv = weft__sys_malloc((size_t)ncap * sizeof *nv);
  if (!nv) return WEFT_ENOMEM;
  weft__spin_lock(&h->lock);
  weft__waiter_t **old = h->v;
  if (old) memcpy(nv, old, (size_t)atomic_load_explicit(&h->n, memory_order_relaxed) * sizeof *nv);
  h->v = nv;
  h->cap = ncap;
  weft__spin_unlock(&h->lock);
  weft__sys_free(old);
  return 0;
}

void weft__timer_arm(weft_vp_t *vp, weft__waiter_t *w) {
  weft__tmheap_t *h = &vp->tm;
  weft__spin_lock(&h->lock);
  int n = atomic_load_explicit(&h->n, memory_order_relaxed);
  WEFT__ASSERT(n < h->cap, "timer armed without a reserved slot");
  w->heap = h;
  set_at(h, n, w);
  sift_up(h, n);
  publish(h, n + 1);
  weft__spin_unlock(&h->lock);
}

void weft__timer_cancel(weft__waiter_t *w) {
  weft__tmheap_t *h = w->heap;
  if (!h) return;
  weft__spin_lock(&h->lock);
  if (w->tidx >= 0) remove_at(h, w->tidx);
  weft__spin_unlock(&h->lock);
  /* w->heap is left as it is (a second cancel finds tidx -1): the sweep of the stacks
   * of idle threads may read it, under the record's lock but not under any lock the
   * woken thread holds here (io.c, weft__timer_swap) */
}

int weft__timer_swap(weft__waiter_t *w, weft__waiter_t *by, uintptr_t mark) {
  weft__tmheap_t *h = w->heap;
  if (!h) return 0;
  weft__spin_lock(&h->lock);
  /* relaxed: a claim of w's is made under this lock (a fire) or under the record's
   * lock the caller holds (a completion, weft_close) */
  int ok = w->tidx >= 0 && atomic_load_explicit(&w->state, memory_order_relaxed) == WEFT__W_WAITING;
  if (ok) {
    int i = w->tidx;
    memcpy(by, w, sizeof *by);  /* here, where no sift moves w (its tidx) */
    set_at(h, i, by);
    w->tidx = -1;
    /* relaxed: read by a fire under this lock (which orders it), and by weft_dump */
    atomic_fetch_or_explicit(&w->t->waiting, mark, memory_order_relaxed);
  }
  weft__spin_unlock(&h->lock);
  return ok;
}

/* Fires h's timers that are due at `now`; returns the number of threads woken. A
 * waiter whose thread's stack is given back (a stand-in put here by weft__timer_swap;
 * its thread's waiting word carries the mark) is handed to the I/O layer, which puts
 * the stack back before its thread is made ready. */
static int fire(weft__tmheap_t *h, uint64_t now) {
  weft_thread_t *woken[32];
  weft__waiter_t *idle[32];
  int nw = 0, ni = 0, total = 0;
  do {
    nw = 0;
    ni = 0;
    weft__spin_lock(&h->lock);
    /* counted before the pops publish a heap without these waiters (publish's release
     * store orders this increment before it) */
    int due = atomic_load_explicit(&h->n, memory_order_relaxed) > 0 && h->v[0]->deadline <= now;
    if (due) atomic_fetch_add_explicit(&firing, 1, memory_order_relaxed);
    while (nw + ni < 32 && atomic_load_explicit(&h->n, memory_order_relaxed) > 0 &&
           h->v[0]->deadline <= now) {
      weft__waiter_t *w = h->v[0];
      remove_at(h, 0);
      uint32_t exp = WEFT__W_WAITING;
      /* acq_rel: pairs with the waiter's acquire load of state; loses to a waker
       * whose claim came first (then the waiter is already on its way) */
      if (atomic_compare_exchange_strong_explicit(&w->state, &exp, WEFT__W_TIMEDOUT,
                                                  memory_order_acq_rel, memory_order_acquire)) {
        /* relaxed: the mark is set under this lock (weft__timer_swap) */
        if (WEFT__UNLIKELY(WEFT__WAITING_IDLE_STACK(
                atomic_load_explicit(&w->t->waiting, memory_order_relaxed))))
          idle[ni++] = w;
        else
          woken[nw++] = w->t;
      }
    }
    int more = atomic_load_explicit(&h->n, memory_order_relaxed) > 0 && h->v[0]->deadline <= now;
    weft__spin_unlock(&h->lock);
    weft_vp_t *vp = weft__vp();
    for (int i = 0; i < nw; i++) weft__unblock(vp, woken[i]);
    for (int i = 0; i < ni; i++) weft__unblock(vp, weft__io_idle_fired(idle[i]));
    /* release: the wake-ups above (queued, a VP woken) happen before a reader's
     * acquire load that sees the count without this fire */
    if (due) atomic_fetch_sub_explicit(&firing, 1, memory_order_release);
    total += nw + ni;
    if (!more) break;
  } while (1);
  return total;
}

void weft__timers_check(weft_vp_t *vp) {
  uint64_t e = atomic_load_explicit(&vp->tm.earliest, memory_order_relaxed);
  if (e == WEFT_FOREVER) return;
  uint64_t now = weft__os_now_ns();
  if (e <= now) fire(&vp->tm, now);
}

int weft__timers_poll_all(void) {
  uint64_t now = 0;
  int total = 0;
  /* the monitor's spare VPs too: their timers outlive their kernel threads */
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    weft__tmheap_t *h = &weft__rt.vps[i]->tm;
    uint64_t e = atomic_load_explicit(&h->earliest, memory_order_relaxed);
    if (e == WEFT_FOREVER) continue;
    if (!now) now = weft__os_now_ns();
    if (e <= now) total += fire(h, now);
  }
  return total;
}

uint64_t weft__timers_earliest(void) {
  uint64_t m = WEFT_FOREVER;
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    uint64_t e = atomic_load_explicit(&weft__rt.vps[i]->tm.earliest, memory_order_relaxed);
    if (e < m) m = e;
  }
  return m;
}

int weft__timers_quiet(void) {
  /* acquire on each earliest: pairs with publish's release store, so that a heap seen
   * empty because a fire popped its waiters shows that fire's count below */
  for (int i = 0; i < weft__rt.nvps_all; i++)
    if (atomic_load_explicit(&weft__rt.vps[i]->tm.earliest, memory_order_acquire) != WEFT_FOREVER)
      return 0;
  /* acquire: pairs with fire's release decrement (its wake-ups are then visible) */
  return atomic_load_explicit(&firing, memory_order_acquire) == 0;
}

void weft__timers_free(weft_vp_t *vp) {
  weft__sys_free(vp->tm.v);
  vp->tm.v = NULL;
  vp->tm.cap = 0;
}
