/* src/core/internal.h - the whole of the core's internal interface, for the files
 * that use most of it. Every definition lives in the header of its concept:
 *
 *   core/defs.h      branch hints, cache-line size, WEFT__ASSERT; ownership vocabulary
 *   core/spin.h      the internal spinlock
 *   core/tcb.h       the thread control block, join word, flags word
 *   sync/timer.h     the per-VP timer heap (timer.c)
 *   core/vp.h        the virtual processor, weft__vp(), owner-only counters
 *   core/alloc.h     the pool, control-block and stack caches (alloc.c)
 *   core/runtime.h   weft__rt, the OS-thread gate, live count, wired threads
 *   core/bundle.h    bundles and idle-event routing (bundle.c)
 *   core/hook.h      raising event callbacks (hook.c)
 *   core/switch.h    the switch the core uses (switch.c)
 *   core/idle.h      idle loop, parking, threads waiting for a stack, deadlock reports
 *   core/dispatch.h  dispatch queues (inlined), placement, ready/unblock (dispatch.c)
 *   core/overflow.h  the stack-overflow report (overflow.c)
 *
 * docs/design.md "Source map" says which source file holds what.
 */
#ifndef WEFT_CORE_INTERNAL_H
#define WEFT_CORE_INTERNAL_H

#include "weft/debug.h"
#include "weft/runtime.h"
#include "weft/sched.h"
#include "weft/thread.h"
#include "arch/context.h"
#include "os/os.h"

#include "core/defs.h"
#include "core/spin.h"
#include "core/tcb.h"
#include "sync/timer.h"
#include "core/vp.h"
#include "core/alloc.h"
#include "core/runtime.h"
#include "core/bundle.h"
#include "core/hook.h"
#include "core/switch.h"
#include "core/idle.h"
#include "core/dispatch.h"
#include "core/overflow.h"

#endif
