/* src/sched/priority.c - the non-preemptive priority scheduler of weft/schedlib.h,
 * written only against weft/sched.h.
 *
 * State: one binary heap of every ready thread of the bundle, ordered by priority
 * (higher first) and then by the order threads became ready (FIFO among equals),
 * under one spinlock. Central on purpose: "the highest priority ready thread runs
 * next on any VP" needs one place that knows the maximum; the cost is one lock that
 * every VP of the bundle takes (Active Threads §5.4: priority queues are the expensive
 * end of the library).
 *
 *   thread_created    priority: the one given to weft_schedlib_create_priority(),
 *                     else the creator's if it is in this bundle, else 0; stored in
 *                     the thread's scheduler word; push
 *   thread_unblocked  push with the priority now in the thread's word
 *   processor_idle    pop the maximum
 *
 * Non-preemptive: a running thread keeps its VP until it blocks, yields or finishes,
 * even when a higher priority thread becomes ready.
 *
 * Races tolerated: handlers on every VP at once (one lock); push and pop race, and a
 * pop that finds the heap empty returns NULL (always allowed). If the heap cannot
 * grow (out of memory) the thread goes to a dispatch queue instead: it still runs,
 * out of priority order.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/schedlib.h"
#include "weft/runtime.h"
#include "weft/spinlock.h"

#include "core/defs.h"

#define HEAP_INIT_CAP 64

typedef struct entry {
  int prio;
  uint64_t seq; /* when it became ready: FIFO among equal priorities */
  weft_thread_t *t;
} entry_t;

typedef struct prio_sched {
  weft__schedlib_head_t head;
  weft_spin_t lock;
  entry_t *heap;    /* under lock: heap[0] is the next to run */
  size_t n, cap;    /* under lock */
  uint64_t seq;     /* under lock */
  /* n, stored under the lock, read without it so that processor_idle on an empty
   * heap takes no lock. Relaxed: a hint; a push is not missed by a VP's last look
   * before sleeping because the kernel's notify after the event pairs with the
   * sleeper's fences (src/core/idle.c, vp_sleep; docs/memory-ordering.md §6b). */
  _Atomic size_t hint;
} prio_sched_t;

/* The priority given by weft_schedlib_create_priority() to the thread_created event
 * it raises on this OS thread (weft_create never switches, so the event runs here). */
static WEFT__TLS struct {
  int set, prio;
} pending;

static int before(const entry_t *a, const entry_t *b) {
  return a->prio > b->prio || (a->prio == b->prio && a->seq < b->seq);
}

static void sift_up(entry_t *h, size_t i) {
  entry_t e = h[i];
  while (i > 0 && before(&e, &h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = e;
}

static void sift_down(entry_t *h, size_t n, size_t i) {
  entry_t e = h[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(&h[c + 1], &h[c])) c++;
    if (!before(&h[c], &e)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = e;
}

static int prio_of(weft_thread_t *t) { return (int)(intptr_t)*weft_sched_thread_data(t); }

static void push(prio_sched_t *s, weft_thread_t *t) {
  weft_spin_lock(&s->lock);
  if (s->n == s->cap) {
    /* allocation inside a handler: short and rare (the heap starts with room for
     * 64). On failure t goes to a dispatch queue instead: it still runs. */
    entry_t *h = weft__sys_malloc_uncounted(2 * s->cap * sizeof *h);
    if (h) {
      memcpy(h, s->heap, s->cap * sizeof *h);
      free(s->heap);
    } else {
      weft_spin_unlock(&s->lock);
      weft_vp_t *vp = weft_sched_vp_self();
      weft_sched_enqueue(vp ? vp : weft_sched_vp(0), t);
      return;
    }
    s->heap = h;
    s->cap *= 2;
  }
  s->heap[s->n] = (entry_t){prio_of(t), s->seq++, t};
  sift_up(s->heap, s->n++);
  atomic_store_explicit(&s->hint, s->n, memory_order_relaxed); /* see prio_sched_t */
  weft_spin_unlock(&s->lock);
}

static void on_created(weft_bundle_t *b, weft_thread_t *t) {
  int prio = 0;
  weft_thread_t *creator = weft_self();
  if (pending.set) prio = pending.prio;
  else if (creator && weft_thread_bundle(creator) == b) prio = prio_of(creator);
  *weft_sched_thread_data(t) = (uintptr_t)(intptr_t)prio;
  push(weft_bundle_data(b), t);
}

static void on_unblocked(weft_bundle_t *b, weft_thread_t *t) { push(weft_bundle_data(b), t); }

static weft_thread_t *on_idle(weft_bundle_t *b, weft_vp_t *vp) {
  (void)vp;
  prio_sched_t *s = weft_bundle_data(b);
  if (!atomic_load_explicit(&s->hint, memory_order_relaxed)) return NULL; /* see prio_sched_t */
  weft_thread_t *t = NULL;
  weft_spin_lock(&s->lock);
  if (s->n) {
    t = s->heap[0].t;
    s->heap[0] = s->heap[--s->n];
    if (s->n) sift_down(s->heap, s->n, 0);
    atomic_store_explicit(&s->hint, s->n, memory_order_relaxed);
  }
  weft_spin_unlock(&s->lock);
  return t;
}

const weft_sched_ops_t weft__sched_priority_ops = {
    .thread_created = on_created,
    .thread_started = NULL,
    .thread_terminated = NULL,
    .thread_blocked = NULL,
    .thread_unblocked = on_unblocked,
    .bundle_created = NULL,
    .bundle_terminated = NULL,
    .processor_idle = on_idle,
    .flags = WEFT_SCHED_IDLE_LEAF, /* on_idle: its own heap, nothing of the tree */
};

int weft__priority_data_create(void **out) {
  prio_sched_t *s = weft__sys_malloc_uncounted(sizeof *s);
  entry_t *h = weft__sys_malloc_uncounted(HEAP_INIT_CAP * sizeof *h);
  if (!s || !h) {
    free(s);
    free(h);
    return WEFT_ENOMEM;
  }
  memset(s, 0, sizeof *s);
  s->head.kind = WEFT_SCHED_PRIORITY;
  weft_spin_init(&s->lock);
  s->heap = h;
  s->cap = HEAP_INIT_CAP;
  *out = s;
  return 0;
}

void weft__priority_data_destroy(void *data) {
  prio_sched_t *s = data;
  free(s->heap);
  free(s);
}

int weft_schedlib_create_priority(weft_thread_t **out, const weft_attr_t *attr, int prio,
                                  weft_thread_fn fn, void *arg) {
  pending.set = 1;
  pending.prio = prio;
  int rc = weft_create(out, attr, fn, arg);
  pending.set = 0;
  return rc;
}

int weft_schedlib_set_priority(weft_thread_t *t, int prio) {
  if (!t) return WEFT_EINVAL;
  *weft_sched_thread_data(t) = (uintptr_t)(intptr_t)prio;
  return 0;
}

int weft_schedlib_priority(weft_thread_t *t) { return t ? prio_of(t) : 0; }
