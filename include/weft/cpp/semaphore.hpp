// weft/cpp/semaphore.hpp - weft::counting_semaphore (std::counting_semaphore's
// interface) and weft::barrier.
#ifndef WEFT_CPP_SEMAPHORE_HPP
#define WEFT_CPP_SEMAPHORE_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "weft/barrier.h"
#include "weft/cpp/chrono.hpp"
#include "weft/cpp/error.hpp"
#include "weft/sem.h"

namespace weft {

// A counting semaphore (weft_sem_t): acquire() takes a unit, blocking the weft
// thread while there is none; release(n) adds n, handing units straight to waiters.
template <std::ptrdiff_t LeastMaxValue = WEFT_SEM_MAX>
class counting_semaphore {
  static_assert(LeastMaxValue >= 0 && LeastMaxValue <= WEFT_SEM_MAX, "weft_sem_t holds 0..INT32_MAX");

 public:
  static constexpr std::ptrdiff_t max() noexcept { return LeastMaxValue; }
  // Throws std::system_error (EINVAL) for a count outside [0, max()].
  explicit counting_semaphore(std::ptrdiff_t desired) {
    if (desired < 0 || desired > max()) detail::throw_error(WEFT_EINVAL, "weft::counting_semaphore");
    detail::check(weft_sem_init(&s_, static_cast<int32_t>(desired)), "weft_sem_init");
  }
  counting_semaphore(const counting_semaphore &) = delete;
  counting_semaphore &operator=(const counting_semaphore &) = delete;

  // Never switches. Throws std::system_error (EAGAIN) past WEFT_SEM_MAX.
  void release(std::ptrdiff_t update = 1) {
    for (std::ptrdiff_t i = 0; i < update; i++) detail::check(weft_sem_signal(&s_), "weft_sem_signal");
  }
  // May switch.
  void acquire() { detail::check(weft_sem_wait(&s_), "weft_sem_wait"); }
  bool try_acquire() noexcept { return weft_sem_trywait(&s_) == 0; }
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period> &d) {
    return timed(detail::deadline_after(d));
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration> &tp) {
    return timed(detail::deadline_at(tp));
  }
  // A snapshot of the free units (not in std; for tests and diagnostics).
  std::ptrdiff_t value() const noexcept { return weft_sem_value(&s_); }
  weft_sem_t *native_handle() noexcept { return &s_; }

 private:
  bool timed(uint64_t deadline) {
    int rc = weft_sem_timedwait(&s_, deadline);
    if (rc == WEFT_ETIMEDOUT) return false;
    detail::check(rc, "weft_sem_timedwait");
    return true;
  }
  weft_sem_t s_{};
};

using binary_semaphore = counting_semaphore<1>;

// A reusable barrier for `count` threads (weft_barrier_t). Unlike std::barrier it has
// no completion function and no split arrive/wait: arrive_and_wait() blocks until
// `count` threads have arrived this round and returns true to exactly one of them
// (the last to arrive), which can run the round's completion work itself.
class barrier {
 public:
  // Throws std::system_error (EINVAL) for count < 1.
  explicit barrier(std::ptrdiff_t count) {
    if (count < 1 || count > INT32_MAX) detail::throw_error(WEFT_EINVAL, "weft::barrier");
    detail::check(weft_barrier_init(&b_, static_cast<uint32_t>(count)), "weft_barrier_init");
  }
  barrier(const barrier &) = delete;
  barrier &operator=(const barrier &) = delete;
  // May switch.
  bool arrive_and_wait() {
    int rc = weft_barrier_wait(&b_);
    if (rc == WEFT_BARRIER_SERIAL) return true;
    detail::check(rc, "weft_barrier_wait");
    return false;
  }
  weft_barrier_t *native_handle() noexcept { return &b_; }

 private:
  weft_barrier_t b_{};
};

}  // namespace weft

#endif
