/* R_weft.c - the weft (and POSIX threads) side of R1-R3 (bench/README.md, "Trees of
 * threads and a million live threads"): one run of one benchmark in a fresh process,
 * driven by R_run.py, which starts one process per (benchmark, library, P) under
 * `timeout` and collects the line this program prints:
 *
 *   RESULT {"bench": ..., "lib": ..., "P": ..., ...}
 *
 *   fib     R1: fib(n) with one thread per call and no cutoff, exactly the program
 *           below; 1 warm-up + --reps timed runs; spawns = fib(n+1) - 1
 *   queens  R2: N-queens, one thread per safe placement (each safe placement in the
 *           next row is a child thread; a parent joins all its children and sums their
 *           solutions); 1 warm-up + --reps timed runs; spawns = the nodes of the search
 *           tree below the root, counted by a serial pass
 *   live    R3: create n threads that each block on one semaphore, wait until every
 *           one has blocked (create phase), then signal the semaphore n times and join
 *           them all (release phase); one run per process. RSS is read before the
 *           creates (after the handle array is allocated and touched) and once every
 *           thread is blocked; per live thread = the difference / n
 *
 * Libraries: weft (the default runtime, nvps = P, nothing tuned), weft_workfirst (the
 * same with the work-first creation attribute, when weft_attr_t has it: configure-time
 * check in CMakeLists.txt), pthreads (live only: POSIX threads with default attributes
 * blocked on a sem_t, the process confined to the first P CPUs). Every run is checked
 * (the fib value; the solution count against the known count and the serial pass; every
 * thread of `live` ran and returned its own argument): a wrong result prints "WRONG
 * RESULT" and exits 3. Peak RSS: VmHWM of /proc/self/status at exit.
 *
 * usage: weft_trees --bench fib|queens|live [--lib weft|weft_workfirst|pthreads] [--p 1]
 *                   [--n N] [--reps 3] [--callgrind]
 * --callgrind (fib, queens; weft): one uncounted warm-up, then one run between two
 * CALLGRIND_TOGGLE_COLLECTs (valgrind --tool=callgrind --collect-atstart=no);
 * R_run.py runs it at two n and divides the difference in instructions by the
 * difference in spawns. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft.h"
#include "weft/sync.h"

#include "R_common.h"
#include "bench.h"

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

#define MAX_REPS 50

/* ---- R1: fib, one thread per call ---------------------------------------------------- */

static void *fib(void *arg) {
  long n = (long)arg;
  if (n < 2) return (void *)n;
  weft_thread_t *t; void *x;
  weft_create(&t, NULL, fib, (void *)(n - 1));
  long y = (long)fib((void *)(n - 2));
  weft_join(t, &x);
  return (void *)((long)x + y);
}

#ifdef WEFT_BENCH_WORK_FIRST_FIELD
#define HAVE_WORK_FIRST 1
/* The same program with the work-first creation attribute: the child runs at once and
 * the creator waits in the ready queue. */
static weft_attr_t work_first;

static void *fib_wf(void *arg) {
  long n = (long)arg;
  if (n < 2) return (void *)n;
  weft_thread_t *t; void *x;
  weft_create(&t, &work_first, fib_wf, (void *)(n - 1));
  long y = (long)fib_wf((void *)(n - 2));
  weft_join(t, &x);
  return (void *)((long)x + y);
}
#else
#define HAVE_WORK_FIRST 0
#endif

/* ---- R2: N-queens, one thread per safe placement ------------------------------------- */

#define QMAX R_QMAX
static int qn;
static const weft_attr_t *q_attr;

typedef struct qnode {
  int row;                 /* rows already holding a queen */
  uint32_t cols, d1, d2;   /* columns attacked in row `row` (by column, both diagonals) */
} qnode_t;

static void *queens(void *arg) {
  const qnode_t *q = arg;
  if (q->row == qn) return (void *)1L;
  qnode_t kid[QMAX];
  weft_thread_t *t[QMAX];
  int k = 0;
  uint32_t free_cols = ~(q->cols | q->d1 | q->d2) & ((1u << qn) - 1);
  while (free_cols) {
    uint32_t bit = free_cols & -free_cols;
    free_cols ^= bit;
    kid[k] = (qnode_t){q->row + 1, q->cols | bit, (q->d1 | bit) << 1, (q->d2 | bit) >> 1};
    bench_check(weft_create(&t[k], q_attr, queens, &kid[k]), "weft_create");
    k++;
  }
  long sum = 0;
  for (int i = 0; i < k; i++) {
    void *r;
    bench_check(weft_join(t[i], &r), "weft_join");
    sum += (long)r;
  }
  return (void *)sum;
}

/* ---- R3: a million live threads ------------------------------------------------------ */

static long live_n;
static _Atomic long live_started, live_finished;
static weft_sem_t gate, all_started;
static sem_t pgate, pall_started;

static void *live_weft(void *arg) {
  /* relaxed is enough: the count only decides who signals all_started, and the
   * semaphore orders what follows */
  if (atomic_fetch_add_explicit(&live_started, 1, memory_order_relaxed) + 1 == live_n)
    bench_check(weft_sem_signal(&all_started), "weft_sem_signal");
  bench_check(weft_sem_wait(&gate), "weft_sem_wait");
  atomic_fetch_add_explicit(&live_finished, 1, memory_order_relaxed);
  return arg;
}

static void *live_pthread(void *arg) {
  if (atomic_fetch_add_explicit(&live_started, 1, memory_order_relaxed) + 1 == live_n)
    sem_post(&pall_started);
  while (sem_wait(&pgate) != 0 && errno == EINTR) {}
  atomic_fetch_add_explicit(&live_finished, 1, memory_order_relaxed);
  return arg;
}

/* ---- driver ---------------------------------------------------------------------------- */

static void wrong(const char *fmt, long got, long want) {
  fprintf(stderr, "WRONG RESULT: ");
  fprintf(stderr, fmt, got, want);
  fprintf(stderr, "\n");
  exit(3);
}

static void print_common(const char *bench, const char *lib, int p, long n) {
  bench_machine_t m;
  bench_machine_read(&m);
  printf("RESULT {\"bench\": \"%s\", \"lib\": \"%s\", \"P\": %d, \"n\": %ld, \"machine\": ",
         bench, lib, p, n);
  bench_machine_json(stdout, &m);
}

static void print_seconds(const double *s, int reps) {
  printf(", \"seconds\": [");
  for (int r = 0; r < reps; r++) printf("%s%.6g", r ? ", " : "", s[r]);
  printf("]");
}

/* R1/R2: 1 warm-up, then reps timed runs (or, with callgrind, one instrumented run). */
static int run_tree(const char *bench, const char *lib, int p, long n, int reps, int callgrind) {
  weft_thread_fn fn;
  void *arg;
  long want, spawns;
  qnode_t root = {0, 0, 0, 0};
  if (!strcmp(bench, "fib")) {
    if (n < 0 || n > 60) {
      fprintf(stderr, "fib: --n must be in 0..60\n");
      return 1;
    }
    want = r_fib(n, &spawns);
    arg = (void *)n;
    fn = fib;
#if HAVE_WORK_FIRST
    if (!strcmp(lib, "weft_workfirst")) fn = fib_wf;
#endif
  } else {
    if (n < 1 || n > QMAX) {
      fprintf(stderr, "queens: --n must be in 1..%d\n", QMAX);
      return 1;
    }
    qn = (int)n;
    spawns = 0;
    want = r_queens_serial((int)n, 0, 0, 0, 0, &spawns);
    if (want != r_queens_known[n]) wrong("serial queens found %ld solutions, known %ld", want, r_queens_known[n]);
    arg = &root;
    fn = queens;
    q_attr = NULL;
#if HAVE_WORK_FIRST
    if (!strcmp(lib, "weft_workfirst")) q_attr = &work_first;
#endif
  }
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = p;
  bench_check(weft_init(&cfg), "weft_init");
  long rss_start = bench_rss_kib();
  double s[MAX_REPS];
  int runs = callgrind ? 1 : reps;
  for (int r = -1; r < runs; r++) {
    if (r == 0 && callgrind) {
      CALLGRIND_TOGGLE_COLLECT;
    }
    double t0 = bench_now_ns();
    long got = (long)fn(arg);
    double ns = bench_now_ns() - t0;
    if (r == 0 && callgrind) {
      CALLGRIND_TOGGLE_COLLECT;
    }
    if (got != want) wrong(strcmp(bench, "fib") ? "queens: %ld solutions, expected %ld" : "fib: %ld, expected %ld", got, want);
    if (r >= 0) s[r] = ns * 1e-9;
  }
  bench_check(weft_shutdown(), "weft_shutdown");
  print_common(bench, lib, p, n);
  printf(", \"spawns\": %ld, \"result\": %ld, \"ok\": true, \"warmup_runs\": 1", spawns, want);
  print_seconds(s, runs);
  printf(", \"rss_start_kib\": %ld, \"peak_rss_kib\": %ld}\n", rss_start, bench_peak_rss_kib());
  return 0;
}

static int run_live(const char *lib, int p, long n) {
  if (n < 1 || n > WEFT_SEM_MAX) {
    fprintf(stderr, "live: --n must be in 1..%d\n", WEFT_SEM_MAX);
    return 1;
  }
  int pth = !strcmp(lib, "pthreads");
  live_n = n;
  void **t = malloc((size_t)n * sizeof *t);
  if (!t) {
    fprintf(stderr, "out of memory\n");
    return 2;
  }
  memset(t, 0, (size_t)n * sizeof *t);
  if (pth) {
    cpu_set_t set = bench_cpus_first(p); /* the first p CPUs this process may use */
    sched_setaffinity(0, sizeof set, &set);
    sem_init(&pgate, 0, 0);
    sem_init(&pall_started, 0, 0);
  } else {
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = p;
    bench_check(weft_init(&cfg), "weft_init");
    weft_sem_init(&gate, 0);
    weft_sem_init(&all_started, 0);
  }
  long rss_before = bench_rss_kib();
  double t0 = bench_now_ns();
  for (long i = 0; i < n; i++) {
    if (pth) {
      pthread_t *h = malloc(sizeof *h);
      int rc = h ? pthread_create(h, NULL, live_pthread, (void *)i) : ENOMEM;
      if (rc != 0) {
        fprintf(stderr, "pthread_create failed at thread %ld of %ld: %s\n", i, n, strerror(rc));
        exit(2);
      }
      t[i] = h;
    } else {
      bench_check(weft_create((weft_thread_t **)&t[i], NULL, live_weft, (void *)i), "weft_create");
    }
  }
  if (pth)
    while (sem_wait(&pall_started) != 0 && errno == EINTR) {}
  else
    bench_check(weft_sem_wait(&all_started), "weft_sem_wait");
  double t1 = bench_now_ns();
  long rss_blocked = bench_rss_kib();
  long early = atomic_load(&live_finished);
  for (long i = 0; i < n; i++) {
    if (pth) sem_post(&pgate);
    else bench_check(weft_sem_signal(&gate), "weft_sem_signal");
  }
  long bad = -1;
  for (long i = 0; i < n; i++) {
    void *r;
    if (pth) {
      pthread_join(*(pthread_t *)t[i], &r);
      free(t[i]);
    } else {
      bench_check(weft_join((weft_thread_t *)t[i], &r), "weft_join");
    }
    if ((long)r != i && bad < 0) bad = i;
  }
  double t2 = bench_now_ns();
  if (early != 0) wrong("live: %ld threads passed the semaphore before it was signalled (of %ld)", early, n);
  if (bad >= 0) wrong("live: thread %ld returned another thread's argument (%ld threads)", bad, n);
  if (atomic_load(&live_finished) != n) wrong("live: %ld threads finished, expected %ld", atomic_load(&live_finished), n);
  if (!pth) bench_check(weft_shutdown(), "weft_shutdown");
  free(t);
  print_common("live", lib, p, n);
  printf(", \"threads\": %ld, \"ok\": true, \"create_s\": %.6g, \"release_join_s\": %.6g, "
         "\"rss_before_kib\": %ld, \"rss_blocked_kib\": %ld, \"peak_rss_kib\": %ld}\n",
         n, (t1 - t0) * 1e-9, (t2 - t1) * 1e-9, rss_before, rss_blocked, bench_peak_rss_kib());
  return 0;
}

int main(int argc, char **argv) {
  const char *bench = NULL, *lib = "weft";
  int p = 1, reps = 3, callgrind = 0;
  long n = -1;
  const bench_opt_t opts[] = {
      {"--bench", BENCH_STR, &bench, NULL, 0, "fib|queens|live"},
      {"--lib", BENCH_STR, &lib, NULL, 0, "weft|weft_workfirst|pthreads"},
      {"--p", BENCH_INT, &p, NULL, 0, "VPs (1)"},
      BENCH_OPT_N(n, "fib(n), n queens, n live threads"),
      BENCH_OPT_REPS(reps),
      {"--callgrind", BENCH_FLAG, &callgrind, NULL, 0, "count one run's instructions (nvps = 1)"},
  };
  bench_args(argc, argv, opts, 6, "R1-R3 of weft and POSIX threads");
  if (!bench || (strcmp(bench, "fib") && strcmp(bench, "queens") && strcmp(bench, "live"))) {
    fprintf(stderr, "--bench fib|queens|live is required\n");
    return 1;
  }
  if (p < 1 || p > WEFT_MAX_VPS || reps < 1 || reps > MAX_REPS) {
    fprintf(stderr, "--p must be in 1..%d, --reps in 1..%d\n", WEFT_MAX_VPS, MAX_REPS);
    return 1;
  }
  if (strcmp(lib, "weft") && strcmp(lib, "weft_workfirst") && strcmp(lib, "pthreads")) {
    fprintf(stderr, "unknown --lib %s\n", lib);
    return 1;
  }
  if (!strcmp(lib, "weft_workfirst") && !HAVE_WORK_FIRST) {
    printf("weft_workfirst: not built (weft_attr_t has no work-first field): skipped\n");
    return 4;
  }
  if (!strcmp(lib, "pthreads") && strcmp(bench, "live")) {
    fprintf(stderr, "--lib pthreads runs only --bench live\n");
    return 1;
  }
#if HAVE_WORK_FIRST
  weft_attr_init(&work_first);
  work_first.WEFT_BENCH_WORK_FIRST_FIELD = 1;
#endif
  if (!strcmp(bench, "live")) {
    if (callgrind) {
      fprintf(stderr, "--callgrind counts fib and queens only\n");
      return 1;
    }
    return run_live(lib, p, n < 0 ? 1000000 : n);
  }
  return run_tree(bench, lib, p, n < 0 ? (!strcmp(bench, "fib") ? 30 : 12) : n, reps, callgrind);
}
