// weft/cpp/condition_variable.hpp - weft::condition_variable (with
// std::unique_lock<weft::mutex>) and weft::condition_variable_any (with any lockable).
#ifndef WEFT_CPP_CONDITION_VARIABLE_HPP
#define WEFT_CPP_CONDITION_VARIABLE_HPP

#include <chrono>
#include <condition_variable>  // std::cv_status
#include <memory>
#include <mutex>

#include "weft/cond.h"
#include "weft/cpp/chrono.hpp"
#include "weft/cpp/error.hpp"
#include "weft/cpp/mutex.hpp"

namespace weft {

// A condition variable (weft_cond_t) for std::unique_lock<weft::mutex>, with
// std::condition_variable's interface. Mesa semantics: re-check the predicate (the
// predicate overloads do). A signal sent while the mutex is held moves the waiter
// straight to the mutex's queue (wait morphing, weft/cond.h). wait* may switch the
// caller; notify* never do. Waiting with a lock the caller does not hold is undefined.
class condition_variable {
 public:
  using native_handle_type = weft_cond_t *;
  constexpr condition_variable() noexcept = default;
  condition_variable(const condition_variable &) = delete;
  condition_variable &operator=(const condition_variable &) = delete;

  void notify_one() noexcept { weft_cond_signal(&c_); }
  void notify_all() noexcept { weft_cond_broadcast(&c_); }

  void wait(std::unique_lock<mutex> &lk) {
    detail::check(weft_cond_wait(&c_, lk.mutex()->native_handle()), "weft::condition_variable::wait");
  }
  template <class Pred>
  void wait(std::unique_lock<mutex> &lk, Pred pred) {
    while (!pred()) wait(lk);
  }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::unique_lock<mutex> &lk,
                            const std::chrono::time_point<Clock, Duration> &tp) {
    return timed(lk, detail::deadline_at(tp)) ? std::cv_status::no_timeout
                                              : std::cv_status::timeout;
  }
  template <class Clock, class Duration, class Pred>
  bool wait_until(std::unique_lock<mutex> &lk, const std::chrono::time_point<Clock, Duration> &tp,
                  Pred pred) {
    while (!pred())
      if (wait_until(lk, tp) == std::cv_status::timeout) return pred();
    return true;
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<mutex> &lk, const std::chrono::duration<Rep, Period> &d) {
    return timed(lk, detail::deadline_after(d)) ? std::cv_status::no_timeout
                                                : std::cv_status::timeout;
  }
  template <class Rep, class Period, class Pred>
  bool wait_for(std::unique_lock<mutex> &lk, const std::chrono::duration<Rep, Period> &d, Pred pred) {
    // not now() + d: that overflows for a large d (chrono.hpp clamps it)
    return wait_until(lk, detail::steady_at(detail::deadline_after(d)), std::move(pred));
  }
  native_handle_type native_handle() noexcept { return &c_; }

 private:
  // true: woken; false: the deadline passed. The mutex is held again in both cases.
  bool timed(std::unique_lock<mutex> &lk, uint64_t deadline) {
    int rc = weft_cond_timedwait(&c_, lk.mutex()->native_handle(), deadline);
    if (rc == WEFT_ETIMEDOUT) return false;
    detail::check(rc, "weft::condition_variable::wait_until");
    return true;
  }
  weft_cond_t c_{};
};

// A condition variable for any lockable (std::unique_lock<weft::shared_mutex>,
// std::shared_lock, weft::spinlock, a user type), as std::condition_variable_any:
// an internal weft::mutex orders a waiter's release of the user lock against
// notifiers, so no wake-up is lost between the unlock and the wait.
class condition_variable_any {
 public:
  condition_variable_any() = default;
  condition_variable_any(const condition_variable_any &) = delete;
  condition_variable_any &operator=(const condition_variable_any &) = delete;

  void notify_one() noexcept {
    std::lock_guard<mutex> g(m_);
    cv_.notify_one();
  }
  void notify_all() noexcept {
    std::lock_guard<mutex> g(m_);
    cv_.notify_all();
  }

  template <class Lock>
  void wait(Lock &lock) {
    std::unique_lock<mutex> inner(m_);
    unlocker<Lock> u{lock};
    cv_.wait(inner);
    inner.unlock();  // before relocking the user's lock (lock order: user, then m_)
  }
  template <class Lock, class Pred>
  void wait(Lock &lock, Pred pred) {
    while (!pred()) wait(lock);
  }
  template <class Lock, class Clock, class Duration>
  std::cv_status wait_until(Lock &lock, const std::chrono::time_point<Clock, Duration> &tp) {
    std::unique_lock<mutex> inner(m_);
    unlocker<Lock> u{lock};
    std::cv_status s = cv_.wait_until(inner, tp);
    inner.unlock();
    return s;
  }
  template <class Lock, class Clock, class Duration, class Pred>
  bool wait_until(Lock &lock, const std::chrono::time_point<Clock, Duration> &tp, Pred pred) {
    while (!pred())
      if (wait_until(lock, tp) == std::cv_status::timeout) return pred();
    return true;
  }
  template <class Lock, class Rep, class Period>
  std::cv_status wait_for(Lock &lock, const std::chrono::duration<Rep, Period> &d) {
    return wait_until(lock, detail::steady_at(detail::deadline_after(d)));
  }
  template <class Lock, class Rep, class Period, class Pred>
  bool wait_for(Lock &lock, const std::chrono::duration<Rep, Period> &d, Pred pred) {
    return wait_until(lock, detail::steady_at(detail::deadline_after(d)), std::move(pred));
  }

 private:
  // Unlocks the user's lock while the internal mutex is held, relocks it on the way
  // out (also when the wait throws).
  template <class Lock>
  struct unlocker {
    Lock &l;
    explicit unlocker(Lock &lock) : l(lock) { l.unlock(); }
    ~unlocker() { l.lock(); }
    unlocker(const unlocker &) = delete;
    unlocker &operator=(const unlocker &) = delete;
  };
  mutex m_;
  condition_variable cv_;
};

}  // namespace weft

#endif
