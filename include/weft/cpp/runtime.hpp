// weft/cpp/runtime.hpp - weft::runtime: weft_init() and weft_shutdown() as RAII.
#ifndef WEFT_CPP_RUNTIME_HPP
#define WEFT_CPP_RUNTIME_HPP

#include <exception>

#include "weft/cpp/error.hpp"
#include "weft/runtime.h"

namespace weft {

// A running weft. The constructor calls weft_init() and makes the calling OS thread
// the main weft thread; the destructor calls weft_shutdown(), which first waits for
// every other weft thread to finish. Construct it on a plain OS thread (usually at
// the top of main) and destroy it on the same weft thread. Neither copyable nor
// movable: it is the runtime's lifetime.
class runtime {
 public:
  // Defaults: one VP per online CPU (weft_config_init()).
  runtime() : runtime(defaults()) {}
  // `vps` virtual processors, everything else default.
  explicit runtime(int vps) : runtime(with_vps(vps)) {}
  // Any configuration. Throws std::system_error (weft_init's errors: EALREADY,
  // EINVAL, ENOMEM, ESYS).
  explicit runtime(const weft_config_t &cfg) { detail::check(weft_init(&cfg), "weft_init"); }
  runtime(const runtime &) = delete;
  runtime &operator=(const runtime &) = delete;
  // Calls shutdown() if it has not been called; std::terminate() if that fails (a
  // destructor cannot throw; the likely cause, WEFT_EBUSY, is a deadlock at exit).
  // Weft stopped by other means meanwhile (weft_shutdown() from C, cthread_exit() of
  // the main C-Thread, which stops weft before the process exits) is not a failure.
  ~runtime() {
    if (!running_) return;
    int rc = weft_shutdown();
    if (rc != 0 && rc != WEFT_ENOTINIT) std::terminate();
  }
  // shutdown() stops weft now (weft_shutdown()). May switch the caller. Throws
  // std::system_error (EPERM: not the main weft thread; EBUSY: threads alive but
  // none can run; weft keeps running and shutdown() may be called again). Nothing
  // when weft has stopped already (as the destructor).
  void shutdown() {
    if (!running_) return;
    int rc = weft_shutdown();
    if (rc != WEFT_ENOTINIT) detail::check(rc, "weft_shutdown");
    running_ = false;
  }
  // The number of virtual processors.
  static int vp_count() noexcept { return weft_vp_count(); }

 private:
  static weft_config_t defaults() noexcept {
    weft_config_t c;
    weft_config_init(&c);
    return c;
  }
  static weft_config_t with_vps(int n) noexcept {
    weft_config_t c = defaults();
    c.nvps = n;
    return c;
  }
  bool running_ = true;
};

}  // namespace weft

#endif
