/* weft/sched.h - bundles and the public scheduler interface (papers/001 3.3-3.4, 5.2).
 *
 * Every thread belongs to a bundle; a bundle's scheduler is a table of eight event
 * handlers. The runtime (the "kernel") owns one dispatch queue per virtual
 * processor (VP) and runs the threads it finds there; schedulers decide which
 * threads go into which dispatch queue, using the kernel services below. The
 * built-in default scheduler (weft_sched_default) is written against exactly this
 * interface (src/sched/default.c).
 *
 * Handler contract (all handlers):
 * - They run on a VP's kernel thread, in the context that raised the event: on the
 *   stack of a weft thread, on a VP's idle context, or (thread_created and
 *   thread_unblocked only) on a plain OS thread that created or woke a thread, in
 *   which case weft_sched_vp_self() returns NULL.
 * - They must not block, yield, or call anything documented as "may switch".
 *   They may take short spinlocks of their own and may call the kernel services.
 * - A NULL handler is a no-op, except that thread_created and thread_unblocked
 *   must be set (weft_bundle_create() checks).
 * - Handlers of one bundle run concurrently on several VPs: scheduler state shared
 *   between VPs needs its own synchronization.
 * - A thread passed to thread_created/thread_unblocked is owned by the scheduler
 *   until it hands it to weft_sched_enqueue(); it must be handed over exactly once.
 *   Its context is fully saved: it may be run on any VP.
 *
 * The eight events:
 *   thread_created(b, t)     t was created in b and has never run; put it on a
 *                            dispatch queue now or later.
 *   thread_started(b, t)     t is about to run for the first time (its stack is bound).
 *   thread_terminated(b, t)  t has finished; it is off every queue. Do not keep it.
 *   thread_blocked(b, t)     t blocked (in join, a synchronization object, ...); its
 *                            context is saved; the kernel does not queue it.
 *   thread_unblocked(b, t)   t became ready again (unblocked, or it yielded, except under
 *                            WEFT_SCHED_DISPATCH_ONLY); put it
 *                            on a dispatch queue.
 *   bundle_created(b, child) child was created with parent b (raised on the parent).
 *   bundle_terminated(b, child) child was destroyed (raised on the parent).
 *   processor_idle(b, vp)    vp's dispatch queue is empty; return a ready thread for
 *                            vp to run (removed from wherever the scheduler kept it),
 *                            or NULL. Also raised on the caller's own bundle when a
 *                            thread of a non-root bundle yields on a VP whose dispatch
 *                            queue is empty (the thread then switches to the result). Raised repeatedly while vp polls and once more
 *                            before it sleeps; it must be cheap and must not sleep.
 *                            A VP sleeps when every bundle's processor_idle returned
 *                            NULL; see weft_sched_notify() for waking it.
 */
#ifndef WEFT_SCHED_H
#define WEFT_SCHED_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/thread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_vp weft_vp_t;  /* opaque: a virtual processor */

typedef struct weft_sched_ops {
  void (*thread_created)(weft_bundle_t *b, weft_thread_t *t);
  void (*thread_started)(weft_bundle_t *b, weft_thread_t *t);
  void (*thread_terminated)(weft_bundle_t *b, weft_thread_t *t);
  void (*thread_blocked)(weft_bundle_t *b, weft_thread_t *t);
  void (*thread_unblocked)(weft_bundle_t *b, weft_thread_t *t);
  void (*bundle_created)(weft_bundle_t *b, weft_bundle_t *child);
  void (*bundle_terminated)(weft_bundle_t *b, weft_bundle_t *child);
  weft_thread_t *(*processor_idle)(weft_bundle_t *b, weft_vp_t *vp);
  unsigned flags;   /* WEFT_SCHED_* below; 0 if unsure */
} weft_sched_ops_t;

/* ops.flags: the scheduler never keeps a ready thread to itself: thread_created and
 * thread_unblocked always hand the thread to weft_sched_enqueue() before they
 * return. The kernel then skips the weft_sched_notify() it otherwise makes after
 * those events (a full memory fence each), since weft_sched_enqueue() already wakes
 * a sleeping VP. Getting this wrong can leave a VP asleep while a thread waits.
 * It also lets the bundle's threads yield as the root bundle's do: a yield moves the
 * caller to the tail of its VP's dispatch queue without raising thread_unblocked. */
#define WEFT_SCHED_DISPATCH_ONLY 1u

/* The default scheduler: per-VP dispatch queues, new and unblocked threads go to
 * the local VP (or the affinity VP), idle VPs steal from a random victim. */
WEFT_API extern const weft_sched_ops_t weft_sched_default;

/* ---- bundles ---------------------------------------------------------------- */

/* weft_bundle_root() returns the root bundle (default scheduler), or NULL when weft
 * is not running. */
WEFT_API weft_bundle_t *weft_bundle_root(void);

/* weft_bundle_create() creates a bundle under `parent` (NULL: the root) scheduled by
 * `ops` (copied: the table need not outlive the call), with scheduler data `data`,
 * and raises bundle_created on the parent. Callable from a weft thread or a plain
 * OS thread; never switches. Errors: WEFT_EINVAL (out or ops NULL, or a required
 * handler NULL); WEFT_ENOMEM; WEFT_ENOTINIT. */
WEFT_API int weft_bundle_create(weft_bundle_t **out, weft_bundle_t *parent,
                                const weft_sched_ops_t *ops, void *data);

/* weft_bundle_destroy() destroys an empty bundle (no live threads, no children) and
 * raises bundle_terminated on its parent. Errors: WEFT_EINVAL (NULL or the root);
 * WEFT_EBUSY (not empty); WEFT_ENOTINIT. */
WEFT_API int weft_bundle_destroy(weft_bundle_t *b);

/* weft_bundle_data() returns the scheduler data given at creation. */
WEFT_API void *weft_bundle_data(const weft_bundle_t *b);

/* weft_thread_bundle() returns the bundle t belongs to. */
WEFT_API weft_bundle_t *weft_thread_bundle(const weft_thread_t *t);

/* ---- kernel services for schedulers ------------------------------------------ */

/* weft_sched_enqueue() puts ready thread t at the tail of vp's dispatch queue and,
 * if t may otherwise wait while a VP sleeps, wakes a sleeping VP. Never switches;
 * callable from handlers and from any thread. */
WEFT_API void weft_sched_enqueue(weft_vp_t *vp, weft_thread_t *t);

/* weft_sched_notify() tells the kernel that a ready thread may be waiting in a
 * scheduler's own structure (not in a dispatch queue): if a VP sleeps and none is
 * polling, one is woken, and it raises processor_idle. The kernel calls it itself
 * after thread_created and thread_unblocked of every non-default bundle; a scheduler
 * calls it when it makes a thread available at any other time. The thread must be
 * findable by processor_idle before the call. Never switches; callable anywhere. */
WEFT_API void weft_sched_notify(void);

/* weft_sched_steal() removes and returns the thread at the head of vp's dispatch
 * queue, or NULL if it is empty. Never switches; callable from handlers. */
WEFT_API weft_thread_t *weft_sched_steal(weft_vp_t *vp);

/* weft_sched_steal_half() moves the older half of victim's dispatch queue (at most
 * 64 threads) to the tail of to's, except the oldest, which it removes and returns
 * for the caller to run; NULL if victim's queue is empty. With victim == to it is a
 * plain dequeue. Never switches; callable from handlers. */
WEFT_API weft_thread_t *weft_sched_steal_half(weft_vp_t *victim, weft_vp_t *to);

/* weft_sched_bind_stack() binds t's stack now instead of when it first runs (eager
 * binding). t must not have run. Errors: WEFT_ENOMEM; WEFT_EINVAL (t NULL). */
WEFT_API int weft_sched_bind_stack(weft_thread_t *t);

/* weft_sched_vp_self() returns the caller's VP, or NULL on a plain OS thread. */
WEFT_API weft_vp_t *weft_sched_vp_self(void);

/* weft_sched_vp() returns VP number i (0 <= i < weft_vp_count()), else NULL. */
WEFT_API weft_vp_t *weft_sched_vp(int i);

/* weft_sched_vp_index() returns vp's number. */
WEFT_API int weft_sched_vp_index(const weft_vp_t *vp);

/* weft_sched_thread_affinity() returns t's affinity hint (-1: none). */
WEFT_API int weft_sched_thread_affinity(const weft_thread_t *t);

/* weft_sched_thread_data() returns the address of a word in t's control block that
 * belongs to t's scheduler (local storage for the scheduler: a link, a priority).
 * It is zero when t is created. */
WEFT_API uintptr_t *weft_sched_thread_data(weft_thread_t *t);

/* ---- blocking and unblocking (for synchronization objects) --------------------- */

/* weft_thread_block() blocks the calling weft thread. After its context is saved
 * and the VP has switched away, release(arg) runs (on the next thread's stack),
 * and only then may another thread see the caller: release typically publishes the
 * caller on a wait list and unlocks it (papers/002 3). Raises thread_blocked. Returns
 * when some thread calls weft_thread_unblock() on the caller. Must be called from a
 * weft thread; release must not block. May switch (always does). */
WEFT_API void weft_thread_block(void (*release)(void *arg), void *arg);

/* weft_thread_unblock() makes t, blocked by weft_thread_block(), ready again by
 * raising thread_unblocked on its bundle. Callable from any thread and from
 * handlers. Unblocking a thread that is not blocked is undefined (asserted in
 * checked builds). Never switches. */
WEFT_API void weft_thread_unblock(weft_thread_t *t);

#ifdef __cplusplus
}
#endif
#endif
