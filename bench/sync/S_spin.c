/* S_spin.c - spin-waiting and atomic integers as processors are added: rows S1-S5 of
 * BENCHMARKS.md (FastThreads Fig 4.1-4.3, Presto Fig 1-2), every weft spinlock kind
 * beside pthread_spinlock_t and pthread_mutex_t, in one run.
 *
 *   S1  P threads, one per processor, increment a shared counter inside a critical
 *       section until it reaches --n (1,000,000): lock; if counter == n stop; counter++;
 *       unlock. Timed: from the start barrier (all P running) until the last finishes.
 *   S2  S1 with a compute phase of --s2-us microseconds (20, as Presto) of private
 *       work after each unlock, to --s2-n (20,000) increments (fewer than S1 so that a
 *       point takes under a second: ns per acquisition compares them).
 *   S3  S1 where the critical section also does W units of work on the data the lock
 *       protects (one unit: a read-modify-write of one of 64 shared longs, 8 cache
 *       lines), for W in --s3-work (0,10,100,1000), to --s3-n (100,000) increments.
 *       Reported: relative processor speed = time at P=1 / time at P (FastThreads Fig
 *       4.2: 1 if spinning did not slow the holder, below 1 if it does).
 *   S4  barrier by lock: each of P threads takes the lock once, increments the counter,
 *       releases, then spins until the counter reaches P x round; --s4-rounds (20,000)
 *       rounds. Reported: time per round / P (FastThreads Fig 4.3, "per processor").
 *   S5  an atomic integer incremented --s5-n (1,000,000) times in all by P threads (n/P
 *       each): weft_atomic_int_t (hardware), weft_locked_int_t (the header's Presto
 *       AtomicInt, default spinlock), and an integer locked by each kind.
 *
 * Threads: the weft spinlock kinds run as P weft threads on P VPs (weft_init with
 * nvps = P, pin = 1, thread i created with affinity i); the pthread baselines run as P
 * pthreads pinned to the first P CPUs. Both wait at a spinning start barrier; a weft
 * thread never switches once it runs (spinlock rule), so each ends up alone on a VP
 * (one stuck behind another in a VP's queue is stolen by an idle VP). --pthreads-all 1
 * also runs the weft kinds on pthreads. P beyond the core count (--oversub 4) is
 * reported separately as oversubscribed: FIFO locks there hand the lock to preempted
 * waiters and slow down by orders of magnitude, which is the point of running it.
 *
 * Each point: one warm-up run, then --reps (5) timed runs; median and min..max.
 *
 * usage: weft_bench_spin [--out DIR] [--reps R] [--procs 1,2] [--oversub 4]
 *          [--rows S1,S2,S3,S4,S5] [--kinds tas,ttas,...] [--pthreads-all 0|1]
 *          [--n N] [--s2-n N] [--s2-us US] [--s3-n N] [--s3-work 0,10,100,1000]
 *          [--s4-rounds R] [--s5-n N]
 * Prints a table per row and writes DIR/S1.json ... DIR/S5.json (DIR: bench-results). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "weft/atomic_int.h"
#include "weft/spinlock.h"
#include "weft/weft.h"

/* HOOK (blocking locks): when weft/mutex.h provides the blocking mutex and the hybrid
 * (spin-then-block) lock, S1-S5 include them. Enabled by defining WEFT_BENCH_MUTEX=1
 * (bench/sync/CMakeLists.txt does when the header compiles); see the KIND() lines. */
#if defined(WEFT_BENCH_MUTEX) && WEFT_BENCH_MUTEX
#include "weft/mutex.h"
#endif

#define MAX_REPS 50
#define MAX_P 64
#define MAX_WORK 16
#define MAX_RESULTS 4096

enum { S1, S2, S3, S4, S5, NROWS };
static const char *const row_name[NROWS] = {"S1", "S2", "S3", "S4", "S5"};
enum { ON_WEFT, ON_PTHREADS };
static const char *const impl_name[2] = {"weft", "pthread"};

static void die(const char *what, int rc) {
  fprintf(stderr, "%s failed: %d (%s)\n", what, rc, rc < 0 ? weft_strerror(rc) : strerror(rc));
  exit(2);
}

/* ---- the shared state a run contends on ----------------------------------------------- */

/* The lock (any kind, the array lock is 4.2 KB), then the protected data on lines of
 * their own. Reset to zero before every run, which is an unlocked lock for every weft
 * kind; pthread kinds are initialised by their init function. */
static struct {
  _Alignas(128) unsigned char lock[8192];
  _Alignas(128) long counter;        /* under the lock (S4: relaxed atomics) */
  _Alignas(128) long data[64];       /* S3's protected data, under the lock */
  _Alignas(128) weft_atomic_int_t ai;
  _Alignas(128) weft_locked_int_t li;
} sh;

/* Private compute: `iters` steps of a dependent multiply-add chain (about 1 ns each on
 * today's cores), calibrated to microseconds at start-up. */
static long iters_per_us = 1000;
static inline void compute(long iters) {
  unsigned long x = (unsigned long)iters;
  for (long i = 0; i < iters; i++) {
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    __asm__ __volatile__("" : "+r"(x));
  }
}
/* S3's critical-section work: `w` read-modify-writes of the protected data. Out of line
 * so that every kind runs the same instructions (inlined, the loop was vectorised or not
 * depending on the lock code around it: up to 4x apart at P=1). */
__attribute__((noinline)) static void cs_work(long w) {
  for (long i = 0; i < w; i++) sh.data[i & 63] += i;
}
static void calibrate(void) {
  iters_per_us = (long)bench_calibrate(compute);
  if (iters_per_us < 1) iters_per_us = 1;
}

/* ---- one run: P workers, a start barrier, a body ---------------------------------------- */

typedef struct worker {
  _Alignas(128) int id;
  struct run *run;
  double end_ns;
  long acquired;
} worker_t;

typedef struct run {
  void (*body)(worker_t *);
  int p;
  long n;        /* S1-S3: counter target; S5: total increments */
  long cs_work;  /* S3 */
  long compute;  /* S2: iterations */
  long rounds;   /* S4 */
  int arrived;   /* atomic */
  int go;        /* atomic */
  double t0;     /* written by the last to arrive, before go (release) */
  worker_t w[MAX_P];
} run_t;

static void *worker_main(void *arg) {
  worker_t *w = (worker_t *)arg;
  run_t *r = w->run;
  if (__atomic_add_fetch(&r->arrived, 1, __ATOMIC_ACQ_REL) == r->p) {
    r->t0 = bench_now_ns();
    __atomic_store_n(&r->go, 1, __ATOMIC_RELEASE); /* pairs with the acquire below */
  } else {
    while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE)) weft_spin_relax();
  }
  r->body(w);
  w->end_ns = bench_now_ns();
  return NULL;
}


/* The CPUs this process may use, read before weft pins its VPs (cfg.pin = 1 pins the
 * main thread too): the pthread baselines run pinned to the first P of them. */
static int cpu_of[MAX_P];

/* Runs r on r->p threads (weft threads, or pinned pthreads); returns seconds. */
static double run_once(run_t *r, int impl) {
  r->arrived = 0;
  r->go = 0;
  for (int i = 0; i < r->p; i++) r->w[i] = (worker_t){.id = i, .run = r};
  if (impl == ON_WEFT) {
    weft_thread_t *t[MAX_P];
    for (int i = 0; i < r->p; i++) {
      weft_attr_t a;
      weft_attr_init(&a);
      a.vproc = WEFT_VPROC(i);
      int rc = weft_create(&t[i], &a, worker_main, &r->w[i]);
      if (rc) die("weft_create", rc);
    }
    for (int i = 0; i < r->p; i++) weft_join(t[i], NULL);
  } else {
    pthread_t t[MAX_P];
    for (int i = 0; i < r->p; i++) {
      pthread_attr_t a;
      pthread_attr_init(&a);
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu_of[i], &set);
      pthread_attr_setaffinity_np(&a, sizeof set, &set);
      int rc = pthread_create(&t[i], &a, worker_main, &r->w[i]);
      if (rc) die("pthread_create", rc);
      pthread_attr_destroy(&a);
    }
    for (int i = 0; i < r->p; i++) pthread_join(t[i], NULL);
  }
  double end = 0;
  for (int i = 0; i < r->p; i++) end = r->w[i].end_ns > end ? r->w[i].end_ns : end;
  return (end - r->t0) * 1e-9;
}

/* ---- one set of bodies per lock kind ------------------------------------------------------
 * KIND(name, type, init, lock, unlock, node) generates the bodies with the lock calls
 * inlined (an indirect call per operation would be measured too: Presto §3.2's
 * lesson). `l` is the lock, `nd` a per-call node for the node-taking MCS form. */

#define LOCKP(T) ((T *)(void *)sh.lock)

#define KIND(K, T, INIT, LOCK, UNLOCK)                                                    \
  static void bk_##K##_init(void) { T *l = LOCKP(T); (void)l; INIT; }                          \
  /* S1, S2, S3: to the counter target; S3 work inside, S2 compute outside. */             \
  static void bk_##K##_count(worker_t *w) {                                                    \
    T *l = LOCKP(T);                                                                      \
    weft_spin_mcs_node_t nd;                                                              \
    (void)nd;                                                                             \
    const long n = w->run->n, cs = w->run->cs_work, c = w->run->compute;                  \
    long mine = 0;                                                                        \
    for (;;) {                                                                            \
      LOCK;                                                                               \
      long v = sh.counter;                                                                \
      if (v >= n) {                                                                       \
        UNLOCK;                                                                           \
        break;                                                                            \
      }                                                                                   \
      sh.counter = v + 1;                                                                 \
      if (cs) cs_work(cs);                                                                \
      UNLOCK;                                                                             \
      mine++;                                                                             \
      if (c) compute(c);                                                                  \
    }                                                                                     \
    w->acquired = mine;                                                                   \
  }                                                                                       \
  /* S4: a barrier by lock, `rounds` times. */                                            \
  static void bk_##K##_barrier(worker_t *w) {                                                  \
    T *l = LOCKP(T);                                                                      \
    weft_spin_mcs_node_t nd;                                                              \
    (void)nd;                                                                             \
    const long p = w->run->p, rounds = w->run->rounds;                                    \
    for (long r = 1; r <= rounds; r++) {                                                  \
      LOCK;                                                                               \
      __atomic_store_n(&sh.counter, __atomic_load_n(&sh.counter, __ATOMIC_RELAXED) + 1,   \
                       __ATOMIC_RELAXED);                                                 \
      UNLOCK;                                                                             \
      while (__atomic_load_n(&sh.counter, __ATOMIC_RELAXED) < r * p) weft_spin_relax();   \
    }                                                                                     \
  }                                                                                       \
  /* S5: an integer under this lock, n/P increments each. */                              \
  static void bk_##K##_int(worker_t *w) {                                                      \
    T *l = LOCKP(T);                                                                      \
    weft_spin_mcs_node_t nd;                                                              \
    (void)nd;                                                                             \
    const long n = w->run->n / w->run->p + (w->id < w->run->n % w->run->p);               \
    for (long i = 0; i < n; i++) {                                                        \
      LOCK;                                                                               \
      sh.counter++;                                                                       \
      UNLOCK;                                                                             \
    }                                                                                     \
  }

KIND(tas, weft_spin_tas_t, (void)0, weft_spin_tas_lock(l), weft_spin_tas_unlock(l))
KIND(ttas, weft_spin_ttas_t, (void)0, weft_spin_ttas_lock(l), weft_spin_ttas_unlock(l))
KIND(backoff, weft_spin_backoff_t, (void)0, weft_spin_backoff_lock(l), weft_spin_backoff_unlock(l))
KIND(ticket, weft_spin_ticket_t, (void)0, weft_spin_ticket_lock(l), weft_spin_ticket_unlock(l))
KIND(array, weft_spin_array_t, (void)0, weft_spin_array_lock(l), weft_spin_array_unlock(l))
KIND(mcs, weft_spin_mcs_t, (void)0, weft_spin_mcs_lock(l), weft_spin_mcs_unlock(l))
KIND(mcs_node, weft_spin_mcs_t, (void)0, weft_spin_mcs_lock_node(l, &nd),
     weft_spin_mcs_unlock_node(l, &nd))
KIND(pthread_spin, pthread_spinlock_t, pthread_spin_init(l, PTHREAD_PROCESS_PRIVATE),
     pthread_spin_lock(l), pthread_spin_unlock(l))
KIND(pthread_mutex, pthread_mutex_t, pthread_mutex_init(l, NULL), pthread_mutex_lock(l),
     pthread_mutex_unlock(l))
#if defined(WEFT_BENCH_MUTEX) && WEFT_BENCH_MUTEX
/* HOOK: the blocking mutex and the hybrid lock of weft/mutex.h. */
KIND(weft_mutex, weft_mutex_t, weft_mutex_init(l), weft_mutex_lock(l), weft_mutex_unlock(l))
KIND(weft_hybrid, weft_hybrid_t, weft_hybrid_init(l), weft_hybrid_lock(l), weft_hybrid_unlock(l))
#endif

/* S5's hardware atomic and the header's lock-protected AtomicInt. */
static void hw_int(worker_t *w) {
  const long n = w->run->n / w->run->p + (w->id < w->run->n % w->run->p);
  for (long i = 0; i < n; i++) weft_atomic_int_inc(&sh.ai);
}
static void locked_int(worker_t *w) {
  const long n = w->run->n / w->run->p + (w->id < w->run->n % w->run->p);
  for (long i = 0; i < n; i++) weft_locked_int_inc(&sh.li);
}
static void no_init(void) {}

typedef struct kind {
  const char *name;
  int impl;  /* where it runs by default */
  void (*init)(void);
  void (*count)(worker_t *), (*barrier)(worker_t *), (*intbody)(worker_t *);
  int s5_only;
} kind_t;

#define K_ENTRY(K, impl) {#K, impl, bk_##K##_init, bk_##K##_count, bk_##K##_barrier, bk_##K##_int, 0}
static const kind_t kinds[] = {
    K_ENTRY(tas, ON_WEFT),
    K_ENTRY(ttas, ON_WEFT),
    K_ENTRY(backoff, ON_WEFT),
    K_ENTRY(ticket, ON_WEFT),
    K_ENTRY(array, ON_WEFT),
    K_ENTRY(mcs, ON_WEFT),
    K_ENTRY(mcs_node, ON_WEFT),
#if defined(WEFT_BENCH_MUTEX) && WEFT_BENCH_MUTEX
    K_ENTRY(weft_mutex, ON_WEFT),
    K_ENTRY(weft_hybrid, ON_WEFT),
#endif
    K_ENTRY(pthread_spin, ON_PTHREADS),
    K_ENTRY(pthread_mutex, ON_PTHREADS),
    {"hardware_atomic", ON_WEFT, no_init, NULL, NULL, hw_int, 1},
    {"weft_locked_int", ON_WEFT, no_init, NULL, NULL, locked_int, 1},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* ---- results ------------------------------------------------------------------------------ */

typedef struct result {
  int row, kind, impl, p, oversub;
  long param; /* S2: compute us; S3: work units; else 0 */
  long ops;   /* S1-S3: acquisitions; S4: rounds; S5: increments */
  int reps;
  double s[MAX_REPS];
  bench_summary_t sum;
  double share_min, share_max; /* S1-S3: fewest and most acquisitions of one thread / ops */
} result_t;

static result_t results[MAX_RESULTS];
static int nresults;
static int reps = 5;

static const result_t *find(int row, int kind, int impl, int p, long param) {
  for (int i = 0; i < nresults; i++) {
    const result_t *x = &results[i];
    if (x->row == row && x->kind == kind && x->impl == impl && x->p == p && x->param == param)
      return x;
  }
  return NULL;
}

/* Per-op figure: ns per acquisition (S1-S3, S5), or per round per processor (S4, in ns). */
static double per_op_ns(const result_t *x) {
  double ns = x->sum.median * 1e9 / (double)x->ops;
  return x->row == S4 ? ns / x->p : ns;
}

/* S3: time at P=1 over time at P, same kind, threads and W. */
static double relative_speed(const result_t *x) {
  const result_t *one = find(x->row, x->kind, x->impl, 1, x->param);
  return one ? one->sum.median / x->sum.median : 0;
}

static void measure(int row, int k, int impl, int p, int over, long param, run_t *r, long ops) {
  if (nresults == MAX_RESULTS) return;
  result_t *x = &results[nresults];
  *x = (result_t){.row = row, .kind = k, .impl = impl, .p = p, .oversub = over, .param = param,
                  .ops = ops, .reps = reps, .share_min = -1, .share_max = -1};
  for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
    memset(&sh, 0, sizeof sh);
    kinds[k].init();
    double sec = run_once(r, impl);
    if (rep < 0) continue;
    x->s[rep] = sec;
    long expect = row == S4 ? r->rounds * p : ops;
    long got = kinds[k].s5_only ? (row == S5 && kinds[k].intbody == hw_int
                                       ? weft_atomic_int_load(&sh.ai)
                                       : weft_locked_int_load(&sh.li))
                                : sh.counter;
    if (got != expect) {
      fprintf(stderr, "%s %s P=%d: counter %ld, expected %ld: the lock is broken\n",
              row_name[row], kinds[k].name, p, got, expect);
      exit(3);
    }
    if (row <= S3 && rep == reps - 1) {
      long lo = ops, hi = 0;
      for (int i = 0; i < p; i++) {
        lo = r->w[i].acquired < lo ? r->w[i].acquired : lo;
        hi = r->w[i].acquired > hi ? r->w[i].acquired : hi;
      }
      x->share_min = (double)lo / (double)ops;
      x->share_max = (double)hi / (double)ops;
    }
  }
  x->sum = bench_summarize(x->s, reps);
  nresults++;
}

/* ---- driver ------------------------------------------------------------------------------- */


static struct {
  const char *rows, *kinds;
  int pthreads_all;
  long n, s2_n, s2_us, s3_n, s4_rounds, s5_n;
  long s3_work[MAX_WORK];
  int ns3;
} opt = {"S1,S2,S3,S4,S5", NULL, 0, 1000000, 20000, 20, 100000, 20000, 1000000,
         {0, 10, 100, 1000}, 4};

/* Every selected row and kind that runs on `impl`, at P. */
static void run_point(int impl, int p, int over) {
  run_t *r = calloc(1, sizeof *r);
  if (!r) die("calloc", ENOMEM);
  r->p = p;
  for (int k = 0; k < NKINDS; k++) {
    const kind_t *kd = &kinds[k];
    if (opt.kinds && !bench_list_has(opt.kinds, kd->name)) continue;
    if (kd->impl != impl && !(opt.pthreads_all && impl == ON_PTHREADS)) continue;
    for (int row = 0; row < NROWS; row++) {
      if (!bench_list_has(opt.rows, row_name[row])) continue;
      if (kd->s5_only != (row == S5) && !(row == S5 && kd->intbody)) continue;
      r->cs_work = r->compute = r->rounds = 0;
      switch (row) {
        case S1:
          r->n = opt.n, r->body = kd->count;
          measure(row, k, impl, p, over, 0, r, r->n);
          break;
        case S2:
          r->n = opt.s2_n, r->compute = opt.s2_us * iters_per_us, r->body = kd->count;
          measure(row, k, impl, p, over, opt.s2_us, r, r->n);
          break;
        case S3:
          for (int i = 0; i < opt.ns3; i++) {
            r->n = opt.s3_n, r->cs_work = opt.s3_work[i], r->body = kd->count;
            measure(row, k, impl, p, over, opt.s3_work[i], r, r->n);
          }
          break;
        case S4:
          r->rounds = opt.s4_rounds, r->body = kd->barrier;
          measure(row, k, impl, p, over, 0, r, r->rounds);
          break;
        case S5:
          r->n = opt.s5_n, r->body = kd->intbody;
          measure(row, k, impl, p, over, 0, r, r->n);
          break;
      }
    }
  }
  free(r);
}

static const char *const row_title[NROWS] = {
    "S1: counter to N under the lock (FastThreads Fig 4.1); ns per acquisition",
    "S2: S1 + compute phase outside the lock (Presto Fig 1); ns per acquisition",
    "S3: critical section of W units of shared work; relative speed = T(1)/T(P) (FastThreads Fig 4.2)",
    "S4: barrier by lock (FastThreads Fig 4.3); ns per round per processor",
    "S5: atomic integer, N increments by P threads (Presto Fig 2); ns per increment"};

static void print_tables(const bench_machine_t *m) {
  printf("\nmachine: %s, %d cores, Linux %s; compute calibration %ld iterations/us\n", m->model,
         m->cores, m->kernel, iters_per_us);
  for (int row = 0; row < NROWS; row++) {
    int any = 0;
    for (int i = 0; i < nresults; i++) any |= results[i].row == row;
    if (!any) continue;
    printf("\n%s\n", row_title[row]);
    printf("%-16s %-8s %3s %5s %6s  %10s  %-21s  %9s  %s\n", "kind", "threads", "P", "over",
           row == S2 ? "us" : row == S3 ? "W" : "", "median s", "[min .. max] s", "ns/op",
           row == S3 ? "rel.speed" : row <= S2 ? "share min..max" : "");
    for (int i = 0; i < nresults; i++) {
      const result_t *x = &results[i];
      if (x->row != row) continue;
      printf("%-16s %-8s %3d %5s %6ld  %10.5f  [%8.5f .. %8.5f]  %9.1f", kinds[x->kind].name,
             impl_name[x->impl], x->p, x->oversub ? "yes" : "", x->param, x->sum.median,
             x->sum.min, x->sum.max, per_op_ns(x));
      if (row == S3) printf("  %6.3f", relative_speed(x));
      else if (row <= S2) printf("  %.2f..%.2f", x->share_min, x->share_max);
      printf("\n");
    }
  }
}

static int write_json(const char *dir, const bench_machine_t *m) {
  int rc = 0;
  for (int row = 0; row < NROWS; row++) {
    int any = 0;
    for (int i = 0; i < nresults; i++) any |= results[i].row == row;
    if (!any) continue;
    char file[32];
    snprintf(file, sizeof file, "%s.json", row_name[row]);
    bench_json_t f;
    if (bench_json_start(&f, dir, file, m) != 0) {
      rc = -1;
      continue;
    }
    bench_json_str(&f, "row", row_name[row]);
    bench_json_str(&f, "title", row_title[row]);
    bench_json_obj(&f, "config");
    bench_json_int(&f, "reps", reps);
    bench_json_int(&f, "warmup_runs", 1);
    bench_json_int(&f, "n", opt.n);
    bench_json_int(&f, "s2_n", opt.s2_n);
    bench_json_int(&f, "s2_compute_us", opt.s2_us);
    bench_json_int(&f, "s3_n", opt.s3_n);
    bench_json_int(&f, "s4_rounds", opt.s4_rounds);
    bench_json_int(&f, "s5_n", opt.s5_n);
    bench_json_int(&f, "compute_iters_per_us", iters_per_us);
    bench_json_int(&f, "spin_os_yield_spins", WEFT_SPIN_OS_YIELD_SPINS);
    bench_json_int(&f, "array_slots", WEFT_SPIN_ARRAY_SLOTS);
    bench_json_int(&f, "backoff_min", WEFT_SPIN_BACKOFF_MIN);
    bench_json_int(&f, "backoff_max", WEFT_SPIN_BACKOFF_MAX);
    bench_json_str(&f, "weft", "P weft threads on P VPs (nvps=P, pin=1, affinity i)");
    bench_json_str(&f, "pthread", "P pthreads pinned to the first P CPUs");
    bench_json_end(&f);
    bench_json_arr(&f, "results");
    for (int i = 0; i < nresults; i++) {
      const result_t *x = &results[i];
      if (x->row != row) continue;
      bench_json_record(&f, "kind", kinds[x->kind].name, x->p, x->oversub);
      bench_json_str(&f, "threads", impl_name[x->impl]);
      bench_json_int(&f, "param", x->param);
      bench_json_int(&f, "ops", x->ops);
      bench_json_num(&f, "ns_per_op", per_op_ns(x));
      if (row == S3) bench_json_num(&f, "relative_speed", relative_speed(x));
      if (row <= S3) {
        bench_json_num(&f, "share_min", x->share_min);
        bench_json_num(&f, "share_max", x->share_max);
      }
      bench_json_times(&f, x->sum, x->s, x->reps);
      bench_json_end(&f);
    }
    if (bench_json_finish(&f) != 0) rc = -1;
  }
  return rc;
}

int main(int argc, char **argv) {
  bench_machine_t m;
  bench_machine_read(&m);
  for (int i = 0; i < MAX_P; i++) cpu_of[i] = bench_cpu_nth(i);
  const char *out = "bench-results";
  long procs[16], oversub[16];
  int nprocs = 0, nover = 0;
  for (int p = 1; p <= m.cores && nprocs < 16; p++) procs[nprocs++] = p;
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "S1.json ... S5.json"),
      BENCH_OPT_REPS(reps),
      {"--procs", BENCH_LONGS, procs, &nprocs, 16, "P values (1..cores)"},
      {"--oversub", BENCH_LONGS, oversub, &nover, 16, "oversubscribed P values (none)"},
      {"--rows", BENCH_STR, &opt.rows, NULL, 0, "S1,S2,S3,S4,S5"},
      {"--kinds", BENCH_STR, &opt.kinds, NULL, 0, "lock kinds"},
      {"--pthreads-all", BENCH_INT, &opt.pthreads_all, NULL, 0, "1: the weft kinds on pthreads too"},
      BENCH_OPT_N(opt.n, "S1 acquisitions (1000000)"),
      {"--s2-n", BENCH_LONG, &opt.s2_n, NULL, 0, "S2 acquisitions (20000)"},
      {"--s2-us", BENCH_LONG, &opt.s2_us, NULL, 0, "S2 compute per acquisition, us"},
      {"--s3-n", BENCH_LONG, &opt.s3_n, NULL, 0, "S3 acquisitions (100000)"},
      {"--s3-work", BENCH_LONGS, opt.s3_work, &opt.ns3, MAX_WORK, "S3 critical-section work (0,10,100,1000)"},
      {"--s4-rounds", BENCH_LONG, &opt.s4_rounds, NULL, 0, "S4 barrier rounds (20000)"},
      {"--s5-n", BENCH_LONG, &opt.s5_n, NULL, 0, "S5 increments (1000000)"},
  };
  bench_args(argc, argv, opts, 14, "S1-S5: spin-waiting and atomic integers");
  if (reps < 1 || reps > MAX_REPS) bench_die(argv[0], "--reps out of range");
  calibrate();
  printf("spin sweep: machine %s, %d cores; rows %s; 1 warm-up + %d runs per point\n", m.model,
         m.cores, opt.rows, reps);
  for (int i = 0; i < nprocs + nover; i++) {
    int over = i >= nprocs;
    int p = (int)(over ? oversub[i - nprocs] : procs[i]);
    if (p < 1 || p > MAX_P) continue;
    printf("P=%d%s ...\n", p, over ? " (oversubscribed)" : "");
    fflush(stdout);
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = p;
    cfg.pin = 1;
    int rc = weft_init(&cfg);
    if (rc) die("weft_init", rc);
    run_point(ON_WEFT, p, over);
    rc = weft_shutdown();
    if (rc) die("weft_shutdown", rc);
    run_point(ON_PTHREADS, p, over);
  }
  print_tables(&m);
  return write_json(out, &m) == 0 ? 0 : 1;
}
