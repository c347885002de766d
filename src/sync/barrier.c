/* src/sync/barrier.c - barriers (weft/barrier.h). Everything happens under the
 * queue lock: arrivals count themselves; the last of a round claims every waiter
 * and starts the next round before it wakes them, so a woken thread that comes
 * straight back belongs to the new round. The lock's release/acquire orders what
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

int weft_barrier_init(weft_barrier_t *b, uint32_t count) {
  if (!b || count == 0) return WEFT_EINVAL;
  *b = (weft_barrier_t)WEFT_BARRIER_INIT(count);
  return 0;
}

int weft_barrier_destroy(weft_barrier_t *b) {
  if (!b) return WEFT_EINVAL;
  weft__barrier_t *x = B(b);
  weft__spin_lock(&x->qlock);
  int busy = x->arrived != 0 || x->q.head != NULL;
  weft__spin_unlock(&x->qlock);
  return busy ? WEFT_EBUSY : 0;
}

int weft_barrier_wait(weft_barrier_t *b) {
  if (!b) return WEFT_EINVAL;
  weft__barrier_t *x = B(b);
  uint32_t size = x->size ? x->size : 1;
  weft__spin_lock(&x->qlock);
  if (++x->arrived < size) {
    weft__waiter_t w;
    weft__waiter_init(&w, WEFT_FOREVER);
    weft__wq_push(&x->q, &w);
    weft__wait(&w, &x->qlock, NULL, NULL);  /* no deadline: always SIGNALED */
    return 0;
  }
  /* the serial thread: release the round */
  x->arrived = 0;
  x->round++;
  weft__waiter_t *list = NULL, *w;
  while ((w = weft__wq_pop(&x->q)) != NULL) {
    weft_thread_t *t = w->t;
    weft__waiter_claim(w);  /* nothing else can claim: no deadline */
    if (t) {
      w->next = list;
      list = w;
    } else {
      weft__wake(NULL, w);
    }
  }
  weft__spin_unlock(&x->qlock);
  while (list) {
    w = list;
    list = w->next;
    weft__unblock(weft__vp(), w->t);
  }
  return WEFT_BARRIER_SERIAL;
}
