/* weft/debug.h - hooks for tests and diagnostics. Not for production use. */
#ifndef WEFT_DEBUG_H
#define WEFT_DEBUG_H

#include <stdio.h>

#include "weft/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* weft_debug_fail_alloc() makes the n-th allocation from now (n >= 1) that weft
 * asks of the system (malloc or mmap, not a free-list hit) fail as if the system
 * were out of memory; n = 0 turns injection off. Used by failure-injection tests.
 * Process-wide, callable anywhere. */
WEFT_API void weft_debug_fail_alloc(long n);

/* weft_debug_fail_point() lets a library layered on weft (the C-Threads layer) take
 * part in failure injection: it counts as one allocation (weft_debug_alloc_count())
 * and returns 1 if that allocation must fail as weft_debug_fail_alloc() asked, else
 * 0. The caller then skips its own allocation and reports out-of-memory. Callable
 * anywhere. */
WEFT_API int weft_debug_fail_point(void);

/* weft_debug_alloc_count() returns how many system allocations weft has made since
 * the process started (malloc and mmap calls, counted whether or not they failed). */
WEFT_API long weft_debug_alloc_count(void);

/* weft_debug_live_blocks() returns how many blocks weft currently holds from the
 * system (control blocks, stacks, tables, VP structures), cached ones included.
 * 0 after a successful weft_shutdown() means nothing leaked. */
WEFT_API long weft_debug_live_blocks(void);

/* Per-VP counters, summed over VPs. Readable any time; exact only when quiescent. */
typedef struct weft_debug_stats_s {
  uint64_t created, finished, steals, sleeps;
  uint64_t tcb_cached, stacks_cached;   /* free-list contents, local and global */
} weft_debug_stats_t;
WEFT_API void weft_debug_stats(weft_debug_stats_t *out);

/* weft_dump() writes a snapshot of the runtime to f: each VP and what it runs,
 * then every live thread (the main one included) with its id, name, state (running
 * on a VP; ready on a VP, with what it was woken from if it has not run since;
 * blocked on an object, named by kind and address; in
 * weft_join on another thread; sleeping; new; finished and not joined; parked
 * elsewhere: a thread list, weft_thread_block or a custom scheduler), its bundle
 * if not the root, and for each parked thread a backtrace from its saved context,
 * symbolized with dladdr(3) (the module and offset for addr2line, and exported
 * names). Its first line says how backtraces are taken: "libunwind" (libweft built
 * with libunwind, x86-64): unwound with the DWARF call-frame information, so frames
 * without frame pointers are crossed and hidden or static functions are named from
 * the module's symbol table; "frame pointers": the frame-pointer chain, which stops
 * at the first frame built without one (WEFT_FRAME_POINTERS, docs/debugging.md);
 * "none (ucontext build)". The threads run on
 * while it is taken: a thread may be shown in a state it has just left. Callable
 * from any thread while weft runs, not concurrently with weft_shutdown() (which
 * frees what it reads); does not switch. Errors: WEFT_EINVAL (f NULL);
 * WEFT_ENOTINIT; WEFT_EBUSY (the control-block pool stayed locked: VPs only). */
WEFT_API int weft_dump(FILE *f);

/* weft_dump_fd() is weft_dump() written to a file descriptor with write(2), with
 * no allocation, no stdio, no symbols (raw addresses) and only bounded tries of
 * weft's locks: the form a signal handler may call. Not strictly
 * async-signal-safe: it reads runtime structures that the interrupted code may be
 * changing (it shows what it finds, and reads stacks with process_vm_readv(2) so
 * that a stack unmapped meanwhile is not a fault), and with libunwind it finds the
 * unwind tables through dl_iterate_phdr(3). What libunwind needs allocated is made
 * by weft_init(), weft_dump() and weft_dump_on_signal(), never here. A descriptor
 * in non-blocking mode is waited on (poll(2)) when full, up to 10 s at a time, as a
 * blocking write would wait (weft_dump writes a FILE that has a descriptor through
 * it the same way). One dump is written at a time: a dump that starts while another
 * is being written (a dump signal delivered twice) waits for it, up to 2 s, else
 * writes a one-line note and returns WEFT_EBUSY. Errors: as weft_dump (WEFT_EINVAL:
 * fd < 0). */
WEFT_API int weft_dump_fd(int fd);

/* weft_dump_on_signal() installs a handler for signal `signo` that calls
 * weft_dump_fd(2) (standard error); 0 puts back what was there before. The
 * environment variable WEFT_DUMP_SIGNAL=<signo> does the same when libweft is
 * loaded (e.g. WEFT_DUMP_SIGNAL=10, then kill -USR1 <pid>), and
 * weft_config_t.dump_signal while weft runs (weft/runtime.h). One signal at a time:
 * installing another puts back what the previous one replaced. Errors: WEFT_EINVAL
 * (not a signal that can be caught, or a synchronous fault signal: SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE, whose handler returning would re-run the fault), WEFT_ESYS
 * (sigaction failed). */
WEFT_API int weft_dump_on_signal(int signo);

/* The kinds of object weft_debug_waiters() can look at. */
typedef enum weft_debug_obj {
  WEFT_DEBUG_MUTEX = 1, /* weft_mutex_t */
  WEFT_DEBUG_HYBRID,    /* weft_hybrid_t */
  WEFT_DEBUG_COND,      /* weft_cond_t */
  WEFT_DEBUG_SEM,       /* weft_sem_t */
  WEFT_DEBUG_RWLOCK,    /* weft_rwlock_t (readers and writers together) */
  WEFT_DEBUG_BARRIER,   /* weft_barrier_t */
  WEFT_DEBUG_JOIN       /* weft_thread_t: the thread waiting in weft_join() for it */
} weft_debug_obj_t;

/* weft_debug_waiters() returns how many threads (weft threads and plain OS threads)
 * are queued waiting on `obj`, an object of kind `kind`; for WEFT_DEBUG_JOIN, 1 if
 * a thread waits in weft_join() for the thread `obj`, else 0. A thread counts from
 * the moment it is committed to its wait (a weft thread: its context is saved; only
 * a wake-up, unlock or timeout lets it go on) until it is woken or times out, so a
 * test can wait for the count to reach n instead of sleeping "long enough" for n
 * threads to block. A condition waiter that a signal moved onto its mutex's queue
 * (wait morphing, weft/cond.h) counts on the mutex, no longer on the condition. Spinning in a
 * lock's spin phase is not waiting. The count is a snapshot taken under the
 * object's queue lock (a walk of the queue: for tests and diagnostics, not for
 * hot paths); it may be stale as soon as it returns. Never switches; callable from
 * any thread while the object is valid (for WEFT_DEBUG_JOIN: a thread not yet
 * joined or reclaimed). Errors: WEFT_EINVAL (obj NULL, kind unknown). */
WEFT_API int weft_debug_waiters(weft_debug_obj_t kind, const void *obj);

#ifdef __cplusplus
}
#endif
#endif
