/* parallel.c - how much parallelism does this machine really give? P kernel threads
 * (P = 1..cores, each pinned to its own CPU) each run the same fixed amount of
 * independent integer work, no sharing; speedup = P * time(1) / time(P). An ideal
 * machine gives P. Printed beside the T sweeps so that a thread package's speedup
 * can be read against what the hardware allows (a VM's vCPUs may share a core).
 *
 * usage: weft_calibrate [--out DIR] [--reps R]        writes DIR/calibrate.json */

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"

#define WORK 200000000L

static void *spin(void *arg) {
  int cpu = (int)(long)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  volatile unsigned long x = 0;
  for (long i = 0; i < WORK; i++) x += (unsigned long)i * 7u;
  return (void *)(unsigned long)x;
}

static double run(int p) {
  pthread_t t[256];
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) pthread_create(&t[i], NULL, spin, (void *)(long)i);
  for (int i = 0; i < p; i++) pthread_join(t[i], NULL);
  return bench_now_ns() - t0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *out = "bench-results";
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--out")) out = argv[i + 1];
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
  }
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 256) cores = 256;
  if (reps < 1 || reps > 50) reps = 3;
  double med[257] = {0};
  printf("P  independent work, median of %d (s)   speedup (ideal = P)\n", reps);
  for (int p = 1; p <= cores; p++) {
    double v[50];
    for (int r = 0; r < reps; r++) v[r] = run(p);
    qsort(v, (size_t)reps, sizeof v[0], cmp);
    med[p] = v[reps / 2];
    printf("%-2d %-36.3f %.2fx\n", p, med[p] * 1e-9, p * med[1] / med[p]);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/calibrate.json", out);
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "{\n  \"what\": \"P pinned threads of independent integer work; speedup = P*t(1)/t(P)\",\n  \"points\": [");
    for (int p = 1; p <= cores; p++)
      fprintf(f, "%s\n    {\"p\": %d, \"seconds\": %.6f, \"speedup\": %.3f}", p > 1 ? "," : "", p,
              med[p] * 1e-9, p * med[1] / med[p]);
    fprintf(f, "\n  ]\n}\n");
    fclose(f);
  }
  return 0;
}
