// weft/cpp/condition_variable.hpp - weft::condition_variable (with
// std::unique_lock<weft::mutex>) and weft::condition_variable_any (with any lockable).
#ifndef WEFT_CPP_CONDITION_VARIABLE_HPP
#define WEFT_CPP_CONDITION_VARIABLE_HPP

#include <atomic>
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
// std::shared_lock, weft::spinlock, a user type), as std::condition_variable_any.
//
// An internal weft::mutex and condition, and a count of notifications, order a
// waiter's release of the user's lock against notifiers, so that no wake-up is lost
// between the unlock and the wait: the waiter reads the count while it still holds the
// user's lock, releases that lock, takes the internal mutex, and waits only if no
// notification came since (else it returns at once: a spurious wake-up, which the
// predicate overloads absorb). A notifier bumps the count under the internal mutex.
// A notification that changed the waiter's predicate was made after the waiter
// released the user's lock (the change needed it), so the waiter either sees the
// count moved or is already waiting when it comes. The waiter never blocks while it
// holds the user's lock: with a spinlock, a waiter blocked on the internal mutex
// kept the spinlock, and the threads spinning for it took every VP.
//
// The internal state is shared (std::shared_ptr) and each waiter holds a reference
// for the length of its wait, so the object may be destroyed once every waiter has
// been notified, before they have returned from wait (as std allows).
class condition_variable_any {
 public:
  condition_variable_any() : s_(std::make_shared<state>()) {}
  condition_variable_any(const condition_variable_any &) = delete;
  condition_variable_any &operator=(const condition_variable_any &) = delete;

  void notify_one() noexcept {
    std::lock_guard<mutex> g(s_->m);
    s_->notified.fetch_add(1, std::memory_order_relaxed);  // under m: m orders it
    s_->cv.notify_one();
  }
  void notify_all() noexcept {
    std::lock_guard<mutex> g(s_->m);
    s_->notified.fetch_add(1, std::memory_order_relaxed);
    s_->cv.notify_all();
  }

  template <class Lock>
  void wait(Lock &lock) {
    std::shared_ptr<state> s = s_;
    // relaxed: read under the user's lock; a notification that matters is made after
    // that lock is released (see above), and the compare below is under s->m
    uint64_t seen = s->notified.load(std::memory_order_relaxed);
    unlocker<Lock> u{lock};
    std::unique_lock<mutex> inner(s->m);
    if (s->notified.load(std::memory_order_relaxed) == seen) s->cv.wait(inner);
    inner.unlock();  // before relocking the user's lock (lock order: user, then m)
  }
  template <class Lock, class Pred>
  void wait(Lock &lock, Pred pred) {
    while (!pred()) wait(lock);
  }
  template <class Lock, class Clock, class Duration>
  std::cv_status wait_until(Lock &lock, const std::chrono::time_point<Clock, Duration> &tp) {
    std::shared_ptr<state> s = s_;
    uint64_t seen = s->notified.load(std::memory_order_relaxed);  // as in wait
    unlocker<Lock> u{lock};
    std::unique_lock<mutex> inner(s->m);
    std::cv_status st = std::cv_status::no_timeout;
    if (s->notified.load(std::memory_order_relaxed) == seen) st = s->cv.wait_until(inner, tp);
    inner.unlock();
    return st;
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
  struct state {
    mutex m;
    condition_variable cv;
    // notifications so far: added to under m; read under m, and once without it by a
    // waiter that holds its own lock (relaxed throughout: m orders the accesses that
    // matter, see the class comment)
    std::atomic<uint64_t> notified{0};
  };
  // Unlocks the user's lock, relocks it on the way out (also when the wait throws).
  template <class Lock>
  struct unlocker {
    Lock &l;
    explicit unlocker(Lock &lock) : l(lock) { l.unlock(); }
    ~unlocker() { l.lock(); }
    unlocker(const unlocker &) = delete;
    unlocker &operator=(const unlocker &) = delete;
  };
  std::shared_ptr<state> s_;
};

}  // namespace weft

#endif
