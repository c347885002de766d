/* src/sync/barrier.c - barriers (weft/barrier.h). Everything happens under the
 * queue lock: arrivals count themselves; the last of a round claims every waiter
 * and starts the next round, releases the lock, then wakes them (weft__wakeset_t:
 * never a futex wake under the lock), so a woken thread that comes straight back
 * belongs to the new round. The lock's release/acquire orders what
 * every thread did before the barrier before what any does after it. */
#include "sync/sync.h"

typedef struct weft__barrier {
  weft__spin_t qlock;
  uint32_t size;           /* 0 means 1; set by init only */
  uint32_t arrived;        /* qlock */
  uint32_t round;          /* qlock */
  weft__wq_t q;            /* qlock */
} weft__barrier_t;

_Static_assert(sizeof(weft__barrier_t) == sizeof(weft_barrier_t), "barrier layout");
_Static_assert(offsetof(weft__barrier_t, q) == offsetof(weft_barrier_t, head_), "barrier layout");
#define B(b) ((weft__barrier_t *)(void *)(b))

int weft__barrier_waiting(const weft_barrier_t *b) {
  weft__barrier_t *x = B((weft_barrier_t *)(uintptr_t)b);
  return weft__wq_waiting(&x->qlock, &x->q);
}

int weft_barrier_init(weft_barrier_t *b, uint32_t count) {
  if (!b || count == 0) return WEFT_EINVAL;
  *b = (weft_barrier_t)WEFT_BARRIER_INIT(count);
  return 0;
}

int weft_barrier_destroy(weft_barrier_t *b) {
  if (!b) return WEFT_EINVAL;
  weft__barrier_t *x = B(b);
  weft__qlock_lock(&x->qlock);
  int busy = x->arrived != 0 || x->q.head != NULL;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

int weft_barrier_wait(weft_barrier_t *b) {
  if (!b) return WEFT_EINVAL;
  weft__barrier_t *x = B(b);
  uint32_t size = x->size ? x->size : 1;
  weft__qlock_lock(&x->qlock);
  if (++x->arrived < size) {
    weft__waiter_t w;
    weft__waiter_init(&w, WEFT_FOREVER);
    weft__wq_push(&x->q, &w);
    /* no deadline: always SIGNALED */
    weft__wait_q(&w, WEFT__WAITING(b, WEFT__WK_BARRIER), &x->qlock);
    return 0;
  }
  /* the serial thread: release the round; wake after the lock is dropped */
  x->arrived = 0;
  x->round++;
  weft__wakeset_t ws;
  weft__wakeset_init(&ws);
  weft__waiter_t *w;
  while ((w = weft__wq_pop(&x->q)) != NULL)
    weft__wakeset_claim(&ws, w);  /* nothing else can claim: no deadline */
  weft__spin_unlock(&x->qlock);
  weft__wakeset_run(&ws);
  return WEFT_BARRIER_SERIAL;
}
