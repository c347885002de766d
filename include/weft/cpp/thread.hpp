// weft/cpp/thread.hpp - weft::thread (std::thread for weft threads, with Presto's
// start(object, &Class::operation, args...)) and weft::this_thread.
#ifndef WEFT_CPP_THREAD_HPP
#define WEFT_CPP_THREAD_HPP

#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

#include "weft/cpp/chrono.hpp"
#include "weft/cpp/error.hpp"
#include "weft/runtime.h"
#include "weft/thread.h"
#include "weft/time.h"
#include "weft/wire.h"

namespace weft {

namespace detail {

struct thread_state_base {
  virtual ~thread_state_base() = default;
  virtual void run() = 0;
};

// The callable and its arguments, decayed and owned by the new thread.
template <class Tuple>
struct thread_state final : thread_state_base {
  Tuple args;
  template <class... A>
  explicit thread_state(A &&...a) : args(std::forward<A>(a)...) {}
  void run() override { std::apply([](auto &&...a) { std::invoke(std::move(a)...); }, std::move(args)); }
};

// Thread bodies. noexcept: an exception that leaves a thread body calls
// std::terminate(), as with std::thread (see weft/weft.hpp for why).
inline void *thread_entry_heap(void *p) noexcept {
  std::unique_ptr<thread_state_base> s(static_cast<thread_state_base *>(p));
  s->run();
  return nullptr;
}

// A callable that fits in the control block's argument word (a function pointer, a
// lambda capturing at most one pointer) travels there: no allocation at all.
template <class F>
inline constexpr bool fits_in_word = std::is_trivially_copyable_v<F> &&
                                     sizeof(F) <= sizeof(void *) &&
                                     alignof(F) <= alignof(void *);

template <class F>
void *thread_entry_word(void *p) noexcept {
  alignas(F) unsigned char buf[sizeof(F)];
  std::memcpy(buf, &p, sizeof(F));
  std::invoke(*std::launder(reinterpret_cast<F *>(buf)));
  return nullptr;
}

template <class T>
using remove_cvref_t = std::remove_cv_t<std::remove_reference_t<T>>;

}  // namespace detail

// A weft thread, with std::thread's interface: start it with any callable and
// arguments (copied or moved into the thread, as std::thread does), then join() or
// detach() it before the object is destroyed or assigned (else std::terminate()).
// Move-only. Construct it from any weft thread or plain OS thread while weft runs.
class thread {
 public:
  // The numeric id (weft_thread_id()); id() names no thread.
  class id {
   public:
    id() noexcept = default;
    explicit id(uint64_t v) noexcept : v_(v) {}
    uint64_t value() const noexcept { return v_; }
    friend bool operator==(id a, id b) noexcept { return a.v_ == b.v_; }
    friend bool operator!=(id a, id b) noexcept { return a.v_ != b.v_; }
    friend bool operator<(id a, id b) noexcept { return a.v_ < b.v_; }
    friend bool operator<=(id a, id b) noexcept { return a.v_ <= b.v_; }
    friend bool operator>(id a, id b) noexcept { return a.v_ > b.v_; }
    friend bool operator>=(id a, id b) noexcept { return a.v_ >= b.v_; }
    template <class C, class T>
    friend std::basic_ostream<C, T> &operator<<(std::basic_ostream<C, T> &o, id i) {
      return o << i.v_;
    }

   private:
    uint64_t v_ = 0;
  };
  using native_handle_type = weft_thread_t *;

  // Where and how a thread runs (weft_attr_t): its bundle (nullptr: the root; see
  // weft/cpp/scheduler.hpp), stack size (0: default) and affinity hint: -1 (the
  // default) none, else virtual processor `affinity` (weft_attr_t.vproc =
  // WEFT_VPROC(affinity)); other negative values and INT_MAX: EINVAL.
  struct attributes {
    weft_bundle_t *bundle = nullptr;
    size_t stack_size = 0;
    int affinity = -1;
  };

  thread() noexcept = default;

  // Starts a thread that runs std::invoke(f, args...). Throws std::system_error
  // (weft_create's errors: ENOMEM, ENOTINIT, EINVAL) and std::bad_alloc.
  template <class F, class... Args,
            class = std::enable_if_t<!std::is_same_v<detail::remove_cvref_t<F>, thread> &&
                                     !std::is_same_v<detail::remove_cvref_t<F>, attributes>>>
  explicit thread(F &&f, Args &&...args) {
    start_with(nullptr, std::forward<F>(f), std::forward<Args>(args)...);
  }

  // The same, with attributes.
  template <class F, class... Args>
  thread(const attributes &a, F &&f, Args &&...args) {
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.bundle = a.bundle;
    attr.stack_size = a.stack_size;
    attr.vproc = a.affinity == -1                              ? 0
                 : a.affinity >= 0 && a.affinity < INT_MAX ? WEFT_VPROC(a.affinity)
                                                           : -1;  // weft_create: EINVAL
    start_with(&attr, std::forward<F>(f), std::forward<Args>(args)...);
  }

  // Presto's start (Presto §3.2): run object.operation(args...) in a new thread.
  // `object` may be a pointer or an lvalue (run in place: it must outlive the
  // thread, as in Presto) or an rvalue (moved into the thread).
  template <class Obj, class Op, class... Args>
  static thread start(Obj &&object, Op operation, Args &&...args) {
    static_assert(std::is_member_function_pointer_v<Op>,
                  "weft::thread::start(object, &Class::operation, args...)");
    if constexpr (std::is_pointer_v<std::decay_t<Obj>>)
      return thread(operation, object, std::forward<Args>(args)...);
    else if constexpr (std::is_lvalue_reference_v<Obj &&>)
      return thread(operation, std::ref(object), std::forward<Args>(args)...);
    else
      return thread(operation, std::move(object), std::forward<Args>(args)...);
  }

  thread(const thread &) = delete;
  thread &operator=(const thread &) = delete;
  thread(thread &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  thread &operator=(thread &&o) noexcept {
    if (joinable()) std::terminate();
    h_ = std::exchange(o.h_, nullptr);
    return *this;
  }
  ~thread() {
    if (joinable()) std::terminate();
  }

  bool joinable() const noexcept { return h_ != nullptr; }
  id get_id() const noexcept { return id(weft_thread_id(h_)); }
  native_handle_type native_handle() const noexcept { return h_; }

  // join() waits for the thread to finish (blocking the calling weft thread, not its
  // VP). Throws std::system_error: EINVAL (not joinable), EDEADLK (itself), ENOTINIT
  // (weft is not running: weft_shutdown() waited for the thread and reclaimed it,
  // as it does every thread nobody joined; the object is then no longer joinable, so
  // that destroying it does not terminate the program). Once weft is started again
  // the handle names nothing (as a reclaimed handle in C, weft/thread.h): join or
  // detach such an object before the next weft_init().
  void join() {
    if (!h_) detail::throw_error(WEFT_EINVAL, "weft::thread::join: not joinable");
    int rc = weft_join(h_, nullptr);
    if (rc == WEFT_ENOTINIT) h_ = nullptr;
    detail::check(rc, "weft::thread::join");
    h_ = nullptr;
  }
  // detach() lets the thread reclaim itself. Throws std::system_error (EINVAL: not
  // joinable). Once weft has stopped (weft_shutdown() waited for the thread and
  // reclaimed it) there is nothing left to detach: the object just lets go of it.
  void detach() {
    if (!h_) detail::throw_error(WEFT_EINVAL, "weft::thread::detach: not joinable");
    int rc = weft_detach(h_);
    if (rc != WEFT_ENOTINIT) detail::check(rc, "weft::thread::detach");
    h_ = nullptr;
  }
  // set_name() names the thread (weft_set_name(): truncated to WEFT_NAME_MAX - 1
  // bytes; shown by weft_dump, traces and the gdb extension). Throws
  // std::system_error (EINVAL: not joinable).
  void set_name(const char *name) {
    if (!h_) detail::throw_error(WEFT_EINVAL, "weft::thread::set_name: not joinable");
    detail::check(weft_set_name(h_, name), "weft_set_name");
  }
  void set_name(const std::string &name) { set_name(name.c_str()); }
  // get_name() returns the thread's name ("" if none or not joinable).
  std::string get_name() const {
    char buf[WEFT_NAME_MAX];
    if (!h_ || weft_get_name(h_, buf, sizeof buf) != 0) return std::string();
    return std::string(buf);
  }
  void swap(thread &o) noexcept { std::swap(h_, o.h_); }
  friend void swap(thread &a, thread &b) noexcept { a.swap(b); }

  // The number of VPs while weft runs, else the hardware's thread count.
  static unsigned hardware_concurrency() noexcept {
    int n = weft_vp_count();
    return n > 0 ? static_cast<unsigned>(n) : std::thread::hardware_concurrency();
  }

 private:
  template <class F, class... Args>
  void start_with(const weft_attr_t *attr, F &&f, Args &&...args) {
    using D = std::decay_t<F>;
    if constexpr (sizeof...(Args) == 0 && detail::fits_in_word<D>) {
      D d(std::forward<F>(f));
      void *word = nullptr;
      std::memcpy(&word, &d, sizeof(D));
      detail::check(weft_create(&h_, attr, &detail::thread_entry_word<D>, word), "weft_create");
    } else {
      using S = detail::thread_state<std::tuple<D, std::decay_t<Args>...>>;
      auto s = std::make_unique<S>(std::forward<F>(f), std::forward<Args>(args)...);
      detail::check(weft_create(&h_, attr, &detail::thread_entry_heap, s.get()), "weft_create");
      s.release();  // the thread owns it now
    }
  }

  weft_thread_t *h_ = nullptr;
};

namespace this_thread {

// yield() lets other ready threads run (weft_yield()).
inline void yield() noexcept { weft_yield(); }

// get_id() returns the calling weft thread's id, or id() from a plain OS thread.
inline thread::id get_id() noexcept { return thread::id(weft_thread_id(weft_self())); }

// set_name() names the calling weft thread (weft_set_name()). Throws
// std::system_error (EPERM: a plain OS thread).
inline void set_name(const char *name) { detail::check(weft_set_name(nullptr, name), "weft_set_name"); }
inline void set_name(const std::string &name) { set_name(name.c_str()); }

// get_name() returns the calling weft thread's name ("" if none, or from a plain OS
// thread).
inline std::string get_name() {
  char buf[WEFT_NAME_MAX];
  if (weft_get_name(nullptr, buf, sizeof buf) != 0) return std::string();
  return std::string(buf);
}

// sleep_for() blocks the calling weft thread (not its VP) for at least d.
template <class Rep, class Period>
void sleep_for(const std::chrono::duration<Rep, Period> &d) {
  if (d <= d.zero()) return;
  weft_sleep_until(detail::deadline_after(d));
}

// sleep_until() blocks the calling weft thread until Clock::now() >= tp.
// Compared in tp's own unit (now rounded down) and slept through detail::deadline_at:
// `Clock::now() < tp` and `tp - now` convert tp to now's finer unit, which overflows
// for far points of a coarse unit (time_point<steady_clock, hours>::max() returned at
// once). Looping covers a Clock that is not weft's (steady) clock.
template <class Clock, class Duration>
void sleep_until(const std::chrono::time_point<Clock, Duration> &tp) {
  while (std::chrono::floor<Duration>(Clock::now()) < tp) weft_sleep_until(detail::deadline_at(tp));
}

// While a `wired` object lives, the calling thread runs on a kernel thread of its
// own (weft/wire.h), so blocking system calls stall no VP; its destructor gives the
// thread back to the VPs (unless the thread was already wired when it was made:
// nested scopes leave the outer one in charge). Destroy it on the thread that made
// it. Throws std::system_error (weft_wire's errors).
class wired {
 public:
  wired() : outer_(weft_is_wired() != 0) {
    if (!outer_) detail::check(weft_wire(), "weft_wire");
  }
  ~wired() {
    if (!outer_) weft_unwire();
  }
  wired(const wired &) = delete;
  wired &operator=(const wired &) = delete;

 private:
  bool outer_;
};

}  // namespace this_thread
}  // namespace weft

template <>
struct std::hash<weft::thread::id> {
  size_t operator()(weft::thread::id i) const noexcept { return std::hash<uint64_t>()(i.value()); }
};

#endif
