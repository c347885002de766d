/* src/core/alloc.c - control blocks and stacks: per-VP free lists balanced through
 * a locked global pool (papers/004 3.3).
 *
 * Each VP keeps at most 2T free control blocks and 2T free default-size stacks
 * (T = cfg.freelist_local). When a list reaches 2T, T entries move to the global
 * pool in one locked step; when it is empty, up to T entries come back the same
 * way. The pool keeps at most G = cfg.freelist_global of each; beyond that memory
 * goes back to the system. So memory freed on one VP is reused by any other, and
 * the total cached is bounded by nvps*2T + G of each kind.
 *
 * Every allocation that reaches the system goes through weft__sys_*: it is counted
 * (weft_debug_live_blocks) and can be made to fail (weft_debug_fail_alloc).
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
#endif

_Atomic long weft__live_blocks;
static _Atomic long alloc_count;
static _Atomic long fail_countdown; /* 0: off; n: the n-th next allocation fails */

void weft_debug_fail_alloc(long n) {
  atomic_store_explicit(&fail_countdown, n > 0 ? n : 0, memory_order_relaxed);
}
long weft_debug_alloc_count(void) {
  return atomic_load_explicit(&alloc_count, memory_order_relaxed);
}
long weft_debug_live_blocks(void) {
  return atomic_load_explicit(&weft__live_blocks, memory_order_relaxed);
}

/* Returns 1 if this allocation must fail. Relaxed: a test-only countdown. */
static int inject_failure(void) {
  atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
  long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
  while (n > 0) {
    if (atomic_compare_exchange_weak_explicit(&fail_countdown, &n, n - 1,
                                              memory_order_relaxed, memory_order_relaxed))
      return n == 1;
  }
  return 0;
}

void *weft__sys_malloc(size_t size) {
  if (inject_failure()) return NULL;
  void *p = malloc(size);
  if (p) atomic_fetch_add_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  return p;
}

void *weft__sys_calloc(size_t n, size_t size) {
  if (inject_failure()) return NULL;
  void *p = calloc(n, size);
  if (p) atomic_fetch_add_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  return p;
}

void *weft__sys_calloc_aligned(size_t size, size_t align) {
  if (inject_failure()) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, align, size) != 0) return NULL;
  memset(p, 0, size);
  atomic_fetch_add_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  return p;
}

void weft__sys_free(void *p) {
  if (!p) return;
  atomic_fetch_sub_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  free(p);
}

/* Allocations that are not the runtime's own blocks - a scheduler library's lists,
 * trace buffers, wire records, which may outlive weft_shutdown() or are freed with
 * free() by their owners - are not counted in weft_debug_live_blocks, but take part
 * in failure injection like every other allocation. */
void *weft__sys_malloc_uncounted(size_t size) {
  if (inject_failure()) return NULL;
  return malloc(size);
}

void *weft__sys_aligned_uncounted(size_t align, size_t size) {
  if (inject_failure()) return NULL;
  void *p = NULL;
  return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

int weft__sys_fail_injected(void) { return inject_failure(); }

int weft_debug_fail_point(void) { return inject_failure(); }

void *weft__sys_stack_map(size_t size, unsigned *vg) {
  if (inject_failure()) return NULL;
  void *lo = weft__os_stack_map(size, vg);
  if (lo) atomic_fetch_add_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  return lo;
}

void weft__sys_stack_unmap(void *lo, size_t size, unsigned vg) {
  atomic_fetch_sub_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  weft__os_stack_unmap(lo, size, vg);
}

/* ---- control blocks ---------------------------------------------------------------- */

/* Control blocks come from slabs: 64 KiB blocks from the system, carved into
 * cache-line-aligned control blocks (sizeof(weft_thread_t) is a multiple of 64), so
 * that two VPs never write the same cache line through neighbouring threads
 * (measured: T1 at P=2 went from 0.73x to 2x with aligned blocks) and a block costs
 * no allocator header.
 *
 * A block the pool has no room for is given back to its slab; a slab whose blocks
 * have all come back goes back to the system. Slabs with given-back blocks are kept
 * on a "partial" list and reused before a new slab is carved. All slab state is
 * under pool.lock. Shutdown frees every slab, which also reclaims finished threads
 * nobody joined. */
#define WEFT__SLAB_BYTES ((size_t)64 * 1024)
#define WEFT__SLAB_HEADER ((size_t)WEFT__CACHELINE)
#define WEFT__SLAB_CAP ((int)((WEFT__SLAB_BYTES - WEFT__SLAB_HEADER) / sizeof(weft_thread_t)))

struct weft__slab {
  weft__slab_t *prev, *next;          /* every slab */
  weft__slab_t *pprev, *pnext;        /* slabs with given-back blocks ("partial") */
  weft_thread_t *returned;            /* given-back blocks, linked through ->next */
  int nreturned;                      /* blocks on `returned` */
  int carved;                         /* blocks handed out so far (<= cap) */
};
_Static_assert(sizeof(weft__slab_t) <= WEFT__SLAB_HEADER, "slab header fits its line");
_Static_assert(sizeof(weft_thread_t) % WEFT__CACHELINE == 0, "control blocks own whole lines");

static weft_thread_t *slab_block(weft__slab_t *sl, int i) {
  return (weft_thread_t *)((char *)sl + WEFT__SLAB_HEADER + (size_t)i * sizeof(weft_thread_t));
}

/* Applies fn to every control block ever carved (live or free), under pool.lock:
 * the hooks (hook.c) set or clear a flag bit on all of them. fn must be short. */
void weft__tcb_foreach(void (*fn)(weft_thread_t *t, void *arg), void *arg) {
  weft__pool_t *p = &weft__rt.pool;
  weft__spin_lock(&p->lock);
  for (weft__slab_t *sl = p->slabs; sl; sl = sl->next)
    for (int i = 0; i < sl->carved; i++) fn(slab_block(sl, i), arg);
  weft__spin_unlock(&p->lock);
}

/* pool.lock held */
static void partial_link(weft__pool_t *p, weft__slab_t *sl) {
  sl->pprev = NULL;
  sl->pnext = p->partial;
  if (p->partial) p->partial->pprev = sl;
  p->partial = sl;
}

/* pool.lock held */
static void partial_unlink(weft__pool_t *p, weft__slab_t *sl) {
  if (sl->pprev) sl->pprev->pnext = sl->pnext;
  else p->partial = sl->pnext;
  if (sl->pnext) sl->pnext->pprev = sl->pprev;
}

/* A block for a new control block; pool.lock held. NULL when out of memory. */
static weft_thread_t *tcb_new_locked(weft__pool_t *p) {
  weft__slab_t *sl = p->partial;
  if (sl) {                                   /* reuse a given-back block */
    weft_thread_t *t = sl->returned;
    sl->returned = t->next;
    if (--sl->nreturned == 0) partial_unlink(p, sl);
    return t;
  }
  sl = p->carving;
  if (!sl || sl->carved == WEFT__SLAB_CAP) {  /* carve a new slab */
    sl = weft__sys_calloc_aligned(WEFT__SLAB_BYTES, WEFT__CACHELINE);
    if (!sl) return NULL;
    sl->next = p->slabs;
    if (p->slabs) p->slabs->prev = sl;
    p->slabs = sl;
    p->carving = sl;
  }
  weft_thread_t *t = slab_block(sl, sl->carved++);
  t->slab = sl;
  return t;
}

/* Gives block t back to its slab, freeing the slab once all of it is back;
 * pool.lock held. */
static void tcb_give_back_locked(weft__pool_t *p, weft_thread_t *t) {
  weft__slab_t *sl = t->slab;
  t->next = sl->returned;
  sl->returned = t;
  if (sl->nreturned++ == 0) partial_link(p, sl);
  if (sl->nreturned == WEFT__SLAB_CAP) {      /* every block is back: free it */
    partial_unlink(p, sl);
    if (sl->prev) sl->prev->next = sl->next;
    else p->slabs = sl->next;
    if (sl->next) sl->next->prev = sl->prev;
    if (p->carving == sl) p->carving = NULL;
    weft__sys_free(sl);
  }
}

static weft_thread_t *tcb_new(void) {
  weft__pool_t *p = &weft__rt.pool;
  weft__spin_lock(&p->lock);
  weft_thread_t *t = tcb_new_locked(p);
  weft__spin_unlock(&p->lock);
  return t;
}

/* pool.lock held; gives the blocks on `list` back to their slabs */
static void tcb_release_locked(weft_thread_t *list) {
  while (list) {
    weft_thread_t *n = list->next;
    tcb_give_back_locked(&weft__rt.pool, list);
    list = n;
  }
}

weft_thread_t *weft__tcb_alloc_slow(weft_vp_t *vp) {
  if (vp && vp->tcb_free) {
    weft_thread_t *t = vp->tcb_free;
    vp->tcb_free = t->next;
    weft__own_add(&vp->ntcb, -1);
    return t;
  }
  /* refill up to T from the global pool, then fall back to the system */
  weft__pool_t *p = &weft__rt.pool;
  int want = vp ? weft__rt.cfg.freelist_local : 1;
  weft__spin_lock(&p->lock);
  weft_thread_t *got = NULL;
  int n = 0;
  while (p->tcbs && n < want) {
    weft_thread_t *t = p->tcbs;
    p->tcbs = t->next;
    p->ntcbs--;
    t->next = got;
    got = t;
    n++;
  }
  weft__spin_unlock(&p->lock);
  if (!got) return tcb_new();
  weft_thread_t *t = got;
  if (vp) {
    vp->tcb_free = got->next;
    atomic_store_explicit(&vp->ntcb, n - 1, memory_order_relaxed);
  }
  return t;
}

void weft__tcb_free_slow(weft_vp_t *vp, weft_thread_t *t) {
  int T = weft__rt.cfg.freelist_local;
  if (vp && atomic_load_explicit(&vp->ntcb, memory_order_relaxed) < 2 * T) {
    t->next = vp->tcb_free;
    vp->tcb_free = t;
    weft__own_add(&vp->ntcb, 1);
    return;
  }
  /* move T (or, from a plain OS thread, just t) to the global pool */
  weft_thread_t *batch = t, *last = t;
  int n = 1;
  t->next = NULL;
  if (vp) {
    while (n < T && vp->tcb_free) {
      weft_thread_t *x = vp->tcb_free;
      vp->tcb_free = x->next;
      weft__own_add(&vp->ntcb, -1);
      last->next = x;
      last = x;
      last->next = NULL;
      n++;
    }
  }
  weft__pool_t *p = &weft__rt.pool;
  weft_thread_t *excess = NULL;
  weft__spin_lock(&p->lock);
  last->next = p->tcbs;
  p->tcbs = batch;
  p->ntcbs += n;
  while (p->ntcbs > weft__rt.cfg.freelist_global) {
    weft_thread_t *x = p->tcbs;
    p->tcbs = x->next;
    p->ntcbs--;
    x->next = excess;
    excess = x;
  }
  tcb_release_locked(excess);
  weft__spin_unlock(&p->lock);
}

/* ---- stacks ------------------------------------------------------------------------ */

static weft__stack_rec_t *stack_rec(void *lo, size_t size) {
  return (weft__stack_rec_t *)((char *)lo + size - WEFT__STACK_RESERVE);
}

static void stack_unmap_rec(weft__stack_rec_t *r) {
  weft__sys_stack_unmap(r->lo, weft__rt.cfg.stack_size, r->vg_id);
}

/* Builds t's first frame on [lo, lo + size), stack kind `kind`, top 64-aligned. */
static void stack_bind_at(weft_thread_t *t, void *lo, size_t size, uint8_t kind) {
  t->stack = lo;
  t->stack_size = size;
  t->stack_kind = kind;
  char *hi = (char *)(((uintptr_t)lo + size) & ~(uintptr_t)(WEFT__CACHELINE - 1));
  weft__ctx_make(&t->ctx, lo, hi, weft__thread_entry, t);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  t->ctx.stack_lo = lo;
  t->ctx.stack_size = size;
  t->ctx.asan_fake = NULL;
#endif
}

/* A caller-provided stack (weft_attr_t.stack_addr): create stored its address in
 * t->stack and its exact size in t->stack_size (checked there). */
static int stack_bind_user(weft_thread_t *t) {
  stack_bind_at(t, t->stack, t->stack_size, WEFT__STK_USER);
  return 0;
}

/* A stack from the user's policy (weft_config_t.stack_alloc). Its size is stored
 * in t->stack_size (non-zero), so the inlined release never caches it. */
static int stack_bind_policy(weft_thread_t *t) {
  size_t size = t->stack_size ? t->stack_size : weft__rt.cfg.stack_size;
  void *lo = weft__rt.cfg.stack_alloc(size, weft__rt.cfg.stack_arg);
  if (!lo) return WEFT_ENOMEM;
  WEFT__ASSERT(((uintptr_t)lo & 15) == 0, "stack_alloc returned a stack not 16-byte aligned");
  stack_bind_at(t, lo, size, WEFT__STK_POLICY);
  return 0;
}

int weft__stack_bind_slow(weft_vp_t *vp, weft_thread_t *t) {
  if (t->stack) return stack_bind_user(t);
  if (weft__rt.cfg.stack_alloc) return stack_bind_policy(t);
  size_t def = weft__rt.cfg.stack_size;
  size_t size = t->stack_size ? t->stack_size : def;
  weft__stack_rec_t *r = NULL;
  t->stack_kind = WEFT__STK_RUNTIME;
  if (size == def) {
    if (WEFT__LIKELY(vp && vp->stk_free)) {
      r = vp->stk_free;
      vp->stk_free = r->next;
      weft__own_add(&vp->nstk, -1);
    } else {
      weft__pool_t *p = &weft__rt.pool;
      int want = vp ? weft__rt.cfg.freelist_local : 1, n = 0;
      weft__stack_rec_t *got = NULL;
      weft__spin_lock(&p->lock);
      while (p->stacks && n < want) {
        weft__stack_rec_t *x = p->stacks;
        p->stacks = x->next;
        p->nstacks--;
        x->next = got;
        got = x;
        n++;
      }
      weft__spin_unlock(&p->lock);
      if (got) {
        r = got;
        if (vp) {
          vp->stk_free = got->next;
          atomic_store_explicit(&vp->nstk, n - 1, memory_order_relaxed);
        }
      }
    }
  }
  if (!r) {
    unsigned vg = 0;
    void *lo = weft__sys_stack_map(size, &vg);
    if (!lo) return WEFT_ENOMEM;
    r = stack_rec(lo, size);
    r->lo = lo;
    r->vg_id = vg;
  }
  t->stack = r->lo;
  /* the usable top lies below the record, 64-aligned */
  weft__ctx_make(&t->ctx, r->lo, (char *)r, weft__thread_entry, t);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  t->ctx.stack_lo = r->lo;
  t->ctx.stack_size = size;
  t->ctx.asan_fake = NULL;
#endif
  return 0;
}

void weft__stack_release_slow(weft_vp_t *vp, weft_thread_t *t) {
  size_t size = t->stack_size ? t->stack_size : weft__rt.cfg.stack_size;
  uint8_t kind = t->stack_size ? t->stack_kind : WEFT__STK_RUNTIME;
  weft__stack_rec_t *r = stack_rec(t->stack, size);
#if defined(WEFT_ASAN)
  /* the finished thread's frames never returned: clear their redzones so that the
   * next thread on this stack (or the memory's owner) starts clean (only the part
   * that was used) */
  char *used = (char *)t->ctx.sp - 256;
  if (used < (char *)t->stack) used = t->stack;
  __asan_unpoison_memory_region(used, (size_t)((char *)t->stack + size - used));
#endif
  void *lo = t->stack;
  t->stack = NULL;
  t->ctx.sp = NULL;
  if (kind == WEFT__STK_USER) {      /* the caller's memory: nothing to give back */
    t->stack_size = 0;
    return;
  }
  if (kind == WEFT__STK_POLICY) {    /* exactly once, to the policy that gave it */
    weft__rt.cfg.stack_free(lo, size, weft__rt.cfg.stack_arg);
    return;
  }
  if (size != weft__rt.cfg.stack_size) {
    weft__sys_stack_unmap(r->lo, size, r->vg_id);
    return;
  }
  int T = weft__rt.cfg.freelist_local;
  if (vp && atomic_load_explicit(&vp->nstk, memory_order_relaxed) < 2 * T) {
    r->next = vp->stk_free;
    vp->stk_free = r;
    weft__own_add(&vp->nstk, 1);
    return;
  }
  weft__stack_rec_t *batch = r, *last = r;
  int n = 1;
  r->next = NULL;
  if (vp) {
    while (n < T && vp->stk_free) {
      weft__stack_rec_t *x = vp->stk_free;
      vp->stk_free = x->next;
      weft__own_add(&vp->nstk, -1);
      last->next = x;
      last = x;
      last->next = NULL;
      n++;
    }
  }
  weft__pool_t *p = &weft__rt.pool;
  weft__stack_rec_t *excess = NULL;
  weft__spin_lock(&p->lock);
  last->next = p->stacks;
  p->stacks = batch;
  p->nstacks += n;
  while (p->nstacks > weft__rt.cfg.freelist_global) {
    weft__stack_rec_t *x = p->stacks;
    p->stacks = x->next;
    p->nstacks--;
    x->next = excess;
    excess = x;
  }
  weft__spin_unlock(&p->lock);
  while (excess) {
    weft__stack_rec_t *n2 = excess->next;
    stack_unmap_rec(excess);
    excess = n2;
  }
}

/* Returns a VP's cached stacks to the system; its control blocks go back with the
 * slabs in weft__pool_free_all(). Called at shutdown, VPs stopped. */
void weft__vp_free_caches(weft_vp_t *vp) {
  while (vp->stk_free) {
    weft__stack_rec_t *r = vp->stk_free;
    vp->stk_free = r->next;
    stack_unmap_rec(r);
  }
  atomic_store_explicit(&vp->nstk, 0, memory_order_relaxed);
  vp->tcb_free = NULL;
  atomic_store_explicit(&vp->ntcb, 0, memory_order_relaxed);
}

/* Frees the pool's stacks and every slab of control blocks (cached blocks and
 * finished threads nobody joined alike). Called at shutdown, VPs stopped. */
void weft__pool_free_all(void) {
  weft__pool_t *p = &weft__rt.pool;
  while (p->stacks) {
    weft__stack_rec_t *r = p->stacks;
    p->stacks = r->next;
    stack_unmap_rec(r);
  }
  p->nstacks = 0;
  while (p->slabs) {
    weft__slab_t *sl = p->slabs;
    p->slabs = sl->next;
    weft__sys_free(sl);
  }
  p->partial = NULL;
  p->carving = NULL;
  p->tcbs = NULL;
  p->ntcbs = 0;
}
