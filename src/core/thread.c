/* src/core/thread.c - create, start, finish, join, detach, yield, self.
 *
 * The paths here are counted in instructions (bench/icount.sh). The default
 * scheduler's handlers are inlined behind one pointer comparison
 * (weft__is_default): a bundle with any other table, even a copy of the default
 * one, goes through the table.
 */
#include <sched.h>
#include <stdlib.h>

#include "core/internal.h"
#include "core/monitor.h"
#include "weft/wire.h"
#include "weft/hook.h"

#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#endif


void weft_attr_init(weft_attr_t *attr) {
  if (!attr) return;
  attr->stack_size = 0;
  attr->detached = 0;
  attr->vproc = 0;         /* no virtual processor */
  attr->bundle = NULL;
  attr->stack_addr = NULL;
  attr->switch_mode = WEFT_SWITCH_INTEGER;
  attr->work_first = 0;
}

/* A new block of ids when this one is used up, and the check of cfg.max_threads
 * once per batch of creations (weft__create_limit): id_end is the end of the block
 * or of the batch, whichever comes first, so the inlined path pays one comparison
 * for both. Returns 0 (never an id) when the limit is reached. */
static __attribute__((noinline)) uint64_t next_id_slow(weft_vp_t *vp) {
  if (vp->id_next == vp->id_block_end) {
    /* relaxed: ids only need to be unique, and fetch_add gives that */
    uint64_t blk = atomic_fetch_add_explicit(&weft__next_id_block, 1, memory_order_relaxed);
    vp->id_next = blk << 10;
    vp->id_block_end = vp->id_next + 1024;
    if (vp->id_next == 0) vp->id_next = 1;
  }
  long batch = weft__create_limit(vp, (long)(vp->id_block_end - vp->id_next));
  if (!batch) {
    vp->id_end = vp->id_next;  /* check again at the next create */
    return 0;
  }
  vp->id_end = vp->id_next + (uint64_t)batch;
  return vp->id_next++;
}

static inline uint64_t next_id(weft_vp_t *vp) {
  if (WEFT__UNLIKELY(vp->id_next == vp->id_end)) return next_id_slow(vp);
  return vp->id_next++;
}

/* Creation from a plain OS thread: no VP, so the control block comes from the
 * global pool and the thread is handed to a VP. */
static int create_os(weft_thread_t **out, const weft_attr_t *attr, weft_thread_fn fn, void *arg);

/* attr: NULL, or the thread's attributes; plain: attr is NULL or attr_plain (no stack
 * size, no VP: the defaults), so only its detached flag is read. */
static inline __attribute__((always_inline)) void tcb_init_as(weft_thread_t *t, weft_bundle_t *b,
                                                             weft_thread_fn fn, void *arg,
                                                             const weft_attr_t *attr, int plain) {
  t->ctx.sp = NULL;
#if defined(WEFT_TSAN)
  t->ctx.tsan_fiber = NULL;
#endif
  t->bundle = b;
  t->fn = fn;
  t->arg = arg;
  t->stack = NULL;
  t->local = NULL;
  t->tsd = NULL;
  t->sched_data = 0;
  /* relaxed: a diagnostic, read by weft_dump with relaxed loads (name.c) */
  __atomic_store_n(&t->name[0], 0, __ATOMIC_RELAXED);
  /* relaxed: published with the thread; weft_create/create_os add TF_CUSTOM */
  weft__tflags_init(t, weft__tf_start());
#ifdef WEFT_CHECKED
  atomic_store_explicit(&t->dbg_blocked, 0, memory_order_relaxed);
#endif
  if (WEFT__LIKELY(!attr)) {
    t->stack_size = 0;
    t->affinity = -1;
    atomic_store_explicit(&t->join, 0, memory_order_relaxed);
  } else if (plain) {
    t->stack_size = 0;
    t->affinity = -1;
    /* relaxed: the thread is published to others by the enqueue's lock release */
    atomic_store_explicit(&t->join, attr->detached ? WEFT__JW_DETACHED : 0,
                          memory_order_relaxed);
  } else {
    t->stack_size = attr->stack_size;
    t->affinity = attr->vproc - 1;  /* WEFT_VPROC(v) = v + 1; 0: none (-1) */
    /* relaxed: the thread is published to others by the enqueue's lock release */
    atomic_store_explicit(&t->join, attr->detached ? WEFT__JW_DETACHED : 0,
                          memory_order_relaxed);
  }
}

static inline void tcb_init(weft_thread_t *t, weft_bundle_t *b, weft_thread_fn fn,
                            void *arg, const weft_attr_t *attr) {
  tcb_init_as(t, b, fn, arg, attr, 0);
}

static int attr_check(const weft_attr_t *attr) {
  if (attr->stack_size && (attr->stack_size < WEFT_MIN_STACK_SIZE ||
                           attr->stack_size > ((size_t)1 << 36)))
    return WEFT_EINVAL;
  /* a stack weft maps must fit, with its guard region, within RLIMIT_AS (read at
   * weft_init): a larger one could never be bound */
  if (attr->stack_size > weft__rt.pool.stack_max && !attr->stack_addr && !weft__rt.cfg.stack_alloc)
    return WEFT_EINVAL;
  if (attr->vproc < 0) return WEFT_EINVAL;
  if (attr->stack_addr && (attr->stack_size < WEFT_MIN_STACK_SIZE ||
                           ((uintptr_t)attr->stack_addr & 15) != 0 || attr->detached))
    return WEFT_EINVAL;
  if (attr->switch_mode != WEFT_SWITCH_INTEGER && attr->switch_mode != WEFT_SWITCH_ALL)
    return WEFT_EINVAL;
  return 0;
}

/* Rounds a custom stack size to pages; keeps 0 (default). */
static inline void attr_stack_round(weft_thread_t *t) {
  if (t->stack_size) {
    size_t page = weft__rt.page;
    t->stack_size = (t->stack_size + page - 1) & ~(page - 1);
  }
}

/* create_args' result beyond 0 and the error codes (which are negative). */
#define CREATE_ARGS_WORK_FIRST 1

/* Checks create's arguments and picks the bundle: 0, WEFT_EINVAL, or
 * CREATE_ARGS_WORK_FIRST (a root-bundle thread created work-first). */
static inline int create_args(weft_thread_t **out, const weft_attr_t *attr,
                              weft_thread_fn fn, weft_bundle_t **b) {
  if (WEFT__UNLIKELY(!fn)) return WEFT_EINVAL;
  *b = weft__rt.root;
  if (WEFT__LIKELY(attr == NULL)) return out ? 0 : WEFT_EINVAL;
  int rc = attr_check(attr);
  if (rc) return rc;
  if (!out && !attr->detached) return WEFT_EINVAL;
  if (attr->bundle) *b = attr->bundle;
  /* work-first is decided here, on the attribute path, so that the common paths carry
   * no trace of it (measured: 5 instructions on T1's create when decided later) */
  return attr->work_first && weft__is_default(*b) ? CREATE_ARGS_WORK_FIRST : 0;
}

/* Applies the attributes beyond tcb_init's; returns 1 if t belongs to a bundle
 * other than the root (so its scheduler's handlers must be raised). */
static inline int create_attrs(weft_thread_t *t, const weft_attr_t *attr, weft_bundle_t *b) {
  if (WEFT__LIKELY(attr == NULL)) return 0;
  if (attr->stack_addr) t->stack = attr->stack_addr; /* exact size: bound on first run */
  else attr_stack_round(t);
  uint32_t fp = attr->switch_mode == WEFT_SWITCH_ALL ? WEFT__TF_FPALL : 0;
  if (weft__is_default(b)) {
    if (fp) weft__tflags_init(t, fp | weft__tf_start());
    return 0;
  }
  weft__tflags_init(t, b->tf | fp | weft__tf_start()); /* bundle.c: TF_BUNDLE, ... */
  return 1;
}

/* Counts a thread of b created on vp (NULL: a plain OS thread). */
static inline void weft__bundle_count_created(weft_bundle_t *b, weft_vp_t *vp) {
  if (!vp) {
    /* seq_cst RMW: weft_bundle_destroy loads it after the finished counts */
    atomic_fetch_add_explicit(&b->os_created, 1, memory_order_seq_cst);
    return;
  }
  _Atomic uint64_t *c = &b->count[vp->index].created;
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_relaxed);
}

/* Counts the finish of a thread of b on vp (a thread finishes on a VP). release: pairs
 * with weft_bundle_destroy's acquire load, which then sees the thread's creation and
 * that of every thread it created (as vp->n_finished for weft__live_threads). */
static inline void weft__bundle_count_finished(weft_bundle_t *b, weft_vp_t *vp) {
  _Atomic uint64_t *c = &b->count[vp->index].finished;
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                        memory_order_release);
}

/* A thread of a non-root bundle goes to its scheduler: raised on vp (NULL: a plain OS
 * thread), or done here if the scheduler declared what its handler does there. */
static void raise_created(weft_vp_t *vp, weft_bundle_t *b, weft_thread_t *t) {
  weft__bundle_count_created(b, vp);
  unsigned f = b->ops.flags;  /* before the handler: t may run and b be destroyed */
  if (vp && (f & WEFT_SCHED_LOCAL_CREATE)) {  /* weft/sched.h: the handler's own enqueue */
    weft__enqueue(vp, t);
    return;
  }
  b->ops.thread_created(b, t);
  /* the scheduler may have kept t to itself, unless it says it never does (the light
   * notify: b exists, so sleepers make the heavy fence) */
  if (!(f & WEFT_SCHED_DISPATCH_ONLY)) weft__notify_light();
}

/* ---- work-first creation ------------------------------------------------------------
 * The new thread runs at once on the creating VP and the creator is made ready at the
 * front of the VP's dispatch queue: it runs next when the child blocks or finishes,
 * and an idle VP may steal it meanwhile (MassiveThreads, Cilk). The creator must be
 * saved before another VP can take it: on the fast path the queue lock is held across
 * the switch and released by it (as in the rotation yield); the general path (a
 * creator with callbacks, switch mode ALL, or of a custom bundle) queues it in a
 * continuation. */

/* Continuation of the general path: the creator is saved; queue it at the front of
 * this VP's dispatch queue (whatever its bundle: weft/sched.h weft_sched_run_first). */
static void work_first_cont(void *p) {
  weft_thread_t *self = p;
  uint32_t f = weft__tflags(self);
  if (f & WEFT__TF_FPALL) weft__ctx_fp_save(&self->ctx); /* first: nothing has run */
#ifdef WEFT_HOOKS
  if (f & WEFT__TF_HOOK) weft__hook_switched(self, 0, NULL);
#endif
  weft__push(weft__vp(), self);
}

/* Continuation of the fast path when a VP must be woken: release the queue lock
 * (the creator is saved), then wake. */
static void unlock_wake_cont(void *lock) {
  weft__spin_unlock((weft__spin_t *)lock);  /* release: pairs with the next taker */
  weft__wake_one();
}

/* Runs the never-run thread t (stack bound) now on vp in place of the caller self,
 * which is made ready at the front of vp's dispatch queue. Returns when self is
 * resumed, possibly on another VP. */
static inline __attribute__((always_inline)) void run_first(weft_vp_t *vp, weft_thread_t *self,
                                                            weft_thread_t *t) {
  if (WEFT__UNLIKELY(weft__tflags(self) & WEFT__TF_SLOW)) {
    vp->current = t;
    weft__switch(&self->ctx, &t->ctx, work_first_cont, self);
    return;
  }
  weft__spin_lock(&vp->q.lock);
  uint32_t idle = weft__push_locked(vp, self);
  vp->current = t;
  if (WEFT__LIKELY(idle == 0 || (idle & 0xffff) != 0)) {
    weft__switch_unlock(&self->ctx, &t->ctx, &vp->q.lock);
    return;
  }
  /* a VP sleeps and none spins: wake one to steal the creator, outside the lock */
  weft__switch(&self->ctx, &t->ctx, unlock_wake_cont, &vp->q.lock);
}

/* weft_create's work-first tail for a root-bundle thread t created on vp. A thread
 * placed on another VP (affinity), or whose stack cannot be bound now, is queued
 * as usual (its stack is then bound when it first runs). */
static inline __attribute__((always_inline)) void create_work_first(weft_vp_t *vp,
                                                                    weft_thread_t *t) {
  weft_vp_t *to = weft__place(WEFT__PLACE_CREATED, vp, t);
  if (to != vp || weft__stack_bind(vp, t) != 0) {
    weft__push(to, t);
    return;
  }
  run_first(vp, vp->current, t);
}

int weft_sched_run_first(weft_thread_t *t) {
  if (!t) return WEFT_EINVAL;
  weft_vp_t *vp = weft__vp();
  if (!vp || !vp->current) return WEFT_EPERM;
  if (!t->ctx.sp && weft__stack_bind(vp, t) != 0) return WEFT_ENOMEM;
  run_first(vp, vp->current, t);
  return 0;
}

/* The part of weft_create shared by its two tails: a new control block for fn(arg)
 * in b, published in *out; *custom as create_attrs. NULL if none could be had, with
 * the error in *custom (WEFT_EAGAIN: cfg.max_threads; WEFT_ENOMEM). */
static inline __attribute__((always_inline)) weft_thread_t *create_tcb(
    weft_vp_t *vp, weft_thread_t **out, const weft_attr_t *attr, weft_thread_fn fn, void *arg,
    weft_bundle_t *b, int *custom) {
  /* the id; 0: cfg.max_threads reached (checked once per batch, see next_id) */
  uint64_t id = next_id(vp);
  if (WEFT__UNLIKELY(!id)) {
    *custom = WEFT_EAGAIN;
    return NULL;
  }
  weft_thread_t *t = weft__tcb_alloc(vp);
  if (WEFT__UNLIKELY(!t)) {
    *custom = WEFT_ENOMEM;
    return NULL;
  }
  tcb_init(t, b, fn, arg, attr);
  *custom = create_attrs(t, attr, b);
  t->id = id;
  weft__stat_inc(&vp->n_created);
  if (out) *out = t;  /* before the thread can run and be reaped elsewhere */
  return t;
}

/* weft_fd_spawn's thread (io.c): a detached root-bundle thread for fn(arg) on vp's
 * caches, created but not made ready: the caller parks it on its event and makes it
 * ready (weft__unblock) when the event comes. Its stack is bound when it first runs,
 * as any new thread's. 0, WEFT_EAGAIN (cfg.max_threads), WEFT_ENOMEM. */
int weft__create_unready(weft_vp_t *vp, weft_thread_t **out, weft_thread_fn fn, void *arg) {
  weft_attr_t a;
  weft_attr_init(&a);
  a.detached = 1;
  int custom;
  weft_thread_t *t = create_tcb(vp, out, &a, fn, arg, weft__rt.root, &custom);
  return t ? 0 : custom;
}

/* weft_create for a root-bundle thread created work-first (out of line). */
static __attribute__((noinline)) int create_wf(weft_vp_t *vp, weft_thread_t **out,
                                               const weft_attr_t *attr, weft_thread_fn fn,
                                               void *arg, weft_bundle_t *b) {
  int custom;
  weft_thread_t *t = create_tcb(vp, out, attr, fn, arg, b, &custom);
  if (!t) return custom;
  create_work_first(vp, t);
  return 0;
}

/* weft_create in general (out of line); weft_create below is its common case, and
 * create_attr_fast the common case with an attribute. */
static __attribute__((noinline)) int create_general_full(weft_thread_t **out,
                                                         const weft_attr_t *attr,
                                                         weft_thread_fn fn, void *arg) {
  weft_vp_t *vp = weft__vp();
  if (WEFT__UNLIKELY(!vp)) return create_os(out, attr, fn, arg);
  weft_bundle_t *b;
  int rc = create_args(out, attr, fn, &b);
  if (WEFT__UNLIKELY(rc)) {
    if (rc != CREATE_ARGS_WORK_FIRST) return rc;
    /* work-first queues the creator, so it needs one: on a VP's idle loop (a
     * do-when-idle function, an idle hook) no thread runs, and the new thread is
     * created help-first, as weft/thread.h says for callers other than weft threads */
    if (vp->current) return create_wf(vp, out, attr, fn, arg, b);
  }
  int custom;
  weft_thread_t *t = create_tcb(vp, out, attr, fn, arg, b, &custom);
  if (WEFT__UNLIKELY(!t)) return custom;
  if (WEFT__LIKELY(!custom)) weft__push(weft__place(WEFT__PLACE_CREATED, vp, t), t);
  else raise_created(vp, b, t);
  return 0;
}

/* The end of the common case when a VP must be woken (out of line: a tail call). */
static __attribute__((noinline)) int create_wake(void) {
  weft__wake_one();
  return 0;
}

/* The end of create_attr_fast for a thread of a non-root bundle (a tail call). */
static __attribute__((noinline)) int create_in_bundle(weft_vp_t *vp, weft_bundle_t *b,
                                                      weft_thread_t *t) {
  raise_created(vp, b, t);
  return 0;
}

/* 1 if attr sets nothing but the bundle and detached (then attr_check passes and
 * create_attrs has nothing to apply beyond the bundle's flags). */
static inline int attr_plain(const weft_attr_t *attr) {
  return attr->stack_size == 0 && attr->stack_addr == NULL && attr->vproc == 0 &&
         attr->switch_mode == WEFT_SWITCH_INTEGER && !attr->work_first;
}

/* weft_create on a VP with a plain attribute (attr_plain: how every thread of a bundle
 * is created, and detached threads), an id left in its batch and a control block on
 * the VP's free list: the steps of create_general_full (create_args, create_tcb,
 * create_attrs, then the push or the bundle's scheduler), written as a leaf whose other
 * exits are tail calls, as weft_create is. */
static __attribute__((noinline)) int create_attr_fast(weft_thread_t **out, const weft_attr_t *attr,
                                                      weft_thread_fn fn, void *arg,
                                                      weft_vp_t *vp) {
  uint64_t id = vp->id_next;
  weft_thread_t *t = vp->tcb_free;
  if (WEFT__UNLIKELY(id == vp->id_end || !t)) return create_general_full(out, attr, fn, arg);
  weft_bundle_t *b = attr->bundle ? attr->bundle : weft__rt.root;
  vp->id_next = id + 1;
  vp->tcb_free = t->next;
  weft__own_add(&vp->ntcb, -1);
  tcb_init_as(t, b, fn, arg, attr, 1);  /* attr_plain */
  int root = weft__is_default(b);
  if (!root) weft__tflags_init(t, b->tf | weft__tf_start()); /* as create_attrs */
  t->id = id;
  weft__stat_inc(&vp->n_created);
  if (out) *out = t;  /* before the thread can run and be reaped elsewhere */
  if (!root) return create_in_bundle(vp, b, t);
  weft__spin_lock(&vp->q.lock);
  uint32_t idle = weft__push_locked(vp, t);  /* weft__place(CREATED): no affinity */
  weft__spin_unlock(&vp->q.lock);
  if (WEFT__UNLIKELY(idle != 0 && (idle & 0xffff) == 0)) return create_wake();
  return 0;
}

/* weft_create's general entry: the plain-attribute case, else everything else. vp: the
 * caller's (weft_create read it; NULL on a plain OS thread). */
static __attribute__((noinline)) int create_general(weft_thread_t **out,
                                                    const weft_attr_t *attr,
                                                    weft_thread_fn fn, void *arg,
                                                    weft_vp_t *vp) {
  if (WEFT__LIKELY(vp && attr && fn && (out || attr->detached) && attr_plain(attr)))
    return create_attr_fast(out, attr, fn, arg, vp);
  return create_general_full(out, attr, fn, arg);
}

/* The common case (a weft thread creates with no attributes, an id left in its
 * batch and a control block on its VP's free list) written as a leaf whose other
 * exits are tail calls, so that it saves no registers: the same steps as
 * create_general's (create_tcb, tcb_init, weft__push), measured 20 instructions
 * fewer per creation. */
int weft_create(weft_thread_t **out, const weft_attr_t *attr, weft_thread_fn fn, void *arg) {
  weft_vp_t *vp = weft__vp();
  if (WEFT__UNLIKELY(!vp || attr || !fn || !out)) return create_general(out, attr, fn, arg, vp);
  uint64_t id = vp->id_next;
  weft_thread_t *t = vp->tcb_free;
  /* a full hand-off slot goes to the queue before the push: the general path */
  if (WEFT__UNLIKELY(id == vp->id_end || !t ||
                     atomic_load_explicit(&vp->q.next, memory_order_relaxed)))
    return create_general(out, attr, fn, arg, vp);
  vp->id_next = id + 1;
  vp->tcb_free = t->next;
  weft__own_add(&vp->ntcb, -1);
  tcb_init(t, weft__rt.root, fn, arg, NULL);
  t->id = id;
  weft__stat_inc(&vp->n_created);
  *out = t;  /* before the thread can run and be reaped elsewhere */
  weft__spin_lock(&vp->q.lock);
  /* the slot was empty above, and only this VP's running thread (we) fills it */
  uint32_t idle = weft__push_locked_noslot(vp, t);
  weft__spin_unlock(&vp->q.lock);
  if (WEFT__UNLIKELY(idle != 0 && (idle & 0xffff) == 0)) return create_wake();
  return 0;
}

/* Inside the OS-thread gate (runtime.c): it fails with WEFT_ENOTINIT once
 * weft_shutdown has begun, and shutdown waits for a creation under way. */
static int create_os_gated(weft_thread_t **out, const weft_attr_t *attr, weft_thread_fn fn,
                           void *arg);

static int create_os(weft_thread_t **out, const weft_attr_t *attr, weft_thread_fn fn, void *arg) {
  int rc = weft__os_enter(WEFT__GATE_CREATE);
  if (rc) return rc;
  rc = create_os_gated(out, attr, fn, arg);
  weft__os_leave(WEFT__GATE_CREATE);
  return rc;
}

static int create_os_gated(weft_thread_t **out, const weft_attr_t *attr, weft_thread_fn fn,
                           void *arg) {
  weft_bundle_t *b;
  int rc = create_args(out, attr, fn, &b);
  if (rc < 0) return rc;  /* work-first is ignored on a plain OS thread */
  if (!weft__create_os_allowed()) return WEFT_EAGAIN;
  weft_thread_t *t = weft__tcb_alloc_slow(NULL);
  if (!t) return WEFT_ENOMEM;
  tcb_init(t, b, fn, arg, attr);
  int custom = create_attrs(t, attr, b);
  uint64_t blk = atomic_fetch_add_explicit(&weft__next_id_block, 1, memory_order_relaxed);
  t->id = blk << 10;  /* a whole id block for one thread: OS-thread creation is rare */
  atomic_fetch_add_explicit(&weft__rt.os_created, 1, memory_order_relaxed);
  if (out) *out = t;
  if (!custom) weft__push(weft__place(WEFT__PLACE_CREATED, NULL, t), t);
  else raise_created(NULL, b, t);
  return 0;
}

/* ---- start and finish -------------------------------------------------------------- */

static _Noreturn void thread_finish(weft_vp_t *vp, weft_thread_t *t, void *result);
static void thread_finish_fast(weft_thread_t *t, void *result);

/* The general paths of the events, out of line and cold so that the inlined
 * paths around them keep their shape (measured: inline, they cost L2 12
 * instructions with no callback installed). */
#define WEFT__COLD __attribute__((noinline, cold))

static WEFT__COLD void entry_slow(weft_thread_t *t, uint32_t f) {
  weft_bundle_t *b = t->bundle;
#ifdef WEFT_HOOKS
  if (f & WEFT__TF_HOOK) weft__hook_raise(WEFT_HOOK_ENTRY, t, NULL);
#endif
  if ((f & WEFT__TF_CUSTOM) && b->ops.thread_started) b->ops.thread_started(b, t);
}

static WEFT__COLD void exit_slow(weft_thread_t *t, uint32_t f, void *result) {
  weft_bundle_t *b = t->bundle;
#ifdef WEFT_HOOKS
  if (f & WEFT__TF_HOOK) weft__hook_raise(WEFT_HOOK_EXIT, t, result);
#else
  (void)result;
#endif
  if ((f & WEFT__TF_CUSTOM) && b->ops.thread_terminated) b->ops.thread_terminated(b, t);
}

/* thread_blocked and the SAVE/BLOCKED/RESTORE callbacks, from a block
 * continuation (also used by src/sync/wait.c). */
WEFT__COLD void weft__blocked_slow(weft_thread_t *self, uint32_t f, void *obj) {
  if (f & WEFT__TF_FPALL) weft__ctx_fp_save(&self->ctx); /* first: nothing has run */
  weft_bundle_t *b = self->bundle;
  if ((f & WEFT__TF_CUSTOM) && b->ops.thread_blocked) b->ops.thread_blocked(b, self);
#ifdef WEFT_HOOKS
  if (f & WEFT__TF_HOOK) weft__hook_switched(self, 1, obj);
#else
  (void)obj;
#endif
}

static WEFT__COLD void finished_slow(weft_vp_t *vp, weft_thread_t *t, uint32_t f) {
  if (f & WEFT__TF_BUNDLE) weft__bundle_count_finished(t->bundle, vp); /* not the root's */
#ifdef WEFT_HOOKS
  if ((f & WEFT__TF_HOOK) && vp->current) {
    /* A joiner that thread_finish handed the VP to directly is not made ready through
     * weft__unblock: raise its UNBLOCKED here (waker: t), before its RESTORE.
     * Relaxed is enough: a join word that names a waiting joiner is changed only by
     * this finisher, in finish_cont's exchange after this call. */
    uintptr_t jw = atomic_load_explicit(&t->join, memory_order_relaxed);
    if (WEFT__JW_TAG(jw) == WEFT__JW_WEFT && WEFT__JW_PTR(jw) == (void *)vp->current)
      weft__hook_raise(WEFT_HOOK_UNBLOCKED, vp->current, t);
    weft__hook_raise(WEFT_HOOK_RESTORE, vp->current, NULL);
  }
#else
  (void)vp;
#endif
}

void weft__thread_entry(void *p) {
  weft_thread_t *t = p;
  /* the root bundle has no started/terminated/blocked handlers: test the flag first */
  uint32_t f = weft__tflags(t);
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) entry_slow(t, f);
  void *r = t->fn(t->arg);
  thread_finish_fast(t, r);
}

/* The part of a finish continuation that both forms share: t is off its stack;
 * release the stack, raise the slow-path events, count the finish. Inlined into
 * each (the finish paths are counted in instructions). */
static inline __attribute__((always_inline)) void finish_release(weft_vp_t *vp, weft_thread_t *t) {
#if defined(WEFT_TSAN)
  __tsan_destroy_fiber(t->ctx.tsan_fiber);
  t->ctx.tsan_fiber = NULL;
#endif
  weft__stack_release(vp, t);
  uint32_t f = weft__tflags(t);
  if (WEFT__UNLIKELY(f & WEFT__TF_FINISH_SLOW)) {
    /* a thread of a bundle on the root's paths (a declared fast path: WEFT_SCHED_LOCAL_READY)
     * has only its bundle's count to drop: inline, no call */
    if ((f & WEFT__TF_FINISH_SLOW) == WEFT__TF_BUNDLE)
      weft__bundle_count_finished(t->bundle, vp);
    else
      finished_slow(vp, t, f);
  }
  weft__stat_inc_release(&vp->n_finished);  /* release: the exact live count */
}

/* Runs on the next context's stack once the finished thread t is off its own
 * stack: release the stack, then publish DONE. After the exchange t belongs to its
 * joiner (or, detached, to us) and is not touched again. */
static void finish_cont(void *p) {
  weft_thread_t *t = p;
  weft_vp_t *vp = weft__vp();
  finish_release(vp, t);
  /* DETACHED -> FREED (we reclaim it), anything else -> DONE. acq_rel on success:
   * release publishes result (and the thread's writes) to the joiner's or
   * detacher's acquire; acquire pairs with the joiner's release CAS that published
   * it. A failed CAS (a joiner or detacher changed the word) reloads and retries. */
  uintptr_t old = atomic_load_explicit(&t->join, memory_order_relaxed);
  if (old == WEFT__JW_DETACHED) {
    /* Detached: only the finisher changes a DETACHED word (a detach and a join change
     * only 0 or DONE), so FREED is a plain store and the thread is ours to reap, with
     * no locked instruction (T1's chains and every detached thread finish here). */
    atomic_store_explicit(&t->join, WEFT__JW_FREED, memory_order_relaxed);
    weft__tcb_free(vp, t);
    return;
  }
  while (!atomic_compare_exchange_weak_explicit(
      &t->join, &old, old == WEFT__JW_DETACHED ? WEFT__JW_FREED : WEFT__JW_DONE,
      memory_order_acq_rel, memory_order_relaxed)) {
  }
  switch (WEFT__JW_TAG(old)) {
    case 0:
      break;                             /* the joiner will reap it */
    case WEFT__JW_DETACHED:
      weft__tcb_free(vp, t);
      break;
    case WEFT__JW_WEFT: {
      weft_thread_t *j = WEFT__JW_PTR(old);
      if (j != vp->current) weft__unblock(vp, j);  /* else: handed off, running */
      break;
    }
    case WEFT__JW_OS: {
      weft__os_waiter_t *w = WEFT__JW_PTR(old);
      /* release: pairs with the acquire load in join_os */
      atomic_store_explicit(&w->done, 1, memory_order_release);
      weft__os_futex_wake(&w->done, 1);
      break;
    }
  }
}

/* finish_cont for a finisher that hands the VP straight to its waiting weft joiner
 * (now vp->current): a word that names a weft joiner is changed by the finisher
 * alone (a detach or another join only changes 0 or DONE), so a release store of
 * DONE does what the CAS loop would, and nobody is to be made ready. */
static __attribute__((noinline)) void finish_handoff_slow(weft_thread_t *t) {
  weft_vp_t *vp = weft__vp();
  finish_release(vp, t);
  /* release: result and the thread's writes to the joiner's acquire load; the
   * joiner's saved context came to us with the acquire load in thread_finish */
  atomic_store_explicit(&t->join, WEFT__JW_DONE, memory_order_release);
}

/* The same for a thread of a bundle on the root's paths (a declared fast path) whose
 * only finish event is its bundle's count: the fast stack release and that count, as
 * finish_release does inline for finish_cont (the scheduler library's FIFO joiners
 * come here on every join, X2). */
static __attribute__((noinline)) void finish_handoff_bundle(weft_vp_t *vp, weft_thread_t *t) {
  if ((weft__tflags(t) & WEFT__TF_FINISH_SLOW) != WEFT__TF_BUNDLE ||
      !weft__stack_release_can_fast(vp, t)) {
    finish_handoff_slow(t);
    return;
  }
  weft__stack_release_fast(vp, t);
  weft__bundle_count_finished(t->bundle, vp);
  weft__stat_inc_release(&vp->n_finished);  /* release: as in finish_handoff_slow */
  /* release: as in finish_handoff_slow */
  atomic_store_explicit(&t->join, WEFT__JW_DONE, memory_order_release);
}

/* Its common case as a leaf (no call but the tail calls to the other paths, so no
 * registers to save): the same steps. */
static void finish_handoff_cont(void *p) {
  weft_thread_t *t = p;
  weft_vp_t *vp = weft__vp();
  if (WEFT__UNLIKELY(weft__tflags(t) & WEFT__TF_FINISH_SLOW)) {
    finish_handoff_bundle(vp, t);
    return;
  }
  if (WEFT__UNLIKELY(!weft__stack_release_can_fast(vp, t))) {
    finish_handoff_slow(t);
    return;
  }
  weft__stack_release_fast(vp, t);
  weft__stat_inc_release(&vp->n_finished);  /* release: as in finish_handoff_slow */
  /* release: as in finish_handoff_slow */
  atomic_store_explicit(&t->join, WEFT__JW_DONE, memory_order_release);
}

/* The finished thread t leaves its stack for next (just taken off vp's queue; NULL:
 * the idle loop); finish_cont runs there. */
static __attribute__((noinline)) _Noreturn void finish_switch(weft_vp_t *vp, weft_thread_t *t,
                                                              weft_thread_t *next) {
  /* nothing queued: a thread of a non-root bundle asks its own scheduler (weft/sched.h);
   * t still counts in its bundle, which therefore stays */
  if (!next && (weft__tflags(t) & WEFT__TF_BUNDLE)) next = weft__bundle_own_idle(t->bundle, vp);
  if (next) weft__prepare(vp, &next);
  vp->current = next;
  weft__switch_dying(&t->ctx, next ? &next->ctx : &vp->idle_ctx, finish_cont, t);
  __builtin_unreachable();
}

/* Fairness of the finish hand-off. A joiner made ready goes to the back of the queue
 * (FIFO among woken threads, docs/schedulers.md); the hand-off gives it the VP at once
 * instead, which is what makes a fork-join cheap, and passes every thread queued on
 * the VP. A thread that creates and joins in a loop then kept the VP for ever: a
 * thread woken by a timer, a yield or a wake-up, queued at the back, never ran on this
 * VP. So one hand-off in every WEFT__HANDOFF_PASS on a VP that would pass queued
 * threads (counted in vp->handoffs) gives the VP to the thread at the back of the queue
 * instead, if that one has run before (a woken or yielding thread, the kind the
 * hand-offs starve), with the joiner pushed to the front to run right after it
 * (finish_fair_cont). Never-run threads (created ones, which a depth-first unfolding
 * keeps in front) are left where they are: starting one from the back would start
 * a new chain of calls, and the number of started threads would grow. With nothing
 * queued there is nobody to pass. A power of two. */
#define WEFT__HANDOFF_PASS 256u
static inline __attribute__((always_inline)) int handoff_turn(weft_vp_t *vp) {
  /* relaxed: a hint; a thread queued meanwhile by another VP waits one hand-off */
  if (WEFT__LIKELY(!atomic_load_explicit(&vp->q.head, memory_order_relaxed))) return 0;
  /* its own count: the finish count would not do, finishes with and without a joiner
   * may alternate (fib's two children) and a hand-off never fall on a multiple */
  return (++vp->handoffs & (WEFT__HANDOFF_PASS - 1)) == 0;
}

/* Takes the back thread of vp's queue if it has run before (its stack is bound);
 * NULL otherwise. */
static __attribute__((noinline, cold)) weft_thread_t *take_back_if_run(weft_vp_t *vp) {
  weft__spin_lock(&vp->q.lock);
  weft_thread_t *b = vp->q.tail;
  /* relaxed (q.head): ordered by the queue lock */
  weft_thread_t *head = atomic_load_explicit(&vp->q.head, memory_order_relaxed);
  if (b && b->ctx.sp) {
    if (b == head) {
      atomic_store_explicit(&vp->q.head, NULL, memory_order_relaxed);
      vp->q.tail = NULL;
    } else {
      vp->q.tail = b->prev;  /* every queued thread but the front one has a valid prev */
      b->prev->next = NULL;
    }
  } else {
    b = NULL;
  }
  weft__spin_unlock(&vp->q.lock);
  return b;
}

static void finish_handoff_cont(void *p);

/* The continuation of a fair turn: the finish of finish_handoff_cont (the joiner named
 * in t's join word is released by this finisher alone), then the joiner goes to the
 * front of the queue. It is pushed only after DONE is published: a joiner that ran
 * (on a thief) before that would find its joinee not done. */
static void finish_fair_cont(void *p) {
  weft_thread_t *t = p;
  /* relaxed: only this finisher changes a word that names a weft joiner */
  weft_thread_t *j = WEFT__JW_PTR(atomic_load_explicit(&t->join, memory_order_relaxed));
  finish_handoff_cont(t);  /* t belongs to j from here on: not touched again */
  weft__push(weft__vp(), j);
}

/* thread_finish's hand-off of vp to its waiting joiner j, or, on a fair turn with a
 * thread that has run before at the back of the queue, to that thread (j next). */
static inline __attribute__((always_inline, noreturn)) void finish_handoff(weft_vp_t *vp, weft_thread_t *t,
                                                                      weft_thread_t *j) {
  if (WEFT__UNLIKELY(handoff_turn(vp))) {
    weft_thread_t *b = take_back_if_run(vp);
    if (b) {
      vp->current = b;
      weft__switch_dying(&t->ctx, &b->ctx, finish_fair_cont, t);
      __builtin_unreachable();
    }
  }
  vp->current = j;
  weft__switch_dying(&t->ctx, &j->ctx, finish_handoff_cont, t);
  __builtin_unreachable();
}

static _Noreturn void thread_finish(weft_vp_t *vp, weft_thread_t *t, void *result) {
  if (t->tsd) weft__key_run_dtors(t);
  vp = weft__vp();                       /* destructors may have switched */
  WEFT__ASSERT(vp != NULL, "a wired thread returned without weft_unwire (weft/wire.h)");
  t->result = result;
  uint32_t f = weft__tflags(t);
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) exit_slow(t, f, result);
  /* A joiner already published (it is saved and waits) can only be released by
   * us: hand the VP straight to it if the default scheduler owns it. */
  uintptr_t w = atomic_load_explicit(&t->join, memory_order_acquire);
  if (WEFT__JW_TAG(w) == WEFT__JW_WEFT) {
    weft_thread_t *j = WEFT__JW_PTR(w);
    if (!(weft__tflags(j) & WEFT__TF_CUSTOM)) finish_handoff(vp, t, j);
  }
  finish_switch(vp, t, weft__dequeue(vp));
}

/* Binds t's stack if that needs no call (the VP's free list; sanitizer builds: any
 * way): 1 if bound. */
static inline __attribute__((always_inline)) int bind_now(weft_vp_t *vp, weft_thread_t *t) {
#if !defined(WEFT_ASAN) && !defined(WEFT_TSAN)
  if (WEFT__UNLIKELY(!vp->stk_free || t->stack_size)) return 0;
#endif
  return weft__stack_bind(vp, t) == 0;
}

/* thread_finish's common case for a thread that returns from its function: no key
 * destructors to run, no callbacks, and a weft joiner of the default scheduler
 * waiting, to which the VP goes straight. Written with nothing live across a call
 * (the switch is a tail call: it never returns), so it saves no registers. */
static void thread_finish_fast(weft_thread_t *t, void *result) {
  weft_vp_t *vp = weft__vp();
  /* (thread_finish asserts it too, after the destructors; this path reads vp first) */
  WEFT__ASSERT(vp != NULL, "a wired thread returned without weft_unwire (weft/wire.h)");
  /* acquire: as in thread_finish (the joiner's saved context) */
  uintptr_t w = atomic_load_explicit(&t->join, memory_order_acquire);
  weft_thread_t *j = WEFT__JW_PTR(w);
  if (WEFT__UNLIKELY(t->tsd || (weft__tflags(t) & WEFT__TF_SLOW))) thread_finish(vp, t, result);
  t->result = result;
  if (WEFT__JW_TAG(w) == WEFT__JW_WEFT && !(weft__tflags(j) & WEFT__TF_CUSTOM))
    finish_handoff(vp, t, j);
  /* no joiner waiting: the next ready thread, as thread_finish */
  weft_thread_t *next = weft__dequeue(vp);
  if (WEFT__LIKELY(next && (next->ctx.sp || bind_now(vp, next)))) {
    vp->current = next;
    weft__switch_dying(&t->ctx, &next->ctx, finish_cont, t);
    return;  /* not reached */
  }
  finish_switch(vp, t, next);
}

int weft_exit(void *result) {
  weft_vp_t *vp = weft__vp();
  if (!vp && weft__wired_self() && !(weft__tflags(weft__wired_self()) & WEFT__TF_MAIN)) {
    weft_unwire();  /* a wired thread finishes on a VP (weft/wire.h) */
    vp = weft__vp();
  }
  if (!vp) return atomic_load(&weft__rt.state) ? WEFT_EPERM : WEFT_ENOTINIT;
  weft_thread_t *t = vp->current;
  if (weft__tflags(t) & WEFT__TF_MAIN) return WEFT_EPERM;
  thread_finish(vp, t, result);
}

/* ---- join and detach ------------------------------------------------------------------ */

/* Continuation of a blocking join, run once the joiner is saved: publish it in the
 * join word. If the joinee finished (or was detached) meanwhile, the CAS fails and
 * the joiner is made ready again at once. */
static void join_cont(void *p) {
  weft_thread_t *self = p;
  weft_thread_t *t = self->blocked_on;
  uint32_t f = weft__tflags(self);
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) weft__blocked_slow(self, f, t);
  uintptr_t expect = 0;
  /* release: the joiner's saved context is visible to whoever unblocks it (pairs
   * with the acquire half of the finisher's exchange) */
  if (!atomic_compare_exchange_strong_explicit(&t->join, &expect,
                                               (uintptr_t)self | WEFT__JW_WEFT,
                                               memory_order_release, memory_order_relaxed))
    weft__unblock(weft__vp(), self);
}

static __attribute__((noinline)) int join_os(weft_thread_t *t, void **result);

/* The end of a join that found (or waited for) join word w: reclaims t if w is
 * DONE and this caller wins DONE -> JOINED (a detacher or another joiner may race
 * for it). vp: the caller's VP, or NULL for a plain OS thread. */
static int join_reap(weft_vp_t *vp, weft_thread_t *t, uintptr_t w, void **result) {
  /* A second join of a reclaimed thread: undefined (its handle dangles), caught
   * here while the block has not been reused. */
  WEFT__ASSERT(w != WEFT__JW_JOINED, "weft_join of a thread that was already joined");
  /* acquire on success: the finisher's writes (result) are ours; pairs with its
   * release CAS to DONE */
  if (WEFT__UNLIKELY(w != WEFT__JW_DONE ||
                     !atomic_compare_exchange_strong_explicit(&t->join, &w, WEFT__JW_JOINED,
                                                              memory_order_acquire,
                                                              memory_order_relaxed)))
    return WEFT_ESRCH;
  if (result) *result = t->result;
  weft__tcb_free(vp, t);
  return 0;
}

/* The general blocking join (out of line, as join_front_failed). A thread of a
 * non-root bundle whose VP has nothing queued (and no timers) asks its own scheduler
 * for the next thread (weft/sched.h) instead of going through the idle loop. */
static __attribute__((noinline)) void join_block(weft_vp_t *vp, weft_thread_t *self) {
  /* relaxed: hints (as in weft__block and weft__dequeue) */
  if (WEFT__UNLIKELY((weft__tflags(self) & WEFT__TF_BUNDLE) &&
                     !atomic_load_explicit(&vp->q.head, memory_order_relaxed) &&
                     !atomic_load_explicit(&vp->tm.n, memory_order_relaxed))) {
    weft_thread_t *next = weft__bundle_own_idle(self->bundle, vp);
    if (next) {
      weft__prepare(vp, &next);
      vp->current = next;
      /* The scheduler handed over the joinee itself (a FIFO/LIFO bundle's run list: most
       * often the thread just created and joined): run it in the joiner's place with
       * no continuation, the joiner published in its join word first, as
       * join_run_front does and for the same reasons (next is ours, off every
       * structure, and cannot run before this switch; relaxed CAS, which only has to
       * lose to a racing detach: then join_cont finds the word changed too). Not for a
       * joiner on the general paths (TF_SLOW: its thread_blocked and callbacks run in
       * join_cont). */
      uintptr_t expect = 0;
      if (next == self->blocked_on && !(weft__tflags(self) & WEFT__TF_SLOW) &&
          atomic_compare_exchange_strong_explicit(&next->join, &expect,
                                                  (uintptr_t)self | WEFT__JW_WEFT,
                                                  memory_order_relaxed, memory_order_relaxed)) {
        weft__switch(&self->ctx, &next->ctx, NULL, NULL);
        return;
      }
      weft__switch(&self->ctx, next ? &next->ctx : &vp->idle_ctx, join_cont, self);
      return;
    }
  }
  weft__block(vp, self, join_cont, self);
}

/* join_run_front's exit when t, taken off the queue, cannot be run now: back to the
 * front of the queue, and the general blocking join. */
static __attribute__((noinline)) void join_front_failed(weft_vp_t *vp, weft_thread_t *self,
                                                        weft_thread_t *t) {
  weft__push(vp, t);
  join_block(vp, self);
}

/* A join of t that finds t at the front of the caller's own dispatch queue (the
 * un-stolen child of a depth-first unfolding: Cilk and MassiveThreads run it in the
 * joiner's place): t would be the next thread this VP dispatches anyway, so take it
 * off the queue and switch straight to it, the joiner already published in t's join
 * word, with no continuation. Publishing before the joiner is saved is safe because
 * t, the only one who reads a published weft joiner to resume it, cannot run
 * before this switch: it is off every queue, taken under the lock. Returns 1 if it
 * switched (the caller is resumed by t's finish) or, when t was taken off the queue
 * but was detached meanwhile or can get no stack now, blocked in the general way;
 * 0 if t is not at the front or the caller needs the general block (callbacks,
 * switch mode ALL, custom bundle, due timers). */
static inline __attribute__((always_inline)) int join_run_front(weft_vp_t *vp,
                                                                weft_thread_t *self,
                                                                weft_thread_t *t) {
  /* relaxed (the head hint): confirmed under the lock */
  if (atomic_load_explicit(&vp->q.head, memory_order_relaxed) != t ||
      (weft__tflags(self) & WEFT__TF_SLOW) ||
      atomic_load_explicit(&vp->tm.n, memory_order_relaxed))
    return 0;
  weft__spin_lock(&vp->q.lock);
  /* relaxed (load and store of q.head): ordered by the queue lock */
  if (WEFT__UNLIKELY(atomic_load_explicit(&vp->q.head, memory_order_relaxed) != t)) {
    weft__spin_unlock(&vp->q.lock);
    return 0;
  }
  weft_thread_t *n = t->next;
  atomic_store_explicit(&vp->q.head, n, memory_order_relaxed);
  if (!n) vp->q.tail = NULL;
  weft__spin_unlock(&vp->q.lock);
  /* t is ours now. Its stack before the joiner is published: a thread whose stack
   * cannot be bound goes back to the front, and the general block handles it (out
   * of line: nothing stays live across a call here, so weft_join saves no
   * registers). The CAS is relaxed: nothing reaches t's finisher through it that
   * the switch below and the queue locks t passes through later do not already
   * order; it only has to lose to a racing detach (which never reads the joiner:
   * the general block then finds the word changed too). */
  uintptr_t expect = 0;
  if (WEFT__UNLIKELY((!t->ctx.sp && !bind_now(vp, t)) ||
                     !atomic_compare_exchange_strong_explicit(
                         &t->join, &expect, (uintptr_t)self | WEFT__JW_WEFT,
                         memory_order_relaxed, memory_order_relaxed))) {
    join_front_failed(vp, self, t);
    return 1;
  }
  vp->current = t;
  weft__switch(&self->ctx, &t->ctx, NULL, NULL);
  return 1;
}

/* The end of a join that waited, once the joiner is resumed (possibly on another VP). */
static inline __attribute__((always_inline)) int join_resumed(void) {
  weft_vp_t *vp = weft__vp();
  weft_thread_t *self = vp->current;
  weft_thread_t *t = self->blocked_on;
  /* acquire: pairs with the finisher's release (result visible) */
  uintptr_t w = atomic_load_explicit(&t->join, memory_order_acquire);
  return join_reap(vp, t, w, self->join_out);
}

int weft_join(weft_thread_t *t, void **result) {
  weft_vp_t *vp = weft__vp();
  if (WEFT__UNLIKELY(!vp)) return join_os(t, result);
  if (WEFT__UNLIKELY(!t)) return WEFT_EINVAL;
  weft_thread_t *self = vp->current;
  if (WEFT__UNLIKELY(t == self)) return WEFT_EDEADLK;
  /* acquire: pairs with the finisher's release exchange (result visible) */
  uintptr_t w = atomic_load_explicit(&t->join, memory_order_acquire);
  if (w == 0) {
    /* kept in the control block, not in registers across the switch (so that
     * weft_join saves none): read back by join_resumed */
    self->blocked_on = t;
    self->join_out = result;
    if (!join_run_front(vp, self, t)) join_block(vp, self);
    return join_resumed();
  }
  return join_reap(vp, t, w, result);
}

static int join_os_gated(weft_thread_t *t, void **result);

/* Inside the OS-thread gate: weft_shutdown frees nothing while an OS joiner waits
 * or frees the joined thread's control block. */
static int join_os(weft_thread_t *t, void **result) {
  int rc = weft__os_enter(WEFT__GATE_OTHER);
  if (rc) return rc;
  rc = join_os_gated(t, result);
  weft__os_leave(WEFT__GATE_OTHER);
  return rc;
}

static int join_os_gated(weft_thread_t *t, void **result) {
  if (!t) return WEFT_EINVAL;
  if (t == weft__wired_self()) return WEFT_EDEADLK;  /* a wired thread joining itself */
  weft__os_waiter_t waiter;
  atomic_init(&waiter.done, 0);
  uintptr_t expect = 0;
  /* release: publishes the waiter; pairs with the finisher's acq_rel exchange */
  if (atomic_compare_exchange_strong_explicit(&t->join, &expect,
                                              (uintptr_t)&waiter | WEFT__JW_OS,
                                              memory_order_release, memory_order_acquire)) {
    /* acquire: pairs with the release store of done in finish_cont */
    while (!atomic_load_explicit(&waiter.done, memory_order_acquire))
      weft__os_futex_wait(&waiter.done, 0);
    expect = atomic_load_explicit(&t->join, memory_order_acquire);
  }
  return join_reap(NULL, t, expect, result);
}

static int detach_gated(weft_thread_t *t);

/* From a plain OS thread (no VP) detach runs inside the OS-thread gate (runtime.c),
 * since reclaiming a finished thread gives its control block to the global pool,
 * which weft_shutdown frees. */
int weft_detach(weft_thread_t *t) {
  if (WEFT__LIKELY(weft__vp() != NULL)) return detach_gated(t);
  int rc = weft__os_enter(WEFT__GATE_OTHER);
  if (rc) return rc;
  rc = detach_gated(t);
  weft__os_leave(WEFT__GATE_OTHER);
  return rc;
}

static int detach_gated(weft_thread_t *t) {
  if (!atomic_load_explicit(&weft__rt.state, memory_order_acquire)) return WEFT_ENOTINIT;
  if (!t) return WEFT_EINVAL;
  uintptr_t expect = 0;
  /* acquire (both ways): on failure a DONE thread's writes are ours before we free
   * it (pairs with the finisher's release exchange); C11 forbids a failure order
   * stronger than the success order, and detaching itself publishes nothing */
  if (atomic_compare_exchange_strong_explicit(&t->join, &expect, WEFT__JW_DETACHED,
                                              memory_order_acquire, memory_order_acquire))
    return 0;
  /* Finished and not joined: reclaim it, if no racing detach or join wins first
   * (acquire: as above). Reclaimed already (FREED, JOINED): WEFT_ESRCH, freeing
   * nothing - valid only until the block is reused (weft/thread.h). */
  if (expect == WEFT__JW_DONE &&
      atomic_compare_exchange_strong_explicit(&t->join, &expect, WEFT__JW_FREED,
                                              memory_order_acquire, memory_order_relaxed)) {
    weft__tcb_free(weft__vp(), t);
    return 0;
  }
  return WEFT_ESRCH;
}

/* ---- yield ----------------------------------------------------------------------------
 * Default scheduler: take the head of the local queue and put the caller at the
 * tail under one acquisition of the queue lock, and release that lock only in the
 * continuation, after the caller is saved: no other VP can steal the caller while
 * its registers are still being pushed. Other schedulers: the caller is given to
 * thread_unblocked in the continuation. */

static void yield_cont(void *p) {
  weft_thread_t *self = p;
  /* only the general yields come here (TF_FPALL is in TF_YIELD_SLOW) */
  if (weft__tflags(self) & WEFT__TF_FPALL) weft__ctx_fp_save(&self->ctx);
#ifdef WEFT_HOOKS
  if (weft__tflags(self) & WEFT__TF_HOOK) weft__hook_switched(self, 0, NULL);
#endif
  /* A scheduler that does not see yields (the root's, a WEFT_SCHED_DISPATCH_ONLY
   * bundle's: no TF_SCHED_YIELD) gets no thread_unblocked for one: the caller goes to
   * the back of this VP's dispatch queue, as the rotation puts it. */
  weft_vp_t *vp = weft__vp();
  if (!(weft__tflags(self) & WEFT__TF_SCHED_YIELD)) weft__enqueue(vp, self);
  else weft__ready(vp, self);
}

/* The end of the yields below: switch from self to next (binding its stack if it
 * never ran; none to be had: stay) and give self to thread_unblocked once it is saved.
 * next NULL: nothing to yield to, return at once. */
static inline __attribute__((always_inline)) void yield_to(weft_vp_t *vp, weft_thread_t *self,
                                                          weft_thread_t *next) {
  if (!next) return;
  weft__prepare(vp, &next);
  if (!next) return;
  vp->current = next;
  weft__switch(&self->ctx, &next->ctx, yield_cont, self);
}

/* The general yield: dequeue the next ready thread and yield to it. */
static void yield_generic(weft_vp_t *vp, weft_thread_t *self) { yield_to(vp, self, weft__dequeue(vp)); }

static inline void yield_on(weft_vp_t *vp);

/* weft_yield's path when this VP has timers: fire the due ones, then yield (out of
 * line, so that the common path keeps nothing live across a call). */
static __attribute__((noinline)) void yield_timers(weft_vp_t *vp) {
  weft__timers_check(vp);
  yield_on(vp);
}

void weft__block_timers(weft_vp_t *vp, weft_thread_t *self, weft_ctx_fn fn, void *arg) {
  weft__timers_check(vp);
  weft__block_now(vp, self, fn, arg);
}

void weft_yield(void) {
  weft_vp_t *vp = weft__vp();
  if (WEFT__UNLIKELY(!vp)) {
    sched_yield();
    return;
  }
  /* relaxed: a hint; the timers are re-checked under their lock */
  if (WEFT__UNLIKELY(atomic_load_explicit(&vp->tm.n, memory_order_relaxed))) {
    yield_timers(vp);
    return;
  }
  yield_on(vp);
}

/* A thread of a non-root bundle yields on a VP with an empty dispatch queue: its
 * scheduler may hold ready threads of its own (a LIFO stack, a priority heap), so
 * ask it (processor_idle) for one to switch to. */
static __attribute__((noinline, cold)) void yield_to_scheduler(weft_vp_t *vp, weft_thread_t *self) {
  /* under the bundle lock, skipped while the bundle is stopped (bundle.c); then the
   * other bundles, as for a root thread (yield_to_bundles) */
  weft_thread_t *next = weft__bundle_yield_idle(self->bundle, vp);
  if (!next && weft__rt.nvps == 1) next = weft__idle_bundles(vp);  /* see yield_to_bundles */
  yield_to(vp, self, next);
}

/* A thread yields on a spare VP (the system monitor's, standing in for a VP whose
 * kernel thread sleeps in a call weft was not told of) with an empty queue: the
 * threads ready behind the stalled VP are what the spare is there for, and the spare
 * takes them only when its own loop runs, which a thread that keeps yielding never
 * lets it do (they waited for the whole blocking call). Take the next one. */
static __attribute__((noinline, cold)) void yield_on_spare(weft_vp_t *vp, weft_thread_t *self) {
  yield_to(vp, self, weft__monitor_spare_take(vp));
}

/* A root thread yields on the only VP with an empty dispatch queue: nothing else is
 * ready there, but a bundle's scheduler may hold threads of its own that only an idle
 * VP would ask for, and with one VP none ever is (a thread that waits for them by
 * yielding would wait for ever). Ask the bundles as an idle VP does. With more VPs
 * an idle one asks them; a yield does not, since a scheduler's processor_idle may
 * steal from other VPs, which a yield must not do (placement is the scheduler's). */
static __attribute__((noinline, cold)) void yield_to_bundles(weft_vp_t *vp, weft_thread_t *self) {
  yield_to(vp, self, weft__idle_bundles(vp));
}

/* The rotation yield, up to the switch: under vp's queue lock, the head thread `next`
 * becomes current and self goes to the tail. Returns next with the lock still held
 * (the switch's continuation releases it once self is saved), or NULL with it
 * released when there is nothing to rotate to (a never-run head goes through
 * yield_generic, which binds its stack outside the lock). Inlined into both callers:
 * the fast path keeps its shape (L3 counted in instructions). */
static inline __attribute__((always_inline)) weft_thread_t *rotate_locked(weft_vp_t *vp,
                                                                         weft_thread_t *self) {
  weft__spin_lock(&vp->q.lock);
  weft_thread_t *next = atomic_load_explicit(&vp->q.head, memory_order_relaxed);
  if (WEFT__UNLIKELY(!next || !next->ctx.sp)) {
    weft__spin_unlock(&vp->q.lock);
    if (next) yield_generic(vp, self);
    return NULL;
  }
  /* next->next becomes the front; self goes to the back (measured: with two
   * threads, L3's case, next is alone and the branch skips the links) */
  weft_thread_t *after = next->next;
  self->next = NULL;
  if (after) {
    weft_thread_t *back = vp->q.tail;
    atomic_store_explicit(&vp->q.head, after, memory_order_relaxed);
    back->next = self;
    self->prev = back;
  } else {
    atomic_store_explicit(&vp->q.head, self, memory_order_relaxed); /* front: no prev */
  }
  vp->q.tail = self;
  vp->current = next;
  return next;
}

/* Continuation of an all-registers thread's rotation yield: rewrite its frame,
 * then release the queue lock that keeps it from being taken meanwhile. */
struct fp_yield { weft_thread_t *self; weft__spin_t *lock; };
static void fp_yield_cont(void *p) {
  struct fp_yield c = *(struct fp_yield *)p;  /* p is on self's stack */
  weft__ctx_fp_save(&c.self->ctx);
  weft__spin_unlock(c.lock);  /* release: pairs with the next taker's lock */
}

/* A thread whose only slow-yield bit is TF_FPALL (switch mode ALL, no callbacks, no
 * scheduler that sees yields) rotates the dispatch queue as the fast path does, with
 * a continuation that saves its FP control state before it releases the queue lock. */
static __attribute__((noinline, cold)) void yield_fpall(weft_vp_t *vp, weft_thread_t *self) {
  weft_thread_t *next = rotate_locked(vp, self);
  if (!next) return;
  struct fp_yield c = {self, &vp->q.lock};
  weft__switch(&self->ctx, &next->ctx, fp_yield_cont, &c);
}

/* The yield of a thread with a slow-yield bit (out of line: the inlined path keeps
 * its one test, measured L3 58.5 instead of 56.5 with this choice made there). */
static __attribute__((noinline, cold)) void yield_slow(weft_vp_t *vp, weft_thread_t *self) {
  if ((weft__tflags(self) & WEFT__TF_YIELD_SLOW) == WEFT__TF_FPALL) yield_fpall(vp, self);
  else yield_generic(vp, self);
}

static inline void yield_on(weft_vp_t *vp) {
  weft_thread_t *self = vp->current;
  if (!atomic_load_explicit(&vp->q.head, memory_order_relaxed)) {
    /* an empty queue, but maybe a thread in the hand-off slot (its front: the slot
     * is full only while the queue is empty): the general yield takes it */
    if (WEFT__UNLIKELY(atomic_load_explicit(&vp->q.next, memory_order_relaxed) != NULL))
      yield_generic(vp, self);
    else if (WEFT__UNLIKELY(vp->index >= weft__rt.nvps))
      yield_on_spare(vp, self);
    else if (WEFT__UNLIKELY(weft__tflags(self) & WEFT__TF_BUNDLE))
      yield_to_scheduler(vp, self);
    /* relaxed: a hint (bundles created since are found by the next yield); nvps is
     * fixed while weft runs */
    else if (WEFT__UNLIKELY(atomic_load_explicit(&weft__rt.nbundles, memory_order_relaxed)) &&
             weft__rt.nvps == 1)
      yield_to_bundles(vp, self);
    return;
  }
  if (WEFT__UNLIKELY(weft__tflags(self) & WEFT__TF_YIELD_SLOW)) {
    yield_slow(vp, self);
    return;
  }
  weft_thread_t *next = rotate_locked(vp, self);
  if (WEFT__UNLIKELY(!next)) return;
  weft__switch_unlock(&self->ctx, &next->ctx, &vp->q.lock);
}

/* ---- self, ids, the fast local pointer ---------------------------------------------- */

weft_thread_t *weft_self(void) {
  weft_vp_t *vp = weft__vp();
  return vp ? vp->current : weft__wired_self();
}

uint64_t weft_thread_id(const weft_thread_t *t) { return t ? t->id : 0; }

/* The calling weft thread, wired or not; NULL on a plain OS thread and on a VP's idle
 * loop (a do-when-idle function, an idle hook callback: vp->current is NULL there). */
static inline weft_thread_t *self_or_null(void) {
  weft_vp_t *vp = weft__vp();
  return WEFT__LIKELY(vp != NULL) ? vp->current : weft__wired_self();
}

void *weft_local_get(void) {
  weft_thread_t *t = self_or_null();
  return WEFT__LIKELY(t != NULL) ? t->local : NULL;
}

int weft_local_set(void *value) {
  weft_thread_t *t = self_or_null();
  if (WEFT__UNLIKELY(!t)) return WEFT_EPERM;
  t->local = value;
  return 0;
}

/* ---- context-switch modes (weft/thread.h) ------------------------------------------
 * The mode is the TF_FPALL bit of the thread's flags. The thread itself sets or
 * clears it with an atomic RMW (relaxed: only the thread acts on its own bit, in
 * its own switches; the RMW keeps hook.c's concurrent OR/AND of TF_HOOK intact). */

int weft_switch_mode_set(int mode) {
  if (mode != WEFT_SWITCH_INTEGER && mode != WEFT_SWITCH_ALL) return WEFT_EINVAL;
  weft_thread_t *self = self_or_null();  /* a wired thread's mode applies once unwired */
  if (!self) return WEFT_EPERM;
  if (mode == WEFT_SWITCH_ALL) __atomic_fetch_or(&self->flags, (uint32_t)WEFT__TF_FPALL, __ATOMIC_RELAXED);
  else __atomic_fetch_and(&self->flags, ~(uint32_t)WEFT__TF_FPALL, __ATOMIC_RELAXED);
  return 0;
}

int weft_switch_mode_get(void) {
  weft_thread_t *self = self_or_null();
  if (!self) return WEFT_SWITCH_INTEGER;
  return (weft__tflags(self) & WEFT__TF_FPALL) ? WEFT_SWITCH_ALL : WEFT_SWITCH_INTEGER;
}

/* ---- block and unblock (public, weft/sched.h) ---------------------------------------- */

static void block_cont(void *p) {
  weft_thread_t *self = p;
  uint32_t f = weft__tflags(self);
  if (WEFT__UNLIKELY(f & WEFT__TF_SLOW)) weft__blocked_slow(self, f, self->cont_arg);
#ifdef WEFT_CHECKED
  /* relaxed: release() publishes self with a release operation after this */
  atomic_store_explicit(&self->dbg_blocked, 1, memory_order_relaxed);
#endif
  self->cont_fn(self->cont_arg);
}

void weft_thread_block(void (*release)(void *arg), void *arg) {
  weft_vp_t *vp = weft__vp();
  WEFT__ASSERT(vp != NULL, "weft_thread_block called from a plain OS thread");
  if (!vp) return;
  weft_thread_t *self = vp->current;
  self->cont_fn = release;
  self->cont_arg = arg;
  weft__block(vp, self, block_cont, self);
}

void weft_thread_unblock(weft_thread_t *t) {
  if (!t) return;
#ifdef WEFT_CHECKED
  WEFT__ASSERT(atomic_exchange_explicit(&t->dbg_blocked, 0, memory_order_relaxed) == 1,
               "weft_thread_unblock of a thread not blocked in weft_thread_block");
#endif
  weft__unblock(weft__vp(), t);
}
