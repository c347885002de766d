/* examples/vecmat.c - vector x matrix with one thread per column, without and with
 * affinity annotations (Active Threads §4, Fig 7 and Fig 9).
 *
 *   r[c] = sum over i of v[i] * m[i][c]        (m row-major: a column is strided)
 *
 * Without annotations every column's thread may run on any VP, so neighbouring
 * columns, which share cache lines, are spread over VPs. With them, the threads go to
 * a bundle whose scheduler is memory-conscious (WEFT_SCHED_FIFO | WEFT_SCHED_AFFINITY)
 * and column c gets virtual processor c / 64: 64 neighbouring columns form a group
 * that runs on one VP. The only changes are the lines marked "new".
 *
 * usage: weft_example_vecmat [ROWS [COLS [NVPS]]]   (defaults 1024 4096 0=all CPUs)
 * The benchmark with repetitions and a processor sweep is bench/apps/A1_vecmat.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <weft/weft.h>

static int rows, cols;
static float *v, *m, *r;
static weft_sem_t done; /* one signal per finished column */

/* The thread of one column: a dot product of v and column c. */
static void *vxcol(void *arg) {
  int c = (int)(intptr_t)arg;
  float s = 0;
  for (int i = 0; i < rows; i++) s += v[i] * m[(size_t)i * cols + c];
  r[c] = s;
  weft_sem_signal(&done);
  return NULL;
}

/* Multiplies with one detached thread per column; with_affinity: in a memory-conscious
 * bundle, 64 columns per virtual processor. Returns the seconds it took. */
static double vxm(int with_affinity) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.detached = 1;
  weft_bundle_t *b = NULL;
  if (with_affinity) {
    if (weft_schedlib_bundle_create(&b, NULL, WEFT_SCHED_FIFO | WEFT_SCHED_AFFINITY) != 0) /* new */
      exit(1);
    attr.bundle = b; /* new */
  }
  for (int c = 0; c < cols; c++) {
    if (with_affinity) attr.vproc = WEFT_VPROC(c / 64); /* new */
    if (weft_create(NULL, &attr, vxcol, (void *)(intptr_t)c) != 0) exit(1);
  }
  for (int c = 0; c < cols; c++) weft_sem_wait(&done);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  /* new: the bundle is destroyed once its (detached) threads have all finished */
  while (b && weft_schedlib_bundle_destroy(b) == WEFT_EBUSY) weft_sleep_ns(10000);
  return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

int main(int argc, char **argv) {
  rows = argc > 1 ? atoi(argv[1]) : 1024;
  cols = argc > 2 ? atoi(argv[2]) : 4096;
  weft_config_t cfg;
  weft_config_init(&cfg);
  if (argc > 3) cfg.nvps = atoi(argv[3]);
  if (rows < 1 || cols < 1 || weft_init(&cfg) != 0) return 1;
  v = malloc((size_t)rows * sizeof *v);
  m = malloc((size_t)rows * cols * sizeof *m);
  r = malloc((size_t)cols * sizeof *r);
  if (!v || !m || !r || weft_sem_init(&done, 0) != 0) return 1;
  for (int i = 0; i < rows; i++) v[i] = 1.0f + (float)(i % 7);
  for (size_t i = 0; i < (size_t)rows * cols; i++) m[i] = (float)(i % 13) * 0.5f;
  printf("%d x %d matrix, %d VPs\n", rows, cols, weft_vp_count());
  for (int a = 0; a <= 1; a++) {
    double s = vxm(a);
    double check = 0; /* column 0 again, serially */
    for (int i = 0; i < rows; i++) check += (double)v[i] * m[(size_t)i * cols];
    printf("%-22s %.4f s   r[0] = %.1f (expected %.1f)\n",
           a ? "with affinity (c/64)" : "without annotations", s, r[0], check);
  }
  weft_sem_destroy(&done);
  free(v);
  free(m);
  free(r);
  return weft_shutdown() == 0 ? 0 : 1;
}
