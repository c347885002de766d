/* src/core/vp.c - affinity and migration, do-when-idle functions (weft/vp.h). */
#include <sched.h>

#include "core/internal.h"
#include "weft/vp.h"

/* ---- affinity ------------------------------------------------------------------ */

/* Continuation of a migration: the caller is saved; queue it on its new VP. */
static void migrate_cont(void *p) {
  weft_thread_t *t = p;
  if (weft__tflags(t) & WEFT__TF_FPALL) weft__ctx_fp_save(&t->ctx); /* switch mode ALL */
  weft__enqueue(weft__rt.vps[(unsigned)t->affinity % (unsigned)weft__rt.nvps], t);
}

int weft_set_affinity(int vproc) {
  if (vproc < -1) return WEFT_EINVAL;
  weft_vp_t *vp = weft__vp();
  /* a VP's idle loop (do-when-idle functions, idle hooks) runs no thread: not a weft
   * thread either (it dereferenced a NULL current) */
  if (!vp || !vp->current) return WEFT_EPERM;
  weft_thread_t *self = vp->current;
  self->affinity = vproc;  /* the thread's own field: only it writes it */
  if (vproc < 0 || (weft__tflags(self) & WEFT__TF_BUNDLE)) return 0; /* a hint for its scheduler */
  int target = (int)((unsigned)vproc % (unsigned)weft__rt.nvps);
  /* One move: queued on the target VP, the caller may still be taken by an idle VP
   * before the target runs it (stealing is what keeps idle VPs busy). Retrying until
   * it lands livelocked oversubscribed runs, where idle VPs steal at once. */
  if (vp->index != target) weft__block(vp, self, migrate_cont, self);
  return 0;
}

int weft_get_affinity(void) {
  weft_vp_t *vp = weft__vp();
  /* a VP's idle loop (do-when-idle functions, idle hooks) runs no thread */
  weft_thread_t *t = vp ? vp->current : weft__wired_self();
  return t ? t->affinity : -1;
}

int weft_cpu_self(void) { return sched_getcpu(); }

/* ---- do-when-idle functions ------------------------------------------------------
 * A fixed table: add writes a slot and then publishes the count (release); idle VPs
 * load the count (acquire) and call the slots below it. Remove compacts under the
 * lock; an idle VP racing with it may call a removed entry once more (vp.h says so). */

int weft_idle_func_add(void (*fn)(void *arg), void *arg) {
  if (!fn) return WEFT_EINVAL;
  if (!weft_is_running()) return WEFT_ENOTINIT;
  weft__spin_lock(&weft__rt.idlef_lock);
  int n = atomic_load_explicit(&weft__rt.nidlef, memory_order_relaxed);
  if (n == WEFT_IDLE_FUNCS_MAX) {
    weft__spin_unlock(&weft__rt.idlef_lock);
    return WEFT_EAGAIN;
  }
  atomic_store_explicit(&weft__rt.idlef[n].fn, fn, memory_order_relaxed);
  atomic_store_explicit(&weft__rt.idlef[n].arg, arg, memory_order_relaxed);
  atomic_store_explicit(&weft__rt.nidlef, n + 1, memory_order_release);
  weft__spin_unlock(&weft__rt.idlef_lock);
  weft_sched_notify();  /* a sleeping VP should start calling it */
  return 0;
}

int weft_idle_func_remove(void (*fn)(void *arg), void *arg) {
  weft__spin_lock(&weft__rt.idlef_lock);
  int n = atomic_load_explicit(&weft__rt.nidlef, memory_order_relaxed);
  int i = 0;
  while (i < n && !(atomic_load_explicit(&weft__rt.idlef[i].fn, memory_order_relaxed) == fn &&
                    atomic_load_explicit(&weft__rt.idlef[i].arg, memory_order_relaxed) == arg))
    i++;
  if (i == n) {
    weft__spin_unlock(&weft__rt.idlef_lock);
    return WEFT_EINVAL;
  }
  for (; i + 1 < n; i++) {
    atomic_store_explicit(&weft__rt.idlef[i].fn,
                          atomic_load_explicit(&weft__rt.idlef[i + 1].fn, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&weft__rt.idlef[i].arg,
                          atomic_load_explicit(&weft__rt.idlef[i + 1].arg, memory_order_relaxed),
                          memory_order_relaxed);
  }
  atomic_store_explicit(&weft__rt.nidlef, n - 1, memory_order_release);
  weft__spin_unlock(&weft__rt.idlef_lock);
  return 0;
}

int weft__idle_funcs_run(void) {
  /* acquire: pairs with add's release store of the count */
  int n = atomic_load_explicit(&weft__rt.nidlef, memory_order_acquire);
  for (int i = 0; i < n; i++) {
    void (*fn)(void *) = atomic_load_explicit(&weft__rt.idlef[i].fn, memory_order_relaxed);
    void *arg = atomic_load_explicit(&weft__rt.idlef[i].arg, memory_order_relaxed);
    if (fn) fn(arg);
  }
  return n;
}
