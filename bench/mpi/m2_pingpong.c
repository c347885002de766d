/* bench/mpi/m2_pingpong.c - M2: 8-byte MPI ping-pong latency from a weft thread
 * (weft_mpi_send/recv: Isend/Irecv and a park) against plain MPI_Send/MPI_Recv from
 * main, between two ranks.
 *
 *   mpiexec -n 2 ./weft_bench_mpi_m2 [round-trips] [repetitions] [vps]
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
 * median over repetitions, the minimum and the maximum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/mpi.h"
#include "weft/runtime.h"
#include "weft/thread.h"
#include "weft/time.h"

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

static void report(const char *name, double *v) {
  qsort(v, (size_t)reps, sizeof *v, cmp);
  if (rank == 0)
    printf("%-12s one-way latency us: median %.2f  min %.2f  max %.2f  (%d x %d round trips, %d VPs)\n",
           name, v[reps / 2], v[0], v[reps - 1], reps, iters, nvps);
}

/* The policy is part of the configuration given at init: this process measures one
 * weft mode (argv[4]: "weft" (default), "nospin" or "noidle"), and plain MPI. */
int main(int argc, char **argv) {
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
  free(plain);
  free(wv);
  weft_mpi_finalize();
  return 0;
}
