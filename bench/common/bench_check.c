/* bench_check.c - bench_check_failed() of the harness library (bench.h): the one part that
 * needs weft, kept apart so that the peers' programs link bench.c without weft. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "weft/weft.h"

void bench_check_failed(int rc, const char *what) {
  fprintf(stderr, "%s failed: %s (%s)\n", what, weft_strerror(rc), weft_err_name(rc));
  exit(2);
}
