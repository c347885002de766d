/* src/sched/default.c - the default scheduler, written against the public scheduler
 * interface (weft/sched.h) like every scheduler, except for one thing: where it puts a
 * thread is decided by the kernel's placement function (weft__place, core/dispatch.h),
 * which the root bundle's inlined copy of these handlers calls too, so that the two
 * copies of the policy cannot drift apart.
 *
 * Policy (FastThreads §3, "per-processor ready queues", with the owner-LIFO,
 * thief-FIFO discipline of work stealing as in Cilk and MassiveThreads): a new
 * thread goes to the front of the dispatch queue of its affinity VP, or of the VP
 * that created it (round robin when a plain OS thread creates it), so a VP runs the
 * threads it created most recently first and a recursive computation unfolds depth
 * first; an unblocked thread goes to the back of the queue of the VP that woke it
 * (FIFO among woken and yielding threads: none of them can starve another), or,
 * woken by a plain OS thread, of its affinity VP (round robin without one); an idle
 * VP looks at its own queue (the kernel does that) and then steals the back half of
 * another VP's queue (at most 64: the oldest threads it created, the biggest pieces
 * of work), starting from a random victim: one steal then feeds the thief for a
 * while, instead of one remote lock per thread.
 *
 * The runtime inlines exactly these handlers for the root bundle (one pointer
 * comparison); a bundle given a copy of this table runs them through the table.
 *
 * weft__sched_workfirst_ops (weft/schedlib.h WEFT_SCHED_WORK_FIRST) is the same
 * policy with work-first creation: thread_created runs the new thread at once
 * (weft_sched_run_first) and the creator waits at the front of the queue.
 */
#include "weft/sched.h"

#include "core/dispatch.h"
#include "sched/schedlib.h"

#include "weft/runtime.h"

static void on_created(weft_bundle_t *b, weft_thread_t *t) {
  (void)b;
  weft_sched_push(weft__place(WEFT__PLACE_CREATED, weft_sched_vp_self(), t), t);
}

static void on_unblocked(weft_bundle_t *b, weft_thread_t *t) {
  (void)b;
  weft_sched_enqueue(weft__place(WEFT__PLACE_READY, weft_sched_vp_self(), t), t);
}

/* xorshift, per calling thread; only picks a starting victim */
static unsigned next_rand(void) {
  static WEFT__TLS unsigned s = 0x2545f491u;
  s ^= s << 13;
  s ^= s >> 17;
  s ^= s << 5;
  return s;
}

static weft_thread_t *on_idle(weft_bundle_t *b, weft_vp_t *vp) {
  (void)b;
  int n = weft_vp_count();
  if (n <= 1) return NULL;
  int self = weft_sched_vp_index(vp);
  int start = (int)(next_rand() % (unsigned)n);
  for (int k = 0; k < n; k++) {
    int i = (start + k) % n;
    if (i == self) continue;
    weft_thread_t *t = weft_sched_steal_half(weft_sched_vp(i), vp);
    if (t) return t;
  }
  return NULL;
}

const weft_sched_ops_t weft_sched_default = {
    .thread_created = on_created,
    .thread_started = NULL,
    .thread_terminated = NULL,
    .thread_blocked = NULL,
    .thread_unblocked = on_unblocked,
    .bundle_created = NULL,
    .bundle_terminated = NULL,
    .processor_idle = on_idle,
    .flags = WEFT_SCHED_DISPATCH_ONLY, /* every handler above enqueues at once */
};

/* Work-first: run t now on the creating VP unless it is placed elsewhere (affinity)
 * or cannot run here now (created by a plain OS thread, no stack to be had). */
static void wf_created(weft_bundle_t *b, weft_thread_t *t) {
  (void)b;
  weft_vp_t *self = weft_sched_vp_self();
  weft_vp_t *to = weft__place(WEFT__PLACE_CREATED, self, t);
  if (to == self && weft_sched_run_first(t) == 0) return;
  weft_sched_push(to, t);
}

const weft_sched_ops_t weft__sched_workfirst_ops = {
    .thread_created = wf_created,
    .thread_started = NULL,
    .thread_terminated = NULL,
    .thread_blocked = NULL,
    .thread_unblocked = on_unblocked,
    .bundle_created = NULL,
    .bundle_terminated = NULL,
    /* idle VPs already steal from every dispatch queue through the root's handler;
     * this bundle keeps nothing of its own to hand out */
    .processor_idle = NULL,
    .flags = WEFT_SCHED_DISPATCH_ONLY,
};
