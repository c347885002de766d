/* weft/thread.h - user-level threads: create, join, detach, exit, yield, self.
 *
 * A thread is created with only its control block: its function and argument live
 * there, and its stack is bound when it first runs (FastThreads §2, Active Threads §5.6).
 * "Callable from a weft thread" means code running on a thread created by weft or
 * on the main weft thread; "from a plain OS thread" means any other thread.
 */
#ifndef WEFT_THREAD_H
#define WEFT_THREAD_H

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_thread weft_thread_t;  /* opaque control block */
typedef struct weft_bundle weft_bundle_t;  /* see weft/sched.h */
typedef void *(*weft_thread_fn)(void *arg);

/* Thread attributes. Fill with weft_attr_init(), or zero them (weft_attr_t a = {0}):
 * every field's zero is its default, so the two give the same attributes. */
typedef struct weft_attr {
  size_t stack_size;      /* 0: the runtime default; else at least WEFT_MIN_STACK_SIZE.
                             Each VP caches stacks of the default size and of one
                             custom size (the first it caches): threads that all
                             ask for one size reuse stacks; other sizes are mapped
                             and unmapped per thread (docs/design.md "Memory") */
  int detached;           /* nonzero: created detached (cannot be joined) */
  int vproc;              /* 0 (the default): no virtual processor; WEFT_VPROC(v) asks
                             for virtual processor v >= 0, a placement hint: the
                             default scheduler places the thread on VP (v mod nvps).
                             Negative: WEFT_EINVAL. weft_sched_thread_affinity() and
                             weft_get_affinity() report v, or -1 for none. */
  weft_bundle_t *bundle;  /* NULL: the root bundle */
  void *stack_addr;       /* NULL: weft binds a stack when the thread first runs.
                             Else the caller's memory [stack_addr, stack_addr +
                             stack_size) is the thread's stack: stack_addr 16-byte
                             aligned, stack_size at least WEFT_MIN_STACK_SIZE, the
                             thread joinable. No guard page: an overflow corrupts
                             whatever lies below. The memory belongs to weft from
                             weft_create() until weft_join() of the thread returns. */
  int switch_mode;        /* WEFT_SWITCH_INTEGER (0, the default) or WEFT_SWITCH_ALL */
  int work_first;         /* 0 (the default): help-first creation, the new thread is
                             queued at the front of the creating VP's dispatch queue
                             and the creator goes on. Nonzero: work-first creation,
                             the new thread runs at once on the creating VP and the
                             creator is queued at the front instead (it runs next
                             when the new thread blocks or finishes, and an idle VP
                             may steal it meanwhile). Root-bundle threads created by a
                             weft thread on a VP only; elsewhere (a plain OS or wired
                             thread creating, a bundle other than the root, an
                             affinity naming another VP, no stack to be had at once)
                             it is ignored and the thread is created help-first. */
} weft_attr_t;

/* WEFT_VPROC(v) is the weft_attr_t.vproc value that asks for virtual processor v
 * (0 <= v < INT_MAX): v + 1, so that a zeroed attribute asks for none. WEFT_VPROC(-1)
 * is 0: "-1 for none", as weft_get_affinity() reports it, converts too. */
#define WEFT_VPROC(v) ((v) + 1)

/* Context-switch modes (OpenThreads §3.1.3). INTEGER saves what the C ABI makes
 * callee-saved and nothing of the floating-point control state: a thread that
 * changes its rounding mode or exception masks (fesetround, MXCSR, x87 control
 * word, FPCR) may find them changed by another thread after any switch, and
 * passes its own to whatever runs next. ALL also saves the FP control state (MXCSR
 * and the x87 control word on x86-64, FPCR on AArch64) whenever the thread is
 * switched away and restores it when the thread resumes. A thread in ALL mode
 * starts with the control state of the VP it first runs on. The ucontext build
 * (-DWEFT_CONTEXT=ucontext) saves and restores the FP environment on every switch
 * (swapcontext does), so there both modes keep it. docs/meta-interface.md. */
#define WEFT_SWITCH_INTEGER 0
#define WEFT_SWITCH_ALL 1

/* weft_attr_init() fills *attr with defaults. Never fails. */
WEFT_API void weft_attr_init(weft_attr_t *attr);

/* weft_switch_mode_set() sets the calling thread's switch mode (WEFT_SWITCH_*);
 * it applies from the caller's next switch. Never switches. Errors: WEFT_EINVAL
 * (unknown mode); WEFT_EPERM (plain OS thread, also while weft is not running, or a
 * VP's idle loop). A wired thread's mode applies from its first switch after unwiring. */
WEFT_API int weft_switch_mode_set(int mode);

/* weft_switch_mode_get() returns the calling thread's switch mode, or
 * WEFT_SWITCH_INTEGER from a plain OS thread or a VP's idle loop. Never switches. */
WEFT_API int weft_switch_mode_get(void);

/* weft_create() creates a thread that will run fn(arg) and stores its handle in
 * *out (which may be NULL only for detached threads). The new thread is given to
 * its bundle's scheduler ("thread created" event); the default scheduler puts it at
 * the front of the caller's VP's dispatch queue, so that a VP runs the threads it
 * created most recently first (docs/schedulers.md). It does not run before
 * weft_create() returns on the caller's VP, though another VP may start it at once,
 * unless attr->work_first asks for work-first creation: then the new thread runs at
 * once and weft_create() returns when the caller is resumed, possibly on another VP.
 * Callable from a weft thread (the thread goes to the caller's VP) or from a plain
 * OS thread (it is handed to a VP, round robin). Never switches the caller, except
 * under work_first (or a scheduler that runs new threads at once, weft/sched.h
 * weft_sched_run_first).
 * Errors: WEFT_EINVAL (fn NULL, out NULL for a joinable thread, or a bad attr:
 * stack_size out of range - for a stack weft maps, also larger than RLIMIT_AS (at
 * weft_init) leaves room for with its guard region, weft_stack_info().stack_size_max -
 * stack_addr not 16-byte aligned or with a stack_size
 * below WEFT_MIN_STACK_SIZE or with detached set, vproc negative, unknown switch_mode);
 * WEFT_ENOMEM (no control block);
 * WEFT_EAGAIN (weft_config_t.max_threads live threads; weft/runtime.h "Limits");
 * WEFT_ENOTINIT (also from a plain OS thread once weft_shutdown() has begun). A stack
 * that cannot be mapped when the thread first runs is not an error here: the thread
 * waits for one (weft/runtime.h "Limits"). */
WEFT_API int weft_create(weft_thread_t **out, const weft_attr_t *attr,
                         weft_thread_fn fn, void *arg);

/* weft_join() waits for `t` to finish, stores its result in *result (if not NULL)
 * and reclaims it. From a weft thread it blocks the thread, not its VP; from a
 * plain OS thread it blocks in the kernel. May switch the caller.
 * Errors: WEFT_EINVAL (t NULL); WEFT_EDEADLK (t is the caller);
 * WEFT_ESRCH (t is detached, or another joiner is waiting or won a race to reclaim
 * it, or t is the main weft thread, which never finishes as other threads do);
 * WEFT_ENOTINIT (also from a plain OS thread once weft_shutdown() has seen
 * every weft thread finish). While weft is not running WEFT_ENOTINIT comes first,
 * whatever t is.
 *
 * Handles of reclaimed threads. Once a thread has finished and been reclaimed (by
 * its join, by weft_detach, or by itself after a detach) its handle dangles: its
 * control block goes to a free list and the next weft_create (often the very next
 * one on the same VP) may reuse it. Until it is reused, joining or detaching the
 * handle of a thread that was detached, and detaching the handle of a thread that
 * was joined (a detach racing a join: exactly one of them reclaims the thread),
 * return WEFT_ESRCH and change nothing; a second join of a joined thread is
 * undefined, and checked builds (WEFT_CHECKED) abort with a message. After reuse, every call on
 * the old handle is undefined: it names the new thread (nothing can tell them
 * apart), or memory given back to the system if the free lists overflowed. */
WEFT_API int weft_join(weft_thread_t *t, void **result);

/* weft_detach() makes `t` reclaim itself when it finishes (at once if it has).
 * Never switches. Errors: WEFT_EINVAL (t NULL); WEFT_ESRCH (already detached,
 * whether or not it has finished and been reclaimed since, or being joined, or the
 * main weft thread);
 * WEFT_ENOTINIT (first, while weft is not running). Handles of reclaimed threads: see
 * weft_join(). */
WEFT_API int weft_detach(weft_thread_t *t);

/* weft_exit() finishes the calling thread with `result`, as if its function had
 * returned it. Thread-specific data destructors run first. Callable only from a
 * thread created by weft_create(): from the main weft thread or a plain OS thread
 * it returns WEFT_EPERM, and WEFT_ENOTINIT while weft is not running (before
 * weft_init(), after weft_shutdown()). Does not return on success. */
WEFT_API int weft_exit(void *result);

/* weft_yield() lets other ready threads run; the caller stays ready and resumes
 * later, possibly on another VP. From a plain OS thread it calls sched_yield().
 * With one VP and nothing else in its dispatch queue it asks the bundles' schedulers
 * for a thread they hold, as an idle VP would (docs/schedulers.md; with more VPs the
 * idle ones ask, and a VP whose dispatch queue never empties runs those threads
 * first). If nothing else is ready it returns at once. */
WEFT_API void weft_yield(void);

/* weft_self() returns the calling weft thread, or NULL from a plain OS thread.
 * Never switches. */
WEFT_API weft_thread_t *weft_self(void);

/* weft_thread_id() returns t's numeric id: unique for the life of the process,
 * never 0; the main weft thread of each weft_init() gets a fresh one. t NULL gives 0. */
WEFT_API uint64_t weft_thread_id(const weft_thread_t *t);

/* Thread names, for diagnostics: weft_dump(), the deadlock report, traces
 * (weft/trace.h) and the gdb extension show them. A name is kept in the control
 * block, at most WEFT_NAME_MAX bytes with its terminating NUL; a new thread has
 * none (""). Names need not be unique and mean nothing to the runtime. */
#define WEFT_NAME_MAX 24

/* weft_set_name() copies `name` into t's control block, truncated to
 * WEFT_NAME_MAX - 1 bytes; NULL or "" clears it. t NULL names the calling thread.
 * t must be a live thread (created and not yet reclaimed, see weft_join()).
 * A reader racing the set may see a mix of the old and the new name (always
 * NUL-terminated). Never switches. Errors: WEFT_EPERM (t NULL from a plain OS
 * thread, also while weft is not running). */
WEFT_API int weft_set_name(weft_thread_t *t, const char *name);

/* weft_get_name() copies t's name (t NULL: the calling thread's) into buf,
 * truncated to len - 1 bytes and NUL-terminated; "" if it has none. Never
 * switches. Errors: WEFT_EINVAL (buf NULL or len 0); WEFT_EPERM (t NULL from a
 * plain OS thread; buf is then set to ""). */
WEFT_API int weft_get_name(const weft_thread_t *t, char *buf, size_t len);

/* The one fast thread-specific pointer (OpenThreads §3.2.1): a word in the control
 * block, read and written in a few instructions. From a plain OS thread (which
 * includes any thread while weft is not running) and from a VP's idle loop (a
 * do-when-idle function, weft/vp.h; a hook callback raised there), where no weft
 * thread runs, get returns NULL and set returns WEFT_EPERM; a do-when-idle function
 * that weft_shutdown() calls while it waits runs on the main weft thread, and sees
 * that thread's. A wired thread has its own. */
WEFT_API void *weft_local_get(void);
WEFT_API int weft_local_set(void *value);

/* Thread-specific data keys, as pthread keys. At most WEFT_KEYS_MAX live keys. */
#define WEFT_KEYS_MAX 128
typedef struct weft_key { uint32_t index; uint32_t gen; } weft_key_t;

/* weft_key_create() creates a key whose value is NULL in every thread; `dtor`, if
 * not NULL, is called with a thread's non-NULL value when that thread finishes
 * (up to 4 rounds, as PTHREAD_DESTRUCTOR_ITERATIONS). Errors: WEFT_EINVAL (key
 * NULL); WEFT_EAGAIN (WEFT_KEYS_MAX keys live). Callable anywhere, init or not. */
WEFT_API int weft_key_create(weft_key_t *key, void (*dtor)(void *));

/* weft_key_delete() deletes a key; values are not destroyed. Errors: WEFT_EINVAL
 * (not a live key). */
WEFT_API int weft_key_delete(weft_key_t key);

/* weft_key_get() returns the calling weft thread's value for `key`, or NULL (also
 * for a stale key or a plain OS thread). */
WEFT_API void *weft_key_get(weft_key_t key);

/* weft_key_set() sets the calling weft thread's value for `key`. Errors:
 * WEFT_EPERM (plain OS thread, also while weft is not running); WEFT_EINVAL (stale
 * key); WEFT_ENOMEM (the first set in a thread allocates its table). The main weft
 * thread's destructors run in weft_shutdown(). */
WEFT_API int weft_key_set(weft_key_t key, const void *value);

#ifdef __cplusplus
}
#endif
#endif
