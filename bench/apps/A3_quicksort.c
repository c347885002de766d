/* A3_quicksort.c - A3 (BENCHMARKS.md; Active Threads §8.1 Fig 25-27): quicksort of
 * 2,000,000 records with one thread per recursive call, switching to bubble sort at or
 * below the leaf size, over leaf sizes 5..150: run time, speedup over a true serial
 * version, and the number of threads created.
 *
 *   serial   the same recursion with direct calls and no synchronization (Active Threads' "true
 *            serial version": thread creations replaced by calls)
 *   weft     every recursive call is a detached weft thread (the root included); nvps = P.
 *            Quicksort does its work before it splits (partition, then two children) and
 *            nothing after, so a parent never waits for its children: it finishes, and
 *            its stack goes back to the free list. Completion: every call adds the
 *            records it placed for good (a leaf's records, a partition's pivot) to one
 *            atomic counter; the thread that brings it to N wakes the main thread.
 *   openmp_tasks (when built with OpenMP) the same recursion with `#pragma omp task`
 *            per call (a task system without stacks), P = omp threads.
 *
 * Records: 8 bytes (32-bit key, 32-bit index), keys from a fixed-seed xorshift; every run
 * sorts a fresh copy and is checked (sorted, and the indices a permutation of 0..N-1);
 * a wrong result prints "WRONG RESULT" and exits 3. Partition: median of three, Hoare.
 * Each point: one warm-up, then --reps runs; median and min..max.
 *
 * usage: weft_a3_quicksort [--out DIR] [--n 2000000] [--leaf 5,10,...,150] [--procs 1,2]
 *                          [--reps 3] [--libs serial,weft,openmp_tasks]
 * Prints a table and writes DIR/A3.json. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench.h"
#include "weft/weft.h"

#define MAX_REPS 20
#define MAX_LEAVES 32
#define MAX_PROCS 16

typedef struct rec { uint32_t key, idx; } rec_t;

static rec_t *input, *work;
static long n_records = 2000000;
static int leaf_size;

static void bubble(rec_t *a, long n) {
  for (long i = n - 1; i > 0; i--) {
    int swapped = 0;
    for (long j = 0; j < i; j++)
      if (a[j].key > a[j + 1].key) {
        rec_t t = a[j];
        a[j] = a[j + 1];
        a[j + 1] = t;
        swapped = 1;
      }
    if (!swapped) break;
  }
}

static inline void swap(rec_t *a, long i, long j) {
  rec_t t = a[i];
  a[i] = a[j];
  a[j] = t;
}

/* Partitions a[0..n) (n > 3) around the median of three; returns the pivot's final
 * index p: a[0..p) <= a[p] <= a[p+1..n). */
static long partition(rec_t *a, long n) {
  long m = n / 2;
  if (a[m].key < a[0].key) swap(a, m, 0);
  if (a[n - 1].key < a[0].key) swap(a, n - 1, 0);
  if (a[n - 1].key < a[m].key) swap(a, n - 1, m);
  swap(a, m, n - 2); /* pivot at n-2; a[0] <= pivot <= a[n-1] are sentinels */
  uint32_t pv = a[n - 2].key;
  long i = 0, j = n - 2;
  for (;;) {
    while (a[++i].key < pv) {}
    while (pv < a[--j].key) {}
    if (i >= j) break;
    swap(a, i, j);
  }
  swap(a, i, n - 2);
  return i;
}

/* ---- serial --------------------------------------------------------------------- */

static long serial_calls;

static void qs_serial(rec_t *a, long n) {
  serial_calls++;
  if (n <= leaf_size || n <= 3) {
    bubble(a, n);
    return;
  }
  long p = partition(a, n);
  qs_serial(a, p);
  qs_serial(a + p + 1, n - p - 1);
}

/* ---- weft ----------------------------------------------------------------------- */

enum { W_IDLE, W_WAITING, W_DONE };
static _Atomic int waiter_state;
static weft_thread_t *waiter;
static _Atomic long placed;         /* records in their final place */
static _Atomic long threads_created;
static weft_attr_t detached;

typedef struct job { rec_t *a; long n; } job_t;

static void waiter_release(void *arg) {
  (void)arg;
  if (atomic_exchange(&waiter_state, W_WAITING) == W_DONE) weft_thread_unblock(waiter);
}

static void add_placed(long k) {
  if (atomic_fetch_add(&placed, k) + k == n_records &&
      atomic_exchange(&waiter_state, W_DONE) == W_WAITING)
    weft_thread_unblock(waiter);
}

static void *qs_weft(void *arg);

/* The job travels in the thread's argument: (a, n) packed into a small heap block would
 * cost a malloc per thread, so the pair is encoded as an index into `work` and a length
 * in one 64-bit word (N < 2^32). */
static void *pack(rec_t *a, long n) { return (void *)(uintptr_t)(((uint64_t)(a - work) << 32) | (uint64_t)n); }

static void spawn(rec_t *a, long n) {
  atomic_fetch_add_explicit(&threads_created, 1, memory_order_relaxed);
  bench_check(weft_create(NULL, &detached, qs_weft, pack(a, n)), "weft_create");
}

static void *qs_weft(void *arg) {
  uint64_t v = (uint64_t)(uintptr_t)arg;
  rec_t *a = work + (v >> 32);
  long n = (long)(v & 0xffffffffu);
  if (n <= leaf_size || n <= 3) {
    bubble(a, n);
    if (n > 0) add_placed(n);
    return NULL;
  }
  long p = partition(a, n);
  add_placed(1);
  spawn(a, p);
  spawn(a + p + 1, n - p - 1);
  return NULL;
}

static double run_weft(long *threads) {
  atomic_store(&waiter_state, W_IDLE);
  atomic_store(&placed, 0);
  atomic_store(&threads_created, 0);
  waiter = weft_self();
  double t0 = bench_now_ns();
  spawn(work, n_records);
  weft_thread_block(waiter_release, NULL);
  double ns = bench_now_ns() - t0;
  *threads = atomic_load(&threads_created);
  return ns;
}

/* ---- OpenMP tasks ----------------------------------------------------------------- */

#ifdef _OPENMP
static _Atomic long tasks_created;

static void qs_omp(rec_t *a, long n) {
  if (n <= leaf_size || n <= 3) {
    bubble(a, n);
    return;
  }
  long p = partition(a, n);
  atomic_fetch_add_explicit(&tasks_created, 2, memory_order_relaxed);
#pragma omp task firstprivate(a, p)
  qs_omp(a, p);
#pragma omp task firstprivate(a, p, n)
  qs_omp(a + p + 1, n - p - 1);
}

static double run_omp(int p, long *tasks) {
  atomic_store(&tasks_created, 1);
  double t0 = bench_now_ns();
#pragma omp parallel num_threads(p)
#pragma omp single
  qs_omp(work, n_records);
  double ns = bench_now_ns() - t0;
  *tasks = atomic_load(&tasks_created);
  return ns;
}
#endif

/* ---- driver ----------------------------------------------------------------------- */

static void make_input(void) {
  uint64_t x = 88172645463325252ull;
  for (long i = 0; i < n_records; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    input[i] = (rec_t){(uint32_t)(x >> 16), (uint32_t)i};
  }
}

static void verify(const char *who) {
  static unsigned char *seen;
  if (!seen) seen = malloc((size_t)n_records);
  memset(seen, 0, (size_t)n_records);
  for (long i = 0; i < n_records; i++) {
    if ((i > 0 && work[i - 1].key > work[i].key) || work[i].idx >= (uint32_t)n_records ||
        seen[work[i].idx]++) {
      fprintf(stderr, "WRONG RESULT: %s, leaf %d, at %ld\n", who, leaf_size, i);
      exit(3);
    }
  }
}

typedef struct point {
  const char *lib;
  int leaf, p;
  long threads;
  double s[MAX_REPS];
  bench_summary_t sum;
} point_t;

static point_t points[MAX_LEAVES * (1 + 2 * MAX_PROCS)];
static int npoints, reps = 3;

static point_t *run_point(const char *lib, int p) {
  point_t *pt = &points[npoints++];
  *pt = (point_t){.lib = lib, .leaf = leaf_size, .p = p};
  for (int r = -1; r < reps; r++) {
    memcpy(work, input, (size_t)n_records * sizeof *work);
    double ns;
    long threads = 0;
    if (!strcmp(lib, "serial")) {
      serial_calls = 0;
      double t0 = bench_now_ns();
      qs_serial(work, n_records);
      ns = bench_now_ns() - t0;
      threads = serial_calls; /* calls, reported as the tree's size */
    } else if (!strcmp(lib, "weft")) {
      ns = run_weft(&threads);
#ifdef _OPENMP
    } else {
      ns = run_omp(p, &threads);
#else
    } else {
      ns = 0;
#endif
    }
    verify(lib);
    if (r >= 0) pt->s[r] = ns * 1e-9;
    pt->threads = threads;
  }
  pt->sum = bench_summarize(pt->s, reps);
  return pt;
}

int main(int argc, char **argv) {
  bench_machine_t m;
  bench_machine_read(&m);
  const char *out = "bench-results", *libs = "serial,weft,openmp_tasks";
  int leaves[MAX_LEAVES] = {5, 10, 20, 30, 40, 50, 60, 80, 100, 150}, nleaves = 10;
  int procs[MAX_PROCS] = {1, 2}, nprocs = 2;
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "A3.json"),
      BENCH_OPT_N(n_records, "records (2000000)"),
      {"--leaf", BENCH_INTS, leaves, &nleaves, MAX_LEAVES, "leaf sizes (5,10,20,...,150)"},
      BENCH_OPT_PROCS(procs, nprocs, MAX_PROCS),
      BENCH_OPT_REPS(reps),
      {"--libs", BENCH_STR, &libs, NULL, 0, "serial,weft,openmp_tasks"},
  };
  bench_args(argc, argv, opts, 6, "A3: quicksort, one detached thread per call");
  if (reps < 1 || reps > MAX_REPS) bench_die(argv[0], "--reps out of range");
  if (n_records < 4 || n_records >= (1L << 31)) {
    fprintf(stderr, "--n must be in 4 .. 2^31-1\n");
    return 1;
  }
  input = malloc((size_t)n_records * sizeof *input);
  work = malloc((size_t)n_records * sizeof *work);
  if (!input || !work) {
    fprintf(stderr, "out of memory\n");
    return 2;
  }
  make_input();
  weft_attr_init(&detached);
  detached.detached = 1;
#ifndef _OPENMP
  if (bench_list_has(libs, "openmp_tasks")) printf("openmp_tasks: not built (no OpenMP): skipped\n");
#endif

  printf("A3 quicksort: %ld records, machine %s, %d cores; 1 warm-up + %d runs per point\n",
         n_records, m.model, m.cores, reps);
  for (int l = 0; l < nleaves; l++) {
    leaf_size = leaves[l];
    printf("leaf %d ...\n", leaf_size);
    fflush(stdout);
    if (bench_list_has(libs, "serial")) run_point("serial", 1);
    for (int k = 0; k < nprocs; k++) {
      int p = procs[k];
      if (p < 1 || p > WEFT_MAX_VPS) continue;
      if (bench_list_has(libs, "weft")) {
        weft_config_t cfg;
        weft_config_init(&cfg);
        cfg.nvps = p;
        bench_check(weft_init(&cfg), "weft_init");
        run_point("weft", p);
        bench_check(weft_shutdown(), "weft_shutdown");
      }
#ifdef _OPENMP
      if (bench_list_has(libs, "openmp_tasks")) run_point("openmp_tasks", p);
#endif
    }
  }

  printf("\n%-5s %-13s %3s %10s %10s  %-21s %8s\n", "leaf", "library", "P", "threads",
         "median s", "[min .. max] s", "speedup");
  for (int i = 0; i < npoints; i++) {
    point_t *pt = &points[i];
    double ser = 0;
    for (int j = 0; j < npoints; j++)
      if (points[j].leaf == pt->leaf && !strcmp(points[j].lib, "serial")) ser = points[j].sum.median;
    printf("%-5d %-13s %3d %10ld %10.4f  [%7.4f .. %7.4f] %7.2fx\n", pt->leaf, pt->lib, pt->p,
           pt->threads, pt->sum.median, pt->sum.min, pt->sum.max, ser > 0 ? ser / pt->sum.median : 0);
  }

  bench_json_t f;
  if (bench_json_start(&f, out, "A3.json", &m) != 0) return 2;
  bench_json_obj(&f, "config");
  bench_json_int(&f, "records", n_records);
  bench_json_int(&f, "reps", reps);
  bench_json_int(&f, "warmup_runs", 1);
  bench_json_int(&f, "record_bytes", (long)sizeof(rec_t));
  bench_json_str(&f, "leaf_sort", "bubble sort");
  bench_json_str(&f, "partition", "median of three, Hoare");
  bench_json_str(&f, "threads", "serial: recursive calls; weft: detached threads, one per call; "
                 "openmp_tasks: tasks, one per call");
  bench_json_end(&f);
  bench_json_arr(&f, "results");
  for (int i = 0; i < npoints; i++) {
    point_t *pt = &points[i];
    bench_json_record(&f, "lib", pt->lib, pt->p, pt->p > m.cores);
    bench_json_int(&f, "leaf", pt->leaf);
    bench_json_int(&f, "threads", pt->threads);
    bench_json_times(&f, pt->sum, pt->s, reps);
    bench_json_end(&f);
  }
  return bench_json_finish(&f) == 0 ? 0 : 2;
}
