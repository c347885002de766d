/* src/sched/schedlib.c - the scheduler library's entry points (weft/schedlib.h):
 * kinds, handler tables, per-bundle state, bundle create and destroy. The
 * schedulers themselves: queue.c (FIFO/LIFO variants), priority.c, and default.c
 * (work-first). */
#include "sched/schedlib.h"

#include <stdlib.h>

#include "weft/runtime.h"

#include "core/internal.h"

int weft_schedlib_kind_valid(unsigned kind) {
  return kind < 8 || kind == WEFT_SCHED_PRIORITY || kind == WEFT_SCHED_WORK_FIRST;
}

const char *weft_schedlib_kind_name(unsigned kind) {
  static const char *const names[8] = {
      "fifo_lazy",          "lifo_lazy",          "fifo_eager",          "lifo_eager",
      "fifo_lazy_affinity", "lifo_lazy_affinity", "fifo_eager_affinity", "lifo_eager_affinity"};
  if (kind < 8) return names[kind];
  if (kind == WEFT_SCHED_WORK_FIRST) return "work_first";
  return kind == WEFT_SCHED_PRIORITY ? "priority" : "invalid";
}

const weft_sched_ops_t *weft_schedlib_ops(unsigned kind) {
  if (!weft_schedlib_kind_valid(kind)) return NULL;
  if (kind == WEFT_SCHED_WORK_FIRST) return &weft__sched_workfirst_ops;
  if (kind == WEFT_SCHED_PRIORITY) return &weft__sched_priority_ops;
  return (kind & WEFT_SCHED_AFFINITY) ? &weft__sched_queue_ops : &weft__sched_queue_local_ops;
}

int weft_schedlib_data_create(unsigned kind, void **out) {
  if (!out || !weft_schedlib_kind_valid(kind)) return WEFT_EINVAL;
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (kind == WEFT_SCHED_WORK_FIRST) {  /* no state beyond the kind */
    weft__schedlib_head_t *h = malloc(sizeof *h);
    if (!h) return WEFT_ENOMEM;
    h->kind = kind;
    *out = h;
    return 0;
  }
  return kind == WEFT_SCHED_PRIORITY ? weft__priority_data_create(out)
                                     : weft__queue_data_create(kind, out);
}

void weft_schedlib_data_destroy(void *data) {
  if (!data) return;
  unsigned kind = ((weft__schedlib_head_t *)data)->kind;
  if (kind == WEFT_SCHED_WORK_FIRST)
    free(data);
  else if (kind == WEFT_SCHED_PRIORITY)
    weft__priority_data_destroy(data);
  else
    weft__queue_data_destroy(data);
}

int weft_schedlib_bundle_create(weft_bundle_t **out, weft_bundle_t *parent, unsigned kind) {
  if (!out || !weft_schedlib_kind_valid(kind)) return WEFT_EINVAL;
  void *data;
  int rc = weft_schedlib_data_create(kind, &data);
  if (rc) return rc;
  weft_bundle_t *b;
  rc = weft_bundle_create(&b, parent, weft_schedlib_ops(kind), data);
  if (rc) {
    weft_schedlib_data_destroy(data);
    return rc;
  }
  /* weft_shutdown frees it with the bundle if it is never destroyed (set before any
   * thread of b exists; the bundle is not yet shared) */
  b->data_free = weft_schedlib_data_destroy;
  *out = b;
  return 0;
}

int weft_schedlib_bundle_destroy(weft_bundle_t *b) {
  void *data = weft_bundle_data(b);
  int rc = weft_bundle_destroy(b);
  if (rc == 0) weft_schedlib_data_destroy(data);
  return rc;
}
