/* src/core/bundle.c - bundles and the kernel services schedulers call. */
#include <string.h>

#include "core/internal.h"

#define WEFT__STEAL_MAX 64 /* most threads one steal moves */

weft_bundle_t *weft__bundle_new_root(void) {
  weft_bundle_t *b = weft__sys_calloc(1, sizeof *b);
  if (!b) return NULL;
  b->ops = weft_sched_default;
  b->ops_id = &weft_sched_default;  /* the only bundle whose handlers are inlined */
  return b;
}

void weft__bundle_free_root(weft_bundle_t *b) { weft__sys_free(b); }

weft_bundle_t *weft_bundle_root(void) { return weft_is_running() ? weft__rt.root : NULL; }

int weft_bundle_create(weft_bundle_t **out, weft_bundle_t *parent,
                       const weft_sched_ops_t *ops, void *data) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (!out || !ops || !ops->thread_created || !ops->thread_unblocked) return WEFT_EINVAL;
  weft_bundle_t *b = weft__sys_calloc(1, sizeof *b);
  if (!b) return WEFT_ENOMEM;
  b->ops = *ops;
  b->ops_id = ops == &weft_sched_default ? NULL : ops; /* never the inlined path */
  b->data = data;
  b->parent = parent ? parent : weft__rt.root;
  atomic_fetch_add_explicit(&b->parent->nchildren, 1, memory_order_relaxed);
  weft__spin_lock(&weft__rt.bundle_lock);
  b->list_next = weft__rt.bundles;
  if (b->list_next) b->list_next->list_prev = b;
  weft__rt.bundles = b;
  atomic_fetch_add_explicit(&weft__rt.nbundles, 1, memory_order_relaxed);
  weft__spin_unlock(&weft__rt.bundle_lock);
  weft_bundle_t *p = b->parent;
  if (p->ops.bundle_created) p->ops.bundle_created(p, b);
  *out = b;
  return 0;
}

int weft_bundle_destroy(weft_bundle_t *b) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (!b || b == weft__rt.root) return WEFT_EINVAL;
  /* acquire: pairs with the release decrement in the finish continuation */
  if (atomic_load_explicit(&b->nthreads, memory_order_acquire) != 0 ||
      atomic_load_explicit(&b->nchildren, memory_order_acquire) != 0)
    return WEFT_EBUSY;
  weft__spin_lock(&weft__rt.bundle_lock);
  if (b->list_prev) b->list_prev->list_next = b->list_next;
  else weft__rt.bundles = b->list_next;
  atomic_fetch_sub_explicit(&weft__rt.nbundles, 1, memory_order_relaxed);
  if (b->list_next) b->list_next->list_prev = b->list_prev;
  weft__spin_unlock(&weft__rt.bundle_lock);
  weft_bundle_t *p = b->parent;
  if (p->ops.bundle_terminated) p->ops.bundle_terminated(p, b);
  atomic_fetch_sub_explicit(&p->nchildren, 1, memory_order_release);
  weft__sys_free(b);
  return 0;
}

void *weft_bundle_data(const weft_bundle_t *b) { return b ? b->data : NULL; }

weft_bundle_t *weft_thread_bundle(const weft_thread_t *t) { return t ? t->bundle : NULL; }

/* ---- kernel services ---------------------------------------------------------------- */

void weft_sched_enqueue(weft_vp_t *vp, weft_thread_t *t) { weft__enqueue(vp, t); }

weft_thread_t *weft_sched_steal(weft_vp_t *vp) {
  weft_thread_t *t = weft__dequeue(vp);
  if (t) {
    weft_vp_t *me = weft__vp();
    if (me && me != vp) weft__stat_inc(&me->n_steals);
  }
  return t;
}

weft_thread_t *weft_sched_steal_half(weft_vp_t *victim, weft_vp_t *to) {
  if (!victim || !to) return NULL;
  if (victim == to) return weft__dequeue(to);
  if (!atomic_load_explicit(&victim->q.head, memory_order_relaxed)) return NULL;
  /* take the older half (at most WEFT__STEAL_MAX: the walk happens under the
   * victim's lock) */
  weft__spin_lock(&victim->q.lock);
  long n = victim->q.n, k = (n + 1) / 2;
  if (k > WEFT__STEAL_MAX) k = WEFT__STEAL_MAX;
  weft_thread_t *first = atomic_load_explicit(&victim->q.head, memory_order_relaxed);
  if (!first) {
    weft__spin_unlock(&victim->q.lock);
    return NULL;
  }
  weft_thread_t *last = first;
  for (long i = 1; i < k; i++) last = last->next;
  weft_thread_t *rest = last->next;
  atomic_store_explicit(&victim->q.head, rest, memory_order_relaxed);
  if (!rest) victim->q.tail = NULL;
  victim->q.n -= k;
  weft__spin_unlock(&victim->q.lock);
  last->next = NULL;
  /* run the first; queue the others on `to` */
  weft_thread_t *more = first->next;
  if (more) {
    weft__spin_lock(&to->q.lock);
    if (to->q.tail) to->q.tail->next = more;
    else atomic_store_explicit(&to->q.head, more, memory_order_relaxed);
    to->q.tail = last;
    to->q.n += k - 1;
    uint32_t idle = atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
    weft__spin_unlock(&to->q.lock);
    if (idle != 0 && (idle & 0xffff) == 0) weft__wake_one();
  }
  first->next = NULL;
  weft_vp_t *me = weft__vp();
  if (me) weft__stat_inc(&me->n_steals);
  return first;
}

int weft_sched_bind_stack(weft_thread_t *t) {
  if (!t) return WEFT_EINVAL;
  if (t->ctx.sp) return 0;
  return weft__stack_bind(weft__vp(), t);
}

weft_vp_t *weft_sched_vp_self(void) { return weft__vp(); }

weft_vp_t *weft_sched_vp(int i) {
  if (!weft_is_running() || i < 0 || i >= weft__rt.nvps) return NULL;
  return weft__rt.vps[i];
}

int weft_sched_vp_index(const weft_vp_t *vp) { return vp ? vp->index : -1; }

int weft_sched_thread_affinity(const weft_thread_t *t) { return t ? t->affinity : -1; }

uintptr_t *weft_sched_thread_data(weft_thread_t *t) { return &t->sched_data; }
