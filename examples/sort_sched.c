/* examples/sort_sched.c - mergesort and quicksort with one thread per recursive call
 * (papers/001 8.1), run under the default scheduler and each of the eight FIFO/LIFO
 * variants of weft/schedlib.h. Prints the time and the number of threads per run.
 *
 * usage: weft_example_sort_sched [N [LEAF [NVPS]]]   (defaults 100000 10 0=all CPUs)
 *
 * Each call on a range of more than LEAF elements creates a thread per half and joins
 * both; smaller ranges are sorted in place (insertion sort). Affinity hints name the
 * data: a range starting at element lo gets virtual processor lo * 64 / N, so the
 * memory-conscious variants keep each 1/64 of the array on one VP. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/weft.h>

static long n, leaf;
static int *data, *tmp;
static weft_bundle_t *bundle;
static _Atomic long threads;

typedef struct range {
  long lo, hi; /* [lo, hi) */
  int merge;   /* 1: mergesort, 0: quicksort */
} range_t;

static void insertion(long lo, long hi) {
  for (long i = lo + 1; i < hi; i++)
    for (long j = i; j > lo && data[j - 1] > data[j]; j--) {
      int x = data[j]; data[j] = data[j - 1]; data[j - 1] = x;
    }
}

static void *sort(void *arg);

/* Sorts both halves, each in its own thread, and waits for them. */
static void fork2(range_t a, range_t b) {
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = bundle;
  weft_thread_t *t[2];
  range_t r[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    attr.affinity = (int)(r[i].lo * 64 / n);
    if (weft_create(&t[i], &attr, sort, &r[i]) != 0) abort();
  }
  atomic_fetch_add_explicit(&threads, 2, memory_order_relaxed);
  for (int i = 0; i < 2; i++) weft_join(t[i], NULL);
}

static void *sort(void *arg) {
  range_t r = *(range_t *)arg;
  if (r.hi - r.lo <= leaf) {
    insertion(r.lo, r.hi);
  } else if (r.merge) {
    long mid = r.lo + (r.hi - r.lo) / 2;
    fork2((range_t){r.lo, mid, 1}, (range_t){mid, r.hi, 1});
    long i = r.lo, j = mid, k = r.lo;
    while (i < mid && j < r.hi) tmp[k++] = data[i] <= data[j] ? data[i++] : data[j++];
    while (i < mid) tmp[k++] = data[i++];
    while (j < r.hi) tmp[k++] = data[j++];
    memcpy(data + r.lo, tmp + r.lo, (size_t)(r.hi - r.lo) * sizeof *data);
  } else {
    int pivot = data[r.lo + (r.hi - r.lo) / 2];
    long i = r.lo, j = r.hi - 1;
    while (i <= j) { /* Hoare partition */
      while (data[i] < pivot) i++;
      while (data[j] > pivot) j--;
      if (i <= j) { int x = data[i]; data[i++] = data[j]; data[j--] = x; }
    }
    fork2((range_t){r.lo, j + 1, 0}, (range_t){i, r.hi, 0});
  }
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  n = argc > 1 ? atol(argv[1]) : 100000;
  leaf = argc > 2 ? atol(argv[2]) : 10;
  weft_config_t cfg;
  weft_config_init(&cfg);
  if (argc > 3) cfg.nvps = atoi(argv[3]);
  if (n < 1 || leaf < 1 || weft_init(&cfg) != 0) return 1;
  data = malloc((size_t)n * sizeof *data);
  tmp = malloc((size_t)n * sizeof *tmp);
  printf("%ld elements, leaf %ld, %d VPs\n%-22s %-10s %10s %10s\n", n, leaf, weft_vp_count(),
         "scheduler", "sort", "seconds", "threads");
  for (int v = -1; v < 8; v++) { /* -1: the root bundle's default scheduler */
    for (int merge = 1; merge >= 0; merge--) {
      srand(1);
      for (long i = 0; i < n; i++) data[i] = rand();
      bundle = NULL;
      if (v >= 0 && weft_schedlib_bundle_create(&bundle, NULL, (unsigned)v) != 0) return 1;
      atomic_store(&threads, 0);
      range_t all = {0, n, merge};
      double t0 = now_s();
      sort(&all);
      double s = now_s() - t0;
      for (long i = 1; i < n; i++)
        if (data[i - 1] > data[i]) { fprintf(stderr, "not sorted!\n"); return 1; }
      if (bundle && weft_schedlib_bundle_destroy(bundle) != 0) return 1;
      printf("%-22s %-10s %10.4f %10ld\n", v < 0 ? "default" : weft_schedlib_kind_name((unsigned)v),
             merge ? "mergesort" : "quicksort", s, atomic_load(&threads));
    }
  }
  free(data);
  free(tmp);
  return weft_shutdown() == 0 ? 0 : 1;
}
