// examples/echo_server.cc - the TCP echo server of echo_server.c, written in C++: one
// weft::thread per connection, each blocked in weft_read/weft_write (weft/io.h)
// parks itself, not its VP.
//
//   weft_example_echo_server_cpp [port [connections [vps]]]
//
// Listens on 127.0.0.1:port (0, the default: a free port, printed on stdout), and
// echoes every byte back until the client closes. After `connections` connections
// have been accepted and served (0, the default: never) it shuts down.
#include <weft/weft.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

namespace {

// A descriptor closed with weft_close when it goes out of scope: it wakes any weft
// thread parked on it (weft/io.h "Closing").
class socket_fd {
 public:
  explicit socket_fd(int fd) noexcept : fd_(fd) {}
  socket_fd(socket_fd &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  socket_fd(const socket_fd &) = delete;
  socket_fd &operator=(const socket_fd &) = delete;
  socket_fd &operator=(socket_fd &&) = delete;
  ~socket_fd() {
    if (fd_ >= 0) weft_close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

void serve(socket_fd conn) {
  char buf[16384];
  for (;;) {
    ssize_t n = weft_read(conn.get(), buf, sizeof buf);
    if (n <= 0) return;                                   // end of stream or error
    if (weft_write(conn.get(), buf, static_cast<size_t>(n)) != n) return;  // whole, or an error
  }
}

socket_fd listen_on(int port) {
  socket_fd ls(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (ls.get() < 0) throw std::system_error(errno, std::generic_category(), "socket");
  int one = 1;
  setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(ls.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || listen(ls.get(), 1024) != 0 ||
      getsockname(ls.get(), reinterpret_cast<sockaddr *>(&a), &len) != 0)
    throw std::system_error(errno, std::generic_category(), "listen");
  std::printf("echo_server_cpp: listening on 127.0.0.1:%d (I/O engine %s)\n", ntohs(a.sin_port),
              weft_io_engine());
  std::fflush(stdout);
  return ls;
}

}  // namespace

int main(int argc, char **argv) try {
  int port = argc > 1 ? std::atoi(argv[1]) : 0;
  long limit = argc > 2 ? std::atol(argv[2]) : 0;
  weft_config_t cfg;
  weft_config_init(&cfg);
  if (argc > 3) cfg.nvps = std::atoi(argv[3]);
  weft::runtime rt(cfg);
  std::vector<weft::thread> conns;  // joined at the end when there is a limit
  {
    socket_fd ls = listen_on(port);
    for (long served = 0; limit == 0 || served < limit;) {
      int c = weft_accept(ls.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        // out of descriptors or memory, or a connection that went away while it
        // queued: wait a little and go on accepting (as Go's net/http does)
        int e = errno;
        if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM || e == ECONNABORTED ||
            e == EPROTO || e == EINTR) {
          weft_sleep_ns(10000000);
          continue;
        }
        // anything else: give up (threads may still be serving: no orderly shutdown)
        std::fprintf(stderr, "echo_server_cpp: accept: %s\n", std::strerror(e));
        std::exit(1);
      }
      socket_fd conn(c);
      try {
        weft::thread t(serve, std::move(conn));
        if (limit > 0) conns.push_back(std::move(t));
        else t.detach();
        served++;
      } catch (const std::system_error &e) {
        // no thread for it (out of memory, cfg.max_threads): conn was moved into the
        // failed thread's arguments and is closed with them
        std::fprintf(stderr, "echo_server_cpp: %s\n", e.what());
      }
    }
  }  // the listener is closed here
  for (auto &t : conns) t.join();
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "echo_server_cpp: %s\n", e.what());
  return 1;
}
