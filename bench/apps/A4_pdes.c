/* A4_pdes.c - A4 (BENCHMARKS.md; Active Threads §8.2 Fig 29-30): a conservative parallel
 * discrete-event simulation, the model code of A4_model.h run as
 *
 *   serial        the true sequential version: one event heap, no threads, no locks
 *   weft          one weft thread per group of LPs (nvps = P); channels: weft_mutex_t +
 *                 weft_cond_t; a group with nothing safe to handle blocks on its input
 *   pthreads      the same with pthread_mutex_t + pthread_cond_t, one pthread per group,
 *                 all confined to the first P CPUs
 *   openmp_tasks  a task runtime (no blocking): rounds of one `omp task` per group, each
 *                 handling what is safe and returning; a taskwait between rounds
 *
 * for 50, 300 and 600 LPs per thread (--lps; --nlp LPs in all, so 24, 4 and 2 threads at
 * the default 1200) and an event-handling time swept over --work-us. Every parallel run
 * must handle exactly the serial run's events (count and checksum), else "WRONG RESULT"
 * and exit 3. Each point: one warm-up, then --reps runs; median and min..max.
 *
 * usage: weft_a4_pdes [--out DIR] [--nlp 1200] [--lps 50,300,600] [--work-us 0,1,5,20]
 *                     [--t-end 20] [--procs 1,2] [--reps 3]
 *                     [--libs serial,weft,pthreads,openmp_tasks] [--quick]
 * --quick: --work-us 0,2,10 --t-end 10. Prints a table and writes DIR/A4.json. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "A4_model.h"
#include "bench.h"
#include "weft/weft.h"

#define MAX_REPS 20
#define MAX_LIST 16

/* ---- synchronization: weft ---------------------------------------------------------- */

static void *w_mutex_new(void) {
  weft_mutex_t *m = malloc(sizeof *m);
  if (!m) abort();
  bench_check(weft_mutex_init(m), "weft_mutex_init");
  return m;
}
static void *w_cond_new(void) {
  weft_cond_t *c = malloc(sizeof *c);
  if (!c) abort();
  bench_check(weft_cond_init(c), "weft_cond_init");
  return c;
}
static void w_lock(void *m) { bench_check(weft_mutex_lock(m), "weft_mutex_lock"); }
static void w_unlock(void *m) { bench_check(weft_mutex_unlock(m), "weft_mutex_unlock"); }
static void w_wait(void *c, void *m) { bench_check(weft_cond_wait(c, m), "weft_cond_wait"); }
static void w_signal(void *c) { bench_check(weft_cond_signal(c), "weft_cond_signal"); }
static void w_free_mutex(void *m) { weft_mutex_destroy(m); free(m); }
static void w_free_cond(void *c) { weft_cond_destroy(c); free(c); }
static const a4_sync_t weft_sync = {w_mutex_new, w_cond_new, w_lock, w_unlock,
                                    w_wait, w_signal, w_free_mutex, w_free_cond};

/* ---- synchronization: POSIX threads --------------------------------------------------- */

static void *p_mutex_new(void) {
  pthread_mutex_t *m = malloc(sizeof *m);
  if (!m) abort();
  pthread_mutex_init(m, NULL);
  return m;
}
static void *p_cond_new(void) {
  pthread_cond_t *c = malloc(sizeof *c);
  if (!c) abort();
  pthread_cond_init(c, NULL);
  return c;
}
static void p_lock(void *m) { pthread_mutex_lock(m); }
static void p_unlock(void *m) { pthread_mutex_unlock(m); }
static void p_wait(void *c, void *m) { pthread_cond_wait(c, m); }
static void p_signal(void *c) { pthread_cond_signal(c); }
static void p_free_mutex(void *m) { pthread_mutex_destroy(m); free(m); }
static void p_free_cond(void *c) { pthread_cond_destroy(c); free(c); }
static const a4_sync_t pthread_sync = {p_mutex_new, p_cond_new, p_lock, p_unlock,
                                       p_wait, p_signal, p_free_mutex, p_free_cond};

/* ---- the versions ---------------------------------------------------------------------- */

typedef struct run_arg { a4_sim_t *s; a4_group_t *g; } run_arg_t;

static void *group_main(void *arg) {
  run_arg_t *a = arg;
  while (!a4_step(a->s, a->g, 1)) {
  }
  return NULL;
}

static void run_weft(a4_sim_t *s) {
  weft_thread_t **t = malloc((size_t)s->g * sizeof *t);
  run_arg_t *a = malloc((size_t)s->g * sizeof *a);
  for (int i = 0; i < s->g; i++) {
    a[i] = (run_arg_t){s, &s->groups[i]};
    bench_check(weft_create(&t[i], NULL, group_main, &a[i]), "weft_create");
  }
  for (int i = 0; i < s->g; i++) bench_check(weft_join(t[i], NULL), "weft_join");
  free(t);
  free(a);
}

static void run_pthreads(a4_sim_t *s, int p) {
  cpu_set_t set = bench_cpus_first(p);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setaffinity_np(&at, sizeof set, &set);
  pthread_t *t = malloc((size_t)s->g * sizeof *t);
  run_arg_t *a = malloc((size_t)s->g * sizeof *a);
  for (int i = 0; i < s->g; i++) {
    a[i] = (run_arg_t){s, &s->groups[i]};
    if (pthread_create(&t[i], &at, group_main, &a[i]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(2);
    }
  }
  for (int i = 0; i < s->g; i++) pthread_join(t[i], NULL);
  pthread_attr_destroy(&at);
  free(t);
  free(a);
}

#ifdef _OPENMP
static void run_omp(a4_sim_t *s, int p) {
#pragma omp parallel num_threads(p)
#pragma omp single
  for (int left = s->g; left > 0;) {
    for (int i = 0; i < s->g; i++) {
      a4_group_t *g = &s->groups[i];
      if (g->done) continue;
#pragma omp task firstprivate(g)
      a4_step(s, g, 0);
    }
#pragma omp taskwait
    left = 0;
    for (int i = 0; i < s->g; i++) left += !s->groups[i].done;
  }
}
#endif

/* ---- driver ------------------------------------------------------------------------- */

static double units_per_us;

static void burn(long units) { a4_burn((double)units); }

typedef struct point {
  const char *lib;
  int lps, threads, p;
  double work_us;
  long events;
  double waits, steps;
  double s[MAX_REPS];
  bench_summary_t sum;
} point_t;

static point_t points[1024];
static int npoints, reps = 3, nlp = 1200;
static double t_end = 20;

/* Runs one point; the serial run's events/checksum are the reference for the rest. */
static void run_point(const char *lib, int lps, double work_us, int p, long *ref_events,
                      uint64_t *ref_sum) {
  if (npoints == (int)(sizeof points / sizeof *points)) return;
  point_t *pt = &points[npoints++];
  *pt = (point_t){.lib = lib, .lps = lps, .threads = nlp / lps, .p = p, .work_us = work_us};
  const a4_sync_t *sync = !strcmp(lib, "weft") ? &weft_sync : !strcmp(lib, "serial") ? NULL : &pthread_sync;
  for (int r = -1; r < reps; r++) {
    a4_sim_t s;
    if (a4_init(&s, nlp, lps, t_end, work_us * units_per_us, sync) != 0) {
      fprintf(stderr, "bad set-up: %d LPs, %d per thread\n", nlp, lps);
      exit(1);
    }
    long events = 0;
    uint64_t sum = 0;
    double t0 = bench_now_ns();
    if (!sync) {
      a4_run_serial(&s, &events, &sum);
    } else {
      if (!strcmp(lib, "weft")) run_weft(&s);
      else if (!strcmp(lib, "pthreads")) run_pthreads(&s, p);
#ifdef _OPENMP
      else run_omp(&s, p);
#endif
    }
    double ns = bench_now_ns() - t0;
    long waits = 0, steps = 0;
    for (int i = 0; sync && i < s.g; i++) {
      events += s.groups[i].events;
      sum += s.groups[i].checksum;
      waits += s.groups[i].waits;
      steps += s.groups[i].steps;
    }
    a4_free(&s);
    if (!sync) {
      *ref_events = events;
      *ref_sum = sum;
    } else if (events != *ref_events || sum != *ref_sum) {
      fprintf(stderr, "WRONG RESULT: %s, %d LPs per thread, P=%d: %ld events (serial %ld)\n", lib,
              lps, p, events, *ref_events);
      exit(3);
    }
    pt->events = events;
    if (r >= 0) {
      pt->s[r] = ns * 1e-9;
      pt->waits += (double)waits / reps;
      pt->steps += (double)steps / reps;
    }
  }
  pt->sum = bench_summarize(pt->s, reps);
}

int main(int argc, char **argv) {
  bench_machine_t m;
  bench_machine_read(&m);
  const char *out = "bench-results", *libs = "serial,weft,pthreads,openmp_tasks";
  double lps[MAX_LIST] = {50, 300, 600}, work[MAX_LIST] = {0, 1, 5, 20}, procs[MAX_LIST] = {1, 2};
  int nl = 3, nw = 4, np = 2;
  int quick = bench_args_has(argc, argv, "--quick");
  if (quick) {
    nw = bench_parse_doubles("0,2,10", work, MAX_LIST);
    t_end = 10;
  }
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "A4.json"),
      {"--nlp", BENCH_INT, &nlp, NULL, 0, "LPs in all (1200)"},
      {"--lps", BENCH_DOUBLES, lps, &nl, MAX_LIST, "LPs per thread (50,300,600)"},
      {"--work-us", BENCH_DOUBLES, work, &nw, MAX_LIST, "event-handling time, us (0,1,5,20)"},
      {"--t-end", BENCH_DOUBLE, &t_end, NULL, 0, "simulated time (20)"},
      {"--procs", BENCH_DOUBLES, procs, &np, MAX_LIST, "processors (1,2)"},
      BENCH_OPT_REPS(reps),
      {"--libs", BENCH_STR, &libs, NULL, 0, "serial,weft,pthreads,openmp_tasks"},
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, 9, "A4: conservative parallel discrete-event simulation");
  if (reps < 1 || reps > MAX_REPS) bench_die(argv[0], "--reps out of range");
  for (int i = 0; i < nl; i++)
    if (lps[i] < 1 || nlp % (int)lps[i] != 0 || nlp / (int)lps[i] < 2) {
      fprintf(stderr, "--nlp %d must be a multiple of each --lps value, with at least 2 threads\n", nlp);
      return 1;
    }
#ifndef _OPENMP
  if (bench_list_has(libs, "openmp_tasks")) printf("openmp_tasks: not built (no OpenMP): skipped\n");
#endif
  units_per_us = bench_calibrate(burn);
  printf("A4 PDES: %d LPs, t_end %g, machine %s, %d cores; %.1f work units per us; 1 warm-up + "
         "%d runs per point\n", nlp, t_end, m.model, m.cores, units_per_us, reps);
  for (int l = 0; l < nl; l++)
    for (int w = 0; w < nw; w++) {
      long ref_events = 0;
      uint64_t ref_sum = 0;
      printf("%d LPs per thread, %g us per event ...\n", (int)lps[l], work[w]);
      fflush(stdout);
      run_point("serial", (int)lps[l], work[w], 1, &ref_events, &ref_sum);
      for (int k = 0; k < np; k++) {
        int p = (int)procs[k];
        if (p < 1 || p > WEFT_MAX_VPS) continue;
        if (bench_list_has(libs, "weft")) {
          weft_config_t cfg;
          weft_config_init(&cfg);
          cfg.nvps = p;
          bench_check(weft_init(&cfg), "weft_init");
          run_point("weft", (int)lps[l], work[w], p, &ref_events, &ref_sum);
          bench_check(weft_shutdown(), "weft_shutdown");
        }
        if (bench_list_has(libs, "pthreads")) run_point("pthreads", (int)lps[l], work[w], p, &ref_events, &ref_sum);
#ifdef _OPENMP
        if (bench_list_has(libs, "openmp_tasks"))
          run_point("openmp_tasks", (int)lps[l], work[w], p, &ref_events, &ref_sum);
#endif
      }
    }

  printf("\n%-13s %4s %4s %7s %3s %8s %10s  %-21s %8s %10s\n", "library", "LPs", "thr", "work us",
         "P", "events", "median s", "[min .. max] s", "vs serial", "waits/run");
  for (int i = 0; i < npoints; i++) {
    point_t *pt = &points[i];
    double ser = 0;
    for (int j = 0; j < npoints; j++)
      if (!strcmp(points[j].lib, "serial") && points[j].lps == pt->lps && points[j].work_us == pt->work_us)
        ser = points[j].sum.median;
    printf("%-13s %4d %4d %7g %3d %8ld %10.4f  [%7.4f .. %7.4f] %7.2fx %10.0f\n", pt->lib, pt->lps,
           pt->threads, pt->work_us, pt->p, pt->events, pt->sum.median, pt->sum.min, pt->sum.max,
           ser > 0 ? ser / pt->sum.median : 0, pt->waits);
  }

  bench_json_t f;
  if (bench_json_start(&f, out, "A4.json", &m) != 0) return 2;
  bench_json_obj(&f, "config");
  bench_json_int(&f, "lps_total", nlp);
  bench_json_num(&f, "t_end", t_end);
  bench_json_int(&f, "reps", reps);
  bench_json_int(&f, "warmup_runs", 1);
  bench_json_num(&f, "lookahead", LOOKAHEAD);
  bench_json_num(&f, "service_mean", SERVICE_MEAN);
  bench_json_num(&f, "p_remote", P_REMOTE);
  bench_json_num(&f, "units_per_us", units_per_us);
  bench_json_str(&f, "model", "PHOLD-style production line: one job per station, service lookahead + "
                 "exponential, next station in the same group or (p_remote) the next group; groups in a "
                 "ring, null-message conservative synchronization");
  bench_json_end(&f);
  bench_json_arr(&f, "results");
  for (int i = 0; i < npoints; i++) {
    point_t *pt = &points[i];
    bench_json_record(&f, "lib", pt->lib, pt->p, pt->p > m.cores);
    bench_json_int(&f, "lps_per_thread", pt->lps);
    bench_json_int(&f, "threads", pt->threads);
    bench_json_num(&f, "work_us", pt->work_us);
    bench_json_int(&f, "events", pt->events);
    bench_json_num(&f, "waits_per_run", pt->waits);
    bench_json_num(&f, "steps_per_run", pt->steps);
    bench_json_times(&f, pt->sum, pt->s, reps);
    bench_json_end(&f);
  }
  return bench_json_finish(&f) == 0 ? 0 : 2;
}
