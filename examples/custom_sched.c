/* examples/custom_sched.c - a FIFO scheduler of your own, in one page.
 *
 * A scheduler is a table of event handlers (weft/sched.h). The kernel gives each
 * virtual processor (VP) a FIFO dispatch queue and runs whatever it finds there; a
 * scheduler only decides which queue a ready thread goes to. This one:
 *   - a new or woken thread goes to the queue of the VP that made it ready (a plain
 *     OS thread has no VP: then round robin over all VPs);
 *   - a VP with an empty queue takes the oldest thread of another VP's queue.
 * Handlers must not block: they only call the kernel services of weft/sched.h.
 *
 * Built as weft_example_custom_sched; tests/unit/sched_conformance_test.cc compiles
 * the scheduler part (with WEFT_EXAMPLE_NO_MAIN) and runs its conformance suite on it. */
#include <stdatomic.h>
#include <stdio.h>

#include <weft/weft.h>

/* The VP a thread made ready now should go to. */
static weft_vp_t *place(void) {
  static _Atomic unsigned next; /* relaxed: it only spreads threads */
  weft_vp_t *here = weft_sched_vp_self();
  if (here) return here;
  unsigned i = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
  return weft_sched_vp((int)(i % (unsigned)weft_vp_count()));
}

/* thread_created and thread_unblocked: the thread is ours until we enqueue it. */
static void on_ready(weft_bundle_t *b, weft_thread_t *t) {
  (void)b;
  weft_sched_enqueue(place(), t);
}

/* processor_idle: vp has nothing to run; return a thread or NULL. Must be cheap. */
static weft_thread_t *on_idle(weft_bundle_t *b, weft_vp_t *vp) {
  (void)b;
  int n = weft_vp_count(), me = weft_sched_vp_index(vp);
  for (int k = 1; k < n; k++) {
    weft_thread_t *t = weft_sched_steal(weft_sched_vp((me + k) % n));
    if (t) return t;
  }
  return NULL;
}

/* The table: unset handlers (started, terminated, blocked, bundle events) do nothing. */
const weft_sched_ops_t custom_fifo_ops = {
    .thread_created = on_ready,
    .thread_unblocked = on_ready,
    .processor_idle = on_idle,
    /* on_ready always enqueues (no extra wake-ups), and on a VP it is exactly an
     * enqueue on the caller's VP: the kernel may do that itself, inlined, as it does
     * for its own scheduler (weft/sched.h, the declared fast path) */
    .flags = WEFT_SCHED_DISPATCH_ONLY | WEFT_SCHED_LOCAL_CREATE | WEFT_SCHED_LOCAL_READY,
};

#ifndef WEFT_EXAMPLE_NO_MAIN
static _Atomic int order; /* the order in which the threads ran */

static void *work(void *arg) {
  int turn = atomic_fetch_add(&order, 1);
  printf("thread %d ran %s\n", (int)(intptr_t)arg, turn == (int)(intptr_t)arg ? "in turn" : "out of turn");
  weft_yield(); /* a yield is "unblocked" for the scheduler: back to the queue's tail */
  return arg;
}

int main(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1; /* one VP: the FIFO order is exact */
  if (weft_init(&cfg) != 0) return 1;
  weft_bundle_t *b; /* a bundle: threads that share this scheduler */
  int rc = weft_bundle_create(&b, NULL, &custom_fifo_ops, NULL);
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = b;
  weft_thread_t *t[5];
  for (int i = 0; i < 5 && rc == 0; i++) rc = weft_create(&t[i], &attr, work, (void *)(intptr_t)i);
  for (int i = 0; i < 5 && rc == 0; i++) rc = weft_join(t[i], NULL);
  if (rc == 0) rc = weft_bundle_destroy(b); /* only once its threads have finished */
  if (rc != 0) fprintf(stderr, "weft: %s\n", weft_strerror(rc));
  return weft_shutdown() == 0 && rc == 0 ? 0 : 1;
}
#endif
