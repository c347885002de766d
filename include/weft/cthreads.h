/* weft/cthreads.h - the Mach C-Threads interface (C-Threads §2.1, §3.2; Cooper and
 * Draves, CMU-CS-88-154) on weft. Library target weft_cthreads (link it besides weft):
 * plain weft users do not get names such as mutex_lock.
 *
 * A C-Threads program makes no weft call. The first call that needs threads
 * (cthread_fork, cthread_self, cthread_yield, cthread_join, cthread_exit,
 * cthread_wire, cthread_set_kernel_limit; mutexes and conditions need none) starts weft
 * with cthread_kernel_limit() virtual processors (0: one per online CPU), and makes
 * the calling OS thread the main C-Thread; weft is shut down at exit (atexit), which
 * first waits for the threads that can still run, as weft_shutdown() does. Make that
 * first call from the thread that will return from main() or call exit() (the
 * initial thread, as with Mach). A program that starts weft itself (weft_init) may
 * use this interface too; weft is then left to it, except that cthread_exit() from
 * its main weft thread (the main C-Thread) still waits and stops weft (below).
 *
 * Types are pointers, as in Mach: cthread_t, mutex_t, condition_t. mutex_alloc() and
 * condition_alloc() return initialized heap objects (NULL when out of memory) that
 * mutex_free()/condition_free() release; mutex_init()/condition_init() initialize one
 * that lives in user memory (struct mutex / struct condition, e.g. static storage).
 * Misuse that Mach left undefined (unlocking a mutex one does not hold, freeing an
 * object in use) is undefined here and caught by weft's checked builds. Out of
 * memory is reported as NULL (cthread_fork, mutex_alloc, condition_alloc). Functions
 * that cannot report an error in Mach's signatures abort with a message when weft
 * reports one (cthread_self of a weft thread that gets no record: out of memory).
 *
 * Kernel threads: cthread_set_kernel_limit(n) sets the number of virtual processors
 * (kernel threads that run C-Threads). Wired threads (cthread_wire) are extra kernel
 * threads, not counted in the limit, as in Mach.
 *
 * Filters (C-Threads §3.2) are per-thread functions called at each manipulation of a
 * thread's continuation. weft builds continuations itself (weft/sched.h's block and
 * release), so a filter here observes those points, with the paper's operation names,
 * rather than performing them; they come from weft's meta interface (weft/hook.h):
 *   CTHREAD_FILTER_PREPARE          the thread is about to run for the first time
 *                                   (WEFT_HOOK_ENTRY)
 *   CTHREAD_FILTER_USER_BUILD       the thread enters a C-Threads call that may block
 *                                   (mutex_lock, condition_wait, cthread_join,
 *                                   cthread_yield)
 *   CTHREAD_FILTER_INTERNAL_BUILD   it blocks: its context is saved (WEFT_HOOK_BLOCKED)
 *   CTHREAD_FILTER_INTERNAL_INVOKE  it is resumed (WEFT_HOOK_RESTORE)
 *   CTHREAD_FILTER_USER_INVOKE      it leaves that C-Threads call
 * A filter runs as an event callback: on a VP, possibly on another thread's stack, and
 * must not block or call anything that may switch (weft/hook.h). While any thread has
 * a filter, weft's callbacks are installed, which sends every thread down weft's
 * general (non-inlined) paths.
 */
#ifndef WEFT_CTHREADS_H
#define WEFT_CTHREADS_H
#include "weft/cond.h"
#include "weft/mutex.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct cthread *cthread_t;
typedef void *(*cthread_fn_t)(void *arg);

typedef enum cthread_filter_op {
  CTHREAD_FILTER_USER_BUILD = 0,
  CTHREAD_FILTER_INTERNAL_BUILD,
  CTHREAD_FILTER_INTERNAL_INVOKE,
  CTHREAD_FILTER_USER_INVOKE,
  CTHREAD_FILTER_PREPARE,
} cthread_filter_op_t;
/* A filter: the thread, the manipulation, and the arg given to cthread_set_filter. */
typedef void (*cthread_filter_t)(cthread_t t, cthread_filter_op_t op, void *arg);

/* ---- threads ------------------------------------------------------------------ */
/* cthread_fork() creates a C-Thread running func(arg) and returns it. Starts weft if
 * needed. Never switches the caller. Returns NULL when out of memory (its record or
 * weft's control block; nothing is left allocated and nothing runs); aborts with a
 * message for a NULL func or if weft cannot be started. The new thread records
 * itself (a weft key) when it starts; if memory runs out there, it yields and retries
 * up to 1000 times, then aborts with a message (Mach gives it no error path). */
WEFT_API cthread_t cthread_fork(cthread_fn_t func, void *arg);
/* cthread_exit() finishes the calling C-Thread with `status` (a wired thread is
 * unwired first). Called by the main C-Thread it waits for every other thread that
 * can still run, stops weft and exits the process with (int)(intptr_t)status. */
WEFT_API __attribute__((noreturn)) void cthread_exit(void *status);
/* cthread_join() waits for t to finish, returns its status and reclaims it. May
 * switch. Returns NULL for a NULL t or for the caller itself. t must not be joined
 * twice, nor joined once cthread_detach(t) has been called: a detached thread's
 * record is freed when it finishes, so its handle may dangle (undefined, as a join of
 * a detached POSIX thread; a join that finds t detached while it still runs returns
 * NULL). Checked builds keep the last 1024 released records and abort with a message
 * when a join or a detach names one of them. */
WEFT_API void *cthread_join(cthread_t t);
/* cthread_detach() makes t reclaim itself when it finishes. Never switches. */
WEFT_API void cthread_detach(cthread_t t);
/* cthread_yield() lets other ready threads run. May switch. */
WEFT_API void cthread_yield(void);
/* cthread_self() returns the calling C-Thread (the main thread and threads created
 * with weft_create have one too, made on first use), or NULL on a plain OS thread
 * after weft started elsewhere. Never switches. */
WEFT_API cthread_t cthread_self(void);
/* cthread_set_name() names t (the string is not copied: keep it alive);
 * cthread_name() returns the name, or NULL. Never switch. */
WEFT_API void cthread_set_name(cthread_t t, const char *name);
WEFT_API const char *cthread_name(cthread_t t);
/* cthread_set_data()/cthread_data(): one word of user data per C-Thread (Mach). */
WEFT_API void cthread_set_data(cthread_t t, void *data);
WEFT_API void *cthread_data(cthread_t t);

/* ---- kernel threads ----------------------------------------------------------- */
/* cthread_set_kernel_limit() sets the number of virtual processors (0: one per online
 * CPU). Before weft runs it is used when weft starts; called by the main C-Thread
 * while no other thread is alive and every C-Thread it forked has been joined or
 * detached (a finished one not yet joined keeps weft as it is: its join must still
 * find it), weft is restarted with the new number at once; otherwise it takes effect
 * the next time the C-Threads layer starts weft. Negative
 * values, or values above WEFT_MAX_VPS, are ignored. May switch the caller. */
WEFT_API void cthread_set_kernel_limit(int n);
/* cthread_kernel_limit() returns the number of virtual processors weft runs with, or
 * the limit set for the next start when weft is not running (0: no limit). */
WEFT_API int cthread_kernel_limit(void);
/* cthread_wire() binds the calling C-Thread to a kernel thread of its own so that
 * blocking system calls stall no virtual processor (weft/wire.h); cthread_unwire()
 * gives it back. Both return at once if there is nothing to do; they abort with a
 * message if the kernel thread cannot be started. May switch. */
WEFT_API void cthread_wire(void);
WEFT_API void cthread_unwire(void);

/* ---- filters ------------------------------------------------------------------ */
/* cthread_set_filter() gives t the filter `f` (NULL: the default, none) called with
 * `arg`; cthread_filter() returns t's filter (NULL: the default). Never switch. */
WEFT_API void cthread_set_filter(cthread_t t, cthread_filter_t f, void *arg);
WEFT_API cthread_filter_t cthread_filter(cthread_t t);

/* ---- mutexes ------------------------------------------------------------------ */
struct mutex {
  weft_mutex_t lock;
  const char *name;
};
typedef struct mutex *mutex_t;
#define MUTEX_INITIALIZER {WEFT_MUTEX_INIT, 0}
/* mutex_alloc() returns a new unlocked mutex, or NULL (out of memory). */
WEFT_API mutex_t mutex_alloc(void);
/* mutex_init() makes *m unlocked. */
WEFT_API void mutex_init(mutex_t m);
/* mutex_free() releases a mutex from mutex_alloc() (unlocked, no waiters; NULL is
 * ignored; a held one aborts with a message). All mutex and condition calls work from
 * C-Threads and plain OS threads, before weft starts too. */
WEFT_API void mutex_free(mutex_t m);
/* mutex_lock() acquires m (spins, then blocks the thread, not its VP). May switch. */
WEFT_API void mutex_lock(mutex_t m);
/* mutex_try_lock() acquires m if free: 1 if acquired, else 0. Never switches. */
WEFT_API int mutex_try_lock(mutex_t m);
/* mutex_unlock() releases m (held by the caller) and readies one waiter. */
WEFT_API void mutex_unlock(mutex_t m);
/* mutex_set_name() labels m (not copied); mutex_name() returns the label or NULL. */
WEFT_API void mutex_set_name(mutex_t m, const char *name);
WEFT_API const char *mutex_name(mutex_t m);

/* ---- conditions --------------------------------------------------------------- */
struct condition {
  weft_cond_t cond;
  const char *name;
};
typedef struct condition *condition_t;
#define CONDITION_INITIALIZER {WEFT_COND_INIT, 0}
/* condition_alloc() returns a new condition with no waiters, or NULL (out of memory);
 * condition_init() makes *c one; condition_free() releases one from condition_alloc()
 * (no waiters; NULL is ignored). Never switch. */
WEFT_API condition_t condition_alloc(void);
WEFT_API void condition_init(condition_t c);
WEFT_API void condition_free(condition_t c);
/* condition_wait() releases m (held), waits for a signal, re-acquires m. Mesa
 * semantics: re-check the predicate. May switch. */
WEFT_API void condition_wait(condition_t c, mutex_t m);
/* condition_signal() wakes at least one waiter (if any); condition_broadcast() all. */
WEFT_API void condition_signal(condition_t c);
WEFT_API void condition_broadcast(condition_t c);
/* condition_set_name() labels c (not copied); condition_name() returns it or NULL. */
WEFT_API void condition_set_name(condition_t c, const char *name);
WEFT_API const char *condition_name(condition_t c);

#ifdef __cplusplus
}
#endif
#endif
