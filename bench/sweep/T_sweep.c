/* T_sweep.c - thread management throughput as processors are added: T1, T4, T5
 * (BENCHMARKS.md; FastThreads Fig 3.1/3.2, Presto Fig 3), weft beside POSIX threads
 * and Boost.Fiber in one run.
 *
 *   T1  create, start and finish N null threads: each of P workers starts one chain in
 *       which every thread creates its successor (detached) and finishes (FastThreads Table 3.2).
 *       Timed: from creating the P chain heads until the last thread of the last chain
 *       has finished and woken the main thread.
 *   T4  create and delete N threads that are never started, shared by P workers. No
 *       library here can delete a thread that has not run, so each worker creates a
 *       batch of 1000 unstarted threads and then joins them (each runs an empty body
 *       and is reclaimed). Timed: from creating the P workers until all are joined.
 *       Boost.Fiber the same way; pthreads cannot hold a thread unstarted: not run.
 *   T5  fork-join: the main thread creates N threads in batches of 1000 and joins each
 *       batch. Timed: all batches.
 *   T2  T1 where every thread first does user work drawn from a uniform distribution on
 *       [0, 2W) (FastThreads Fig 3.3: W = 300 us on the Symmetry). W = --t2-us, default 1 us:
 *       the paper's 300 us scaled by 1/300 (its Table 3.1 lock pair took 5.6 us, a
 *       procedure call 3.6 us; today's take 5-10 ns and ~1 ns, so 1/300 is at the
 *       conservative end: user work stays ~10x a null thread here, as it was there).
 *       The work is a chain of dependent multiply-adds calibrated at start; each thread's
 *       amount comes from a hash of its place in the chain, so every run does the same
 *       total work. --t2-n threads (200,000); weft and pthreads (Boost.Fiber: not run).
 *   T3  latency per thread as a function of the number of runnable threads (FastThreads Fig 3.4):
 *       T1's chains, but K of them on P workers (K = the parallelism: threads runnable at
 *       once), K over --t3-k (1,2,4,...,1024), P over the --procs values (not the
 *       oversubscribed ones). --t3-n threads (200,000) in all, split over the K chains;
 *       the heads are spread round-robin over the P VPs. Reported: ns per thread
 *       (elapsed / threads) and the paper's latency per thread, elapsed x min(K, P) /
 *       threads: with K < P only K processors have work, and each chain steps once per
 *       latency; with K >= P every processor is busy and a thread costs P x elapsed /
 *       threads of processor time (FastThreads: "create + finish + start" once there is a
 *       backlog). weft only (a pthreads chain per K would measure the kernel's scheduler).
 *
 * Threads: --n (1,000,000) for weft and for Boost.Fiber T1; --slow-n (50,000) where a
 * thread costs microseconds: every pthreads point, and Boost.Fiber T4/T5 (1000 live
 * fibers each get a freshly allocated default stack). ns per thread compares them.
 *
 * P is weft's nvps, Boost.Fiber's number of threads (algo::work_stealing, default
 * suspend=false, one child process per P because work_stealing fixes its thread count
 * once per process), and for pthreads the number of chains (T1) with every thread
 * confined to min(P, cores) CPUs. Each point: one warm-up run, then --reps timed runs;
 * median and min..max. P beyond the core count is reported separately as oversubscribed.
 *
 * usage: weft_sweep [--out DIR] [--reps R] [--n N] [--slow-n N] [--procs 1,2]
 *                   [--oversub 4] [--libs weft,pthreads,boost_fiber] [--tests T1,T2,T4,T5]
 *                   [--t2-us 1] [--t2-n 200000] [--t2-units-per-us U (else calibrated)]
 *                   [--t3-n 200000] [--t3-k 1,2,4,...,1024]
 * Prints a table and writes DIR/sweep.json (DIR defaults to ./bench-results). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "weft/debug.h"
#include "weft/weft.h"

#define MAX_REPS 50
#define MAX_POINTS 128
#define MAX_K 32
#define BATCH 1000

enum { T1, T4, T5, T2, T3, NTESTS }; /* T2, T3 last: T_sweep_fiber.cc runs indices 0..2 only */
static const char *const test_name[NTESTS] = {"T1", "T4", "T5", "T2", "T3"};
enum { LIB_WEFT, LIB_PTHREADS, LIB_BOOST, NLIBS };
static const char *const lib_name[NLIBS] = {"weft", "pthreads", "boost_fiber"};

#ifdef WEFT_BENCH_BOOST
/* T_sweep_fiber.cc: runs the selected tests on p Boost.Fiber threads; out[t * reps + r]. */
int weft_bench_fiber_sweep(int p, const long *n, int reps, const int *run_test, double *out);
#endif

/* Share i of n split over p workers. */
static long share(long n, int p, int i) { return n / p + (i < n % p); }

/* ---- T2's user work ---------------------------------------------------------------- */

static double t2_us = 1.0;   /* mean user work per thread (us) */
static int freelist_local;   /* weft_config_t.freelist_local; 0: the default */
static int spin_us;          /* weft_config_t.spin_us; 0: the default */
static int tcb_local;        /* weft_config_t.tcb_local; 0: the default */
static double units_per_us;  /* calibrated */

/* One unit: 16 dependent multiply-adds. */
static double burn(long units) {
  volatile double sink;
  double x = 1.0;
  for (long i = 0; i < units; i++)
    for (int k = 0; k < 16; k++) x = x * 1.0000001 + 1e-9;
  sink = x;
  return sink;
}
static void burn_units(long units) { burn(units); }


/* The user work of the thread at place `left` of its chain: uniform on [0, 2W). */
static void t2_work(long left) {
  uint64_t z = (uint64_t)left * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  double u = (double)(z >> 11) * (1.0 / 9007199254740992.0);
  burn((long)(u * 2 * t2_us * units_per_us + 0.5));
}

/* ---- weft ------------------------------------------------------------------------- */

/* The main thread waits for the work to end by blocking itself; whichever of its
 * release function and the finishing thread comes second unblocks it (exactly once). */
enum { W_IDLE, W_WAITING, W_DONE };
static _Atomic int waiter_state;
static weft_thread_t *waiter;

static void waiter_release(void *arg) {
  (void)arg;
  if (atomic_exchange(&waiter_state, W_WAITING) == W_DONE) weft_thread_unblock(waiter);
}
static void waiter_signal(void) {
  if (atomic_exchange(&waiter_state, W_DONE) == W_WAITING) weft_thread_unblock(waiter);
}

static weft_attr_t detached;
static _Atomic long chains_left;

static void *empty_body(void *arg) { return arg; }

static void *t1_cycle(void *arg) {
  long left = (long)(intptr_t)arg;
  if (left > 1)
    bench_check(weft_create(NULL, &detached, t1_cycle, (void *)(intptr_t)(left - 1)), "weft_create");
  else if (atomic_fetch_sub(&chains_left, 1) == 1)
    waiter_signal();
  return NULL;
}

static void *t2_cycle(void *arg) {
  long left = (long)(intptr_t)arg;
  t2_work(left);
  if (left > 1)
    bench_check(weft_create(NULL, &detached, t2_cycle, (void *)(intptr_t)(left - 1)), "weft_create");
  else if (atomic_fetch_sub(&chains_left, 1) == 1)
    waiter_signal();
  return NULL;
}

/* k chains of n threads in all on p VPs; chain i's head on VP i mod p (T1, T2: k = p). */
static double weft_t1(int p, int k, long n, void *(*cycle)(void *)) {
  atomic_store(&waiter_state, W_IDLE);
  atomic_store(&chains_left, k);
  waiter = weft_self();
  double t0 = bench_now_ns();
  for (int i = 0; i < k; i++) {
    weft_attr_t a = detached;
    a.vproc = WEFT_VPROC(i % p);
    bench_check(weft_create(NULL, &a, cycle, (void *)(intptr_t)share(n, k, i)), "weft_create");
  }
  weft_thread_block(waiter_release, NULL);
  return bench_now_ns() - t0;
}

static void *t4_worker(void *arg) {
  long n = (long)(intptr_t)arg;
  weft_thread_t *b[BATCH];
  for (long done = 0; done < n;) {
    int k = n - done < BATCH ? (int)(n - done) : BATCH;
    for (int j = 0; j < k; j++) bench_check(weft_create(&b[j], NULL, empty_body, NULL), "weft_create");
    for (int j = 0; j < k; j++) bench_check(weft_join(b[j], NULL), "weft_join");
    done += k;
  }
  return NULL;
}

static double weft_t4(int p, long n) {
  weft_thread_t *w[WEFT_MAX_VPS];
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) {
    weft_attr_t a;
    weft_attr_init(&a);
    a.vproc = WEFT_VPROC(i);
    bench_check(weft_create(&w[i], &a, t4_worker, (void *)(intptr_t)share(n, p, i)), "weft_create");
  }
  for (int i = 0; i < p; i++) bench_check(weft_join(w[i], NULL), "weft_join");
  return bench_now_ns() - t0;
}

static double weft_t5(long n) {
  static weft_thread_t *b[BATCH];
  double t0 = bench_now_ns();
  for (long done = 0; done < n;) {
    int k = n - done < BATCH ? (int)(n - done) : BATCH;
    for (int j = 0; j < k; j++) bench_check(weft_create(&b[j], NULL, empty_body, NULL), "weft_create");
    for (int j = 0; j < k; j++) bench_check(weft_join(b[j], NULL), "weft_join");
    done += k;
  }
  return bench_now_ns() - t0;
}

/* ---- pthreads --------------------------------------------------------------------- */

static pthread_attr_t p_detached;
static sem_t p_done;

/* pthread_create, retrying while the kernel is still reaping finished threads. */
static void p_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
  int rc;
  while ((rc = pthread_create(t, a, fn, arg)) == EAGAIN) sched_yield();
  if (rc != 0) {
    fprintf(stderr, "pthread_create failed: %s\n", strerror(rc));
    exit(2);
  }
}

static int p_work; /* nonzero: T2 (user work in each thread) */

static void *p_cycle(void *arg) {
  long left = (long)(intptr_t)arg;
  pthread_t t;
  if (p_work) t2_work(left);
  if (left > 1)
    p_create(&t, &p_detached, p_cycle, (void *)(intptr_t)(left - 1));
  else if (atomic_fetch_sub(&chains_left, 1) == 1)
    sem_post(&p_done);
  return NULL;
}


/* Every thread of the chains inherits the head's CPU set. */
static double pthread_t1(int p, long n) {
  cpu_set_t set = bench_cpus_first(p);
  pthread_attr_t head;
  pthread_attr_init(&head);
  pthread_attr_setdetachstate(&head, PTHREAD_CREATE_DETACHED);
  pthread_attr_setaffinity_np(&head, sizeof set, &set);
  atomic_store(&chains_left, p);
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) {
    pthread_t t;
    p_create(&t, &head, p_cycle, (void *)(intptr_t)share(n, p, i));
  }
  sem_wait(&p_done);
  double ns = bench_now_ns() - t0;
  pthread_attr_destroy(&head);
  return ns;
}

/* The main thread runs on, and its children inherit, min(p, cores) CPUs. */
static double pthread_t5(int p, long n) {
  static pthread_t b[BATCH];
  cpu_set_t saved, set = bench_cpus_first(p);
  sched_getaffinity(0, sizeof saved, &saved);
  sched_setaffinity(0, sizeof set, &set);
  double t0 = bench_now_ns();
  for (long done = 0; done < n;) {
    int k = n - done < BATCH ? (int)(n - done) : BATCH;
    for (int j = 0; j < k; j++) p_create(&b[j], NULL, empty_body, NULL);
    for (int j = 0; j < k; j++) pthread_join(b[j], NULL);
    done += k;
  }
  double ns = bench_now_ns() - t0;
  sched_setaffinity(0, sizeof saved, &saved);
  return ns;
}

/* ---- driver ----------------------------------------------------------------------- */

typedef struct point {
  int test, lib, p, oversub;
  int k; /* T3: the number of chains (runnable threads); else 0 */
  long threads;
  int reps;
  double s[MAX_REPS]; /* seconds, sorted */
  bench_summary_t sum;
  double steals, sleeps; /* weft only: runtime counters per timed run (else -1) */
  double cpu_per_wall;   /* weft only: median over runs of process CPU time / elapsed (else -1) */
} point_t;

static point_t points[MAX_POINTS];
static int npoints;
static int reps = 5;

static void record(int test, int lib, int p, int oversub, long threads, const double *sec) {
  if (npoints == MAX_POINTS) return;
  point_t *pt = &points[npoints++];
  *pt = (point_t){.test = test, .lib = lib, .p = p, .oversub = oversub, .threads = threads,
                  .reps = reps, .steals = -1, .sleeps = -1, .cpu_per_wall = -1};
  memcpy(pt->s, sec, (size_t)reps * sizeof *sec);
  pt->sum = bench_summarize(pt->s, reps);
}

static const point_t *find(int test, int lib, int p, int k) {
  for (int i = 0; i < npoints; i++)
    if (points[i].test == test && points[i].lib == lib && points[i].p == p && points[i].k == k)
      return &points[i];
  return NULL;
}

/* Speedup: this library's median at P=1 over its median at P (same thread count; T3: same K). */
static double speedup(const point_t *pt) {
  const point_t *one = find(pt->test, pt->lib, 1, pt->k);
  return one ? one->sum.median / pt->sum.median : 0;
}

static int run_test[NTESTS];
static long t2_n = 200000;
static long t3_n = 200000;
static int t3_k[MAX_K] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, t3_nk = 11;

/* CPU time (user + system) of the whole process, in seconds: over a run's elapsed time, the
 * processors the run actually had (other jobs on the machine take the rest; idle VPs that
 * poll count as busy). */
static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static void run_weft(int p, int oversub, long n) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = p;
  if (freelist_local) cfg.freelist_local = freelist_local;
  if (spin_us) cfg.spin_us = spin_us;
  if (tcb_local) cfg.tcb_local = tcb_local;
  bench_check(weft_init(&cfg), "weft_init");
  double sec[MAX_REPS];
  for (int t = 0; t < NTESTS; t++) {
    if (!run_test[t] || t == T3) continue;
    weft_debug_stats_t s0, s1;
    double cpu[MAX_REPS];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
      if (r == 0) weft_debug_stats(&s0);
      double c0 = cpu_seconds();
      double ns = t == T1   ? weft_t1(p, p, n, t1_cycle)
                  : t == T2 ? weft_t1(p, p, t2_n, t2_cycle)
                  : t == T4 ? weft_t4(p, n)
                            : weft_t5(n);
      if (r >= 0) {
        sec[r] = ns * 1e-9;
        cpu[r] = (cpu_seconds() - c0) / sec[r];
      }
    }
    weft_debug_stats(&s1);
    record(t, LIB_WEFT, p, oversub, t == T2 ? t2_n : n, sec);
    points[npoints - 1].steals = (double)(s1.steals - s0.steals) / reps;
    points[npoints - 1].sleeps = (double)(s1.sleeps - s0.sleeps) / reps;
    points[npoints - 1].cpu_per_wall = bench_summarize(cpu, reps).median;
  }
  for (int j = 0; run_test[T3] && !oversub && j < t3_nk; j++) {
    int k = t3_k[j];
    if (k < 1 || k > t3_n) continue;
    weft_debug_stats_t s0, s1;
    double cpu[MAX_REPS];
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
      if (r == 0) weft_debug_stats(&s0);
      double c0 = cpu_seconds();
      double ns = weft_t1(p, k, t3_n, t1_cycle);
      if (r >= 0) {
        sec[r] = ns * 1e-9;
        cpu[r] = (cpu_seconds() - c0) / sec[r];
      }
    }
    weft_debug_stats(&s1);
    record(T3, LIB_WEFT, p, oversub, t3_n, sec);
    point_t *pt = &points[npoints - 1];
    pt->k = k;
    pt->steals = (double)(s1.steals - s0.steals) / reps;
    pt->sleeps = (double)(s1.sleeps - s0.sleeps) / reps;
    pt->cpu_per_wall = bench_summarize(cpu, reps).median;
  }
  bench_check(weft_shutdown(), "weft_shutdown");
}

static void run_pthreads(int p, int oversub, long n) {
  double sec[MAX_REPS];
  for (int t = 0; t < NTESTS; t++) {
    if (!run_test[t] || t == T4 || t == T3) continue;
    long tn = t == T2 && t2_n < n ? t2_n : n;
    p_work = t == T2;
    for (int r = -1; r < reps; r++) {
      double ns = t == T5 ? pthread_t5(p, tn) : pthread_t1(p, tn);
      if (r >= 0) sec[r] = ns * 1e-9;
    }
    p_work = 0;
    record(t, LIB_PTHREADS, p, oversub, tn, sec);
  }
}

#ifdef WEFT_BENCH_BOOST
/* One child process per P (work_stealing's thread count is fixed per process). */
static void run_boost(int p, int oversub, long n, long slow_n) {
  const long tn[NTESTS] = {n, slow_n, slow_n, 0, 0};
  double out[NTESTS * MAX_REPS];
  int fd[2];
  fflush(NULL);
  if (pipe(fd) != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    int rc = weft_bench_fiber_sweep(p, tn, reps, run_test, out);
    ssize_t w = write(fd[1], out, sizeof out);
    _exit(rc != 0 || w != (ssize_t)sizeof out);
  }
  close(fd[1]);
  size_t got = 0;
  for (ssize_t r; got < sizeof out && (r = read(fd[0], (char *)out + got, sizeof out - got)) > 0;)
    got += (size_t)r;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "boost_fiber sweep at P=%d failed (status %d): no result\n", p, status);
    return;
  }
  for (int t = 0; t < NTESTS; t++)
    if (run_test[t] && t != T2 && t != T3) record(t, LIB_BOOST, p, oversub, tn[t], out + t * reps);
}
#endif

static void print_table(const bench_machine_t *m) {
  printf("\nmachine: %s, %d cores, Linux %s\n", m->model, m->cores, m->kernel);
  for (int over = 0; over <= 1; over++) {
    int any = 0;
    for (int i = 0; i < npoints; i++) any |= points[i].oversub == over;
    if (!any) continue;
    printf("\n%s\n", over ? "OVERSUBSCRIBED (P > cores; speedup vs the same library at P=1)"
                          : "P = 1 .. cores (speedup vs the same library at P=1)");
    printf("%-4s %3s  %-12s %9s  %10s  %-23s %9s  %7s\n", "test", "P", "library", "threads",
           "median s", "[min .. max] s", "ns/thread", "speedup");
    for (int t = 0; t < NTESTS; t++)
      for (int i = 0; i < npoints; i++) {
        const point_t *pt = &points[i];
        if (pt->test != t || pt->oversub != over || t == T3) continue;
        printf("%-4s %3d  %-12s %9ld  %10.4f  [%8.4f .. %8.4f]  %9.1f  %6.2fx\n", test_name[t],
               pt->p, lib_name[pt->lib], pt->threads, pt->sum.median, pt->sum.min, pt->sum.max,
               pt->sum.median * 1e9 / (double)pt->threads, speedup(pt));
      }
  }
  int any_t3 = 0;
  for (int i = 0; i < npoints; i++) any_t3 |= points[i].test == T3;
  if (any_t3) {
    printf("\nT3: latency per thread vs runnable threads K (chains) on P VPs, weft\n");
    printf("%3s %5s %9s  %10s  %-23s %9s  %12s\n", "P", "K", "threads", "median s",
           "[min .. max] s", "ns/thread", "latency ns");
    for (int i = 0; i < npoints; i++) {
      const point_t *pt = &points[i];
      if (pt->test != T3) continue;
      int busy = pt->k < pt->p ? pt->k : pt->p;
      printf("%3d %5d %9ld  %10.4f  [%8.4f .. %8.4f]  %9.1f  %12.1f\n", pt->p, pt->k,
             pt->threads, pt->sum.median, pt->sum.min, pt->sum.max,
             pt->sum.median * 1e9 / (double)pt->threads,
             pt->sum.median * 1e9 * busy / (double)pt->threads);
    }
  }
  printf("\nnot run: T4 for pthreads (a pthread cannot be created without starting it);"
         " T2 for Boost.Fiber; T3 for pthreads and Boost.Fiber\n");
}

static int write_json(const char *dir, const bench_machine_t *m, long n, long slow_n) {
  bench_json_t f;
  if (bench_json_start(&f, dir, "sweep.json", m) != 0) return -1;
  bench_json_obj(&f, "config");
  bench_json_int(&f, "reps", reps);
  bench_json_int(&f, "warmup_runs", 1);
  bench_json_int(&f, "threads", n);
  bench_json_int(&f, "slow_threads", slow_n);
  bench_json_str(&f, "slow_points", "all pthreads; boost_fiber T4, T5");
  bench_json_int(&f, "batch", BATCH);
  bench_json_str(&f, "boost_fiber", "algo::work_stealing(P, suspend=false), one process per P");
  bench_json_str(&f, "pthreads", "T1 detached chains, T5 create/join batches; all threads on "
                 "min(P, cores) CPUs; T4 not applicable");
  bench_json_str(&f, "T4", "create a batch of 1000 unstarted threads, then join them (each runs an "
                 "empty body): create+reclaim");
  bench_json_obj(&f, "T2");
  bench_json_num(&f, "mean_work_us", t2_us);
  bench_json_str(&f, "distribution", "uniform [0, 2W)");
  bench_json_int(&f, "threads", t2_n);
  bench_json_num(&f, "units_per_us", units_per_us);
  bench_json_int(&f, "paper_work_us", 300);
  bench_json_end(&f);
  bench_json_obj(&f, "T3");
  bench_json_int(&f, "threads", t3_n);
  bench_json_str(&f, "chains", "K chains (runnable threads), heads round-robin over the P VPs");
  bench_json_str(&f, "latency", "elapsed x min(K, P) / threads");
  bench_json_end(&f);
  bench_json_end(&f);
  bench_json_arr(&f, "results");
  for (int i = 0; i < npoints; i++) {
    const point_t *pt = &points[i];
    bench_json_record(&f, "lib", lib_name[pt->lib], pt->p, pt->oversub);
    bench_json_str(&f, "test", test_name[pt->test]);
    bench_json_int(&f, "threads", pt->threads);
    bench_json_num(&f, "ns_per_thread", pt->sum.median * 1e9 / (double)pt->threads);
    bench_json_num(&f, "speedup", speedup(pt));
    if (pt->test == T3) {
      int busy = pt->k < pt->p ? pt->k : pt->p;
      bench_json_int(&f, "K", pt->k);
      bench_json_int(&f, "busy_processors", busy);
      bench_json_num(&f, "latency_ns", pt->sum.median * 1e9 * busy / (double)pt->threads);
      bench_json_num(&f, "latency_min_ns", pt->sum.min * 1e9 * busy / (double)pt->threads);
      bench_json_num(&f, "latency_max_ns", pt->sum.max * 1e9 * busy / (double)pt->threads);
    }
    if (pt->lib == LIB_WEFT) {
      bench_json_num(&f, "cpu_per_wall", pt->cpu_per_wall);
      bench_json_num(&f, "weft_steals_per_run", pt->steals);
      bench_json_num(&f, "weft_sleeps_per_run", pt->sleeps);
    }
    bench_json_times(&f, pt->sum, pt->s, pt->reps);
    bench_json_end(&f);
  }
  return bench_json_finish(&f);
}

int main(int argc, char **argv) {
  bench_machine_t m;
  bench_machine_read(&m);
  const char *out = "bench-results", *libs = "weft,pthreads,boost_fiber", *tests = "T1,T2,T3,T4,T5";
  long n = 1000000, slow_n = 50000;
  int procs[16], oversub[16], nprocs = 0, nover = 0;
  for (int p = 1; p <= m.cores && nprocs < 16; p++) procs[nprocs++] = p;
  oversub[nover++] = 2 * m.cores;
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "sweep.json"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_N(n, "threads per point (1000000)"),
      {"--slow-n", BENCH_LONG, &slow_n, NULL, 0, "threads where one costs microseconds (50000)"},
      BENCH_OPT_PROCS(procs, nprocs, 16),
      {"--oversub", BENCH_INTS, oversub, &nover, 16, "oversubscribed P values (2 x cores)"},
      {"--libs", BENCH_STR, &libs, NULL, 0, "weft,pthreads,boost_fiber"},
      {"--tests", BENCH_STR, &tests, NULL, 0, "T1,T2,T3,T4,T5"},
      {"--t2-us", BENCH_DOUBLE, &t2_us, NULL, 0, "T2 mean user work per thread, us (1)"},
      {"--t2-n", BENCH_LONG, &t2_n, NULL, 0, "T2 threads"},
      {"--t2-units-per-us", BENCH_DOUBLE, &units_per_us, NULL, 0, "T2 work units per us (else calibrated)"},
      {"--t3-n", BENCH_LONG, &t3_n, NULL, 0, "T3 threads"},
      {"--t3-k", BENCH_INTS, t3_k, &t3_nk, MAX_K, "T3 runnable-thread counts K"},
      {"--freelist-local", BENCH_INT, &freelist_local, NULL, 0,
       "weft's T (weft_config_t.freelist_local; default: the library's)"},
      {"--spin-us", BENCH_INT, &spin_us, NULL, 0,
       "how long an idle weft VP polls before it sleeps (weft_config_t.spin_us; default: the library's)"},
      {"--tcb-local", BENCH_INT, &tcb_local, NULL, 0,
       "free control blocks a weft VP keeps (weft_config_t.tcb_local; default: the library's)"},
  };
  bench_args(argc, argv, opts, 16, "T1-T5: elapsed time against processors");
  if (reps < 1 || reps > MAX_REPS) bench_die(argv[0], "--reps out of range");
  for (int t = 0; t < NTESTS; t++) run_test[t] = bench_list_has(tests, test_name[t]);
  if (run_test[T2]) {
    if (units_per_us <= 0) units_per_us = bench_calibrate(burn_units);
    printf("T2 user work: uniform on [0, %.3g us), %.1f units (16 multiply-adds) per us\n",
           2 * t2_us, units_per_us);
  }

  weft_attr_init(&detached);
  detached.detached = 1;
  pthread_attr_init(&p_detached);
  pthread_attr_setdetachstate(&p_detached, PTHREAD_CREATE_DETACHED);
  sem_init(&p_done, 0, 0);

  printf("sweep: machine %s, %d cores; %ld threads (pthreads, Boost.Fiber T4/T5: %ld);"
         " 1 warm-up + %d runs per point\n", m.model, m.cores, n, slow_n, reps);
  for (int k = 0; k < nprocs + nover; k++) {
    int over = k >= nprocs, p = over ? oversub[k - nprocs] : procs[k];
    if (p < 1 || p > WEFT_MAX_VPS) continue;
    printf("P=%d%s ...\n", p, over ? " (oversubscribed)" : "");
    fflush(stdout);
    if (bench_list_has(libs, "weft")) run_weft(p, over, n);
    if (bench_list_has(libs, "pthreads")) run_pthreads(p, over, slow_n);
#ifdef WEFT_BENCH_BOOST
    if (bench_list_has(libs, "boost_fiber")) run_boost(p, over, n, slow_n);
#endif
  }
#ifndef WEFT_BENCH_BOOST
  if (bench_list_has(libs, "boost_fiber")) printf("boost_fiber: not built (Boost.Fiber not found)\n");
#endif
  print_table(&m);
  return write_json(out, &m, n, slow_n) == 0 ? 0 : 1;
}
