/* examples/echo_server.c - a TCP echo server: one weft thread per connection, each
 * blocked in weft_read/weft_write (weft/io.h) parks itself, not its VP.
 *
 *   weft_example_echo_server [port [connections [vps]]]
 *
 * Listens on 127.0.0.1:port (0, the default: a free port, printed on stdout), and
 * echoes every byte back until the client closes. After `connections` connections
 * have been accepted and served (0, the default: never) it shuts down. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <weft/weft.h>

static void *serve(void *arg) {
  int fd = (int)(intptr_t)arg;
  char buf[16384];
  for (;;) {
    ssize_t n = weft_read(fd, buf, sizeof buf);
    if (n <= 0) break;                              /* end of stream or error */
    if (weft_write(fd, buf, (size_t)n) != n) break; /* whole buffer, or an error */
  }
  weft_close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 0;
  long limit = argc > 2 ? atol(argv[2]) : 0;
  weft_config_t cfg;
  weft_config_init(&cfg);
  if (argc > 3) cfg.nvps = atoi(argv[3]);
  int rc = weft_init(&cfg);
  if (rc != 0) {
    fprintf(stderr, "weft_init: %s\n", weft_strerror(rc));
    return 1;
  }
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1024) != 0 ||
      getsockname(ls, (struct sockaddr *)&a, &len) != 0) {
    perror("echo_server: listen");
    return 1;
  }
  printf("echo_server: listening on 127.0.0.1:%d (I/O engine %s)\n", ntohs(a.sin_port),
         weft_io_engine());
  fflush(stdout);
  weft_thread_t **conns = limit > 0 ? calloc((size_t)limit, sizeof *conns) : NULL;
  for (long served = 0; limit == 0 || served < limit; served++) {
    int c = weft_accept(ls, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      /* out of descriptors or memory, or a connection that went away while it
       * queued: wait a little and go on accepting (as Go's net/http does) */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM ||
          errno == ECONNABORTED || errno == EPROTO || errno == EINTR) {
        if (errno == EMFILE || errno == ENFILE) perror("echo_server: accept (retrying in 10 ms)");
        weft_sleep_ns(10000000);
        served--;  /* nobody was served */
        continue;
      }
      perror("echo_server: accept");
      break;
    }
    weft_thread_t *t;
    if (weft_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) {
      weft_close(c);  /* no thread for it (out of memory, cfg.max_threads) */
      served--;       /* nor was it served */
      continue;
    }
    if (conns) conns[served] = t;
    else weft_detach(t);
  }
  for (long i = 0; conns && i < limit; i++)
    if (conns[i]) weft_join(conns[i], NULL);
  free(conns);
  weft_close(ls);
  return weft_shutdown() == 0 ? 0 : 1;
}
