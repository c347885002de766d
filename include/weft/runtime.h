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
  int pin;               /* a flag: nonzero (negative too) pins VP i to CPU (i mod online
                            CPUs); default 0. */
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
  int freelist_local;    /* T of FastThreads §3.3: a VP keeps at most 2T free stacks
                            (and tcb_local free control blocks) locally, moving T at a
                            time to or from the global pool; default 32. */
  int tcb_local;         /* most free control blocks one VP keeps locally (they are
                            256 bytes: the default 1024 is 256 KiB a VP); 0: the
                            default. A program that holds many unstarted or unjoined
                            threads per VP at a time and then releases them reuses its
                            own, cache-warm blocks up to this count instead of trading
                            them through the global pool's lock with the other VPs. */
  int freelist_global;   /* most control blocks (and, separately, stacks) the global
                            pool caches; beyond it memory goes back to the system;
                            default 1024. */
  int spin_us;           /* how long an idle VP polls (lock-free) before it sleeps in
                            the kernel, in microseconds, counted from the last poll
                            that saw a thread queued on any VP; default 50, at most
                            1000000 (one second; more is WEFT_EINVAL). */
  /* Stack-allocation policy (OpenThreads §3.1.4); both NULL (the default): weft maps
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
  /* Most live weft threads (created and not yet finished; the main weft thread not
   * counted). weft_create() returns WEFT_EAGAIN rather than go beyond it. 0 (the
   * default): derived from the machine at weft_init(), see weft_max_threads().
   * Enforced per VP in batches that shrink as the limit nears, without a shared
   * read-modify-write on the create path: the live count can pass the limit by at
   * most about nvps. A batch a busy VP was allowed and has not used yet counts as
   * taken (a VP gives its rest back when it goes idle), so another VP may get
   * WEFT_EAGAIN a little below the limit while that VP can still create up to it.
   * Negative: WEFT_EINVAL. */
  long max_threads;
  /* WEFT_DEADLOCK_REPORT (0, the default): when every weft thread is blocked and
   * nothing can wake any of them, print "weft: fatal error: all threads are asleep -
   * deadlock!" and one line per blocked thread on stderr, then abort() (see
   * "Limits" below). WEFT_DEADLOCK_IGNORE: the VPs just sleep. The environment
   * variable WEFT_DEADLOCK=0 (or "off") also turns the report off; "1" or "on" leave
   * it as configured, and any other value is reported on stderr at weft_init and
   * ignored. WEFT_MEMBARRIER (docs/memory-ordering.md §6b) reads the same way. Other
   * values of this field: WEFT_EINVAL. */
  int deadlock_report;
  /* A signal that makes weft print weft_dump_fd(2) (weft/debug.h), e.g. SIGUSR1; 0
   * (the default): none. weft_init() installs the handler with
   * weft_dump_on_signal(), in place of a dump signal installed before (by
   * weft_dump_on_signal() or the environment variable WEFT_DUMP_SIGNAL; only one
   * signal dumps at a time), and weft_shutdown() puts that one back (if the program
   * has not installed another meanwhile). Not a signal number, SIGKILL, SIGSTOP, a
   * synchronous fault signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE), or one the C library
   * keeps for itself (32 up to SIGRTMIN - 1): WEFT_EINVAL. */
  int dump_signal;
  /* The system monitor's bound, in microseconds (docs/design.md "The system
   * monitor"): a VP whose kernel thread has slept in a call weft was not told of (a
   * plain read(2) on a pipe, sleep(), a blocking library call) for about this long
   * while ready threads wait in its dispatch queue gets a spare VP, a kernel thread
   * that runs those threads meanwhile. 0: the default, 20; WEFT_MONITOR_OFF: no
   * monitor (the blocked VP's queue waits for the call, as without one); at most
   * 1000000; other values: WEFT_EINVAL. The environment variable WEFT_MONITOR
   * overrides it at weft_init: "off" or "0" turns the monitor off, a number of
   * microseconds sets the bound. Calls announced to weft (weft/io.h,
   * weft_blocking, weft_wire) never need it. */
  int monitor_us;
  /* Stacks of idle threads, in milliseconds (docs/io.md "Stacks of idle threads"): a
   * weft thread parked in a call of weft/io.h, with a deadline or without (weft_read,
   * weft_recv_deadline, weft_accept, weft_fd_wait, ... on a descriptor that is not
   * ready) for about this long gives back its stack's memory. weft keeps the live part
   * of the stack (from the saved stack pointer to the top: a few hundred bytes to a
   * few KiB), less its runs of zero words, in a heap block, returns the stack's pages
   * to the kernel, and copies the part back, at the same addresses, when the thread
   * is woken: pointers into the stack stay valid, and the thread notices nothing but
   * the copy's cost (a page fault per page, and the copy). An idle connection of a
   * server then costs its control block and that block instead of a stack page.
   * 0: the default, 1000; WEFT_IO_IDLE_STACK_KEEP:
   * never; at most 3600000; other values: WEFT_EINVAL. The environment variable
   * WEFT_IO_IDLE_STACK overrides it at weft_init: "keep" (or "off") never, a number
   * of milliseconds (at least 1) the age. Only stacks weft maps itself are given back
   * (not a weft_attr_t stack_addr or a stack_alloc policy's), and not in builds
   * with the portable ucontext switch. */
  int io_idle_stack_ms;
} weft_config_t;

#define WEFT_MONITOR_OFF (-1)
#define WEFT_IO_IDLE_STACK_KEEP (-1)

#define WEFT_DEADLOCK_REPORT 0
#define WEFT_DEADLOCK_IGNORE 1

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
 * too-large size, count or choice, or a stack_size from 1 to WEFT_MIN_STACK_SIZE - 1
 * (pin is a flag: any value is valid); WEFT_ENOMEM; WEFT_ESYS if a kernel thread
 * cannot be started.
 * On error nothing is left allocated and weft_init() may be called again. */
WEFT_API int weft_init(const weft_config_t *cfg);

/* weft_shutdown() ends multithreaded execution. It must be called by the main weft
 * thread (the one that called weft_init). It may switch the caller: it first waits,
 * running other threads, until every other weft thread has finished (counted
 * exactly: every thread created before the count reaches zero, by any thread on any
 * VP, has finished). From its start, weft_create() from a plain OS thread returns
 * WEFT_ENOTINIT; plain OS threads' joins and wake-ups keep working until every weft
 * thread has finished, then return WEFT_ENOTINIT (or do nothing) too, and
 * weft_shutdown() waits for any still inside weft before it frees anything. If threads are
 * still alive but none can run (all are blocked, or held by a stopped bundle, and
 * every VP is idle), it returns WEFT_EBUSY and the runtime keeps running (wake or
 * finish them and call again). Threads that something already under way will wake
 * are waited for, not reported: a sleep or timed wait, a wired thread, a
 * weft_blocking() job still running. While it waits it also calls the do-when-idle
 * functions (weft/vp.h), with one VP too; a thread that only such a function or an
 * I/O event could wake later counts as blocked. Threads the main thread's key
 * destructors create are waited for as well. (OS-thread creations are allowed again.) Threads a
 * bundle's scheduler holds (never run, in its own structures) are asked for and run
 * while it waits, as an idle VP would, with one VP too.
 * Finished threads nobody joined are reclaimed; their results are lost. On success
 * the VPs are stopped, all cached memory is returned, bundles not destroyed are freed
 * (with the scheduler library's state of those it made; data a program gave
 * weft_bundle_create() stays the program's; their handles are invalid from then on),
 * the caller is back on its own OS thread, and weft_init() may be called again.
 * fork(2): a child forked while weft runs has only the forking kernel thread, so none
 * of the VPs, the monitor or the other weft threads: as in any multithreaded process,
 * it may only call async-signal-safe functions until it execs or exits (calling weft
 * there is undefined). A child forked after weft_shutdown() returned (or before
 * weft_init()) may call weft_init() and use weft as a fresh process does, the
 * weft_blocking() pool included (it starts empty there).
 * Errors: WEFT_ENOTINIT; WEFT_EPERM if not called by the main weft thread, or called
 * while a weft_shutdown() is under way (from a key destructor of the main thread or a
 * do-when-idle function it runs); WEFT_EBUSY as above. */
WEFT_API int weft_shutdown(void);

/* weft_max_threads() returns the limit on live threads in force (weft_config_t.
 * max_threads, or the default derived at weft_init()), or 0 when weft is not running.
 * The default is the smallest of
 *   - physical memory / (page size + control block size): every live thread that has
 *     run holds at least one page of stack and its control block;
 *   - when RLIMIT_AS is finite, three quarters of the address space left under it at
 *     weft_init() (less what the process maps already and the stacks of the kernel
 *     threads weft starts: the VPs, the monitor and its spare slots; the quarter is
 *     for what is mapped later, malloc's arenas among them) over stack_size +
 *     stack_guard: one default stack and its guard region per live thread;
 *   - 2^30.
 * It does not count vm.max_map_count: how many mappings a stack costs is the stack
 * allocator's business. Never switches. */
WEFT_API long weft_max_threads(void);

/* ---- Limits ---------------------------------------------------------------------
 * Running out is an error or a report, never a silent hang:
 *   - weft_create() returns WEFT_EAGAIN beyond max_threads, WEFT_ENOMEM when a
 *     control block cannot be allocated, and WEFT_EINVAL for a weft_attr_t.stack_size
 *     that can never be mapped (with its guard region, larger than RLIMIT_AS allows:
 *     weft_stack_info().stack_size_max). A smaller size that does not fit in the
 *     address space the process has left fails when the thread first runs (below).
 *   - A stack is bound when a thread first runs. If that fails (mmap refused: the
 *     address space, vm.max_map_count, or memory is exhausted; or the stack_alloc
 *     policy returned NULL), the thread waits on a list of its own while the VPs go
 *     on running every other thread and firing timers, and is retried by idle VPs.
 *     It waits only while some other thread can still finish and give its stack
 *     back (something is running, runnable, or waiting on a timer; a wired thread or
 *     a plain OS thread may wake one). Otherwise the process stops: "weft: fatal
 *     error: out of stacks" on stderr with the limit that was hit (mmap's errno,
 *     live threads, threads waiting for a stack, vm.max_map_count, RLIMIT_AS), then
 *     abort().
 *   - Deadlock (weft_config_t.deadlock_report): when the last VP goes to sleep with
 *     no thread runnable or running, no timer armed, no wired thread, no do-when-
 *     idle function installed, no scheduler bundle other than the root, and no
 *     kernel thread in the process besides weft's VPs and those a sanitizer runtime
 *     started during weft_init() (any other kernel thread, inside weft or not, might
 *     still wake a thread: its presence turns the check off while it exists; idle
 *     weft_blocking pool threads with no job queued for them do not count), every
 *     weft thread is blocked for good. weft prints the report and aborts, as Go
 *     does. Wake-ups from signal handlers are not foreseen: programs that rely on
 *     them set WEFT_DEADLOCK_IGNORE.
 * docs/design.md "Limits" has the reasoning. */

/* ---- the system monitor ----------------------------------------------------------
 * What the monitor has done in this run (weft_config_t.monitor_us). A thread that
 * blocks in the kernel unannounced is noticed once its VP's kernel thread has slept
 * for part of the bound with a ready thread queued behind it; a spare VP then takes
 * the queued threads from the front, one at a time, until the call returns. While a
 * spare runs, weft_vp_self() on it answers the index of the VP it stands in for, and
 * up to nvps + spares_running kernel threads may run weft threads at once (the
 * thread whose call returned goes on running next to the spare until the spare
 * gives its threads back). Threads of custom schedulers (weft/sched.h) are not
 * taken. A thread that computes without coming back to the scheduler is not a stall:
 * weft does not preempt. */
typedef struct weft_monitor_info_s {
  long bound_us;            /* the bound in force; 0: the monitor is off */
  int spare_slots;          /* spare VPs that may run at once */
  int spares_running;       /* spare VPs whose kernel thread exists now */
  unsigned long long stalls;         /* stalls noticed since weft_init */
  unsigned long long spares_started; /* spare kernel threads started since weft_init */
  unsigned long long period_ns;      /* the time between the monitor's looks now: half
                                        the bound while it watches a VP closely, up to
                                        10 ms while every VP runs (docs/design.md "The
                                        system monitor"); 0 before it starts */
} weft_monitor_info_t;

/* weft_monitor_info() fills *out (a snapshot). Never switches; callable from any
 * thread. Errors: WEFT_EINVAL (out NULL); WEFT_ENOTINIT. */
WEFT_API int weft_monitor_info(weft_monitor_info_t *out);

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
 * canary (the top page of the guard range) below each such stack when its thread
 * finishes. */
#define WEFT_STACK_GUARD_MADVISE 1
#define WEFT_STACK_GUARD_MPROTECT 2

typedef struct weft_stack_info_s {
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
