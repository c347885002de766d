/* src/core/bundle.c - bundles, the bundle tree and the focus bundle, stopping and
 * continuing a bundle, the routing of processor-idle events (docs/schedulers.md,
 * "The bundle tree, the focus and idle events"), and the accessors schedulers call
 * (the dispatch-queue services are in dispatch.c).
 *
 * Locking. The bundle lock guards the registry, the tree links, the focus and the
 * stopped flags, and is held around every processor_idle the kernel raises (idle
 * loop, last look before sleeping, yield, weft_sched_idle_pass), so a handler sees a
 * tree that does not change under it and no bundle it can reach is destroyed while it
 * runs. It is a reader-writer lock with a reader slot per VP, so that idle events on
 * different VPs share it without writing a common line (one spinlock made the
 * scheduler library's FIFO serialise every VP's joins and finishes on it, X2):
 *   - shared (idle_lock): a VP's kernel thread exchanges 1 into its VP's idle_event,
 *     then reads rt.bundle_writer; if a change holds the lock, it clears the slot and
 *     waits for the change to end. Leaving: idle_event = 0 (release). A plain OS thread
 *     (no VP: weft_sched_idle_pass misused) takes the exclusive side instead.
 *   - exclusive (tree_lock): rt.bundle_lock among changes, then bundle_writer = 1
 *     (exchange), then every VP's idle_event is read until it is 0. Leaving:
 *     bundle_writer = 0 (release), then unlock.
 * The slot and the writer flag are a store-load (Dekker) pair: each side stores its
 * word, then loads the other's, all seq_cst, so at least one sees the other and waits;
 * the release that ends the side it waited for pairs with its acquire load, so the two
 * critical sections are ordered (docs/memory-ordering.md §6a). Not an asymmetric pair
 * (§6b): a program may change the tree thousands of times a second (a bundle per
 * request), and a membarrier per change then cost more than the readers' exchanges.
 * `idle_held` says that this kernel thread already holds the lock (a pass from inside
 * a handler must not take it again). Lock order: the bundle lock, then a dispatch
 * queue's lock or a scheduler's own lock, then idle_lock.
 */
#include <string.h>

#include "core/internal.h"
#include "core/monitor.h"
#include "weft/hook.h"

static WEFT__TLS int idle_held;   /* this kernel thread holds bundle_lock for idle events */
#ifdef WEFT_CHECKED
static WEFT__TLS int leaf_held;   /* this kernel thread raises a leaf question (checked) */
#endif
static WEFT__TLS int pass_depth;  /* nesting of weft_sched_idle_pass on this kernel thread */

/* The calls that take the bundle lock themselves would deadlock inside processor_idle
 * (the lock is held around it): a checked build says so instead. */
#ifdef WEFT_CHECKED
#define NOT_IN_IDLE_HANDLER(what) \
  WEFT__ASSERT(!idle_held && !leaf_held, what " called from a processor_idle handler (weft/sched.h)")
#else
#define NOT_IN_IDLE_HANDLER(what) ((void)0)
#endif

/* The exclusive side of the bundle lock (see "Locking" above). */
static void tree_lock(void) {
  weft__spin_lock(&weft__rt.bundle_lock);
  /* seq_cst: the store-load pair with idle_lock */
  atomic_exchange_explicit(&weft__rt.bundle_writer, 1, memory_order_seq_cst);
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    /* seq_cst, so acquire too: pairs with the release that ends a VP's idle event */
    while (atomic_load_explicit(&weft__rt.vps[i]->idle_event, memory_order_seq_cst))
      weft__os_relax();
  }
}

static void tree_unlock(void) {
  /* release: pairs with idle_lock's load of the flag that reads it 0 */
  atomic_store_explicit(&weft__rt.bundle_writer, 0, memory_order_release);
  weft__spin_unlock(&weft__rt.bundle_lock);
}

weft_bundle_t *weft__bundle_new_root(void) {
  weft_bundle_t *b = weft__sys_calloc(1, sizeof *b);
  if (!b) return NULL;
  b->ops = weft_sched_default;
  b->ops_id = &weft_sched_default;  /* the only bundle whose handlers are inlined */
  return b;
}

void weft__bundle_free_root(weft_bundle_t *b) { weft__sys_free(b); }

void weft__bundle_free_all(void) {
  /* no thread and no VP is left: nothing else reads the registry */
  weft_bundle_t *b = weft__rt.bundles;
  while (b) {
    weft_bundle_t *n = b->list_next;
    if (b->data_free) b->data_free(b->data);
    weft__sys_free(b);
    b = n;
  }
  weft__rt.bundles = NULL;
  atomic_store_explicit(&weft__rt.nbundles, 0, memory_order_relaxed);
}

weft_bundle_t *weft_bundle_root(void) { return weft_is_running() ? weft__rt.root : NULL; }

static int bundle_create(weft_bundle_t **out, weft_bundle_t *parent,
                         const weft_sched_ops_t *ops, void *data) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (!out || !ops || !ops->thread_created || !ops->thread_unblocked ||
      (ops->flags & ~WEFT_SCHED_FLAGS_ALL))
    return WEFT_EINVAL;
  NOT_IN_IDLE_HANDLER("weft_bundle_create");
  size_t size = sizeof(weft_bundle_t) + (size_t)weft__rt.nvps_all * sizeof(weft__bundle_count_t);
  weft_bundle_t *b = weft__sys_calloc_aligned(size, WEFT__CACHELINE);
  if (!b) return WEFT_ENOMEM;
  b->ops = *ops;
  b->ops_id = ops == &weft_sched_default ? NULL : ops; /* never the inlined path */
  b->data = data;
  /* the declared fast path (weft/sched.h): with LOCAL_READY and none of the handlers
   * the general paths raise (started, terminated, blocked), the threads take the root's
   * inlined paths after their creation; yields reach thread_unblocked unless it is
   * known to be a plain enqueue on the caller's VP */
  unsigned fl = ops->flags;
  int fast = (fl & WEFT_SCHED_LOCAL_READY) && !ops->thread_started &&
             !ops->thread_terminated && !ops->thread_blocked;
  b->tf = WEFT__TF_BUNDLE | (fast ? 0 : WEFT__TF_CUSTOM) |
          ((fl & (WEFT_SCHED_DISPATCH_ONLY | WEFT_SCHED_LOCAL_READY)) ? 0 : WEFT__TF_SCHED_YIELD);
  b->parent = parent ? parent : weft__rt.root;
  atomic_fetch_add_explicit(&b->parent->nchildren, 1, memory_order_relaxed);
  tree_lock();
  b->sib_next = b->parent->first_child;  /* newest child first */
  if (b->sib_next) b->sib_next->sib_prev = b;
  b->parent->first_child = b;
  b->list_next = weft__rt.bundles;
  if (b->list_next) b->list_next->list_prev = b;
  weft__rt.bundles = b;
  atomic_fetch_add_explicit(&weft__rt.nbundles, 1, memory_order_relaxed);
  tree_unlock();
  /* pairs with a sleeper's fence before it reads nbundles (idle.c, vp_sleep): either it
   * sees this bundle and makes the heavy fence, or the notifies of this bundle's events
   * see it asleep */
  atomic_thread_fence(memory_order_seq_cst);
  weft_bundle_t *p = b->parent;
  if (p->ops.bundle_created) p->ops.bundle_created(p, b);
  *out = b;
  return 0;
}

/* The calls below that a plain OS thread may make pass its entry gate (runtime.h,
 * weft__os_read_enter) around what they do: weft_shutdown() frees the VPs, the root
 * bundle and the registry only once no such call is inside. */
int weft_bundle_create(weft_bundle_t **out, weft_bundle_t *parent,
                       const weft_sched_ops_t *ops, void *data) {
  int g = weft__os_read_enter();
  if (!g) return WEFT_ENOTINIT;
  int rc = bundle_create(out, parent, ops, data);
  weft__os_read_leave(g);
  return rc;
}

/* b's live threads, summed as weft__live_threads sums the VPs' counters: every finished
 * count first (acquire: pairs with weft__bundle_count_finished's release), then every
 * created count. Never below the true count; 0 means every thread of b created by a
 * thread that does not race with this call has finished (docs/memory-ordering.md,
 * "Counters": the same proof, with b's counters for the VPs'). */
static uint64_t bundle_live_threads(weft_bundle_t *b) {
  uint64_t c = 0, f = 0;
  int n = weft__rt.nvps_all;
  for (int i = 0; i < n; i++) f += atomic_load_explicit(&b->count[i].finished, memory_order_acquire);
  /* seq_cst (RMW-written): also ordered after the loads above */
  c += atomic_load_explicit(&b->os_created, memory_order_seq_cst);
  for (int i = 0; i < n; i++) c += atomic_load_explicit(&b->count[i].created, memory_order_relaxed);
  return c - f;
}

static int bundle_destroy(weft_bundle_t *b) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (!b || b == weft__rt.root) return WEFT_EINVAL;
  NOT_IN_IDLE_HANDLER("weft_bundle_destroy");
  if (bundle_live_threads(b) != 0 ||
      /* acquire: pairs with the release decrement in weft_bundle_destroy */
      atomic_load_explicit(&b->nchildren, memory_order_acquire) != 0)
    return WEFT_EBUSY;
  tree_lock();
  if (b->sib_prev) b->sib_prev->sib_next = b->sib_next;
  else b->parent->first_child = b->sib_next;
  if (b->sib_next) b->sib_next->sib_prev = b->sib_prev;
  /* the focus moves up to the parent; a stopped bundle no longer counts */
  if (atomic_load_explicit(&weft__rt.focus, memory_order_relaxed) == b)
    atomic_store_explicit(&weft__rt.focus, b->parent, memory_order_relaxed);
  if (atomic_load_explicit(&b->stopped, memory_order_relaxed))
    atomic_fetch_sub_explicit(&weft__rt.nstopped, 1, memory_order_relaxed);
  if (b->list_prev) b->list_prev->list_next = b->list_next;
  else weft__rt.bundles = b->list_next;
  atomic_fetch_sub_explicit(&weft__rt.nbundles, 1, memory_order_relaxed);
  if (b->list_next) b->list_next->list_prev = b->list_prev;
  tree_unlock();
  weft_bundle_t *p = b->parent;
  if (p->ops.bundle_terminated) p->ops.bundle_terminated(p, b);
  atomic_fetch_sub_explicit(&p->nchildren, 1, memory_order_release);
  weft__sys_free(b);
  return 0;
}

int weft_bundle_destroy(weft_bundle_t *b) {
  int g = weft__os_read_enter();
  if (!g) return WEFT_ENOTINIT;
  int rc = bundle_destroy(b);
  weft__os_read_leave(g);
  return rc;
}

void *weft_bundle_data(const weft_bundle_t *b) { return b ? b->data : NULL; }

weft_bundle_t *weft_thread_bundle(const weft_thread_t *t) { return t ? t->bundle : NULL; }

/* ---- the tree and the focus ---------------------------------------------------------- */

weft_bundle_t *weft_bundle_parent(const weft_bundle_t *b) { return b ? b->parent : NULL; }

weft_bundle_t *weft_bundle_first_child(const weft_bundle_t *b) {
  return b ? b->first_child : NULL;
}

weft_bundle_t *weft_bundle_next_sibling(const weft_bundle_t *b) { return b ? b->sib_next : NULL; }

/* 1 if b is the root or in the registry (bundle_lock held). */
static int bundle_live_locked(const weft_bundle_t *b) {
  if (b == weft__rt.root) return 1;
  for (const weft_bundle_t *x = weft__rt.bundles; x; x = x->list_next)
    if (x == b) return 1;
  return 0;
}

static int bundle_set_focus(weft_bundle_t *b) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (!b) b = weft__rt.root;
  NOT_IN_IDLE_HANDLER("weft_bundle_set_focus");
  tree_lock();
  int ok = bundle_live_locked(b);
  if (ok) atomic_store_explicit(&weft__rt.focus, b, memory_order_relaxed);
  tree_unlock();
  if (!ok) return WEFT_EINVAL;
  /* a VP may have gone to sleep after the old focus said it had nothing, while the new
   * one holds threads: as after any change that makes threads findable */
  weft_sched_notify();
  return 0;
}

int weft_bundle_set_focus(weft_bundle_t *b) {
  int g = weft__os_read_enter();
  if (!g) return WEFT_ENOTINIT;
  int rc = bundle_set_focus(b);
  weft__os_read_leave(g);
  return rc;
}

weft_bundle_t *weft_bundle_focus(void) {
  int g = weft__os_read_enter();
  if (!g) return NULL;
  weft_bundle_t *f = NULL;
  if (weft_is_running()) {
    NOT_IN_IDLE_HANDLER("weft_bundle_focus");
    tree_lock();
    f = atomic_load_explicit(&weft__rt.focus, memory_order_relaxed);
    tree_unlock();
  }
  weft__os_read_leave(g);
  return f;
}

/* ---- stop and continue ---------------------------------------------------------------- */

int weft__bundle_stopped(const weft_bundle_t *b) {
  /* relaxed: a hint outside the lock; the idle paths call this under the bundle lock,
   * which orders it against stop and continue, and leaf questions after the light
   * fence of their pair with stop (leaf_question) */
  if (!atomic_load_explicit(&weft__rt.nstopped, memory_order_relaxed)) return 0;
  for (; b && b != weft__rt.root; b = b->parent)
    if (atomic_load_explicit(&b->stopped, memory_order_relaxed)) return 1;
  return b && atomic_load_explicit(&b->stopped, memory_order_relaxed);
}

static int set_stopped(weft_bundle_t *b, int on) {
  if (!weft_is_running()) return WEFT_ENOTINIT;
  if (!b) return WEFT_EINVAL;
  NOT_IN_IDLE_HANDLER("weft_bundle_stop/continue");
  tree_lock();
  int ok = bundle_live_locked(b);
  if (ok && atomic_load_explicit(&b->stopped, memory_order_relaxed) != on) {
    atomic_store_explicit(&b->stopped, on, memory_order_relaxed);
    atomic_fetch_add_explicit(&weft__rt.nstopped, on ? 1 : -1, memory_order_relaxed);
  }
  tree_unlock();
  if (!ok) return WEFT_EINVAL;
  if (on) {
    /* the heavy side of the leaf questions' pair (leaf_question): a question that did
     * not see the flag has its slot set; wait until it has returned (acquire: pairs
     * with its release) */
    weft__fence_heavy();
    for (int i = 0; i < weft__rt.nvps_all; i++)
      while (atomic_load_explicit(&weft__rt.vps[i]->leaf_ask, memory_order_acquire)) weft__os_relax();
  }
  /* continue: threads held back are findable again. The flag was cleared before the
   * seq_cst fence of weft_sched_notify(); a VP about to sleep reads it (under the
   * bundle lock) after its own seq_cst fence, so either it asks the bundle or we see
   * it asleep and wake it (docs/memory-ordering.md) */
  if (!on) weft_sched_notify();
  return 0;
}

static int set_stopped_gated(weft_bundle_t *b, int on) {
  int g = weft__os_read_enter();
  if (!g) return WEFT_ENOTINIT;
  int rc = set_stopped(b, on);
  weft__os_read_leave(g);
  return rc;
}

int weft_bundle_stop(weft_bundle_t *b) { return set_stopped_gated(b, 1); }

int weft_bundle_continue(weft_bundle_t *b) { return set_stopped_gated(b, 0); }

int weft_bundle_is_stopped(const weft_bundle_t *b) {
  if (!b) return 0;
  if (idle_held) return weft__bundle_stopped(b); /* the lock is ours already */
  int g = weft__os_read_enter();
  if (!g) return 0;
  int s = 0;
  if (weft_is_running()) {
    tree_lock();
    s = weft__bundle_stopped(b);
    tree_unlock();
  }
  weft__os_read_leave(g);
  return s;
}

/* ---- routing processor-idle events ------------------------------------------------------ */

static void idle_lock(void) {
  weft_vp_t *me = weft__vp();
  if (WEFT__UNLIKELY(!me)) {
    tree_lock();
    idle_held = 2;
    return;
  }
  /* seq_cst: the store-load pair with tree_lock (see "Locking" above); the load is
   * also acquire, pairing with tree_unlock's release of the flag */
  for (;;) {
    atomic_exchange_explicit(&me->idle_event, 1, memory_order_seq_cst);
    if (WEFT__LIKELY(!atomic_load_explicit(&weft__rt.bundle_writer, memory_order_seq_cst))) break;
    /* release: a change that read the slot 1 may go on */
    atomic_store_explicit(&me->idle_event, 0, memory_order_release);
    while (atomic_load_explicit(&weft__rt.bundle_writer, memory_order_relaxed)) weft__os_relax();
  }
  idle_held = 1;
}

static void idle_unlock(void) {
  if (WEFT__UNLIKELY(idle_held == 2)) {
    idle_held = 0;
    tree_unlock();
    return;
  }
  idle_held = 0;
  /* release: pairs with tree_lock's acquire load of the slot */
  atomic_store_explicit(&weft__vp()->idle_event, 0, memory_order_release);
}

/* processor_idle on b, unless it is stopped (bundle_lock held). The root's handler
 * (the default scheduler: it only moves dispatched threads) is never stopped. */
static weft_thread_t *ask(weft_bundle_t *b, weft_vp_t *vp) {
  if (!b->ops.processor_idle || (b != weft__rt.root && weft__bundle_stopped(b))) return NULL;
  return b->ops.processor_idle(b, vp);
}

weft_thread_t *weft__bundle_idle_focus(weft_vp_t *vp) {
  /* relaxed: a hint; re-read under the lock */
  if (atomic_load_explicit(&weft__rt.focus, memory_order_relaxed) == weft__rt.root) return NULL;
  idle_lock();
  weft_bundle_t *f = atomic_load_explicit(&weft__rt.focus, memory_order_relaxed);
  weft_thread_t *t = f != weft__rt.root ? ask(f, vp) : NULL;
  idle_unlock();
  return t;
}

weft_thread_t *weft__bundle_idle_sweep(weft_vp_t *vp) {
  weft_thread_t *t = NULL;
  if (!atomic_load_explicit(&weft__rt.nbundles, memory_order_relaxed)) return NULL;
  idle_lock();
  for (weft_bundle_t *b = weft__rt.bundles; b && !t; b = b->list_next) t = ask(b, vp);
  idle_unlock();
  return t;
}

/* The own-bundle question of a leaf scheduler (WEFT_SCHED_IDLE_LEAF), without the
 * bundle lock: b stays (the asking thread still counts in it), the handler reaches
 * nothing else of the tree, and weft_bundle_stop waits for the questions under way once
 * it has set the flag. The slot and the stopped flags are the light side of an
 * asymmetric store-load pair (docs/memory-ordering.md §6b): either the question sees
 * the flag, or stop sees the slot and waits for its release. */
static weft_thread_t *leaf_question(weft_bundle_t *b, weft_vp_t *vp) {
  atomic_store_explicit(&vp->leaf_ask, 1, memory_order_relaxed);
  weft__fence_light();
#ifdef WEFT_CHECKED
  leaf_held = 1;
#endif
  weft_thread_t *t = weft__bundle_stopped(b) ? NULL : b->ops.processor_idle(b, vp);
#ifdef WEFT_CHECKED
  leaf_held = 0;
#endif
  /* release: pairs with set_stopped's acquire load of the slot */
  atomic_store_explicit(&vp->leaf_ask, 0, memory_order_release);
  return t;
}

weft_thread_t *weft__bundle_yield_idle(weft_bundle_t *b, weft_vp_t *vp) {
  /* a DISPATCH_ONLY scheduler keeps no thread to itself: its processor_idle could only
   * take threads from dispatch queues (the idle loop's business), so its threads yield,
   * join and finish as the root's do (no bundle lock on those paths) */
  if (!b->ops.processor_idle || (b->ops.flags & WEFT_SCHED_DISPATCH_ONLY)) return NULL;
  if (b->ops.flags & WEFT_SCHED_IDLE_LEAF) return leaf_question(b, vp);
  idle_lock();
  /* ask() without its tests that cannot fail here: the handler is set, and b is not
   * the root (whose scheduler is DISPATCH_ONLY) */
  weft_thread_t *t = weft__bundle_stopped(b) ? NULL : b->ops.processor_idle(b, vp);
  idle_unlock();
  return t;
}

weft_thread_t *weft__bundle_own_idle(weft_bundle_t *b, weft_vp_t *vp) {
  /* relaxed: a hint. With a focus set, the VP goes through the idle loop, where the
   * focus decides who is asked first (a stale read only changes that order once) */
  if (atomic_load_explicit(&weft__rt.focus, memory_order_relaxed) != weft__rt.root) return NULL;
  return weft__bundle_yield_idle(b, vp);
}

weft_thread_t *weft_sched_idle_pass(weft_bundle_t *to, weft_vp_t *vp) {
  if (!to || !vp || pass_depth >= WEFT_SCHED_PASS_MAX) return NULL;
  int take = !idle_held;
  if (take) idle_lock();
  pass_depth++;
  weft_thread_t *t = ask(to, vp);
  pass_depth--;
  if (take) idle_unlock();
  return t;
}

/* ---- kernel services ---------------------------------------------------------------- */

int weft_sched_bind_stack(weft_thread_t *t) {
  if (!t) return WEFT_EINVAL;
  if (t->ctx.sp) return 0;
  return weft__stack_bind(weft__vp(), t);
}

weft_vp_t *weft_sched_vp_self(void) { return weft__vp(); }

weft_vp_t *weft_sched_vp(int i) {
  int g = weft__os_read_enter();
  if (!g) return NULL;
  weft_vp_t *vp = weft_is_running() && i >= 0 && i < weft__rt.nvps ? weft__rt.vps[i] : NULL;
  weft__os_read_leave(g);
  return vp;
}

/* a spare VP of the system monitor answers the index of the VP it stands in for */
int weft_sched_vp_index(const weft_vp_t *vp) {
  if (!vp) return -1;
  /* a VP of its own (not a spare) is its index: no call (schedulers ask on every event) */
  return WEFT__LIKELY(vp->index < weft__rt.nvps) ? vp->index : weft__vp_public_index(vp);
}

int weft_sched_thread_affinity(const weft_thread_t *t) { return t ? t->affinity : -1; }

uintptr_t *weft_sched_thread_data(weft_thread_t *t) { return &t->sched_data; }
