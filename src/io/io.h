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

/* 1 while some thread is parked on I/O (the deadlock check counts them as able to
 * be woken). seq_cst load: see quiet() in runtime.c. */
int weft__io_waiting(void);

/* 1 if threads wait on I/O and no VP is waiting in the engine (relaxed hints): the
 * idle loop then wakes another VP when it leaves, so that one becomes the poller. */
int weft__io_need_poller(void);

#endif
