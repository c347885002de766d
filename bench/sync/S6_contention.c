/* S6_contention.c - the contention benchmark of C-Threads §5.2-5.3 (BENCHMARKS.md S6):
 * L locks, each with a pool of T threads; each thread does W units of simulated work,
 * takes its lock, increments the lock's counter, releases it, and repeats. The total
 * number of iterations (lock acquisitions) is fixed (--iters, default 100,000), split
 * evenly over the L*T threads. Timed: from creating the first thread until the last one
 * is joined (C-Threads includes thread creation and deletion in its times).
 *
 * One unit of work is a chain of dependent multiply-adds, calibrated at start-up (its
 * ns is printed and written to the JSON). Every point checks that the counters add up
 * to the iterations (a wrong count is reported as a library bug and exits 3).
 *
 * Parts:
 *   sweep W   set-ups 2x10, 5x4, 1x40 (locks x threads per lock) at P = all cores,
 *             W in --w (default 0,5,10,20,40,60,80,100)
 *   sweep P   1 lock x 40 threads at W in --pw (default 0,20,40,80), P = 1..cores, and
 *             --oversub (default 4) labelled oversubscribed
 *   Fig 5-5   weft_sync_stats() for 1 lock x 40 threads at the W of prime contention:
 *             the W of the 1x40 W sweep where weft (defaults) missed the mutex most
 *             often, or --prime-w. "blocked" can exceed "missed": a woken waiter that
 *             loses the lock again (competitive unlock) blocks again
 * weft variants (weft_sync_set_spin): "weft" defaults (Busy Spinning + Spin Polling),
 * "weft_nospin" (spin 0, polling on), "weft_nopoll" (spinning on, polling off),
 * "weft_noboth" (spin 0, polling off). P = weft's nvps. Baseline "pthreads":
 * pthread_mutex_t, the same L*T pthreads confined to the first P CPUs (not run
 * oversubscribed).
 *
 * usage: weft_s6_contention [--out DIR] [--reps R] [--iters N] [--w LIST] [--pw LIST]
 *                           [--oversub P] [--prime-w W] [--quick]
 * Prints tables (median, min..max of R repetitions) and writes DIR/S6.json. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

#define MAX_REPS 50
#define MAX_W 32
#define MAX_THREADS 64
#define MAX_LOCKS 8
#define UNIT_LOOP 16 /* multiply-adds per unit of work */

enum { V_WEFT, V_NOSPIN, V_NOPOLL, V_NOBOTH, V_PTHREADS, NVARIANTS };
static const char *const vname[NVARIANTS] = {"weft", "weft_nospin", "weft_nopoll", "weft_noboth",
                                             "pthreads"};
static const int vspin[NVARIANTS][2] = {{400, 1}, {0, 1}, {400, 0}, {0, 0}, {0, 0}};

typedef struct setup { int locks, threads; const char *name; } setup_t;
static const setup_t setups[] = {{2, 10, "2x10"}, {5, 4, "5x4"}, {1, 40, "1x40"}};
#define NSETUPS 3

/* ---- simulated work ---- */
static inline uint64_t work(int units, uint64_t x) {
  for (int u = 0; u < units; u++)
    for (int k = 0; k < UNIT_LOOP; k++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      __asm__ volatile("" : "+r"(x));
    }
  return x;
}

static void burn(long units) {
  uint64_t x = work(units, 1);
  __asm__ volatile("" : : "r"(x));
}

/* ---- one run ---- */
typedef struct lockslot {
  weft_mutex_t wm;
  pthread_mutex_t pm;
  long counter;
  char pad[64];
} __attribute__((aligned(64))) lockslot_t;

static lockslot_t slots[MAX_LOCKS];
static int cur_w;
static long cur_iters; /* per thread */

static void *weft_worker(void *arg) {
  lockslot_t *s = arg;
  uint64_t x = (uintptr_t)arg;
  for (long i = 0; i < cur_iters; i++) {
    x = work(cur_w, x);
    weft_mutex_lock(&s->wm);
    s->counter++;
    weft_mutex_unlock(&s->wm);
  }
  return (void *)(uintptr_t)(x & 1);
}

static void *pthread_worker(void *arg) {
  lockslot_t *s = arg;
  uint64_t x = (uintptr_t)arg;
  for (long i = 0; i < cur_iters; i++) {
    x = work(cur_w, x);
    pthread_mutex_lock(&s->pm);
    s->counter++;
    pthread_mutex_unlock(&s->pm);
  }
  return (void *)(uintptr_t)(x & 1);
}

/* Runs one repetition; returns seconds. weft must be running with the wanted nvps (for
 * weft variants); pthreads get the first p CPUs. */
static double run_once(int variant, const setup_t *su, int w, long total, int p) {
  int nthreads = su->locks * su->threads;
  cur_w = w;
  cur_iters = total / nthreads;
  for (int l = 0; l < su->locks; l++) {
    weft_mutex_init(&slots[l].wm);
    pthread_mutex_init(&slots[l].pm, NULL);
    slots[l].counter = 0;
  }
  double t0, t1;
  if (variant != V_PTHREADS) {
    weft_thread_t *t[MAX_THREADS];
    t0 = bench_now_ns();
    for (int i = 0; i < nthreads; i++)
      bench_check(weft_create(&t[i], NULL, weft_worker, &slots[i % su->locks]), "weft_create");
    for (int i = 0; i < nthreads; i++) bench_check(weft_join(t[i], NULL), "weft_join");
    t1 = bench_now_ns();
  } else {
    cpu_set_t cpus = bench_cpus_first(p);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus);
    pthread_t t[MAX_THREADS];
    t0 = bench_now_ns();
    for (int i = 0; i < nthreads; i++)
      if (pthread_create(&t[i], &attr, pthread_worker, &slots[i % su->locks]) != 0) exit(2);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    t1 = bench_now_ns();
    pthread_attr_destroy(&attr);
  }
  long sum = 0;
  for (int l = 0; l < su->locks; l++) {
    sum += slots[l].counter;
    if (variant != V_PTHREADS) bench_check(weft_mutex_destroy(&slots[l].wm), "weft_mutex_destroy");
    pthread_mutex_destroy(&slots[l].pm);
  }
  if (sum != cur_iters * nthreads) {
    fprintf(stderr, "S6: WRONG COUNT %ld, expected %ld (%s %s W=%d P=%d): library bug\n", sum,
            cur_iters * nthreads, vname[variant], su->name, w, p);
    exit(3);
  }
  return (t1 - t0) * 1e-9;
}

/* ---- points ---- */
typedef struct point {
  const char *part; /* "W" or "P" */
  int setup, w, p, variant, oversub;
  long iters;
  bench_summary_t s; /* seconds */
  weft_sync_stats_t stats; /* summed over the repetitions (weft variants) */
} point_t;

#define MAX_POINTS 512
static point_t pts[MAX_POINTS];
static int npts;
static int reps = 5;
static long total_iters = 100000;

static void run_point(const char *part, int setup, int w, int p, int variant, int oversub) {
  point_t *pt = &pts[npts++];
  *pt = (point_t){part, setup, w, p, variant, oversub, total_iters, {0, 0, 0}, {0}};
  if (variant != V_PTHREADS) bench_check(weft_sync_set_spin(vspin[variant][0], vspin[variant][1]), "set_spin");
  double v[MAX_REPS];
  run_once(variant, &setups[setup], w, total_iters / 10, p); /* warm-up */
  for (int r = 0; r < reps; r++) {
    weft_sync_stats_reset();
    v[r] = run_once(variant, &setups[setup], w, total_iters, p);
    weft_sync_stats_t st;
    weft_sync_stats(&st);
    pt->stats.mutex_missed += st.mutex_missed;
    pt->stats.acquired_spinning += st.acquired_spinning;
    pt->stats.acquired_polling += st.acquired_polling;
    pt->stats.blocked += st.blocked;
    pt->stats.idled += st.idled;
  }
  pt->s = bench_summarize(v, reps);
  bench_check(weft_sync_set_spin(400, 1), "set_spin");
}

static point_t *find(const char *part, int setup, int w, int p, int variant) {
  for (int i = 0; i < npts; i++)
    if (!strcmp(pts[i].part, part) && pts[i].setup == setup && pts[i].w == w && pts[i].p == p &&
        pts[i].variant == variant)
      return &pts[i];
  return NULL;
}

static void weft_start(int nvps) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps;
  bench_check(weft_init(&cfg), "weft_init");
}

static void cell(char *buf, size_t len, const point_t *pt) {
  if (!pt) {
    snprintf(buf, len, "-");
    return;
  }
  snprintf(buf, len, "%.1f (%.1f-%.1f)", pt->s.median * 1e3, pt->s.min * 1e3, pt->s.max * 1e3);
}

static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0; }

int main(int argc, char **argv) {
  const char *out = "bench-results";
  int ws[MAX_W] = {0, 5, 10, 20, 40, 60, 80, 100}, nw = 8;
  int pws[MAX_W] = {0, 20, 40, 80}, npw = 4;
  int oversub = 4, prime_w = -1;
  int quick = bench_args_has(argc, argv, "--quick");
  if (quick) {
    reps = 3;
    total_iters = 40000;
    nw = bench_parse_ints("0,10,40,80", ws, MAX_W);
    npw = bench_parse_ints("0,40", pws, MAX_W);
  }
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "S6.json"),
      BENCH_OPT_REPS(reps),
      {"--iters", BENCH_LONG, &total_iters, NULL, 0, "lock acquisitions in all (100000)"},
      {"--w", BENCH_INTS, ws, &nw, MAX_W, "work units for the W sweep (0,5,10,20,40,60,80,100)"},
      {"--pw", BENCH_INTS, pws, &npw, MAX_W, "work units for the P sweep (0,20,40,80)"},
      {"--oversub", BENCH_INT, &oversub, NULL, 0, "oversubscribed P (4)"},
      {"--prime-w", BENCH_INT, &prime_w, NULL, 0, "W of the statistics (else: the most contended)"},
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, 8, "S6: the contention benchmark of C-Threads 5.2-5.3");
  if (reps < 1 || reps > MAX_REPS || total_iters < 40 || nw < 1)
    bench_die(argv[0], "--reps 1..MAX_REPS, --iters at least 40, --w not empty");

  bench_machine_t m;
  bench_machine_read(&m);
  int cores = m.cores;
  double unit_ns = 1000.0 / bench_calibrate(burn);
  printf("S6 contention benchmark (C-Threads §5.2-5.3)\n");
  printf("machine: %s, %d cores, Linux %s\n", m.model, cores, m.kernel);
  printf("one unit of work = %d multiply-adds = %.1f ns; %ld iterations per point; %d repetitions;"
         " times in ms: median (min-max)\n", UNIT_LOOP, unit_ns, total_iters, reps);
  fflush(stdout);

  /* ---- sweep W at P = cores ---- */
  weft_start(cores);
  for (int su = 0; su < NSETUPS; su++)
    for (int i = 0; i < nw; i++)
      for (int v = 0; v < NVARIANTS; v++) run_point("W", su, ws[i], cores, v, 0);
  bench_check(weft_shutdown(), "weft_shutdown");

  char c[NVARIANTS][64];
  for (int su = 0; su < NSETUPS; su++) {
    printf("\nsweep W: %s (%d locks x %d threads), P=%d\n%5s", setups[su].name, setups[su].locks,
           setups[su].threads, cores, "W");
    for (int v = 0; v < NVARIANTS; v++) printf("  %-22s", vname[v]);
    printf("\n");
    for (int i = 0; i < nw; i++) {
      printf("%5d", ws[i]);
      for (int v = 0; v < NVARIANTS; v++) {
        cell(c[v], sizeof c[v], find("W", su, ws[i], cores, v));
        printf("  %-22s", c[v]);
      }
      printf("\n");
    }
  }

  /* prime contention: the W of the 1x40 sweep where weft (defaults) missed the mutex
   * most often (the smallest such W on a tie) */
  if (prime_w < 0) {
    double best = -1;
    for (int i = 0; i < nw; i++) {
      point_t *a = find("W", 2, ws[i], cores, V_WEFT);
      double r = (double)a->stats.mutex_missed;
      if (r > best) best = r, prime_w = ws[i];
    }
  }

  /* ---- sweep P for 1 lock x 40 threads ---- */
  int ps[8], np = 0;
  for (int p = 1; p <= cores && np < 7; p++) ps[np++] = p;
  if (oversub > cores) ps[np++] = oversub;
  for (int j = 0; j < np; j++) {
    weft_start(ps[j]);
    for (int i = 0; i < npw; i++)
      for (int v = 0; v < NVARIANTS; v++) {
        if (v == V_PTHREADS && ps[j] > cores) continue;
        run_point("P", 2, pws[i], ps[j], v, ps[j] > cores);
      }
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  printf("\nsweep P: 1x40 (1 lock x 40 threads)\n%5s %4s", "W", "P");
  for (int v = 0; v < NVARIANTS; v++) printf("  %-22s", vname[v]);
  printf("\n");
  for (int i = 0; i < npw; i++)
    for (int j = 0; j < np; j++) {
      printf("%5d %4d", pws[i], ps[j]);
      for (int v = 0; v < NVARIANTS; v++) {
        cell(c[v], sizeof c[v], find("P", 2, pws[i], ps[j], v));
        printf("  %-22s", c[v]);
      }
      printf("%s\n", ps[j] > cores ? "  (oversubscribed)" : "");
    }

  /* ---- Fig 5-5 ---- */
  if (!find("W", 2, prime_w, cores, V_WEFT)) {
    weft_start(cores);
    for (int v = 0; v < V_PTHREADS; v++) run_point("W", 2, prime_w, cores, v, 0);
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  printf("\nFig 5-5 statistics: 1 lock x 40 threads, W=%d (prime contention), P=%d, "
         "%ld attempts per repetition, summed over %d repetitions\n",
         prime_w, cores, total_iters, reps);
  printf("%-28s", "");
  for (int v = 0; v < V_PTHREADS; v++) printf("  %-26s", vname[v]);
  printf("\n");
  static const char *const what[] = {"Mutex missed (of total)", "Acquired while Busy Spinning",
                                     "Acquired while Spin Polling", "Mutex blocked (of misses)",
                                     "Processors idled (of blocked)"};
  for (int k = 0; k < 5; k++) {
    printf("%-28s", what[k]);
    for (int v = 0; v < V_PTHREADS; v++) {
      const point_t *pt = find("W", 2, prime_w, cores, v);
      const weft_sync_stats_t *s = &pt->stats;
      uint64_t attempts = (uint64_t)pt->iters / 40 * 40 * (uint64_t)reps;
      uint64_t val[] = {s->mutex_missed, s->acquired_spinning, s->acquired_polling, s->blocked,
                        s->idled};
      double p = k == 0 ? pct(val[0], attempts) : k < 4 ? pct(val[k], s->mutex_missed)
                                                         : pct(val[4], s->blocked);
      char buf[64];
      snprintf(buf, sizeof buf, "%llu (%.1f%%)", (unsigned long long)val[k], p);
      printf("  %-26s", buf);
    }
    printf("\n");
  }
  printf("(percentages as C-Threads Fig 5-5: missed of total attempts; spinning, polling and "
         "blocked of misses; idled of blocked. \"C-Thread lost while Spin Polling\" has no weft "
         "counter.)\n");

  /* ---- JSON ---- */
  bench_json_t f;
  if (bench_json_start(&f, out, "S6.json", &m) != 0) return 2;
  bench_json_str(&f, "benchmark", "S6");
  bench_json_num(&f, "unit_ns", unit_ns);
  char unit[64];
  snprintf(unit, sizeof unit, "%d dependent multiply-adds", UNIT_LOOP);
  bench_json_str(&f, "unit", unit);
  bench_json_int(&f, "iterations", total_iters);
  bench_json_int(&f, "reps", reps);
  bench_json_int(&f, "prime_w", prime_w);
  bench_json_arr(&f, "results");
  for (int i = 0; i < npts; i++) {
    const point_t *pt = &pts[i];
    const setup_t *su = &setups[pt->setup];
    bench_json_record(&f, "lib", vname[pt->variant], pt->p, pt->oversub);
    bench_json_str(&f, "part", pt->part);
    bench_json_str(&f, "setup", su->name);
    bench_json_int(&f, "locks", su->locks);
    bench_json_int(&f, "threads_per_lock", su->threads);
    bench_json_int(&f, "W", pt->w);
    bench_json_summary(&f, "_s", pt->s, 1);
    bench_json_num(&f, "ns_per_iteration", pt->s.median * 1e9 / (double)pt->iters);
    if (pt->variant != V_PTHREADS) {
      bench_json_obj(&f, "stats");
      bench_json_int(&f, "attempts", pt->iters / (su->locks * su->threads) * (su->locks * su->threads) * reps);
      bench_json_int(&f, "mutex_missed", (long)pt->stats.mutex_missed);
      bench_json_int(&f, "acquired_spinning", (long)pt->stats.acquired_spinning);
      bench_json_int(&f, "acquired_polling", (long)pt->stats.acquired_polling);
      bench_json_int(&f, "blocked", (long)pt->stats.blocked);
      bench_json_int(&f, "idled", (long)pt->stats.idled);
      bench_json_end(&f);
    }
    bench_json_end(&f);
  }
  return bench_json_finish(&f) == 0 ? 0 : 2;
}
