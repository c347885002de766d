// weft/cpp/atomic_int.hpp - Presto's AtomicInt (Presto §3.2) over weft/atomic_int.h.
#ifndef WEFT_CPP_ATOMIC_INT_HPP
#define WEFT_CPP_ATOMIC_INT_HPP

#include "weft/atomic_int.h"

namespace weft {

// A shared integer whose every operation is one indivisible hardware operation,
// sequentially consistent (weft_atomic_int_t). Never switches, never fails; usable
// anywhere, scheduler handlers included. Arithmetic wraps.
class atomic_int {
 public:
  constexpr atomic_int() noexcept = default;
  constexpr explicit atomic_int(long v) noexcept : a_{v} {}
  atomic_int(const atomic_int &) = delete;
  atomic_int &operator=(const atomic_int &) = delete;

  long load() const noexcept { return weft_atomic_int_load(&a_); }
  void store(long v) noexcept { weft_atomic_int_store(&a_, v); }
  operator long() const noexcept { return load(); }
  atomic_int &operator=(long v) noexcept {
    store(v);
    return *this;
  }
  // Presto's names: the value after (add, sub, inc, dec) or before (fetch_add,
  // exchange) the operation.
  long add(long d) noexcept { return weft_atomic_int_add(&a_, d); }
  long sub(long d) noexcept { return weft_atomic_int_sub(&a_, d); }
  long inc() noexcept { return weft_atomic_int_inc(&a_); }
  long dec() noexcept { return weft_atomic_int_dec(&a_); }
  long fetch_add(long d) noexcept { return weft_atomic_int_fetch_add(&a_, d); }
  long fetch_sub(long d) noexcept { return weft_atomic_int_fetch_add(&a_, static_cast<long>(0UL - static_cast<unsigned long>(d))); }
  long exchange(long v) noexcept { return weft_atomic_int_exchange(&a_, v); }
  // If the value equals `expected`, sets it to `desired` and returns true; else
  // stores the value in `expected` and returns false (strong).
  bool compare_exchange(long &expected, long desired) noexcept {
    return weft_atomic_int_compare_exchange(&a_, &expected, desired) != 0;
  }
  // The operators of std::atomic<long>.
  long operator++() noexcept { return inc(); }
  long operator--() noexcept { return dec(); }
  long operator++(int) noexcept { return fetch_add(1); }
  long operator--(int) noexcept { return fetch_add(-1); }
  long operator+=(long d) noexcept { return add(d); }
  long operator-=(long d) noexcept { return sub(d); }

 private:
  mutable weft_atomic_int_t a_{};
};

}  // namespace weft

#endif
