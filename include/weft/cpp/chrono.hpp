// weft/cpp/chrono.hpp - std::chrono durations and time points as weft deadlines
// (weft/time.h: absolute CLOCK_MONOTONIC nanoseconds).
#ifndef WEFT_CPP_CHRONO_HPP
#define WEFT_CPP_CHRONO_HPP

#include <chrono>
#include <cstdint>

#include "weft/time.h"

namespace weft {
namespace detail {

// Nanoseconds in d, rounded up, clamped to [0, ~31 years] so that no duration
// overflows or becomes "forever".
template <class Rep, class Period>
inline uint64_t clamp_ns(const std::chrono::duration<Rep, Period> &d) noexcept {
  using namespace std::chrono;
  if (d <= d.zero()) return 0;
  if (duration<double>(d) > duration<double>(1e9)) return UINT64_C(1000000000) * 1000000000;
  return static_cast<uint64_t>(ceil<nanoseconds>(d).count());
}

// The weft deadline d from now.
template <class Rep, class Period>
inline uint64_t deadline_after(const std::chrono::duration<Rep, Period> &d) noexcept {
  return weft_deadline_after(clamp_ns(d));
}

// The weft deadline of tp on any clock: weft's clock is steady_clock's on Linux, so
// steady_clock time points convert exactly; others go through "time left now".
template <class Clock, class Duration>
inline uint64_t deadline_at(const std::chrono::time_point<Clock, Duration> &tp) noexcept {
  return deadline_after(tp - Clock::now());
}

// The steady_clock time point of a weft deadline (weft's clock is steady_clock's):
// for the waits std defines as wait_until(now() + d), which would overflow for a
// large d (hours::max()); deadline_after clamps d first.
inline std::chrono::steady_clock::time_point steady_at(uint64_t deadline) noexcept {
  using namespace std::chrono;
  if (deadline > static_cast<uint64_t>(INT64_MAX)) return steady_clock::time_point::max();
  return steady_clock::time_point(
      duration_cast<steady_clock::duration>(nanoseconds(static_cast<int64_t>(deadline))));
}

}  // namespace detail
}  // namespace weft

#endif
