/* weft/sched.h - bundles and the public scheduler interface (Active Threads §3.3-3.4, §5.2).
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
 * - They must not block, yield, or call anything documented as "may switch"
 *   (except weft_sched_run_first() at the end of thread_created).
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
 *                            thread of a non-root bundle that is not DISPATCH_ONLY
 *                            yields, joins or finishes on a VP whose dispatch queue is
 *                            empty (the thread then switches to the result).
 *                            Raised repeatedly while vp polls and once more before it
 *                            sleeps; it must be cheap and must not sleep. A VP sleeps
 *                            when every bundle's processor_idle returned NULL; see
 *                            weft_sched_notify() for waking it.
 *
 * Where events go (the bundle tree, Active Threads §3.4). Thread events go to the
 * thread's bundle; bundle_created/bundle_terminated go to the parent. An idle VP
 * raises processor_idle in this order, and stops at the first thread it gets:
 *   1. the focus bundle (weft_bundle_set_focus), if it is not the root. Its handler
 *      may serve the event itself or pass it up or down the tree with
 *      weft_sched_idle_pass() (to weft_bundle_parent(b), or to the children from
 *      weft_bundle_first_child(b) / weft_bundle_next_sibling());
 *   2. the root bundle (the default scheduler: steal from other dispatch queues);
 *   3. every other bundle, newest first (the sweep).
 * The sweep is the kernel's guarantee that a thread a scheduler holds is found
 * before VPs sleep, whatever the focus does; the focus decides who is asked first,
 * i.e. which bundle gets idle processors while several have work. A bundle may be
 * asked twice in one round (as the focus and in the sweep). Stopped bundles
 * (weft_bundle_stop) are skipped everywhere. processor_idle always runs with the
 * kernel's bundle lock held (so the tree does not change under a handler and no
 * bundle it can reach is destroyed meanwhile). It is held shared: handlers raised on
 * different VPs run at the same time, and a scheduler guards its own state, as it
 * must for its other handlers anyway. The one exception is a leaf scheduler's
 * own-bundle question (WEFT_SCHED_IDLE_LEAF below), raised without the lock. A handler
 * must not create, destroy, focus, stop or continue bundles or read the focus (caught
 * in checked builds), and must not hold a lock of its own while it calls
 * weft_sched_idle_pass().
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
 * thread_unblocked always hand the thread to weft_sched_enqueue() or
 * weft_sched_push() (or run it with weft_sched_run_first()) before they return. The kernel then skips the weft_sched_notify() it otherwise makes after
 * those events (a full memory fence each), since weft_sched_enqueue() already wakes
 * a sleeping VP. Getting this wrong can leave a VP asleep while a thread waits.
 * It also lets the bundle's threads yield as the root bundle's do: a yield moves the
 * caller to the back of its VP's dispatch queue without raising thread_unblocked. */
#define WEFT_SCHED_DISPATCH_ONLY 1u

/* The declared fast path (Active Threads: a user scheduler should cost little more than
 * the built-in one). Each flag declares what a handler does when it is raised on a VP;
 * the kernel then does exactly that itself, inlined, instead of calling the handler, as
 * it does for the root bundle's default scheduler. Off a VP (a plain OS or wired thread
 * creating or waking a thread) the handler is still called. A handler that does anything
 * else on a VP (other placement, bookkeeping) must not declare its flag.
 *
 * WEFT_SCHED_LOCAL_CREATE: on a VP, thread_created(b, t) is exactly
 *   weft_sched_enqueue(weft_sched_vp_self(), t): t goes to the back of the creator's
 *   VP's dispatch queue.
 * WEFT_SCHED_LOCAL_READY: on a VP, thread_unblocked(b, t) is exactly
 *   weft_sched_enqueue(weft_sched_vp_self(), t) (the waker's, or for a yield the
 *   yielder's, VP). If the bundle also has no thread_started, thread_terminated and
 *   thread_blocked handlers, its threads take the root bundle's inlined paths for every
 *   event after their creation: a yield rotates the dispatch queue, a finishing thread
 *   hands its VP straight to a waiting joiner, a join runs a joinee found at the front
 *   of the caller's dispatch queue in the caller's place (each of these is an enqueue
 *   at the back followed at once by the dispatch of that thread, in the order the root
 *   bundle's threads see).
 * Either flag implies WEFT_SCHED_DISPATCH_ONLY for the event it covers when it is raised
 * on a VP (no weft_sched_notify() follows). weft_bundle_create() rejects unknown flags.
 *
 * Unless the bundle is DISPATCH_ONLY (it keeps no thread), a thread of a non-root bundle
 * that yields on a VP whose dispatch queue is empty, or (while no focus is set: see
 * weft_bundle_set_focus) blocks in weft_join or finishes there, asks its own bundle's
 * processor_idle
 * for the thread to run next (under the kernel's bundle lock, not while the bundle is
 * stopped) before the VP goes idle: a scheduler that keeps threads to itself hands the
 * next one over directly, without a round through the idle loop. */
#define WEFT_SCHED_LOCAL_CREATE 2u
#define WEFT_SCHED_LOCAL_READY 4u
/* WEFT_SCHED_IDLE_LEAF: processor_idle touches only the scheduler's own state (under its
 * own locks): it never walks the bundle tree (weft_bundle_first_child, ...), passes the
 * event on (weft_sched_idle_pass) or asks about stopping. For the own-bundle question
 * above the kernel then raises it without the bundle lock: the bundle cannot go away
 * (the asking thread still counts in it), and a stop still takes effect exactly
 * (weft_bundle_stop waits until no such question is under way; docs/schedulers.md).
 * Idle VPs' questions (focus, sweep, last look) still hold the lock. The scheduler
 * library's FIFO, LIFO and PRIORITY schedulers declare it. */
#define WEFT_SCHED_IDLE_LEAF 8u
/* Every flag above (weft_bundle_create rejects others with WEFT_EINVAL). */
#define WEFT_SCHED_FLAGS_ALL \
  (WEFT_SCHED_DISPATCH_ONLY | WEFT_SCHED_LOCAL_CREATE | WEFT_SCHED_LOCAL_READY | WEFT_SCHED_IDLE_LEAF)

/* The default scheduler: per-VP dispatch queues; new threads go to the front of the
 * local VP's queue (or the affinity VP's), unblocked ones to the back; idle VPs
 * steal the back half of a random victim's queue (docs/schedulers.md). */
WEFT_API extern const weft_sched_ops_t weft_sched_default;

/* ---- bundles ---------------------------------------------------------------- */

/* weft_bundle_root() returns the root bundle (default scheduler), or NULL when weft
 * is not running. */
WEFT_API weft_bundle_t *weft_bundle_root(void);

/* weft_bundle_create() creates a bundle under `parent` (NULL: the root) scheduled by
 * `ops` (copied: the table need not outlive the call), with scheduler data `data`,
 * and raises bundle_created on the parent. Callable from a weft thread or a plain
 * OS thread; never switches. Errors: WEFT_EINVAL (out or ops NULL, a required
 * handler NULL, or an unknown bit in ops->flags); WEFT_ENOMEM; WEFT_ENOTINIT. */
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

/* ---- the bundle tree, the focus, stop and continue -------------------------------
 * The tree accessors read links that change only in weft_bundle_create/destroy: call
 * them from a processor_idle handler (the kernel holds the bundle lock then) or when
 * no bundle below b is being created or destroyed. Never switch; never fail. */

/* weft_bundle_parent() returns b's parent (NULL for the root, or for b NULL). */
WEFT_API weft_bundle_t *weft_bundle_parent(const weft_bundle_t *b);

/* weft_bundle_first_child() returns b's newest child (NULL: none, or b NULL). */
WEFT_API weft_bundle_t *weft_bundle_first_child(const weft_bundle_t *b);

/* weft_bundle_next_sibling() returns the next older child of b's parent, or NULL. */
WEFT_API weft_bundle_t *weft_bundle_next_sibling(const weft_bundle_t *b);

/* weft_bundle_set_focus() makes b (NULL: the root) the focus bundle, whose
 * processor_idle idle VPs raise first (see "Where events go" above). When the focus
 * bundle is destroyed, its parent becomes the focus. Callable from a weft thread or
 * a plain OS thread, not from a handler; never switches. Errors: WEFT_ENOTINIT;
 * WEFT_EINVAL (b is not a live bundle). */
WEFT_API int weft_bundle_set_focus(weft_bundle_t *b);

/* weft_bundle_focus() returns the focus bundle (the root unless set), or NULL when
 * weft is not running. Not from a handler. Never switches. */
WEFT_API weft_bundle_t *weft_bundle_focus(void);

/* weft_bundle_stop() stops dispatching new threads from b and every bundle below it
 * (Active Threads appendix, at_stop): once it returns, processor_idle is not raised on
 * them (by idle VPs, by a yield of one of their threads, or through
 * weft_sched_idle_pass) until weft_bundle_continue(), so the threads their
 * schedulers keep to themselves are not dispatched. Not affected: threads running,
 * and threads already on a dispatch queue (Active Threads §3.3: SCHEDULED). What is held
 * back thus follows where a scheduler keeps ready threads: weft/schedlib.h FIFO/LIFO
 * keep new threads (a woken thread goes to a dispatch queue and resumes), so no new
 * thread starts; PRIORITY keeps every ready thread, so a thread that blocks (or
 * yields to a dispatched thread) waits too; a scheduler that never keeps one (the default, WEFT_SCHED_DISPATCH_ONLY)
 * holds nothing back.
 * Stopping the root stops every other bundle; the root's own handler, which only
 * moves dispatched threads between VPs, keeps running. A handler call already under
 * way when stop is called may still return a thread (it finishes before stop
 * returns). Stopping a stopped bundle changes nothing. Callable from a weft thread
 * or a plain OS thread, not from a handler; never switches.
 * Errors: WEFT_ENOTINIT; WEFT_EINVAL (b NULL or not a live bundle). */
WEFT_API int weft_bundle_stop(weft_bundle_t *b);

/* weft_bundle_continue() undoes weft_bundle_stop(b) and wakes a sleeping VP so that
 * the held-back threads are found. b stays stopped if a bundle above it is stopped.
 * Continuing a bundle that is not stopped changes nothing. Same callers and errors
 * as weft_bundle_stop(). */
WEFT_API int weft_bundle_continue(weft_bundle_t *b);

/* weft_bundle_is_stopped() returns 1 if b or a bundle above it is stopped, else 0
 * (also for b NULL or weft not running). Callable from anywhere, handlers included.
 * Never switches. */
WEFT_API int weft_bundle_is_stopped(const weft_bundle_t *b);

/* ---- kernel services for schedulers ------------------------------------------ */

/* How deep weft_sched_idle_pass() calls may nest on one VP (a cycle of passes ends). */
#define WEFT_SCHED_PASS_MAX 16

/* weft_sched_idle_pass() passes an idle event on: raises `to`'s processor_idle for
 * vp and returns its thread (the caller's processor_idle returns it in turn). NULL if
 * to or vp is NULL, to has no processor_idle or is stopped, or passes already nest
 * WEFT_SCHED_PASS_MAX deep on this VP. Call it from a processor_idle handler,
 * holding no lock of your own. Never switches. */
WEFT_API weft_thread_t *weft_sched_idle_pass(weft_bundle_t *to, weft_vp_t *vp);

/* weft_sched_steal_note() tells the kernel that the caller's VP took n threads (the
 * first being `first`) from victim's share of a scheduler's own structure (per-VP
 * run lists): it counts a steal in weft_debug_stats() and raises the STEAL event
 * (weft/hook.h) for the tracer. weft_sched_steal() and weft_sched_steal_half() note
 * their steals themselves. Ignored off a VP, for victim NULL or the caller's own VP,
 * or n <= 0. Never switches; callable from handlers. */
WEFT_API void weft_sched_steal_note(weft_vp_t *victim, int n, weft_thread_t *first);

/* ---- kernel services for schedulers (dispatch) ---------------------------------- */

/* A dispatch queue is a deque. Its VP runs threads from the front; thieves
 * (weft_sched_steal_half) take from the back. weft_sched_enqueue() adds at the back
 * (a queue only ever fed by it is FIFO), weft_sched_push() at the front (the default
 * scheduler's new threads: the VP runs what it created most recently first, and
 * idle VPs steal the oldest; docs/schedulers.md). A root-bundle thread woken while
 * its waker's queue is empty may wait in the VP's hand-off slot instead, which acts
 * as the front of the empty queue: the steal functions below take it too, and an
 * enqueue or push moves it into the queue first (docs/design.md, hand-off on wake). */

/* weft_sched_enqueue() puts ready thread t at the back of vp's dispatch queue (it
 * runs after every thread queued there now) and, if t may otherwise wait while a VP
 * sleeps, wakes a sleeping VP. Never switches; callable from handlers and from any
 * thread. */
WEFT_API void weft_sched_enqueue(weft_vp_t *vp, weft_thread_t *t);

/* weft_sched_push() puts ready thread t at the front of vp's dispatch queue (vp runs
 * it next, and a thief takes it last), waking a VP as weft_sched_enqueue() does.
 * Never switches; callable from handlers and from any thread. */
WEFT_API void weft_sched_push(weft_vp_t *vp, weft_thread_t *t);

/* weft_sched_run_first() is for a thread_created handler that creates work-first: it
 * runs t, the thread the handler was given, at once on the caller's VP, and queues
 * the calling thread (the creator) at the front of that VP's dispatch queue, directly,
 * not through its bundle's scheduler (no thread_unblocked is raised for it). It
 * returns when the creator is resumed, possibly on another VP; t then counts as
 * handed over. The one handler call that may switch: make it the handler's last
 * action, holding no lock. t must not have run (it may have a stack bound).
 * Errors, after which the handler still owns t and must queue it: WEFT_EPERM (the
 * event was raised on a plain OS thread or a wired thread); WEFT_ENOMEM (no stack
 * could be bound now); WEFT_EINVAL (t NULL). */
WEFT_API int weft_sched_run_first(weft_thread_t *t);

/* weft_sched_notify() tells the kernel that a ready thread may be waiting in a
 * scheduler's own structure (not in a dispatch queue): if a VP sleeps and none is
 * polling, one is woken, and it raises processor_idle. The kernel calls it itself
 * after thread_created and thread_unblocked of every non-default bundle; a scheduler
 * calls it when it makes a thread available at any other time. The thread must be
 * findable by processor_idle before the call. Never switches; callable anywhere. */
WEFT_API void weft_sched_notify(void);

/* weft_sched_steal() removes and returns the thread at the front of vp's dispatch
 * queue (the one vp would run next: its hand-off slot's, if it holds one), or NULL
 * if it is empty. Never switches;
 * callable from handlers. */
WEFT_API weft_thread_t *weft_sched_steal(weft_vp_t *vp);

/* weft_sched_steal_half() takes the back half of victim's dispatch queue (at most 64
 * threads: the ones victim would run last, i.e. the oldest it created and the ones
 * made ready again with weft_sched_enqueue): it removes and returns the very back
 * one for the caller to run, and moves the others, in their order, to the back of
 * to's queue. With victim's queue empty it takes victim's hand-off slot's thread,
 * if any, else returns NULL. With victim == to it is a plain
 * dequeue from the front. Never switches; callable from handlers. */
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
 * caller on a wait list and unlocks it (C-Threads §3). Raises thread_blocked. Returns
 * when some thread calls weft_thread_unblock() on the caller. Must be called from a
 * weft thread; release must not block, and runs as the next thread (weft_self() is
 * not the caller there): weft_threadlist_yield_onto (weft/threadlist.h) says what it
 * may release. May switch (always does). */
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
