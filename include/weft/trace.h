/* weft/trace.h - a tracer built on the event callbacks (weft/hook.h), writing Chrome
 * trace-event JSON that opens in ui.perfetto.dev or chrome://tracing, and a
 * statistics dump. See docs/tracing.md for the event mapping and the limits.
 *
 * weft_trace_start() allocates one bounded buffer per VP (and one, under a lock, for
 * plain OS threads) and installs its callbacks; from then on each event is one store
 * into its VP's buffer: no allocation, no lock on a VP. A full buffer drops the
 * newer events and counts them; the output says how many in its metadata.
 * weft_trace_stop() uninstalls the callbacks and waits for those already running;
 * weft_trace_write() turns the buffers into JSON. The recorded data stays until the
 * next weft_trace_start() or weft_trace_discard().
 *
 * All functions are callable from a weft thread or a plain OS thread, never from a
 * callback, and never switch the caller (start and stop may spin briefly). They are
 * not meant to be called concurrently with one another.
 */
#ifndef WEFT_TRACE_H
#define WEFT_TRACE_H

#include <stdio.h>

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Events each buffer holds when the configuration leaves it 0 (32 bytes each). */
#define WEFT_TRACE_DEFAULT_CAPACITY 65536

typedef struct weft_trace_config {
  size_t capacity;   /* events per VP buffer (and for the plain-OS-thread buffer); 0: default */
  const char *path;  /* where weft_trace_write(NULL) writes (copied); NULL: none */
} weft_trace_config_t;

/* weft_trace_config_init() fills *cfg with the defaults. Never fails. */
WEFT_API void weft_trace_config_init(weft_trace_config_t *cfg);

/* weft_trace_start() discards any earlier recording, allocates the buffers for the
 * weft_vp_count() VPs now running and installs the tracer's callbacks (cfg NULL:
 * defaults). Call between weft_init() and weft_shutdown().
 * Errors: WEFT_ENOTINIT (weft not running), WEFT_EALREADY (already tracing),
 * WEFT_ENOMEM (also for a capacity no buffer can hold), WEFT_EPERM (built with
 * WEFT_HOOKS=OFF), WEFT_EAGAIN (an event's
 * callback stack is full); on error nothing stays installed or allocated. */
WEFT_API int weft_trace_start(const weft_trace_config_t *cfg);

/* weft_trace_stop() uninstalls the callbacks and returns once every call of them
 * already under way has finished; the recording is kept for weft_trace_write().
 * Callable after weft_shutdown() too. weft_shutdown() stops a recording that is
 * still on, however it was started (once every thread has finished), and writes it
 * to the configuration's path if it has one; a weft_trace_stop() after it then gets
 * WEFT_EINVAL, and weft_trace_write() still writes the recording.
 * Errors: WEFT_EINVAL (not tracing). */
WEFT_API int weft_trace_stop(void);

/* weft_trace_is_on() returns 1 between weft_trace_start() and weft_trace_stop(). */
WEFT_API int weft_trace_is_on(void);

/* weft_trace_write() writes the recording as Chrome trace-event JSON to `path`
 * (NULL: the configuration's path). Call after weft_trace_stop().
 * Errors: WEFT_EBUSY (still tracing), WEFT_EINVAL (nothing recorded, or no path),
 * WEFT_ESYS (the file could not be written; errno tells why). */
WEFT_API int weft_trace_write(const char *path);

/* weft_trace_write_file() is weft_trace_write() to an open stream (not closed). */
WEFT_API int weft_trace_write_file(FILE *f);

/* weft_trace_dropped() returns how many events the recording lost to full
 * buffers (all buffers together). */
WEFT_API uint64_t weft_trace_dropped(void);

/* weft_trace_discard() frees the recording (stops tracing first if it is on). */
WEFT_API void weft_trace_discard(void);

/* weft_trace_from_env(): if the environment variable WEFT_TRACE names a file, starts
 * tracing (capacity from WEFT_TRACE_CAPACITY if set; a value that is not a positive
 * number is reported on stderr and the default used; a start that fails is reported
 * on stderr too) and arranges, with atexit(),
 * for the trace to be stopped and written there when the process exits; returns 1
 * if it started, 0 if WEFT_TRACE is unset or empty, or an error of
 * weft_trace_start(). weft_init() calls it; weft_shutdown() then stops the
 * recording and writes the file. */
WEFT_API int weft_trace_from_env(void);

/* weft_trace_stats_print() prints a table to f: per VP, the switches (SAVE events),
 * blocks, idle periods, idle time, steals (STEAL events: this VP took threads queued
 * for another) and the threads they took, counted by the tracer's callbacks since
 * weft_trace_start() (whether or not the buffers overflowed), the events recorded
 * ("-" while the recording runs; the count after weft_trace_stop()) and dropped, then
 * the process-wide
 * totals of weft_debug_stats() (steals, sleeps) and weft_sync_stats() (blocks,
 * blocks that idled a VP), which are not per VP. Exact when quiescent. */
WEFT_API void weft_trace_stats_print(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
