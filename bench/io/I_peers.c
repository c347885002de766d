/* bench/io/I_peers.c - the servers weft's I/O rows are compared with (I1, I2), written
 * without weft (bench/README.md, "Servers and I/O").
 *
 *   weft_io_peer --lib pthreads|epoll --proto echo|http [--port 0]
 *
 * Listens on 127.0.0.1:port (0: a free port), prints "PORT <n>" on stdout, and serves
 * until killed. The loops are those of examples/echo_server.c and examples/http_server.c
 * (the weft servers of the rows) with the plain blocking calls:
 *   pthreads  one POSIX thread per connection (default attributes, detached), blocking
 *             read/write, as the weft servers run one weft thread per connection;
 *   epoll     (echo only) one thread, one level-triggered epoll loop over non-blocking
 *             sockets: the floor a readiness-based server cannot go below.
 * The HTTP response is the examples' fixed 13-byte "Hello, world\n" with keep-alive. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

static const char response[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 13\r\n"
    "\r\n"
    "Hello, world\n";

/* write all of b (a blocking socket may still return short on a signal) */
static int write_all(int fd, const char *b, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static void *serve_echo(void *arg) {
  int fd = (int)(intptr_t)arg;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    if (write_all(fd, buf, (size_t)n) != 0) break;
  }
  close(fd);
  return NULL;
}

/* examples/http_server.c's loop with read/write */
static void *serve_http(void *arg) {
  int fd = (int)(intptr_t)arg;
  char buf[16384];
  size_t have = 0;
  for (;;) {
    char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
    if (!end) {
      if (have == sizeof buf) break;
      ssize_t n = read(fd, buf + have, sizeof buf - have);
      if (n <= 0) break;
      have += (size_t)n;
      continue;
    }
    size_t head = (size_t)(end - buf) + 4;
    int close_after = 0;
    for (char *p = buf; p + 17 <= buf + head; p++)
      if (strncasecmp(p, "connection: close", 17) == 0) close_after = 1;
    if (write_all(fd, response, sizeof response - 1) != 0) break;
    memmove(buf, buf + head, have - head);
    have -= head;
    if (close_after) break;
  }
  close(fd);
  return NULL;
}

static int run_pthreads(int ls, void *(*serve)(void *)) {
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  for (;;) {
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      perror("weft_io_peer: accept");
      return 1;
    }
    pthread_t t;
    if (pthread_create(&t, &at, serve, (void *)(intptr_t)c) != 0) {
      fprintf(stderr, "weft_io_peer: pthread_create failed: connection dropped\n");
      close(c);
    }
  }
}

/* epoll echo: level-triggered; a connection's bytes are echoed from the loop's one
 * buffer, and a write that would block waits (blocking write of the rest), which a
 * 64-byte ping-pong never hits. */
static int run_epoll_echo(int ls) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) != 0) {
    perror("weft_io_peer: epoll");
    return 1;
  }
  static char buf[16384];
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("weft_io_peer: epoll_wait");
      return 1;
    }
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == ls) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) continue;
        struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) != 0) close(c);
        continue;
      }
      ssize_t r = read(fd, buf, sizeof buf);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      int bad = r <= 0;
      for (ssize_t off = 0; !bad && off < r;) {
        ssize_t w = write(fd, buf + off, (size_t)(r - off));
        if (w > 0) off += w;
        else if (w < 0 && errno == EAGAIN) usleep(10); /* peer's buffer full: let it drain */
        else bad = 1;
      }
      if (bad) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
      }
    }
  }
}

int main(int argc, char **argv) {
  const char *lib = "pthreads", *proto = "echo";
  int port = 0;
  bench_opt_t opts[] = {
      {"--lib", BENCH_STR, &lib, NULL, 0, "pthreads (a thread per connection) or epoll (one epoll loop; echo only)"},
      {"--proto", BENCH_STR, &proto, NULL, 0, "echo or http (a fixed response, keep-alive)"},
      {"--port", BENCH_INT, &port, NULL, 0, "TCP port on 127.0.0.1 (0: a free one, printed)"},
  };
  bench_args(argc, argv, opts, sizeof opts / sizeof *opts,
             "weft_io_peer: the pthreads and epoll servers of the I1/I2 rows");
  int echo = strcmp(proto, "echo") == 0, http = strcmp(proto, "http") == 0;
  int pth = strcmp(lib, "pthreads") == 0, epl = strcmp(lib, "epoll") == 0;
  if ((!echo && !http) || (!pth && !epl) || (epl && !echo)) {
    fprintf(stderr, "weft_io_peer: --lib pthreads|epoll, --proto echo|http (epoll: echo only)\n");
    return 2;
  }
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 4096) != 0 ||
      getsockname(ls, (struct sockaddr *)&a, &len) != 0) {
    perror("weft_io_peer: listen");
    return 1;
  }
  printf("PORT %d\n", ntohs(a.sin_port));
  fflush(stdout);
  if (epl) return run_epoll_echo(ls);
  return run_pthreads(ls, echo ? serve_echo : serve_http);
}
