/* src/core/alloc.c - control blocks and stacks: per-VP free lists balanced through
 * a locked global pool (FastThreads §3.3).
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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "diag/diag.h"

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
#endif

/* on a line of its own: see weft__ctx_errno_off (src/arch/tstate.c) */
_Alignas(64) _Atomic long weft__live_blocks;
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

/* ---- stack mapping failures -------------------------------------------------------
 * The last failure to map stack memory, for weft__stack_describe_failure (the idle
 * loop prints it when a thread can never get a stack). Written under fail_lock. */
static weft__spin_t fail_lock;
static struct {
  int set;            /* a failure was recorded since weft_init */
  int err;            /* errno of mmap/madvise/mprotect; 0: injected */
  const char *what;   /* "map a stack chunk", ... */
  size_t want;        /* bytes asked for */
  long nchunks, nsingle, carved, cached;
  size_t reserved;
} last_fail;

static long cached_stacks_locked(void);

/* pool.lock not held */
static void fail_note(int err, const char *what, size_t want) {
  weft__pool_t *p = &weft__rt.pool;
  weft__spin_lock(&p->lock);
  long cached = cached_stacks_locked();
  long nchunks = p->nchunks, nsingle = p->nsingle, carved = p->carved;
  size_t reserved = p->reserved;
  weft__spin_unlock(&p->lock);
  weft__spin_lock(&fail_lock);
  last_fail.set = 1;
  last_fail.err = err;
  last_fail.what = what;
  last_fail.want = want;
  last_fail.nchunks = nchunks;
  last_fail.nsingle = nsingle;
  last_fail.carved = carved;
  last_fail.cached = cached;
  last_fail.reserved = reserved;
  weft__spin_unlock(&fail_lock);
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
  if (inject_failure()) {
    fail_note(0, "map a stack", size);
    return NULL;
  }
  weft__pool_t *p = &weft__rt.pool;
  void *lo = weft__os_stack_map(size, p->guard, p->guard_mech, vg);
  if (!lo) {
    fail_note(errno, "map a stack", size + p->guard);
    return NULL;
  }
  atomic_fetch_add_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  weft__spin_lock(&p->lock);
  p->nsingle++;
  p->reserved += size + p->guard;
  weft__spin_unlock(&p->lock);
  return lo;
}

void weft__sys_stack_unmap(void *lo, size_t size, unsigned vg) {
  weft__pool_t *p = &weft__rt.pool;
  atomic_fetch_sub_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  weft__os_stack_unmap(lo, size, p->guard, vg);
  weft__spin_lock(&p->lock);
  p->nsingle--;
  p->reserved -= size + p->guard;
  weft__spin_unlock(&p->lock);
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

/* weft__tcb_foreach with pool.lock already held (weft_dump, which only tries it). */
void weft__tcb_foreach_locked(void (*fn)(weft_thread_t *t, void *arg), void *arg) {
  for (weft__slab_t *sl = weft__rt.pool.slabs; sl; sl = sl->next)
    for (int i = 0; i < sl->carved; i++) fn(slab_block(sl, i), arg);
}

/* 1 if p is the start of a carved control block; pool.lock held. */
int weft__tcb_contains(const void *p) {
  for (weft__slab_t *sl = weft__rt.pool.slabs; sl; sl = sl->next) {
    const char *lo = (const char *)slab_block(sl, 0);
    const char *hi = (const char *)slab_block(sl, sl->carved);
    if ((const char *)p >= lo && (const char *)p < hi)
      return ((size_t)((const char *)p - lo) % sizeof(weft_thread_t)) == 0;
  }
  return 0;
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
  int want = vp && vp->tcb_limit ? weft__rt.cfg.freelist_local : 1;
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
  if (vp && atomic_load_explicit(&vp->ntcb, memory_order_relaxed) < vp->tcb_limit) {
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

/* ---- stacks ------------------------------------------------------------------------
 * Default-size stacks are carved from chunks: one mapping of up to chunk_slots
 * slots, each slot a guard region of cfg.stack_guard bytes with the stack above it.
 * With MADV_GUARD_INSTALL (Linux 6.13+) the guard regions live in the page tables:
 * a chunk is one kernel memory area (VMA) however many stacks it holds, and adjacent
 * chunks merge into one. Without it (EINVAL, or WEFT_STACK_GUARD=mprotect), guard
 * regions are PROT_NONE, which splits the mapping (two VMAs per guard), on at most
 * guard_budget slots (a quarter of vm.max_map_count), so that stacks never use up
 * the process's mappings; slots beyond it have no guard (the unused guard range
 * still separates them, and checked builds check a canary there when the thread
 * finishes). docs/design.md "Stacks".
 *
 * A slot taken out of its chunk ("carved") gets its record in its top bytes and is
 * registered with Valgrind; it stays out while bound or cached (VP lists, pool).
 * Beyond the caches' bounds it goes back to its chunk, its pages go back to the
 * kernel (MADV_DONTNEED: the high-water mark of resident stack memory is the cache
 * bound), and a chunk whose slots are all back is unmapped. All chunk state is
 * under pool.lock; system calls are made outside it. */
struct weft__chunk {
  weft__chunk_t *prev, *next;    /* every chunk */
  weft__chunk_t *pprev, *pnext;  /* chunks with given-back slots ("partial") */
  char *base;                    /* the mapping: nslots * pool.slot bytes */
  uint32_t nslots, carved;       /* slots; slots handed out at least once */
  uint32_t nguarded;             /* slots [0, nguarded) have a guard region */
  uint32_t nfree;                /* given-back slots, in free[] */
  uint32_t free[];
};

#define WEFT__CHUNK_BYTES ((size_t)32 << 20) /* target size of a chunk */
#define WEFT__CHUNK_SLOTS_MAX 1024u
#define WEFT__CANARY ((uintptr_t)0x5745465453544b21u) /* "WEFTSTK!" */

static weft__stack_rec_t *stack_rec(void *lo, size_t size) {
  return (weft__stack_rec_t *)((char *)lo + size - WEFT__STACK_RESERVE);
}

/* The canary of an unguarded slot: the top WEFT__CANARY_BYTES of its (unused) guard
 * range, every word of it, since an overflow need not write the first word below the
 * stack: a recursion of frames with arrays it only partly uses skips most words (a
 * one-word canary let a thread run 50 KiB past its stack unseen). Checked builds only
 * (it costs a page per unguarded stack). Its words: [slot_canary(lo, n), lo). */
#define WEFT__CANARY_BYTES ((size_t)4096)
static inline size_t canary_words(void) {
  size_t g = weft__rt.pool.guard < WEFT__CANARY_BYTES ? weft__rt.pool.guard : WEFT__CANARY_BYTES;
  return g / sizeof(uintptr_t);
}
static inline uintptr_t *slot_canary(void *lo, size_t n) { return (uintptr_t *)lo - n; }

/* The cached default-size stacks: every VP's count and the pool's, pool.lock held.
 * Every move of stacks between a VP's cache and the pool, and every stack taken out
 * of the pool to go back to its chunk, changes both counts (or the pool count and
 * `carved`) inside one pool.lock section, so that a reader here sees no stack in
 * transit: with no thread running, stacks_cached is stacks_carved exactly. Only a
 * VP's own single-count changes (a stack bound or released) happen outside it. */
static long cached_stacks_locked(void) {
  long n = 0;
  if (weft__rt.vps)
    for (int i = 0; i < weft__rt.nvps_all; i++)
      if (weft__rt.vps[i]) n += atomic_load_explicit(&weft__rt.vps[i]->nstk, memory_order_relaxed);
  return n + weft__rt.pool.nstacks;
}

int weft__stacks_init(void) {
  weft__pool_t *p = &weft__rt.pool;
  const weft_config_t *c = &weft__rt.cfg;
  /* WEFT_STACK_GUARD=mprotect forces the fallback; "mprotect:N" also sets its budget
   * to N stacks (tests of the unguarded stacks); "madvise" (the default where the
   * kernel has it) changes nothing. Anything else is reported and ignored. */
  const char *env = getenv("WEFT_STACK_GUARD");
  int force_mprotect = env && strncmp(env, "mprotect", 8) == 0;
  long budget = -1;
  if (force_mprotect && env[8] == ':') {
    char *end;
    errno = 0;
    budget = strtol(env + 9, &end, 10);
    if (end == env + 9 || *end != '\0' || errno || budget < 0) {
      /* a garbage budget read as 0 left every stack unguarded, silently */
      fprintf(stderr, "weft: WEFT_STACK_GUARD=%s: the budget is not a count of stacks: the "
                      "default is used\n", env);
      budget = -1;
    }
  } else if (env && *env && !(force_mprotect && env[8] == '\0') && strcmp(env, "madvise") != 0) {
    fprintf(stderr, "weft: WEFT_STACK_GUARD=%s is not \"madvise\", \"mprotect\" or "
                    "\"mprotect:N\": ignored\n", env);
  }
  p->guard_mech = !force_mprotect && weft__os_guard_probe() ? WEFT__GUARD_MADVISE
                                                            : WEFT__GUARD_MPROTECT;
  p->guard = c->stack_guard;
  p->slot = c->stack_guard + c->stack_size;
  size_t n = WEFT__CHUNK_BYTES / p->slot;
  if (n < 1) n = 1;
  if (n > WEFT__CHUNK_SLOTS_MAX) n = WEFT__CHUNK_SLOTS_MAX;
  p->chunk_slots = (uint32_t)n;
  p->max_map_count = weft__os_max_map_count();
  p->guard_budget = p->guard_mech != WEFT__GUARD_MPROTECT ? 0
                    : budget >= 0 ? budget : p->max_map_count / 4;
  p->rlimit_as = weft__os_rlimit_as();
  /* the largest stack that could ever be mapped: its guard and itself within
   * RLIMIT_AS, and at most 64 GiB */
  size_t cap = (size_t)1 << 36;
  if (p->rlimit_as != SIZE_MAX)
    cap = p->rlimit_as > p->guard ? (p->rlimit_as - p->guard < cap ? p->rlimit_as - p->guard : cap) : 0;
  p->stack_max = cap & ~(weft__rt.page - 1);
  if (c->stack_size > p->stack_max) return WEFT_EINVAL;
  weft__spin_lock(&fail_lock);
  last_fail.set = 0;
  weft__spin_unlock(&fail_lock);
  return 0;
}

/* pool.lock held */
static void cpartial_link(weft__pool_t *p, weft__chunk_t *ch) {
  ch->pprev = NULL;
  ch->pnext = p->cpartial;
  if (p->cpartial) p->cpartial->pprev = ch;
  p->cpartial = ch;
}

/* pool.lock held */
static void cpartial_unlink(weft__pool_t *p, weft__chunk_t *ch) {
  if (ch->pprev) ch->pprev->pnext = ch->pnext;
  else p->cpartial = ch->pnext;
  if (ch->pnext) ch->pnext->pprev = ch->pprev;
}

/* Maps a chunk of up to chunk_slots slots with their guard regions (halving the
 * count while the mapping fails with ENOMEM: RLIMIT_AS may leave room for a few).
 * pool.lock not held. NULL when out of memory (the failure is recorded). */
static weft__chunk_t *chunk_new(void) {
  weft__pool_t *p = &weft__rt.pool;
  uint32_t n = p->chunk_slots;
  if (inject_failure()) {
    fail_note(0, "map a stack chunk", (size_t)n * p->slot);
    return NULL;
  }
  char *base;
  for (;;) {
    base = weft__os_reserve((size_t)n * p->slot);
    if (base || errno != ENOMEM || n == 1) break;
    n /= 2;
  }
  if (!base) {
    fail_note(errno, "map a stack chunk", (size_t)n * p->slot);
    return NULL;
  }
  weft__chunk_t *ch = weft__sys_malloc(sizeof *ch + n * sizeof ch->free[0]);
  if (!ch) {
    weft__os_release(base, (size_t)n * p->slot);
    fail_note(0, "allocate a stack chunk's header", sizeof *ch + n * sizeof ch->free[0]);
    return NULL;
  }
  memset(ch, 0, sizeof *ch);
  ch->base = base;
  ch->nslots = n;
  /* guard regions: all slots with MADV_GUARD_INSTALL; with mprotect, as many as the
   * budget allows (taken now, given back when the chunk is unmapped) */
  uint32_t want = n;
  if (p->guard_mech == WEFT__GUARD_MPROTECT) {
    weft__spin_lock(&p->lock);
    long b = p->guard_budget;
    want = b >= (long)n ? n : b > 0 ? (uint32_t)b : 0;
    p->guard_budget -= want;
    weft__spin_unlock(&p->lock);
  }
  int err = 0;
  if (want && inject_failure()) err = -1;
  uint32_t g = 0;
  for (; !err && g < want; g++) err = weft__os_guard(base + (size_t)g * p->slot, p->guard, p->guard_mech);
  if (err && g > 0) g--;  /* slot g failed */
  if (err && (p->guard_mech == WEFT__GUARD_MADVISE || err == -1)) {
    /* a failed MADV_GUARD_INSTALL (or an injected failure): no chunk */
    weft__os_release(base, (size_t)n * p->slot);
    weft__sys_free(ch);
    if (p->guard_mech == WEFT__GUARD_MPROTECT) {
      weft__spin_lock(&p->lock);
      p->guard_budget += want;
      weft__spin_unlock(&p->lock);
    }
    fail_note(err == -1 ? 0 : err, "install a stack guard region", p->guard);
    return NULL;
  }
  if (err) {
    /* mprotect refused (the process is out of mappings): the rest of this chunk,
     * and later chunks, go without a guard */
    weft__spin_lock(&p->lock);
    p->guard_budget = 0;
    weft__spin_unlock(&p->lock);
    want = g;
  }
  ch->nguarded = want;
  atomic_fetch_add_explicit(&weft__live_blocks, 1, memory_order_relaxed); /* the mapping */
  return ch;
}

/* Unmaps a chunk whose slots are all back (unlinked). pool.lock not held. */
static void chunk_free(weft__chunk_t *ch) {
  weft__pool_t *p = &weft__rt.pool;
  weft__os_release(ch->base, (size_t)ch->nslots * p->slot);
  atomic_fetch_sub_explicit(&weft__live_blocks, 1, memory_order_relaxed);
  weft__sys_free(ch);
}

/* pool.lock held */
static void chunk_link_locked(weft__pool_t *p, weft__chunk_t *ch) {
  ch->prev = NULL;
  ch->next = p->chunks;
  if (p->chunks) p->chunks->prev = ch;
  p->chunks = ch;
  /* a chunk another VP mapped at the same time stops being carved: its slots never
   * handed out become free slots */
  weft__chunk_t *old = p->ccarving;
  if (old && old->carved < old->nslots) {
    if (old->nfree == 0) cpartial_link(p, old);
    while (old->carved < old->nslots) old->free[old->nfree++] = old->carved++;
  }
  p->ccarving = ch;
  p->nchunks++;
  p->reserved += (size_t)ch->nslots * p->slot;
}

/* A slot from a chunk, or UINT32_MAX; pool.lock held. */
static uint32_t slot_take_locked(weft__pool_t *p, weft__chunk_t **out) {
  weft__chunk_t *ch = p->cpartial;
  uint32_t i;
  if (ch) {
    i = ch->free[--ch->nfree];
    if (ch->nfree == 0) cpartial_unlink(p, ch);
  } else {
    ch = p->ccarving;
    if (!ch || ch->carved == ch->nslots) return UINT32_MAX;
    i = ch->carved++;
  }
  p->carved++;
  if (i >= ch->nguarded) p->unguarded++;
  *out = ch;
  return i;
}

/* A default-size stack out of a chunk, mapping a new chunk if needed: its record,
 * or NULL. pool.lock not held. */
static weft__stack_rec_t *slot_carve(void) {
  weft__pool_t *p = &weft__rt.pool;
  weft__chunk_t *ch = NULL, *fresh = NULL;
  weft__spin_lock(&p->lock);
  uint32_t i = slot_take_locked(p, &ch);
  weft__spin_unlock(&p->lock);
  if (i == UINT32_MAX) {
    fresh = chunk_new();
    if (!fresh) return NULL;
    weft__spin_lock(&p->lock);
    chunk_link_locked(p, fresh);
    ch = fresh;
    i = fresh->carved++;
    p->carved++;
    if (i >= fresh->nguarded) p->unguarded++;
    weft__spin_unlock(&p->lock);
  }
  char *lo = ch->base + (size_t)i * p->slot + p->guard;
  size_t size = weft__rt.cfg.stack_size;
  weft__stack_rec_t *r = stack_rec(lo, size);
  r->next = NULL;
  r->lo = lo;
  r->chunk = ch;
  r->vg_id = weft__os_stack_register(lo, lo + size);
#ifdef WEFT_CHECKED
  if (i >= ch->nguarded) {
    size_t n = canary_words();
    uintptr_t *c = slot_canary(lo, n);
    for (size_t k = 0; k < n; k++) c[k] = WEFT__CANARY ^ (uintptr_t)lo;
  }
#endif
  return r;
}

/* Gives carved stacks (linked through ->next) back to their chunks: their pages go
 * back to the kernel, and chunks left empty are unmapped. pool.lock not held. */
/* Takes the pool's stacks beyond freelist_global off its list, pool.lock held, and
 * counts them out of `carved` (and `unguarded`) in the same section: see
 * cached_stacks_locked. The caller gives them back with slots_give_back. */
static weft__stack_rec_t *pool_excess_locked(weft__pool_t *p) {
  weft__stack_rec_t *excess = NULL;
  while (p->nstacks > weft__rt.cfg.freelist_global) {
    weft__stack_rec_t *x = p->stacks;
    p->stacks = x->next;
    p->nstacks--;
    p->carved--;
    weft__chunk_t *ch = x->chunk;
    uint32_t i = (uint32_t)((size_t)((char *)x->lo - p->guard - ch->base) / p->slot);
    if (i >= ch->nguarded) p->unguarded--;
    x->next = excess;
    excess = x;
  }
  return excess;
}

/* Returns stacks that pool_excess_locked took (already counted out) to their chunks'
 * free slots, and frees a chunk once all its slots are free. */
static void slots_give_back(weft__stack_rec_t *list) {
  weft__pool_t *p = &weft__rt.pool;
  while (list) {
    weft__stack_rec_t *r = list;
    list = r->next;
    weft__chunk_t *ch = r->chunk;
    char *lo = r->lo;
    uint32_t i = (uint32_t)((size_t)(lo - p->guard - ch->base) / p->slot);
    weft__os_stack_deregister(r->vg_id);
    /* the whole slot, guard range included (guard regions stay; an unguarded slot's
     * canary page goes). A failed discard (injected, or refused) keeps the pages:
     * memory, not an error */
    if (!inject_failure()) (void)weft__os_discard(lo - p->guard, p->slot);
    weft__spin_lock(&p->lock);
    if (ch->nfree++ == 0) cpartial_link(p, ch);
    ch->free[ch->nfree - 1] = i;
    int empty = ch->nfree == ch->carved;
    if (empty) {
      cpartial_unlink(p, ch);
      if (ch->prev) ch->prev->next = ch->next;
      else p->chunks = ch->next;
      if (ch->next) ch->next->prev = ch->prev;
      if (p->ccarving == ch) p->ccarving = NULL;
      p->nchunks--;
      p->reserved -= (size_t)ch->nslots * p->slot;
      if (p->guard_mech == WEFT__GUARD_MPROTECT) p->guard_budget += ch->nguarded;
    }
    weft__spin_unlock(&p->lock);
    if (empty) chunk_free(ch);
  }
}

/* Checked builds: an unguarded stack's canary must be intact when its thread is
 * done with it (otherwise the thread ran past the bottom of its stack). */
static void canary_check(weft_thread_t *t, weft__stack_rec_t *r) {
#ifdef WEFT_CHECKED
  weft__chunk_t *ch = r->chunk;
  if (!ch) return;
  uint32_t i = (uint32_t)((size_t)((char *)r->lo - weft__rt.pool.guard - ch->base) / weft__rt.pool.slot);
  if (i < ch->nguarded) return;
  size_t n = canary_words();
  const uintptr_t *c = slot_canary(r->lo, n);
  size_t k = 0;  /* the lowest word overwritten: how far the overflow went, at least */
  while (k < n && c[k] == (WEFT__CANARY ^ (uintptr_t)r->lo)) k++;
  if (k < n) {
    char nm[WEFT_NAME_MAX];
    int named = weft__name_copy(t, nm, sizeof nm) > 0;
    fprintf(stderr,
            "weft: stack overflow in thread %llu%s%s%s: stack [%p, %p) has no guard region (the "
            "mprotect guard budget is used up) and its canary [%p, %p) was overwritten, down to %p\n",
            (unsigned long long)t->id, named ? " \"" : "", named ? nm : "", named ? "\"" : "", r->lo,
            (void *)((char *)r->lo + weft__rt.cfg.stack_size), (const void *)c, r->lo,
            (const void *)&c[k]);
    abort();
  }
#else
  (void)t;
  (void)r;
#endif
}

void weft__stack_canary_check(weft_thread_t *t) {
  canary_check(t, stack_rec(t->stack, weft__rt.cfg.stack_size));
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
      int want = vp && vp->free_limit ? weft__rt.cfg.freelist_local : 1, n = 0;
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
      /* the VP's count rises in the section that drops the pool's
       * (cached_stacks_locked); its cache was empty */
      if (got && vp) {
        vp->stk_free = got->next;
        atomic_store_explicit(&vp->nstk, n - 1, memory_order_relaxed);
      }
      weft__spin_unlock(&p->lock);
      if (got) {
        r = got;
      } else {
        r = slot_carve();
        if (!r) return WEFT_ENOMEM;
      }
    }
  } else if (vp && vp->cstk_free && vp->cstk_size == size) {
    r = vp->cstk_free;  /* one of this size that a thread of this VP gave back */
    vp->cstk_free = r->next;
    vp->ncstk--;
  } else {
    unsigned vg = 0;
    void *lo = weft__sys_stack_map(size, &vg);
    if (!lo) return WEFT_ENOMEM;
    r = stack_rec(lo, size);
    r->lo = lo;
    r->chunk = NULL;
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
    /* A VP keeps up to T stacks of one custom size, the size of the first it keeps
     * while it has none: threads created with the same attr.stack_size (a recursive
     * program's, a server's) then reuse them, as the default size's are. Each was
     * mapped and unmapped once per thread: fib(30) with a thread per call and 16 KiB
     * stacks ran 100 times slower than with the default's. Other sizes go back. */
    if (vp && vp->free_limit && vp->ncstk < weft__rt.cfg.freelist_local &&
        (vp->ncstk == 0 || vp->cstk_size == size)) {
      vp->cstk_size = size;
      r->next = vp->cstk_free;
      vp->cstk_free = r;
      vp->ncstk++;
      return;
    }
    weft__sys_stack_unmap(r->lo, size, r->vg_id);
    return;
  }
  canary_check(t, r);
  int T = weft__rt.cfg.freelist_local;
  if (vp && atomic_load_explicit(&vp->nstk, memory_order_relaxed) < vp->free_limit) {
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
      last->next = x;
      last = x;
      last->next = NULL;
      n++;
    }
  }
  weft__pool_t *p = &weft__rt.pool;
  weft__spin_lock(&p->lock);
  /* the VP's count drops in the section that raises the pool's (cached_stacks_locked) */
  if (vp) weft__own_add(&vp->nstk, -(n - 1));
  last->next = p->stacks;
  p->stacks = batch;
  p->nstacks += n;
  weft__stack_rec_t *excess = pool_excess_locked(p);
  weft__spin_unlock(&p->lock);
  slots_give_back(excess);
}

/* Drops a list of cached stacks at shutdown: their chunks are unmapped whole by
 * weft__pool_free_all, so only their Valgrind registrations go here. */
static void stacks_drop(weft__stack_rec_t *list) {
  while (list) {
    weft__os_stack_deregister(list->vg_id);
    list = list->next;
  }
}

/* Unmaps vp's cached stacks of its custom size. */
static void cstacks_drop(weft_vp_t *vp) {
  while (vp->cstk_free) {
    weft__stack_rec_t *r = vp->cstk_free;
    vp->cstk_free = r->next;
    weft__sys_stack_unmap(r->lo, vp->cstk_size, r->vg_id);
  }
  vp->ncstk = 0;
}

/* Moves every control block and stack vp caches to the global pool (the pool keeps
 * at most freelist_global of each, as always). Called by vp's own kernel thread when
 * it stops running vp for a while: a spare VP of the system monitor (monitor.c), so
 * that the caches stay bounded by the VPs that run. */
void weft__vp_caches_to_pool(weft_vp_t *vp) {
  weft_thread_t *t = vp->tcb_free;
  vp->tcb_free = NULL;
  atomic_store_explicit(&vp->ntcb, 0, memory_order_relaxed);
  while (t) {
    weft_thread_t *next = t->next;
    weft__tcb_free_slow(NULL, t);  /* NULL: straight to the pool */
    t = next;
  }
  cstacks_drop(vp);  /* custom sizes are not pooled */
  weft__stack_rec_t *batch = vp->stk_free, *last = batch;
  vp->stk_free = NULL;
  if (!batch) return;
  long n = 1;
  while (last->next) {
    last = last->next;
    n++;
  }
  weft__pool_t *p = &weft__rt.pool;
  weft__spin_lock(&p->lock);
  /* the VP's count drops in the section that raises the pool's (cached_stacks_locked) */
  atomic_store_explicit(&vp->nstk, 0, memory_order_relaxed);
  last->next = p->stacks;
  p->stacks = batch;
  p->nstacks += n;
  weft__stack_rec_t *excess = pool_excess_locked(p);
  weft__spin_unlock(&p->lock);
  slots_give_back(excess);
}

/* Returns a VP's cached stacks to the system; its control blocks go back with the
 * slabs in weft__pool_free_all(). Called at shutdown, VPs stopped. */
void weft__vp_free_caches(weft_vp_t *vp) {
  cstacks_drop(vp);
  stacks_drop(vp->stk_free);
  vp->stk_free = NULL;
  atomic_store_explicit(&vp->nstk, 0, memory_order_relaxed);
  vp->tcb_free = NULL;
  atomic_store_explicit(&vp->ntcb, 0, memory_order_relaxed);
}

/* Frees the pool's stacks, every stack chunk, and every slab of control blocks
 * (cached blocks and finished threads nobody joined alike). Called at shutdown,
 * VPs stopped, every thread finished (so every carved stack is cached). */
void weft__pool_free_all(void) {
  weft__pool_t *p = &weft__rt.pool;
  stacks_drop(p->stacks);
  p->stacks = NULL;
  p->nstacks = 0;
  while (p->chunks) {
    weft__chunk_t *ch = p->chunks;
    p->chunks = ch->next;
    chunk_free(ch);
  }
  p->cpartial = NULL;
  p->ccarving = NULL;
  p->nchunks = 0;
  p->carved = 0;
  p->unguarded = 0;
  p->reserved = 0;
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

/* ---- public query and failure report ------------------------------------------------ */

static int stack_info(weft_stack_info_t *out) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  weft__pool_t *p = &weft__rt.pool;
  memset(out, 0, sizeof *out);
  out->guard_mechanism = p->guard_mech == WEFT__GUARD_MADVISE ? WEFT_STACK_GUARD_MADVISE
                                                              : WEFT_STACK_GUARD_MPROTECT;
  out->guard_size = p->guard;
  out->stack_size = weft__rt.cfg.stack_size;
  out->stack_size_max = p->stack_max;
  out->stacks_per_chunk = p->chunk_slots;
  weft__spin_lock(&p->lock);
  out->stacks_cached = cached_stacks_locked();  /* in one section with carved (see there) */
  out->chunks = p->nchunks;
  out->single_mappings = p->nsingle;
  out->stacks_carved = p->carved;
  out->stacks_unguarded = p->unguarded;
  out->guard_budget = p->guard_mech == WEFT__GUARD_MPROTECT ? p->guard_budget : -1;
  out->bytes_reserved = p->reserved;
  weft__spin_unlock(&p->lock);
  return 0;
}

int weft_stack_info(weft_stack_info_t *out) {
  if (!out) return WEFT_EINVAL;
  /* a plain OS thread reads inside its gate (runtime.h, weft__os_read_enter) */
  int g = weft__os_read_enter();
  if (!g) return WEFT_ENOTINIT;
  int rc = stack_info(out);
  weft__os_read_leave(g);
  return rc;
}

static const char *size_text(char *buf, size_t n, size_t v) {
  if (v >= ((size_t)1 << 30)) snprintf(buf, n, "%.1f GiB", (double)v / (double)((size_t)1 << 30));
  else if (v >= ((size_t)1 << 20)) snprintf(buf, n, "%.1f MiB", (double)v / (double)((size_t)1 << 20));
  else snprintf(buf, n, "%zu KiB", v >> 10);
  return buf;
}

/* VmSize of this process in bytes (0 if unreadable). */
static size_t vm_size(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t v = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmSize:", 7) == 0) {
      v = (size_t)strtoull(line + 7, NULL, 10) << 10;
      break;
    }
  fclose(f);
  return v;
}

int weft__stack_describe_failure(char *buf, size_t n) {
  weft__spin_lock(&fail_lock);
  __typeof__(last_fail) f = last_fail;
  weft__spin_unlock(&fail_lock);
  if (!f.set) {
    if (n) buf[0] = 0;
    return 0;
  }
  weft__pool_t *p = &weft__rt.pool;
  char limit[160], want[32], res[32], lim[32];
  long maps = weft__os_map_count();
  size_t vm = vm_size();
  size_t rlim = weft__os_rlimit_as();  /* now: the process may have changed it */
  if (f.err == 0) {
    snprintf(limit, sizeof limit, "an injected failure (weft_debug_fail_alloc)");
  } else if (f.err == ENOMEM && rlim != SIZE_MAX && vm + f.want > rlim) {
    snprintf(limit, sizeof limit, "RLIMIT_AS (%s; %s mapped now)",
             size_text(lim, sizeof lim, rlim), size_text(res, sizeof res, vm));
  } else if (f.err == ENOMEM && maps >= 0 && maps + 16 >= p->max_map_count) {
    snprintf(limit, sizeof limit, "vm.max_map_count (%ld mappings, %ld in use)",
             p->max_map_count, maps);
  } else {
    snprintf(limit, sizeof limit, "%s", f.err == ENOMEM ? "system memory" : "a system error");
  }
  long live = f.carved - f.cached;
  if (live < 0) live = 0;
  return snprintf(buf, n,
                  "weft: cannot get a thread stack: %s of %s failed (%s); limit hit: %s; "
                  "%ld stack chunks and %ld single stack mappings in use (%ld mappings in "
                  "the process), %ld live stacks, %ld cached, %s of stack address space "
                  "reserved",
                  f.what, size_text(want, sizeof want, f.want),
                  f.err ? strerror(f.err) : "injected", limit, f.nchunks, f.nsingle, maps,
                  live, f.cached, size_text(res, sizeof res, f.reserved));
}
