// weft/cpp/mutex.hpp - lockables for the standard wrappers (std::lock_guard,
// std::unique_lock, std::scoped_lock, std::shared_lock): weft::mutex, timed_mutex,
// shared_mutex and spinlock<Kind>.
//
// Each is a thin inline layer over the C object (weft/mutex.h, weft/rwlock.h,
// weft/spinlock.h): lock() costs the C call and one test of its result. All are
// usable from weft threads and plain OS threads, constexpr-constructible (an
// all-zero C object is a valid unlocked lock), neither copyable nor movable.
// Unlocking a lock the caller does not hold is undefined (checked builds abort).
#ifndef WEFT_CPP_MUTEX_HPP
#define WEFT_CPP_MUTEX_HPP

#include <chrono>

#include "weft/cpp/chrono.hpp"
#include "weft/cpp/error.hpp"
#include "weft/mutex.h"
#include "weft/rwlock.h"
#include "weft/spinlock.h"

namespace weft {

// The two-phase mutex (weft_mutex_t): spins briefly, then blocks the weft thread
// (never its VP). Not recursive; not FIFO-fair (see weft/mutex.h).
class mutex {
 public:
  using native_handle_type = weft_mutex_t *;
  constexpr mutex() noexcept = default;
  mutex(const mutex &) = delete;
  mutex &operator=(const mutex &) = delete;
  // May switch the caller. Throws nothing for a valid object (the C call fails only
  // for NULL); declared like std::mutex::lock.
  void lock() { detail::check(weft_mutex_lock(&m_), "weft::mutex::lock"); }
  bool try_lock() noexcept { return weft_mutex_trylock(&m_) == 0; }
  void unlock() noexcept { detail::unlocked(weft_mutex_unlock(&m_), "weft::mutex::unlock"); }
  native_handle_type native_handle() noexcept { return &m_; }

 private:
  weft_mutex_t m_{};
};

// weft::mutex with timeouts (weft_mutex_timedlock).
class timed_mutex {
 public:
  using native_handle_type = weft_mutex_t *;
  constexpr timed_mutex() noexcept = default;
  timed_mutex(const timed_mutex &) = delete;
  timed_mutex &operator=(const timed_mutex &) = delete;
  void lock() { detail::check(weft_mutex_lock(&m_), "weft::timed_mutex::lock"); }
  bool try_lock() noexcept { return weft_mutex_trylock(&m_) == 0; }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period> &d) {
    return timed(detail::deadline_after(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration> &tp) {
    return timed(detail::deadline_at(tp));
  }
  void unlock() noexcept { detail::unlocked(weft_mutex_unlock(&m_), "weft::timed_mutex::unlock"); }
  native_handle_type native_handle() noexcept { return &m_; }

 private:
  bool timed(uint64_t deadline) {
    int rc = weft_mutex_timedlock(&m_, deadline);
    if (rc == WEFT_ETIMEDOUT) return false;
    detail::check(rc, "weft::timed_mutex::try_lock_until");
    return true;
  }
  weft_mutex_t m_{};
};

// A reader/writer lock (weft_rwlock_t; FIFO once anyone waits, see weft/rwlock.h),
// with the interface of std::shared_timed_mutex (so also std::shared_mutex's).
class shared_mutex {
 public:
  using native_handle_type = weft_rwlock_t *;
  constexpr shared_mutex() noexcept = default;
  shared_mutex(const shared_mutex &) = delete;
  shared_mutex &operator=(const shared_mutex &) = delete;
  void lock() { detail::check(weft_rwlock_wrlock(&l_), "weft::shared_mutex::lock"); }
  bool try_lock() noexcept { return weft_rwlock_trywrlock(&l_) == 0; }
  void unlock() noexcept { detail::unlocked(weft_rwlock_unlock(&l_), "weft::shared_mutex::unlock"); }
  // Throws std::system_error with EAGAIN when 2^29 - 1 readers hold it already.
  void lock_shared() { detail::check(weft_rwlock_rdlock(&l_), "weft::shared_mutex::lock_shared"); }
  bool try_lock_shared() noexcept { return weft_rwlock_tryrdlock(&l_) == 0; }
  void unlock_shared() noexcept {
    detail::unlocked(weft_rwlock_unlock(&l_), "weft::shared_mutex::unlock_shared");
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period> &d) {
    return timed(weft_rwlock_timedwrlock(&l_, detail::deadline_after(d)));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration> &tp) {
    return timed(weft_rwlock_timedwrlock(&l_, detail::deadline_at(tp)));
  }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period> &d) {
    return timed(weft_rwlock_timedrdlock(&l_, detail::deadline_after(d)));
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration> &tp) {
    return timed(weft_rwlock_timedrdlock(&l_, detail::deadline_at(tp)));
  }
  native_handle_type native_handle() noexcept { return &l_; }

 private:
  static bool timed(int rc) {
    if (rc == WEFT_ETIMEDOUT) return false;
    detail::check(rc, "weft::shared_mutex timed lock");
    return true;
  }
  weft_rwlock_t l_{};
};

// Spinlock kinds (weft/spinlock/*.h): tags for weft::spinlock<Kind>.
namespace spin {
#define WEFT__CPP_SPIN_KIND(name)                                                   \
  struct name {                                                                     \
    using type = weft_spin_##name##_t;                                              \
    static void lock(type *l) noexcept { weft_spin_##name##_lock(l); }              \
    static bool try_lock(type *l) noexcept { return weft_spin_##name##_trylock(l) == 0; } \
    static void unlock(type *l) noexcept { weft_spin_##name##_unlock(l); }          \
  };
WEFT__CPP_SPIN_KIND(tas)
WEFT__CPP_SPIN_KIND(ttas)
WEFT__CPP_SPIN_KIND(backoff)
WEFT__CPP_SPIN_KIND(ticket)
WEFT__CPP_SPIN_KIND(array)
WEFT__CPP_SPIN_KIND(mcs)
#undef WEFT__CPP_SPIN_KIND
// The default kind (weft_spin_t), chosen by measurement (weft/spinlock.h).
using default_kind = backoff;
}  // namespace spin

// A spinlock of kind Kind (weft::spin::tas, ttas, backoff, ticket, array, mcs). It
// never switches the caller: usable in scheduler handlers and event callbacks. Hold
// it for a few instructions only.
template <class Kind = spin::default_kind>
class spinlock {
 public:
  using native_handle_type = typename Kind::type *;
  constexpr spinlock() noexcept = default;
  spinlock(const spinlock &) = delete;
  spinlock &operator=(const spinlock &) = delete;
  void lock() noexcept { Kind::lock(&l_); }
  bool try_lock() noexcept { return Kind::try_lock(&l_); }
  void unlock() noexcept { Kind::unlock(&l_); }
  native_handle_type native_handle() noexcept { return &l_; }

 private:
  typename Kind::type l_{};
};

}  // namespace weft

#endif
