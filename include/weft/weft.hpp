// weft/weft.hpp - the C++17 layer: header-only, a thin inline layer over the C
// interface in the style of the standard library, and Presto's object-oriented
// interface (Presto §2, §3.2-3.4).
//
//   weft::runtime                       weft_init/weft_shutdown as RAII
//   weft::thread, weft::this_thread     std::thread's interface; thread::start(object,
//                                       &Class::operation, args...) as in Presto;
//                                       this_thread::wired (weft/wire.h)
//   weft::mutex, timed_mutex,           lockables for std::lock_guard, unique_lock,
//   shared_mutex, spinlock<Kind>        scoped_lock, shared_lock
//   weft::condition_variable(_any)      std's interface; Mesa semantics
//   weft::counting_semaphore, barrier   std's interface (barrier: arrive_and_wait only)
//   weft::promise, future, shared_future, std's interfaces over weft futures
//   async                               (weft/future.h)
//   weft::atomic_int                    Presto's AtomicInt (weft/atomic_int.h)
//   weft::monitor                       Hoare monitors, as Presto had them
//   weft::scheduler, weft::bundle       schedulers by inheritance, built-in bundles
//
// Errors: a C call that fails raises std::system_error with weft::error_category()
// (codes of weft/error.h, mapped to std::errc conditions). notify and try_lock, whose
// C functions cannot fail on a valid object, are noexcept; so is unlock, as in the
// standard library: its one error, a lock the caller does not hold (WEFT_EPERM), is
// undefined use, which a library built checked (WEFT_CHECKED) stops with a message.
//
// A thread body that throws calls std::terminate(), as with std::thread, rather than
// carrying the exception to join(): (1) code moved from std::thread keeps its
// meaning; (2) a detached thread has no join to carry it to, so carrying would need a
// second rule anyway; (3) carrying costs every thread an exception_ptr and a catch
// frame, which benchmark X3 would show against the C interface; and (4) the body's
// exception would otherwise have to cross weft's C frames, which are not built to
// unwind. A caller who wants a result or an error back passes a slot to the body and
// catches inside it.
//
// Cost: the wrappers are inline and hold the C objects by value; lock() is the C call
// plus one test of its result; a thread whose callable fits in a pointer (a function
// pointer, a lambda capturing at most one pointer or reference) is created with no
// allocation beyond the C call's. Benchmark X3 (bench/ext/X3_cpp.cc) counts it.
#ifndef WEFT_WEFT_HPP
#define WEFT_WEFT_HPP

#include "weft/weft.h"

#include "weft/cpp/error.hpp"
#include "weft/cpp/chrono.hpp"
#include "weft/cpp/runtime.hpp"
#include "weft/cpp/thread.hpp"
#include "weft/cpp/mutex.hpp"
#include "weft/cpp/condition_variable.hpp"
#include "weft/cpp/semaphore.hpp"
#include "weft/cpp/future.hpp"
#include "weft/cpp/atomic_int.hpp"
#include "weft/cpp/monitor.hpp"
#include "weft/cpp/scheduler.hpp"

#endif
