/* src/core/alloc.h - control blocks and stacks: the global pool, the system
 * allocator wrappers (counted, failure-injectable), and the inlined fast paths of
 * the per-VP caches (alloc.c has the rest). */
#ifndef WEFT_CORE_ALLOC_H
#define WEFT_CORE_ALLOC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/spin.h"
#include "core/tcb.h"
#include "core/vp.h"

/* ---- free stacks ------------------------------------------------------------------
 * A stack keeps its record in its own top bytes, from the moment weft takes it out
 * of a chunk (or maps it) until it goes back. Default-size stacks are carved from
 * chunks (alloc.c); a stack of another size is a mapping of its own (chunk NULL). */
typedef struct weft__chunk weft__chunk_t;  /* alloc.c */
typedef struct weft__stack_rec {
  struct weft__stack_rec *next; /* free-list link: owner or pool.lock */
  void *lo;                     /* lowest usable address */
  weft__chunk_t *chunk;         /* the chunk it was carved from, or NULL */
  unsigned vg_id;               /* Valgrind stack id */
} weft__stack_rec_t;
#define WEFT__STACK_RESERVE 64  /* bytes at the top of every stack kept for the record */

typedef struct weft__pool {
  weft__spin_t lock;
  weft_thread_t *tcbs;           /* pool.lock */
  long ntcbs;
  weft__stack_rec_t *stacks;     /* pool.lock */
  long nstacks;
  weft__slab_t *slabs;           /* every slab of control blocks: pool.lock */
  weft__slab_t *partial;         /* slabs holding given-back blocks: pool.lock */
  weft__slab_t *carving;         /* the slab new blocks are carved from: pool.lock */
  /* stack chunks (alloc.c, docs/design.md "Stacks"): all pool.lock */
  weft__chunk_t *chunks;         /* every chunk */
  weft__chunk_t *cpartial;       /* chunks holding given-back slots */
  weft__chunk_t *ccarving;       /* the chunk new slots are carved from */
  long nchunks;                  /* chunks mapped */
  long nsingle;                  /* stacks of other sizes mapped on their own */
  long carved;                   /* slots out of their chunks (bound or cached) */
  long unguarded;                /* of those, slots without a guard region */
  long guard_budget;             /* MPROTECT: slots that may still get a guard */
  size_t reserved;               /* bytes of address space in stack mappings */
  /* set at init, then read-only */
  int guard_mech;                /* WEFT__GUARD_MADVISE or _MPROTECT */
  size_t guard;                  /* cfg.stack_guard */
  size_t slot;                   /* guard + cfg.stack_size */
  uint32_t chunk_slots;          /* slots per chunk, at most */
  size_t rlimit_as;              /* RLIMIT_AS at init (SIZE_MAX: none) */
  size_t stack_max;              /* largest stack_size weft_create accepts */
  long max_map_count;            /* vm.max_map_count at init */
} weft__pool_t;

/* ---- allocation (alloc.c; fast paths inline here) ---------------------------------- */
void *weft__sys_malloc(size_t size);    /* counted, failure-injectable */
void *weft__sys_calloc(size_t n, size_t size);
void *weft__sys_calloc_aligned(size_t size, size_t align); /* zeroed */
void weft__sys_free(void *p);
/* Not counted (free with free()), but injectable: see alloc.c. */
void *weft__sys_malloc_uncounted(size_t size);
void *weft__sys_aligned_uncounted(size_t align, size_t size);
/* 1 if an injected failure is due now: for resources that are not memory (a kernel
 * thread), counted like an allocation. */
int weft__sys_fail_injected(void);
weft_thread_t *weft__tcb_alloc_slow(weft_vp_t *vp);        /* vp may be NULL */
void weft__tcb_free_slow(weft_vp_t *vp, weft_thread_t *t); /* vp may be NULL */
int weft__stack_bind_slow(weft_vp_t *vp, weft_thread_t *t);
void weft__stack_release_slow(weft_vp_t *vp, weft_thread_t *t);
void weft__vp_free_caches(weft_vp_t *vp);               /* to the system */
void weft__vp_caches_to_pool(weft_vp_t *vp);            /* to the pool (owner) */
void weft__pool_free_all(void);                         /* at shutdown */
/* A stack mapping of its own (custom sizes, VP 0's idle stack), with a guard region
 * of cfg.stack_guard below it: counted, failure-injectable. */
/* Checked builds: aborts with a report if t's default-size stack has no guard region
 * and its canary below the stack was overwritten (alloc.c, "stacks"). */
void weft__stack_canary_check(weft_thread_t *t);
void *weft__sys_stack_map(size_t size, unsigned *vg);
void weft__sys_stack_unmap(void *lo, size_t size, unsigned vg);
/* Stack setup at weft_init (guard mechanism, chunk geometry, limits); 0 or
 * WEFT_EINVAL if cfg's stack size can never be mapped (RLIMIT_AS). */
int weft__stacks_init(void);
/* Formats one line saying why the last stack could not be mapped, naming the limit
 * hit (mmap's errno; RLIMIT_AS, vm.max_map_count or plain memory; mappings and
 * chunks in use, live stacks, bytes reserved) into buf (NUL-terminated, at most n
 * bytes). Returns the length it needed (like snprintf), or 0 if no stack mapping has
 * failed since weft_init. Not async-signal-safe (reads /proc). Any thread. */
int weft__stack_describe_failure(char *buf, size_t n);

/* A control block from the VP's free list, else from the pool or the system. */
static inline weft_thread_t *weft__tcb_alloc(weft_vp_t *vp) {
  weft_thread_t *t = vp->tcb_free;
  if (WEFT__LIKELY(t != NULL)) {
    vp->tcb_free = t->next;
    weft__own_add(&vp->ntcb, -1);
    return t;
  }
  return weft__tcb_alloc_slow(vp);
}

/* vp may be NULL (a plain OS thread): then straight to the pool. */
static inline void weft__tcb_free(weft_vp_t *vp, weft_thread_t *t) {
  if (WEFT__LIKELY(vp && atomic_load_explicit(&vp->ntcb, memory_order_relaxed) < vp->tcb_limit)) {
    t->next = vp->tcb_free;
    vp->tcb_free = t;
    weft__own_add(&vp->ntcb, 1);
    return;
  }
  weft__tcb_free_slow(vp, t);
}

/* Binds a stack to t (which has none) and builds its first frame: 0 or WEFT_ENOMEM. */
static inline int weft__stack_bind(weft_vp_t *vp, weft_thread_t *t) {
  weft__stack_rec_t *r = vp ? vp->stk_free : NULL;
#if !defined(WEFT_ASAN) && !defined(WEFT_TSAN)
  if (WEFT__LIKELY(r != NULL && t->stack_size == 0)) {
    vp->stk_free = r->next;
    weft__own_add(&vp->nstk, -1);
    t->stack = r->lo;
    weft__ctx_make(&t->ctx, r->lo, (char *)r, weft__thread_entry, t);
    return 0;
  }
#endif
  (void)r;
  return weft__stack_bind_slow(vp, t);
}

/* Takes t's stack back (t is off it): to the VP's free list if it has the default
 * size and there is room, else the slow path balances with the pool. */
/* 1 if weft__stack_release_fast may take t's stack back (the test of the fast path
 * below, for callers that keep their slow paths out of line). */
static inline int weft__stack_release_can_fast(weft_vp_t *vp, const weft_thread_t *t) {
#if !defined(WEFT_ASAN) && !defined(WEFT_TSAN)
  return t->stack_size == 0 &&
         atomic_load_explicit(&vp->nstk, memory_order_relaxed) < vp->free_limit;
#else
  (void)vp;
  (void)t;
  return 0;
#endif
}

/* weft__stack_release's fast path: only where weft__stack_release_can_fast said so. */
static inline void weft__stack_release_fast(weft_vp_t *vp, weft_thread_t *t) {
#ifdef WEFT_CHECKED
  weft__stack_canary_check(t);
#endif
  weft__stack_rec_t *r =
      (weft__stack_rec_t *)((char *)t->stack + vp->def_stack - WEFT__STACK_RESERVE);
  t->stack = NULL;
  t->ctx.sp = NULL;
  r->next = vp->stk_free;
  vp->stk_free = r;
  weft__own_add(&vp->nstk, 1);
}

static inline void weft__stack_release(weft_vp_t *vp, weft_thread_t *t) {
  if (WEFT__LIKELY(weft__stack_release_can_fast(vp, t))) {
    weft__stack_release_fast(vp, t);
    return;
  }
  weft__stack_release_slow(vp, t);
}

/* Calls fn on every control block carved so far (the deadlock report). */
void weft__tcb_foreach(void (*fn)(weft_thread_t *t, void *arg), void *arg);
/* The same with pool.lock held by the caller; and whether p is a carved control
 * block (pool.lock held). For weft_dump (src/diag). */
void weft__tcb_foreach_locked(void (*fn)(weft_thread_t *t, void *arg), void *arg);
int weft__tcb_contains(const void *p);

/* Fault injection and accounting (alloc.c). */
extern _Atomic long weft__live_blocks;

#endif
