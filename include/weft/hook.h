/* weft/hook.h - the meta interface's event callbacks (OpenThreads §3.1-3.2).
 *
 * A callback can be installed on each thread event (entry, exit, save, restore,
 * blocked, unblocked) and system event (idle begin, idle spin, idle end). The
 * callbacks of one event form a stack: weft_hook_push() adds one on top,
 * weft_hook_pop() removes the top one, weft_hook_remove() a given one, all at run time. When the event happens every
 * callback of its stack runs, the most recently pushed first.
 *
 * Cost: with no callback installed the hot paths pay nothing extra: the test that
 * sends a thread of a custom scheduler down the general path also covers "hooks
 * installed" (one bit in the thread's flags word, set on every thread while any
 * callback is installed). The CMake option WEFT_HOOKS=OFF compiles the events out
 * (then push returns WEFT_EPERM).
 *
 * Callbacks run in the context of the event, on a VP's kernel thread (or on a plain
 * OS thread for an unblocked event raised by one, vp == -1): on the stack of the
 * thread switching away or of the next thread, or on the idle loop. They must not
 * block, yield or call anything that may switch; they may take short spinlocks. They
 * run concurrently on several VPs.
 *
 * Events and their arguments (t: the thread; obj: extra):
 *   ENTRY      t is about to run its function for the first time (on t's stack)
 *   EXIT       t has finished its function (on t's stack; obj: its result)
 *   SAVE       t was switched away from (its context is saved)
 *   RESTORE    t is about to be resumed
 *   BLOCKED    t blocked (obj: what it waits for: a sync object, a joinee, or NULL)
 *   UNBLOCKED  t was made ready again by the caller (obj: the waker thread or NULL)
 *   IDLE_BEGIN the VP found nothing to run (t NULL)
 *   IDLE_SPIN  the VP polls for work (once per polling round; t NULL)
 *   IDLE_END   the VP found a thread to run (t: that thread)
 *   STEAL      the VP took threads queued for another VP (t: the first taken; obj: a
 *              const weft_hook_steal_t *, valid during the call): raised by
 *              weft_sched_steal(), weft_sched_steal_half() and weft_sched_steal_note()
 * A switch between two threads raises SAVE of the old one, then RESTORE of the new.
 * Known limit: a thread created on another VP at the very moment the first callback is
 * installed may miss its events (the flag is set on every existing control block
 * while creation reads the flag it starts with without a lock).
 */
#ifndef WEFT_HOOK_H
#define WEFT_HOOK_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/thread.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum weft_hook_event {
  WEFT_HOOK_ENTRY = 0,
  WEFT_HOOK_EXIT,
  WEFT_HOOK_SAVE,
  WEFT_HOOK_RESTORE,
  WEFT_HOOK_BLOCKED,
  WEFT_HOOK_UNBLOCKED,
  WEFT_HOOK_IDLE_BEGIN,
  WEFT_HOOK_IDLE_SPIN,
  WEFT_HOOK_IDLE_END,
  WEFT_HOOK_STEAL,
  WEFT_HOOK_NEVENTS
} weft_hook_event_t;

/* The extra argument of a STEAL event. */
typedef struct weft_hook_steal {
  int victim;  /* the VP stolen from */
  int count;   /* how many threads were taken (the first is the event's thread) */
} weft_hook_steal_t;

/* A callback: ev, the thread (or NULL), the VP number it runs on (-1 on a plain OS
 * thread), the event's extra pointer, and the arg given to weft_hook_push().
 * The VP number names the kernel thread's VP slot: 0 .. weft_vp_count() - 1 for the
 * VPs, and weft_vp_count() + k for the system monitor's spare VP k (k <
 * weft_monitor_info().spare_slots, weft/runtime.h), which runs threads of a stalled VP
 * (weft_vp_self() there answers the VP it stands in for). One kernel thread at a time
 * has a given number, so per-VP state indexed by it needs no lock: size such an array
 * weft_vp_count() + spare_slots. */
typedef void (*weft_hook_fn)(weft_hook_event_t ev, weft_thread_t *t, int vp, void *obj,
                             void *arg);

/* The most callbacks on one event's stack. */
#define WEFT_HOOK_DEPTH 8

/* weft_hook_push() installs fn(arg) on top of ev's stack. Callable from anywhere,
 * at any time (before weft_init too); never switches. Errors: WEFT_EINVAL (bad ev,
 * fn NULL), WEFT_EAGAIN (WEFT_HOOK_DEPTH reached), WEFT_EPERM (built with
 * WEFT_HOOKS=OFF). */
WEFT_API int weft_hook_push(weft_hook_event_t ev, weft_hook_fn fn, void *arg);

/* weft_hook_pop() removes the top callback of ev's stack. A callback that another VP
 * has already started may still be running when this returns; keep its arg valid
 * until weft_shutdown() or until such calls are known to have finished. Never
 * switches. Errors: WEFT_EINVAL (bad ev, or the stack is empty). */
WEFT_API int weft_hook_pop(weft_hook_event_t ev);

/* weft_hook_remove() removes the most recently pushed callback of ev's stack whose
 * function and arg are fn and arg, wherever it is in the stack; the others keep their
 * order. For a component that installs callbacks and must take back its own even if
 * others pushed theirs later (weft's tracer does). A callback already started on
 * another VP may still run after it returns, as for weft_hook_pop(); a slot removed
 * from below the top counts against WEFT_HOOK_DEPTH until what is above it is popped.
 * Never switches. Errors: WEFT_EINVAL (bad ev, fn NULL, no such callback). */
WEFT_API int weft_hook_remove(weft_hook_event_t ev, weft_hook_fn fn, void *arg);

/* weft_hook_depth() returns how many callbacks ev's stack holds (0 for a bad ev). */
WEFT_API int weft_hook_depth(weft_hook_event_t ev);

#ifdef __cplusplus
}
#endif
#endif
