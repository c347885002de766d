/* examples/echo_latency.c - round-trip latency of a 1-byte echo over loopback TCP.
 *
 *   weft_example_echo_latency [weft|os] [rounds [vps]]
 *
 * weft: a client weft thread and a server weft thread in one process, each blocked
 * in weft_read between messages (parked, not blocking its VP). os: the same with two
 * plain OS threads and the blocking read/write, for comparison. Prints the median
 * and the 10th/90th percentiles of the round trip over batches of 100 (nanoseconds
 * per round trip), after a warm-up batch. Timings depend on the machine and its load:
 * nothing here is a pass/fail check. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <weft/weft.h>

enum { BATCH = 100 };

static int use_weft;
static long rounds = 20000;

static ssize_t rd(int fd, void *b, size_t n) { return use_weft ? weft_read(fd, b, n) : read(fd, b, n); }
static ssize_t wr(int fd, const void *b, size_t n) {
  return use_weft ? weft_write(fd, b, n) : write(fd, b, n);
}

static void *server(void *arg) {
  int fd = (int)(intptr_t)arg;
  char c;
  while (rd(fd, &c, 1) == 1)
    if (wr(fd, &c, 1) != 1) break;
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void *client(void *arg) {
  int fd = (int)(intptr_t)arg;
  long nb = rounds / BATCH;
  double *per = calloc((size_t)nb, sizeof *per);
  char c = 'x';
  for (long b = -1; b < nb; b++) {  /* batch -1: warm-up */
    uint64_t t0 = weft_time_now();
    for (int i = 0; i < BATCH; i++)
      if (wr(fd, &c, 1) != 1 || rd(fd, &c, 1) != 1) {
        fprintf(stderr, "echo_latency: short round trip\n");
        exit(1);
      }
    if (b >= 0) per[b] = (double)(weft_time_now() - t0) / BATCH;
  }
  qsort(per, (size_t)nb, sizeof *per, cmp);
  printf("echo_latency %s: %ld round trips, ns per round trip: median %.0f, p10 %.0f, p90 %.0f\n",
         use_weft ? "weft" : "os", nb * BATCH, per[nb / 2], per[nb / 10], per[nb * 9 / 10]);
  free(per);
  return NULL;
}

int main(int argc, char **argv) {
  use_weft = argc < 2 || strcmp(argv[1], "os") != 0;
  if (argc > 2) rounds = atol(argv[2]);
  if (rounds < 10 * BATCH) rounds = 10 * BATCH;
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, (struct sockaddr *)&a, &len) != 0) {
    perror("echo_latency: listen");
    return 1;
  }
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("echo_latency: connect");
    return 1;
  }
  int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (use_weft) {
    weft_config_t cfg;
    weft_config_init(&cfg);
    if (argc > 3) cfg.nvps = atoi(argv[3]);
    int rc = weft_init(&cfg);
    if (rc != 0) {
      fprintf(stderr, "weft_init: %s\n", weft_strerror(rc));
      return 1;
    }
    weft_thread_t *st, *ct;
    if (weft_create(&st, NULL, server, (void *)(intptr_t)s) != 0 ||
        weft_create(&ct, NULL, client, (void *)(intptr_t)c) != 0)
      return 1;
    weft_join(ct, NULL);
    weft_close(c);  /* the server reads end of stream */
    weft_join(st, NULL);
    weft_close(s);
    weft_close(ls);
    return weft_shutdown() == 0 ? 0 : 1;
  }
  pthread_t st, ct;
  pthread_create(&st, NULL, server, (void *)(intptr_t)s);
  pthread_create(&ct, NULL, client, (void *)(intptr_t)c);
  pthread_join(ct, NULL);
  close(c);
  pthread_join(st, NULL);
  close(s);
  close(ls);
  return 0;
}
