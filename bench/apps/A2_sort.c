/* A2_sort.c - A2 of BENCHMARKS.md (Active Threads §8.1, Fig 20-24): parallel mergesort of
 * a LINKED LIST of N records (insertion sort below LEAF) and quicksort of an ARRAY of N
 * records (bubble sort below LEAF), one thread per recursive call, under each of the
 * eight FIFO/LIFO x lazy/eager x affinity/none schedulers of weft/schedlib.h; the root
 * bundle's default scheduler and a serial run (plain recursion, no threads) are the
 * baselines, measured in the same run.
 *
 * Every measurement runs in a fresh process (fork; the parent never starts weft), so
 * that the child's peak resident set (getrusage ru_maxrss, via wait4) and minor page
 * faults belong to that run alone: they count the stacks the scheduler made live
 * (each touched stack page is resident) on top of the records. The serial row gives
 * what the records and the program cost without threads. The child also reports the
 * threads created (weft_debug_stats) and its run time (the sort only, not init).
 *
 * Affinity hints name the data: a call on records [lo, hi) of N gets virtual
 * processor lo * 64 / N (64 groups), so the AFFINITY variants keep each 1/64 of the
 * data on one VP (Active Threads Fig 9 does the same with col / 64).
 *
 * usage: weft_a2_sort [--n 100000] [--leaf 10] [--reps 5] [--procs 1,2]
 *                      [--out DIR] [--quick]
 * --quick: 3 repetitions. Output: a table on stdout; with --out DIR, the records (DIR/A2.json)
 * {"variant","sort","P","median_s","min_s","max_s","spread","peak_rss_kib",
 *  "peak_rss_min_kib","peak_rss_max_kib","minflt","threads","reps","n","leaf"}
 * (memory and faults: medians over the repetitions). */
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

typedef struct rec {
  struct rec *next; /* the list (mergesort) */
  int key;
  int id;
} rec_t;

static long n = 100000, leaf = 10;
static weft_bundle_t *bundle; /* NULL: the root bundle */
static int serial;            /* 1: plain recursion, no threads */

/* Runs fn(a) and fn(b), each in its own thread (or inline when serial), and waits. */
static void fork2(void *(*fn)(void *), void *a, long lo_a, void *b, long lo_b) {
  if (serial) {
    fn(a);
    fn(b);
    return;
  }
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = bundle;
  weft_thread_t *t[2];
  attr.vproc = WEFT_VPROC((int)(lo_a * 64 / n));
  bench_check(weft_create(&t[0], &attr, fn, a), "weft_create");
  attr.vproc = WEFT_VPROC((int)(lo_b * 64 / n));
  bench_check(weft_create(&t[1], &attr, fn, b), "weft_create");
  weft_join(t[0], NULL);
  weft_join(t[1], NULL);
}

/* ---- mergesort of a linked list -------------------------------------------------- */

typedef struct lsort {
  rec_t *head; /* in: the list; out: sorted */
  long len, lo; /* its length, and the index of its first record in the input */
} lsort_t;

static rec_t *list_insertion(rec_t *head) {
  rec_t *sorted = NULL;
  while (head) {
    rec_t *r = head, **p = &sorted;
    head = head->next;
    while (*p && (*p)->key <= r->key) p = &(*p)->next;
    r->next = *p;
    *p = r;
  }
  return sorted;
}

static void *msort(void *arg) {
  lsort_t *s = arg;
  if (s->len <= leaf) {
    s->head = list_insertion(s->head);
    return NULL;
  }
  long half = s->len / 2;
  rec_t *mid = s->head;
  for (long i = 1; i < half; i++) mid = mid->next;
  lsort_t a = {s->head, half, s->lo}, b = {mid->next, s->len - half, s->lo + half};
  mid->next = NULL;
  fork2(msort, &a, a.lo, &b, b.lo);
  rec_t *out = NULL, **tail = &out, *x = a.head, *y = b.head;
  while (x && y) {
    if (x->key <= y->key) { *tail = x; x = x->next; }
    else { *tail = y; y = y->next; }
    tail = &(*tail)->next;
  }
  *tail = x ? x : y;
  s->head = out;
  return NULL;
}

/* ---- quicksort of an array ---------------------------------------------------------- */

static rec_t *arr;

typedef struct qsort_arg { long lo, hi; } qsort_arg_t; /* [lo, hi) */

static void bubble(long lo, long hi) {
  for (long end = hi; end > lo + 1; end--)
    for (long i = lo + 1; i < end; i++)
      if (arr[i - 1].key > arr[i].key) {
        rec_t x = arr[i]; arr[i] = arr[i - 1]; arr[i - 1] = x;
      }
}

static void *qsort_rec(void *arg) {
  qsort_arg_t r = *(qsort_arg_t *)arg;
  if (r.hi - r.lo <= leaf) {
    bubble(r.lo, r.hi);
    return NULL;
  }
  int pivot = arr[r.lo + (r.hi - r.lo) / 2].key;
  long i = r.lo, j = r.hi - 1;
  while (i <= j) { /* Hoare partition */
    while (arr[i].key < pivot) i++;
    while (arr[j].key > pivot) j--;
    if (i <= j) { rec_t x = arr[i]; arr[i++] = arr[j]; arr[j--] = x; }
  }
  qsort_arg_t a = {r.lo, j + 1}, b = {i, r.hi};
  fork2(qsort_rec, &a, a.lo, &b, b.lo);
  return NULL;
}

/* ---- one measurement, in a child process ------------------------------------------- */

typedef struct result { double secs; long threads; int ok; } result_t;

/* variant: -2 serial, -1 default (root bundle), 0..7 a weft/schedlib.h kind. */
static result_t child_run(int variant, int merge, int p) {
  result_t res = {0, 0, 0};
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = p;
  bench_check(weft_init(&cfg), "weft_init");
  serial = variant == -2;
  bundle = NULL;
  if (variant >= 0) bench_check(weft_schedlib_bundle_create(&bundle, NULL, (unsigned)variant), "bundle");
  rec_t *recs = malloc((size_t)n * sizeof *recs);
  if (!recs) _exit(2);
  srand(1);
  for (long i = 0; i < n; i++) {
    recs[i].key = rand();
    recs[i].id = (int)i;
    recs[i].next = i + 1 < n ? &recs[i + 1] : NULL;
  }
  double t0 = bench_now_ns();
  if (merge) {
    lsort_t all = {recs, n, 0};
    msort(&all);
    res.secs = (bench_now_ns() - t0) * 1e-9;
    long k = 0;
    res.ok = 1;
    for (rec_t *r = all.head; r; r = r->next, k++)
      if (r->next && r->key > r->next->key) res.ok = 0;
    if (k != n) res.ok = 0;
  } else {
    arr = recs;
    qsort_arg_t all = {0, n};
    qsort_rec(&all);
    res.secs = (bench_now_ns() - t0) * 1e-9;
    res.ok = 1;
    for (long i = 1; i < n; i++)
      if (arr[i - 1].key > arr[i].key) res.ok = 0;
  }
  weft_debug_stats_t st;
  weft_debug_stats(&st);
  res.threads = (long)st.created;
  if (bundle) bench_check(weft_schedlib_bundle_destroy(bundle), "bundle destroy");
  free(recs);
  bench_check(weft_shutdown(), "weft_shutdown");
  return res;
}

typedef struct sample { double secs; long rss_kib, minflt, threads; } sample_t;

static int measure(int variant, int merge, int p, sample_t *out) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fd[0]);
    result_t r = child_run(variant, merge, p);
    ssize_t w = write(fd[1], &r, sizeof r);
    _exit(w == (ssize_t)sizeof r ? 0 : 3);
  }
  close(fd[1]);
  result_t r;
  ssize_t got = read(fd[0], &r, sizeof r);
  close(fd[0]);
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid) return -1;
  if (got != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !r.ok) return -1;
  out->secs = r.secs;
  out->rss_kib = ru.ru_maxrss; /* KiB on Linux */
  out->minflt = ru.ru_minflt;
  out->threads = r.threads;
  return 0;
}

static const char *variant_name(int v) {
  return v == -2 ? "serial" : v == -1 ? "default" : weft_schedlib_kind_name((unsigned)v);
}

static double median_l(long *v, int k) {
  double d[64];
  for (int i = 0; i < k; i++) d[i] = (double)v[i];
  return bench_summarize(d, k).median;
}

int main(int argc, char **argv) {
  int reps = 5, procs[8] = {1, 2}, nprocs = 2;
  const char *out = NULL;
  int quick = bench_args_has(argc, argv, "--quick");
  if (quick) reps = 3;
  const bench_opt_t opts[] = {
      BENCH_OPT_N(n, "records (100000)"),
      {"--leaf", BENCH_LONG, &leaf, NULL, 0, "serial sort at or below (10)"},
      BENCH_OPT_REPS(reps),
      BENCH_OPT_PROCS(procs, nprocs, 8),
      BENCH_OPT_OUT(out, "A2.json"),
      BENCH_OPT_QUICK(quick),
  };
  bench_args(argc, argv, opts, 6, "A2: sorts with a thread per call under the eight schedlib schedulers");
  if (n < 2 || leaf < 1 || reps < 1 || reps > 64 || nprocs < 1)
    bench_die(argv[0], "--n at least 2, --leaf and --procs positive, --reps 1..64");
  bench_machine_t m;
  bench_machine_read(&m);
  bench_json_t jf;
  if (out) {
    if (bench_json_start(&jf, out, "A2.json", &m) != 0) return 2;
    bench_json_str(&jf, "id", "A2");
    bench_json_int(&jf, "n", n);
    bench_json_int(&jf, "leaf", leaf);
    bench_json_int(&jf, "reps", reps);
    bench_json_arr(&jf, "records");
  }
  printf("A2: %ld records, leaf %ld, %d reps, fresh process per run; %s, %d cores%s\n", n, leaf,
         reps, m.model, m.cores, "");
  printf("%-20s %-9s %2s %10s %18s %12s %10s %9s\n", "variant", "sort", "P", "median s",
         "min..max s", "peak RSS KiB", "minflt", "threads");
  for (int merge = 1; merge >= 0; merge--)
    for (int pi = 0; pi < nprocs; pi++)
      for (int v = -2; v < 8; v++) {
        int p = procs[pi];
        if (v == -2 && pi > 0) continue; /* serial: once (it runs on one VP anyway) */
        double secs[64];
        long rss[64] = {0}, flt[64] = {0}, thr = 0;
        int ok = 1;
        for (int r = 0; r < reps && ok; r++) {
          sample_t s = {0, 0, 0, 0};
          if (measure(v, merge, p, &s) != 0) ok = 0;
          secs[r] = s.secs;
          rss[r] = s.rss_kib;
          flt[r] = s.minflt;
          thr = s.threads;
        }
        if (!ok) {
          fprintf(stderr, "%s %s P=%d: run failed\n", variant_name(v), merge ? "mergesort" : "quicksort", p);
          continue;
        }
        long rmin = rss[0], rmax = rss[0];
        for (int r = 1; r < reps; r++) {
          if (rss[r] < rmin) rmin = rss[r];
          if (rss[r] > rmax) rmax = rss[r];
        }
        bench_summary_t s = bench_summarize(secs, reps);
        double mr = median_l(rss, reps), mf = median_l(flt, reps);
        int pp = v == -2 ? 1 : p;
        printf("%-20s %-9s %2d %10.4f %8.4f..%-8.4f %12.0f %10.0f %9ld\n", variant_name(v),
               merge ? "mergesort" : "quicksort", pp, s.median, s.min, s.max, mr, mf, thr);
        fflush(stdout);
        if (out) {
          bench_json_record(&jf, "variant", variant_name(v), pp, pp > m.cores);
          bench_json_str(&jf, "sort", merge ? "mergesort" : "quicksort");
          bench_json_summary(&jf, "_s", s, 1);
          bench_json_num(&jf, "spread", s.median > 0 ? (s.max - s.min) / s.median : 0);
          bench_json_num(&jf, "peak_rss_kib", mr);
          bench_json_int(&jf, "peak_rss_min_kib", rmin);
          bench_json_int(&jf, "peak_rss_max_kib", rmax);
          bench_json_num(&jf, "minflt", mf);
          bench_json_int(&jf, "threads", thr);
          bench_json_int(&jf, "reps", reps);
          bench_json_int(&jf, "n", n);
          bench_json_int(&jf, "leaf", leaf);
          bench_json_end(&jf);
        }
      }
  if (out && bench_json_finish(&jf) != 0) return 2;
  return 0;
}
