/* calibrate.c - how much parallelism does this machine really give? P kernel threads
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

#include "bench.h"

#define WORK 200000000L

static void *spin(void *arg) {
  int cpu = (int)(long)arg;
  bench_pin_self(bench_cpu_nth(cpu));
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

int main(int argc, char **argv) {
  const char *out = "bench-results";
  int reps = 3;
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "calibrate.json"),
      BENCH_OPT_REPS(reps),
  };
  bench_args(argc, argv, opts, 2, "how much parallelism the machine gives");
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 256) cores = 256;
  if (reps < 1 || reps > 50) reps = 3;
  double med[257] = {0};
  printf("P  independent work, median of %d (s)   speedup (ideal = P)\n", reps);
  for (int p = 1; p <= cores; p++) {
    double v[50];
    for (int r = 0; r < reps; r++) v[r] = run(p);
    med[p] = bench_summarize(v, reps).median;
    printf("%-2d %-36.3f %.2fx\n", p, med[p] * 1e-9, p * med[1] / med[p]);
  }
  bench_json_t j;
  if (bench_json_open(&j, out, "calibrate.json") != 0) return 2;
  bench_json_obj(&j, NULL);
  bench_json_str(&j, "what", "P pinned threads of independent integer work; speedup = P*t(1)/t(P)");
  bench_json_arr(&j, "points");
  for (int p = 1; p <= cores; p++) {
    bench_json_obj(&j, NULL);
    bench_json_int(&j, "p", p);
    bench_json_num(&j, "seconds", med[p] * 1e-9);
    bench_json_num(&j, "speedup", p * med[1] / med[p]);
    bench_json_end(&j);
  }
  return bench_json_finish(&j) == 0 ? 0 : 2;
}
