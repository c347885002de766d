/* weft/runtime.h - begin and end of multithreaded execution; virtual processors.
 *
 * weft_init() starts `nvps` virtual processors (VPs): the calling OS thread becomes
 * VP 0 and the main weft thread, and nvps-1 kernel threads are started for the rest.
 * Between weft_init() and weft_shutdown() the caller is a weft thread like any
 * other: it can block, yield, and be rescheduled onto another VP's kernel thread.
 */
#ifndef WEFT_RUNTIME_H
#define WEFT_RUNTIME_H

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Configuration for weft_init(). Fill it with weft_config_init(); every field then
 * holds its default. Zero in a size or count field also means "default". */
typedef struct weft_config {
  int nvps;              /* virtual processors; default: online CPUs. Max WEFT_MAX_VPS. */
  int pin;               /* nonzero: pin VP i to CPU (i mod online CPUs); default 0. */
  size_t stack_size;     /* default stack size in bytes (usable, guard region
                            excluded); default WEFT_DEFAULT_STACK_SIZE; rounded up to the
                            page size; minimum WEFT_MIN_STACK_SIZE; at most what
                            RLIMIT_AS lets one stack and its guard region map (else
                            weft_init returns WEFT_EINVAL). */
  size_t stack_guard;    /* bytes of guard region below every stack weft maps: a
                            thread that runs into it is reported and the process
                            aborts. Default WEFT_DEFAULT_STACK_GUARD; rounded up to the
                            page size; at most WEFT_MAX_STACK_GUARD. Address space only,
                            never memory. A frame larger than the guard can jump it:
                            compile code with big frames with -fstack-clash-protection
                            (docs/design.md "Stacks"). */
  int freelist_local;    /* T of papers/004 3.3: a VP keeps at most 2T free control
                            blocks and 2T free stacks locally, moving T at a time to or
                            from the global pool; default 32. */
  int freelist_global;   /* most control blocks (and, separately, stacks) the global
                            pool caches; beyond it memory goes back to the system;
                            default 1024. */
  int spin_us;           /* how long an idle VP polls (lock-free) before it sleeps in
                            the kernel, in microseconds; default 50. */
  /* Stack-allocation policy (papers/003 3.1.4); both NULL (the default): weft maps
   * stacks with a guard region and caches them per VP. Both set: every stack weft
   * binds to a thread (not caller-provided ones, weft_attr_t.stack_addr) comes from
   * stack_alloc(size, stack_arg), which returns the lowest address of `size` usable
   * bytes, 16-byte aligned, or NULL (the thread then waits and the bind is retried,
   * as when the system is out of memory); weft caches none of them and gives each
   * back exactly once through stack_free(lo, size, stack_arg) once its thread has
   * finished and is off it. size is the thread's stack size (weft_attr_t.stack_size
   * rounded up to the page size, or stack_size above). Both are called on any VP's
   * kernel thread, concurrently, in switch continuations and scheduling paths: they
   * must not block, switch or call weft; malloc and a spinlock are fine. Only one
   * set: weft_init() returns WEFT_EINVAL. */
  void *(*stack_alloc)(size_t size, void *arg);
  void (*stack_free)(void *lo, size_t size, void *arg);
  void *stack_arg;
} weft_config_t;

#define WEFT_MAX_VPS 256
/* 256 KiB: reserved address space only; pages are committed as they are touched,
 * so a thread that uses 8 KiB costs 8 KiB of memory. It fits glibc's stdio (which
 * wants several KiB), moderate recursion and the sanitizers' larger frames; users
 * of deep recursion raise it per thread. See docs/design.md "Stacks". */
#define WEFT_DEFAULT_STACK_SIZE ((size_t)256 * 1024)
#define WEFT_MIN_STACK_SIZE ((size_t)16 * 1024)
/* 128 KiB: larger than any frame of ordinary C (a 64 KiB local array included) plus
 * the call that follows it, so an overflow faults in the guard rather than writing
 * into the memory below. With MADV_GUARD_INSTALL it costs no memory and no kernel
 * memory area; with the mprotect fallback, address space only. */
#define WEFT_DEFAULT_STACK_GUARD ((size_t)128 * 1024)
#define WEFT_MAX_STACK_GUARD ((size_t)64 * 1024 * 1024)

/* weft_config_init() fills *cfg with the defaults. Never fails; callable anywhere. */
WEFT_API void weft_config_init(weft_config_t *cfg);

/* weft_init() starts the runtime with `cfg` (NULL means all defaults) and turns the
 * calling OS thread into the main weft thread. Call it from a plain OS thread.
 * Errors: WEFT_EALREADY if already running; WEFT_EINVAL for a negative or
 * too-large field; WEFT_ENOMEM; WEFT_ESYS if a kernel thread cannot be started.
 * On error nothing is left allocated and weft_init() may be called again. */
WEFT_API int weft_init(const weft_config_t *cfg);

/* weft_shutdown() ends multithreaded execution. It must be called by the main weft
 * thread (the one that called weft_init). It may switch the caller: it first waits,
 * running other threads, until every other weft thread has finished. If threads are
 * still alive but none can run (all are blocked and every VP is idle), it returns
 * WEFT_EBUSY and the runtime keeps running (wake or finish them and call again).
 * Finished threads nobody joined are reclaimed; their results are lost. On success
 * the VPs are stopped, all cached memory is returned, the caller is back on its own
 * OS thread, and weft_init() may be called again.
 * Errors: WEFT_ENOTINIT; WEFT_EPERM if not called by the main weft thread;
 * WEFT_EBUSY as above. */
WEFT_API int weft_shutdown(void);

/* weft_is_running() returns 1 between a successful weft_init() and weft_shutdown(). */
WEFT_API int weft_is_running(void);

/* weft_vp_count() returns the number of VPs, or 0 when weft is not running. */
WEFT_API int weft_vp_count(void);

/* weft_vp_self() returns the index of the VP the caller runs on, or -1 when the
 * caller is not a weft thread. The answer may be stale as soon as the caller
 * switches (a thread can resume on another VP). Never switches. */
WEFT_API int weft_vp_self(void);

/* ---- stack memory ----------------------------------------------------------------
 * How weft keeps the guard regions below default-size stacks (docs/design.md
 * "Stacks"). MADVISE: stacks are carved from large mappings (chunks) and their guard
 * regions live in the page tables (Linux 6.13's MADV_GUARD_INSTALL): no kernel memory
 * area (VMA) per stack, so vm.max_map_count does not bound the number of threads.
 * MPROTECT: the fallback on older kernels (madvise returns EINVAL) or when the
 * environment variable WEFT_STACK_GUARD=mprotect is set at weft_init: the same chunks,
 * with PROT_NONE guard regions (two VMAs each) on at most a quarter of
 * vm.max_map_count stacks at a time (guard_budget; WEFT_STACK_GUARD=mprotect:N sets
 * it to N, for tests); stacks beyond that have an unused
 * guard range but no fault on overflow: checked builds (WEFT_CHECKED) then check a
 * canary below each such stack when its thread finishes. */
#define WEFT_STACK_GUARD_MADVISE 1
#define WEFT_STACK_GUARD_MPROTECT 2

typedef struct weft_stack_info {
  int guard_mechanism;      /* WEFT_STACK_GUARD_* in use */
  size_t guard_size;        /* bytes of guard region below each stack */
  size_t stack_size;        /* the default stack size */
  size_t stack_size_max;    /* largest stack_size weft_create accepts (RLIMIT_AS) */
  long stacks_per_chunk;    /* default-size stacks per chunk mapping, at most */
  long chunks;              /* chunk mappings now */
  long single_mappings;     /* stacks of other sizes, one mapping each, now */
  long stacks_carved;       /* default-size stacks out of their chunks (bound to a
                               thread or cached for reuse) */
  long stacks_cached;       /* of those, cached (free lists) */
  long stacks_unguarded;    /* of those, without a guard region (MPROTECT only) */
  long guard_budget;        /* MPROTECT: stacks that may still get a guard; -1: no
                               limit (MADVISE) */
  size_t bytes_reserved;    /* address space of all stack mappings, guards included */
} weft_stack_info_t;

/* weft_stack_info() fills *out with the stack mechanism and counts now. Counts are
 * a snapshot, exact only when no thread starts or finishes meanwhile. Never
 * switches; callable from any thread. Errors: WEFT_EINVAL (out NULL);
 * WEFT_ENOTINIT. */
WEFT_API int weft_stack_info(weft_stack_info_t *out);

#ifdef __cplusplus
}
#endif
#endif
