/* weft/vp.h - virtual processors and affinity, do-when-idle functions
 * (Active Threads §3.1 and appendix).
 *
 * Two kinds of processor: a VP is one of weft's kernel threads (0 .. weft_vp_count()-1,
 * the "physical" processors of Active Threads); a virtual processor is a number of any
 * size a thread carries as its affinity. The default scheduler maps virtual processor
 * v onto VP (v mod nvps); affinity schedulers (weft/schedlib.h) may map them in blocks.
 */
#ifndef WEFT_VP_H
#define WEFT_VP_H

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* weft_set_affinity() gives the calling weft thread virtual processor `vproc`
 * (-1: none) and, under the default scheduler, moves it now to the VP that number
 * maps to: it is queued there, and usually returns running there, but an idle VP
 * may take it first, as with any thread's affinity hint (check weft_vp_self());
 * under other schedulers the new affinity is
 * seen by the scheduler the next time the thread is made ready. May switch.
 * Errors: WEFT_EINVAL (vproc < -1), WEFT_EPERM (not a weft thread). */
WEFT_API int weft_set_affinity(int vproc);

/* weft_get_affinity() returns the calling weft thread's virtual processor (-1: none,
 * or not a weft thread). Never switches. */
WEFT_API int weft_get_affinity(void);

/* weft_cpu_self() returns the operating-system CPU the caller runs on now
 * (sched_getcpu), or -1 if unknown. With weft_vp_self() (its VP) and
 * weft_get_affinity() (its virtual processor) it says where a thread is. */
WEFT_API int weft_cpu_self(void);

/* The most do-when-idle functions at once. */
#define WEFT_IDLE_FUNCS_MAX 8

/* weft_idle_func_add() registers fn(arg) to be called by every idle VP on each of
 * its polling rounds (for example to poll a network device and make threads ready).
 * While any is registered an idle VP sleeps in the kernel at most 1 ms at a time, so
 * fn keeps being called. fn runs on a VP's idle loop (no weft thread runs there:
 * weft_self() is NULL), and weft_shutdown() calls it too while it waits, on the main
 * weft thread (weft_self() is that thread); either way it must not block or switch
 * (weft_shutdown() from it answers WEFT_EPERM); it may create or unblock threads. The
 * table is emptied by weft_shutdown().
 * Errors: WEFT_EINVAL (fn NULL), WEFT_EAGAIN (full), WEFT_ENOTINIT. */
WEFT_API int weft_idle_func_add(void (*fn)(void *arg), void *arg);

/* weft_idle_func_remove() unregisters the first entry equal to (fn, arg). A call
 * already started on an idle VP may still finish after it returns.
 * Errors: WEFT_EINVAL (not registered). */
WEFT_API int weft_idle_func_remove(void (*fn)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif
