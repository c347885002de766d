// weft/cpp/future.hpp - weft::promise, weft::future, weft::shared_future and
// weft::async: std's interfaces, over weft futures (weft/future.h), so that a
// wait blocks the calling weft thread and not its VP.
//
// As in std: a promise's value or exception is set once (a second set throws
// std::future_error(promise_already_satisfied)); get_future() may be called once
// (future_already_retrieved); a promise destroyed without a value stores
// std::future_error(broken_promise); an exception set by set_exception() (or thrown
// by an async function) is rethrown by get(); get() on a future leaves it invalid,
// and share() moves it into a copyable shared_future. Calls on an object with no
// shared state (default-constructed, moved from, or after get()) throw
// std::future_error(no_state), where std leaves most of them undefined.
// wait_for/wait_until return std::future_status. Every wait works from weft threads
// and plain OS threads.
//
// weft::async(policy, f, args...) runs f(args...) in a new weft thread
// (std::launch::async, the default) or in the first thread that waits on the
// result (std::launch::deferred; wait_for/wait_until then return
// future_status::deferred). As with std::async, the destructor of the last future
// or shared_future of an async (not deferred) call waits for the function to
// finish. Not provided: set_value_at_thread_exit, set_exception_at_thread_exit,
// packaged_task.
#ifndef WEFT_CPP_FUTURE_HPP
#define WEFT_CPP_FUTURE_HPP

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "weft/cpp/chrono.hpp"
#include "weft/cpp/error.hpp"
#include "weft/cpp/thread.hpp"
#include "weft/future.h"

namespace weft {

template <class T> class future;
template <class T> class shared_future;
template <class T> class promise;

namespace detail {

[[noreturn]] inline void throw_future(std::future_errc e) { throw std::future_error(e); }

// Tag of the constructor that makes a future of a shared state (promise, async).
struct state_tag {};

// What a shared state keeps for T: the value, a pointer for T&, nothing for void.
template <class T> struct future_stored { using type = T; };
template <class T> struct future_stored<T &> { using type = T *; };
template <> struct future_stored<void> { using type = bool; };

// The shared state: a weft future (set once the result is in), the result, and
// the counts std's rules need. The weft future's value is unused: its set is the
// release that publishes result_ / ex_ to every waiter's acquire.
template <class T>
class future_state {
 public:
  using stored = typename future_stored<T>::type;

  future_state() = default;
  future_state(const future_state &) = delete;
  future_state &operator=(const future_state &) = delete;
  ~future_state() {
    if (has_value_) std::launder(reinterpret_cast<stored *>(&buf_))->~stored();
  }

  // ---- producer side: exactly one claim succeeds
  void claim() {
    if (claimed_.exchange(true, std::memory_order_acq_rel))
      throw_future(std::future_errc::promise_already_satisfied);
  }
  template <class... A>
  void set_value(A &&...a) {
    claim();
    try {
      ::new (static_cast<void *>(&buf_)) stored(std::forward<A>(a)...);
    } catch (...) {
      // Nothing was stored, so the promise is not satisfied (as std::promise): a later
      // set_value or set_exception may still satisfy it, and its destructor stores
      // broken_promise. Left claimed, its future never became ready. release: pairs
      // with the acquire of the next claim's exchange. A set racing with this one got
      // promise_already_satisfied meanwhile.
      claimed_.store(false, std::memory_order_release);
      throw;
    }
    has_value_ = true;
    publish();
  }
  void set_exception(std::exception_ptr e) {
    claim();
    ex_ = std::move(e);
    publish();
  }
  bool claimed() const noexcept { return claimed_.load(std::memory_order_acquire); }

  // ---- consumer side
  bool retrieve() noexcept { return !retrieved_.exchange(true, std::memory_order_acq_rel); }
  void wait() {
    run_deferred();
    int rc = weft_future_wait(&f_, nullptr);
    if (rc) throw_error(rc, "weft::future::wait");
  }
  std::future_status wait_until_deadline(uint64_t deadline) {
    if (deferred_ && !deferred_started_.load(std::memory_order_acquire))
      return std::future_status::deferred;
    int rc = weft_future_timedwait(&f_, deadline, nullptr);
    if (rc == 0) return std::future_status::ready;
    if (rc == WEFT_ETIMEDOUT) return std::future_status::timeout;
    throw_error(rc, "weft::future::wait_for");
  }
  // The result, after wait(): rethrows a stored exception.
  stored &result() {
    wait();
    if (ex_) std::rethrow_exception(ex_);
    return *std::launder(reinterpret_cast<stored *>(&buf_));
  }

  // ---- consumers of an async call (the last one waits in its destructor)
  void consumer_add() noexcept { consumers_.fetch_add(1, std::memory_order_relaxed); }
  void consumer_drop() noexcept {
    // acq_rel: the last one sees every other consumer's use before it waits
    if (consumers_.fetch_sub(1, std::memory_order_acq_rel) == 1 && async_) {
      try {
        wait();
      } catch (...) {
      }
    }
  }

  bool async_ = false;                  // made by weft::async with launch::async
  std::function<void()> deferred_;      // launch::deferred: runs the function

 private:
  void publish() noexcept { weft_future_set(&f_, nullptr); }  // once: claimed
  void run_deferred() {
    if (deferred_ && !deferred_started_.exchange(true, std::memory_order_acq_rel)) deferred_();
  }

  weft_future_t f_ = WEFT_FUTURE_INIT;
  std::atomic<bool> claimed_{false};
  std::atomic<bool> retrieved_{false};
  std::atomic<bool> deferred_started_{false};
  std::atomic<long> consumers_{0};
  std::exception_ptr ex_;
  bool has_value_ = false;
  alignas(stored) unsigned char buf_[sizeof(stored)];
};

// A consumer's reference to a shared state (future, shared_future).
template <class T>
class consumer_ref {
 public:
  consumer_ref() noexcept = default;
  explicit consumer_ref(std::shared_ptr<future_state<T>> s) noexcept : s_(std::move(s)) {
    if (s_) s_->consumer_add();
  }
  consumer_ref(const consumer_ref &o) noexcept : consumer_ref(o.s_) {}
  consumer_ref(consumer_ref &&o) noexcept : s_(std::move(o.s_)) {}
  consumer_ref &operator=(consumer_ref o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~consumer_ref() { reset(); }
  void reset() noexcept {
    if (s_) s_->consumer_drop();
    s_.reset();
  }
  future_state<T> *get() const noexcept { return s_.get(); }
  const std::shared_ptr<future_state<T>> &ptr() const noexcept { return s_; }
  future_state<T> &checked() const {
    if (!s_) throw_future(std::future_errc::no_state);
    return *s_;
  }

 private:
  std::shared_ptr<future_state<T>> s_;
};

// The wait functions shared by future and shared_future.
template <class T>
class future_base {
 public:
  bool valid() const noexcept { return r_.get() != nullptr; }
  void wait() const { r_.checked().wait(); }
  template <class Rep, class Period>
  std::future_status wait_for(const std::chrono::duration<Rep, Period> &d) const {
    return r_.checked().wait_until_deadline(deadline_after(d));
  }
  template <class Clock, class Duration>
  std::future_status wait_until(const std::chrono::time_point<Clock, Duration> &tp) const {
    future_state<T> &s = r_.checked();
    for (;;) {
      std::future_status st = s.wait_until_deadline(deadline_at(tp));
      if (st != std::future_status::timeout || Clock::now() >= tp) return st;
    }
  }

 protected:
  future_base() noexcept = default;
  explicit future_base(std::shared_ptr<future_state<T>> s) noexcept : r_(std::move(s)) {}
  consumer_ref<T> r_;
};

}  // namespace detail

// ---- future<T>: the one consumer of a result; get() once -------------------------
template <class T>
class future : public detail::future_base<T> {
 public:
  future() noexcept = default;
  future(future &&) noexcept = default;
  future &operator=(future &&) noexcept = default;
  future(const future &) = delete;
  future &operator=(const future &) = delete;

  // share() moves the state into a shared_future; this future becomes invalid.
  shared_future<T> share() noexcept { return shared_future<T>(std::move(*this)); }

  // get() waits, then returns the value (moved out) or rethrows the exception; the
  // future is invalid afterwards.
  T get() {
    detail::consumer_ref<T> r = std::move(this->r_);
    auto &s = r.checked();
    if constexpr (std::is_void_v<T>) {
      s.result();
    } else if constexpr (std::is_reference_v<T>) {
      return *s.result();
    } else {
      return std::move(s.result());
    }
  }

 private:
  friend class promise<T>;
  friend class shared_future<T>;

 public:
  // For promise and async only.
  future(detail::state_tag, std::shared_ptr<detail::future_state<T>> s) noexcept
      : detail::future_base<T>(std::move(s)) {}
};

// ---- shared_future<T>: copyable; get() any number of times, from any thread ------
template <class T>
class shared_future : public detail::future_base<T> {
 public:
  shared_future() noexcept = default;
  shared_future(const shared_future &) noexcept = default;
  shared_future(shared_future &&) noexcept = default;
  shared_future &operator=(const shared_future &) noexcept = default;
  shared_future &operator=(shared_future &&) noexcept = default;
  shared_future(future<T> &&f) noexcept { this->r_ = std::move(f.r_); }

  // get() waits, then returns a reference to the value (const T& for a value, T&
  // for a reference, nothing for void) or rethrows the exception.
  decltype(auto) get() const {
    auto &s = this->r_.checked();
    if constexpr (std::is_void_v<T>) {
      s.result();
    } else if constexpr (std::is_reference_v<T>) {
      return static_cast<T>(*s.result());
    } else {
      return static_cast<const T &>(s.result());
    }
  }
};

// ---- promise<T> --------------------------------------------------------------------
namespace detail {
template <class T>
class promise_base {
 public:
  promise_base() : s_(std::make_shared<future_state<T>>()) {}
  promise_base(promise_base &&o) noexcept = default;
  promise_base &operator=(promise_base &&o) noexcept {
    abandon();
    s_ = std::move(o.s_);
    return *this;
  }
  promise_base(const promise_base &) = delete;
  promise_base &operator=(const promise_base &) = delete;
  ~promise_base() { abandon(); }

  void swap(promise_base &o) noexcept { std::swap(s_, o.s_); }

  // get_future() returns the future of this promise's state: once.
  future<T> get_future() {
    if (!s_) throw_future(std::future_errc::no_state);
    if (!s_->retrieve()) throw_future(std::future_errc::future_already_retrieved);
    return future<T>(state_tag{}, s_);
  }
  void set_exception(std::exception_ptr e) { state().set_exception(std::move(e)); }

 protected:
  future_state<T> &state() {
    if (!s_) throw_future(std::future_errc::no_state);
    return *s_;
  }

 private:
  // A promise that goes away unsatisfied breaks its promise.
  void abandon() noexcept {
    if (s_ && !s_->claimed()) {
      try {
        s_->set_exception(std::make_exception_ptr(std::future_error(std::future_errc::broken_promise)));
      } catch (...) {
      }
    }
    s_.reset();
  }
  std::shared_ptr<future_state<T>> s_;
};
}  // namespace detail

template <class T>
class promise : public detail::promise_base<T> {
 public:
  promise() = default;
  void set_value(const T &v) { this->state().set_value(v); }
  void set_value(T &&v) { this->state().set_value(std::move(v)); }
  void swap(promise &o) noexcept { detail::promise_base<T>::swap(o); }
};

template <class T>
class promise<T &> : public detail::promise_base<T &> {
 public:
  promise() = default;
  void set_value(T &v) { this->state().set_value(std::addressof(v)); }
  void swap(promise &o) noexcept { detail::promise_base<T &>::swap(o); }
};

template <>
class promise<void> : public detail::promise_base<void> {
 public:
  promise() = default;
  void set_value() { this->state().set_value(true); }
  void swap(promise &o) noexcept { detail::promise_base<void>::swap(o); }
};

template <class T>
void swap(promise<T> &a, promise<T> &b) noexcept {
  a.swap(b);
}

// ---- async -------------------------------------------------------------------------
namespace detail {
// Runs the call and stores its result or exception in s.
template <class R, class Tuple>
void async_run(future_state<R> &s, Tuple &t) noexcept {
  try {
    if constexpr (std::is_void_v<R>) {
      std::apply([](auto &&...a) { std::invoke(std::move(a)...); }, std::move(t));
      s.set_value(true);
    } else if constexpr (std::is_reference_v<R>) {
      R r = std::apply([](auto &&...a) -> R { return std::invoke(std::move(a)...); }, std::move(t));
      s.set_value(std::addressof(r));
    } else {
      s.set_value(std::apply([](auto &&...a) { return std::invoke(std::move(a)...); }, std::move(t)));
    }
  } catch (...) {
    try {
      s.set_exception(std::current_exception());
    } catch (...) {
    }
  }
}
}  // namespace detail

// async(policy, f, args...): f(args...) with decayed copies of f and args, run in
// a new weft thread (launch::async; also the default, async | deferred, when the
// thread can be created) or deferred to the first wait. Throws std::system_error
// (weft_create's errors) when launch::async alone is asked and no thread can be
// created, and std::bad_alloc.
template <class F, class... A>
auto async(std::launch policy, F &&f, A &&...args) {
  using R = std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>;
  using Tuple = std::tuple<std::decay_t<F>, std::decay_t<A>...>;
  auto s = std::make_shared<detail::future_state<R>>();
  s->retrieve();
  auto t = std::make_shared<Tuple>(std::forward<F>(f), std::forward<A>(args)...);
  if ((policy & std::launch::async) == std::launch::async) {
    s->async_ = true;
    try {
      thread([s, t] { detail::async_run(*s, *t); }).detach();
      return future<R>(detail::state_tag{}, s);
    } catch (const std::system_error &) {
      if ((policy & std::launch::deferred) != std::launch::deferred) throw;
      s->async_ = false;
    }
  }
  detail::future_state<R> *raw = s.get();
  s->deferred_ = [raw, t] { detail::async_run(*raw, *t); };
  return future<R>(detail::state_tag{}, s);
}

template <class F, class... A,
          class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, std::launch>>>
auto async(F &&f, A &&...args) {
  return weft::async(std::launch::async | std::launch::deferred, std::forward<F>(f),
                     std::forward<A>(args)...);
}

}  // namespace weft

#endif
