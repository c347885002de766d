/* src/io/blocking.c - weft_blocking(): blocking work on a shared pool of kernel
 * threads, the calling weft thread parked meanwhile (weft/io.h, docs/io.md).
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
 * The pool is process-wide and outlives weft_init/weft_shutdown: pool threads hold
 * no weft state between jobs. Idle threads wait on a condition variable (on
 * CLOCK_MONOTONIC) and exit after the idle time.
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>

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
  int nqueued;            /* jobs queued or about to be (callers reserve): mu */
  int nthreads, nidle;    /* mu; nthreads read by weft_blocking_threads under mu */
  int max;
  uint64_t idle_ns;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .max = 64, .idle_ns = 10000000000ull};

static void pool_init(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&pool.cv, &a);
  pthread_condattr_destroy(&a);
}

static void *worker(void *unused) {
  (void)unused;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    int timed_out = 0;
    while (!pool.head && !timed_out && pool.nthreads <= pool.max) {
      uint64_t until = weft__os_now_ns() + pool.idle_ns;
      struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
      pool.nidle++;
      timed_out = pthread_cond_timedwait(&pool.cv, &pool.mu, &ts) == ETIMEDOUT;
      pool.nidle--;
    }
    if (!pool.head) break;  /* idle for the idle time, or above a lowered limit */
    job_t *j = pool.head;
    pool.head = j->next;
    if (!pool.head) pool.tail = NULL;
    pool.nqueued--;
    pthread_mutex_unlock(&pool.mu);
    j->result = j->fn(j->arg);
    weft_thread_t *t = j->w.t;  /* before the claim: j dies once its caller runs */
    if (weft__waiter_claim(&j->w)) weft__wake(t, &j->w);
    pthread_mutex_lock(&pool.mu);
  }
  pool.nthreads--;
  pthread_mutex_unlock(&pool.mu);
  return NULL;
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
  if (pool.nqueued >= pool.nidle && pool.nthreads < pool.max) {
    pthread_attr_t a;
    pthread_t th;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &a, worker, NULL) == 0) {
      pool.nthreads++;
    } else if (pool.nthreads == 0) {
      pthread_attr_destroy(&a);
      pthread_mutex_unlock(&pool.mu);
      return WEFT_EAGAIN;
    }
    pthread_attr_destroy(&a);
  }
  pool.nqueued++;
  pthread_mutex_unlock(&pool.mu);
  weft__wait(&j.w, NULL, submit, &j);
  if (result) *result = j.result;
  return 0;
}

int weft_blocking_limits(int max_threads, uint64_t idle_ns) {
  if (max_threads < 0 || max_threads > 4096) return WEFT_EINVAL;
  pthread_once(&pool_once, pool_init);
  pthread_mutex_lock(&pool.mu);
  if (max_threads) pool.max = max_threads;
  if (idle_ns) pool.idle_ns = idle_ns;
  pthread_cond_broadcast(&pool.cv);  /* idle threads re-read the limits */
  pthread_mutex_unlock(&pool.mu);
  return 0;
}

int weft_blocking_threads(void) {
  pthread_mutex_lock(&pool.mu);
  int n = pool.nthreads;
  pthread_mutex_unlock(&pool.mu);
  return n;
}
