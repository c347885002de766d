// weft/cpp/scheduler.hpp - bundles and schedulers: a bundle of any built-in scheduler
// (weft/schedlib.h), and weft::scheduler, a base class whose virtual event handlers
// are adapted to the C table (weft_sched_ops_t, weft/sched.h).
#ifndef WEFT_CPP_SCHEDULER_HPP
#define WEFT_CPP_SCHEDULER_HPP

#include <exception>
#include <utility>

#include "weft/cpp/error.hpp"
#include "weft/sched.h"
#include "weft/schedlib.h"

namespace weft {

// A scheduler written in C++: override the event handlers (weft/sched.h gives each
// event's contract). thread_created and thread_unblocked are required; the others do
// nothing by default. Handlers run on VPs, concurrently, and must not block, yield or
// throw (an exception calls std::terminate()). The kernel services are the static
// members below. A scheduler object must outlive every bundle made with it.
class scheduler {
 public:
  scheduler() = default;
  scheduler(const scheduler &) = delete;
  scheduler &operator=(const scheduler &) = delete;
  virtual ~scheduler() = default;

  // ---- the events ----
  virtual void thread_created(weft_thread_t *t) = 0;
  virtual void thread_unblocked(weft_thread_t *t) = 0;
  virtual void thread_started(weft_thread_t *) {}
  virtual void thread_terminated(weft_thread_t *) {}
  virtual void thread_blocked(weft_thread_t *) {}
  virtual void bundle_created(weft_bundle_t *) {}
  virtual void bundle_terminated(weft_bundle_t *) {}
  virtual weft_thread_t *processor_idle(weft_vp_t *) { return nullptr; }
  // WEFT_SCHED_* flags for the table (weft/sched.h), read when a bundle is made.
  virtual unsigned flags() const { return 0; }

  // ---- kernel services (weft/sched.h) ----
  static void enqueue(weft_vp_t *vp, weft_thread_t *t) noexcept { weft_sched_enqueue(vp, t); }
  static void notify() noexcept { weft_sched_notify(); }
  static weft_thread_t *steal(weft_vp_t *vp) noexcept { return weft_sched_steal(vp); }
  static weft_vp_t *vp_self() noexcept { return weft_sched_vp_self(); }
  static weft_vp_t *vp(int i) noexcept { return weft_sched_vp(i); }
  static int vp_index(const weft_vp_t *vp) noexcept { return weft_sched_vp_index(vp); }
  static int affinity(const weft_thread_t *t) noexcept { return weft_sched_thread_affinity(t); }
  // The scheduler's word in t's control block (a link, a priority); 0 at creation.
  static uintptr_t &data(weft_thread_t *t) noexcept { return *weft_sched_thread_data(t); }

  // The C table whose handlers call this object's virtual functions (the bundle's
  // data is the object).
  weft_sched_ops_t ops() const {
    weft_sched_ops_t o{};
    o.thread_created = [](weft_bundle_t *b, weft_thread_t *t) noexcept { self(b)->thread_created(t); };
    o.thread_started = [](weft_bundle_t *b, weft_thread_t *t) noexcept { self(b)->thread_started(t); };
    o.thread_terminated = [](weft_bundle_t *b, weft_thread_t *t) noexcept { self(b)->thread_terminated(t); };
    o.thread_blocked = [](weft_bundle_t *b, weft_thread_t *t) noexcept { self(b)->thread_blocked(t); };
    o.thread_unblocked = [](weft_bundle_t *b, weft_thread_t *t) noexcept { self(b)->thread_unblocked(t); };
    o.bundle_created = [](weft_bundle_t *b, weft_bundle_t *c) noexcept { self(b)->bundle_created(c); };
    o.bundle_terminated = [](weft_bundle_t *b, weft_bundle_t *c) noexcept { self(b)->bundle_terminated(c); };
    o.processor_idle = [](weft_bundle_t *b, weft_vp_t *vp) noexcept { return self(b)->processor_idle(vp); };
    o.flags = flags();
    return o;
  }

 private:
  static scheduler *self(weft_bundle_t *b) noexcept { return static_cast<scheduler *>(weft_bundle_data(b)); }
};

// A bundle (weft/sched.h): threads started with thread::attributes{.bundle =
// b.native_handle()} are scheduled by its scheduler. Move-only; the destructor
// destroys the bundle, which must then be empty (its threads finished): a bundle
// that is still busy is left alive (the C call reports EBUSY) rather than throwing
// from a destructor; call destroy() to see the error.
class bundle {
 public:
  // A bundle of a built-in scheduler kind (WEFT_SCHED_FIFO | WEFT_SCHED_LAZY, ...,
  // WEFT_SCHED_PRIORITY; weft/schedlib.h) under `parent` (nullptr: the root).
  // Throws std::system_error (EINVAL: bad kind; ENOTINIT; ENOMEM).
  explicit bundle(unsigned kind, const bundle *parent = nullptr) : lib_(true) {
    detail::check(weft_schedlib_bundle_create(&b_, parent ? parent->b_ : nullptr, kind),
                  "weft_schedlib_bundle_create");
  }
  // A bundle scheduled by `s` (which must outlive it).
  explicit bundle(scheduler &s, const bundle *parent = nullptr) : lib_(false) {
    weft_sched_ops_t o = s.ops();
    detail::check(weft_bundle_create(&b_, parent ? parent->b_ : nullptr, &o, &s), "weft_bundle_create");
  }
  bundle(bundle &&o) noexcept : b_(std::exchange(o.b_, nullptr)), lib_(o.lib_) {}
  bundle &operator=(bundle &&o) = delete;
  bundle(const bundle &) = delete;
  bundle &operator=(const bundle &) = delete;
  ~bundle() {
    if (b_) (void)destroy_rc();
  }
  // destroy() destroys it now. Throws std::system_error (EBUSY: live threads or
  // child bundles; the bundle stays usable).
  void destroy() {
    if (!b_) return;
    detail::check(destroy_rc(), "weft_bundle_destroy");
  }
  weft_bundle_t *native_handle() const noexcept { return b_; }

 private:
  int destroy_rc() noexcept {
    int rc = lib_ ? weft_schedlib_bundle_destroy(b_) : weft_bundle_destroy(b_);
    if (rc == 0) b_ = nullptr;
    return rc;
  }
  weft_bundle_t *b_ = nullptr;
  bool lib_;
};

}  // namespace weft

#endif
