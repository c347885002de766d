/* src/core/threadlist.c - first-class thread lists (weft/threadlist.h).
 *
 * A list is its lock, a copy of its policy, the user's data, a head and tail for
 * the built-in policies, and a count. Every put and get runs under the lock.
 *
 * yield_onto is weft_thread_block() with a release that puts the caller on the list
 * (under the list's lock) and then runs the caller's release: the caller's context
 * is saved before the put, so a getter on another VP that unblocks it at once
 * resumes a complete context. Ordering: the continuation's put happens after the
 * save on the same kernel thread; the list lock's release (unlock after put) pairs
 * with the getter's acquire (lock before get), so the getter, and the VP that
 * weft_thread_unblock() hands the thread to, see the saved context
 * (docs/meta-interface.md "Thread lists").
 */
#include <stdlib.h>

#include "core/internal.h"
#include "weft/threadlist.h"

_Static_assert(WEFT__LINK_WORDS * sizeof(uintptr_t) == WEFT_THREADLIST_LINK_MAX,
               "link space size");

enum { KIND_USER = 0, KIND_FIFO = 1, KIND_LIFO = 2 };

struct weft_threadlist {
  weft__spin_t lock;
  int kind;                      /* KIND_*: the built-ins run without indirect calls */
  weft_threadlist_ops_t ops;     /* read-only after create */
  void *data;                    /* read-only after create */
  weft_thread_t *head, *tail;    /* built-in policies: lock */
  _Atomic long n;                /* threads on the list: written under lock, read
                                    relaxed by weft_threadlist_count (a snapshot) */
};

/* Built-in policies: link[0] is the next thread. */
static void fifo_put(weft_threadlist_t *l, weft_thread_t *t) {
  t->link[0] = 0;
  if (l->tail) l->tail->link[0] = (uintptr_t)t;
  else l->head = t;
  l->tail = t;
}
static weft_thread_t *fifo_get(weft_threadlist_t *l) {
  weft_thread_t *t = l->head;
  if (t) {
    l->head = (weft_thread_t *)t->link[0];
    if (!l->head) l->tail = NULL;
  }
  return t;
}
static void lifo_put(weft_threadlist_t *l, weft_thread_t *t) {
  t->link[0] = (uintptr_t)l->head;
  l->head = t;
}
static weft_thread_t *lifo_get(weft_threadlist_t *l) {
  weft_thread_t *t = l->head;
  if (t) l->head = (weft_thread_t *)t->link[0];
  return t;
}

const weft_threadlist_ops_t weft_threadlist_fifo = {sizeof(uintptr_t), fifo_put, fifo_get};
const weft_threadlist_ops_t weft_threadlist_lifo = {sizeof(uintptr_t), lifo_put, lifo_get};

int weft_threadlist_create(weft_threadlist_t **out, const weft_threadlist_ops_t *ops, void *data) {
  if (!out || !ops || !ops->put || !ops->get || ops->link_size > WEFT_THREADLIST_LINK_MAX)
    return WEFT_EINVAL;
  weft_threadlist_t *l = weft__sys_calloc_aligned(sizeof *l, WEFT__CACHELINE);
  if (!l) return WEFT_ENOMEM;
  l->ops = *ops;
  l->kind = ops->put == fifo_put && ops->get == fifo_get   ? KIND_FIFO
            : ops->put == lifo_put && ops->get == lifo_get ? KIND_LIFO
                                                           : KIND_USER;
  l->data = data;
  *out = l;
  return 0;
}

int weft_threadlist_destroy(weft_threadlist_t *l) {
  if (!l) return WEFT_EINVAL;
  /* relaxed: destroying a list others still use is undefined anyway; this catches
   * the list that still holds threads */
  if (atomic_load_explicit(&l->n, memory_order_relaxed) != 0) return WEFT_EBUSY;
  weft__sys_free(l);
  return 0;
}

void *weft_threadlist_data(const weft_threadlist_t *l) { return l ? l->data : NULL; }

void *weft_threadlist_link(weft_thread_t *t) { return t ? (void *)t->link : NULL; }

/* lock held */
static inline void put_locked(weft_threadlist_t *l, weft_thread_t *t) {
  switch (l->kind) {
    case KIND_FIFO: fifo_put(l, t); break;
    case KIND_LIFO: lifo_put(l, t); break;
    default: l->ops.put(l, t); break;
  }
  atomic_store_explicit(&l->n, atomic_load_explicit(&l->n, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

int weft_threadlist_put(weft_threadlist_t *l, weft_thread_t *t) {
  if (!l || !t) return WEFT_EINVAL;
  WEFT__ASSERT(t != weft_self(), "weft_threadlist_put of the running thread (use yield_onto)");
  /* acquire/release: the lock orders this put after whatever saved t (its
   * context) for the getter, which takes the same lock */
  weft__spin_lock(&l->lock);
  put_locked(l, t);
  weft__spin_unlock(&l->lock);
  return 0;
}

weft_thread_t *weft_threadlist_get(weft_threadlist_t *l) {
  if (!l) return NULL;
  /* Unlocked look first (idle VPs poll run lists): relaxed is enough, a put that
   * happened before this call is seen (coherence), one concurrent with it may be
   * missed, as if the get had run first; under weft_sched_threadlist the kernel's
   * notify after the put makes idle VPs poll again. */
  if (atomic_load_explicit(&l->n, memory_order_relaxed) == 0) return NULL;
  weft__spin_lock(&l->lock);
  weft_thread_t *t;
  switch (l->kind) {
    case KIND_FIFO: t = fifo_get(l); break;
    case KIND_LIFO: t = lifo_get(l); break;
    default: t = l->ops.get(l); break;
  }
  if (t)
    atomic_store_explicit(&l->n, atomic_load_explicit(&l->n, memory_order_relaxed) - 1,
                          memory_order_relaxed);
  weft__spin_unlock(&l->lock);
  return t;
}

long weft_threadlist_count(weft_threadlist_t *l) {
  return l ? atomic_load_explicit(&l->n, memory_order_relaxed) : 0;
}

/* ---- yield onto a list ---------------------------------------------------------------- */

struct onto {
  weft_threadlist_t *l;
  weft_thread_t *self;
  void (*release)(void *);
  void *arg;
};

/* weft_thread_block's release: runs on the next context once the caller is saved.
 * Copies everything first: once the list lock is released the caller may be
 * resumed elsewhere and the struct (on its stack) reused. */
static void onto_release(void *p) {
  struct onto c = *(struct onto *)p;
  weft_threadlist_put(c.l, c.self);
  if (c.release) c.release(c.arg);
}

int weft_threadlist_yield_onto(weft_threadlist_t *l, void (*release)(void *arg), void *arg) {
  if (!l) return WEFT_EINVAL;
  weft_vp_t *vp = weft__vp();
  if (!vp) return WEFT_EPERM;
  struct onto c = {l, vp->current, release, arg};
  weft_thread_block(onto_release, &c);
  return 0;
}

weft_thread_t *weft_threadlist_wake(weft_threadlist_t *l) {
  weft_thread_t *t = weft_threadlist_get(l);
  if (t) weft_thread_unblock(t);
  return t;
}

/* ---- a scheduler on a thread list ---------------------------------------------------- */

static void tl_ready(weft_bundle_t *b, weft_thread_t *t) {
  weft_threadlist_put(weft_bundle_data(b), t);
}

static weft_thread_t *tl_idle(weft_bundle_t *b, weft_vp_t *vp) {
  (void)vp;
  return weft_threadlist_get(weft_bundle_data(b));
}

/* Not DISPATCH_ONLY: the kernel notifies after created/unblocked, so a sleeping VP
 * wakes to poll processor_idle. */
const weft_sched_ops_t weft_sched_threadlist = {
    .thread_created = tl_ready,
    .thread_started = NULL,
    .thread_terminated = NULL,
    .thread_blocked = NULL,
    .thread_unblocked = tl_ready,
    .bundle_created = NULL,
    .bundle_terminated = NULL,
    .processor_idle = tl_idle,
    .flags = 0,
};
