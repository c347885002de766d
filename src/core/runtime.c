/* src/core/runtime.c - init and shutdown, the virtual processors (their kernel
 * threads and what each owns), the configuration, and the plain OS threads' entry
 * gate. The idle loop each VP runs is in idle.c; docs/design.md "Source map" lists
 * where the rest of the core lives.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/internal.h"
#include "diag/diag.h"
#include "core/monitor.h"
#include "io/io.h"
#include "weft/time.h"
#include "weft/trace.h"
#include "weft/wire.h"

weft__rt_t weft__rt;
/* on a line of its own (written as VPs claim blocks of ids): see weft__ctx_errno_off
 * (src/arch/tstate.c) */
_Alignas(64) _Atomic uint64_t weft__next_id_block = 1;
/* used: referenced only from inline asm, which link-time optimisation cannot see */
__thread weft_vp_t *weft__tls_vp __attribute__((tls_model("initial-exec"), used));

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
static _Atomic int gate_reading;   /* OS threads inside a call that wakes nobody */

static _Atomic int *gate_count(int kind) {
  return kind == WEFT__GATE_CREATE ? &gate_creating
         : kind == WEFT__GATE_OTHER ? &gate_inside
                                    : &gate_reading;
}

int weft__os_enter(int kind) {
  _Atomic int *cnt = gate_count(kind);
  atomic_fetch_add_explicit(cnt, 1, memory_order_seq_cst);
  /* a read needs what a join needs: every state but closed */
  int need = kind == WEFT__GATE_CREATE ? 2 : 1;
  if (atomic_load_explicit(&gate_state, memory_order_seq_cst) >= need) return 0;
  atomic_fetch_sub_explicit(cnt, 1, memory_order_release);
  return WEFT_ENOTINIT;
}

void weft__os_leave(int kind) {
  /* release: pairs with the acquire load in gate_set (shutdown's drain) */
  atomic_fetch_sub_explicit(gate_count(kind), 1, memory_order_release);
}

int weft__os_read_enter(void) {
  if (weft__vp()) return 2;
  return weft__os_enter(WEFT__GATE_READ) == 0;
}

void weft__os_read_leave(int entered) {
  if (entered == 1) weft__os_leave(WEFT__GATE_READ);
}

int weft__os_gate_empty(void) {
  /* seq_cst: read after the caller's seq_cst loads of the idle word (deadlock.c) */
  return atomic_load_explicit(&gate_inside, memory_order_seq_cst) == 0 &&
         atomic_load_explicit(&gate_creating, memory_order_seq_cst) == 0;
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
  if (state != 0) return;
  /* the readers too (the same pairs): they never wait inside */
  while (atomic_load_explicit(&gate_reading, memory_order_seq_cst) != 0) weft__os_sleep_ns(10000);
}

/* ---- virtual processors -------------------------------------------------------------- */

static void *vp_main(void *p) {
  weft_vp_t *vp = p;
  /* the name the next weft_init looks for while this thread leaves (deadlock.c) */
  pthread_setname_np(pthread_self(), "weft-vp");
  weft__tls_vp = vp;
  weft__altstack_enter(vp);
  if (weft__rt.cfg.pin) weft__os_pin(vp->index % weft__os_ncpus());
  weft__ctx_init_self(&vp->idle_ctx, vp->ctx_storage);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  weft__san_init_self(&vp->idle_ctx);
#endif
  weft__monitor_vp_start(vp);
  weft__idle_loop(vp);
  weft__altstack_leave();
  weft__tls_vp = NULL;
  return NULL;
}

static weft_vp_t *vp_new(int index) {
  /* cache-line aligned: VPs write their own fields constantly, and two VPs must
   * never share a line (false sharing cost T1 about 40% at P=2) */
  weft_vp_t *vp = weft__sys_calloc_aligned(sizeof *vp, WEFT__CACHELINE);
  if (!vp) return NULL;
  vp->index = index;
  /* 2T stacks and tcb_local control blocks; T of each on the system monitor's spare
   * VPs, which hand what they cached to the pool whenever they wait or close (the
   * caches stay bounded by nvps * (2T stacks + tcb_local blocks) + T of each per
   * running spare + G). With none, every create and finish on a spare took the
   * pool's lock twice: a chain of threads run by a spare ran at about half speed. */
  int T = weft__rt.cfg.freelist_local;
  vp->free_limit = index < weft__rt.nvps ? 2 * T : T;
  vp->tcb_limit = index < weft__rt.nvps ? weft__rt.cfg.tcb_local : T;
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
  cfg->tcb_local = 1024;
  cfg->spin_us = 50;
  cfg->stack_alloc = NULL;
  cfg->stack_free = NULL;
  cfg->stack_arg = NULL;
  cfg->max_threads = 0;  /* derived from the machine at weft_init (weft_max_threads) */
  cfg->deadlock_report = WEFT_DEADLOCK_REPORT;
  cfg->dump_signal = 0;
  cfg->monitor_us = 0;  /* the default bound (monitor.c) */
  cfg->io_idle_stack_ms = 0;  /* the default age (io.c) */
}

/* Bytes of address space the process has mapped now (/proc/self/statm's first field,
 * in pages), or 0 if it cannot be read. */
static unsigned long long mapped_now(size_t page) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return strtoull(buf, NULL, 10) * page;
}

/* The default max_threads (weft/runtime.h, weft_max_threads). With a finite RLIMIT_AS,
 * a live thread's stack costs stack_size plus its guard region (128 KiB by default,
 * not a page: counting a page overstated the room by about 1.5 times with 1 GiB, and a
 * program within the limit got the out-of-stacks report instead of WEFT_EAGAIN), out
 * of three quarters of what the process has not mapped yet and the kernel threads weft
 * starts (the VPs, the monitor and its spare slots) will not take for their own
 * stacks. */
static long default_max_threads(const weft_config_t *c, int nspares) {
  size_t page = weft__os_page_size();
  unsigned long long lim = 1ull << 30;
  long pages = sysconf(_SC_PHYS_PAGES);
  if (pages > 0) {
    unsigned long long m = (unsigned long long)pages * page / (page + sizeof(weft_thread_t));
    if (m < lim) lim = m;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    unsigned long long used = mapped_now(page), kstack = 8ull << 20;
    pthread_attr_t a;
    size_t ks = 0;
    if (pthread_attr_init(&a) == 0) {
      if (pthread_attr_getstacksize(&a, &ks) == 0 && ks) kstack = ks;
      pthread_attr_destroy(&a);
    }
    used += (unsigned long long)(c->nvps + 1 + nspares) * kstack;
    unsigned long long room = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    /* A quarter is left for what the process maps later besides stacks: the C
     * library's malloc arenas (glibc reserves 64 MiB of address space for each one a
     * kernel thread creates, and whether VP threads create one depends on contention:
     * without this reserve a program within the limit under a 1 GiB RLIMIT_AS got the
     * out-of-stacks report in about 1 run of 3 on a loaded machine), control blocks,
     * the I/O engine's rings. */
    room -= room / 4;
    unsigned long long m = room / (c->stack_size + (c->stack_guard ? c->stack_guard : page));
    if (m < lim) lim = m;
  }
  return lim > 0 ? (long)lim : 1;
}

static int config_resolve(const weft_config_t *in, weft_config_t *out) {
  weft_config_init(out);
  if (!in) return 0;
  if (in->nvps < 0 || in->nvps > WEFT_MAX_VPS || in->freelist_local < 0 ||
      in->freelist_global < 0 || in->spin_us < 0 || in->spin_us > 1000000 ||
      in->freelist_local > (1 << 20) || in->freelist_global > (1 << 24) || in->tcb_local < 0 ||
      in->tcb_local > (1 << 24))
    return WEFT_EINVAL;
  if (in->stack_size && in->stack_size < WEFT_MIN_STACK_SIZE) return WEFT_EINVAL;
  if (in->stack_size > ((size_t)1 << 36)) return WEFT_EINVAL;
  if (in->stack_guard > WEFT_MAX_STACK_GUARD) return WEFT_EINVAL;
  if (!in->stack_alloc != !in->stack_free) return WEFT_EINVAL; /* a policy needs both */
  if (in->max_threads < 0) return WEFT_EINVAL;
  if (in->deadlock_report != WEFT_DEADLOCK_REPORT && in->deadlock_report != WEFT_DEADLOCK_IGNORE)
    return WEFT_EINVAL;
  if (in->dump_signal && !weft__dump_signal_ok(in->dump_signal)) return WEFT_EINVAL;
  if (in->monitor_us != WEFT_MONITOR_OFF && (in->monitor_us < 0 || in->monitor_us > 1000000))
    return WEFT_EINVAL;
  if (in->io_idle_stack_ms != WEFT_IO_IDLE_STACK_KEEP &&
      (in->io_idle_stack_ms < 0 || in->io_idle_stack_ms > 3600000))
    return WEFT_EINVAL;
  if (in->nvps) out->nvps = in->nvps;
  out->pin = in->pin;
  if (in->stack_size) out->stack_size = in->stack_size;
  if (in->stack_guard) out->stack_guard = in->stack_guard;
  if (in->freelist_local) out->freelist_local = in->freelist_local;
  if (in->freelist_global) out->freelist_global = in->freelist_global;
  if (in->tcb_local) out->tcb_local = in->tcb_local;
  out->spin_us = in->spin_us ? in->spin_us : out->spin_us;
  out->stack_alloc = in->stack_alloc;
  out->stack_free = in->stack_free;
  out->stack_arg = in->stack_arg;
  out->max_threads = in->max_threads;
  out->deadlock_report = in->deadlock_report;
  out->dump_signal = in->dump_signal;
  out->monitor_us = in->monitor_us;
  out->io_idle_stack_ms = in->io_idle_stack_ms;
  size_t page = weft__os_page_size();
  out->stack_size = (out->stack_size + page - 1) & ~(page - 1);
  out->stack_guard = (out->stack_guard + page - 1) & ~(page - 1);
  return 0;
}

static weft_thread_t *main_new(void) {
  weft_thread_t *t = weft__sys_calloc_aligned(sizeof *t + WEFT__CTX_SELF_SIZE + 16, WEFT__CACHELINE);
  if (!t) return NULL;
  weft__tflags_init(t, WEFT__TF_MAIN | weft__tf_start());
  /* never finishes as a joinable thread does (weft_exit from it is EPERM): a join or
   * detach of it gets WEFT_ESRCH (weft/thread.h) instead of waiting for ever */
  atomic_store_explicit(&t->join, WEFT__JW_DETACHED, memory_order_relaxed);
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
/* Zeroes the runtime record but its state word, which is 0 whenever this runs: plain
 * OS threads read it at any time (weft_is_running, an atomic load), and a plain memset
 * over it raced with them (TSan, a cthread_fork racing a restart). */
static void rt_clear(weft__rt_t *rt) {
  _Static_assert(offsetof(weft__rt_t, state) == 0, "state must come first in weft__rt_t");
  memset((char *)rt + sizeof rt->state, 0, sizeof *rt - sizeof rt->state);
}

static void teardown(void) {
  weft__rt_t *rt = &weft__rt;
  if (rt->vps) {
    for (int i = 0; i < rt->nvps_all; i++) {
      if (rt->vps[i]) weft__sync_stats_fold(rt->vps[i]);
      vp_destroy(rt->vps[i]);
    }
    weft__sys_free(rt->vps);
  }
  weft__monitor_free();
  weft__pool_free_all();
  weft__io_fini();
  weft__sys_free(rt->sleepers);
  weft__bundle_free_all();
  if (rt->root) weft__bundle_free_root(rt->root);
  weft__sys_free(rt->main);
  weft__dump_fini();
  rt_clear(rt);
}

static _Atomic int init_lock; /* 0 free, 1 someone in init or shutdown */

/* weft_shutdown's continuation on a spare VP: the main thread, saved, goes to the
 * back of the queue of the VP the spare stands in for (a plain enqueue: it wakes that
 * VP if it sleeps). */
static void back_to_vp_cont(void *p) {
  weft_thread_t *self = p;
  weft__enqueue(weft__rt.vps[weft__vp_public_index(weft__vp())], self);
}

/* 1 if the environment variable `name` turns its feature off ("0" or "off"); unset,
 * empty, "1" or "on" leave it on; any other value leaves it on and is reported on
 * stderr (as WEFT_MONITOR's and WEFT_TRACE_CAPACITY's are), so that a spelling weft
 * does not know is not taken for "off" unseen. */
static int env_off(const char *name) {
  const char *e = getenv(name);
  if (!e || !*e || !strcmp(e, "1") || !strcmp(e, "on")) return 0;
  if (!strcmp(e, "0") || !strcmp(e, "off")) return 1;
  fprintf(stderr, "weft: %s=%s is not 0/off or 1/on: ignored (on)\n", name, e);
  return 0;
}

int weft_init(const weft_config_t *cfg) {
  weft_config_t c;
  int rc = config_resolve(cfg, &c);
  if (rc) return rc;
  if (weft__vp()) return WEFT_EALREADY;
  if (!c.max_threads) c.max_threads = default_max_threads(&c, weft__monitor_spares(&c));
  if (env_off("WEFT_DEADLOCK")) c.deadlock_report = WEFT_DEADLOCK_IGNORE;
  int expect = 0;
  if (!atomic_compare_exchange_strong(&init_lock, &expect, 1)) return WEFT_EALREADY;
  weft__rt_t *rt = &weft__rt;
  if (atomic_load(&rt->state)) {
    atomic_store(&init_lock, 0);
    return WEFT_EALREADY;
  }
  rt_clear(rt);  /* state is 0: it stays untouched */
  weft__ctx_tstate_init();  /* before the first context: picks the switch (C++ or not) */
  rt->cfg = c;
  rt->nvps = c.nvps;
  rt->nvps_all = c.nvps + weft__monitor_spares(&c);
  rt->page = weft__os_page_size();
  rt->asym = !env_off("WEFT_MEMBARRIER") && weft__os_membarrier_register() == 0;
  rc = weft__stacks_init();  /* guard mechanism, chunk geometry, RLIMIT_AS */
  if (rc) goto fail;
  rc = weft__dump_init(c.dump_signal);  /* weft_dump's unwinder; the dump signal */
  if (rc) goto fail;
  rt->deadlock_report = c.deadlock_report == WEFT_DEADLOCK_REPORT;
  /* An earlier run's VPs and monitor threads, joined by its weft_shutdown, may still
   * be listed for a moment while they finish their exit (long, on a loaded machine):
   * counted here and gone by the second count, they made it look short, and the
   * deadlock report was off for the whole run. Wait for them, a second at most. */
  long kthreads_before;
  for (int i = 0;; i++) {
    int lingering;
    kthreads_before = weft__count_kthreads_init(&lingering);
    if (lingering == 0 || kthreads_before < 0 || i == 1000) break;
    weft__os_sleep_ns(1000000);
  }
  rc = WEFT_ENOMEM;
  rt->vps = weft__sys_calloc((size_t)rt->nvps_all, sizeof *rt->vps);
  rt->sleepers = weft__sys_calloc((size_t)c.nvps, sizeof *rt->sleepers);
  if (!rt->vps || !rt->sleepers) goto fail;
  rt->root = weft__bundle_new_root();
  if (!rt->root) goto fail;
  atomic_store_explicit(&rt->focus, rt->root, memory_order_relaxed);
  for (int i = 0; i < rt->nvps_all; i++)  /* the monitor's spares too */
    if (!(rt->vps[i] = vp_new(i))) goto fail;
  rc = weft__monitor_init(rt->nvps_all - c.nvps);
  if (rc) goto fail;
  rc = WEFT_ENOMEM;
  for (int i = 0; i < c.nvps; i++)
    if (weft__altstack_alloc(rt->vps[i])) goto fail;
  rt->main = main_new();
  if (!rt->main) goto fail;
  rt->main_os = (uintptr_t)pthread_self();
  weft__pool_runtime_mask();  /* the weft_blocking pool: this run's signal mask */
  rc = weft__io_init();  /* the I/O engine (WEFT_IO), src/io */
  if (rc) goto fail;
  rc = WEFT_ENOMEM;
  weft_vp_t *vp0 = rt->vps[0];
  /* VP 0's idle loop needs a stack of its own: the caller's is the main thread's */
  vp0->idle_stack_size = 64 * 1024;
  vp0->idle_stack = weft__sys_stack_map(vp0->idle_stack_size, &vp0->idle_stack_vg);
  if (!vp0->idle_stack) goto fail;
  weft__ctx_make(&vp0->idle_ctx, vp0->idle_stack,
                 (char *)vp0->idle_stack + vp0->idle_stack_size, weft__idle_entry, vp0);
#if defined(WEFT_ASAN) || defined(WEFT_TSAN)
  vp0->idle_ctx.stack_lo = vp0->idle_stack;
  vp0->idle_ctx.stack_size = vp0->idle_stack_size;
  vp0->idle_ctx.asan_fake = NULL;
  vp0->idle_ctx.tsan_fiber = NULL;
#endif
  weft__overflow_install(vp0);  /* the caller's signal stack is restored at shutdown */
  /* from here plain OS threads' reads and wake-ups may come in (what they touch
   * exists); creations wait for the end (gate_set(2) below). The gate opens before
   * weft_is_running() says 1, so that no call from a plain OS thread gets
   * WEFT_ENOTINIT once it does (with the state stored first, such a read in between
   * was refused). */
  gate_set(1);
  atomic_store_explicit(&rt->state, 1, memory_order_release);
  /* A weft_hook_push before the store passed the gate but saw weft not running, and
   * marked no control block: the main thread's callbacks never ran for the whole run.
   * weft__hook_mark_main gives the main thread what such a push could not (hook.c). */
  weft__hook_mark_main(rt->main);
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
  int failed = started < c.nvps;
  if (!failed) {
    weft__monitor_vp_start(vp0);  /* the caller's kernel thread runs VP 0 */
    /* the monitor's kernel thread is started before the count below: it is weft's */
    int mrc = weft__monitor_start();
    if (mrc) {
      rc = mrc;
      failed = 1;
    }
  }
  if (failed) {
    atomic_store(&rt->stopping, 1);
    weft__wake_all();
    for (int i = 1; i < started; i++) pthread_join(rt->vps[i]->kthread, NULL);
    atomic_store(&rt->state, 0);
    weft__overflow_remove();
    goto fail;
  }
  if (c.pin) weft__os_pin(0);
  {
    /* The kernel threads that may exist when nothing outside weft can wake a weft
     * thread: the VPs, and what starting them brought along (a sanitizer runtime's
     * helper thread). Threads that existed before weft_init are not weft's: while
     * any is alive the deadlock and out-of-stacks checks stay off. The weft_blocking
     * pool's threads are left out of both counts: an earlier run's may leave between
     * them, and the checks count the idle ones apart (weft__pool_idle_spare). */
    long after = weft__count_kthreads_own();
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
  gate_set(0);  /* closed again (it is, unless the gate was opened above): drained */
  teardown();
  atomic_store(&init_lock, 0);
  return rc;
}

int weft_is_running(void) { return atomic_load_explicit(&weft__rt.state, memory_order_acquire); }

int weft_vp_count(void) { return weft_is_running() ? weft__rt.nvps : 0; }

int weft_vp_self(void) {
  weft_vp_t *vp = weft__vp();
  return vp ? weft__vp_public_index(vp) : -1;
}

long weft_max_threads(void) { return weft_is_running() ? weft__rt.cfg.max_threads : 0; }

/* Continuation for migrating the caller to VP 0: after it is saved, queue it there.
 * Only used when every other thread has finished, so nothing can steal it back
 * once rt.stopping keeps the other VPs out of their queues' work. */
static void to_vp0_cont(void *t) {
  if (weft__tflags(t) & WEFT__TF_FPALL) weft__ctx_fp_save(&((weft_thread_t *)t)->ctx);
  weft__enqueue(weft__rt.vps[0], (weft_thread_t *)t);
}

/* 1 while weft_shutdown runs (the main weft thread's only: no other thread reads it) */
static int shutdown_running;

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
  /* called from what the call below runs on the main thread (its key destructors, a
   * do-when-idle function): the inner call freed everything under the outer one */
  if (shutdown_running) return WEFT_EPERM;
  shutdown_running = 1;
  /* 0. plain OS threads create no more threads; wait for those creating one now,
   * so that their threads are counted below */
  gate_set(1);
  /* 1. run until every other thread has finished, or none can run; again after the
   * main thread's key destructors if they created threads */
  int quiet_rounds = 0;
  atomic_store_explicit(&rt->shutdown_wait, 1, memory_order_relaxed);  /* idle.c */
again:
  while (weft__live_threads() > 0) {
    vp = weft__vp();  /* a yield may have moved us to another VP */
    if (weft__vp_ready_hint(vp)) {  /* the queue, or the hand-off slot */
      weft_yield();
      quiet_rounds = 0;
      continue;
    }
    /* A thread waiting for a stack is retried by a VP's idle loop, which this VP runs
     * only when its queue is empty: this loop never lets that happen (the caller is
     * queued at every yield), and the other VPs may all sleep. Retry it here. */
    weft_thread_t *waiting = weft__nostack_retry(vp);
    if (waiting) {
      weft__push(vp, waiting);
      quiet_rounds = 0;
      continue;
    }
    /* threads a bundle's scheduler keeps to itself are asked for only by an idle
     * VP, and with one VP this one never is: ask as it would */
    weft_thread_t *held = weft__idle_bundles(vp);
    if (held) {
      weft__push(vp, held);
      quiet_rounds = 0;
      continue;
    }
    /* On a spare (the monitor ran our queue there while our VP's kernel thread was
     * stuck in a call): a spare retires only once its running thread comes back to
     * it, and while one is busy no EBUSY is given, so waiting here on the spare's
     * kernel thread waited for ever once every other thread was blocked. Go back to
     * the VP the spare stands in for (queued there, which wakes it), and go on there. */
    if (vp->index >= rt->nvps) {
      weft__block(vp, self, back_to_vp_cont, self);
      quiet_rounds = 0;
      continue;
    }
    weft__timers_poll_all();  /* our own VP's timers fire only if someone polls */
    weft__io_poll(vp);        /* and I/O, with one VP */
    weft__idle_funcs_run();   /* and the do-when-idle functions (weft/vp.h), with one VP */
    /* every other VP asleep, not only idle: a VP still polling may hold a thread it
     * has just taken from a queue (the queue is empty, and it counts as idle until it
     * leaves the idle loop), and a loaded machine can keep it off its CPU for longer
     * than the rounds below last. A sleeping VP holds none. seq_cst: pairs with the
     * VPs' seq_cst updates of rt.idle (idle.c). */
    uint32_t idle = atomic_load(&rt->idle);
    if ((idle & 0xffff) == 0 && (int)(idle >> 16) == rt->nvps - 1 && !weft__any_queued_locked() &&
        weft__timers_quiet() && weft_wired_count() == 0 &&
        weft__wire_returning() == 0 && !weft__monitor_busy() && weft__pool_jobs() == 0) {
      if (++quiet_rounds >= 3) {
        atomic_store_explicit(&rt->shutdown_wait, 0, memory_order_relaxed);
        gate_set(2);
        shutdown_running = 0;
        return WEFT_EBUSY;
      }
    } else {
      quiet_rounds = 0;
    }
    /* Wait a moment as a weft thread, not in the kernel: this VP then runs its idle
     * loop meanwhile (a thread a timer or the poller makes ready runs at once), and
     * the system monitor does not take a sleep it was not told of for a stalled VP
     * with a thread queued behind it. It did, started a spare for the thread, and
     * the EBUSY answer waited for the spare to retire (up to seconds, under load).
     * Without a timer slot (WEFT_ENOMEM) the sleep is the kernel's. */
    if (weft_sleep_ns(200000) != 0) weft__os_sleep_ns(200000);
  }
  atomic_store_explicit(&rt->shutdown_wait, 0, memory_order_relaxed);
  /* a wire kernel thread that handed its thread back may still be inside
   * weft__unblock (src/core/wire.c): wait until it is out */
  while (weft__wire_returning() != 0) weft__os_sleep_ns(20000);
  /* the main weft thread ends here: its key destructors run like any thread's */
  if (self->tsd) {
    weft__key_run_dtors(self);
    vp = weft__vp();
    if (weft__live_threads() > 0) {  /* a destructor created threads: wait for them */
      quiet_rounds = 0;
      atomic_store_explicit(&rt->shutdown_wait, 1, memory_order_relaxed);
      goto again;
    }
  }
  /* every weft thread has finished: close the gate, and wait until no plain OS
   * thread is inside weft (an OS joiner still freeing what it joined, a waker still
   * inside the enqueue that made its thread ready) */
  gate_set(0);
  /* a recording still on ends here (a WEFT_TRACE one is written to its file), with
   * every other thread finished (weft/trace.h, weft_trace_stop) */
  if (weft_trace_is_on()) {
    weft_trace_stop();
    weft_trace_write(NULL);
  }
  /* 2. stop the other VPs' stealing, move to VP 0's kernel thread */
  atomic_store_explicit(&rt->stopping, 1, memory_order_release);
  weft__wake_all();
  vp = weft__vp();
  while (vp->index != 0) {
    weft__block(vp, self, to_vp0_cont, self);
    vp = weft__vp();
  }
  /* the system monitor and its spares (nothing is left for a spare to run) */
  weft__monitor_stop();
  for (int i = 1; i < rt->nvps; i++) pthread_join(rt->vps[i]->kthread, NULL);
  /* 3. free everything; we are back on our own OS thread and stack */
  atomic_store(&rt->state, 0);
  weft__tls_vp = NULL;
  weft__overflow_remove();
  teardown();
  shutdown_running = 0;
  return 0;
}
