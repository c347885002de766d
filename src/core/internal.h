/* src/core/internal.h - the runtime's data structures and its inline hot paths.
 *
 * Ownership vocabulary used on every field:
 *   owner      - only the VP's own kernel thread touches it (no atomics needed).
 *   q.lock     - only while holding that dispatch queue's lock.
 *   pool.lock  - only while holding the global pool's lock.
 *   atomic     - an _Atomic; each access names its order and partner.
 * docs/memory-ordering.md describes each protocol once.
 */
#ifndef WEFT_CORE_INTERNAL_H
#define WEFT_CORE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "weft/debug.h"
#include "weft/runtime.h"
#include "weft/sched.h"
#include "weft/thread.h"
#include "arch/context.h"
#include "os/os.h"

#define WEFT__LIKELY(x) __builtin_expect(!!(x), 1)
#define WEFT__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define WEFT__CACHELINE 64
#define WEFT__ALIGNED __attribute__((aligned(WEFT__CACHELINE)))

#ifdef WEFT_CHECKED
#include <stdio.h>
#include <stdlib.h>
#define WEFT__ASSERT(c, msg)                                                        \
  do {                                                                              \
    if (WEFT__UNLIKELY(!(c))) {                                                     \
      fprintf(stderr, "weft: misuse: %s (%s:%d)\n", msg, __FILE__, __LINE__);      \
      abort();                                                                      \
    }                                                                               \
  } while (0)
#else
#define WEFT__ASSERT(c, msg) ((void)0)
#endif

/* ---- spinlock for internal queues ----------------------------------------------
 * Lock word: 0 = free, 1 = held. lock: 0 -> 1 by exchange (acquire; pairs with the
 * release store in unlock), spinning on plain loads while held (test-and-test-and-
 * set). unlock: 1 -> 0 (release; pairs with the acquire exchange of the next owner).
 */
typedef struct { _Atomic uint32_t word; } weft__spin_t;

static inline void weft__spin_lock(weft__spin_t *l) {
  while (atomic_exchange_explicit(&l->word, 1, memory_order_acquire)) {
    while (atomic_load_explicit(&l->word, memory_order_relaxed)) weft__os_relax();
  }
}
/* One attempt: 0 -> 1 by exchange (acquire, as in lock) if it looks free. */
static inline int weft__spin_trylock(weft__spin_t *l) {
  return !atomic_load_explicit(&l->word, memory_order_relaxed) &&
         !atomic_exchange_explicit(&l->word, 1, memory_order_acquire);
}
static inline void weft__spin_unlock(weft__spin_t *l) {
  atomic_store_explicit(&l->word, 0, memory_order_release);
}
/* Continuation form of unlock, run after a switch (see weft_yield). */
void weft__spin_unlock_cont(void *lock);

/* ---- thread control block --------------------------------------------------------
 * States, by ownership:
 *   ready     - on a dispatch queue (q.lock) or held by a scheduler; ctx saved.
 *   running   - vp->current of exactly one VP; only that VP touches ctx.
 *   blocked   - published on a wait list by a continuation; ctx saved.
 *   finished  - stack released; join word says DONE; only the reaper touches it.
 *
 * Join word encoding (low 3 bits are the tag; pointers are 8-aligned):
 *   0                     alive, joinable, nobody waiting
 *   1 (JW_DETACHED)       alive, detached: reclaims itself when it finishes
 *   2 (JW_DONE)           finished, result valid, waiting to be joined
 *   ptr | 3 (JW_WEFT)     alive, the weft thread at ptr waits in weft_join
 *   ptr | 4 (JW_OS)       alive, the OS thread whose weft__os_waiter is at ptr waits
 *   5 (JW_FREED)          reclaimed after a detach: the block is on a free list
 *   6 (JW_JOINED)         reclaimed by a join: the block is on a free list
 * Transitions: 0 -> DETACHED (weft_detach, CAS), 0 -> WEFT/OS (joiner, CAS in a
 * continuation after the joiner is saved), DETACHED -> FREED and anything else ->
 * DONE (the finishing thread, CAS loop, in its exit continuation after its stack is
 * released), DONE -> FREED (weft_detach, CAS) or -> JOINED (the joiner, CAS).
 * Exactly one CAS ends in FREED or JOINED, and only its maker frees the block, so a
 * second detach, or a join after a detach, sees FREED (WEFT_ESRCH) and frees
 * nothing, as long as the block has not been reused: weft_create overwrites the
 * word, and a block given back to the system (alloc.c) is gone.
 */
#define WEFT__JW_DETACHED ((uintptr_t)1)
#define WEFT__JW_DONE ((uintptr_t)2)
#define WEFT__JW_WEFT ((uintptr_t)3)
#define WEFT__JW_OS ((uintptr_t)4)
#define WEFT__JW_FREED ((uintptr_t)5)
#define WEFT__JW_JOINED ((uintptr_t)6)
#define WEFT__JW_TAG(w) ((w) & 7)
#define WEFT__JW_PTR(w) ((void *)((w) & ~(uintptr_t)7))

/* What a blocked thread waits on (t->waiting): the object's address (8-aligned)
 * with one of these kinds in the low 3 bits; 0 when it waits on nothing weft knows
 * of. A sleep has no object: WEFT__WK_SLEEP alone. Joins are not recorded here: the
 * joinee's join word names its joiner. */
enum { WEFT__WK_MUTEX = 1, WEFT__WK_COND = 2, WEFT__WK_SEM = 3, WEFT__WK_RWLOCK = 4,
       WEFT__WK_FUTURE = 5, WEFT__WK_SLEEP = 6, WEFT__WK_BARRIER = 7 };
#define WEFT__WAITING(obj, kind) ((uintptr_t)(const void *)(obj) | (uintptr_t)(kind))

enum {
  WEFT__TF_MAIN = 1,      /* the main weft thread: runs on its OS thread's stack */
  WEFT__TF_CUSTOM = 2,    /* its bundle is not the root: no inlined scheduler paths
                             (weft__is_default of its bundle, cached: one load) */
  WEFT__TF_HOOK = 4,      /* event callbacks are installed (weft/hook.h): take the
                             general paths, which raise them. Set and cleared on every
                             control block by hook.c */
  WEFT__TF_SCHED_YIELD = 8, /* its scheduler sees yields (thread_unblocked): every
                             custom bundle except WEFT_SCHED_DISPATCH_ONLY ones, whose
                             yields rotate the dispatch queue like the root's */
  WEFT__TF_FPALL = 16,    /* WEFT_SWITCH_ALL: every switch away saves the FP control
                             state into the saved frame (weft__ctx_fp_save). Part of
                             the slow masks, so that every switch away runs a
                             continuation that tests it: no test on the default paths.
                             Set at create, or by the thread itself (atomic OR) */
};
/* The bits that send a thread down the general (non-inlined) paths: one test covers
 * custom schedulers and installed callbacks. */
#ifdef WEFT_HOOKS
#define WEFT__TF_SLOW (WEFT__TF_CUSTOM | WEFT__TF_HOOK | WEFT__TF_FPALL)
#define WEFT__TF_YIELD_SLOW (WEFT__TF_SCHED_YIELD | WEFT__TF_HOOK | WEFT__TF_FPALL)
#else
#define WEFT__TF_SLOW (WEFT__TF_CUSTOM | WEFT__TF_FPALL)
#define WEFT__TF_YIELD_SLOW (WEFT__TF_SCHED_YIELD | WEFT__TF_FPALL)
#endif

/* Where a bound stack came from (t->stack_kind; meaningful only while t->stack is
 * set and t->stack_size != 0: a stack_size of 0 is always a runtime stack of the
 * default size, bound by the inlined fast path, which does not write the kind). */
enum { WEFT__STK_RUNTIME = 0, WEFT__STK_USER = 1, WEFT__STK_POLICY = 2 };

/* Bytes of per-thread link space a thread list (weft/threadlist.h) may use. */
#define WEFT__LINK_WORDS 4

typedef struct weft__slab weft__slab_t;  /* alloc.c */

/* Aligned to (and sized in) whole cache lines: control blocks of threads running on
 * different VPs never share a line. */
struct __attribute__((aligned(64))) weft_thread {
  weft_ctx_t ctx;              /* running VP only; NULL sp until the stack is bound */
  struct weft_thread *next;    /* dispatch-queue / free-list link: q.lock or owner */
  struct weft_thread *prev;    /* dispatch-queue back link (toward the front); valid
                                  on every queued thread but the front one: q.lock */
  weft_bundle_t *bundle;       /* set at create, then read-only */
  weft_thread_fn fn;           /* arguments live in the control block (FastThreads §2) */
  void *arg;
  void *result;                /* written by the thread, read by the reaper after
                                  the DONE exchange (acquire/release) */
  void *stack;                 /* lowest usable stack address; NULL: none bound */
  size_t stack_size;           /* usable bytes; the runtime default if cached */
  _Atomic uintptr_t join;      /* join word, encoding above */
  uint64_t id;
  void *local;                 /* weft_local_get/set: the thread itself only */
  void **tsd;                  /* key values, allocated on first weft_key_set */
  void *blocked_on;            /* what the thread waits for (joinee); diagnostic */
  void **join_out;             /* weft_join's result pointer while it waits */
  weft_ctx_fn cont_fn;         /* weft_thread_block's release, for its continuation */
  void *cont_arg;
  uintptr_t sched_data;        /* weft_sched_thread_data(): the scheduler's word */
  int32_t affinity;            /* -1 or a VP hint */
  uint32_t flags;              /* WEFT__TF_*: stored at create; TF_HOOK is also set
                                  and cleared by hook.c on every block with an atomic
                                  RMW. Read through weft__tflags(): see there */
  weft__slab_t *slab;          /* the slab this block was carved from (alloc.c) */
  uintptr_t link[WEFT__LINK_WORDS]; /* thread-list link space (weft_threadlist_link):
                                  owned by the one list the thread is on, under that
                                  list's lock */
  uint8_t stack_kind;          /* WEFT__STK_*: written by the slow bind, read by the
                                  slow release (both on the VP that runs t) */
  /* Diagnostics (src/diag, docs/debugging.md), off the hot paths but for one store
   * each: what the thread waits on, a WEFT__WAITING word (0: none), written with
   * relaxed stores by the thread itself before it blocks in weft__wait and after it
   * resumes, read by weft_dump (a snapshot, nothing to order); and its name, NUL-
   * terminated, bytes written and read with relaxed atomics (name.c): tcb_init
   * clears byte 0. */
  _Atomic uintptr_t waiting;
  char name[WEFT_NAME_MAX];
#ifdef WEFT_CHECKED
  _Atomic int dbg_blocked;     /* 1 while blocked in weft_thread_block: set before
                                  release() publishes it, cleared by the unblocker */
#endif
};

/* An OS thread waiting in weft_join: the finishing thread sets `done` to 1
 * (release; pairs with the waiter's acquire load) and wakes the futex. */
typedef struct weft__os_waiter {
  _Alignas(8) _Atomic uint32_t done; /* 8-aligned: its address carries a 3-bit tag */
} weft__os_waiter_t;

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

/* ---- per-VP timers (src/sync/timer.c) ---------------------------------------------
 * A binary min-heap of the waiters (src/sync/sync.h) of timed waits and sleeps made
 * by threads running on this VP. Only threads of this VP arm timers here (in a
 * block continuation); any VP may fire or cancel them, under the lock. */
struct weft__waiter;
typedef struct weft__tmheap {
  weft__spin_t lock;
  struct weft__waiter **v;       /* heap ordered by deadline: lock */
  int cap;                       /* lock (grown by this VP's threads only) */
  _Atomic int n;                 /* entries: written under lock; read relaxed by
                                    this VP's scheduler as a hint (it re-checks
                                    under the lock) */
  _Atomic uint64_t earliest;     /* v[0]'s deadline or UINT64_MAX: written under
                                    lock, read relaxed by pollers as a hint */
} weft__tmheap_t;

/* Fires the expired timers of this VP (out of line; called only when n > 0). */
void weft__timers_check(weft_vp_t *vp);

/* Slow-path counters of weft/sync.h, per VP (owner-only adds). */
enum { WEFT__ST_MISSED, WEFT__ST_SPIN, WEFT__ST_POLL, WEFT__ST_BLOCKED, WEFT__ST_IDLED,
       WEFT__ST_TIMEOUT, WEFT__ST_N };

/* ---- virtual processor ------------------------------------------------------------ */
struct weft_vp {
  /* owner-only, hot */
  weft_thread_t *current;       /* running thread; NULL while in the idle loop */
  int index;
  weft_thread_t *tcb_free;      /* free control blocks, count ntcb (owner) */
  _Atomic int ntcb;             /* owner writes (relaxed load+store, no RMW);
                                   weft_debug_stats reads (relaxed) */
  weft__stack_rec_t *stk_free;  /* free default-size stacks, count nstk (owner) */
  _Atomic int nstk;
  uint64_t id_next, id_end;     /* thread ids: the next, and where weft_create
                                   takes its slow path (end of the block, or of the
                                   batch allowed by cfg.max_threads) */
  uint64_t id_block_end;        /* end of the block of ids (owner) */
  int free_limit;               /* 2T: most free blocks (and stacks) kept locally */
  size_t def_stack;             /* cfg.stack_size */
  /* statistics: written by the owner only (relaxed stores; n_finished: release),
   * read by anyone. n_created and n_finished also make the exact live count. */
  _Atomic uint64_t n_created, n_finished, n_steals, n_sleeps;
  _Atomic uint64_t sync_st[WEFT__ST_N];

  weft__tmheap_t tm WEFT__ALIGNED;

  /* dispatch queue: a deque of ready threads. The VP runs from the front; threads
   * it creates go to the front (newest first: depth-first unfolding), threads made
   * ready again (unblocked, yielding) to the back; thieves take from the back (the
   * work the owner would reach last). Linked front to back through t->next (NULL at
   * the back) and back to front through t->prev (not kept on the front thread). */
  struct {
    weft__spin_t lock;
    _Atomic(weft_thread_t *) head; /* the front: written under lock; read unlocked
                                      (relaxed) by idle pollers as a hint only */
    weft_thread_t *tail;           /* the back: q.lock. No count is kept (one
                                      instruction less on every queue operation):
                                      a thief finds the middle by walking from
                                      both ends */
  } q WEFT__ALIGNED;

  /* parking: 1 = asleep (or going to sleep), 0 = awake. The waker stores 0
   * (release) then futex-wakes; the sleeper futex-waits while it reads 1 (acquire). */
  _Atomic uint32_t park WEFT__ALIGNED;

  weft_ctx_t idle_ctx;          /* the idle loop's context (owner) */
  void *idle_stack;             /* VP 0 only: the idle loop's own stack */
  size_t idle_stack_size;
  unsigned idle_stack_vg;
  pthread_t kthread;            /* kernel thread (VP > 0) */
  void *altstack;               /* signal stack for the overflow handler */
  unsigned char ctx_storage[WEFT__CTX_SELF_SIZE + 1] __attribute__((aligned(16)));
};

/* ---- bundle ----------------------------------------------------------------------- */
struct weft_bundle {
  weft_sched_ops_t ops;          /* copied at creation; read-only */
  const weft_sched_ops_t *ops_id;/* &weft_sched_default for the inlined fast path */
  void *data;
  weft_bundle_t *parent;
  _Atomic long nthreads;         /* live threads; not counted for the root bundle */
  _Atomic long nchildren;
  weft_bundle_t *list_next, *list_prev; /* registry of bundles: rt.bundle_lock */
  /* the bundle tree (weft_bundle_first_child/next_sibling): rt.bundle_lock */
  weft_bundle_t *first_child, *sib_next, *sib_prev;
  /* weft_bundle_stop(): 1 while stopped. Written under rt.bundle_lock, read under it
   * by the idle paths (relaxed: the lock orders it; weft_bundle_continue's
   * weft_sched_notify() fence covers sleepers, see bundle.c) */
  _Atomic int stopped;
};

/* ---- the runtime ------------------------------------------------------------------ */
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

/* idle word: low 16 bits = VPs spinning in the idle loop, high 16 bits = VPs
 * asleep in the kernel. Read (relaxed) by enqueuers inside the queue lock; changed
 * by seq_cst read-modify-writes. See docs/memory-ordering.md "park and unpark". */
#define WEFT__IDLE_SPIN 1u
#define WEFT__IDLE_SLEEP (1u << 16)

typedef struct weft__rt {
  _Atomic int state;             /* 0 off, 1 running (release at init end) */
  int nvps;
  weft_config_t cfg;
  size_t page;
  weft_vp_t **vps;
  weft_bundle_t *root;
  weft_thread_t *main;           /* the main weft thread */
  weft__pool_t pool WEFT__ALIGNED;
  _Atomic uint32_t idle WEFT__ALIGNED;
  weft__spin_t idle_lock;
  weft_vp_t **sleepers;          /* stack of sleeping VPs: idle_lock */
  int nsleepers;
  _Atomic int stopping;
  _Atomic uint64_t os_created;   /* threads created by plain OS threads (RMW) */
  /* threads whose stack could not be bound at their first dispatch (linked through
   * t->next, FIFO): nostack_lock; the count is written under it and read relaxed by
   * idle VPs as a hint */
  weft__spin_t nostack_lock;
  weft_thread_t *nostack_head, *nostack_tail;
  _Atomic long nnostack;
  int deadlock_report;           /* cfg.deadlock_report after WEFT_DEADLOCK: 1 on */
  long kthreads_expected;        /* kernel threads of the process when only weft's own
                                    run (VPs, sanitizer helpers): -1 unknown */
  _Atomic unsigned rr;           /* round robin for OS-thread creations */
  weft__spin_t bundle_lock;
  weft_bundle_t *bundles;        /* non-root bundles: bundle_lock */
  _Atomic int nbundles;          /* their count: written under bundle_lock, read
                                    relaxed by idle pollers as a hint */
  /* the focus bundle (weft_bundle_set_focus): written under bundle_lock, read
   * relaxed by idle VPs as a hint (re-read under bundle_lock before use) */
  _Atomic(weft_bundle_t *) focus;
  _Atomic int nstopped;          /* stopped bundles: bundle_lock; relaxed hint */
  /* do-when-idle functions (vp.c): slots below nidlef are valid (release/acquire) */
  weft__spin_t idlef_lock;
  struct { _Atomic(void (*)(void *)) fn; _Atomic(void *) arg; } idlef[8];
  _Atomic int nidlef;
} weft__rt_t;

int weft__idle_funcs_run(void);        /* vp.c: returns how many are registered */

extern weft__rt_t weft__rt;
extern _Atomic uint64_t weft__next_id_block;

/* Owner-only counter update readable by others: relaxed load + store, which
 * compiles to a plain add (no locked read-modify-write). */
static inline void weft__own_add(_Atomic int *c, int d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                        memory_order_relaxed);
}

/* ---- which VP am I on -----------------------------------------------------------
 * The VP is found through TLS, read with an asm volatile so that the compiler can
 * never keep the value (or, on AArch64, the TLS address) across a switch: a thread
 * may resume on another kernel thread. */
extern __thread weft_vp_t *weft__tls_vp __attribute__((tls_model("initial-exec")));

static inline weft_vp_t *weft__vp(void) {
  weft_vp_t *vp;
#if defined(__x86_64__)
  __asm__ volatile("movq weft__tls_vp@gottpoff(%%rip), %0\n\t"
                   "movq %%fs:(%0), %0"
                   : "=r"(vp));
#elif defined(__aarch64__)
  uintptr_t tp, off;
  __asm__ volatile("mrs %0, tpidr_el0\n\t"
                   "adrp %1, :gottprel:weft__tls_vp\n\t"
                   "ldr %1, [%1, #:gottprel_lo12:weft__tls_vp]"
                   : "=r"(tp), "=r"(off));
  vp = *(weft_vp_t **)(tp + off);
#else
  weft_vp_t **p = &weft__tls_vp;
  __asm__ volatile("" : "+r"(p));
  vp = *p;
#endif
  return vp;
}

/* The switch the core uses: weft__ctx_switch, with the sanitizers told about every
 * switch in sanitizer builds (runtime.c). weft__switch_dying is for a thread that
 * will never be resumed. */
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
void weft__switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__switch_dying(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg);
void weft__san_init_self(weft_ctx_t *ctx);  /* ctx runs on its kernel thread's stack */
#else
#define weft__switch weft__ctx_switch
#define weft__switch_dying weft__ctx_switch
#endif
void weft__thread_entry(void *t);       /* first code on a new thread's stack */

/* Switch, then release lock l on the new stack (the yield fast path). */
static inline void weft__switch_unlock(weft_ctx_t *from, weft_ctx_t *to, weft__spin_t *l) {
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__switch(from, to, weft__spin_unlock_cont, l);
#else
  weft__ctx_switch_unlock(from, to, &l->word);
#endif
}

/* ---- thread flags and event callbacks (hook.c) ------------------------------------ */
/* The flags word is read with a plain load on the hot paths, deliberately: an
 * atomic (or volatile) load cannot be folded into the test instruction, and cost 13
 * instructions on L2 (papers' null thread) and 1 on L3 in measurement. The only
 * writer besides the creator is hook.c's atomic OR/AND of TF_HOOK when the first
 * callback is pushed or the last popped; a reader that sees the bit late misses an
 * event or raises one extra around that moment, which hook.h documents. The flags
 * carry no data to order: callbacks are published by hook.c with release/acquire.
 * TSan builds use relaxed atomic accesses so that the race stays visible to the
 * reader of this comment and silent to the tool. */
static inline uint32_t weft__tflags(const weft_thread_t *t) {
#if defined(WEFT_TSAN)
  return __atomic_load_n(&t->flags, __ATOMIC_RELAXED);
#else
  return t->flags;
#endif
}
static inline void weft__tflags_init(weft_thread_t *t, uint32_t f) {
#if defined(WEFT_TSAN)
  __atomic_store_n(&t->flags, f, __ATOMIC_RELAXED);
#else
  t->flags = f;
#endif
}
/* The flags a new control block starts with: 0, or TF_HOOK while callbacks are
 * installed (relaxed: see the known race in weft/hook.h). */
extern _Atomic uint32_t weft__tf_default __attribute__((visibility("hidden")));
/* thread_blocked and the SAVE/BLOCKED/RESTORE callbacks (thread.c; cold). */
void weft__blocked_slow(weft_thread_t *self, uint32_t f, void *obj);
static inline uint32_t weft__tf_start(void) {
#ifdef WEFT_HOOKS
  return atomic_load_explicit(&weft__tf_default, memory_order_relaxed);
#else
  return 0;
#endif
}
/* Raises a hook event (weft/hook.h); only called when TF_HOOK was seen. */
void weft__hook_raise(int ev, weft_thread_t *t, void *obj);

/* ---- idle-event routing (bundle.c; docs/schedulers.md) --------------------------- */
/* processor_idle on the focus bundle if it is not the root (NULL otherwise). */
weft_thread_t *weft__bundle_idle_focus(weft_vp_t *vp);
/* processor_idle on every non-root bundle that is not stopped, until one gives a
 * thread: the sweep that guarantees no ready thread is stranded while VPs sleep. */
weft_thread_t *weft__bundle_idle_sweep(weft_vp_t *vp);
/* processor_idle on b for a yield of one of its threads (NULL if b is stopped). */
weft_thread_t *weft__bundle_yield_idle(weft_bundle_t *b, weft_vp_t *vp);
/* 1 if b or a bundle above it is stopped. */
int weft__bundle_stopped(const weft_bundle_t *b);
/* A continuation's share of a switch: SAVE of self, BLOCKED (if blocked) with obj,
 * then RESTORE of the VP's new current thread if there is one. */
void weft__hook_switched(weft_thread_t *self, int blocked, void *obj);
/* Nonzero while any callback is installed (idle-loop events test it). */
extern _Atomic uint32_t weft__hooks_on;
void weft__tcb_foreach(void (*fn)(weft_thread_t *t, void *arg), void *arg);
/* The same with pool.lock held by the caller; and whether p is a carved control
 * block (pool.lock held). For weft_dump (src/diag). */
void weft__tcb_foreach_locked(void (*fn)(weft_thread_t *t, void *arg), void *arg);
int weft__tcb_contains(const void *p);

/* ---- wired threads (wire.c, weft/wire.h) -------------------------------------------
 * On a wire kernel thread weft__vp() is NULL; the wired weft thread running there is
 * this (NULL elsewhere). Out of line: only the cold "no VP" branches call it. */
weft_thread_t *weft__wired_self(void);
int weft__wire_returning(void);          /* wire kernel threads still handing a thread back */

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
  if (WEFT__LIKELY(vp && atomic_load_explicit(&vp->ntcb, memory_order_relaxed) < vp->free_limit)) {
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

/* ---- dispatch (runtime.c) --------------------------------------------------------- */
void weft__wake_one(void);
void weft__unblock(weft_vp_t *vp, weft_thread_t *t);   /* raises UNBLOCKED */
void weft__ready(weft_vp_t *vp, weft_thread_t *t);     /* the scheduler part only */
weft_vp_t *weft__os_target_vp(void);

/* Plain OS threads' entry gate (runtime.c): every call from a thread with no VP
 * that touches runtime state (create, join, wake-ups) runs between enter and leave,
 * so that weft_shutdown() never frees what it uses. enter returns 0, or
 * WEFT_ENOTINIT when the runtime is not running or is shutting down (creations are
 * refused from the start of weft_shutdown(), the rest once every thread finished).
 * docs/memory-ordering.md "The OS-thread gate". */
enum { WEFT__GATE_CREATE = 2, WEFT__GATE_OTHER = 1 };
int weft__os_enter(int kind);
void weft__os_leave(int kind);
/* Live threads other than the main one, never below the true count (docs/memory-
 * ordering.md "Counters"); O(nvps). */
long weft__live_threads(void);
/* weft_create's check of cfg.max_threads, once per batch: how many more threads this
 * VP may create before it checks again (>= 1), or 0 when the limit is reached. */
long weft__create_limit(weft_vp_t *vp);
void weft__key_run_dtors(weft_thread_t *t);

/* Wakes a VP after an enqueue if one sleeps and none spins (idle: rt.idle as read
 * inside the queue lock). */
static inline void weft__enqueue_wake(uint32_t idle) {
  if (WEFT__UNLIKELY(idle != 0 && (idle & 0xffff) == 0)) weft__wake_one();
}

/* Puts t at the back of vp's dispatch queue (it runs after every thread queued now:
 * FIFO among threads made ready this way); wakes a VP if one sleeps and none spins.
 * The idle word is read inside the queue lock: a VP going to sleep bumps the idle
 * word and then takes every queue lock to look, so either it sees t or we see it
 * asleep (docs/memory-ordering.md). */
static inline void weft__enqueue(weft_vp_t *vp, weft_thread_t *t) {
  weft__spin_lock(&vp->q.lock);
  weft_thread_t *back = vp->q.tail;
  t->next = NULL;
  t->prev = back;
  if (back) back->next = t;
  else atomic_store_explicit(&vp->q.head, t, memory_order_relaxed);
  vp->q.tail = t;
  /* relaxed: ordered after the sleeper's seq_cst update by the queue lock */
  uint32_t idle = atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
  weft__spin_unlock(&vp->q.lock);
  weft__enqueue_wake(idle);
}

/* The front push under vp's queue lock (held by the caller): t runs next on vp and
 * is the last a thief takes. Returns rt.idle read inside the lock (see above). */
static inline uint32_t weft__push_locked(weft_vp_t *vp, weft_thread_t *t) {
  /* relaxed (load and store): q.head is ordered by the queue lock; the atomic is
   * only for the unlocked hint reads of idle pollers */
  weft_thread_t *front = atomic_load_explicit(&vp->q.head, memory_order_relaxed);
  t->next = front;
  if (front) front->prev = t;
  else vp->q.tail = t;
  atomic_store_explicit(&vp->q.head, t, memory_order_relaxed);
  /* relaxed: ordered after the sleeper's seq_cst update by the queue lock */
  return atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
}

/* Puts t at the front of vp's dispatch queue (a new thread: the VP runs the threads
 * it created most recently first); wakes a VP as weft__enqueue does. */
static inline void weft__push(weft_vp_t *vp, weft_thread_t *t) {
  weft__spin_lock(&vp->q.lock);
  uint32_t idle = weft__push_locked(vp, t);
  weft__spin_unlock(&vp->q.lock);
  weft__enqueue_wake(idle);
}

/* Removes the front of vp's dispatch queue, or returns NULL. */
static inline weft_thread_t *weft__dequeue(weft_vp_t *vp) {
  if (!atomic_load_explicit(&vp->q.head, memory_order_relaxed)) return NULL;
  weft__spin_lock(&vp->q.lock);
  weft_thread_t *t = atomic_load_explicit(&vp->q.head, memory_order_relaxed);
  if (t) {
    weft_thread_t *n = t->next;
    atomic_store_explicit(&vp->q.head, n, memory_order_relaxed);
    if (!n) vp->q.tail = NULL;
  }
  weft__spin_unlock(&vp->q.lock);
  return t;
}

/* A thread whose stack could not be bound at its first dispatch: it waits on the
 * runtime's list of threads without a stack, which idle VPs retry (runtime.c). */
void weft__bind_failed(weft_vp_t *vp, weft_thread_t *t);

/* If *next has never run, bind its stack. If that fails (out of memory), hand it to
 * the list of threads waiting for a stack and report NULL: the caller switches to
 * the idle loop, which keeps timers and other threads going and retries it. */
static inline __attribute__((always_inline)) void weft__prepare(weft_vp_t *vp,
                                                               weft_thread_t **next) {
  weft_thread_t *t = *next;
  if (WEFT__LIKELY(t->ctx.sp != NULL)) return;
  if (WEFT__UNLIKELY(weft__stack_bind(vp, t) != 0)) {
    weft__bind_failed(vp, t);
    *next = NULL;
  }
}

/* Switches the calling thread `self` away: runs the next ready thread of this VP or
 * the idle loop, and runs fn(arg) once self is saved. Returns when self is resumed. */
void weft__block_timers(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg);

static inline void weft__block_now(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg) {
  weft_thread_t *next = weft__dequeue(vp);
  if (next) weft__prepare(vp, &next);
  weft_ctx_t *to = next ? &next->ctx : &vp->idle_ctx;
  vp->current = next;
  weft__switch(&self->ctx, to, fn, arg);
}

/* The same, after firing this VP's due timers if it has any (relaxed: a hint, the
 * timers are re-checked under their lock). The timer path is a tail call out of
 * line, so that the common path keeps nothing live across a call. */
static inline void weft__block(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg) {
  if (WEFT__UNLIKELY(atomic_load_explicit(&vp->tm.n, memory_order_relaxed))) {
    weft__block_timers(vp, self, fn, arg);
    return;
  }
  weft__block_now(vp, self, fn, arg);
}

static inline void weft__stat_inc(_Atomic uint64_t *c) {
  /* owner-only counter: relaxed load + store, no read-modify-write needed */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

/* The finished count (vp->n_finished): owner-only like the others, but stored with
 * release so that the exact live count (runtime.c, weft__live_threads) that loads it
 * with acquire also sees the creation of every thread it counts as finished, and of
 * every thread that thread created (docs/memory-ordering.md "Counters"). A plain
 * store on x86-64. */
static inline void weft__stat_inc_release(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_release);
}

static inline int weft__is_default(const weft_bundle_t *b) {
  return b->ops_id == &weft_sched_default;
}

/* Fault injection and accounting (alloc.c). */
extern _Atomic long weft__live_blocks;

#endif
