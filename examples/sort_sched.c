/* examples/sort_sched.c - mergesort of a linked list and quicksort of an array with
 * one thread per recursive call (Active Threads §8.1), run under the default scheduler and
 * each of the eight FIFO/LIFO variants of weft/schedlib.h. Prints the time and the
 * number of threads per run. (bench/apps/A2_sort.c measures the same with
 * repetitions, peak memory and page faults.)
 *
 * usage: weft_example_sort_sched [N [LEAF [NVPS]]]   (defaults 100000 10 0=all CPUs)
 *
 * Each call on more than LEAF records creates a thread per half and joins both;
 * smaller pieces are sorted in place: a list by insertion sort, an array range by
 * bubble sort. Affinity hints name the data: a piece starting at record lo gets
 * virtual processor lo * 64 / N, so the memory-conscious variants keep each 1/64 of
 * the records on one VP. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <weft/weft.h>

typedef struct rec {
  struct rec *next; /* the list, for mergesort */
  int key;
} rec_t;

static long n, leaf;
static rec_t *arr; /* the array, for quicksort */
static weft_bundle_t *bundle;
static _Atomic long threads;

/* Runs fn(a) and fn(b) in a thread each, with affinity hints from lo_a and lo_b. */
static void fork2(void *(*fn)(void *), void *a, long lo_a, void *b, long lo_b) {
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = bundle;
  weft_thread_t *t[2];
  attr.vproc = WEFT_VPROC((int)(lo_a * 64 / n));
  if (weft_create(&t[0], &attr, fn, a) != 0) abort();
  attr.vproc = WEFT_VPROC((int)(lo_b * 64 / n));
  if (weft_create(&t[1], &attr, fn, b) != 0) abort();
  atomic_fetch_add_explicit(&threads, 2, memory_order_relaxed);
  weft_join(t[0], NULL);
  weft_join(t[1], NULL);
}

/* ---- mergesort of a linked list ---- */

typedef struct piece {
  rec_t *head; /* in: a list of len records; out: the same, sorted */
  long len, lo;
} piece_t;

static void *msort(void *arg) {
  piece_t *p = arg;
  if (p->len <= leaf) { /* insertion sort */
    rec_t *sorted = NULL;
    while (p->head) {
      rec_t *r = p->head, **at = &sorted;
      p->head = r->next;
      while (*at && (*at)->key <= r->key) at = &(*at)->next;
      r->next = *at;
      *at = r;
    }
    p->head = sorted;
    return NULL;
  }
  long half = p->len / 2;
  rec_t *mid = p->head;
  for (long i = 1; i < half; i++) mid = mid->next;
  piece_t a = {p->head, half, p->lo}, b = {mid->next, p->len - half, p->lo + half};
  mid->next = NULL; /* cut the list in two */
  fork2(msort, &a, a.lo, &b, b.lo);
  rec_t *out = NULL, **tail = &out, *x = a.head, *y = b.head;
  while (x && y) {
    if (x->key <= y->key) { *tail = x; x = x->next; }
    else { *tail = y; y = y->next; }
    tail = &(*tail)->next;
  }
  *tail = x ? x : y;
  p->head = out;
  return NULL;
}

/* ---- quicksort of an array ---- */

typedef struct range { long lo, hi; } range_t; /* [lo, hi) */

static void *qsort_rec(void *arg) {
  range_t r = *(range_t *)arg;
  if (r.hi - r.lo <= leaf) { /* bubble sort */
    for (long end = r.hi; end > r.lo + 1; end--)
      for (long i = r.lo + 1; i < end; i++)
        if (arr[i - 1].key > arr[i].key) { rec_t x = arr[i]; arr[i] = arr[i - 1]; arr[i - 1] = x; }
    return NULL;
  }
  int pivot = arr[r.lo + (r.hi - r.lo) / 2].key;
  long i = r.lo, j = r.hi - 1;
  while (i <= j) { /* Hoare partition */
    while (arr[i].key < pivot) i++;
    while (arr[j].key > pivot) j--;
    if (i <= j) { rec_t x = arr[i]; arr[i++] = arr[j]; arr[j--] = x; }
  }
  range_t a = {r.lo, j + 1}, b = {i, r.hi};
  fork2(qsort_rec, &a, a.lo, &b, b.lo);
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
  if (n < 2 || leaf < 1 || weft_init(&cfg) != 0) return 1;
  rec_t *recs = malloc((size_t)n * sizeof *recs);
  if (!recs) return 1;
  printf("%ld records, leaf %ld, %d VPs\n%-22s %-10s %10s %10s\n", n, leaf, weft_vp_count(),
         "scheduler", "sort", "seconds", "threads");
  for (int v = -1; v < 8; v++) { /* -1: the root bundle's default scheduler */
    for (int merge = 1; merge >= 0; merge--) {
      srand(1);
      for (long i = 0; i < n; i++) {
        recs[i].key = rand();
        recs[i].next = i + 1 < n ? &recs[i + 1] : NULL;
      }
      bundle = NULL;
      if (v >= 0 && weft_schedlib_bundle_create(&bundle, NULL, (unsigned)v) != 0) return 1;
      atomic_store(&threads, 0);
      double t0 = now_s(), s;
      int sorted = 1;
      if (merge) {
        piece_t all = {recs, n, 0};
        msort(&all);
        s = now_s() - t0;
        long k = 0;
        for (rec_t *r = all.head; r; r = r->next, k++)
          if (r->next && r->key > r->next->key) sorted = 0;
        if (k != n) sorted = 0;
      } else {
        arr = recs;
        range_t all = {0, n};
        qsort_rec(&all);
        s = now_s() - t0;
        for (long i = 1; i < n; i++)
          if (arr[i - 1].key > arr[i].key) sorted = 0;
      }
      if (!sorted) { fprintf(stderr, "not sorted!\n"); return 1; }
      if (bundle && weft_schedlib_bundle_destroy(bundle) != 0) return 1;
      printf("%-22s %-10s %10.4f %10ld\n", v < 0 ? "default" : weft_schedlib_kind_name((unsigned)v),
             merge ? "mergesort" : "quicksort", s, atomic_load(&threads));
    }
  }
  free(recs);
  return weft_shutdown() == 0 ? 0 : 1;
}
