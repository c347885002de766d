/* src/sched/schedlib.h - what the scheduler-library files share (weft/schedlib.h). */
#ifndef WEFT_SRC_SCHEDLIB_H
#define WEFT_SRC_SCHEDLIB_H

#include "weft/schedlib.h"

/* Every state from weft_schedlib_data_create() starts with its kind, so that
 * weft_schedlib_data_destroy() can tell which family frees it. */
typedef struct weft__schedlib_head {
  unsigned kind;
} weft__schedlib_head_t;

/* queue.c: FIFO/LIFO x lazy/eager x affinity */
extern const weft_sched_ops_t weft__sched_queue_ops;       /* with AFFINITY */
extern const weft_sched_ops_t weft__sched_queue_local_ops; /* without: LOCAL_READY */
int weft__queue_data_create(unsigned kind, void **out);
void weft__queue_data_destroy(void *data);

/* default.c: the default policy with work-first creation (WEFT_SCHED_WORK_FIRST);
 * its state is a bare head */
extern const weft_sched_ops_t weft__sched_workfirst_ops;

/* priority.c */
extern const weft_sched_ops_t weft__sched_priority_ops;
int weft__priority_data_create(void **out);

/* The library's own allocations go through these (src/core/alloc.c): plain malloc
 * memory (free it with free()), not counted, but weft_debug_fail_alloc() can make
 * them fail, so the recovery paths are tested. */
void *weft__sys_malloc_uncounted(size_t size);
void *weft__sys_aligned_uncounted(size_t align, size_t size);
void weft__priority_data_destroy(void *data);

#endif
