/* src/core/runtime.c - init and shutdown, virtual processors, the idle loop,
 * parking and waking, the switch wrapper, and the stack-overflow report.
 *
 * Idle loop of one VP (one diagram, docs/design.md has the long form):
 *
 *     +--> local dispatch queue --found--> run it (switch idle_ctx -> thread) --+
 *     |        | empty                                                         |
 *     |    processor_idle: focus, root (steal), others --found--> run it ------+
 *     |        (stopped bundles are skipped)
 *     |        | nothing
 *     |    retry the oldest thread waiting for a stack --bound--> run it ------+
 *     |        | none, or still no stack
 *     |    spin (lock-free polls of every queue head) for cfg.spin_us
 *     |        | nothing
 *     +--- sleep on vp->park (futex) until an enqueuer wakes us (the last VP to
 *          sleep first checks that some thread can still run: check_stuck)
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/io.h"
#include "weft/hook.h"
#include "weft/trace.h"
#include "weft/wire.h"

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(WEFT_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

weft__rt_t weft__rt;
_Atomic uint64_t weft__next_id_block = 1;
/* used: referenced only from inline asm, which link-time optimisation cannot see */
__thread weft_vp_t *weft__tls_vp __attribute__((tls_model("initial-exec"), used));

/* src/sync/timer.c */
int weft__timers_poll_all(void);
uint64_t weft__timers_earliest(void);
void weft__timers_free(weft_vp_t *vp);

void weft__spin_unlock_cont(void *lock) { weft__spin_unlock((weft__spin_t *)lock); }

/* ---- the switch, with sanitizer annotations -------------------------------------- */

#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
/* Sanitizer builds wrap the continuation: the first thing run on the new stack
 * tells ASan the switch finished, then the real continuation runs. */
struct san_cont { weft_ctx_fn fn; void *arg; weft_ctx_t *to; };

static void san_cont_fn(void *p) {
  struct san_cont c = *(struct san_cont *)p; /* copy: p lives on the old stack */
#if defined(WEFT_ASAN)
  __sanitizer_finish_switch_fiber(c.to->asan_fake, NULL, NULL);
#endif
  if (c.fn) c.fn(c.arg);
}

/* fake_save: where ASan keeps the switched-away context's fake stack; NULL for a
 * context that will never resume (ASan then frees it). */
static void switch_annotated(void **fake_save, weft_ctx_t *from, weft_ctx_t *to,
                             weft_ctx_fn fn, void *arg) {
  struct san_cont c = {fn, arg, to};
#if defined(WEFT_ASAN)
  __sanitizer_start_switch_fiber(fake_save, to->stack_lo, to->stack_size);
#else
  (void)fake_save;
#endif
#if defined(WEFT_TSAN)
  if (!to->tsan_fiber) to->tsan_fiber = __tsan_create_fiber(0);
  __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
  weft__ctx_switch(from, to, san_cont_fn, &c);
}

void weft__switch(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg) {
  switch_annotated(&from->asan_fake, from, to, fn, arg);
}

/* A finishing thread never resumes: ASan may drop its fake stack. */
void weft__switch_dying(weft_ctx_t *from, weft_ctx_t *to, weft_ctx_fn fn, void *arg) {
  switch_annotated(NULL, from, to, fn, arg);
}

/* A context that runs on its kernel thread's own stack (a VP's idle context, the main
 * thread, a wired thread's base): its bounds and fiber, for the sanitizers. */
void weft__san_init_self(weft_ctx_t *ctx) {
  void *lo;
  size_t size;
  weft__os_thread_stack(&lo, &size);
  ctx->stack_lo = lo;
  ctx->stack_size = size;
  ctx->asan_fake = NULL;
#if defined(WEFT_TSAN)
  ctx->tsan_fiber = __tsan_get_current_fiber();
#else
  ctx->tsan_fiber = NULL;
#endif
}
#endif

/* Makes t ready through its scheduler (default scheduler: inlined enqueue on the
 * caller's VP); raises no callback (yield uses it directly). */
static void ready_os(weft_thread_t *t);

void weft__ready(weft_vp_t *vp, weft_thread_t *t) {
  if (WEFT__UNLIKELY(!vp)) {
    ready_os(t);
    return;
  }
  weft_bundle_t *b = t->bundle;
  if (WEFT__LIKELY(!(weft__tflags(t) & WEFT__TF_CUSTOM))) {
    weft__enqueue(vp, t);
  } else {
    /* read before the handler: once t is queued it may run, finish, and its bundle
     * be destroyed */
    unsigned f = b->ops.flags;
    b->ops.thread_unblocked(b, t);
    /* the scheduler may have kept t in its own structure, unless it never does */
    if (!(f & WEFT_SCHED_DISPATCH_ONLY)) weft_sched_notify();
  }
}

/* The general path of weft__unblock: callbacks, then the scheduler (cold and out of
 * line, so the inlined path keeps its registers: measured 6 instructions a wake). */
static __attribute__((noinline, cold)) void unblock_slow(weft_vp_t *vp, weft_thread_t *t) {
#ifdef WEFT_HOOKS
  if (weft__tflags(t) & WEFT__TF_HOOK)
    weft__hook_raise(WEFT_HOOK_UNBLOCKED, t, vp ? (void *)vp->current : NULL);
#endif
  weft__ready(vp, t);
}

/* A wake-up from a plain OS thread (or a wire kernel thread): inside the gate, so
 * that shutdown never frees the queues and the sleeper stack under it. A closed gate
 * means no weft thread is alive, so there is nothing to wake (misuse). */
static __attribute__((noinline, cold)) void unblock_os(weft_thread_t *t) {
  if (weft__os_enter(WEFT__GATE_OTHER)) return;
  unblock_slow(NULL, t);
  weft__os_leave(WEFT__GATE_OTHER);
}

/* Raises thread_unblocked (and the UNBLOCKED callbacks). */
void weft__unblock(weft_vp_t *vp, weft_thread_t *t) {
  if (WEFT__UNLIKELY(!vp)) {
    unblock_os(t);
    return;
  }
  if (WEFT__LIKELY(!(weft__tflags(t) & WEFT__TF_SLOW))) {
    weft__enqueue(vp, t);
    return;
  }
  unblock_slow(vp, t);
}

/* The VP a plain OS thread hands a thread to: round robin. Only called inside the
 * gate, where nvps and vps are those of the running runtime. */
weft_vp_t *weft__os_target_vp(void) {
  unsigned i = atomic_fetch_add_explicit(&weft__rt.rr, 1, memory_order_relaxed);
  return weft__rt.vps[i % (unsigned)weft__rt.nvps];
}

/* weft__ready from a thread with no VP: the gated general path. */
static __attribute__((noinline, cold)) void ready_os(weft_thread_t *t) {
  if (weft__os_enter(WEFT__GATE_OTHER)) return;
  weft_bundle_t *b = t->bundle;
  if (!(weft__tflags(t) & WEFT__TF_CUSTOM)) {
    weft__enqueue(weft__os_target_vp(), t);
  } else {
    unsigned f = b->ops.flags;  /* before the handler, as in weft__ready */
    b->ops.thread_unblocked(b, t);
    if (!(f & WEFT_SCHED_DISPATCH_ONLY)) weft_sched_notify();
  }
  weft__os_leave(WEFT__GATE_OTHER);
}

/* ---- the OS-thread gate -----------------------------------------------------------
 * gate_state: 2 open; 1 creations closed (weft_shutdown has begun); 0 closed (no weft
 * thread is alive, teardown follows). An entrant counts itself in (seq_cst RMW),
 * then loads the state (seq_cst); shutdown stores the state (seq_cst), then loads
 * the counts (seq_cst). Store-buffering with every access seq_cst: either the
 * entrant sees the lower state and leaves, or shutdown sees it counted and waits
 * for its leave (release decrement; shutdown's acquire load pairs with it, so all
 * the entrant did happens-before the teardown). File statics, not in weft__rt:
 * weft_init and teardown clear weft__rt while OS threads may be counted in. */
static _Atomic int gate_state;
static _Atomic int gate_inside;    /* OS threads inside a join, wake-up, ... */
static _Atomic int gate_creating;  /* OS threads inside weft_create */

int weft__os_enter(int kind) {
  _Atomic int *cnt = kind == WEFT__GATE_CREATE ? &gate_creating : &gate_inside;
  atomic_fetch_add_explicit(cnt, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&gate_state, memory_order_seq_cst) >= kind) return 0;
  atomic_fetch_sub_explicit(cnt, 1, memory_order_release);
  return WEFT_ENOTINIT;
}

void weft__os_leave(int kind) {
  /* release: pairs with the acquire load in gate_set (shutdown's drain) */
  atomic_fetch_sub_explicit(kind == WEFT__GATE_CREATE ? &gate_creating : &gate_inside, 1,
                            memory_order_release);
}

/* Lowers (or raises) the gate; when lowering, waits until no OS thread is inside
 * the part just closed. Entrants never block inside a creation; inside the rest
 * only an OS joiner waits, and only for a live thread: gate_set(0) is called when
 * none is left. */
static void gate_set(int state) {
  atomic_store_explicit(&gate_state, state, memory_order_seq_cst);
  _Atomic int *cnt = state == 1 ? &gate_creating : state == 0 ? &gate_inside : NULL;
  if (!cnt) return;
  /* seq_cst: the other half of the store-buffering pair above; also acquire, which
   * pairs with weft__os_leave's release decrement */
  while (atomic_load_explicit(cnt, memory_order_seq_cst) != 0) weft__os_sleep_ns(10000);
}

/* Idle-loop events (cold: one relaxed load when none is installed). */
static inline void idle_event(int ev, weft_thread_t *t) {
#ifdef WEFT_HOOKS
  if (WEFT__UNLIKELY(atomic_load_explicit(&weft__hooks_on, memory_order_relaxed)))
    weft__hook_raise(ev, t, NULL);
#else
  (void)ev;
  (void)t;
#endif
}

/* ---- parking and waking --------------------------------------------------------------
 * A VP in the idle loop counts itself in rt.idle as spinning; before it sleeps it
 * moves itself to the sleeping count (seq_cst RMW), pushes itself on the sleeper
 * stack, and then takes every dispatch queue's lock to look once more. An enqueuer
 * reads rt.idle inside the queue lock. So either the sleeper's look comes after the
 * enqueue (it sees the thread), or the enqueuer's read comes after the sleeper's
 * RMW (it sees a sleeper and, if nobody spins, wakes one). Threads a custom
 * scheduler keeps to itself are covered by weft_sched_notify(), whose seq_cst
 * fence pairs with the same RMW, and by the sleeper's last processor_idle look. */

static void idle_add(int32_t delta) {
  atomic_fetch_add_explicit(&weft__rt.idle, (uint32_t)delta, memory_order_seq_cst);
}

/* Takes a sleeping VP off the sleeper stack (only if no VP spins, unless `always`),
 * counts it as spinning so that other enqueuers need not wake more, and wakes it.
 * Returns 0 if there was none to wake. */
static int wake_sleeper(int always) {
  weft__rt_t *rt = &weft__rt;
  weft_vp_t *vp = NULL;
  weft__spin_lock(&rt->idle_lock);
  uint32_t idle = atomic_load_explicit(&rt->idle, memory_order_relaxed);
  if (rt->nsleepers > 0 && (always || (idle & 0xffff) == 0)) {
    vp = rt->sleepers[--rt->nsleepers];
    idle_add((int32_t)WEFT__IDLE_SPIN - (int32_t)WEFT__IDLE_SLEEP);
    /* release: pairs with the acquire load in vp_sleep's wait loop */
    atomic_store_explicit(&vp->park, 0, memory_order_release);
  }
  weft__spin_unlock(&rt->idle_lock);
  if (!vp) return 0;
  weft__os_futex_wake(&vp->park, 1);
  weft__io_wake(vp);  /* if it waits in the I/O engine instead (src/io) */
  return 1;
}

void weft__wake_one(void) { wake_sleeper(0); }

static void wake_all(void) {
  while (wake_sleeper(1)) {
  }
}

/* Returns 1 if some dispatch queue holds a thread; takes each lock (see above). */
static int any_queued_locked_look(void) {
  for (int i = 0; i < weft__rt.nvps; i++) {
    weft_vp_t *v = weft__rt.vps[i];
    weft__spin_lock(&v->q.lock);
    int busy = atomic_load_explicit(&v->q.head, memory_order_relaxed) != NULL;
    weft__spin_unlock(&v->q.lock);
    if (busy) return 1;
  }
  return 0;
}

static int any_queued_hint(void) {
  for (int i = 0; i < weft__rt.nvps; i++)
    if (atomic_load_explicit(&weft__rt.vps[i]->q.head, memory_order_relaxed)) return 1;
  return 0;
}

/* processor_idle on every non-root bundle that is not stopped, until one gives a
 * thread (bundle.c). */
static weft_thread_t *custom_idle(weft_vp_t *vp) { return weft__bundle_idle_sweep(vp); }

/* processor_idle: the focus bundle first (when it is not the root; its handler may
 * pass the event up or down the tree), then the root bundle (the default scheduler:
 * steal), then every other bundle (docs/schedulers.md, "idle events"). */
static weft_thread_t *raise_idle(weft_vp_t *vp) {
  weft_thread_t *t = weft__bundle_idle_focus(vp);
  if (t) return t;
  weft_bundle_t *root = weft__rt.root;
  t = root->ops.processor_idle ? root->ops.processor_idle(root, vp) : NULL;
  return t ? t : custom_idle(vp);
}

/* ---- threads waiting for a stack ------------------------------------------------
 * A thread whose stack cannot be bound at its first dispatch (weft__prepare) goes on
 * rt.nostack, not back on a dispatch queue: the queues keep moving, and idle VPs
 * retry the oldest waiter after they have found nothing else to run (a finishing
 * thread gives its stack back to a VP's cache, where the retry finds it). When no
 * other thread can finish any more, vp_sleep stops the process (out_of_stacks). */

void weft__bind_failed(weft_vp_t *vp, weft_thread_t *t) {
  (void)vp;
  weft__rt_t *rt = &weft__rt;
  weft__spin_lock(&rt->nostack_lock);
  t->next = NULL;
  if (rt->nostack_tail) rt->nostack_tail->next = t;
  else rt->nostack_head = t;
  rt->nostack_tail = t;
  atomic_store_explicit(&rt->nnostack, atomic_load_explicit(&rt->nnostack, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  weft__spin_unlock(&rt->nostack_lock);
}

/* The oldest thread waiting for a stack, with its stack now bound; NULL if there is
 * none or binding still fails (then it stays first in line). */
static weft_thread_t *nostack_retry(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  if (WEFT__LIKELY(atomic_load_explicit(&rt->nnostack, memory_order_relaxed) == 0)) return NULL;
  weft__spin_lock(&rt->nostack_lock);
  weft_thread_t *t = rt->nostack_head;
  if (t) {
    rt->nostack_head = t->next;
    if (!t->next) rt->nostack_tail = NULL;
    atomic_store_explicit(&rt->nnostack, atomic_load_explicit(&rt->nnostack, memory_order_relaxed) - 1,
                          memory_order_relaxed);
  }
  weft__spin_unlock(&rt->nostack_lock);
  if (!t) return NULL;
  if (weft__stack_bind(vp, t) == 0) return t;
  weft__spin_lock(&rt->nostack_lock);  /* back at the head: it keeps its turn */
  t->next = rt->nostack_head;
  rt->nostack_head = t;
  if (!rt->nostack_tail) rt->nostack_tail = t;
  atomic_store_explicit(&rt->nnostack, atomic_load_explicit(&rt->nnostack, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  weft__spin_unlock(&rt->nostack_lock);
  return NULL;
}

static weft_thread_t *find_work(weft_vp_t *vp) {
  weft__timers_poll_all();  /* expired timers of every VP: their threads come here */
  weft_thread_t *t = weft__dequeue(vp);
  if (!t) t = raise_idle(vp);
  return t ? t : nostack_retry(vp);
}

/* ---- when nothing can move any more: the deadlock and out-of-stacks reports ------
 * Checked by a VP that has just counted itself asleep and found nothing in its last
 * look, only when every VP is asleep: the paths that run threads pay nothing.
 * "Nothing can wake any thread" is the conjunction of quiet() and "no kernel thread
 * besides weft's": a weft thread can only be made ready by a running weft thread
 * (none: every VP sleeps), a timer (none armed), a wired thread, a do-when-idle
 * function, a custom scheduler's own machinery, or a kernel thread weft does not
 * run (a plain OS thread, inside weft or about to call it). quiet() is read, then
 * the thread count, then quiet() again: a kernel thread that made something ready
 * and exited between the two reads of quiet() did it before its exit, which the
 * count observes, so the second quiet() sees its work (or the wake-up it caused:
 * park is 0 or the idle word changed). */

static void fatal_write(const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void fatal_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fatal_printf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  fatal_write(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Kernel threads in this process (field 20 of /proc/self/stat), or -1. */
static long count_kthreads(void) {
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *p = strrchr(buf, ')');  /* the command name may hold spaces and parentheses */
  if (!p) return -1;
  int field = 2;
  for (; *p; p++)
    if (*p == ' ' && ++field == 20) return strtol(p + 1, NULL, 10);
  return -1;
}

/* Every VP asleep (vp, the caller, among them and not woken since), no thread in a
 * dispatch queue, and none of the other sources of wake-ups in place. */
static int quiet(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  uint32_t idle = atomic_load_explicit(&rt->idle, memory_order_seq_cst);
  return (idle & 0xffff) == 0 && (int)(idle >> 16) == rt->nvps &&
         atomic_load_explicit(&vp->park, memory_order_acquire) == 1 &&
         !atomic_load(&rt->stopping) && !any_queued_locked_look() &&
         weft__timers_earliest() == UINT64_MAX && !weft__io_waiting() &&
         atomic_load_explicit(&rt->nidlef, memory_order_acquire) == 0 &&
         weft_wired_count() == 0 && weft__wire_returning() == 0 &&
         atomic_load_explicit(&rt->nbundles, memory_order_acquire) == 0 &&
         atomic_load_explicit(&gate_inside, memory_order_seq_cst) == 0 &&
         atomic_load_explicit(&gate_creating, memory_order_seq_cst) == 0;
}

static int nothing_can_wake(weft_vp_t *vp) {
  if (weft__rt.kthreads_expected < 0 || !quiet(vp)) return 0;
  long k = count_kthreads();
  return k >= 0 && k <= weft__rt.kthreads_expected && quiet(vp);
}

/* The deadlock report: blocked threads are the control blocks whose thread has run
 * (a saved context) and not finished (join word not DONE); with every VP asleep and
 * every queue empty they are all blocked. Up to MAXLINES are named; a joiner is
 * found from its joinee's join word (never through a possibly stale pointer). */
#define WEFT__REPORT_LINES 64
struct blocked_scan {
  weft_thread_t *t[WEFT__REPORT_LINES];
  weft_thread_t *joins[WEFT__REPORT_LINES];
  int n;
  long total;
};

static int is_blocked(weft_thread_t *t) {
  return t->ctx.sp != NULL &&
         atomic_load_explicit(&t->join, memory_order_acquire) != WEFT__JW_DONE;
}

static void scan_blocked(weft_thread_t *t, void *arg) {
  struct blocked_scan *s = arg;
  if (!is_blocked(t)) return;
  s->total++;
  if (s->n < WEFT__REPORT_LINES) {
    s->joins[s->n] = NULL;
    s->t[s->n++] = t;
  }
}

static void scan_joins(weft_thread_t *j, void *arg) {
  struct blocked_scan *s = arg;
  uintptr_t w = atomic_load_explicit(&j->join, memory_order_acquire);
  if (WEFT__JW_TAG(w) != WEFT__JW_WEFT || !is_blocked(j)) return;
  for (int i = 0; i < s->n; i++)
    if (s->t[i] == WEFT__JW_PTR(w)) s->joins[i] = j;
}

static _Noreturn void deadlock_report(void) {
  weft__rt_t *rt = &weft__rt;
  static struct blocked_scan s;  /* the process ends here: one report at most */
  s.n = 0;
  s.total = 0;
  scan_blocked(rt->main, &s);
  weft__tcb_foreach(scan_blocked, &s);
  scan_joins(rt->main, &s);
  weft__tcb_foreach(scan_joins, &s);
  fatal_printf("weft: fatal error: all threads are asleep - deadlock!\n");
  for (int i = 0; i < s.n; i++) {
    weft_thread_t *t = s.t[i];
    const char *main_tag = t == rt->main ? " (main)" : "";
    if (s.joins[i])
      fatal_printf("weft: thread %llu%s: blocked in weft_join on thread %llu\n",
                   (unsigned long long)t->id, main_tag, (unsigned long long)s.joins[i]->id);
    else
      fatal_printf("weft: thread %llu%s: blocked on a synchronization object, a thread "
                   "list or weft_thread_block\n", (unsigned long long)t->id, main_tag);
  }
  if (s.total > s.n) fatal_printf("weft: ... and %ld more blocked threads\n", s.total - s.n);
  fatal_printf("weft: (WEFT_DEADLOCK=0 or weft_config_t.deadlock_report = "
               "WEFT_DEADLOCK_IGNORE turns this report off)\n");
  signal(SIGABRT, SIG_DFL);
  abort();
}

static unsigned long read_ulong_file(const char *path) {
  char buf[64];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return strtoul(buf, NULL, 10);
}

/* No thread can finish and give a stack back, and the oldest thread waiting for one
 * still cannot get it: name the limit and stop. */
static _Noreturn void out_of_stacks(weft_thread_t *t) {
  weft__rt_t *rt = &weft__rt;
  size_t size = t->stack_size ? t->stack_size : rt->cfg.stack_size;
  fatal_printf("weft: fatal error: out of stacks: thread %llu needs a stack of %zu bytes and "
               "none can be had, and no other thread can run or finish to give one back\n",
               (unsigned long long)t->id, size);
  if (rt->cfg.stack_alloc) {
    fatal_printf("weft: the stack_alloc policy (weft_config_t) returned NULL\n");
  } else {
    /* why the last stack mapping failed, as alloc.c recorded it (the limit named) */
    char why[512];
    if (weft__stack_describe_failure(why, sizeof why) > 0)
      fatal_printf("weft: %s\n", why);
    else
      fatal_printf("weft: no stack mapping failed: the failure was injected "
                   "(weft_debug_fail_alloc) or came from the control-block allocator\n");
  }
  struct rlimit rl;
  char as[32] = "unlimited";
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    snprintf(as, sizeof as, "%llu bytes", (unsigned long long)rl.rlim_cur);
  fatal_printf("weft: %ld live threads (max_threads %ld), %ld waiting for a stack, %ld system "
               "blocks held by weft (stacks among them); vm.max_map_count %lu, RLIMIT_AS %s\n",
               weft__live_threads(), rt->cfg.max_threads,
               (long)atomic_load_explicit(&rt->nnostack, memory_order_relaxed),
               weft_debug_live_blocks(), read_ulong_file("/proc/sys/vm/max_map_count"), as);
  fatal_printf("weft: lower weft_config_t.max_threads or stack_size, or raise the limit\n");
  signal(SIGABRT, SIG_DFL);
  abort();
}

/* Called by a VP that is about to sleep: reports and aborts if no weft thread can
 * ever run again, or hands back a thread that waited for a stack and now has one
 * (queued on vp: the enqueue wakes a VP). */
static void check_stuck(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  uint32_t idle = atomic_load_explicit(&rt->idle, memory_order_relaxed);
  if ((idle & 0xffff) != 0 || (int)(idle >> 16) != rt->nvps) return;  /* not the last */
  int nostack = atomic_load_explicit(&rt->nnostack, memory_order_relaxed) != 0;
  if (!nostack && !rt->deadlock_report) return;
  if (!nothing_can_wake(vp)) return;
  if (nostack) {
    weft_thread_t *t = nostack_retry(vp);
    if (t) {
      weft__enqueue(vp, t);
      return;
    }
    weft__spin_lock(&rt->nostack_lock);
    t = rt->nostack_head;
    weft__spin_unlock(&rt->nostack_lock);
    if (t) out_of_stacks(t);
    return;
  }
  deadlock_report();
}

/* Sleeps until woken; returns with the VP counted as spinning again, and with a
 * thread if the last look before sleeping found one in a custom scheduler. */
static weft_thread_t *vp_sleep(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  weft__spin_lock(&rt->idle_lock);
  atomic_store_explicit(&vp->park, 1, memory_order_relaxed);
  rt->sleepers[rt->nsleepers++] = vp;
  idle_add((int32_t)WEFT__IDLE_SLEEP - (int32_t)WEFT__IDLE_SPIN);
  weft__spin_unlock(&rt->idle_lock);

  /* the last look: every dispatch queue under its lock, and every custom
   * scheduler. The seq_cst fence pairs with the one in weft_sched_notify: either
   * its caller's thread is visible to processor_idle below, or its load of rt.idle
   * sees us asleep (store-buffering; the RMW alone does not order our later loads
   * on every architecture). */
  atomic_thread_fence(memory_order_seq_cst);
  weft_thread_t *t = NULL;
  int work = any_queued_locked_look() || atomic_load(&rt->stopping) ||
             (t = custom_idle(vp)) != NULL;
  if (work) {
    /* cancel, unless a waker already took us off the sleeper stack */
    weft__spin_lock(&rt->idle_lock);
    if (atomic_load_explicit(&vp->park, memory_order_relaxed)) {
      for (int i = 0; i < rt->nsleepers; i++)
        if (rt->sleepers[i] == vp) {
          rt->sleepers[i] = rt->sleepers[--rt->nsleepers];
          break;
        }
      idle_add((int32_t)WEFT__IDLE_SPIN - (int32_t)WEFT__IDLE_SLEEP);
      atomic_store_explicit(&vp->park, 0, memory_order_relaxed);
    }
    weft__spin_unlock(&rt->idle_lock);
    return t;
  }
  weft__stat_inc(&vp->n_sleeps);
  check_stuck(vp);  /* the last VP to sleep: can anything still run? */
  /* Sleep no longer than the earliest timer of any VP (read after the last look:
   * a timer armed later belongs to a VP that is awake, and bounds its own sleep). */
  uint64_t until = weft__timers_earliest();
  /* with do-when-idle functions registered, or threads waiting for a stack, wake
   * every millisecond to call them or retry */
  if (atomic_load_explicit(&rt->nidlef, memory_order_relaxed) ||
      atomic_load_explicit(&rt->nnostack, memory_order_relaxed)) {
    uint64_t soon = weft__os_now_ns() + 1000000u;
    if (soon < until) until = soon;
  }
  /* acquire: pairs with the release store of 0 in weft__wake_one */
  while (atomic_load_explicit(&vp->park, memory_order_acquire)) {
    /* the futex wait, or a wait in the I/O engine while threads wait on I/O; 1 if
     * that made threads ready (src/io/io.h) */
    int io_ready = weft__io_park(vp, until);
    if (io_ready || (until != UINT64_MAX && weft__os_now_ns() >= until)) {
      /* threads made ready by I/O, or a timer is due: stop sleeping, unless a
       * waker already took us */
      weft__spin_lock(&rt->idle_lock);
      if (atomic_load_explicit(&vp->park, memory_order_relaxed)) {
        for (int i = 0; i < rt->nsleepers; i++)
          if (rt->sleepers[i] == vp) {
            rt->sleepers[i] = rt->sleepers[--rt->nsleepers];
            break;
          }
        idle_add((int32_t)WEFT__IDLE_SPIN - (int32_t)WEFT__IDLE_SLEEP);
        atomic_store_explicit(&vp->park, 0, memory_order_relaxed);
      }
      weft__spin_unlock(&rt->idle_lock);
      break;
    }
  }
  return NULL;
}

/* Polls without locks for cfg.spin_us, then sleeps. Returns a thread found in a
 * custom scheduler, or NULL: then the caller looks again (something was seen in a
 * dispatch queue, or the VP slept and was woken). */
static weft_thread_t *idle_wait(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  uint64_t until = weft__os_now_ns() + (uint64_t)rt->cfg.spin_us * 1000u;
  do {
    idle_event(WEFT_HOOK_IDLE_SPIN, NULL);
    weft__idle_funcs_run();  /* do-when-idle functions (weft/vp.h) */
    for (int i = 0; i < 64; i++) weft__os_relax();
    /* let a ready kernel thread on this CPU run first: plain OS threads woken by a
     * sync object would otherwise wait for a CPU until every VP stops polling */
    sched_yield();
    if (any_queued_hint() || atomic_load_explicit(&rt->stopping, memory_order_relaxed) ||
        weft__timers_poll_all() || weft__io_poll(vp))
      return NULL;
    weft_thread_t *t = custom_idle(vp);
    if (t) return t;
  } while (weft__os_now_ns() < until);
  return vp_sleep(vp);
}

void weft_sched_notify(void) {
  /* seq_cst fence: pairs with the sleeper's seq_cst update of rt.idle; the
   * scheduler's store of the thread comes before it (see vp_sleep) */
  atomic_thread_fence(memory_order_seq_cst);
  uint32_t idle = atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
  if (idle != 0 && (idle & 0xffff) == 0) weft__wake_one();
}

static void run_from_idle(weft_vp_t *vp, weft_thread_t *t) {
  weft__prepare(vp, &t);
  if (!t) return;  /* no stack could be bound: it waits on rt.nostack */
  vp->current = t;
#ifdef WEFT_HOOKS
  if (WEFT__UNLIKELY(weft__tflags(t) & WEFT__TF_HOOK)) weft__hook_raise(WEFT_HOOK_RESTORE, t, NULL);
#endif
  weft__switch(&vp->idle_ctx, &t->ctx, NULL, NULL);
  vp->current = NULL;
}

/* The idle loop (diagram at the top). VP 0 never leaves it: at shutdown the main
 * thread switches back to its own stack and this context is dropped. */
static void idle_loop(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  idle_add((int32_t)WEFT__IDLE_SPIN);
  int idle = 0;  /* between IDLE_BEGIN and IDLE_END */
  for (;;) {
    /* at shutdown only the main thread is left, and it is on its way to VP 0 */
    if (vp->index != 0 && atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
      idle_add(-(int32_t)WEFT__IDLE_SPIN);
      return;
    }
    weft_thread_t *t = find_work(vp);
    if (!t) {
      if (!idle) idle_event(WEFT_HOOK_IDLE_BEGIN, NULL);
      idle = 1;
      t = idle_wait(vp);
      if (!t) continue;
    }
    if (idle) idle_event(WEFT_HOOK_IDLE_END, t);
    idle = 0;
    /* leaving the spinning state; the last spinner to find work wakes another VP
     * so that work left behind is never stranded while a VP sleeps */
    uint32_t old = atomic_fetch_sub_explicit(&rt->idle, WEFT__IDLE_SPIN, memory_order_seq_cst);
    if ((old & 0xffff) == 1 && (old >> 16) != 0 &&
        (any_queued_hint() || atomic_load_explicit(&rt->nbundles, memory_order_relaxed) ||
         weft__io_need_poller()))
      weft__wake_one();
    do {
      run_from_idle(vp, t);
      /* this VP's due timers (relaxed hint, re-checked under the heap lock): the
       * loop may go round for a long time without passing find_work */
      if (atomic_load_explicit(&vp->tm.n, memory_order_relaxed)) weft__timers_check(vp);
      t = weft__dequeue(vp);
    } while (t);
    idle_add((int32_t)WEFT__IDLE_SPIN);
  }
}

static void idle_entry(void *p) { idle_loop((weft_vp_t *)p); abort(); }

/* ---- stack overflow report ---------------------------------------------------------- */

static struct sigaction old_segv, old_bus;
#define WEFT__ALTSTACK_SIZE (64 * 1024)

static char *fmt_hex(char *p, uintptr_t v) {
  char tmp[18];
  int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
  *p++ = '0'; *p++ = 'x';
  while (n) *p++ = tmp[--n];
  return p;
}

static char *fmt_dec(char *p, uint64_t v) {
  char tmp[21];
  int n = 0;
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static char *fmt_str(char *p, const char *s) { while (*s) *p++ = *s++; return p; }

/* Runs on the VP's alternate signal stack. Async-signal-safe: formats by hand and
 * writes with write(2). A fault in the guard page of the running weft thread is a
 * stack overflow: report and abort. Anything else goes to the previous handler. */
static void segv_handler(int sig, siginfo_t *si, void *uc) {
  weft_vp_t *vp = weft__vp();
  weft_thread_t *t = vp ? vp->current : NULL;
  uintptr_t a = (uintptr_t)si->si_addr;
  if (t && t->stack) {
    size_t size = t->stack_size ? t->stack_size : weft__rt.cfg.stack_size;
    uintptr_t lo = (uintptr_t)t->stack, hi = lo + size;
    /* the guard region below every stack weft maps (chunk slots and single
     * mappings alike); a fault as far below a caller's or a policy's stack is an
     * overflow too */
    uintptr_t glo = lo - weft__rt.pool.guard;
    if (a >= glo && a < lo) {
      char buf[256], *p = buf;
      p = fmt_str(p, "weft: stack overflow in thread ");
      p = fmt_dec(p, t->id);
      p = fmt_str(p, ": stack [");
      p = fmt_hex(p, lo);
      p = fmt_str(p, ", ");
      p = fmt_hex(p, hi);
      p = fmt_str(p, "), guard region [");
      p = fmt_hex(p, glo);
      p = fmt_str(p, ", ");
      p = fmt_hex(p, lo);
      p = fmt_str(p, "), fault address ");
      p = fmt_hex(p, a);
      p = fmt_str(p, "\n");
      ssize_t r = write(2, buf, (size_t)(p - buf));
      (void)r;
      signal(SIGABRT, SIG_DFL);
      abort();
    }
  }
  struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;
  if (old->sa_flags & SA_SIGINFO) {
    if (old->sa_sigaction) { old->sa_sigaction(sig, si, uc); return; }
  } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig);
    return;
  }
  /* default action: reinstall it and let the fault happen again */
  signal(sig, SIG_DFL);
}

static void install_segv(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = segv_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
}

static void restore_segv(void) {
  sigaction(SIGSEGV, &old_segv, NULL);
  sigaction(SIGBUS, &old_bus, NULL);
}

static stack_t old_altstack; /* VP 0's kernel thread is the caller's: restore it */

/* Allocates a VP's signal stack; each kernel thread installs its own (vp_main, or
 * weft_init for VP 0, which saves the caller's previous one first). */
static int altstack_alloc(weft_vp_t *vp) {
  vp->altstack = weft__sys_malloc(WEFT__ALTSTACK_SIZE);
  return vp->altstack ? 0 : WEFT_ENOMEM;
}

/* ---- virtual processors -------------------------------------------------------------- */

static void *vp_main(void *p) {
  weft_vp_t *vp = p;
  weft__tls_vp = vp;
  stack_t ss = {.ss_sp = vp->altstack, .ss_size = WEFT__ALTSTACK_SIZE, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  if (weft__rt.cfg.pin) weft__os_pin(vp->index % weft__os_ncpus());
  weft__ctx_init_self(&vp->idle_ctx, vp->ctx_storage);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__san_init_self(&vp->idle_ctx);
#endif
  idle_loop(vp);
  stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
  sigaltstack(&off, NULL);
  weft__tls_vp = NULL;
  return NULL;
}

static weft_vp_t *vp_new(int index) {
  /* cache-line aligned: VPs write their own fields constantly, and two VPs must
   * never share a line (false sharing cost T1 about 40% at P=2) */
  weft_vp_t *vp = weft__sys_calloc_aligned(sizeof *vp, WEFT__CACHELINE);
  if (!vp) return NULL;
  vp->index = index;
  vp->free_limit = 2 * weft__rt.cfg.freelist_local;
  vp->def_stack = weft__rt.cfg.stack_size;
  atomic_store_explicit(&vp->tm.earliest, UINT64_MAX, memory_order_relaxed); /* no timer */
  return vp;
}

static void vp_destroy(weft_vp_t *vp) {
  if (!vp) return;
  weft__vp_free_caches(vp);
  weft__timers_free(vp);
  if (vp->idle_stack) weft__sys_stack_unmap(vp->idle_stack, vp->idle_stack_size, vp->idle_stack_vg);
  weft__sys_free(vp->altstack);
  weft__sys_free(vp);
}

void weft_config_init(weft_config_t *cfg) {
  if (!cfg) return;
  cfg->nvps = weft__os_ncpus();
  cfg->pin = 0;
  cfg->stack_size = WEFT_DEFAULT_STACK_SIZE;
  cfg->stack_guard = WEFT_DEFAULT_STACK_GUARD;
  cfg->freelist_local = 32;
  cfg->freelist_global = 1024;
  cfg->spin_us = 50;
  cfg->stack_alloc = NULL;
  cfg->stack_free = NULL;
  cfg->stack_arg = NULL;
  cfg->max_threads = 0;  /* derived from the machine at weft_init (weft_max_threads) */
  cfg->deadlock_report = WEFT_DEADLOCK_REPORT;
}

/* The default max_threads (weft/runtime.h, weft_max_threads). */
static long default_max_threads(size_t stack_size) {
  size_t page = weft__os_page_size();
  unsigned long long lim = 1ull << 30;
  long pages = sysconf(_SC_PHYS_PAGES);
  if (pages > 0) {
    unsigned long long m = (unsigned long long)pages * page / (page + sizeof(weft_thread_t));
    if (m < lim) lim = m;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    unsigned long long m = (unsigned long long)rl.rlim_cur / (stack_size + page);
    if (m < lim) lim = m;
  }
  return lim > 0 ? (long)lim : 1;
}

static int config_resolve(const weft_config_t *in, weft_config_t *out) {
  weft_config_init(out);
  if (!in) return 0;
  if (in->nvps < 0 || in->nvps > WEFT_MAX_VPS || in->freelist_local < 0 ||
      in->freelist_global < 0 || in->spin_us < 0 || in->spin_us > 1000000 ||
      in->freelist_local > (1 << 20) || in->freelist_global > (1 << 24))
    return WEFT_EINVAL;
  if (in->stack_size && in->stack_size < WEFT_MIN_STACK_SIZE) return WEFT_EINVAL;
  if (in->stack_size > ((size_t)1 << 36)) return WEFT_EINVAL;
  if (in->stack_guard > WEFT_MAX_STACK_GUARD) return WEFT_EINVAL;
  if (!in->stack_alloc != !in->stack_free) return WEFT_EINVAL; /* a policy needs both */
  if (in->max_threads < 0) return WEFT_EINVAL;
  if (in->deadlock_report != WEFT_DEADLOCK_REPORT && in->deadlock_report != WEFT_DEADLOCK_IGNORE)
    return WEFT_EINVAL;
  if (in->nvps) out->nvps = in->nvps;
  out->pin = in->pin;
  if (in->stack_size) out->stack_size = in->stack_size;
  if (in->stack_guard) out->stack_guard = in->stack_guard;
  if (in->freelist_local) out->freelist_local = in->freelist_local;
  if (in->freelist_global) out->freelist_global = in->freelist_global;
  out->spin_us = in->spin_us ? in->spin_us : out->spin_us;
  out->stack_alloc = in->stack_alloc;
  out->stack_free = in->stack_free;
  out->stack_arg = in->stack_arg;
  out->max_threads = in->max_threads;
  out->deadlock_report = in->deadlock_report;
  size_t page = weft__os_page_size();
  out->stack_size = (out->stack_size + page - 1) & ~(page - 1);
  out->stack_guard = (out->stack_guard + page - 1) & ~(page - 1);
  return 0;
}

weft_bundle_t *weft__bundle_new_root(void);
void weft__bundle_free_root(weft_bundle_t *b);

static weft_thread_t *main_new(void) {
  weft_thread_t *t = weft__sys_calloc_aligned(sizeof *t + WEFT__CTX_SELF_SIZE + 16, WEFT__CACHELINE);
  if (!t) return NULL;
  weft__tflags_init(t, WEFT__TF_MAIN | weft__tf_start());
  t->affinity = -1;
  t->bundle = weft__rt.root;
  t->id = atomic_fetch_add_explicit(&weft__next_id_block, 1, memory_order_relaxed) << 10;
  weft__ctx_init_self(&t->ctx, (void *)(((uintptr_t)(t + 1) + 15) & ~(uintptr_t)15));
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__san_init_self(&t->ctx);
#endif
  return t;
}

/* Undoes a partial init; safe on any prefix of init's steps. */
static void teardown(void) {
  weft__rt_t *rt = &weft__rt;
  if (rt->vps) {
    for (int i = 0; i < rt->nvps; i++) vp_destroy(rt->vps[i]);
    weft__sys_free(rt->vps);
  }
  weft__pool_free_all();
  weft__io_fini();
  weft__sys_free(rt->sleepers);
  if (rt->root) weft__bundle_free_root(rt->root);
  weft__sys_free(rt->main);
  memset(rt, 0, sizeof *rt);
}

static _Atomic int init_lock; /* 0 free, 1 someone in init or shutdown */

int weft_init(const weft_config_t *cfg) {
  weft_config_t c;
  int rc = config_resolve(cfg, &c);
  if (rc) return rc;
  if (weft__vp()) return WEFT_EALREADY;
  if (!c.max_threads) c.max_threads = default_max_threads(c.stack_size);
  {
    const char *e = getenv("WEFT_DEADLOCK");
    if (e && e[0] == '0' && e[1] == '\0') c.deadlock_report = WEFT_DEADLOCK_IGNORE;
  }
  int expect = 0;
  if (!atomic_compare_exchange_strong(&init_lock, &expect, 1)) return WEFT_EALREADY;
  weft__rt_t *rt = &weft__rt;
  if (atomic_load(&rt->state)) {
    atomic_store(&init_lock, 0);
    return WEFT_EALREADY;
  }
  memset(rt, 0, sizeof *rt);
  weft__ctx_tstate_init();  /* before the first context: picks the switch (C++ or not) */
  rt->cfg = c;
  rt->nvps = c.nvps;
  rt->page = weft__os_page_size();
  rc = weft__stacks_init();  /* guard mechanism, chunk geometry, RLIMIT_AS */
  if (rc) goto fail;
  rt->deadlock_report = c.deadlock_report == WEFT_DEADLOCK_REPORT;
  long kthreads_before = count_kthreads();
  rc = WEFT_ENOMEM;
  rt->vps = weft__sys_calloc((size_t)c.nvps, sizeof *rt->vps);
  rt->sleepers = weft__sys_calloc((size_t)c.nvps, sizeof *rt->sleepers);
  if (!rt->vps || !rt->sleepers) goto fail;
  rt->root = weft__bundle_new_root();
  if (!rt->root) goto fail;
  atomic_store_explicit(&rt->focus, rt->root, memory_order_relaxed);
  for (int i = 0; i < c.nvps; i++)
    if (!(rt->vps[i] = vp_new(i))) goto fail;
  for (int i = 0; i < c.nvps; i++)
    if (altstack_alloc(rt->vps[i])) goto fail;
  rt->main = main_new();
  if (!rt->main) goto fail;
  rc = weft__io_init();  /* the I/O engine (WEFT_IO), src/io */
  if (rc) goto fail;
  rc = WEFT_ENOMEM;
  weft_vp_t *vp0 = rt->vps[0];
  /* VP 0's idle loop needs a stack of its own: the caller's is the main thread's */
  vp0->idle_stack_size = 64 * 1024;
  vp0->idle_stack = weft__sys_stack_map(vp0->idle_stack_size, &vp0->idle_stack_vg);
  if (!vp0->idle_stack) goto fail;
  weft__ctx_make(&vp0->idle_ctx, vp0->idle_stack,
                 (char *)vp0->idle_stack + vp0->idle_stack_size, idle_entry, vp0);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  vp0->idle_ctx.stack_lo = vp0->idle_stack;
  vp0->idle_ctx.stack_size = vp0->idle_stack_size;
  vp0->idle_ctx.asan_fake = NULL;
  vp0->idle_ctx.tsan_fiber = NULL;
#endif
  {
    stack_t ss = {.ss_sp = vp0->altstack, .ss_size = WEFT__ALTSTACK_SIZE, .ss_flags = 0};
    sigaltstack(&ss, &old_altstack); /* the caller's own is restored at shutdown */
  }
  install_segv();
  atomic_store_explicit(&rt->state, 1, memory_order_release);
  int started = 1;
  for (int i = 1; i < c.nvps; i++) {
    /* failure injection covers kernel-thread creation too */
    void *probe = weft__sys_malloc(1);
    int err = probe ? pthread_create(&rt->vps[i]->kthread, NULL, vp_main, rt->vps[i]) : -1;
    weft__sys_free(probe);
    if (err != 0) {
      rc = probe ? WEFT_ESYS : WEFT_ENOMEM;
      break;
    }
    started++;
  }
  if (started < c.nvps) {
    atomic_store(&rt->stopping, 1);
    wake_all();
    for (int i = 1; i < started; i++) pthread_join(rt->vps[i]->kthread, NULL);
    atomic_store(&rt->state, 0);
    restore_segv();
    sigaltstack(&old_altstack, NULL);
    goto fail;
  }
  if (c.pin) weft__os_pin(0);
  {
    /* The kernel threads that may exist when nothing outside weft can wake a weft
     * thread: the VPs, and what starting them brought along (a sanitizer runtime's
     * helper thread). Threads that existed before weft_init are not weft's: while
     * any is alive the deadlock and out-of-stacks checks stay off. */
    long after = count_kthreads();
    rt->kthreads_expected = -1;
    if (kthreads_before >= 1 && after >= kthreads_before + c.nvps - 1)
      rt->kthreads_expected = c.nvps + (after - kthreads_before - (c.nvps - 1));
  }
  vp0->current = rt->main;
  weft__tls_vp = vp0;
  gate_set(2);  /* plain OS threads may come in */
  atomic_store(&init_lock, 0);
  weft_trace_from_env();  /* WEFT_TRACE=<file>: trace this run (weft/trace.h) */
  return 0;
fail:
  teardown();
  atomic_store(&init_lock, 0);
  return rc;
}

int weft_is_running(void) { return atomic_load_explicit(&weft__rt.state, memory_order_acquire); }

int weft_vp_count(void) { return weft_is_running() ? weft__rt.nvps : 0; }

int weft_vp_self(void) {
  weft_vp_t *vp = weft__vp();
  return vp ? vp->index : -1;
}

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
  for (int i = 0; i < rt->nvps; i++)
    f += atomic_load_explicit(&rt->vps[i]->n_finished, memory_order_acquire);
  /* seq_cst (RMW-written): also ordered after the loads above */
  c += atomic_load_explicit(&rt->os_created, memory_order_seq_cst);
  for (int i = 0; i < rt->nvps; i++)
    c += atomic_load_explicit(&rt->vps[i]->n_created, memory_order_relaxed);
  return (long)(c - f);
}

static long live_threads(void) { return weft__live_threads(); }

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

long weft_max_threads(void) { return weft_is_running() ? weft__rt.cfg.max_threads : 0; }

/* Continuation for migrating the caller to VP 0: after it is saved, queue it there.
 * Only used when every other thread has finished, so nothing can steal it back
 * once rt.stopping keeps the other VPs out of their queues' work. */
static void to_vp0_cont(void *t) {
  if (weft__tflags(t) & WEFT__TF_FPALL) weft__ctx_fp_save(&((weft_thread_t *)t)->ctx);
  weft__enqueue(weft__rt.vps[0], (weft_thread_t *)t);
}

int weft_shutdown(void) {
  weft__rt_t *rt = &weft__rt;
  weft_vp_t *vp = weft__vp();
  if (!vp && rt->main && weft__wired_self() == rt->main) {
    weft_unwire();  /* a wired main weft thread comes back to a VP first (weft/wire.h) */
    vp = weft__vp();
  }
  if (!vp) return atomic_load(&rt->state) ? WEFT_EPERM : WEFT_ENOTINIT;
  weft_thread_t *self = vp->current;
  if (self != rt->main) return WEFT_EPERM;
  /* 0. plain OS threads create no more threads; wait for those creating one now,
   * so that their threads are counted below */
  gate_set(1);
  /* 1. run until every other thread has finished, or none can run */
  int quiet_rounds = 0;
  while (live_threads() > 0) {
    vp = weft__vp();  /* a yield may have moved us to another VP */
    if (atomic_load_explicit(&vp->q.head, memory_order_relaxed)) {
      weft_yield();
      quiet_rounds = 0;
      continue;
    }
    /* A thread waiting for a stack is retried by a VP's idle loop, which this VP runs
     * only when its queue is empty: this loop never lets that happen (the caller is
     * queued at every yield), and the other VPs may all sleep. Retry it here. */
    weft_thread_t *waiting = nostack_retry(vp);
    if (waiting) {
      weft__push(vp, waiting);
      quiet_rounds = 0;
      continue;
    }
    weft__timers_poll_all();  /* our own VP's timers fire only if someone polls */
    weft__io_poll(vp);        /* and I/O, with one VP */
    uint32_t idle = atomic_load(&rt->idle);
    int idle_vps = (int)(idle & 0xffff) + (int)(idle >> 16);
    if (idle_vps == rt->nvps - 1 && !any_queued_locked_look() &&
        weft__timers_earliest() == UINT64_MAX && weft_wired_count() == 0 &&
        weft__wire_returning() == 0) {
      if (++quiet_rounds >= 3) {
        gate_set(2);
        return WEFT_EBUSY;
      }
    } else {
      quiet_rounds = 0;
    }
    weft__os_sleep_ns(200000);
  }
  /* a wire kernel thread that handed its thread back may still be inside
   * weft__unblock (src/core/wire.c): wait until it is out */
  while (weft__wire_returning() != 0) weft__os_sleep_ns(20000);
  /* the main weft thread ends here: its key destructors run like any thread's */
  if (self->tsd) {
    weft__key_run_dtors(self);
    vp = weft__vp();
    if (live_threads() > 0) {  /* a destructor created threads */
      gate_set(2);
      return WEFT_EBUSY;
    }
  }
  /* every weft thread has finished: close the gate, and wait until no plain OS
   * thread is inside weft (an OS joiner still freeing what it joined, a waker still
   * inside the enqueue that made its thread ready) */
  gate_set(0);
  /* a WEFT_TRACE recording ends here, with every other thread finished */
  if (weft_trace_is_on()) {
    weft_trace_stop();
    weft_trace_write(NULL);
  }
  /* 2. stop the other VPs' stealing, move to VP 0's kernel thread */
  atomic_store_explicit(&rt->stopping, 1, memory_order_release);
  wake_all();
  vp = weft__vp();
  while (vp->index != 0) {
    weft__block(vp, self, to_vp0_cont, self);
    vp = weft__vp();
  }
  for (int i = 1; i < rt->nvps; i++) pthread_join(rt->vps[i]->kthread, NULL);
  /* 3. free everything; we are back on our own OS thread and stack */
  atomic_store(&rt->state, 0);
  weft__tls_vp = NULL;
  restore_segv();
  sigaltstack(&old_altstack, NULL);
  teardown();
  return 0;
}

void weft_debug_stats(weft_debug_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (!weft_is_running()) return;
  for (int i = 0; i < weft__rt.nvps; i++) {
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
