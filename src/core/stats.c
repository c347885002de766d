/* src/core/stats.c - counting threads: the live count (never below the true one),
 * weft_create's batches under cfg.max_threads, and weft_debug_stats. */
#include <string.h>

#include "core/internal.h"

/* The live count: every finished counter first (acquire), then every created
 * counter. It never undercounts: a finish we count was stored (release) after its
 * thread's creation was counted, on whatever VP, so the later load of that creator's
 * counter sees the creation (coherence); and a thread created by a thread whose
 * finish we count is counted created for the same reason. Hence 0 means every
 * thread that was ever created has finished, unless a thread we did not count as
 * created creates one, and by the argument above only the main thread and plain OS
 * threads can (docs/memory-ordering.md "Counters" has the proof). Concurrent
 * finishes may make it high, never low. */
long weft__live_threads(void) {
  weft__rt_t *rt = &weft__rt;
  uint64_t c = 0, f = 0;
  for (int i = 0; i < rt->nvps_all; i++)  /* the monitor's spares count too */
    f += atomic_load_explicit(&rt->vps[i]->n_finished, memory_order_acquire);
  /* seq_cst (RMW-written): also ordered after the loads above */
  c += atomic_load_explicit(&rt->os_created, memory_order_seq_cst);
  for (int i = 0; i < rt->nvps_all; i++)
    c += atomic_load_explicit(&rt->vps[i]->n_created, memory_order_relaxed);
  return (long)(c - f);
}

/* weft_create's check of cfg.max_threads, once per batch: the batch is an even share
 * (over 2 nvps) of the room left, at least 1, so batches shrink as the limit nears
 * and the live count passes it by about nvps at most. */
long weft__create_limit(weft_vp_t *vp) {
  (void)vp;
  weft__rt_t *rt = &weft__rt;
  long live = weft__live_threads(), max = rt->cfg.max_threads;
  if (live >= max) return 0;
  long batch = (max - live) / (2 * (long)rt->nvps);
  return batch > 0 ? batch : 1;
}

void weft_debug_stats(weft_debug_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (!weft_is_running()) return;
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    weft_vp_t *v = weft__rt.vps[i];
    out->created += atomic_load_explicit(&v->n_created, memory_order_relaxed);
    out->finished += atomic_load_explicit(&v->n_finished, memory_order_relaxed);
    out->steals += atomic_load_explicit(&v->n_steals, memory_order_relaxed);
    out->sleeps += atomic_load_explicit(&v->n_sleeps, memory_order_relaxed);
    out->tcb_cached += (uint64_t)atomic_load_explicit(&v->ntcb, memory_order_relaxed);
    out->stacks_cached += (uint64_t)atomic_load_explicit(&v->nstk, memory_order_relaxed);
  }
  out->created += atomic_load(&weft__rt.os_created);
  weft__spin_lock(&weft__rt.pool.lock);
  out->tcb_cached += (uint64_t)weft__rt.pool.ntcbs;
  out->stacks_cached += (uint64_t)weft__rt.pool.nstacks;
  weft__spin_unlock(&weft__rt.pool.lock);
}
