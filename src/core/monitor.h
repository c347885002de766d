/* src/core/monitor.h - the system monitor (monitor.c): a kernel thread that notices
 * a VP whose kernel thread sleeps in a call weft was not told of while ready threads
 * wait in its dispatch queue, and runs those threads on a spare VP. docs/design.md
 * "The system monitor" has the design; docs/memory-ordering.md "The system monitor"
 * the protocols. */
#ifndef WEFT_CORE_MONITOR_H
#define WEFT_CORE_MONITOR_H

#include <stdatomic.h>
#include <stdint.h>

#include "weft/runtime.h"
#include "core/defs.h"
#include "core/vp.h"

/* Spare VP slots weft_init reserves behind the nvps VPs of cfg (0 when the monitor is
 * off): rt.vps holds nvps + that many VPs; a spare's index is nvps + its slot. */
int weft__monitor_spares(const weft_config_t *cfg);
/* Allocates the monitor's state for rt.nvps VPs and `nspares` spare slots (before
 * any VP starts); WEFT_ENOMEM. Nothing to do (0) when the monitor is off. */
int weft__monitor_init(int nspares);
/* Starts the monitor kernel thread (after the VPs): 0, WEFT_ESYS or WEFT_ENOMEM. */
int weft__monitor_start(void);
/* Stops the monitor and waits for every spare's kernel thread (shutdown, after every
 * weft thread has finished and the caller is back on VP 0; a failed init). */
void weft__monitor_stop(void);
/* Frees the state (teardown). */
void weft__monitor_free(void);
/* Called by vp's kernel thread once it runs vp: records its kernel thread (id and
 * CPU clock) for the monitor. */
void weft__monitor_vp_start(weft_vp_t *vp);
/* On spare VP s, while its target is stalled: the next ready thread taken from the
 * front of the target's queue (as the spare's own loop takes them), else NULL (also
 * when s is not a spare). */
weft_thread_t *weft__monitor_spare_take(weft_vp_t *s);
/* 1, with *k the process's kernel threads (-1: no answer in time), when the monitor's
 * stat reader counted them in its own descriptor table (monitor.c; own: without the
 * weft_blocking pool's threads, weft__count_kthreads_own); 0 when there is
 * no reader (the caller reads /proc/self/stat itself). */
int weft__monitor_count_kthreads(long *k, int own);
/* 1 while a spare VP's kernel thread exists (running threads or about to exit). */
int weft__monitor_busy(void);
/* The index a VP shows to programs and schedulers (weft_vp_self,
 * weft_sched_vp_index): its own, or, for a spare, the index of the VP it stands in
 * for. */
int weft__vp_public_index(const weft_vp_t *vp);

/* The monitor's futex word: 1 while it sleeps because every VP sleeps. A VP that
 * leaves its idle loop to run a thread calls weft__monitor_kick() after its seq_cst
 * update of rt.idle (idle.c): store-buffering with the monitor's seq_cst store of 1
 * and its seq_cst load of rt.idle, so either the monitor sees the VP awake or the VP
 * sees it asleep and wakes it. */
extern _Atomic uint32_t weft__monitor_deep __attribute__((visibility("hidden")));
void weft__monitor_wake_deep(void);
static inline void weft__monitor_kick(void) {
  /* seq_cst: the other half of the store-buffering pair above */
  if (WEFT__UNLIKELY(atomic_load_explicit(&weft__monitor_deep, memory_order_seq_cst)))
    weft__monitor_wake_deep();
}

#endif
