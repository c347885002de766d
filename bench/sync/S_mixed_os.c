/* S_mixed_os.c - reader/writer locks and barriers shared by weft threads and plain OS
 * threads (pthreads that are not weft threads), beside pthread_rwlock_t and
 * pthread_barrier_t used by the same number of pthreads, measured in the same run.
 *
 *   rwlock:  `--weft` weft threads and `--os` pthreads each do `--ops` operations on one
 *            lock: every 4th a write lock (increment a counter), the others a read lock
 *            (read it), then `--cs` empty loop iterations inside the lock. Reported: wall time / total operations.
 *            Baseline: (weft + os) pthreads on a pthread_rwlock_t, same loop.
 *   barrier: `--weft` weft threads and `--os` pthreads wait `--rounds` times on one
 *            (weft + os)-party barrier. Reported: wall time / rounds.
 *            Baseline: (weft + os) pthreads on a pthread_barrier_t.
 *
 * Every figure is repeated `--reps` times; the median, minimum and maximum are printed.
 * The counts are checked (a wrong count exits 1), so a fast wrong lock cannot pass.
 *
 *   weft_bench_mixed_os [--nvps 2] [--spin-us 0 (weft's default)] [--weft 4] [--os 2] [--ops 20000] [--cs 20] [--bweft 4]
 *                       [--bos 4] [--rounds 2000] [--reps 7] [--tests rwlock,barrier]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

static int g_ops = 20000, g_rounds = 2000, g_cs = 20;

/* g_cs iterations of an empty loop: work inside each critical section */
static inline void cs_work(void) {
  for (int k = 0; k < g_cs; k++) __asm__ volatile("" ::: "memory");
}

/* ---- rwlock --------------------------------------------------------------------- */

static weft_rwlock_t wl = WEFT_RWLOCK_INIT;
static pthread_rwlock_t pl = PTHREAD_RWLOCK_INITIALIZER;
static volatile long counter;
static volatile long sink;

static void rw_loop_weft(void) {
  for (int i = 0; i < g_ops; i++) {
    if ((i & 3) == 0) {
      weft_rwlock_wrlock(&wl);
      counter = counter + 1;
    } else {
      weft_rwlock_rdlock(&wl);
      sink = counter;
    }
    cs_work();
    weft_rwlock_unlock(&wl);
  }
}

static void rw_loop_pthread(void) {
  for (int i = 0; i < g_ops; i++) {
    if ((i & 3) == 0) {
      pthread_rwlock_wrlock(&pl);
      counter = counter + 1;
    } else {
      pthread_rwlock_rdlock(&pl);
      sink = counter;
    }
    cs_work();
    pthread_rwlock_unlock(&pl);
  }
}

static void *rw_weft_body(void *a) {
  (void)a;
  rw_loop_weft();
  return NULL;
}
static void *rw_pthread_body(void *a) {
  (void)a;
  rw_loop_pthread();
  return NULL;
}

/* ---- barrier -------------------------------------------------------------------- */

static weft_barrier_t wb;
static pthread_barrier_t pb;
static _Atomic long arrivals;

static void *b_weft_body(void *a) {
  (void)a;
  for (int r = 0; r < g_rounds; r++) {
    atomic_fetch_add_explicit(&arrivals, 1, memory_order_relaxed);
    weft_barrier_wait(&wb);
  }
  return NULL;
}
static void *b_pthread_body(void *a) {
  (void)a;
  for (int r = 0; r < g_rounds; r++) {
    atomic_fetch_add_explicit(&arrivals, 1, memory_order_relaxed);
    pthread_barrier_wait(&pb);
  }
  return NULL;
}

/* ---- runs ----------------------------------------------------------------------- */

/* One mixed run: nweft weft threads running wbody, nos pthreads running obody.
 * Returns wall ns. */
static double run_mixed(int nweft, int nos, void *(*wbody)(void *), void *(*obody)(void *)) {
  weft_thread_t *wt[256];
  pthread_t ot[256];
  double t0 = bench_now_ns();
  for (int i = 0; i < nos; i++)
    if (pthread_create(&ot[i], NULL, obody, NULL)) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  for (int i = 0; i < nweft; i++)
    if (weft_create(&wt[i], NULL, wbody, NULL)) {
      fprintf(stderr, "weft_create failed\n");
      exit(1);
    }
  for (int i = 0; i < nweft; i++) weft_join(wt[i], NULL);
  /* a weft thread that blocks its VP in pthread_join: every weft thread is done */
  for (int i = 0; i < nos; i++) pthread_join(ot[i], NULL);
  return bench_now_ns() - t0;
}

static double run_pthreads(int n, void *(*body)(void *)) {
  pthread_t ot[512];
  double t0 = bench_now_ns();
  for (int i = 0; i < n; i++)
    if (pthread_create(&ot[i], NULL, body, NULL)) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  for (int i = 0; i < n; i++) pthread_join(ot[i], NULL);
  return bench_now_ns() - t0;
}

static void report(const char *name, double *v, int reps, const char *unit) {
  bench_summary_t s = bench_summarize(v, reps);
  printf("%-28s median %9.2f  min %9.2f  max %9.2f %s\n", name, s.median, s.min, s.max, unit);
}

int main(int argc, char **argv) {
  int spin_us = 0, nvps = 2, nweft = 4, nos = 2, bweft = 4, bos = 4, reps = 7;
  const char *tests = "rwlock,barrier";
  const bench_opt_t opts[] = {
      {"--nvps", BENCH_INT, &nvps, NULL, 0, "weft VPs (2)"},
      {"--spin-us", BENCH_INT, &spin_us, NULL, 0, "spin before blocking, us (0)"},
      {"--weft", BENCH_INT, &nweft, NULL, 0, "rwlock: weft threads (4)"},
      {"--os", BENCH_INT, &nos, NULL, 0, "rwlock: OS threads (2)"},
      {"--ops", BENCH_INT, &g_ops, NULL, 0, "rwlock operations per thread"},
      {"--cs", BENCH_INT, &g_cs, NULL, 0, "loop iterations inside the lock"},
      {"--bweft", BENCH_INT, &bweft, NULL, 0, "barrier: weft threads (4)"},
      {"--bos", BENCH_INT, &bos, NULL, 0, "barrier: OS threads (4)"},
      {"--rounds", BENCH_INT, &g_rounds, NULL, 0, "barrier rounds"},
      BENCH_OPT_REPS(reps),
      {"--tests", BENCH_STR, &tests, NULL, 0, "rwlock,barrier"},
  };
  bench_args(argc, argv, opts, 11, "reader/writer lock and barrier shared by weft and OS threads");
  if (nweft < 0 || nweft > 256 || nos < 0 || nos > 256 || bweft < 0 || bweft > 256 ||
      bos < 0 || bos > 256 || bweft + bos < 1 || reps < 1 || reps > 101 || g_ops < 1 ||
      g_rounds < 1 || g_cs < 0) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  bench_machine_t m;
  bench_machine_read(&m);
  printf("# %s, %d cores, kernel %s; nvps %d\n", m.model, m.cores, m.kernel, nvps);

  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps;
  if (spin_us > 0) cfg.spin_us = spin_us;  /* 0: the default */
  if (weft_init(&cfg)) {
    fprintf(stderr, "weft_init failed\n");
    return 1;
  }
  double v[101];
  if (strstr(tests, "rwlock")) {
    long ops = (long)(nweft + nos) * g_ops;
    long writes = (long)(nweft + nos) * ((g_ops + 3) / 4);
    char name[64];
    for (int r = 0; r < reps; r++) {
      counter = 0;
      v[r] = run_mixed(nweft, nos, rw_weft_body, rw_weft_body) / (double)ops;
      if (counter != writes) {
        fprintf(stderr, "rwlock: %ld writes counted, %ld expected\n", counter, writes);
        return 1;
      }
    }
    snprintf(name, sizeof name, "rwlock weft %d + os %d", nweft, nos);
    report(name, v, reps, "ns/op");
    for (int r = 0; r < reps; r++) {
      counter = 0;
      v[r] = run_pthreads(nweft + nos, rw_pthread_body) / (double)ops;
      if (counter != writes) return 1;
    }
    snprintf(name, sizeof name, "pthread_rwlock %d pthreads", nweft + nos);
    report(name, v, reps, "ns/op");
  }
  if (strstr(tests, "barrier")) {
    int n = bweft + bos;
    char name[64];
    for (int r = 0; r < reps; r++) {
      weft_barrier_init(&wb, (uint32_t)n);
      atomic_store(&arrivals, 0);
      v[r] = run_mixed(bweft, bos, b_weft_body, b_weft_body) / (double)g_rounds;
      if (atomic_load(&arrivals) != (long)n * g_rounds) return 1;
    }
    snprintf(name, sizeof name, "barrier weft %d + os %d", bweft, bos);
    report(name, v, reps, "ns/wait-round");
    for (int r = 0; r < reps; r++) {
      pthread_barrier_init(&pb, NULL, (unsigned)n);
      atomic_store(&arrivals, 0);
      v[r] = run_pthreads(n, b_pthread_body) / (double)g_rounds;
      pthread_barrier_destroy(&pb);
      if (atomic_load(&arrivals) != (long)n * g_rounds) return 1;
    }
    snprintf(name, sizeof name, "pthread_barrier %d pthreads", n);
    report(name, v, reps, "ns/wait-round");
  }
  weft_shutdown();
  return 0;
}
