/* A1_vecmat.c - A1 of BENCHMARKS.md (Active Threads §4, Fig 7-10): vector x matrix,
 * r[cols] = v[rows] x m[rows][cols] (row-major floats), one thread per column; each
 * thread walks its column with stride `cols`, so neighbouring columns share cache
 * lines. Variants (threads signal a semaphore; the creator waits for all):
 *   serial        the same loop, no threads (baseline)
 *   default       root bundle, no annotation (Active Threads Fig 7, AT_UNBOUND)
 *   fifo          weft/schedlib.h FIFO bundle, no annotation
 *   fifo_affinity FIFO + AFFINITY bundle, virtual processor col / 64: a group of 64
 *                 neighbouring columns per virtual processor (Fig 9)
 * Each variant runs at P = 1, 2 (--procs): weft is started with P VPs, one warm-up
 * then --reps timed runs; median, min..max. Speedup = median at P=1 of the same
 * variant / median at P (and vs serial). This machine's cores are shared; P beyond
 * its cores is marked oversubscribed.
 *
 * usage: weft_a1_vecmat [--rows 1024] [--cols 4096] [--reps 7] [--procs 1,2]
 *                      [--out DIR] [--quick]
 * --quick: 3 repetitions and a 512 x 2048 matrix. JSON records: {"variant","P",
 * "median_s","min_s","max_s","spread","speedup_vs_p1","speedup_vs_serial","rows","cols"}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/weft.h"

static int rows = 1024, cols = 4096;
static float *v, *m, *r;
static weft_sem_t done;

static void column(int col) {
  float s = 0;
  for (int i = 0; i < rows; i++) s += v[i] * m[(size_t)i * cols + col];
  r[col] = s;
}

static void *vxcol(void *arg) {
  column((int)(intptr_t)arg);
  weft_sem_signal(&done);
  return NULL;
}

/* kind: -2 serial, -1 root bundle, else a weft/schedlib.h kind. Returns seconds. */
static double run(int kind) {
  double t0 = bench_now_ns();
  if (kind == -2) {
    for (int c = 0; c < cols; c++) column(c);
    return (bench_now_ns() - t0) * 1e-9;
  }
  weft_bundle_t *b = NULL;
  if (kind >= 0) bench_check(weft_schedlib_bundle_create(&b, NULL, (unsigned)kind), "bundle");
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = b;
  attr.detached = 1;
  for (int c = 0; c < cols; c++) {
    attr.vproc = WEFT_VPROC((kind >= 0 && (kind & WEFT_SCHED_AFFINITY)) ? c / 64 : -1);
    bench_check(weft_create(NULL, &attr, vxcol, (void *)(intptr_t)c), "weft_create");
  }
  for (int c = 0; c < cols; c++) weft_sem_wait(&done);
  double s = (bench_now_ns() - t0) * 1e-9;
  /* detached threads may still be finishing after their signal */
  if (b)
    while (weft_schedlib_bundle_destroy(b) == WEFT_EBUSY) weft_sleep_ns(10000);
  return s;
}

static int verify(void) {
  for (int c = 0; c < cols; c += 97) {
    double s = 0;
    for (int i = 0; i < rows; i++) s += (double)v[i] * m[(size_t)i * cols + c];
    double d = s - r[c];
    if (d < 0) d = -d;
    if (d > 1e-2 * (s < 0 ? -s : s) + 1e-3) return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  int reps = 7, procs[8] = {1, 2}, nprocs = 2;
  const char *out = NULL;
  int quick = bench_args_has(argc, argv, "--quick");
  if (quick) reps = 3, rows = 512, cols = 2048;
  const bench_opt_t opts[] = {
      {"--rows", BENCH_INT, &rows, NULL, 0, "matrix rows (1024)"},
      {"--cols", BENCH_INT, &cols, NULL, 0, "matrix columns (4096)"},
      BENCH_OPT_REPS(reps),
      BENCH_OPT_PROCS(procs, nprocs, 8),
      BENCH_OPT_OUT(out, "A1.json"),
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, 6, "A1: vector x matrix, one thread per column, with and without affinity");
  if (rows < 1 || cols < 1 || reps < 1 || reps > 64 || nprocs < 1)
    bench_die(argv[0], "--rows, --cols, --procs must be positive, --reps 1..64");
  v = malloc((size_t)rows * sizeof *v);
  m = malloc((size_t)rows * cols * sizeof *m);
  r = malloc((size_t)cols * sizeof *r);
  if (!v || !m || !r) return 1;
  srand(1);
  for (int i = 0; i < rows; i++) v[i] = (float)(rand() % 100) / 10.0f;
  for (size_t i = 0; i < (size_t)rows * cols; i++) m[i] = (float)(rand() % 100) / 10.0f;
  bench_machine_t mc;
  bench_machine_read(&mc);
  printf("A1: %d x %d matrix, one thread per column, %d reps; %s, %d cores\n", rows, cols, reps,
         mc.model, mc.cores);
  printf("%-14s %2s %10s %20s %8s %10s\n", "variant", "P", "median s", "min..max s", "vs P=1",
         "vs serial");
  static const struct { const char *name; int kind; } variants[] = {
      {"serial", -2}, {"default", -1}, {"fifo", WEFT_SCHED_FIFO},
      {"fifo_affinity", WEFT_SCHED_FIFO | WEFT_SCHED_AFFINITY}};
  const int nv = (int)(sizeof variants / sizeof variants[0]);
  double med[4][8] = {{0}};
  bench_summary_t sum[4][8];
  for (int pi = 0; pi < nprocs; pi++) {
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = procs[pi];
    bench_check(weft_init(&cfg), "weft_init");
    bench_check(weft_sem_init(&done, 0), "sem");
    for (int k = 0; k < nv; k++) {
      double t[64];
      memset(r, 0, (size_t)cols * sizeof *r);
      run(variants[k].kind); /* warm-up */
      if (!verify()) {
        fprintf(stderr, "%s: wrong result\n", variants[k].name);
        return 1;
      }
      for (int i = 0; i < reps; i++) t[i] = run(variants[k].kind);
      sum[k][pi] = bench_summarize(t, reps);
      med[k][pi] = sum[k][pi].median;
    }
    bench_check(weft_sem_destroy(&done), "sem destroy");
    bench_check(weft_shutdown(), "weft_shutdown");
  }
  bench_json_t jf;
  if (out) {
    if (bench_json_start(&jf, out, "A1.json", &mc) != 0) return 2;
    bench_json_str(&jf, "id", "A1");
    bench_json_int(&jf, "rows", rows);
    bench_json_int(&jf, "cols", cols);
    bench_json_int(&jf, "reps", reps);
    bench_json_arr(&jf, "records");
  }
  for (int k = 0; k < nv; k++)
    for (int pi = 0; pi < nprocs; pi++) {
      bench_summary_t s = sum[k][pi];
      double vs1 = med[k][0] / s.median, vss = med[0][0] / s.median;
      printf("%-14s %2d %10.5f %9.5f..%-9.5f %8.2f %10.2f%s\n", variants[k].name, procs[pi], s.median,
             s.min, s.max, vs1, vss, procs[pi] > mc.cores ? "  (oversubscribed)" : "");
      if (out) {
        bench_json_record(&jf, "variant", variants[k].name, procs[pi], procs[pi] > mc.cores);
        bench_json_summary(&jf, "_s", s, 1);
        bench_json_num(&jf, "spread", (s.max - s.min) / s.median);
        bench_json_num(&jf, "speedup_vs_p1", vs1);
        bench_json_num(&jf, "speedup_vs_serial", vss);
        bench_json_int(&jf, "rows", rows);
        bench_json_int(&jf, "cols", cols);
        bench_json_end(&jf);
      }
    }
  if (out && bench_json_finish(&jf) != 0) return 2;
  free(v);
  free(m);
  free(r);
  return 0;
}
