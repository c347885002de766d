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

// The weft deadline of tp on any clock, through "time left now". tp is compared
// with, and subtracted from, now rounded down to tp's own unit: converting tp to a
// finer unit, as tp - Clock::now() does, overflows for time_point::min() and max()
// (and for far points of a coarse unit), and the overflow waited about for ever. A
// point not after now is a deadline passed; one more than ~31 years ahead is
// clamped, as deadline_after clamps.
template <class Clock, class Duration>
inline uint64_t deadline_at(const std::chrono::time_point<Clock, Duration> &tp) noexcept {
  using namespace std::chrono;
  const auto now = Clock::now();
  const time_point<Clock, Duration> now_d = floor<Duration>(now);
  if (tp <= now_d) return weft_deadline_after(0);
  // > 0, and no overflow: tp <= Duration's max and now_d >= 0 (clocks count up
  // from an epoch in the past)
  const Duration ahead = tp.time_since_epoch() - now_d.time_since_epoch();
  if (duration<double>(ahead) > duration<double>(1e9)) return deadline_after(ahead);
  // now - now_d is less than one unit of Duration: both fit in nanoseconds
  const nanoseconds left = ceil<nanoseconds>(ahead) - duration_cast<nanoseconds>(now - now_d);
  return deadline_after(left);
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
