/* src/core/runtime.h - the runtime's global state (weft__rt), the plain OS threads'
 * entry gate, the live-thread count (runtime.c, stats.c), and wired threads (wire.c). */
#ifndef WEFT_CORE_RUNTIME_H
#define WEFT_CORE_RUNTIME_H

#include <stdatomic.h>
#include <stdint.h>

#include "weft/runtime.h"
#include "core/alloc.h"
#include "core/spin.h"
#include "core/vp.h"

/* idle word: low 16 bits = VPs spinning in the idle loop, high 16 bits = VPs
 * asleep in the kernel. Read (relaxed) by enqueuers inside the queue lock; changed
 * by seq_cst read-modify-writes. See docs/memory-ordering.md "park and unpark". */
#define WEFT__IDLE_SPIN 1u
#define WEFT__IDLE_SLEEP (1u << 16)

typedef struct weft__rt {
  _Atomic int state;             /* 0 off, 1 running (release at init end) */
  int nvps;
  int nvps_all;                  /* nvps + the system monitor's spare VP slots
                                    (monitor.c): rt.vps holds this many; loops over
                                    every VP's counters and timers go this far */
  weft_config_t cfg;
  size_t page;
  weft_vp_t **vps;
  weft_bundle_t *root;
  weft_thread_t *main;           /* the main weft thread */
  uintptr_t main_os;             /* the OS thread that called weft_init (pthread_self,
                                    as an integer): the checked builds' mutex holder
                                    token of the main weft thread, the same as that OS
                                    thread's before weft_init and after weft_shutdown */
  /* 1 if the asymmetric fences use membarrier(2) (weft_init; WEFT_MEMBARRIER=0 turns
   * it off): read-only while running */
  int asym;
  weft__pool_t pool WEFT__ALIGNED;
  _Atomic uint32_t idle WEFT__ALIGNED;
  weft__spin_t idle_lock;
  weft_vp_t **sleepers;          /* stack of sleeping VPs: idle_lock */
  int nsleepers;
  _Atomic int stopping;
  /* 1 while weft_shutdown's main thread waits for the others (its 200 us sleeps);
   * relaxed: a VP that takes the main thread from its idle loop then wakes no other
   * VP for it (idle.c), so the waiting loop can see every other VP asleep */
  _Atomic int shutdown_wait;
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
  weft__spin_t bundle_lock;      /* tree changes among themselves (bundle.c) */
  /* 1 while a tree change holds the bundle lock exclusively: written under
   * bundle_lock (exchange, seq_cst; release to clear), read by VPs entering an idle
   * event (bundle.c, "Locking") */
  _Atomic uint32_t bundle_writer;
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
void weft__sync_stats_fold(weft_vp_t *vp); /* sync/wait.c: shutdown keeps a VP's sync counts */

/* Hidden, as every symbol of the library not in the public API: declared so here (not
 * only at the definition, runtime.c) so that every file addresses them directly, as
 * the file that defines them does, instead of through the GOT (one instruction more
 * on every dispatch-queue operation outside runtime.c). */
extern weft__rt_t weft__rt __attribute__((visibility("hidden")));
extern _Atomic uint64_t weft__next_id_block __attribute__((visibility("hidden")));

/* ---- asymmetric fences (docs/memory-ordering.md §6b) --------------------------------
 * A store-load pair whose two sides run at very different rates: the frequent side
 * (light) pays a compiler barrier, the rare side (heavy) a membarrier(2) that makes
 * every running thread of the process execute a full barrier. Where membarrier is
 * refused (rt.asym 0) both are seq_cst fences. Use them only as a pair: a light fence
 * orders nothing against another light fence. */
static inline void weft__fence_light(void) {
  if (WEFT__LIKELY(weft__rt.asym)) atomic_signal_fence(memory_order_seq_cst);
  else atomic_thread_fence(memory_order_seq_cst);
}
static inline void weft__fence_heavy(void) {
  if (weft__rt.asym) weft__os_membarrier();
  else atomic_thread_fence(memory_order_seq_cst);
}

/* Plain OS threads' entry gate (runtime.c): every call from a thread with no VP
 * that touches runtime state (create, join, wake-ups, and the calls that only read
 * or rearrange it: statistics, bundles, hooks) runs between enter and leave, so that
 * weft_shutdown() never frees what it uses. enter returns 0, or WEFT_ENOTINIT when
 * the runtime is not running or is shutting down (creations are refused from the
 * start of weft_shutdown(), the rest once every thread finished). GATE_READ is
 * GATE_OTHER for calls that make no thread ready: they are not counted as possible
 * wakers by the deadlock check (weft__os_gate_empty). docs/memory-ordering.md "The
 * OS-thread gate". */
enum { WEFT__GATE_CREATE = 2, WEFT__GATE_OTHER = 1, WEFT__GATE_READ = 3 };
int weft__os_enter(int kind);
void weft__os_leave(int kind);
/* weft__os_enter(WEFT__GATE_READ) for a caller with no VP (a weft thread on a VP
 * cannot race the teardown: it runs before weft_shutdown() returns); 1 if the
 * caller may go on (then it calls weft__os_read_leave with what this returned, 2 or
 * 1), 0 if weft is not running or is being torn down. */
int weft__os_read_enter(void);
void weft__os_read_leave(int entered);
/* 1 if no plain OS thread is inside the gate (seq_cst loads: deadlock.c). */
int weft__os_gate_empty(void);

/* Live threads other than the main one, never below the true count (docs/memory-
 * ordering.md "Counters"); O(nvps). */
long weft__live_threads(void);
/* weft_create's check of cfg.max_threads, once per batch: how many more threads this
 * VP may create before it checks again (1 to cap, the ids left in its block), or 0
 * when the limit is reached; recorded as the VP's grant (vp.h), which the other VPs'
 * checks count as taken until it is used or given back. */
long weft__create_limit(weft_vp_t *vp, long cap);
/* Gives back what is left of vp's batch of creations (its owner, on its way to sleep
 * or, for a spare, to exit): a VP that creates nothing more must not keep the others
 * under cfg.max_threads by what it was allowed. */
void weft__create_grant_release(weft_vp_t *vp);
/* Whether a plain OS thread may create one more thread under cfg.max_threads. */
int weft__create_os_allowed(void);

/* ---- wired threads (wire.c, weft/wire.h) -------------------------------------------
 * On a wire kernel thread weft__vp() is NULL; the wired weft thread running there is
 * this (NULL elsewhere). Out of line: only the cold "no VP" branches call it. */
weft_thread_t *weft__wired_self(void);
/* The kernel thread id t runs on if t is wired now, 0 if it is not, -1 if the
 * registry's lock could not be had (weft_dump; wire.c). */
long weft__wired_tid(const weft_thread_t *t);
int weft__wire_returning(void);          /* wire kernel threads still handing a thread back */

#endif
