/* bench/io/I_client.c - I1's client: round trips of a small echo over one loopback TCP
 * connection, with a plain blocking socket (no weft), so that every server is timed by
 * the same program (bench/README.md, "Servers and I/O").
 *
 *   weft_io_client --port P [--size 64] [--rounds 20000] [--warmup 2000]
 *
 * Connects to 127.0.0.1:P (TCP_NODELAY), sends `size` bytes and reads the same `size`
 * bytes back, `warmup` untimed times and then `rounds` timed ones, each round trip timed
 * on its own (CLOCK_MONOTONIC). Every echoed byte is checked: a wrong byte prints
 * "WRONG RESULT" and exits 3. Prints one line:
 *   RESULT {"ok": true, "size": 64, "rounds": N, "median_ns", "p10_ns", "p90_ns",
 *           "p99_ns", "min_ns", "max_ns", "mean_ns"} */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

static int io_all(int fd, char *b, size_t n, int wr) {
  while (n > 0) {
    ssize_t r = wr ? write(fd, b, n) : read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    b += r;
    n -= (size_t)r;
  }
  return 0;
}

int main(int argc, char **argv) {
  int port = 0, size = 64;
  long rounds = 20000, warmup = 2000;
  bench_opt_t opts[] = {
      {"--port", BENCH_INT, &port, NULL, 0, "the echo server's port on 127.0.0.1"},
      {"--size", BENCH_INT, &size, NULL, 0, "bytes per message (64)"},
      {"--rounds", BENCH_LONG, &rounds, NULL, 0, "timed round trips"},
      {"--warmup", BENCH_LONG, &warmup, NULL, 0, "untimed round trips first"},
  };
  bench_args(argc, argv, opts, sizeof opts / sizeof *opts,
             "weft_io_client: I1's echo round-trip client (blocking socket)");
  if (port <= 0 || port > 65535 || size < 1 || size > 65536 || rounds < 10 || warmup < 0) {
    fprintf(stderr, "weft_io_client: --port 1..65535, --size 1..65536, --rounds >= 10, --warmup >= 0\n");
    return 2;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("weft_io_client: connect");
    return 1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char *out = malloc((size_t)size), *in = malloc((size_t)size);
  double *t = malloc((size_t)rounds * sizeof *t);
  if (!out || !in || !t) return 1;
  for (long i = -warmup; i < rounds; i++) {
    for (int k = 0; k < size; k++) out[k] = (char)(i * 31 + k);
    double t0 = bench_now_ns();
    if (io_all(fd, out, (size_t)size, 1) != 0 || io_all(fd, in, (size_t)size, 0) != 0) {
      fprintf(stderr, "weft_io_client: connection ended after %ld round trips\n", i + warmup);
      return 1;
    }
    double t1 = bench_now_ns();
    if (memcmp(in, out, (size_t)size) != 0) {
      fprintf(stderr, "WRONG RESULT: round trip %ld echoed other bytes\n", i + warmup);
      return 3;
    }
    if (i >= 0) t[i] = t1 - t0;
  }
  close(fd);
  double sum = 0;
  for (long i = 0; i < rounds; i++) sum += t[i];
  qsort(t, (size_t)rounds, sizeof *t, bench_cmp_double);
#define PCT(p) t[(long)((double)(rounds - 1) * (p))]
  printf("RESULT {\"ok\": true, \"size\": %d, \"rounds\": %ld, \"median_ns\": %.0f, \"p10_ns\": %.0f, "
         "\"p90_ns\": %.0f, \"p99_ns\": %.0f, \"min_ns\": %.0f, \"max_ns\": %.0f, \"mean_ns\": %.0f}\n",
         size, rounds, PCT(0.5), PCT(0.1), PCT(0.9), PCT(0.99), t[0], t[rounds - 1], sum / (double)rounds);
  free(out);
  free(in);
  free(t);
  return 0;
}
