/* weft/weft.h - umbrella header: everything in weft's C interface. */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include "weft/common.h"
#include "weft/error.h"
#include "weft/runtime.h"
#include "weft/thread.h"
#include "weft/sched.h"
#include "weft/threadlist.h"
#include "weft/schedlib.h"
#include "weft/sync.h"
#include "weft/hook.h"
#include "weft/vp.h"
#include "weft/trace.h"
#include "weft/spinlock.h"
#include "weft/atomic_int.h"
#include "weft/wire.h"
#include "weft/io.h"

#endif
