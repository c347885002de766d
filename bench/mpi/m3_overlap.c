/* bench/mpi/m3_overlap.c - M3: MPI with many threads. Each rank runs N threads; each
 * thread alternates a fixed compute slice with an exchange with its peer thread on the
 * other rank (the same index: it sends `bytes` bytes tagged with its index and receives
 * as many). Total time per run, for:
 *   compute  the same compute on the main thread, no messages: the lower bound
 *   weft     N weft threads on one VP; the exchange is weft_mpi_sendrecv, the same
 *            operation as the others' MPI_Sendrecv (the waiting thread parks; the
 *            others compute). Until it existed this mode made MPI_Irecv + MPI_Isend +
 *            weft_mpi_waitall, which with MPICH costs 2 to 4 us more per exchange than
 *            MPI_Sendrecv also on POSIX threads: it measured the pattern, not weft.
 *   pthread  N POSIX threads (MPI_THREAD_MULTIPLE); the exchange is MPI_Sendrecv
 *   omp      N OpenMP threads (one parallel region of N threads, not tasks: a thread
 *            blocked in MPI_Sendrecv inside a tied task would hold the only thread of
 *            the team, and the peers' orders differ, so tasks deadlock); MPI_Sendrecv.
 *            Built only where OpenMP is found (WEFT_BENCH_OMP).
 *
 *   mpiexec -n 2 ./weft_bench_mpi_m3 [--threads 1,10,100,1000] [--cases 100:1024,20:65536]
 *        [--work-ms 200] [--reps 5] [--modes compute,weft,pthread,omp] [--out DIR]
 *        [--spin-us S] [--poll-us P] [--idle-poll 0|1]
 *
 * A case is slice_us:bytes. Per case and N, each thread does
 * max(1, work_ms / (N * slice_us)) rounds, so that every N computes about the same
 * total. The compute is a busy loop calibrated on rank 0 (bench_calibrate) and
 * broadcast, so both ranks do the same work. A run's time is the slower rank's, from a
 * barrier to the end of its last thread: weft_init comes before the barrier and
 * weft_shutdown after the time is taken, as OpenMP's thread pool outlives its runs
 * (they were timed until weft_shutdown had returned, which waits for weft_mpi's poller
 * thread to finish its linger: about 1 ms a run, 3% of a quick-mode run of 30 ms).
 * Rank 0 prints a table and writes DIR/M3.json.
 * --spin-us, --poll-us and --idle-poll set weft_mpi's policy (weft_mpi_config_t's
 * spin_ns, poll_interval_ns, idle_poll; default: weft_mpi_config_init's).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WEFT_BENCH_OMP
#include <omp.h>
#endif

#include "bench.h"
#include "weft/mpi.h"
#include "weft/runtime.h"
#include "weft/thread.h"

#define MAX_N 16
#define MAX_CASES 8

/* The load average (1, 5, 15 min) as /proc/loadavg gives it ("?" if unreadable). */
static void read_loadavg(char *buf, int n) {
  FILE *f = fopen("/proc/loadavg", "r");
  double a, b, c;
  if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
    snprintf(buf, (size_t)n, "%.2f %.2f %.2f", a, b, c);
  else
    snprintf(buf, (size_t)n, "?");
  if (f) fclose(f);
}

static int rank, peer;
static double units_per_us;

/* ---- the compute slice ----
 * Out of line: one copy of the loop for every mode. Inlined into each mode's body,
 * the copies ran at different speeds (their alignment), which moved the modes'
 * ratios by a few percent. */
static volatile unsigned long sink;
static __attribute__((noinline)) void work(long units) {
  unsigned long x = 88172645463325252UL;
  for (long i = 0; i < units; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  sink = x;
}

/* ---- one run's parameters (set before the threads start, read-only while they run) ---- */
static long slice_units;
static int rounds, nthreads, nbytes;
static char *sendbufs, *recvbufs; /* nthreads x nbytes each */

static void exchange_blocking(int t) {
  MPI_Sendrecv(sendbufs + (size_t)t * (size_t)nbytes, nbytes, MPI_BYTE, peer, t,
               recvbufs + (size_t)t * (size_t)nbytes, nbytes, MPI_BYTE, peer, t, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
}

static void body_blocking(int t) {
  for (int r = 0; r < rounds; r++) {
    work(slice_units);
    exchange_blocking(t);
  }
}

static void *pthread_body(void *arg) {
  body_blocking((int)(intptr_t)arg);
  return NULL;
}

static void *weft_body(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int r = 0; r < rounds; r++) {
    work(slice_units);
    if (weft_mpi_sendrecv(sendbufs + (size_t)t * (size_t)nbytes, nbytes, MPI_BYTE, peer, t,
                          recvbufs + (size_t)t * (size_t)nbytes, nbytes, MPI_BYTE, peer, t,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return NULL;
}

static weft_thread_t **wthreads;
static pthread_t *pthreads;

static void run_compute(void) {
  for (long i = 0; i < (long)nthreads * rounds; i++) work(slice_units);
}

static void weft_up(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = 1; /* two ranks share the machine's two cores */
  bench_check(weft_init(&cfg), "weft_init");
}

static void run_weft(void) {
  for (int t = 0; t < nthreads; t++)
    bench_check(weft_create(&wthreads[t], NULL, weft_body, (void *)(intptr_t)t), "weft_create");
  for (int t = 0; t < nthreads; t++) bench_check(weft_join(wthreads[t], NULL), "weft_join");
}

static void weft_down(void) { bench_check(weft_shutdown(), "weft_shutdown"); }

static void run_pthread(void) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 256 * 1024);
  for (int t = 0; t < nthreads; t++)
    if (pthread_create(&pthreads[t], &a, pthread_body, (void *)(intptr_t)t) != 0)
      bench_die("pthread_create", "failed");
  pthread_attr_destroy(&a);
  for (int t = 0; t < nthreads; t++) pthread_join(pthreads[t], NULL);
}

#ifdef WEFT_BENCH_OMP
static void run_omp(void) {
  omp_set_dynamic(0);
#pragma omp parallel num_threads(nthreads)
  body_blocking(omp_get_thread_num());
}
#endif

typedef struct mode {
  const char *name;
  void (*fn)(void);
  void (*up)(void), (*down)(void); /* before the barrier, after the time (or NULL) */
} mode_t_;

/* Times m's run on both ranks from a barrier; returns the slower rank's seconds (on
 * rank 0). */
static double timed(const mode_t_ *m) {
  if (m->up) m->up();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = bench_now_ns();
  m->fn();
  double mine = (bench_now_ns() - t0) / 1e9, worst = 0;
  if (m->down) m->down();
  MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char **argv) {
  int ns[MAX_N] = {1, 10, 100, 1000}, nn = 4, reps = 5;
  double work_ms = 200, spin_us = -1, poll_us = -1;
  int idle_poll = -1;
  const char *cases_s = "100:1024,20:65536", *out = NULL;
  const char *modes_s = "compute,weft,pthread,omp";
  bench_opt_t opts[] = {
      {"--threads", BENCH_INTS, ns, &nn, MAX_N, "threads per rank N"},
      {"--cases", BENCH_STR, &cases_s, NULL, 0, "slice_us:bytes,... (compute slice, message size)"},
      {"--work-ms", BENCH_DOUBLE, &work_ms, NULL, 0, "compute per rank per run (ms)"},
      {"--modes", BENCH_STR, &modes_s, NULL, 0, "compute,weft,pthread,omp"},
      {"--spin-us", BENCH_DOUBLE, &spin_us, NULL, 0, "weft_mpi's spin_ns, in us (default: its own)"},
      {"--poll-us", BENCH_DOUBLE, &poll_us, NULL, 0,
       "weft_mpi's poll_interval_ns, in us (default: its own)"},
      {"--idle-poll", BENCH_INT, &idle_poll, NULL, 0, "weft_mpi's idle_poll (default: its own)"},
      BENCH_OPT_REPS(reps),
      BENCH_OPT_OUT(out, "M3.json"),
  };
  /* before MPI_Init: the policy is part of weft_mpi's initialization */
  bench_args(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
             "M3: N threads per rank alternating compute and an exchange (mpiexec -n 2)");
  weft_mpi_config_t mc;
  weft_mpi_config_init(&mc);
  if (spin_us >= 0) mc.spin_ns = (uint64_t)(spin_us * 1000.0 + 0.5);
  if (poll_us > 0) mc.poll_interval_ns = (uint64_t)(poll_us * 1000.0 + 0.5);
  if (idle_poll >= 0) mc.idle_poll = idle_poll;
  int prov;
  if (weft_mpi_init_config(&argc, &argv, &mc, &prov) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "m3: run with mpiexec -n 2\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  peer = 1 - rank;
  if (prov < MPI_THREAD_MULTIPLE) {
    if (rank == 0) fprintf(stderr, "m3: MPI does not provide MPI_THREAD_MULTIPLE\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  double slice_us[MAX_CASES];
  int bytes[MAX_CASES], nc = 0;
  for (const char *p = cases_s; *p && nc < MAX_CASES;) {
    char *end;
    slice_us[nc] = strtod(p, &end);
    if (*end != ':') bench_die("--cases", "want slice_us:bytes,...");
    bytes[nc] = (int)strtol(end + 1, &end, 10);
    if (slice_us[nc] <= 0 || bytes[nc] < 0) bench_die("--cases", "slice > 0, bytes >= 0");
    nc++;
    p = *end == ',' ? end + 1 : end;
  }
  if (reps < 1 || reps > 64 || nn < 1 || nc < 1 || work_ms <= 0) bench_die("m3", "bad arguments");
  for (int i = 0; i < nn; i++)
    if (ns[i] < 1) bench_die("--threads", "N >= 1");

  mode_t_ all[] = {{"compute", run_compute, NULL, NULL},
                   {"weft", run_weft, weft_up, weft_down},
                   {"pthread", run_pthread, NULL, NULL},
#ifdef WEFT_BENCH_OMP
                   {"omp", run_omp, NULL, NULL},
#endif
  };
  mode_t_ modes[4];
  int nm = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (bench_list_has(modes_s, all[i].name)) modes[nm++] = all[i];
#ifndef WEFT_BENCH_OMP
  if (rank == 0 && bench_list_has(modes_s, "omp"))
    fprintf(stderr, "m3: built without OpenMP: the omp mode is left out\n");
#endif

  if (rank == 0) units_per_us = bench_calibrate(work);
  MPI_Bcast(&units_per_us, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  int maxn = 0, maxb = 0;
  for (int i = 0; i < nn; i++) maxn = ns[i] > maxn ? ns[i] : maxn;
  for (int c = 0; c < nc; c++) maxb = bytes[c] > maxb ? bytes[c] : maxb;
  sendbufs = calloc((size_t)maxn, (size_t)maxb + 1);
  recvbufs = calloc((size_t)maxn, (size_t)maxb + 1);
  wthreads = calloc((size_t)maxn, sizeof *wthreads);
  pthreads = calloc((size_t)maxn, sizeof *pthreads);
  double *v = malloc(sizeof(double) * (size_t)reps * 4);
  if (!sendbufs || !recvbufs || !wthreads || !pthreads || !v) bench_die("m3", "out of memory");

  bench_machine_t m;
  bench_machine_read(&m);
  bench_json_t j;
  int json = 0;
  if (rank == 0 && out) {
    if (bench_json_start(&j, out, "M3.json", &m) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    json = 1;
    bench_json_obj(&j, "config");
    bench_json_int(&j, "ranks", 2);
    bench_json_int(&j, "vps_per_rank", 1);
    bench_json_int(&j, "reps", reps);
    bench_json_num(&j, "work_ms", work_ms);
    bench_json_num(&j, "units_per_us", units_per_us);
    bench_json_str(&j, "omp_kind", "threads");
    bench_json_num(&j, "spin_us", (double)mc.spin_ns / 1000.0);
    bench_json_num(&j, "poll_us", (double)mc.poll_interval_ns / 1000.0);
    bench_json_int(&j, "idle_poll", mc.idle_poll);
    char la[64];
    read_loadavg(la, sizeof la);
    bench_json_str(&j, "loadavg_start", la);
    bench_json_end(&j);
    bench_json_arr(&j, "results");
  }
  if (rank == 0)
    printf("M3: 2 ranks, 1 VP (weft) each, %d cores; time per run in ms: median (min-max) of %d\n",
           m.cores, reps);

  for (int c = 0; c < nc; c++) {
    for (int i = 0; i < nn; i++) {
      nthreads = ns[i];
      nbytes = bytes[c];
      slice_units = (long)(slice_us[c] * units_per_us + 0.5);
      rounds = (int)(work_ms * 1000.0 / (slice_us[c] * nthreads));
      if (rounds < 1) rounds = 1;
      /* a warm-up of every mode, then the modes interleaved, so drift hits all alike */
      for (int k = 0; k < nm; k++) timed(&modes[k]);
      for (int r = 0; r < reps; r++)
        for (int k = 0; k < nm; k++) v[k * reps + r] = timed(&modes[k]);
      if (rank != 0) continue;
      for (int k = 0; k < nm; k++) {
        double *x = v + k * reps;
        if (json) {
          /* over 2 ranks' threads on the machine's cores (pthread, omp: one per thread) */
          bench_json_record(&j, "lib", modes[k].name, nthreads,
                            (!strcmp(modes[k].name, "pthread") || !strcmp(modes[k].name, "omp")) &&
                                2 * nthreads > m.cores);
          bench_json_num(&j, "slice_us", slice_us[c]);
          bench_json_int(&j, "bytes", nbytes);
          bench_json_int(&j, "rounds", rounds);
          bench_json_int(&j, "N", nthreads);
        }
        double copy[64];
        int n = reps;
        memcpy(copy, x, sizeof(double) * (size_t)n);
        bench_summary_t s = bench_summarize(copy, n); /* sorts copy, keeps x in run order */
        printf("slice %6.1f us  %7d B  N %5d  rounds %6d  %-8s %9.2f (%.2f-%.2f)\n", slice_us[c],
               nbytes, nthreads, rounds, modes[k].name, s.median * 1e3, s.min * 1e3, s.max * 1e3);
        if (json) {
          bench_json_times(&j, s, x, n);
          bench_json_end(&j);
        }
      }
      fflush(stdout);
    }
  }
  if (json) {
    char la[64];
    read_loadavg(la, sizeof la);
    bench_json_end(&j); /* results */
    bench_json_str(&j, "loadavg_end", la);
    bench_json_finish(&j);
  }
  free(v);
  free(sendbufs);
  free(recvbufs);
  free(wthreads);
  free(pthreads);
  if (weft_mpi_finalize() != MPI_SUCCESS) return 1;
  return 0;
}
