/* src/core/idle.h - the idle loop of a VP, parking and waking VPs, threads waiting
 * for a stack (idle.c), and the reports made when nothing can run any more
 * (deadlock.c). */
#ifndef WEFT_CORE_IDLE_H
#define WEFT_CORE_IDLE_H

#include <stdint.h>

#include "core/vp.h"
#include "weft/sched.h"

/* ---- the idle loop and parking (idle.c) ------------------------------------------- */
/* The idle loop of vp (VPs other than 0 return from it at shutdown); the entry of VP
 * 0's idle context, which runs it on a stack of its own. */
void weft__idle_loop(weft_vp_t *vp);
void weft__idle_entry(void *vp);
/* Wakes one sleeping VP if none spins (an enqueue saw a sleeper, the idle word). */
void weft__wake_one(void);
/* weft_sched_notify() with the light fence (runtime.h): for the kernel's own notifies
 * after events raised on a bundle other than the root, whose existence makes every
 * sleeper make the heavy fence (idle.c, vp_sleep). */
void weft__notify_light(void);
/* Wakes every sleeping VP (shutdown, a failed init). */
void weft__wake_all(void);

/* The steal back-off (idle.c has the reasoning): a steal whose busy period gave the
 * thief less than WEFT__STEAL_PAYS_NS per thread taken did not pay; then the VP steals
 * no more for a back-off that starts at WEFT__STEAL_WAIT_MIN_NS and doubles with each
 * steal that does not pay, up to WEFT__STEAL_WAIT_MAX_NS; a steal that pays ends it. */
#define WEFT__STEAL_PAYS_NS 500u
#define WEFT__STEAL_WAIT_MIN_NS 4000u
#define WEFT__STEAL_WAIT_MAX_NS 1000000u
/* A VP that backs off naps in the kernel until the back-off ends, at most this long at
 * a time, instead of polling (idle.c, idle_wait). */
#define WEFT__STEAL_NAP_MAX_NS 50000u
/* 1 if a VP with back-off state *bo may steal at time now (ns, weft__os_now_ns). */
int weft__steal_allowed(const weft__steal_bo_t *bo, uint64_t now);
/* Rates a steal of `taken` threads (>= 1) whose busy period lasted busy_ns and ended
 * at now: ends the back-off if it paid, else starts or doubles it. */
void weft__steal_judge(weft__steal_bo_t *bo, uint64_t taken, uint64_t busy_ns, uint64_t now);
/* 1 if some dispatch queue holds a thread; takes each queue's lock in turn. */
int weft__any_queued_locked(void);
/* A thread whose stack could not be bound at its first dispatch: it waits on the
 * runtime's list of threads without a stack, which idle VPs retry. */
void weft__bind_failed(weft_vp_t *vp, weft_thread_t *t);
/* The oldest thread waiting for a stack, with its stack now bound on vp; NULL if
 * there is none or binding still fails (then it keeps its turn). */
weft_thread_t *weft__nostack_retry(weft_vp_t *vp);
/* What an idle VP would take from the bundles, without stealing from other VPs: the
 * focus bundle's processor_idle, then every other non-root bundle's (under the
 * bundle lock; stopped bundles skipped). For a yield that finds nothing else ready
 * on its VP, and weft_shutdown's wait: without it, threads that a scheduler keeps to
 * itself (the scheduler library's run lists, a priority heap) never run on a VP that
 * never goes idle. NULL if none. */
weft_thread_t *weft__idle_bundles(weft_vp_t *vp);

/* ---- when nothing can move any more (deadlock.c) ------------------------------------ */
/* Kernel threads in this process that may run its code (io_uring's workers left out:
 * deadlock.c), or -1 when they cannot be read now (no descriptor to be had); _raw
 * reads them in the caller's descriptor table, the other through the monitor's stat
 * reader when it runs. */
long weft__count_kthreads(void);
long weft__count_kthreads_raw(void);
/* The same without the weft_blocking pool's threads (named "weft-pool"): weft_init's
 * counts, which threads of the pool that an earlier run started must not upset (one
 * that leaves between them made the count look short, and the deadlock report was
 * off for the whole run). */
long weft__count_kthreads_own(void);
long weft__count_kthreads_own_raw(void);
/* weft_init's first count (_own_raw), with *lingering set to the number of kernel
 * threads named as weft's own (weft-vp, weft-monitor, weft-stat, weft-spare): at
 * weft_init those belong to an earlier run, joined by its weft_shutdown and still
 * leaving (a joined thread stays listed until the end of its exit). */
long weft__count_kthreads_init(int *lingering);
/* 1 if no weft thread can ever be made ready again: every VP (vp among them) asleep,
 * nothing queued, no timer, wired thread, idle function, bundle or plain OS thread
 * inside weft, and no kernel thread but weft's own; -1 if all that holds but the
 * kernel threads could not be counted now (the caller looks again later); else 0. */
int weft__nothing_can_wake(weft_vp_t *vp);
/* The deadlock report (every thread blocked, named with what it waits for); aborts. */
_Noreturn void weft__deadlock_report(void);
/* The out-of-stacks report for t, the oldest thread waiting for a stack; aborts. */
_Noreturn void weft__out_of_stacks(weft_thread_t *t);

#endif
