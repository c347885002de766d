// weft/cpp/error.hpp - weft's error codes as a std::error_category; failing C calls
// raise std::system_error.
#ifndef WEFT_CPP_ERROR_HPP
#define WEFT_CPP_ERROR_HPP

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>

#include "weft/build.h"
#include "weft/error.h"

namespace weft {

// The category of weft's codes (weft/error.h): message() is weft_strerror(), and
// each code maps to the closest std::errc condition, so callers can compare a caught
// error with std::errc::timed_out and the like.
class error_category_t final : public std::error_category {
 public:
  const char *name() const noexcept override { return "weft"; }
  std::string message(int ev) const override { return weft_strerror(ev); }
  std::error_condition default_error_condition(int ev) const noexcept override {
    switch (ev) {
      case WEFT_EINVAL: return std::errc::invalid_argument;
      case WEFT_ENOMEM: return std::errc::not_enough_memory;
      case WEFT_EDEADLK: return std::errc::resource_deadlock_would_occur;
      case WEFT_EBUSY: return std::errc::device_or_resource_busy;
      case WEFT_EPERM: return std::errc::operation_not_permitted;
      case WEFT_EAGAIN: return std::errc::resource_unavailable_try_again;
      case WEFT_ESRCH: return std::errc::no_such_process;
      case WEFT_ETIMEDOUT: return std::errc::timed_out;
      default: return std::error_condition(ev, *this);
    }
  }
};

// error_category() returns the one instance.
inline const std::error_category &error_category() noexcept {
  static const error_category_t c;
  return c;
}

inline std::error_code make_error_code(int rc) noexcept { return {rc, error_category()}; }

namespace detail {
[[noreturn]] inline void throw_error(int rc, const char *what) {
  throw std::system_error(rc, error_category(), what);
}
// check(): throws std::system_error for a nonzero weft return code. The throw is out
// of line, so a successful call costs one test.
inline void check(int rc, const char *what) {
  if (__builtin_expect(rc != 0, 0)) throw_error(rc, what);
}
// unlocked(): the result of an unlock, which is noexcept (as the standard's Lockable
// unlock is) and so cannot report it. Nothing in a normal build; with a library built
// checked (WEFT_BUILD_CHECKED, weft/build.h) a nonzero code (WEFT_EPERM: the lock was
// not held) aborts with a message, as the C functions' misuse checks do.
inline void unlocked(int rc, const char *what) noexcept {
#if WEFT_BUILD_CHECKED
  if (rc != 0) {
    std::fprintf(stderr, "weft: misuse: %s of a lock nobody holds (%s)\n", what, weft_strerror(rc));
    std::abort();
  }
#else
  (void)rc;
  (void)what;
#endif
}
}  // namespace detail

}  // namespace weft

#endif
