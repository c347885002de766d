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

/* The creations allowed to VPs other than `except` (NULL: none excepted) and not made
 * yet: the unused parts of their batches. relaxed: an estimate (vp.h). */
static long granted_unused(const weft_vp_t *except) {
  weft__rt_t *rt = &weft__rt;
  long unused = 0;
  for (int i = 0; i < rt->nvps_all; i++) {
    weft_vp_t *v = rt->vps[i];
    if (v == except) continue;
    long g = atomic_load_explicit(&v->id_grant, memory_order_relaxed);
    if (!g) continue;
    uint64_t made = atomic_load_explicit(&v->n_created, memory_order_relaxed) -
                    atomic_load_explicit(&v->id_grant_base, memory_order_relaxed);
    if (made < (uint64_t)g) unused += g - (long)made;
  }
  return unused;
}

/* weft_create's check of cfg.max_threads, once per batch: the batch is an even share
 * (over 2 nvps) of the room left, at least 1, so batches shrink as the limit nears.
 * The room left is the limit less the live count and less what the other VPs were
 * allowed and have not created yet: a VP that took a batch early and creates from it
 * late would otherwise go past the limit by that whole batch (up to 1,024 threads a
 * VP, measured) after the others had filled it. So the live count passes the limit
 * only by the creations that race with the check, about nvps at most. */
long weft__create_limit(weft_vp_t *vp, long cap) {
  weft__rt_t *rt = &weft__rt;
  long live = weft__live_threads() + granted_unused(vp), max = rt->cfg.max_threads;
  long batch = 0;
  if (live < max) {
    batch = (max - live) / (2 * (long)rt->nvps);
    if (batch < 1) batch = 1;
    if (batch > cap) batch = cap;  /* the ids left in the VP's block */
  }
  /* relaxed: an estimate (vp.h); a reader between the two stores is off by at most
   * this batch for that moment, as a creation racing with its read is */
  atomic_store_explicit(&vp->id_grant_base,
                        atomic_load_explicit(&vp->n_created, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&vp->id_grant, batch, memory_order_relaxed);
  return batch;
}

void weft__create_grant_release(weft_vp_t *vp) {
  vp->id_end = vp->id_next;  /* the next creation here checks the limit again */
  atomic_store_explicit(&vp->id_grant, 0, memory_order_relaxed);
}

int weft__create_os_allowed(void) {
  return weft__live_threads() + granted_unused(NULL) < weft__rt.cfg.max_threads;
}

static void debug_stats(weft_debug_stats_t *out) {
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

void weft_debug_stats(weft_debug_stats_t *out) {
  memset(out, 0, sizeof *out);
  /* a plain OS thread reads inside its gate: weft_shutdown() frees the VPs once no
   * such call is inside (runtime.h, weft__os_read_enter) */
  int g = weft__os_read_enter();
  if (!g) return;
  debug_stats(out);
  weft__os_read_leave(g);
}
