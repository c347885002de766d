/* src/core/hook.h - raising the event callbacks of weft/hook.h (hook.c, thread.c). */
#ifndef WEFT_CORE_HOOK_H
#define WEFT_CORE_HOOK_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/tcb.h"

/* thread_blocked and the SAVE/BLOCKED/RESTORE callbacks (thread.c; cold). */
void weft__blocked_slow(weft_thread_t *self, uint32_t f, void *obj);

/* Raises a hook event (weft/hook.h); only called when TF_HOOK was seen. */
void weft__hook_raise(int ev, weft_thread_t *t, void *obj);

/* A continuation's share of a switch: SAVE of self, BLOCKED (if blocked) with obj,
 * then RESTORE of the VP's new current thread if there is one. */
void weft__hook_switched(weft_thread_t *self, int blocked, void *obj);
/* weft_init, once the OS-thread gate is open to reads and weft_is_running() says 1:
 * gives the main thread (made earlier in weft_init) the flag that a concurrent push
 * could not give it (hook.c). */
void weft__hook_mark_main(weft_thread_t *main);

/* Nonzero while any callback is installed (idle-loop events test it). */
extern _Atomic uint32_t weft__hooks_on;

#endif
