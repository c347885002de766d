/* examples/mpi_stencil.c - a 1-D three-point stencil (Jacobi smoothing) over MPI ranks,
 * one weft thread per block of cells.
 *
 *   mpiexec -n 2 ./weft_example_mpi_stencil [blocks-per-rank] [cells-per-block] [steps]
 *
 * The line of cells is cut into blocks, `blocks` per rank, consecutive over the ranks.
 * Each block is one weft thread. Every step it sends its edge cells to its two
 * neighbouring blocks and receives their edge cells (the halo), whether the
 * neighbour is on this rank or another: MPI_Isend/MPI_Irecv and weft_mpi_waitall,
 * which parks the thread, not the VP, so the other blocks compute meanwhile. The
 * two ends of the line are held fixed. At the end each rank recomputes the whole
 * line serially and checks its blocks against it, bit for bit (the same operations
 * in the same order); the program exits 0 only if every rank agrees.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/mpi.h"
#include "weft/runtime.h"
#include "weft/thread.h"

static int rank, size, blocks = 16, cells = 256, steps = 100;

static double initial(long i) { return (double)((i * 7919) % 1000); }

typedef struct block {
  int id;        /* global block number */
  double *u, *v; /* cells [1..cells], halo cells at 0 and cells+1 */
} block_t;

static block_t *blk;

static int owner(int id) { return id / blocks; }

static void *block_main(void *arg) {
  block_t *b = arg;
  int nblocks = blocks * size;
  long first = (long)b->id * cells;
  for (int c = 1; c <= cells; c++) b->u[c] = initial(first + c - 1);
  for (int s = 0; s < steps; s++) {
    MPI_Request r[4];
    int n = 0;
    /* tag: the receiving block's number and side; order per pair is MPI's (non-overtaking) */
    weft_mpi_lock();
    if (b->id > 0) {
      MPI_Irecv(&b->u[0], 1, MPI_DOUBLE, owner(b->id - 1), 2 * b->id, MPI_COMM_WORLD, &r[n++]);
      MPI_Isend(&b->u[1], 1, MPI_DOUBLE, owner(b->id - 1), 2 * (b->id - 1) + 1, MPI_COMM_WORLD,
                &r[n++]);
    }
    if (b->id < nblocks - 1) {
      MPI_Irecv(&b->u[cells + 1], 1, MPI_DOUBLE, owner(b->id + 1), 2 * b->id + 1, MPI_COMM_WORLD,
                &r[n++]);
      MPI_Isend(&b->u[cells], 1, MPI_DOUBLE, owner(b->id + 1), 2 * (b->id + 1), MPI_COMM_WORLD,
                &r[n++]);
    }
    weft_mpi_unlock();
    if (weft_mpi_waitall(n, r, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      fprintf(stderr, "rank %d: waitall failed\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int c = 1; c <= cells; c++) {
      long g = first + c - 1;
      if (g == 0 || g == (long)nblocks * cells - 1) b->v[c] = b->u[c];  /* fixed ends */
      else b->v[c] = (b->u[c - 1] + b->u[c] + b->u[c + 1]) / 3.0;
    }
    double *t = b->u;
    b->u = b->v;
    b->v = t;
  }
  return NULL;
}

int main(int argc, char **argv) {
  int prov;
  if (weft_mpi_init(&argc, &argv, &prov) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1) blocks = atoi(argv[1]);
  if (argc > 2) cells = atoi(argv[2]);
  if (argc > 3) steps = atoi(argv[3]);
  if (blocks < 1 || cells < 1 || steps < 0) {
    if (rank == 0) fprintf(stderr, "usage: %s [blocks-per-rank] [cells-per-block] [steps]\n", argv[0]);
    weft_mpi_finalize();
    return 2;
  }
  if (weft_init(NULL) != 0) return 1;
  blk = calloc((size_t)blocks, sizeof *blk);
  weft_thread_t **t = calloc((size_t)blocks, sizeof *t);
  for (int i = 0; i < blocks; i++) {
    blk[i].id = rank * blocks + i;
    blk[i].u = calloc((size_t)cells + 2, sizeof(double));
    blk[i].v = calloc((size_t)cells + 2, sizeof(double));
    weft_create(&t[i], NULL, block_main, &blk[i]);
  }
  for (int i = 0; i < blocks; i++) weft_join(t[i], NULL);
  weft_shutdown();

  /* the serial reference for the whole line */
  long n = (long)blocks * size * cells;
  double *u = malloc((size_t)n * sizeof *u), *v = malloc((size_t)n * sizeof *v);
  for (long i = 0; i < n; i++) u[i] = initial(i);
  for (int s = 0; s < steps; s++) {
    for (long i = 0; i < n; i++)
      v[i] = (i == 0 || i == n - 1) ? u[i] : (u[i - 1] + u[i] + u[i + 1]) / 3.0;
    double *x = u;
    u = v;
    v = x;
  }
  long bad = 0;
  for (int i = 0; i < blocks; i++)
    for (int c = 1; c <= cells; c++)
      if (memcmp(&blk[i].u[c], &u[(long)blk[i].id * cells + c - 1], sizeof(double)) != 0) bad++;
  long allbad = 0;
  MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("mpi_stencil: %d ranks x %d blocks x %d cells, %d steps: %s (%ld cells differ)\n", size,
           blocks, cells, steps, allbad ? "WRONG" : "matches the serial result", allbad);
  for (int i = 0; i < blocks; i++) {
    free(blk[i].u);
    free(blk[i].v);
  }
  free(blk);
  free(t);
  free(u);
  free(v);
  weft_mpi_finalize();
  return allbad ? 1 : 0;
}
