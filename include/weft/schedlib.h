/* weft/schedlib.h - a library of bundle schedulers, each written against the public
 * scheduler interface (weft/sched.h; the FIFO/LIFO handlers read three of its values
 * inline, docs/schedulers.md): Active Threads §5.4 and §8.1.
 *
 * Kinds (docs/schedulers.md has each policy in full):
 *
 *   FIFO / LIFO     new threads wait in a run list per VP, handed out by
 *                   processor_idle in FIFO (oldest first) or LIFO (newest first)
 *                   order; an idle VP whose own list is empty steals the oldest
 *                   thread of another VP's list. Threads that become ready again
 *                   (unblocked, yielded) go to a VP's dispatch queue, which the
 *                   kernel runs before asking processor_idle: started work first.
 *   + EAGER         the stack is bound in thread_created (weft_sched_bind_stack);
 *                   otherwise (lazy) the kernel binds it when the thread first runs.
 *   + AFFINITY      memory-conscious scheduling: a thread with affinity a >= 0 (a
 *                   virtual processor, any size) is placed on VP (a mod nvps), new
 *                   and woken alike, so threads of one virtual processor form a group
 *                   on one VP; a thief takes a whole group (the oldest thread and the
 *                   threads of the same virtual processor queued right behind it, at
 *                   most 32). Without AFFINITY the hint is ignored: threads go to the
 *                   VP that created or woke them.
 *   PRIORITY        non-preemptive priorities: every ready thread of the bundle waits
 *                   in one central heap under one spinlock; processor_idle on any VP
 *                   returns the highest priority, FIFO among equals.
 *   WORK_FIRST      the default scheduler's depth-first policy with work-first
 *                   creation (MassiveThreads, Cilk): a thread created by a weft thread
 *                   on a VP runs at once there and the creator waits at the front of
 *                   the VP's dispatch queue, where it resumes when the new thread
 *                   blocks or finishes unless an idle VP steals it first. Woken
 *                   threads go to the back of the waker's dispatch queue; idle VPs
 *                   steal through the root's handler. Keeps nothing to itself
 *                   (WEFT_SCHED_DISPATCH_ONLY). Per thread, weft_attr_t.work_first
 *                   asks the same of the root bundle.
 *
 * Using one: weft_schedlib_bundle_create(&b, NULL, WEFT_SCHED_LIFO | WEFT_SCHED_LAZY)
 * then create threads with attr.bundle = b; weft_schedlib_bundle_destroy(b) once they
 * have finished. Or, to wrap or combine the handlers, weft_schedlib_data_create() and
 * weft_bundle_create(&b, parent, weft_schedlib_ops(kind), data) yourself.
 *
 * Yield: when the caller's VP dispatch queue is empty, weft_yield() asks the caller's
 * bundle (processor_idle) for a thread, so a yield reaches the threads these
 * schedulers keep in their own structures (FIFO/LIFO threads that have never run;
 * every PRIORITY thread). When the dispatch queue is not empty, a yield runs its head.
 */
#ifndef WEFT_SCHEDLIB_H
#define WEFT_SCHEDLIB_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/sched.h"
#include "weft/thread.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A scheduler kind: FIFO or LIFO, ORed with LAZY or EAGER and optionally AFFINITY
 * (the eight variants of Active Threads §8.1), or PRIORITY alone, or WORK_FIRST alone. */
typedef enum weft_schedlib_kind {
  WEFT_SCHED_FIFO = 0,
  WEFT_SCHED_LIFO = 1,
  WEFT_SCHED_LAZY = 0,
  WEFT_SCHED_EAGER = 2,
  WEFT_SCHED_AFFINITY = 4,
  WEFT_SCHED_PRIORITY = 8,
  WEFT_SCHED_WORK_FIRST = 16,
} weft_schedlib_kind_t;

/* weft_schedlib_kind_valid() returns 1 if kind is one of the ten kinds above (any
 * combination of LIFO, EAGER, AFFINITY; or PRIORITY alone; or WORK_FIRST alone),
 * else 0. Never fails. */
WEFT_API int weft_schedlib_kind_valid(unsigned kind);

/* weft_schedlib_kind_name() returns a static name such as "lifo_lazy_affinity" or
 * "priority" or "work_first", or "invalid". Never fails; callable from anywhere. */
WEFT_API const char *weft_schedlib_kind_name(unsigned kind);

/* weft_schedlib_ops() returns the handler table of `kind` (static storage), or NULL
 * if kind is not valid. Its handlers expect the bundle's data to come from
 * weft_schedlib_data_create() with the same kind. Callable from anywhere. */
WEFT_API const weft_sched_ops_t *weft_schedlib_ops(unsigned kind);

/* weft_schedlib_data_create() allocates the scheduler state of one bundle of `kind`
 * (per-VP run lists sized for the current weft_vp_count(), the priority heap, or
 * for WORK_FIRST just its kind) and
 * stores it in *out. Callable from a weft thread or a plain OS thread while weft runs;
 * never switches. Errors: WEFT_EINVAL (out NULL, kind not valid); WEFT_ENOTINIT;
 * WEFT_ENOMEM. */
WEFT_API int weft_schedlib_data_create(unsigned kind, void **out);

/* weft_schedlib_data_destroy() frees state from weft_schedlib_data_create(). Only
 * once no bundle uses it (its bundle destroyed). NULL is ignored. Never switches. */
WEFT_API void weft_schedlib_data_destroy(void *data);

/* weft_schedlib_bundle_create() creates a bundle under `parent` (NULL: the root)
 * scheduled by `kind`: weft_schedlib_data_create() + weft_bundle_create(). Callable
 * from a weft thread or a plain OS thread; never switches. Errors: WEFT_EINVAL (out
 * NULL, kind not valid); WEFT_ENOTINIT; WEFT_ENOMEM. On error *out is untouched. */
WEFT_API int weft_schedlib_bundle_create(weft_bundle_t **out, weft_bundle_t *parent,
                                         unsigned kind);

/* weft_schedlib_bundle_destroy() destroys a bundle made by weft_schedlib_bundle_create()
 * and frees its state. Never switches. Errors: WEFT_EINVAL (NULL or the root);
 * WEFT_EBUSY (live threads or children: nothing is freed); WEFT_ENOTINIT. */
WEFT_API int weft_schedlib_bundle_destroy(weft_bundle_t *b);

/* ---- the priority scheduler ------------------------------------------------------ */

/* weft_schedlib_create_priority() is weft_create() (same arguments, errors and
 * contract: callable from a weft thread or a plain OS thread, never switches) for a
 * thread of a PRIORITY bundle (attr->bundle), which enters the ready heap with
 * priority `prio` (higher runs first). Threads created with plain weft_create() get
 * their creator's priority if the creator is in the same bundle, else 0. */
WEFT_API int weft_schedlib_create_priority(weft_thread_t **out, const weft_attr_t *attr,
                                           int prio, weft_thread_fn fn, void *arg);

/* weft_schedlib_set_priority() sets the priority of t, a thread of a PRIORITY bundle.
 * It takes effect the next time t becomes ready (unblocked or yielding); a thread
 * already waiting in the heap keeps its place. Call it from t itself, or while t is
 * blocked, ordered before the wake-up by the same synchronization (the word is a plain
 * field of t's control block). Never switches. Errors: WEFT_EINVAL (t NULL). */
WEFT_API int weft_schedlib_set_priority(weft_thread_t *t, int prio);

/* weft_schedlib_priority() returns t's priority (0 for a thread never given one).
 * Same rules as weft_schedlib_set_priority for who may call it. */
WEFT_API int weft_schedlib_priority(weft_thread_t *t);

#ifdef __cplusplus
}
#endif
#endif
