/* src/core/tcb.h - the thread control block: states, the join word, the flags word
 * and how the hot paths read it (thread.c, hook.c). */
#ifndef WEFT_CORE_TCB_H
#define WEFT_CORE_TCB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "weft/sched.h"
#include "weft/thread.h"
#include "arch/context.h"
#include "core/defs.h"

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
/* Waits outside weft's sync objects: kind bits 0 and the word nonzero, an extended
 * kind in bits 3..7 and a value from bit 8 on: for the fd waits a descriptor, for a
 * ring request the descriptor (32 bits) above the io_uring opcode (8 bits), for
 * weft_blocking the address of the function the pool runs (user-space addresses
 * fit in 56 bits; a tagged pointer loses its tag, and the dump then names no symbol). */
enum { WEFT__WX_FD_READ = 1, WEFT__WX_FD_WRITE = 2, WEFT__WX_FD_RW = 3, WEFT__WX_RING = 4,
       WEFT__WX_BLOCKING = 5 };
/* Or'ed into an fd wait's extended kind while the thread's stack memory is given
 * back (src/io/io.c, "Stacks of idle threads"): its saved context is not on its stack
 * then, so weft_dump and the gdb extension show no backtrace. */
#define WEFT__WX_IDLE_STACK 16
#define WEFT__WAITING_X(xkind, value) (((uintptr_t)(value) << 8) | ((uintptr_t)(xkind) << 3))
/* 1 if the waiting word w says the thread's stack is given back. Only a word with
 * kind bits 0 has an extended kind: in a sync object's word, bit 7 is the object's. */
#define WEFT__WAITING_IDLE_STACK(w) \
  (((w) & 7) == 0 && ((w) & ((uintptr_t)WEFT__WX_IDLE_STACK << 3)) != 0)

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
  WEFT__TF_BUNDLE = 32,   /* its bundle is not the root: counted in the bundle's
                             per-VP counts (the finish paths test it with TF_SLOW), and
                             its bundle's processor_idle is asked when it joins,
                             finishes or yields on an empty dispatch queue. Without
                             TF_CUSTOM: a declared fast path (WEFT_SCHED_LOCAL_READY) */
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
/* The finish paths' mask: the general paths plus the bundle count (a constant in
 * the same test: no instruction on the root's path). */
#define WEFT__TF_FINISH_SLOW (WEFT__TF_SLOW | WEFT__TF_BUNDLE)

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
  void *blocked_on;            /* what the thread waits for: its joinee (weft_join),
                                  or in cond_wait its waiter record (on its stack;
                                  valid while `waiting` says COND: wait.c) */
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

/* ---- the flags word (set by the creator, and by hook.c) ----------------------------- */
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
static inline uint32_t weft__tf_start(void) {
#ifdef WEFT_HOOKS
  return atomic_load_explicit(&weft__tf_default, memory_order_relaxed);
#else
  return 0;
#endif
}

/* ---- thread.c, key.c ---------------------------------------------------------------- */
void weft__thread_entry(void *t);       /* first code on a new thread's stack */
void weft__key_run_dtors(weft_thread_t *t);  /* a finishing thread's key destructors */

#endif
