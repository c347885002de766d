/* examples/http_server.c - an HTTP/1.1 server with keep-alive: one weft thread per
 * connection, a fixed response to every request (weft/io.h).
 *
 *   weft_example_http_server [port [vps]] [--stackless]
 *
 * Listens on 127.0.0.1:port (0, the default: a free port, printed on stdout).
 * Requests are read up to their blank line (bodies are not expected: GET/HEAD);
 * pipelined requests are answered in order. A connection ends when the client
 * closes it, sends "Connection: close", or sends a request head over 16 KiB (heads
 * over 1 KiB are read into a heap buffer).
 *
 * --stackless: a connection with nothing left to read waits for its next request
 * without a stack. Its thread hands the wait to weft_fd_spawn (a new thread starts
 * serve() once the socket is readable) and returns, so an idle connection costs a
 * thread control block and a small record instead of a stack page (C-Threads'
 * continuations; the report's I2 idle-memory row). */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>

#include <weft/weft.h>

static int stackless;

static const char response[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 13\r\n"
    "\r\n"
    "Hello, world\n";

/* A request head may be up to HEAD_MAX bytes. The connection's thread reads into a
 * small buffer on its stack and moves to the heap only for a head that does not
 * fit: a thread parked in weft_read between requests touches one page of its stack,
 * and once it has waited longer than weft_config_t.io_idle_stack_ms weft keeps only
 * the live part of that page (this buffer and a few frames, under 2 KiB, less the
 * runs of zero words in them) and gives the page back. So the bytes of the buffer
 * that hold data are most of what an idle connection costs; 1 KiB holds the heads of
 * common clients (wrk's are under 100 bytes). */
#define HEAD_SMALL 1024
#define HEAD_MAX 16384

static void *serve(void *arg) {
  int fd = (int)(intptr_t)arg;
  char small[HEAD_SMALL];
  char *buf = small, *heap = NULL;
  size_t cap = sizeof small, have = 0;
  for (;;) {
    char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
    if (!end) {
      if (have == cap) {
        if (cap == HEAD_MAX) break;  /* head too large */
        char *nb = malloc(HEAD_MAX);
        if (!nb) break;
        memcpy(nb, buf, have);
        free(heap);
        buf = heap = nb;
        cap = HEAD_MAX;
      }
      ssize_t n;
      if (stackless && have == 0) {
        /* between requests: what is there, without waiting; nothing, and the wait
         * goes to a thread that does not exist yet (heap is NULL here: a head that
         * needed it has been answered, and have is 0) */
        n = weft_recv(fd, buf, cap, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          if (weft_fd_spawn(fd, POLLIN, serve, arg) == 0) return NULL;
          n = weft_read(fd, buf, cap);  /* no thread to be had: wait here */
        }
      } else {
        n = weft_read(fd, buf + have, cap - have);
      }
      if (n <= 0) break;
      have += (size_t)n;
      continue;
    }
    size_t head = (size_t)(end - buf) + 4;
    /* "Connection: close" anywhere in the head (case-insensitive) ends it after */
    int close_after = 0;
    for (char *p = buf; p + 17 <= buf + head; p++)
      if (strncasecmp(p, "connection: close", 17) == 0) close_after = 1;
    if (weft_write(fd, response, sizeof response - 1) != (ssize_t)(sizeof response - 1)) break;
    memmove(buf, buf + head, have - head);
    have -= head;
    if (close_after) break;
    if (heap && have <= sizeof small) {  /* back to the stack between requests */
      memcpy(small, heap, have);
      free(heap);
      heap = NULL;
      buf = small;
      cap = sizeof small;
    }
  }
  free(heap);
  weft_close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  int pos[2] = {0, 0}, npos = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--stackless") == 0) stackless = 1;
    else if (npos < 2) pos[npos++] = atoi(argv[i]);
  }
  int port = pos[0];
  weft_config_t cfg;
  weft_config_init(&cfg);
  if (npos > 1) cfg.nvps = pos[1];
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
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 4096) != 0 ||
      getsockname(ls, (struct sockaddr *)&a, &len) != 0) {
    perror("http_server: listen");
    return 1;
  }
  printf("http_server: listening on http://127.0.0.1:%d/ (I/O engine %s)\n",
         ntohs(a.sin_port), weft_io_engine());
  fflush(stdout);
  for (;;) {
    int c = weft_accept(ls, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      /* out of descriptors or memory, or a connection that went away while it
       * queued: wait a little and go on accepting (as Go's net/http does) */
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM ||
          errno == ECONNABORTED || errno == EPROTO || errno == EINTR) {
        if (errno == EMFILE || errno == ENFILE) perror("http_server: accept (retrying in 10 ms)");
        weft_sleep_ns(10000000);
        continue;
      }
      perror("http_server: accept");
      break;
    }
    weft_thread_t *t;
    if (weft_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) weft_close(c);
    else weft_detach(t);
  }
  weft_close(ls);
  return weft_shutdown() == 0 ? 0 : 1;
}
