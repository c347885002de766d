/* src/core/idle.c - the idle loop of a VP, parking and waking VPs, and the threads
 * waiting for a stack.
 *
 * Idle loop of one VP (one diagram, docs/design.md has the long form):
 *
 *     +--> local dispatch queue --found--> run it (switch idle_ctx -> thread) --+
 *     |        | empty                                                         |
 *     |    processor_idle: focus, root (steal), others --found--> run it ------+
 *     |        (stopped bundles are skipped; no steal while the VP backs off
 *     |        after steals that did not pay: "steal back-off" below)
 *     |        | nothing
 *     |    retry the oldest thread waiting for a stack --bound--> run it ------+
 *     |        | none, or still no stack
 *     |    spin (lock-free polls of every queue head) for cfg.spin_us, and on
 *     |        while backing off with a thread queued on another VP (napping
 *     |        between polls until the back-off ends)
 *     |        | nothing
 *     +--- sleep on vp->park (futex) until an enqueuer wakes us (the last VP to
 *          sleep first checks that some thread can still run: check_stuck, with
 *          the reports of deadlock.c)
 */
#include <sched.h>
#include <stdlib.h>

#include "core/internal.h"
#include "core/monitor.h"
#include "io/io.h"
#include "weft/hook.h"

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

void weft__wake_all(void) {
  while (wake_sleeper(1)) {
  }
}

/* Returns 1 if some dispatch queue holds a thread; takes each lock (see above). */
/* Over every slot, the monitor's spares too (their queues hold threads a regular VP
 * may steal: raise_idle), so that a VP's last look before it sleeps, the deadlock
 * check and weft_shutdown see a thread queued on a spare. */
int weft__any_queued_locked(void) {
  for (int i = 0; i < weft__rt.nvps_all; i++) {
    weft_vp_t *v = weft__rt.vps[i];
    weft__spin_lock(&v->q.lock);
    /* the queue or its hand-off slot (filled under this lock) */
    int busy = weft__vp_ready_hint(v);
    weft__spin_unlock(&v->q.lock);
    if (busy) return 1;
  }
  return 0;
}

static int any_queued_hint(void) {
  for (int i = 0; i < weft__rt.nvps_all; i++)
    if (weft__vp_ready_hint(weft__rt.vps[i])) return 1;
  return 0;
}

/* processor_idle on every non-root bundle that is not stopped, until one gives a
 * thread (bundle.c). */
static weft_thread_t *custom_idle(weft_vp_t *vp) { return weft__bundle_idle_sweep(vp); }

/* The monitor's spares (src/core/monitor.c): a thread queued on a spare, made ready
 * by the threads the spare runs, is taken by an idle VP as from any VP's queue. A
 * spare runs one thread at a time, and a thread it runs that never comes back to it
 * (one that waits, spinning, for a thread it created) would otherwise strand every
 * thread queued behind it while the regular VPs sleep. Nothing is queued on a free
 * slot, so only its queue's front is read. */
static weft_thread_t *steal_from_spares(weft_vp_t *vp) {
  for (int i = weft__rt.nvps; i < weft__rt.nvps_all; i++) {
    weft_vp_t *s = weft__rt.vps[i];
    if (s == vp || !weft__vp_ready_hint(s)) continue;
    weft_thread_t *t = weft_sched_steal_half(s, vp);
    if (t) return t;
  }
  return NULL;
}

/* processor_idle: the focus bundle first (when it is not the root; its handler may
 * pass the event up or down the tree), then the root bundle (the default scheduler:
 * steal), then every other bundle (docs/schedulers.md, "idle events"). */
static weft_thread_t *raise_idle(weft_vp_t *vp, int steal) {
  weft_thread_t *t = weft__bundle_idle_focus(vp);
  if (t) return t;
  weft_bundle_t *root = weft__rt.root;
  t = steal && root->ops.processor_idle ? root->ops.processor_idle(root, vp) : NULL;
  if (!t && steal) t = steal_from_spares(vp);
  return t ? t : custom_idle(vp);
}

weft_thread_t *weft__idle_bundles(weft_vp_t *vp) { return raise_idle(vp, 0); }

/* ---- steal back-off ---------------------------------------------------------------
 * A steal moves threads to another processor: their control blocks and the queue's
 * lock come over, and a joiner later reads the join word back (each a cache-line
 * transfer, bench/model/M1_linexfer.c measures one).
 * For threads that do almost nothing (a fork-join of null threads, T5) that costs
 * more than running them where they are, and the owner, still creating, pays for it
 * too: an idle VP that steals them slows the program down. So the idle loop times
 * the busy period that follows each of its steals (until its own queue is empty
 * again): if it kept the VP busy for less than WEFT__STEAL_PAYS_NS per thread taken,
 * the VP steals no more for a back-off that starts at WEFT__STEAL_WAIT_MIN_NS and
 * doubles with every steal that does not pay, up to WEFT__STEAL_WAIT_MAX_NS; a steal
 * that pays ends it. While it backs off the VP still takes its own queue's threads,
 * bundles' threads and timers, within a nap (WEFT__STEAL_NAP_MAX_NS) when it has
 * nothing to run; it only leaves other VPs' queues alone, and it keeps looking (it
 * does not go to sleep while another queue holds a thread), so a queued thread waits
 * at most WEFT__STEAL_WAIT_MAX_NS for it (docs/memory-ordering.md §3). Only the idle loop's own steals (the root scheduler's processor_idle) back
 * off: a scheduler that steals elsewhere is not limited. The constants are in
 * core/idle.h. */

int weft__steal_allowed(const weft__steal_bo_t *bo, uint64_t now) {
  return bo->wait == 0 || now >= bo->ok;
}

void weft__steal_judge(weft__steal_bo_t *bo, uint64_t taken, uint64_t busy_ns, uint64_t now) {
  if (busy_ns >= taken * WEFT__STEAL_PAYS_NS) {
    bo->wait = 0;
    return;
  }
  uint32_t w = bo->wait ? bo->wait * 2 : WEFT__STEAL_WAIT_MIN_NS;
  bo->wait = w < WEFT__STEAL_WAIT_MAX_NS ? w : WEFT__STEAL_WAIT_MAX_NS;
  bo->ok = now + bo->wait;
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
weft_thread_t *weft__nostack_retry(weft_vp_t *vp) {
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
  /* the clock is read only while the VP backs off from steals */
  if (!t)
    t = raise_idle(vp, !vp->steal_bo.wait || weft__steal_allowed(&vp->steal_bo, weft__os_now_ns()));
  return t ? t : weft__nostack_retry(vp);
}

/* Called by a VP that is about to sleep: reports and aborts if no weft thread can
 * ever run again, or hands back a thread that waited for a stack and now has one
 * (queued on vp: the enqueue wakes a VP). */
static int check_stuck(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  uint32_t idle = atomic_load_explicit(&rt->idle, memory_order_relaxed);
  if ((idle & 0xffff) != 0 || (int)(idle >> 16) != rt->nvps) return 0;  /* not the last */
  int nostack = atomic_load_explicit(&rt->nnostack, memory_order_relaxed) != 0;
  if (!nostack && !rt->deadlock_report) return 0;
  int stuck = weft__nothing_can_wake(vp);
  /* -1: quiet, but the kernel threads could not be counted (every descriptor number
   * taken): look again after a while rather than sleep for good (the reports were
   * lost, and a deadlock hung, under a low RLIMIT_NOFILE) */
  if (stuck <= 0) return stuck < 0;
  if (nostack) {
    weft_thread_t *t = weft__nostack_retry(vp);
    if (t) {
      weft__enqueue(vp, t);
      return 0;
    }
    weft__spin_lock(&rt->nostack_lock);
    t = rt->nostack_head;
    weft__spin_unlock(&rt->nostack_lock);
    if (t) weft__out_of_stacks(t);
    return 0;
  }
  weft__deadlock_report();
}

/* Takes vp off the sleeper stack and counts it as spinning again, unless a waker
 * already did (then vp->park is 0 already): a VP that decided not to sleep after
 * all, or whose sleep ended at a timer's deadline. */
static void sleep_cancel(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
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
  /* The kernel's own notifies after the events it raises on a bundle other than the
   * root make only the light fence (weft__notify_light): while such a bundle exists
   * the sleeper makes the heavy one. relaxed: weft_bundle_create makes a seq_cst fence
   * after it counts the bundle, so either this load sees it or that fence comes after
   * ours and the creator's later notifies see us asleep (docs/memory-ordering.md §6b) */
  if (weft__rt.asym && atomic_load_explicit(&rt->nbundles, memory_order_relaxed))
    weft__os_membarrier();
  weft_thread_t *t = NULL;
  int work = weft__any_queued_locked() || atomic_load(&rt->stopping) ||
             (t = custom_idle(vp)) != NULL;
  if (work) {
    sleep_cancel(vp);
    return t;
  }
  /* Asleep to the system monitor from here on, not only once in the futex wait: the
   * last VP's check_stuck counts the kernel threads, through the monitor's stat reader
   * (a wait in the kernel, 0.4 ms seen under load), and a thread made ready on this VP
   * meanwhile (its waker cleared park) found a VP that looked stalled: awake, its
   * queue's front unchanged, its kernel thread asleep. The monitor gave that thread
   * to a spare VP, which has no io_uring ring (io_test OpenatAndFsyncDeadlineForms,
   * a weft_blocking caller woken by its pool thread). A waiter here only waits for the
   * check to end, as it would without the monitor. */
  atomic_store_explicit(&vp->asleep, 1, memory_order_relaxed);  /* the monitor's hint */
  weft__stat_inc(&vp->n_sleeps);
  weft__create_grant_release(vp);  /* what it may still create is the others' now */
  int recheck = check_stuck(vp);  /* the last VP to sleep: can anything still run? */
  /* Sleep no longer than the earliest timer of any VP (read after the last look:
   * a timer armed later belongs to a VP that is awake, and bounds its own sleep). */
  uint64_t until = weft__timers_earliest();
  if (recheck) {  /* the check could not decide: again in 100 ms */
    uint64_t later = weft__os_now_ns() + 100000000u;
    if (later < until) until = later;
  }
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
      sleep_cancel(vp);  /* threads made ready by I/O, or a timer is due: stop sleeping */
      break;
    }
  }
  atomic_store_explicit(&vp->asleep, 0, memory_order_relaxed);
  return NULL;
}

/* Polls without locks until cfg.spin_us have passed since it last saw a thread
 * queued anywhere, then sleeps. Returns a thread found in a custom scheduler, or
 * NULL: then the caller looks again (something was seen in a dispatch queue, or the
 * VP slept and was woken). The window restarts at each sighting: a VP that backs off
 * from steals (above) while another VP creates and joins batches of threads (T5)
 * would otherwise go to sleep in each short gap between two batches, and the creator
 * would pay a futex wake (a system call) at the first creation of every batch. */
static weft_thread_t *idle_wait(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  uint64_t now = weft__os_now_ns();
  uint64_t until = now + (uint64_t)rt->cfg.spin_us * 1000u;
  int others;
  do {
    idle_event(WEFT_HOOK_IDLE_SPIN, NULL);
    weft__idle_funcs_run();  /* do-when-idle functions (weft/vp.h) */
    if (!weft__steal_allowed(&vp->steal_bo, now)) {
      /* Backing off: nap until the back-off ends, WEFT__STEAL_NAP_MAX_NS at most at a
       * time, instead of polling. A polling VP kept its CPU busy for nothing all
       * through a fork-join of null threads (T5 at 2 VPs: 2.0 CPUs busy against 1.3
       * with the nap, in the same time). The VP still counts as spinning, so
       * enqueuers wake nobody for it; its own queue, timers and I/O wait for the end
       * of the nap, as other queues wait for the end of the back-off. Asleep to the
       * system monitor meanwhile: a kernel thread that hardly ran and sleeps in the
       * kernel looked like one in an unannounced call, and the monitor looked every
       * half bound for as long as the back-off lasted (T5 at 2 VPs: 41 ns per thread,
       * spread 33 to 49, against 32.5 with the monitor off). */
      uint64_t nap = vp->steal_bo.ok - now;
      atomic_store_explicit(&vp->asleep, 1, memory_order_relaxed);  /* the monitor's hint */
      weft__os_sleep_ns(nap < WEFT__STEAL_NAP_MAX_NS ? nap : WEFT__STEAL_NAP_MAX_NS);
      atomic_store_explicit(&vp->asleep, 0, memory_order_relaxed);
    } else {
      for (int i = 0; i < 64; i++) weft__os_relax();
      /* let a ready kernel thread on this CPU run first: plain OS threads woken by a
       * sync object would otherwise wait for a CPU until every VP stops polling */
      sched_yield();
    }
    /* backing off from steals (above), only the VP's own queue counts as work until
     * the back-off ends; it does not sleep while another queue holds a thread */
    now = weft__os_now_ns();
    others = any_queued_hint();
    int work = weft__steal_allowed(&vp->steal_bo, now)
                   ? others
                   : atomic_load_explicit(&vp->q.head, memory_order_relaxed) != NULL;
    if (work || atomic_load_explicit(&rt->stopping, memory_order_relaxed) ||
        weft__timers_poll_all() || weft__io_poll(vp))
      return NULL;
    weft_thread_t *t = custom_idle(vp);
    if (t) return t;
    /* others: backing off with work queued; poll on, and for spin_us after it */
    if (others) until = now + (uint64_t)rt->cfg.spin_us * 1000u;
  } while (now < until);
  return vp_sleep(vp);
}

void weft_sched_notify(void) {
  /* a plain OS thread passes the gate: the wake-up takes a VP off the sleeper stack,
   * which weft_shutdown() frees (runtime.h, weft__os_read_enter) */
  int g = weft__os_read_enter();
  if (!g) return;
  /* seq_cst fence: pairs with the sleeper's seq_cst update of rt.idle; the
   * scheduler's store of the thread comes before it (see vp_sleep) */
  atomic_thread_fence(memory_order_seq_cst);
  uint32_t idle = atomic_load_explicit(&weft__rt.idle, memory_order_relaxed);
  if (idle != 0 && (idle & 0xffff) == 0) weft__wake_one();
  weft__os_read_leave(g);
}

void weft__notify_light(void) {
  /* the light fence: pairs with the heavy one a sleeper makes while a bundle other
   * than the root exists (vp_sleep), as weft_sched_notify's fence pairs with its
   * seq_cst fence */
  weft__fence_light();
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
void weft__idle_loop(weft_vp_t *vp) {
  weft__rt_t *rt = &weft__rt;
  idle_add((int32_t)WEFT__IDLE_SPIN);
  int idle = 0;  /* between IDLE_BEGIN and IDLE_END */
  for (;;) {
    /* at shutdown only the main thread is left, and it is on its way to VP 0 */
    if (vp->index != 0 && atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
      idle_add(-(int32_t)WEFT__IDLE_SPIN);
      return;
    }
    uint64_t steals = atomic_load_explicit(&vp->n_steals, memory_order_relaxed);
    uint64_t taken = atomic_load_explicit(&vp->n_stolen, memory_order_relaxed);
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
    weft__monitor_kick();  /* the system monitor sleeps while every VP does */
    /* Not for weft_shutdown's main thread, back from one of its waiting sleeps: it
     * looks at the queues, the bundles, the timers and the poller itself, and each of
     * its sleeps brings this VP back here, where queued work is found; woken for it
     * (with a bundle in existence, every time), the other VP was still spinning when
     * the main thread checked for every other VP asleep, and the EBUSY answer never
     * came. relaxed: set and cleared by the main thread, which t is. */
    if ((old & 0xffff) == 1 && (old >> 16) != 0 &&
        (any_queued_hint() || atomic_load_explicit(&rt->nbundles, memory_order_relaxed) ||
         weft__io_need_poller()) &&
        !(t == rt->main && atomic_load_explicit(&rt->shutdown_wait, memory_order_relaxed)))
      weft__wake_one();
    /* a steal (counted by steal_note, dispatch.c, on this VP) starts a busy period
     * that steal_judge rates; relaxed: owner-only counters */
    uint64_t stole = atomic_load_explicit(&vp->n_steals, memory_order_relaxed) != steals
                         ? atomic_load_explicit(&vp->n_stolen, memory_order_relaxed) - taken
                         : 0;
    uint64_t busy_from = stole ? weft__os_now_ns() : 0;
    do {
      run_from_idle(vp, t);
      /* this VP's due timers (relaxed hint, re-checked under the heap lock): the
       * loop may go round for a long time without passing find_work */
      if (atomic_load_explicit(&vp->tm.n, memory_order_relaxed)) weft__timers_check(vp);
      t = weft__dequeue(vp);
    } while (t);
    if (stole) {
      uint64_t now = weft__os_now_ns();
      weft__steal_judge(&vp->steal_bo, stole, now - busy_from, now);
    }
    idle_add((int32_t)WEFT__IDLE_SPIN);
  }
}

void weft__idle_entry(void *p) {
  weft__idle_loop((weft_vp_t *)p);
  abort();
}
