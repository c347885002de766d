/* bench/mpi/m2_pingpong.c - M2: 8-byte MPI ping-pong latency from a weft thread
 * (weft_mpi_send/recv: Isend/Irecv and a park) against plain MPI_Send/MPI_Recv from
 * main, between two ranks.
 *
 *   mpiexec -n 2 ./weft_bench_mpi_m2 [--out DIR] [round-trips] [repetitions] [vps] [mode]
 *
 * Each repetition times `round-trips` exchanges (rank 0 sends 8 bytes, rank 1 sends
 * them back) after a warm-up, for each mode:
 *   plain        MPI_Send/MPI_Recv from main (weft not running)
 *   weft         weft_mpi_send/recv from one weft thread (vps VPs; the defaults:
 *                a 20 us first phase of testing, then park; idle VPs poll)
 *   weft-nospin  no first phase: the thread parks at once and idle VPs poll
 *   weft-noidle  no first phase and no idle polling: only the poller thread's
 *                100 us interval makes progress (the busy-VP bound)
 * Rank 0 prints, per mode, the one-way latency (round trip / 2) in microseconds: the
 * median over repetitions, the minimum and the maximum; with --out DIR it also writes
 * DIR/M2.json (both modes' one-way latencies, in seconds, every repetition).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "weft/mpi.h"
#include "weft/runtime.h"
#include "weft/thread.h"
#include "weft/time.h"

/* The load average (1, 5, 15 min) as /proc/loadavg gives it ("?" if unreadable). */
static void read_loadavg(char *buf, int n) {
  FILE *f = fopen("/proc/loadavg", "r");
  double a, b, c;
  if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
    snprintf(buf, (size_t)n, "%.2f %.2f %.2f", a, b, c);
  else
    snprintf(buf, (size_t)n, "?");
  if (f) fclose(f);
}

static int rank, iters = 20000, reps = 7, nvps = 2;

static double run_plain(void) {
  double buf = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t t0 = weft_time_now();
  for (int i = 0; i < iters; i++) {
    if (rank == 0) {
      MPI_Send(&buf, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(&buf, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&buf, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&buf, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    }
  }
  return (double)(weft_time_now() - t0) / iters / 2 / 1000.0;
}

static double result;
static void *weft_body(void *arg) {
  (void)arg;
  double buf = 0;
  weft_mpi_barrier(MPI_COMM_WORLD);
  uint64_t t0 = weft_time_now();
  for (int i = 0; i < iters; i++) {
    if (rank == 0) {
      weft_mpi_send(&buf, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
      weft_mpi_recv(&buf, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      weft_mpi_recv(&buf, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      weft_mpi_send(&buf, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    }
  }
  result = (double)(weft_time_now() - t0) / iters / 2 / 1000.0;
  return NULL;
}

static double run_weft(void) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps;
  if (weft_init(&cfg) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  weft_thread_t *t;
  weft_create(&t, NULL, weft_body, NULL);
  weft_join(t, NULL);
  weft_shutdown();
  return result;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bench_json_t json;
static int json_on;

static void report(const char *name, double *v) {
  if (rank != 0) return;
  if (json_on) {
    double *s = malloc(sizeof(double) * (size_t)reps);
    if (!s) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < reps; i++) s[i] = v[i] * 1e-6; /* seconds, in run order */
    bench_json_record(&json, "lib", name, nvps, 0);
    bench_json_int(&json, "round_trips", iters);
    bench_json_times(&json, bench_summarize(s, reps), s, reps);
    bench_json_end(&json);
    free(s);
  }
  qsort(v, (size_t)reps, sizeof *v, cmp);
  printf("%-12s one-way latency us: median %.2f  min %.2f  max %.2f  (%d x %d round trips, %d VPs)\n",
         name, v[reps / 2], v[0], v[reps - 1], reps, iters, nvps);
}

/* The policy is part of the configuration given at init: this process measures one
 * weft mode (argv[4]: "weft" (default), "nospin" or "noidle"), and plain MPI. */
int main(int argc, char **argv) {
  const char *out = NULL;
  if (argc > 2 && !strcmp(argv[1], "--out")) {
    out = argv[2];
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  if (argc > 1) iters = atoi(argv[1]);
  if (argc > 2) reps = atoi(argv[2]);
  if (argc > 3) nvps = atoi(argv[3]);
  const char *mode = argc > 4 ? argv[4] : "weft";
  if (iters < 1 || reps < 1 || nvps < 1) return 2;
  weft_mpi_config_t mc;
  weft_mpi_config_init(&mc);
  if (!strcmp(mode, "nospin") || !strcmp(mode, "noidle")) mc.spin_ns = 0;
  if (!strcmp(mode, "noidle")) mc.idle_poll = 0;
  if (weft_mpi_init_config(&argc, &argv, &mc, NULL) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double *plain = malloc(sizeof(double) * (size_t)reps), *wv = malloc(sizeof(double) * (size_t)reps);
  if (rank == 0 && out) {
    bench_machine_t m;
    bench_machine_read(&m);
    if (bench_json_start(&json, out, "M2.json", &m) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    json_on = 1;
    bench_json_obj(&json, "config");
    bench_json_int(&json, "ranks", 2);
    bench_json_int(&json, "vps", nvps);
    bench_json_int(&json, "round_trips", iters);
    bench_json_int(&json, "reps", reps);
    bench_json_int(&json, "bytes", 8);
    bench_json_str(&json, "mode", mode);
    char la[64];
    read_loadavg(la, sizeof la);
    bench_json_str(&json, "loadavg_start", la);
    bench_json_end(&json);
    bench_json_arr(&json, "results");
  }
  int save = iters;
  iters = save / 10 + 1;  /* warm-up */
  run_plain();
  run_weft();
  iters = save;
  for (int r = 0; r < reps; r++) {  /* interleaved, so drift hits both alike */
    plain[r] = run_plain();
    wv[r] = run_weft();
  }
  report("plain MPI", plain);
  char name[32];
  snprintf(name, sizeof name, "%s%s", strcmp(mode, "weft") ? "weft-" : "", mode);
  report(name, wv);
  if (json_on) {
    char la[64];
    read_loadavg(la, sizeof la);
    bench_json_end(&json); /* results */
    bench_json_str(&json, "loadavg_end", la);
    bench_json_finish(&json);
  }
  free(plain);
  free(wv);
  weft_mpi_finalize();
  return 0;
}
