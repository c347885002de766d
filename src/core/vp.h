/* src/core/vp.h - the virtual processor: its caches, counters, timer heap, dispatch
 * queue and parking word; how a kernel thread finds its VP; owner-only counters. */
#ifndef WEFT_CORE_VP_H
#define WEFT_CORE_VP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "arch/context.h"
#include "core/spin.h"
#include "core/tcb.h"
#include "sync/timer.h"

typedef struct weft__stack_rec weft__stack_rec_t;  /* core/alloc.h */

/* Slow-path counters of weft/sync.h, per VP (owner-only adds). */
enum { WEFT__ST_MISSED, WEFT__ST_SPIN, WEFT__ST_POLL, WEFT__ST_BLOCKED, WEFT__ST_IDLED,
       WEFT__ST_TIMEOUT, WEFT__ST_N };

/* The steal back-off of a VP's idle loop (idle.c, core/idle.h): after a steal that did
 * not pay, no steal before `ok` (weft__os_now_ns); `wait` is the current back-off in
 * ns, 0 when the last steal paid (or none was made). */
typedef struct {
  uint64_t ok;
  uint32_t wait;
} weft__steal_bo_t;

/* ---- virtual processor ------------------------------------------------------------ */
struct weft_vp {
  /* owner-only, hot */
  weft_thread_t *current;       /* running thread; NULL while in the idle loop */
  int index;
  /* 1 while this VP's kernel thread raises an idle event (bundle.c, the shared side of
   * the bundle lock): written by the owner (exchange, seq_cst; release to clear), read
   * by a tree change waiting for the VP to leave (acquire) */
  _Atomic uint32_t idle_event;
  /* 1 while this VP's kernel thread raises an own-bundle question without the bundle
   * lock (WEFT_SCHED_IDLE_LEAF; bundle.c): written by the owner (relaxed store and the
   * light fence; release to clear), read by weft_bundle_stop after its heavy fence */
  _Atomic uint32_t leaf_ask;
  uint32_t handoffs;            /* finish hand-offs that passed queued threads
                                   (thread.c, handoff_turn) */
  weft_thread_t *tcb_free;      /* free control blocks, count ntcb (owner) */
  _Atomic int ntcb;             /* owner writes (relaxed load+store, no RMW);
                                   weft_debug_stats reads (relaxed) */
  weft__stack_rec_t *stk_free;  /* free default-size stacks, count nstk (owner) */
  _Atomic int nstk;
  weft__stack_rec_t *cstk_free; /* free runtime stacks of one custom size, cstk_size
                                   (attr.stack_size), at most cfg.freelist_local,
                                   count ncstk (owner only; alloc.c) */
  size_t cstk_size;
  int ncstk;
  uint64_t id_next, id_end;     /* thread ids: the next, and where weft_create
                                   takes its slow path (end of the block, or of the
                                   batch allowed by cfg.max_threads) */
  uint64_t id_block_end;        /* end of the block of ids (owner) */
  /* The batch of creations cfg.max_threads last allowed this VP (id_grant), and its
   * n_created when it was allowed (id_grant_base): its unused part is id_grant -
   * (n_created - id_grant_base). Written by the owner in weft_create's slow path
   * (relaxed stores), read by other VPs' and OS threads' limit checks (relaxed loads:
   * an estimate, off by the creations racing with it; stats.c). */
  _Atomic uint64_t id_grant_base;
  _Atomic long id_grant;
  int free_limit;               /* 2T: most free stacks kept locally; T on a spare VP
                                   (core/monitor.h), which empties its caches when
                                   it waits or closes */
  int tcb_limit;                /* cfg.tcb_local: most free control blocks kept
                                   locally; T on a spare VP */
  size_t def_stack;             /* cfg.stack_size */
  /* statistics: written by the owner only (relaxed stores; n_finished: release),
   * read by anyone. n_created and n_finished also make the exact live count. */
  _Atomic uint64_t n_created, n_finished, n_steals, n_sleeps;
  _Atomic uint64_t n_stolen;    /* threads the steals counted in n_steals took */
  _Atomic uint64_t sync_st[WEFT__ST_N];
  weft__steal_bo_t steal_bo;     /* the idle loop's steal back-off (owner only) */

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
    /* The hand-off slot (docs/design.md "Hand-off on wake"): a thread this VP's
     * running thread made ready while the queue was empty, run next without a trip
     * through the queue. Filled only by the owner, under lock, and only while head
     * is NULL (release store); emptied by an exchange (acquire) by anyone: the
     * owner's dispatch without the lock, a thief, or a push/append under lock that
     * first moves it to the queue. So while it holds a thread the queue is empty,
     * as seen under lock: it is the queue's front, and FIFO order is kept. */
    _Atomic(weft_thread_t *) next;
  } q WEFT__ALIGNED;

  /* parking: 1 = asleep (or going to sleep), 0 = awake. The waker stores 0
   * (release) then futex-wakes; the sleeper futex-waits while it reads 1 (acquire). */
  _Atomic uint32_t park WEFT__ALIGNED;
  /* 1 from just before the VP's sleep (or steal back-off nap, idle.c) to just after
   * it, written by the VP alone
   * (relaxed: a hint for the system monitor, which reads park too): a waker stores
   * park 0 before its futex wake, and a waker kept off its CPU between the two left
   * a VP that still slept with park 0, which the monitor took for a stall */
  _Atomic uint32_t asleep;

  weft_ctx_t idle_ctx;          /* the idle loop's context (owner) */
  void *idle_stack;             /* VP 0 only: the idle loop's own stack */
  size_t idle_stack_size;
  unsigned idle_stack_vg;
  pthread_t kthread;            /* kernel thread (VP > 0) */
  void *altstack;               /* signal stack for the overflow handler */
  unsigned char ctx_storage[WEFT__CTX_SELF_SIZE + 1] __attribute__((aligned(16)));
};

/* Owner-only counter update readable by others: relaxed load + store, which
 * compiles to a plain add (no locked read-modify-write). */
static inline void weft__own_add(_Atomic int *c, int d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d,
                        memory_order_relaxed);
}

static inline void weft__stat_inc(_Atomic uint64_t *c) {
  /* owner-only counter: relaxed load + store, no read-modify-write needed */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

static inline void weft__stat_add(_Atomic uint64_t *c, uint64_t n) {
  /* owner-only counter, as weft__stat_inc */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

/* The finished count (vp->n_finished): owner-only like the others, but stored with
 * release so that the exact live count (stats.c, weft__live_threads) that loads it
 * with acquire also sees the creation of every thread it counts as finished, and of
 * every thread that thread created (docs/memory-ordering.md "Counters"). A plain
 * store on x86-64. */
static inline void weft__stat_inc_release(_Atomic uint64_t *c) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_release);
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

#endif
