/* src/sched/queue.c - the FIFO and LIFO schedulers of weft/schedlib.h (Active Threads §5.4,
 * 8.1), eager or lazy stack binding, with or without memory-conscious (affinity)
 * scheduling: eight variants, one set of handlers that reads the variant from the
 * bundle's state. Written against weft/sched.h, except that three values every event
 * needs (the bundle's data, the caller's VP, a VP's index) are read inline as the
 * kernel reads them, not through the calls weft/sched.h offers for them (see state()).
 *
 * State: one run list per VP, a ring of thread pointers under a small spinlock.
 *
 *   thread_created    (eager: bind the stack) push t on the run list of its home VP
 *   thread_unblocked  t has run before: weft_sched_enqueue() on its home VP, so the
 *                     kernel resumes it before it asks processor_idle for new work
 *                     (and a yield finds it there)
 *   processor_idle    pop the own run list (FIFO: oldest, LIFO: newest); if empty,
 *                     steal the oldest thread of another VP's list, trying VPs
 *                     me+1, me+2, ... (affinity: the oldest and its group)
 *
 * Home VP: with AFFINITY and a hint a >= 0, VP (a mod nvps); otherwise the VP that
 * raised the event, or round robin when a plain OS thread raised it.
 *
 * Races tolerated: handlers run on every VP at once (each list has its own lock;
 * a thread is in at most one list, moved only under that list's lock); a thief and
 * the owner race for the last thread (one of them gets NULL, which processor_idle may
 * always return); thread_unblocked may run while the thread's previous VP is still
 * returning from the continuation that published it (we only enqueue it, the kernel
 * saved its context before raising the event). Lock order: the kernel's bundle lock
 * (held around processor_idle, except for the own-bundle questions, which this leaf
 * scheduler gets without it: WEFT_SCHED_IDLE_LEAF) -> one run list lock; never two run
 * list locks.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sched/schedlib.h"
#include "weft/runtime.h"
#include "weft/spinlock.h"

#include "core/internal.h"

#define LIST_INIT_CAP 64 /* slots per run list at creation (a power of two) */
#define GROUP_MAX 32     /* most threads one affinity steal moves */

/* One VP's run list. buf[(head + i) & (cap - 1)], i < n, oldest first. */
typedef struct runlist {
  weft_spin_t lock;
  weft_thread_t **buf; /* under lock */
  size_t cap;          /* under lock: a power of two */
  size_t head, n;      /* under lock */
  /* n, stored under the lock, read without it to skip empty lists. Relaxed: only a
   * hint, the list is read again under its lock. A push cannot be missed by a VP's
   * last look before sleeping: the pusher's store comes before the kernel's notify
   * after thread_created (the light side of an asymmetric pair, or a seq_cst fence),
   * the sleeper's load after its own fences (src/core/idle.c, vp_sleep;
   * docs/memory-ordering.md §6b). */
  _Atomic size_t hint;
} __attribute__((aligned(64))) runlist_t;

typedef struct queue_sched {
  weft__schedlib_head_t head; /* kind: LIFO | EAGER | AFFINITY bits */
  int nvps;                   /* weft_vp_count() at creation (fixed while weft runs) */
  _Atomic unsigned rr;        /* round robin for events raised on plain OS threads */
  runlist_t *lists;           /* nvps lists, one cache line or more each */
} queue_sched_t;

enum { OLDEST, NEWEST };

static __attribute__((noinline, cold)) int list_grow(runlist_t *l) {
  size_t cap = l->cap * 2;
  /* malloc inside a handler: short and rare (the lists start with room for 64) */
  weft_thread_t **b = weft__sys_aligned_uncounted(64, cap * sizeof *b);
  if (!b) return WEFT_ENOMEM;
  for (size_t i = 0; i < l->n; i++) b[i] = l->buf[(l->head + i) & (l->cap - 1)];
  free(l->buf);
  l->buf = b;
  l->cap = cap;
  l->head = 0;
  return 0;
}

/* The run-list lock: one exchange inline; waiting (backoff) out of line, so that the
 * handlers around it keep no registers for it. */
static __attribute__((noinline, cold)) void list_lock_wait(runlist_t *l) {
  weft_spin_lock(&l->lock);
}
static inline __attribute__((always_inline)) void list_lock(runlist_t *l) {
  if (__builtin_expect(weft_spin_trylock(&l->lock) != 0, 0)) list_lock_wait(l);
}

/* Appends t (the newest). 0, or WEFT_ENOMEM if the list could not grow. Inlined into
 * the handlers, like list_take: a call per list operation was a third of their cost
 * (X2 in instructions, docs/schedulers.md). */
static inline __attribute__((always_inline)) int list_push(runlist_t *l, weft_thread_t *t) {
  list_lock(l);
  if (__builtin_expect(l->n == l->cap, 0) && list_grow(l) != 0) {
    weft_spin_unlock(&l->lock);
    return WEFT_ENOMEM;
  }
  l->buf[(l->head + l->n) & (l->cap - 1)] = t;
  l->n++;
  atomic_store_explicit(&l->hint, l->n, memory_order_relaxed); /* see runlist_t */
  weft_spin_unlock(&l->lock);
  return 0;
}

/* Removes and returns the oldest or newest thread, or NULL. */
static inline __attribute__((always_inline)) weft_thread_t *list_take(runlist_t *l, int which) {
  if (!atomic_load_explicit(&l->hint, memory_order_relaxed)) return NULL; /* see runlist_t */
  weft_thread_t *t = NULL;
  list_lock(l);
  if (l->n) {
    if (which == OLDEST) {
      t = l->buf[l->head];
      l->head = (l->head + 1) & (l->cap - 1);
    } else {
      t = l->buf[(l->head + l->n - 1) & (l->cap - 1)];
    }
    l->n--;
    atomic_store_explicit(&l->hint, l->n, memory_order_relaxed);
  }
  weft_spin_unlock(&l->lock);
  return t;
}

/* weft_bundle_data(b), weft_sched_vp_self() and weft_sched_vp_index(vp), read inline:
 * the same values without a call each, so that the common handlers are leaves (three
 * calls were about a third of their instructions: X2, docs/schedulers.md). */
static inline queue_sched_t *state(weft_bundle_t *b) { return b->data; }
static inline int vp_index(const weft_vp_t *vp) {
  /* a VP of its own; a spare VP (the monitor's) answers the VP it stands in for */
  return WEFT__LIKELY(vp->index < weft__rt.nvps) ? vp->index : weft_sched_vp_index(vp);
}

/* The VP whose list or dispatch queue t goes to (see the top of the file). */
static int home(queue_sched_t *s, weft_thread_t *t) {
  if (s->head.kind & WEFT_SCHED_AFFINITY) {
    int a = weft_sched_thread_affinity(t);
    if (a >= 0) return a % s->nvps;
  }
  weft_vp_t *vp = weft__vp();  /* weft_sched_vp_self() */
  if (WEFT__LIKELY(vp != NULL)) return vp_index(vp);
  /* relaxed: only spreads threads, orders nothing */
  return (int)(atomic_fetch_add_explicit(&s->rr, 1, memory_order_relaxed) % (unsigned)s->nvps);
}

/* thread_created in general: eager binding, affinity, a plain OS thread, a spare VP, a
 * busy or full list (out of line: on_created's tail). */
static __attribute__((noinline)) void created_general(queue_sched_t *s, weft_thread_t *t) {
  /* eager binding; on WEFT_ENOMEM the kernel binds the stack at the first run */
  if (s->head.kind & WEFT_SCHED_EAGER) (void)weft_sched_bind_stack(t);
  int i = home(s, t);
  if (list_push(&s->lists[i], t) != 0) weft_sched_enqueue(weft_sched_vp(i), t);
}

/* Its common case, a leaf: lazy, no affinity, raised on a VP of its own whose list is
 * free and has room. The same push as list_push. */
static void on_created(weft_bundle_t *b, weft_thread_t *t) {
  queue_sched_t *s = state(b);
  weft_vp_t *vp = weft__vp();  /* weft_sched_vp_self() */
  if (WEFT__LIKELY(!(s->head.kind & (WEFT_SCHED_EAGER | WEFT_SCHED_AFFINITY)) && vp &&
                   vp->index < weft__rt.nvps)) {
    runlist_t *l = &s->lists[vp->index];
    if (WEFT__LIKELY(weft_spin_trylock(&l->lock) == 0)) {
      if (WEFT__LIKELY(l->n != l->cap)) {
        l->buf[(l->head + l->n) & (l->cap - 1)] = t;
        l->n++;
        atomic_store_explicit(&l->hint, l->n, memory_order_relaxed); /* see runlist_t */
        weft_spin_unlock(&l->lock);
        return;
      }
      weft_spin_unlock(&l->lock);
    }
  }
  created_general(s, t);
}

static void on_unblocked(weft_bundle_t *b, weft_thread_t *t) {
  queue_sched_t *s = state(b);
  weft_sched_enqueue(weft_sched_vp(home(s, t)), t);
}

/* Affinity steal: the oldest thread of v and, if it has a hint, the threads of the
 * same virtual processor right behind it (at most GROUP_MAX in all). The first is
 * returned; the others move to the thief's list, so the group stays together. */
static weft_thread_t *steal_group(queue_sched_t *s, runlist_t *v, int me) {
  if (!atomic_load_explicit(&v->hint, memory_order_relaxed)) return NULL; /* see runlist_t */
  weft_thread_t *got[GROUP_MAX];
  int k = 0;
  weft_spin_lock(&v->lock);
  if (v->n) {
    int a = weft_sched_thread_affinity(v->buf[v->head]);
    do {
      got[k++] = v->buf[v->head];
      v->head = (v->head + 1) & (v->cap - 1);
      v->n--;
    } while (a >= 0 && v->n && k < GROUP_MAX &&
             weft_sched_thread_affinity(v->buf[v->head]) == a);
    atomic_store_explicit(&v->hint, v->n, memory_order_relaxed);
  }
  weft_spin_unlock(&v->lock);
  if (k == 0) return NULL;
  weft_sched_steal_note(weft_sched_vp((int)(v - s->lists)), k, got[0]); /* stats, tracer */
  for (int j = 1; j < k; j++)
    if (list_push(&s->lists[me], got[j]) != 0) weft_sched_enqueue(weft_sched_vp(me), got[j]);
  /* the moved threads were out of every list for a moment: a VP that looked then
   * and went to sleep must be woken if none polls (weft/sched.h) */
  if (k > 1) weft_sched_notify();
  return got[0];
}

/* processor_idle once vp's own list is empty: steal from VPs me+1, me+2, ... (out of
 * line, so that the common case, the own list, stays a short handler). */
static __attribute__((noinline)) weft_thread_t *idle_steal(queue_sched_t *s, int me) {
  int n = s->nvps;
  weft_thread_t *t = NULL;
  for (int k = 1; !t && k < n; k++) {
    runlist_t *v = &s->lists[(me + k) % n];
    if (s->head.kind & WEFT_SCHED_AFFINITY) {
      t = steal_group(s, v, me);
    } else if ((t = list_take(v, OLDEST)) != NULL) {
      weft_sched_steal_note(weft_sched_vp((me + k) % n), 1, t); /* stats, tracer */
    }
  }
  return t;
}

/* processor_idle in general: a spare VP, or a busy own list (out of line: on_idle's tail). */
static __attribute__((noinline)) weft_thread_t *idle_general(queue_sched_t *s, weft_vp_t *vp) {
  int me = vp_index(vp);
  weft_thread_t *t =
      list_take(&s->lists[me], (s->head.kind & WEFT_SCHED_LIFO) ? NEWEST : OLDEST);
  if (t || s->nvps == 1) return t;
  return idle_steal(s, me);
}

/* Its common case, a leaf: a VP of its own whose list is empty (then steal) or free. The
 * same take as list_take. */
static weft_thread_t *on_idle(weft_bundle_t *b, weft_vp_t *vp) {
  queue_sched_t *s = state(b);
  int me = vp->index;
  if (WEFT__UNLIKELY(me >= weft__rt.nvps)) return idle_general(s, vp);
  runlist_t *l = &s->lists[me];
  if (!atomic_load_explicit(&l->hint, memory_order_relaxed)) /* see runlist_t */
    return s->nvps == 1 ? NULL : idle_steal(s, me);
  if (WEFT__UNLIKELY(weft_spin_trylock(&l->lock) != 0)) return idle_general(s, vp);
  weft_thread_t *t = NULL;
  if (l->n) {
    if (s->head.kind & WEFT_SCHED_LIFO) {
      t = l->buf[(l->head + l->n - 1) & (l->cap - 1)];
    } else {
      t = l->buf[l->head];
      l->head = (l->head + 1) & (l->cap - 1);
    }
    l->n--;
    atomic_store_explicit(&l->hint, l->n, memory_order_relaxed); /* see runlist_t */
  }
  weft_spin_unlock(&l->lock);
  if (t || s->nvps == 1) return t;
  return idle_steal(s, me);
}

const weft_sched_ops_t weft__sched_queue_ops = {
    .thread_created = on_created,
    .thread_started = NULL,
    .thread_terminated = NULL,
    .thread_blocked = NULL,
    .thread_unblocked = on_unblocked,
    .bundle_created = NULL,
    .bundle_terminated = NULL,
    .processor_idle = on_idle,
    .flags = WEFT_SCHED_IDLE_LEAF, /* on_idle: its own run lists, nothing of the tree */
};

/* The same handlers for the variants without AFFINITY, whose thread_unblocked on a VP is
 * an enqueue on that VP (home() is the caller's VP): declared, so that the kernel does it
 * inlined and a woken or yielding thread takes the root bundle's paths (weft/sched.h,
 * WEFT_SCHED_LOCAL_READY). New threads still wait in the run lists. */
const weft_sched_ops_t weft__sched_queue_local_ops = {
    .thread_created = on_created,
    .thread_started = NULL,
    .thread_terminated = NULL,
    .thread_blocked = NULL,
    .thread_unblocked = on_unblocked,
    .bundle_created = NULL,
    .bundle_terminated = NULL,
    .processor_idle = on_idle,
    .flags = WEFT_SCHED_LOCAL_READY | WEFT_SCHED_IDLE_LEAF,
};

int weft__queue_data_create(unsigned kind, void **out) {
  int n = weft_vp_count();
  if (n < 1) return WEFT_ENOTINIT;
  queue_sched_t *s = weft__sys_malloc_uncounted(sizeof *s);
  runlist_t *lists = weft__sys_aligned_uncounted(_Alignof(runlist_t), (size_t)n * sizeof *lists);
  if (lists) memset(lists, 0, (size_t)n * sizeof *lists);  /* before any goto fail */
  if (!s || !lists) goto fail;
  memset(s, 0, sizeof *s);
  s->head.kind = kind;
  s->nvps = n;
  s->lists = lists;
  for (int i = 0; i < n; i++) {
    weft_spin_init(&lists[i].lock);
    lists[i].cap = LIST_INIT_CAP;
    /* whole cache lines: two VPs' rings in one line slowed both (T1 at P=2 under the
     * FIFO: 1.24x to 1.35x the built-in's time, against 1.15x at P=1) */
    if (!(lists[i].buf = weft__sys_aligned_uncounted(64, LIST_INIT_CAP * sizeof *lists[i].buf)))
      goto fail;
  }
  *out = s;
  return 0;
fail:
  if (lists)
    for (int i = 0; i < n; i++) free(lists[i].buf);
  free(lists);
  free(s);
  return WEFT_ENOMEM;
}

void weft__queue_data_destroy(void *data) {
  queue_sched_t *s = data;
  for (int i = 0; i < s->nvps; i++) free(s->lists[i].buf);
  free(s->lists);
  free(s);
}
