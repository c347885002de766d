/* R_common.h - what every package's R1/R2 program checks its answer against, written
 * once (C; R_weft.c and R_peers.cc include it): the known N-queens solution counts, the
 * serial N-queens search (solutions and placements = threads a run creates) and fib(n)
 * with the spawns of R1's program. */
#ifndef WEFT_BENCH_R_COMMON_H
#define WEFT_BENCH_R_COMMON_H

#include <stdint.h>

#define R_QMAX 16
/* Known solution counts, n = 0..16 (OEIS A000170). */
static const long r_queens_known[R_QMAX + 1] = {1,     1,     0,      0,      2,       10,
                                                4,     40,    92,     352,    724,     2680,
                                                14200, 73712, 365596, 2279184, 14772512};

/* The serial search on an n x n board from `row` (columns and both diagonals attacked in
 * it): the solutions, and in *nodes the placements below (= threads a run creates). */
static inline long r_queens_serial(int n, int row, uint32_t cols, uint32_t d1, uint32_t d2,
                                   long *nodes) {
  if (row == n) return 1;
  long sum = 0;
  for (uint32_t f = ~(cols | d1 | d2) & ((1u << n) - 1); f; f &= f - 1) {
    uint32_t bit = f & -f;
    ++*nodes;
    sum += r_queens_serial(n, row + 1, cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1, nodes);
  }
  return sum;
}

/* fib(n), and in *spawns the threads R1's program creates: fib(n+1) - 1 (n >= 0). */
static inline long r_fib(long n, long *spawns) {
  long a = 0, b = 1;
  for (long i = 0; i < n; i++) {
    long c = a + b;
    a = b;
    b = c;
  }
  *spawns = b - 1;
  return a;
}

#endif
