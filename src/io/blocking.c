/* src/io/blocking.c - weft_blocking(): blocking work on a shared pool of kernel
 * threads, the calling weft thread parked meanwhile (weft/io.h, docs/io.md); and the
 * kernel threads of weft_wire() (weft/wire.h, src/core/wire.c), taken from the same pool.
 *
 * The job lives on the caller's stack, with a waiter (src/sync/sync.h). The caller
 * makes sure a pool thread will take it (starting one if every thread is busy and
 * the pool is below its limit), then blocks; its block continuation, which runs
 * once its context is saved, queues the job, so no pool thread can finish the job
 * and wake the caller before it can be resumed. A pool thread runs the job, stores
 * its result, claims the waiter (WAITING -> SIGNALED: release, paired with the
 * caller's acquire load of its state, so the caller sees the result) and makes the
 * caller ready from its plain OS thread (the gated path of weft__unblock).
 *
 * A hold (weft__pool_hold_t, src/io/io.h) asks for a pool thread for as long as a
 * wired weft thread runs on it. weft__pool_hold_reserve() counts the hold (nqueued,
 * nheld) and starts a thread unless an idle one is to spare (more idle threads than
 * reservations), past the limit if need be: a wire never waits for a busy pool
 * thread. The wire's block continuation queues the hold (weft__pool_hold_submit);
 * pool threads take holds before jobs; the thread runs h->run(h), which returns when
 * the wired thread has unwired, and the thread is an idle pool thread again. From
 * weft__pool_hold_done (the unwire, before the wired thread is made ready) until it is
 * back in the worker loop it counts in nsoon, as does a thread from its start until it
 * is in the loop, and one that has run a job, from before it wakes the job's caller;
 * reservations count nsoon like idle threads (such a thread checks the queues before
 * it waits): a thread that unwires and wires again at once finds its kernel thread,
 * and a started thread whose hold another thread took is not started twice. The pool
 * lock orders everything the hold's submitter wrote (the saved context of the wired
 * thread) before the pool thread that takes it: unlock in submit, lock in the worker.
 *
 * The limit bounds the threads that are not held: held ones (nheld) are counted in
 * nthreads but not against max, so wired threads neither wait for nor starve
 * weft_blocking jobs. It also bounds the jobs that run at once (nrunning): after a
 * lowered limit, idle threads above it take no job. A thread above the limit, or idle for the idle time, exits once
 * no reservation needs it (the queued holds, and the queued jobs that could start now,
 * fewer than max running, are covered by the other idle threads plus nsoon): a thread
 * a caller has counted on never leaves before it takes that caller's job or hold.
 *
 * The pool is process-wide and outlives weft_init/weft_shutdown: pool threads hold
 * no weft state between jobs and holds. Idle threads wait on a condition variable (on
 * CLOCK_MONOTONIC) and exit after the idle time. A child of fork(2) starts with an
 * empty pool (fork_child below).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "core/alloc.h"
#include "io/io.h"
#include "sync/sync.h"
#include "weft/io.h"

typedef struct job {
  struct job *next;
  void *(*fn)(void *);
  void *arg;
  void *result;
  weft__waiter_t w;
} job_t;

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* on CLOCK_MONOTONIC (pool_init) */
  job_t *head, *tail;     /* queued jobs, FIFO: mu */
  weft__pool_hold_t *holds, *holds_tail;  /* queued holds, FIFO, taken first: mu */
  int nqueued;            /* jobs and holds queued or about to be (callers reserve): mu */
  int nthreads, nidle;    /* mu; nthreads read by weft_blocking_threads under mu */
  int nheld;              /* threads held by a hold, or reserved for one: mu */
  int nhq;                /* holds reserved and not yet taken by a thread (part of
                           * nqueued; the rest of nqueued are jobs): mu */
  int nsoon;              /* threads on their way to the loop that needs no signal: started
                           * and not yet in it, or back from a hold (weft__pool_hold_done): mu */
  int nrunning;           /* threads running a job: at most max (mu) */
  uint64_t left_ns;       /* when a thread last left the pool (mu): weft__pool_idle_spare */
  sigset_t mask;          /* the signal mask of the runtime now running (mu) */
  unsigned mask_gen;      /* bumped by weft__pool_runtime_mask (mu) */
  int nstale;             /* threads that have not taken the mask of mask_gen yet (mu) */
  pthread_cond_t mask_cv; /* weft__pool_runtime_mask waits on it for nstale 0 */
  int max;
  uint64_t idle_ns;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .max = 64, .idle_ns = 10000000000ull};

static void cond_init(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&pool.cv, &a);
  pthread_cond_init(&pool.mask_cv, &a);
  pthread_condattr_destroy(&a);
}

/* fork(2): the child has only the forking thread, so none of the pool's threads. The
 * pool lock is held across the fork (no other thread is inside it when the address
 * space is copied); the child starts with an empty pool, keeping the limits, and a
 * condition variable that no dead waiter is counted on (glibc's signal could wait for
 * waiters that no longer exist). Without this, the child's idle count said N threads
 * were waiting: a weft_blocking call after weft_init in the child queued its job for
 * threads that do not exist and never returned. Queued jobs and holds belonged to
 * weft threads of the parent, which the child does not have. */
static void fork_prepare(void) { pthread_mutex_lock(&pool.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&pool.mu); }
static void fork_child(void) {
  pool.head = pool.tail = NULL;
  pool.holds = pool.holds_tail = NULL;
  pool.nqueued = pool.nthreads = pool.nidle = pool.nheld = pool.nsoon = pool.nrunning = 0;
  pool.left_ns = 0;
  pool.nstale = 0;
  pool.nhq = 0;
  cond_init();
  pthread_mutex_unlock(&pool.mu);
}

static void pool_init(void) {
  cond_init();
  /* registered at the pool's first use: before it, the pool has no thread and its
   * counts are 0, in a child as in the parent */
  (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* A pool thread outlives the run that started it; it takes the mask of the run now
 * going on (mu held). It was started with the mask of its creator, a VP of the run then
 * going on. A program that blocks a signal in its main thread before weft_init, for
 * sigwait or signalfd (docs/limits.md), was killed by it: an idle pool thread of an
 * earlier run, which did not block it, took the signal. */
static void take_runtime_mask(unsigned *gen) {
  if (*gen == pool.mask_gen) return;
  *gen = pool.mask_gen;
  pthread_sigmask(SIG_SETMASK, &pool.mask, NULL);
  if (--pool.nstale == 0) pthread_cond_signal(&pool.mask_cv);
}

static void *worker(void *arg) {
  unsigned gen = (unsigned)(uintptr_t)arg;  /* the run of its creator (start_worker) */
  /* the name weft_init's kernel-thread counts leave out (deadlock.c, count_tasks) */
  pthread_setname_np(pthread_self(), "weft-pool");
  pthread_mutex_lock(&pool.mu);
  pool.nsoon--;  /* counted by start_worker */
  for (;;) {
    int timed_out = 0;
    /* a job only while fewer than max run: a lowered limit holds at once, not only
     * once the threads above it have left (which they do only when idle) */
    while (take_runtime_mask(&gen), !pool.holds && !(pool.head && pool.nrunning < pool.max)) {
      /* idle for the idle time, or above the limit, and no reservation counts on this
       * thread (the other idle threads cover them all): leave. A reservation needs an
       * idle thread if it is a hold, or a job that could start now (fewer than max
       * run); the jobs behind those are taken by the running threads as they finish.
       * (Counting every queued job kept threads above the limit, back from holds while
       * jobs queued, until the idle time.) */
      int free_slots = pool.max > pool.nrunning ? pool.max - pool.nrunning : 0;
      int jobs = pool.nqueued - pool.nhq;
      int need = pool.nhq + (jobs < free_slots ? jobs : free_slots);
      if ((timed_out || pool.nthreads - pool.nheld > pool.max) && need <= pool.nidle + pool.nsoon)
        goto leave;
      uint64_t until = weft__os_now_ns() + pool.idle_ns;
      struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
      pool.nidle++;
      timed_out = pthread_cond_timedwait(&pool.cv, &pool.mu, &ts) == ETIMEDOUT;
      pool.nidle--;
    }
    if (pool.holds) {
      weft__pool_hold_t *h = pool.holds;
      pool.holds = h->next;
      if (!pool.holds) pool.holds_tail = NULL;
      pool.nqueued--;
      pool.nhq--;
      pthread_mutex_unlock(&pool.mu);
      h->run(h);  /* a wired thread runs here until it unwires; h is gone by then */
      pthread_mutex_lock(&pool.mu);
      pool.nsoon--;  /* weft__pool_hold_done counted it out of nheld, into nsoon */
      continue;
    }
    job_t *j = pool.head;
    pool.head = j->next;
    if (!pool.head) pool.tail = NULL;
    pool.nqueued--;
    pool.nrunning++;
    pthread_mutex_unlock(&pool.mu);
    j->result = j->fn(j->arg);
    /* back in the loop soon: counted in nsoon before the caller runs again, so that a
     * wire or a job the caller asks for next takes this thread rather than starting
     * one (as after an unwire, weft__pool_hold_done). Still counted in nrunning until
     * the caller is ready: weft_shutdown waits while weft__pool_jobs() counts a job
     * (counted out before the wake, the job's parked caller looked blocked for good,
     * and shutdown returned WEFT_EBUSY: once in a CI run, under the emulator) */
    pthread_mutex_lock(&pool.mu);
    pool.nsoon++;
    pthread_mutex_unlock(&pool.mu);
    weft_thread_t *t = j->w.t;  /* before the claim: j dies once its caller runs */
    if (weft__waiter_claim(&j->w)) weft__wake(t, &j->w);
    pthread_mutex_lock(&pool.mu);
    pool.nrunning--;
    pool.nsoon--;  /* this thread takes the next queued job itself, if any */
  }
leave:
  if (gen != pool.mask_gen && --pool.nstale == 0) pthread_cond_signal(&pool.mask_cv);
  pool.nthreads--;
  pool.left_ns = weft__os_now_ns();
  pthread_mutex_unlock(&pool.mu);
  return NULL;
}

/* Starts a detached pool thread (pool.mu held): 0 or pthread_create's error. With
 * `injectable`, an injected failure (weft_debug_fail_alloc) stands for EAGAIN. */
static int start_worker(int injectable) {
  pthread_attr_t a;
  pthread_t th;
  int err = pthread_attr_init(&a);
  if (err != 0) return err;
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  err = injectable && weft__sys_fail_injected() ? EAGAIN : pthread_create(&th, &a, worker, (void *)(uintptr_t)pool.mask_gen);
  pthread_attr_destroy(&a);
  if (err == 0) {
    pool.nthreads++;
    pool.nsoon++;  /* until it takes the lock in worker() */
  }
  return err;
}

/* Block continuation of the caller: queue its job (it is saved now). */
static void submit(void *p) {
  job_t *j = p;
  pthread_mutex_lock(&pool.mu);
  j->next = NULL;
  if (pool.tail) pool.tail->next = j;
  else pool.head = j;
  pool.tail = j;
  pthread_cond_signal(&pool.cv);
  pthread_mutex_unlock(&pool.mu);
}

int weft_blocking(void *(*fn)(void *), void *arg, void **result) {
  if (!fn) return WEFT_EINVAL;
  weft_vp_t *vp = weft__vp();
  if (!vp) {
    void *r = fn(arg);
    if (result) *result = r;
    return 0;
  }
  pthread_once(&pool_once, pool_init);
  job_t j = {.fn = fn, .arg = arg};
  weft__waiter_init(&j.w, WEFT_FOREVER);
  pthread_mutex_lock(&pool.mu);
  /* held threads do not count against the limit, nor do they take jobs */
  if (pool.nqueued >= pool.nidle + pool.nsoon && pool.nthreads - pool.nheld < pool.max &&
      start_worker(0) != 0 && pool.nthreads - pool.nheld == 0) {
    pthread_mutex_unlock(&pool.mu);
    return WEFT_EAGAIN;
  }
  pool.nqueued++;
  pthread_mutex_unlock(&pool.mu);
  /* weft_dump names the function the pool runs for us */
  weft__wait_on(&j.w, WEFT__WAITING_X(WEFT__WX_BLOCKING, (uintptr_t)fn), NULL, submit, &j);
  if (result) *result = j.result;
  return 0;
}

int weft__pool_hold_reserve(void) {
  pthread_once(&pool_once, pool_init);
  pthread_mutex_lock(&pool.mu);
  /* no idle (or returning) thread to spare: start one, limit or not */
  if (pool.nidle + pool.nsoon <= pool.nqueued) {
    int err = start_worker(1);
    if (err != 0) {
      pthread_mutex_unlock(&pool.mu);
      return err == ENOMEM ? WEFT_ENOMEM : WEFT_ESYS;
    }
  }
  pool.nqueued++;
  pool.nhq++;
  pool.nheld++;
  pthread_mutex_unlock(&pool.mu);
  return 0;
}

void weft__pool_hold_submit(weft__pool_hold_t *h) {
  pthread_mutex_lock(&pool.mu);
  h->next = NULL;
  if (pool.holds_tail) pool.holds_tail->next = h;
  else pool.holds = h;
  pool.holds_tail = h;
  pthread_cond_signal(&pool.cv);
  pthread_mutex_unlock(&pool.mu);  /* pairs with the lock of the worker that takes h */
}

void weft__pool_hold_done(void) {
  pthread_mutex_lock(&pool.mu);
  pool.nheld--;
  pool.nsoon++;
  pthread_mutex_unlock(&pool.mu);
}

void weft__pool_runtime_mask(void) {
  pthread_once(&pool_once, pool_init);
  pthread_mutex_lock(&pool.mu);
  pthread_sigmask(SIG_SETMASK, NULL, &pool.mask);  /* the caller's: weft_init's thread */
  pool.mask_gen++;
  pool.nstale = pool.nthreads;  /* every thread there is has an earlier run's mask */
  pthread_cond_broadcast(&pool.cv);  /* idle threads take it now, then wait again */
  /* Wait (bounded) until they have: a signal the program sends right after weft_init
   * must find it blocked everywhere. After a weft_shutdown every pool thread is idle
   * or on its way back to its loop; 100 ms bounds a thread the kernel does not run. */
  uint64_t until = weft__os_now_ns() + 100000000u;
  struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
  while (pool.nstale > 0 && pthread_cond_timedwait(&pool.mask_cv, &pool.mu, &ts) != ETIMEDOUT) {
  }
  pthread_mutex_unlock(&pool.mu);
}

int weft_blocking_limits(int max_threads, uint64_t idle_ns) {
  if (max_threads < 0 || max_threads > 4096) return WEFT_EINVAL;
  pthread_once(&pool_once, pool_init);
  pthread_mutex_lock(&pool.mu);
  if (max_threads) pool.max = max_threads;
  if (idle_ns) pool.idle_ns = idle_ns;
  pthread_cond_broadcast(&pool.cv);  /* idle threads re-read the limits */
  /* A raised limit: jobs that queued at the old one (no idle or starting thread
   * to take them) get threads now, as weft_blocking would have started for them;
   * they may be waiting for each other. A failed start leaves them to the threads
   * there are. */
  while (pool.nqueued > pool.nidle + pool.nsoon && pool.nthreads - pool.nheld < pool.max &&
         start_worker(0) == 0) {
  }
  pthread_mutex_unlock(&pool.mu);
  return 0;
}

int weft__pool_idle_spare(int *settling) {
  pthread_mutex_lock(&pool.mu);
  /* nqueued covers reservations and queued jobs and holds, nsoon threads on their way
   * back to the loop, nheld wired threads: with none of those, the idle threads
   * wait for work that only a weft thread can bring */
  int n = pool.nqueued == 0 && pool.nsoon == 0 && pool.nheld == 0 ? pool.nidle : 0;
  /* a thread on its way back (it may still wake its caller), or one that left within
   * the last second (its task may still be listed in /proc/self/task) */
  *settling = pool.nsoon > 0 ||
              (pool.left_ns != 0 && weft__os_now_ns() - pool.left_ns < 1000000000u);
  pthread_mutex_unlock(&pool.mu);
  return n;
}

int weft__pool_jobs(void) {
  pthread_once(&pool_once, pool_init);
  pthread_mutex_lock(&pool.mu);
  int n = pool.nrunning;
  for (job_t *j = pool.head; j; j = j->next) n++;
  pthread_mutex_unlock(&pool.mu);
  return n;
}

int weft_blocking_threads(void) {
  pthread_mutex_lock(&pool.mu);
  int n = pool.nthreads;
  pthread_mutex_unlock(&pool.mu);
  return n;
}
