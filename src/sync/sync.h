/* src/sync/sync.h - the one wait-queue, block and wake path that every blocking
 * object uses, and the private views of the public objects (timers: sync/timer.h).
 *
 * A waiter lives on the waiting thread's stack for the length of one wait:
 *
 *   state (futex word for plain OS threads)
 *     WAITING  -> SIGNALED   by the waker, under the object's queue lock: the wait
 *                            succeeded (for handing-off objects the waiter now owns
 *                            what it waited for)
 *     WAITING  -> TIMEDOUT   by the timer (weft thread: under the VP's timer lock)
 *                            or by the OS waiter itself after its futex timed out
 *   Exactly one of the two CASes wins; the winner alone may wake the thread.
 *
 *   linked: 1 while on an object's queue (object's queue lock). A waker that pops
 *   a TIMEDOUT waiter just drops it; a timed-out waiter that is still linked
 *   unlinks itself under the queue lock before it returns.
 *
 * Publishing: a weft thread links itself on the queue under the queue lock, then
 * blocks; the lock is released by the switch's continuation, after its context is
 * saved, so no waker can see it before it can be resumed (C-Threads §3). Its timer
 * (if any) is armed in the same continuation, for the same reason.
 */
#ifndef WEFT_SYNC_INTERNAL_H
#define WEFT_SYNC_INTERNAL_H

#include "core/internal.h"
#include "sync/timer.h"
#include "weft/sync.h"

/* CLAIMED: a plain OS waiter claimed by a mutex unlock that has not yet freed the
 * mutex (mutex.c); it cannot time out any more and waits on for SIGNALED. */
enum { WEFT__W_WAITING = 0, WEFT__W_SIGNALED = 1, WEFT__W_TIMEDOUT = 2, WEFT__W_CLAIMED = 3 };
enum { WEFT__MORPH_QUEUED = 1, WEFT__MORPH_HANDED = 2 };  /* weft__waiter_t.morphed */

typedef struct weft__waiter {
  struct weft__waiter *next, *prev; /* object queue links: queue lock */
  weft_thread_t *t;                 /* the weft thread; NULL: a plain OS thread */
  _Atomic uint32_t state;           /* above; OS waiters futex-wait on it */
  uint32_t linked;                  /* queue lock */
  uint32_t mode;                    /* rwlock: 1 reader, 2 writer, | 4 woken to compete,
                                     * | 8 failed (WEFT_EAGAIN: readers full) */
  uint32_t passes;                  /* rwlock: competitions this waiter has lost */
  uint32_t morphed;                 /* cond: WEFT__MORPH_QUEUED: moved onto the mutex
                                       queue (wait morphing); WEFT__MORPH_HANDED: given
                                       the mutex held by the continuation of a thread
                                       that blocked in cond_wait on it (wait.c) */
  uint32_t idle;                    /* weft I/O (io.c, "Stacks of idle threads"): 0, a
                                       parked weft_read-style wait the sweep has not
                                       seen; a stamp, when it first saw it; IO_IDLE_NEVER,
                                       never given back; IO_IDLE_STANDIN, a stand-in for
                                       a waiter whose thread's stack was given back:
                                       the record's lock */
  weft_mutex_t *mutex;              /* cond: the waiter's mutex */
  weft__spin_t *qlock;              /* weft__wait_q/_cond: the queue lock its
                                       continuation releases */
  /* timer (weft threads with a deadline) */
  uint64_t deadline;                /* WEFT_FOREVER: none */
  weft__tmheap_t *heap;             /* the heap it is armed in: set in the
                                       continuation, read by the waiter after (a
                                       cancel leaves it) */
  int tidx;                         /* index in heap->v, -1 if not in it: heap lock */
} weft__waiter_t;

/* A FIFO of waiters: the private view of every public object's head_/tail_. */
typedef struct weft__wq {
  weft__waiter_t *head, *tail;
} weft__wq_t;

static inline void weft__wq_push(weft__wq_t *q, weft__waiter_t *w) {
  w->next = NULL;
  w->prev = q->tail;
  if (q->tail) q->tail->next = w;
  else q->head = w;
  q->tail = w;
  w->linked = 1;
}

/* Links w at the head of q (a waiter that keeps its place after a lost retry). */
static inline void weft__wq_push_front(weft__wq_t *q, weft__waiter_t *w) {
  w->prev = NULL;
  w->next = q->head;
  if (q->head) q->head->prev = w;
  else q->tail = w;
  q->head = w;
  w->linked = 1;
}

static inline void weft__wq_remove(weft__wq_t *q, weft__waiter_t *w) {
  if (w->prev) w->prev->next = w->next;
  else q->head = w->next;
  if (w->next) w->next->prev = w->prev;
  else q->tail = w->prev;
  w->linked = 0;
}

/* Unlinks and returns the oldest waiter, or NULL: weft__wq_remove of the head, which
 * has no prev. */
static inline weft__waiter_t *weft__wq_pop(weft__wq_t *q) {
  weft__waiter_t *w = q->head;
  if (w) {
    weft__waiter_t *n = w->next;
    q->head = n;
    if (n) n->prev = NULL;
    else q->tail = NULL;
    w->linked = 0;
  }
  return w;
}

/* Fills in a waiter for the calling thread, vp its VP as it read it (weft__vp(): valid
 * until the caller next switches; NULL on a plain OS thread). next/prev/linked are set
 * when it is linked; mode, morphed and mutex by the objects that use them. */
static inline void weft__waiter_init_on(weft__waiter_t *w, weft_vp_t *vp, uint64_t deadline) {
  w->t = vp ? vp->current : NULL;
  atomic_store_explicit(&w->state, WEFT__W_WAITING, memory_order_relaxed);
  w->morphed = 0;
  w->deadline = deadline;
  w->heap = NULL;
}
/* The same for a caller that has not read its VP. */
static inline void weft__waiter_init(weft__waiter_t *w, uint64_t deadline) {
  weft__waiter_init_on(w, weft__vp(), deadline);
}

/* Claims w for waking: WAITING -> SIGNALED. Caller holds the queue lock w was on
 * (and has unlinked it). acq_rel: release publishes what the waker handed over
 * (a unit, the lock) to the waiter's acquire load of state; acquire orders the
 * claim after a timer's failed claim is visible. Returns 1 if the caller won and
 * must wake it with weft__wake(t, w) after saving t = w->t. */
static inline int weft__waiter_claim(weft__waiter_t *w) {
  uint32_t exp = WEFT__W_WAITING;
  return atomic_compare_exchange_strong_explicit(&w->state, &exp, WEFT__W_SIGNALED,
                                                 memory_order_acq_rel, memory_order_acquire);
}

/* weft__waiter_claim for the waiters of an object whose only claimers are its wakers,
 * under its queue lock, and the waiter's own timer (cond, sem, mutex; not the I/O
 * waiters, which a completion and weft_close may both try to claim; docs/memory-
 * ordering.md §8). A waiter with no
 * deadline then has one claimer at a time, the holder of the queue lock that unlinks
 * it, and nothing else writes its state: the claim is a plain store, one locked
 * instruction less per wake-up. With a deadline, the CAS decides against the timer.
 * release (the store): pairs with the waiter's acquire load of its state, as the
 * CAS's. `to`: WEFT__W_SIGNALED, or WEFT__W_CLAIMED for a mutex's plain OS waiter. */
static inline int weft__waiter_claim_locked(weft__waiter_t *w, uint32_t to) {
  if (WEFT__LIKELY(w->deadline == WEFT_FOREVER)) {
    atomic_store_explicit(&w->state, to, memory_order_release);
    return 1;
  }
  uint32_t exp = WEFT__W_WAITING;
  return atomic_compare_exchange_strong_explicit(&w->state, &exp, to, memory_order_acq_rel,
                                                 memory_order_acquire);
}

/* Wakes a claimed waiter. t is w->t read before the queue lock was released: an
 * OS waiter may return (and its stack frame die) as soon as it sees SIGNALED, so
 * w is not read here; the futex wake on its old address is harmless if it did. */
static inline void weft__wake(weft_thread_t *t, weft__waiter_t *w) {
  if (t) weft__unblock(weft__vp(), t);
  else weft__os_futex_wake(&w->state, 1);
}

/* The queue lock of a sync object. Plain OS threads and VPs both take it, and on a
 * loaded host the kernel may preempt its holder: a pure spin would then burn the
 * rest of every waiter's time slice (milliseconds) before the holder runs again.
 * So after a short spin the waiter yields its kernel thread (sched_yield) between
 * polls. The uncontended path is one exchange, as weft__spin_lock; acquire pairs
 * with weft__spin_unlock's release. Released with weft__spin_unlock. */
void weft__qlock_lock_slow(weft__spin_t *l);
static inline void weft__qlock_lock(weft__spin_t *l) {
  if (WEFT__LIKELY(!atomic_exchange_explicit(&l->word, 1, memory_order_acquire))) return;
  weft__qlock_lock_slow(l);
}

/* Wakes gathered under a queue lock and done after it is released. Waking a plain
 * OS thread is a futex system call, and the woken thread often preempts the waker
 * on its CPU (wake-up preemption): done under the queue lock, every other thread
 * that wants that lock (OS threads and VPs alike, which spin on it) would spin for
 * the rest of the preempted waker's time slice, milliseconds. So a waker claims
 * waiters under the lock and adds them here, releases the lock, then runs the set.
 *
 * A claimed weft thread stays blocked until it is unblocked, so its waiter (on its
 * stack) stays valid and is chained through `next`. A claimed OS waiter may see
 * SIGNALED and return at once, so only the address of its state word is kept: a
 * futex wake on it after the waiter has gone is harmless (futex waiters re-check
 * their word). Past WEFT__WAKE_OS_MAX OS waiters the rest are woken at once, under
 * the lock (correct, only slower). */
enum { WEFT__WAKE_OS_MAX = 32 };
typedef struct weft__wakeset {
  weft__waiter_t *weft;                    /* claimed weft waiters, newest first */
  _Atomic uint32_t *os[WEFT__WAKE_OS_MAX]; /* state words of claimed OS waiters */
  int nos;
} weft__wakeset_t;

static inline void weft__wakeset_init(weft__wakeset_t *s) {
  s->weft = NULL;
  s->nos = 0;
}

/* Claims w (see weft__waiter_claim; caller holds w's queue lock and has unlinked
 * it) and adds it to s. Returns 0 if it had timed out (nothing added). */
static inline int weft__wakeset_claim(weft__wakeset_t *s, weft__waiter_t *w) {
  weft_thread_t *t = w->t;  /* read before the claim: an OS waiter may leave after */
  _Atomic uint32_t *word = &w->state;
  if (!weft__waiter_claim(w)) return 0;
  if (t) {
    w->next = s->weft;
    s->weft = w;
  } else if (s->nos < WEFT__WAKE_OS_MAX) {
    s->os[s->nos++] = word;
  } else {
    weft__os_futex_wake(word, 1);
  }
  return 1;
}

/* Wakes everything in s, OS threads first (they take longest to get going), then
 * weft threads oldest first. Call with no queue lock held. */
static inline void weft__wakeset_run(weft__wakeset_t *s) {
  for (int i = 0; i < s->nos; i++) weft__os_futex_wake(s->os[i], 1);
  weft__waiter_t *rev = NULL, *w;
  while ((w = s->weft) != NULL) {
    s->weft = w->next;
    w->next = rev;
    rev = w;
  }
  while (rev) {
    w = rev;
    rev = w->next;  /* read first: once unblocked, w's thread may run and w die */
    weft__unblock(weft__vp(), w->t);
  }
}

/* Blocks the caller on w, which it has linked on a queue under `qlock` (held).
 * Releases qlock (for a weft thread: in the switch's continuation), and also runs
 * extra(arg) after that when extra is not NULL (cond_wait unlocks its mutex
 * there). Returns w's final state, SIGNALED or TIMEDOUT, with acquire ordering.
 * After TIMEDOUT the caller re-takes qlock and unlinks w if still linked. */
uint32_t weft__wait(weft__waiter_t *w, weft__spin_t *qlock, void (*extra)(void *), void *arg);
/* weft__wait that also records, for weft_dump, what a weft thread waits on while
 * it is blocked: `what` is a WEFT__WAITING(object, kind) word (core/internal.h),
 * stored in the thread's control block before it blocks and cleared when it
 * resumes (relaxed: a diagnostic). weft__wait records nothing (0). */
uint32_t weft__wait_on(weft__waiter_t *w, uintptr_t what, weft__spin_t *qlock,
                       void (*extra)(void *), void *arg);

/* weft__wait_on's common cases, with the waiter itself as the continuation's argument
 * (no argument block to fill, no extra step to test): weft__wait_q(w, what, qlock) is
 * weft__wait_on(w, what, qlock, NULL, NULL), qlock not NULL, out of line (rwlock,
 * barrier, future); weft__wait_block (below) is the same inlined, and with cond 1 is
 * weft__wait_on(w, what, qlock, weft__mutex_unlock_cont, WEFT__M(w->mutex))
 * (weft_cond_wait). */
uint32_t weft__wait_q(weft__waiter_t *w, uintptr_t what, weft__spin_t *qlock);

/* The pieces of weft__wait_block in wait.c: a plain OS thread's wait, and the block
 * continuations (cont_publish, then for _cond the mutex's release). */
uint32_t weft__wait_os(weft__waiter_t *w, weft__spin_t *qlock, void (*extra)(void *), void *arg);
void weft__wait_cont_q(void *w);
void weft__wait_cont_cond(void *w);


/* How many waiters on q still wait (state WAITING: a timed-out one may stay linked
 * a moment), counted under qlock (weft_debug_waiters; never on a hot path). */
int weft__wq_waiting(weft__spin_t *qlock, const weft__wq_t *q);
/* The same for each object (the private views are in their files). */
int weft__cond_waiting(const weft_cond_t *c);
int weft__sem_waiting(const weft_sem_t *s);
int weft__rwlock_waiting(const weft_rwlock_t *l);
int weft__barrier_waiting(const weft_barrier_t *b);

/* The timers (timer.c: reserve, arm, cancel, poll) are declared in sync/timer.h. */

/* Counts one slow-path event (weft/sync.h counters): a plain add to the VP's own
 * counter, or a relaxed atomic add for plain OS threads (counts only). */
extern _Atomic uint64_t weft__sync_os_counts[WEFT__ST_N];
static inline void weft__sync_count_on(weft_vp_t *vp, int which) {
  if (WEFT__LIKELY(vp != NULL)) weft__stat_inc(&vp->sync_st[which]);
  else atomic_fetch_add_explicit(&weft__sync_os_counts[which], 1, memory_order_relaxed);
}
/* vp: the caller's VP as weft__vp() gave it, not read across a switch (the thread
 * may be on another VP after one). weft__sync_count reads it. */
static inline void weft__sync_count(int which) { weft__sync_count_on(weft__vp(), which); }

/* ---- private views of the public objects ---------------------------------------- */
typedef struct weft__mutex {
  _Atomic uint32_t word;   /* 0 free; 1 held; 2 held, waiters may be queued.
                              0 -> 1 fast lock (CAS, acquire); any -> 0 unlock
                              (exchange, release: pairs with the next lock's acquire);
                              waiters and wait morphing set 2 under the queue lock */
  weft__spin_t qlock;
  _Atomic int32_t spin;    /* adaptive spin estimate; relaxed: a hint */
  uint32_t pad;
  weft__wq_t q;            /* qlock */
  _Atomic(void *) owner;   /* checked builds: holder token (relaxed: a diagnostic,
                              read by other threads only in assertions) */
} weft__mutex_t;

_Static_assert(sizeof(weft__mutex_t) == sizeof(weft_mutex_t), "mutex layout");
_Static_assert(offsetof(weft__mutex_t, q) == offsetof(weft_mutex_t, head_), "mutex layout");
_Static_assert(offsetof(weft__mutex_t, owner) == offsetof(weft_mutex_t, owner_), "mutex layout");

#define WEFT__M(m) ((weft__mutex_t *)(void *)(m))

/* weft_mutex_lock with its fast path inlined (cond_wait's re-acquisition): the CAS
 * 0 -> 1 (acquire: pairs with the release of the previous unlock), else the whole
 * call. Checked builds always call it (it records the holder). */
static inline int weft__mutex_relock(weft_mutex_t *m) {
#ifndef WEFT_CHECKED
  uint32_t seen = 0;
  if (WEFT__LIKELY(atomic_compare_exchange_strong_explicit(&WEFT__M(m)->word, &seen, 1,
                                                           memory_order_acquire,
                                                           memory_order_relaxed)))
    return 0;
#endif
  return weft_mutex_lock(m);
}

/* Used by cond.c for wait morphing and re-acquisition. */
void weft__mutex_unlock_cont(void *m);
int weft__mutex_lock_woken(weft__mutex_t *m, weft__waiter_t *w);
void weft__mutex_morph(weft__mutex_t *m, weft__waiter_t *w);
/* cond_wait's check of its mutex: WEFT_EPERM if m is not held at all (as unlock
 * reports, in every build); checked builds also assert that the caller holds it.
 * relaxed: the caller's own lock made the word nonzero; a zero word cannot be the
 * caller's. */
#ifdef WEFT_CHECKED
void weft__mutex_assert_mine(weft__mutex_t *m);
#endif
static inline int weft__mutex_check_held(weft__mutex_t *m) {
  if (WEFT__UNLIKELY(atomic_load_explicit(&m->word, memory_order_relaxed) == 0)) return WEFT_EPERM;
#ifdef WEFT_CHECKED
  weft__mutex_assert_mine(m);
#endif
  return 0;
}

/* A cond waiter that was handed its mutex held (weft__wait_cont_cond) records itself as
 * the holder (checked builds; nothing otherwise). */
#ifdef WEFT_CHECKED
void weft__mutex_owner_take(weft__mutex_t *m);
#else
static inline void weft__mutex_owner_take(weft__mutex_t *m) { (void)m; }
#endif

/* Checked builds: a cond waiter gives up the holder token just before it blocks,
 * not in its continuation (weft__mutex_unlock_cont). The continuation arms the
 * waiter's timer before it releases the word, so a timer fired at once by another
 * VP can resume the waiter elsewhere first; its re-lock then waits for the word
 * as any locker does, and must not take itself for the holder. relaxed: as
 * OWNER_SET, a diagnostic; the word's release/acquire orders it for the next
 * holder. */
static inline void weft__mutex_owner_drop(weft__mutex_t *m) {
#ifdef WEFT_CHECKED
  atomic_store_explicit(&m->owner, NULL, memory_order_relaxed);
#else
  (void)m;
#endif
}

/* weft__wait_q (cond 0), or with cond 1 the same whose continuation also releases
 * w->mutex (weft_cond_wait), inlined into the waits of the mutex, the semaphore and the
 * condition variable: no call and no second frame between them and the switch. vp: the
 * caller's VP as weft__vp() gave it, not read across a switch (any VP for a plain OS
 * thread, w->t NULL: not read). */
static inline __attribute__((always_inline)) uint32_t weft__wait_block_on(weft__waiter_t *w,
                                                                         weft_vp_t *vp,
                                                                         uintptr_t what,
                                                                         weft__spin_t *qlock,
                                                                         int cond) {
  weft_thread_t *self = w->t;
  if (!self)
    return cond ? weft__wait_os(w, qlock, weft__mutex_unlock_cont, WEFT__M(w->mutex))
                : weft__wait_os(w, qlock, NULL, NULL);
  w->qlock = qlock;
  /* relaxed (both): read only by weft_dump, which orders nothing by it */
  atomic_store_explicit(&self->waiting, what, memory_order_relaxed);
  weft__block(vp, self, cond ? weft__wait_cont_cond : weft__wait_cont_q, w);
  atomic_store_explicit(&self->waiting, 0, memory_order_relaxed);
  /* acquire: pairs with the waker's (or the timer's) claim */
  uint32_t st = atomic_load_explicit(&w->state, memory_order_acquire);
  if (w->heap) weft__timer_cancel(w);
  return st;
}
/* weft__wait_block_on for a caller that has not read its VP since it last switched. */
static inline __attribute__((always_inline)) uint32_t weft__wait_block(weft__waiter_t *w,
                                                                      uintptr_t what,
                                                                      weft__spin_t *qlock,
                                                                      int cond) {
  return weft__wait_block_on(w, weft__vp(), what, qlock, cond);
}

#endif
