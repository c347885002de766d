/* weft/threadlist.h - first-class thread lists with user-defined get and put
 * (OpenThreads §3.1.2, §3.2.2: otm_install_queue, ot_thread_yield_onto).
 *
 * A thread list holds threads that are not running: ready threads of a scheduler
 * (a run list) or threads waiting for something (a wait list). Its policy is its
 * pair of operations: put(list, t) adds t, get(list) removes and returns the thread
 * the policy picks (or NULL). FIFO and LIFO are built in; any other order (priority,
 * deadline, per-VP) is a user ops table.
 *
 * Link space. Each thread has WEFT_THREADLIST_LINK_MAX bytes of link space in its
 * control block (weft_threadlist_link()), 8-byte aligned, which the one list the
 * thread is on owns: a list declares the bytes it needs (link_size) when it is
 * created, and asking for more than WEFT_THREADLIST_LINK_MAX is WEFT_EINVAL. The
 * space is not allocated per list or per put, so put and get never fail for lack
 * of memory. A thread is on at most one thread list at a time (the model of
 * OpenThreads: every thread not running is on exactly one list); putting a thread
 * on a second list before it was taken off the first is undefined.
 *
 * Locking. Every list has its own spinlock, taken by weft around each call of put
 * and get: the operations never run concurrently on one list, and they may be
 * called from any VP and from plain OS threads. They run with the lock held, so they
 * must be short and must not block, switch, or call any weft_threadlist_* function
 * other than weft_threadlist_link() and weft_threadlist_data().
 *
 * Uses:
 * - A run list: a bundle scheduled by weft_sched_threadlist (below) with the list
 *   as its scheduler data: created and unblocked threads are put on the list, and
 *   idle VPs get their next thread from it.
 * - A wait list: weft_threadlist_yield_onto() saves the caller and puts it on a
 *   list; whoever takes it off with weft_threadlist_get() makes it ready again
 *   with weft_thread_unblock() (or weft_threadlist_wake() does both).
 */
#ifndef WEFT_THREADLIST_H
#define WEFT_THREADLIST_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/sched.h"
#include "weft/thread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_threadlist weft_threadlist_t;  /* opaque */

/* Bytes of link space per thread (four words). */
#define WEFT_THREADLIST_LINK_MAX 32

/* A list policy. put and get are required; both run under the list's lock. */
typedef struct weft_threadlist_ops {
  size_t link_size;  /* bytes of weft_threadlist_link(t) the policy uses */
  void (*put)(weft_threadlist_t *l, weft_thread_t *t);
  weft_thread_t *(*get)(weft_threadlist_t *l);
} weft_threadlist_ops_t;

/* The built-in policies: FIFO (get returns the oldest put) and LIFO (the newest).
 * Each uses one word of link space and the list's own head and tail. */
WEFT_API extern const weft_threadlist_ops_t weft_threadlist_fifo;
WEFT_API extern const weft_threadlist_ops_t weft_threadlist_lifo;

/* weft_threadlist_create() creates an empty list with policy `ops` (copied; the
 * built-in tables are recognised and run without indirect calls) and user data
 * `data`. Callable anywhere (weft need not be running); never switches.
 * Errors: WEFT_EINVAL (out or ops NULL, put or get NULL, link_size above
 * WEFT_THREADLIST_LINK_MAX); WEFT_ENOMEM. */
WEFT_API int weft_threadlist_create(weft_threadlist_t **out, const weft_threadlist_ops_t *ops,
                                    void *data);

/* weft_threadlist_destroy() frees an empty list. Errors: WEFT_EINVAL (NULL);
 * WEFT_EBUSY (threads are on it: puts outnumber the gets that returned a thread).
 * Never switches. */
WEFT_API int weft_threadlist_destroy(weft_threadlist_t *l);

/* weft_threadlist_data() returns the data given at creation. Never fails. */
WEFT_API void *weft_threadlist_data(const weft_threadlist_t *l);

/* weft_threadlist_link() returns t's link space (WEFT_THREADLIST_LINK_MAX bytes,
 * 8-byte aligned). For use by a list's put and get on threads on (or being put on)
 * that list. */
WEFT_API void *weft_threadlist_link(weft_thread_t *t);

/* weft_threadlist_put() puts t on l. t must not be running and must be on no other
 * list: typically a thread handed to a scheduler (thread_created, thread_unblocked)
 * or one just taken off another list. Never switches; callable from any thread and
 * from scheduler handlers. Errors: WEFT_EINVAL (l or t NULL). Putting the calling
 * thread itself is undefined (caught by WEFT__ASSERT in checked builds): a running
 * thread gets on a list with weft_threadlist_yield_onto(). */
WEFT_API int weft_threadlist_put(weft_threadlist_t *l, weft_thread_t *t);

/* weft_threadlist_get() removes and returns the thread l's policy picks, or NULL
 * if the list is empty (or the policy returns NULL). Never switches; callable from
 * any thread and from scheduler handlers. l NULL gives NULL. */
WEFT_API weft_thread_t *weft_threadlist_get(weft_threadlist_t *l);

/* weft_threadlist_count() returns how many threads are on l (puts minus gets that
 * returned a thread): a snapshot, stale as soon as it returns. */
WEFT_API long weft_threadlist_count(weft_threadlist_t *l);

/* weft_threadlist_yield_onto() blocks the calling weft thread on l: once its
 * context is saved and its VP has switched away, it is put on l, and then
 * release(arg) runs if release is not NULL (on the next thread's stack; it must
 * not block). That order lets a synchronization object built on a list keep its own
 * lock held across the call and release it in `release`: a waker that takes the
 * lock then finds the caller on the list. Returns when some thread takes the
 * caller off l and calls weft_thread_unblock() on it (weft_threadlist_wake() does
 * both). Raises thread_blocked on the caller's bundle. May switch (always does).
 * What release may do: it runs as the next thread (weft_self() there is not the
 * caller) and must not block or switch, so it may release what does not check or
 * depend on who releases it: a spinlock (weft_spin_t, weft/spinlock.h) or a lock of
 * its own on atomics, atomic stores, weft_threadlist_put/get/wake,
 * weft_thread_unblock, weft_sem_signal. It must not unlock a weft_mutex_t or
 * weft_hybrid_t that the caller holds: the unlock would be made by a thread that does
 * not hold the lock. Checked builds (WEFT_CHECKED) abort with "weft_mutex_unlock by a
 * thread that does not hold it"; other builds do not check, as knowing the holder
 * costs every lock and unlock (with the checked builds' holder tracking an uncontended
 * lock + unlock pair measured 50 instructions instead of 23), and the result is
 * undefined. To block on a list under a lock, hold a spinlock across the call instead,
 * or use a weft_cond_t, whose wait releases its weft mutex itself.
 * Errors: WEFT_EINVAL (l NULL; nothing is done); WEFT_EPERM (plain OS thread,
 * also while weft is not running; release is not called). */
WEFT_API int weft_threadlist_yield_onto(weft_threadlist_t *l, void (*release)(void *arg),
                                        void *arg);

/* weft_threadlist_wake() gets a thread off l and unblocks it (it must have been
 * put there by weft_threadlist_yield_onto()); returns it, or NULL if l was empty.
 * Never switches; callable from any thread. */
WEFT_API weft_thread_t *weft_threadlist_wake(weft_threadlist_t *l);

/* A scheduler (weft/sched.h) whose ready threads live on a thread list: create
 * the bundle with weft_bundle_create(&b, parent, &weft_sched_threadlist, list).
 * thread_created and thread_unblocked put the thread on the list; processor_idle
 * gets one for the idle VP. The list's policy is the bundle's scheduling policy;
 * the list must outlive the bundle. */
WEFT_API extern const weft_sched_ops_t weft_sched_threadlist;

#ifdef __cplusplus
}
#endif
#endif
