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
 * usage: weft_bench_A1 [--rows 1024] [--cols 4096] [--reps 7] [--procs 1,2]
 *                      [--json PATH] [--quick]
 * --quick: 3 repetitions and a 512 x 2048 matrix. JSON records: {"variant","P",
 * "median_s","min_s","max_s","spread","speedup_vs_p1","speedup_vs_serial","rows","cols"}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "weft/weft.h"

static int rows = 1024, cols = 4096;
static float *v, *m, *r;
static weft_sem_t done;

static void check(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, weft_strerror(rc));
    exit(2);
  }
}

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
  if (kind >= 0) check(weft_schedlib_bundle_create(&b, NULL, (unsigned)kind), "bundle");
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = b;
  attr.detached = 1;
  for (int c = 0; c < cols; c++) {
    attr.vproc = WEFT_VPROC((kind >= 0 && (kind & WEFT_SCHED_AFFINITY)) ? c / 64 : -1);
    check(weft_create(NULL, &attr, vxcol, (void *)(intptr_t)c), "weft_create");
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
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!strcmp(argv[i], "--quick")) { reps = 3; rows = 512; cols = 2048; }
    else if (!strcmp(argv[i], "--procs") && i + 1 < argc) {
      nprocs = 0;
      for (char *s = strtok(argv[++i], ","); s && nprocs < 8; s = strtok(NULL, ",")) procs[nprocs++] = atoi(s);
    } else {
      fprintf(stderr, "usage: %s [--rows R] [--cols C] [--reps N] [--procs 1,2] [--json PATH] [--quick]\n", argv[0]);
      return 1;
    }
  }
  if (rows < 1 || cols < 1 || reps < 1 || reps > 64 || nprocs < 1) return 1;
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
    check(weft_init(&cfg), "weft_init");
    check(weft_sem_init(&done, 0), "sem");
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
    check(weft_sem_destroy(&done), "sem destroy");
    check(weft_shutdown(), "weft_shutdown");
  }
  FILE *jf = json ? fopen(json, "w") : NULL;
  if (json && !jf) {
    perror(json);
    return 1;
  }
  if (jf) {
    fprintf(jf, "{\"id\": \"A1\", \"machine\": ");
    bench_machine_json(jf, &mc);
    fprintf(jf, ",\n \"rows\": %d, \"cols\": %d, \"reps\": %d,\n \"records\": [", rows, cols, reps);
  }
  int first = 1;
  for (int k = 0; k < nv; k++)
    for (int pi = 0; pi < nprocs; pi++) {
      bench_summary_t s = sum[k][pi];
      double vs1 = med[k][0] / s.median, vss = med[0][0] / s.median;
      printf("%-14s %2d %10.5f %9.5f..%-9.5f %8.2f %10.2f%s\n", variants[k].name, procs[pi], s.median,
             s.min, s.max, vs1, vss, procs[pi] > mc.cores ? "  (oversubscribed)" : "");
      if (jf) {
        fprintf(jf, "%s\n  {\"variant\": \"%s\", \"P\": %d, \"median_s\": %.6f, \"min_s\": %.6f, "
                "\"max_s\": %.6f, \"spread\": %.4f, \"speedup_vs_p1\": %.4f, "
                "\"speedup_vs_serial\": %.4f, \"rows\": %d, \"cols\": %d%s}",
                first ? "" : ",", variants[k].name, procs[pi], s.median, s.min, s.max,
                (s.max - s.min) / s.median, vs1, vss, rows, cols,
                procs[pi] > mc.cores ? ", \"oversubscribed\": true" : "");
        first = 0;
      }
    }
  if (jf) {
    fprintf(jf, "\n ]}\n");
    fclose(jf);
  }
  free(v);
  free(m);
  free(r);
  return 0;
}
