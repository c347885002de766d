/* tests/install/client_mpi.c - a weft_mpi client for the install check: one MPI
 * process (singleton init, no mpiexec), 8 weft threads each send a message to
 * themselves through rank 0 and park in weft_mpi_recv until it arrives. */
#include <stdio.h>

#include "weft/mpi.h"
#include "weft/weft.h"

static void *body(void *arg) {
  int tag = (int)(long)arg, in = -1, out = tag * 1000;
  MPI_Request r;
  weft_mpi_lock();
  MPI_Isend(&out, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, &r);
  weft_mpi_unlock();
  if (weft_mpi_recv(&in, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
      weft_mpi_wait(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS)
    return (void *)0;
  return (void *)(long)in;
}

int main(int argc, char **argv) {
  int prov;
  if (weft_mpi_init(&argc, &argv, &prov) != MPI_SUCCESS) return 1;
  if (weft_init(NULL) != 0) return 1;
  weft_thread_t *t[8];
  long sum = 0;
  for (long i = 0; i < 8; i++) weft_create(&t[i], NULL, body, (void *)i);
  for (int i = 0; i < 8; i++) {
    void *r;
    weft_join(t[i], &r);
    sum += (long)r;
  }
  weft_shutdown();
  if (weft_mpi_finalize() != MPI_SUCCESS) return 1;
  printf("weft MPI client: %ld\n", sum);
  return 0;
}
