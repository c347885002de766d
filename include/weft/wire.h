/* weft/wire.h - wiring: a weft thread on a kernel thread of its own
 * (C-Threads §2.1.5, §2.2.2).
 *
 * A wired thread leaves the virtual processors: weft_wire() moves the calling thread
 * onto a kernel thread that runs nothing else while it is wired (a thread of the
 * weft_blocking pool, weft/io.h), so a system call that blocks it
 * (read() on an empty pipe, a sleep, a lock of the C library) blocks that kernel
 * thread only, and every VP goes on running other threads. weft_unwire() gives it
 * back: it is made ready through its bundle's scheduler and resumes on a VP.
 *
 * While wired, the thread is still the same weft thread: weft_self() and
 * weft_thread_id() answer as before, weft_local_get/set and keys keep their values,
 * it can be joined and detached, and it uses weft's synchronization objects (mutex,
 * condition, semaphore, barrier, rwlock, join, sleep) as a plain OS thread does: a
 * wait blocks its kernel thread in the kernel (futex), which is what wiring asks for.
 * weft_yield() calls sched_yield(); weft_vp_self() returns -1 (it is on no VP);
 * weft_thread_block() (custom synchronization objects) must not be called while wired
 * (asserted in checked builds). Event callbacks (weft/hook.h) see it block when it
 * leaves its VP and unblock when it comes back; nothing in between.
 *
 * A thread must unwire before its function returns (weft_exit() unwires it first; a
 * return from a wired thread is undefined, asserted in checked builds). weft_shutdown()
 * called by a wired main weft thread unwires it first; while another thread is wired,
 * weft_shutdown() waits for it like for any running thread.
 *
 * Kernel threads come from the weft_blocking pool (weft/io.h): a wire takes an idle
 * pool thread, or starts one when none is idle; unwiring gives it back to the pool as
 * an idle thread, which the next wire or weft_blocking job reuses and which exits
 * after the pool's idle time (weft_blocking_limits) like any pool thread. The pool's
 * limit does not apply to wires: a wire never waits for a pool thread. When no idle
 * thread is there, it starts one even with the pool at its limit (every wired thread
 * has a kernel thread of its own, as before the pool), and it fails only if the
 * system refuses a new kernel thread. Wired threads do not count against the limit
 * either, so they never take capacity from weft_blocking jobs; weft_blocking_threads()
 * counts them (they are pool threads), and once unwired a thread above the limit
 * exits instead of staying idle.
 * Cost: a wire that reuses an idle pool thread costs two kernel hand-offs (a
 * condition-variable wake-up of the pool thread, a dispatch-queue wake-up back); one
 * that starts a thread also costs the thread's creation (tens of microseconds).
 * A wired thread costs one kernel thread and does not count in weft_vp_count().
 */
#ifndef WEFT_WIRE_H
#define WEFT_WIRE_H
#include "weft/common.h"
#include "weft/error.h"
#ifdef __cplusplus
extern "C" {
#endif
/* weft_wire() binds the calling weft thread to a kernel thread of its own and returns
 * running there. The kernel thread is an idle thread of the weft_blocking pool, or a
 * new pool thread when none is idle, started even when the pool is at its limit
 * (weft_blocking_limits): a wire never waits for a pool thread and is never queued
 * behind weft_blocking jobs. A wired caller is left as it is (returns 0). Callable
 * from a weft thread (the main weft thread included). Always switches the caller
 * (unless already wired). Errors: WEFT_ENOTINIT (weft not running), WEFT_EPERM (a
 * plain OS thread), WEFT_ESYS or WEFT_ENOMEM (no idle pool thread was to spare and a
 * new one could not be started: the system's EAGAIN or ENOMEM). On error the caller
 * stays on its VP and the pool is unchanged. */
WEFT_API int weft_wire(void);
/* weft_unwire() gives the calling wired thread back to the VPs: it is made ready
 * through its bundle's scheduler and returns running on a VP; its kernel thread goes
 * back to the weft_blocking pool as an idle thread (or exits, if the pool is above
 * its limit without it).
 * An unwired weft thread is left as it is (returns 0). May switch the caller.
 * Errors: WEFT_ENOTINIT, WEFT_EPERM (a plain OS thread that is not a wired weft
 * thread). */
WEFT_API int weft_unwire(void);
/* weft_is_wired() returns 1 if the caller is a wired weft thread, else 0. Callable
 * from anywhere; never switches. */
WEFT_API int weft_is_wired(void);
/* weft_wired_count() returns how many threads are wired now (a snapshot). */
WEFT_API int weft_wired_count(void);
#ifdef __cplusplus
}
#endif
#endif
