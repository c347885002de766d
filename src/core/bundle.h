/* src/core/bundle.h - bundles and the routing of processor-idle events (bundle.c). */
#ifndef WEFT_CORE_BUNDLE_H
#define WEFT_CORE_BUNDLE_H

#include <stdatomic.h>

#include "weft/sched.h"
#include "core/tcb.h"

/* ---- bundle ----------------------------------------------------------------------- */
/* A bundle's live-thread count, split per VP so that creating and finishing its
 * threads write no shared line (one shared atomic cost X2's T1 twelvefold at 2 VPs):
 * the threads created and finished on one VP (owner-only: relaxed load + store;
 * finished with release), summed by weft_bundle_destroy as weft__live_threads sums the
 * VPs' counters (docs/memory-ordering.md, "Counters"). One cache line each. */
typedef struct {
  _Atomic uint64_t created, finished;
  char pad[WEFT__CACHELINE - 2 * sizeof(uint64_t)];
} weft__bundle_count_t;

struct weft_bundle {
  weft_sched_ops_t ops;          /* copied at creation; read-only */
  const weft_sched_ops_t *ops_id;/* &weft_sched_default for the inlined fast path */
  void *data;
  /* the flags its threads start with (TF_BUNDLE, and TF_CUSTOM / TF_SCHED_YIELD unless
   * the scheduler declares the fast path: weft/sched.h WEFT_SCHED_LOCAL_READY);
   * read-only after creation */
  uint32_t tf;
  weft_bundle_t *parent;
  /* live threads (not counted for the root bundle): created from plain OS threads
   * (an RMW, on that cold path), and count[] below, one per VP of rt.nvps_all */
  _Atomic uint64_t os_created;
  _Atomic long nchildren;
  weft_bundle_t *list_next, *list_prev; /* registry of bundles: rt.bundle_lock */
  /* the bundle tree (weft_bundle_first_child/next_sibling): rt.bundle_lock */
  weft_bundle_t *first_child, *sib_next, *sib_prev;
  /* weft_bundle_stop(): 1 while stopped. Written under the bundle lock, read under it
   * by the idle paths (relaxed: the lock orders it; weft_bundle_continue's
   * weft_sched_notify() fence covers sleepers, see bundle.c), and without it by a
   * leaf scheduler's own-bundle question (relaxed: ordered against stop by the
   * asymmetric pair of bundle.c's leaf_question) */
  _Atomic int stopped;
  /* frees data when weft_shutdown frees a bundle left undestroyed: set by the
   * scheduler library for the state it made (weft_schedlib_bundle_create); NULL for
   * data a user made, which stays the user's */
  void (*data_free)(void *data);
  weft__bundle_count_t count[]; /* nvps_all; cache-line aligned (weft_bundle_create) */
};

/* ---- idle-event routing (bundle.c; docs/schedulers.md) --------------------------- */
/* processor_idle on the focus bundle if it is not the root (NULL otherwise). */
weft_thread_t *weft__bundle_idle_focus(weft_vp_t *vp);
/* processor_idle on every non-root bundle that is not stopped, until one gives a
 * thread: the sweep that guarantees no ready thread is stranded while VPs sleep. */
weft_thread_t *weft__bundle_idle_sweep(weft_vp_t *vp);
/* processor_idle on b for a yield of one of its threads, or for one that blocks in a
 * join or finishes on a VP whose dispatch queue is empty (NULL if b is stopped, or
 * WEFT_SCHED_DISPATCH_ONLY: it keeps no thread). */
weft_thread_t *weft__bundle_yield_idle(weft_bundle_t *b, weft_vp_t *vp);
/* The same for a thread of b that joins or finishes with nothing queued, only while no
 * focus is set (weft_bundle_set_focus: then the idle loop asks the focus first). */
weft_thread_t *weft__bundle_own_idle(weft_bundle_t *b, weft_vp_t *vp);
/* 1 if b or a bundle above it is stopped. */
int weft__bundle_stopped(const weft_bundle_t *b);

/* The root bundle (weft_init), freed by teardown. */
weft_bundle_t *weft__bundle_new_root(void);
void weft__bundle_free_root(weft_bundle_t *b);
/* weft_shutdown's teardown: frees every bundle not destroyed (and the scheduler
 * library's state of each); their handles are dangling from then on. */
void weft__bundle_free_all(void);

static inline int weft__is_default(const weft_bundle_t *b) {
  return b->ops_id == &weft_sched_default;
}

#endif
