/* src/io/io.h - the I/O engine's hooks into the runtime (docs/io.md).
 *
 * runtime.c calls these from weft_init/teardown, the idle loop and the sleeper
 * wake-up only: none is on a path that runs threads (create, switch, block,
 * unblock), which gain nothing from I/O. docs/memory-ordering.md "The I/O poller"
 * has the wake-up protocol.
 */
#ifndef WEFT_IO_INTERNAL_H
#define WEFT_IO_INTERNAL_H

#include "core/internal.h"

/* Starts the engine chosen by WEFT_IO (default: io_uring if built and the kernel
 * runs it, else epoll): 0, WEFT_EINVAL (unknown engine, or one this build lacks),
 * WEFT_ESYS (the kernel refused an epoll or eventfd, or a forced io_uring). */
int weft__io_init(void);
/* Stops it and frees every descriptor record (no thread waits: weft_shutdown). */
void weft__io_fini(void);

/* Names of the io_uring requests a thread can park in, by opcode (NULL for the
 * others; all NULL in a build without the ring): the low 8 bits of the value of a
 * WEFT__WX_RING waiting word (core/tcb.h). weft_dump and the gdb extension read it. */
extern const char *const weft__io_op_names[64];

/* Called by an idle VP in place of its futex wait on vp->park (runtime.c vp_sleep),
 * park already 1 and the VP on the sleeper stack: when threads wait on I/O and no
 * other VP polls, it waits in the engine instead, until an event, `until` (a
 * deadline of weft_time_now(); WEFT_FOREVER: none) or weft__io_wake(vp). Returns 1
 * if it made waiting threads ready (the caller stops sleeping), else 0 (the caller
 * re-checks park and its deadline, as after a futex wait). */
int weft__io_park(weft_vp_t *vp, uint64_t until);

/* After a waker stored vp->park = 0 (release) and woke its futex: interrupts vp's
 * wait in the engine if it is the one waiting there. */
void weft__io_wake(weft_vp_t *vp);

/* One poll that does not wait, by an idle (spinning) VP or weft_shutdown: returns
 * how many threads it made ready. Cheap (one relaxed load) when none waits. */
int weft__io_poll(weft_vp_t *vp);

/* The same poll by the system monitor, off any VP (src/core/monitor.c), when threads
 * wait on I/O and no VP holds the poller role: the threads it makes ready are placed
 * as a plain OS thread's wake-ups are. Returns how many. */
int weft__io_poll_monitor(void);

/* A fire (src/sync/timer.c) won the claim of w, the heap stand-in of a parked I/O
 * waiter whose thread's stack is given back (stacks of idle threads, io.c): puts the
 * stack back and returns the thread, for the caller to make ready. Takes no lock (the
 * fire may run where a record's lock is held); the thread unlinks and frees the
 * stand-in when it resumes. */
struct weft__waiter;
weft_thread_t *weft__io_idle_fired(struct weft__waiter *w);

/* 1 while some thread is parked on I/O (the deadlock check counts them as able to
 * be woken). seq_cst load: see quiet() in runtime.c. */
int weft__io_waiting(void);

/* 1 if threads wait on I/O and no VP is waiting in the engine (relaxed hints): the
 * idle loop then wakes another VP when it leaves, so that one becomes the poller. */
int weft__io_need_poller(void);

/* ---- pool threads held by wired threads (src/io/blocking.c, used by src/core/wire.c)
 * A hold asks the weft_blocking pool for a kernel thread for as long as one weft
 * thread is wired to it. The holder (weft_wire, on a VP) first calls
 * weft__pool_hold_reserve(), which makes sure a pool thread will take the hold: an
 * idle one that no other reservation counts on, or a new one, started even when the
 * pool is at its limit (held threads do not count against it). Returns 0, or
 * WEFT_ESYS / WEFT_ENOMEM when a needed thread could not be started (injectable:
 * weft_debug_fail_alloc), the pool unchanged. After a 0 the holder must submit
 * exactly one hold: weft__pool_hold_submit() (from its block continuation, once it is
 * saved) queues h; a pool thread takes it under the pool lock (so everything written
 * before the submit is visible to it) and calls h->run(h) on its own stack. h may
 * live on the wired thread's stack: run reads it before resuming that thread, and
 * the pool touches it no more. Before it makes its weft thread ready again, run calls
 * weft__pool_hold_done() (on the pool thread): from then on the thread counts as
 * idle for reservations, so the weft thread that unwires and wires again at once
 * reuses it. When run returns, the thread is an idle pool thread again (reused by the
 * next hold or job, gone after the idle time). */
typedef struct weft__pool_hold {
  struct weft__pool_hold *next;            /* the pool's queue: pool lock */
  void (*run)(struct weft__pool_hold *h);  /* on the pool thread that takes h */
} weft__pool_hold_t;
int weft__pool_hold_reserve(void);
void weft__pool_hold_submit(weft__pool_hold_t *h);
void weft__pool_hold_done(void);
/* The pool threads that wait, idle, for a job or a hold while none is queued or
 * reserved and none is held or on its way back (0 otherwise): kernel threads that
 * cannot wake a weft thread until a weft thread gives them work. The deadlock check
 * (src/core/deadlock.c) does not count them as possible wakers. *settling is set to 1
 * while the pool's thread count is about to change by itself (a thread on its way back
 * from a job or a hold, or one that has just left): the check looks again later. */
int weft__pool_idle_spare(int *settling);
/* weft_init, from its calling thread: the pool's threads, idle ones of an earlier run
 * included, take this thread's signal mask (at once if idle, else before their next
 * job or hold), as every kernel thread weft starts for this run does. */
void weft__pool_runtime_mask(void);
/* weft_blocking() jobs queued or running now (a snapshot): each will wake the weft
 * thread parked for it when its function returns. weft_shutdown waits while there
 * are any, as it waits for a sleeping thread. */
int weft__pool_jobs(void);

#endif
