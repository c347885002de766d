/* weft/spinlock.h - busy-waiting locks: every kind, and weft_spin_t, the default.
 *
 * Kinds (one header each, the same interface for every kind K):
 *
 *   tas      weft/spinlock/tas.h      test-and-set: spin on the exchange
 *   ttas     weft/spinlock/ttas.h     test-and-test-and-set: spin on a read
 *   backoff  weft/spinlock/backoff.h  ttas + Ethernet-style exponential backoff (FastThreads §4)
 *   ticket   weft/spinlock/ticket.h   ticket lock: FIFO, one fetch-and-add
 *   array    weft/spinlock/array.h    Anderson's array queue lock (FastThreads Table 4.1): FIFO
 *   mcs      weft/spinlock/mcs.h      MCS list queue lock: FIFO; also a node-taking form
 *
 *   weft_spin_K_t    the lock; an all-zero object is an unlocked lock
 *   WEFT_SPIN_K_INIT static initializer (unlocked)
 *   weft_spin_K_init(l)     make *l unlocked
 *   weft_spin_K_lock(l)     spin until held
 *   weft_spin_K_trylock(l)  0 if taken, WEFT_EBUSY if held (by anyone, the caller too)
 *   weft_spin_K_unlock(l)   release (the caller must hold it)
 *
 * Every function is static inline, callable from weft threads, plain OS threads and
 * scheduler handlers or release callbacks, never switches the calling weft thread, and
 * cannot fail except trylock's WEFT_EBUSY. None is reentrant, none records an owner,
 * and misuse (unlocking a lock nobody holds) is undefined. While waiting they spin with
 * a pause hint (x86 `pause`, AArch64 `yield`) and give the CPU to the kernel once every
 * WEFT_SPIN_OS_YIELD_SPINS steps (weft/spinlock/relax.h), which never switches the weft
 * thread: it keeps its virtual processor (VP) throughout.
 *
 * THE RULE. A spinlock is for short critical sections that never block: between lock
 * and unlock the holder must not call anything that may switch it (weft_yield, joins,
 * blocking weft sync objects, weft_thread_block, ...). Waiting for a spinlock occupies
 * the waiter's VP. If the holder were switched out, a waiter could occupy the VP that
 * the holder needs to resume on: with one VP (or every VP spinning) that is a deadlock,
 * not a slowdown. For waits that may be long, or a holder that may block, use the
 * blocking mutex (weft/mutex.h). For the same reason a weft thread must not spin
 * waiting for a lock that another weft thread of the same VP is about to take and
 * release: with nvps = 1, two weft threads only contend on a spinlock if the holder
 * switched while holding it.
 *
 * Which kind: FIFO kinds (ticket, array, mcs) bound how long a waiter can be overtaken
 * and hand the lock over with one store, but every hand-off goes to a particular
 * waiter, so a waiter that is preempted by the kernel stalls every waiter behind it
 * (more spinning threads than CPUs). tas/ttas/backoff are unfair but keep working
 * when waiters are preempted. array and mcs waiters each spin on their own line,
 * which matters with many processors; on a few cores the simple kinds are as fast.
 */
#ifndef WEFT_SPINLOCK_H
#define WEFT_SPINLOCK_H

#include "weft/spinlock/relax.h"
#include "weft/spinlock/tas.h"
#include "weft/spinlock/ttas.h"
#include "weft/spinlock/backoff.h"
#include "weft/spinlock/ticket.h"
#include "weft/spinlock/array.h"
#include "weft/spinlock/mcs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default kind, weft_spin_t: test-and-test-and-set with exponential backoff.
 *
 * Chosen by measurement (bench/sync/S_spin.c, on the project machine: AMD EPYC,
 * 2 vCPUs, Linux 6.18; weft threads on P pinned VPs; median ns per acquisition [min..max]):
 *
 *   build-spin/bench/sync/weft_bench_spin --rows S1,S4,S5 --reps 11   (and the full sweep)
 *
 *                       tas               ttas              backoff           ticket / mcs
 *   S1 P=1              2.2               2.2               2.2               2.1 / 5.4
 *   S1 P=2, run 1       14.8 [14.5..15.0] 41.1 [30.2..41.4] 31.6 [30.6..32.0] 283 / 332
 *   S1 P=2, run 2       16.0 [12.0..28.0] 12.0 [ 8.0..44.0] 16.0 [ 4.0..28.0]  88 / 145 (node)
 *   S1 P=2, run 3       12.0 [ 8.0..40.0] 12.0 [ 7.9..32.0] 16.0 [ 8.0..31.8]
 *   S1 P=2, run 4       12.0 [ 3.6..54.8] 17.3 [ 5.7..64.0] 12.0 [ 7.7..20.0]
 *   S5 P=2, run 1       27.1              29.0              25.0              278 / 322
 *   S5 P=2, run 2       11.8              16.3               8.3               95 / 123 (node)
 *
 * The FIFO kinds cost 5-20x more per acquisition at P=2 (each grant is a cross-core
 * hand-off to one particular waiter) and collapse when waiters are preempted, so the
 * default is one of the first three. Between those the medians overlap run to run on
 * this 2-core machine (the VM's placement moves every P=2 figure by 2-3x); uncontended
 * they are the same single exchange. Backoff was never the worst of the three, was the
 * fastest in both S5 runs, and is the one FastThreads Fig 4.1 shows degrading least as
 * processors are added (the regime 2 cores cannot show), so it is the default. */
typedef weft_spin_backoff_t weft_spin_t;
#define WEFT_SPIN_INIT WEFT_SPIN_BACKOFF_INIT

/* weft_spin_init/lock/trylock/unlock: the default kind's operations, with the same
 * contracts as weft_spin_backoff_*(): callable from anywhere, never switch, trylock
 * returns 0 or WEFT_EBUSY. An all-zero weft_spin_t is unlocked. */
static inline void weft_spin_init(weft_spin_t *l) { weft_spin_backoff_init(l); }
static inline void weft_spin_lock(weft_spin_t *l) { weft_spin_backoff_lock(l); }
static inline int weft_spin_trylock(weft_spin_t *l) { return weft_spin_backoff_trylock(l); }
static inline void weft_spin_unlock(weft_spin_t *l) { weft_spin_backoff_unlock(l); }

#ifdef __cplusplus
}
#endif
#endif
