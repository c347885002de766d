/* weft/spinlock/relax.h - what every spinlock kind shares: the pause hint, the wait
 * step, the cache-line size and the zero initializer.
 *
 * Atomics. The spinlock headers and weft/atomic_int.h are included from C11 and from
 * C++17 (the tests and the C++ layer). C11's _Atomic and <stdatomic.h> are not usable
 * from C++17 with g++, so the lock words are plain integers and pointers accessed only
 * through the GCC/Clang __atomic builtins (__atomic_load_n, __atomic_exchange_n, ...):
 * they take the C11 memory orders (__ATOMIC_ACQUIRE is memory_order_acquire, and so
 * on), compile to the same instructions as <stdatomic.h> in both languages and both
 * compilers, and ThreadSanitizer instruments them as C11 atomics. No lock word is ever
 * read or written with a plain access once the lock is shared.
 */
#ifndef WEFT_SPINLOCK_RELAX_H
#define WEFT_SPINLOCK_RELAX_H

#include <sched.h>
#include <stdint.h>

#include "weft/common.h"
#include "weft/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per cache line: what the array lock pads its slots to. 64 on every x86-64 and
 * on most AArch64 cores (some, e.g. Apple's, use 128: define it before including to
 * change it; the lock stays correct, only false sharing changes). */
#ifndef WEFT_SPIN_CACHE_LINE
#define WEFT_SPIN_CACHE_LINE 64
#endif

/* How many relax steps a waiter spins before it gives its processor back to the
 * kernel once with sched_yield(). Spinning never switches the calling weft thread;
 * the kernel yield only matters when there are more spinning kernel threads than
 * CPUs (an oversubscribed machine, a sanitizer or an emulator): there the lock
 * holder, or the next waiter of a FIFO lock, may be preempted, and without the
 * yield every waiter would burn its whole time slice before it can run. 1024 relax
 * steps are 10-100 microseconds, far longer than any critical section a spinlock is
 * meant for, so a machine with a CPU per spinner never reaches it. Define it to 0
 * before including to spin purely. */
#ifndef WEFT_SPIN_OS_YIELD_SPINS
#define WEFT_SPIN_OS_YIELD_SPINS 1024
#endif

/* Zero initializer for the lock structures: "{0}" in C, "{}" in C++ (where g++
 * -Wextra would warn about "{0}" leaving later members to their default). */
#ifdef __cplusplus
#define WEFT__SPIN_ZERO {}
#else
#define WEFT__SPIN_ZERO {0}
#endif

/* weft_spin_relax() tells the processor that the caller is in a spin-wait loop: x86
 * `pause` (saves power, lets the sibling hyperthread run, avoids the memory-order
 * mis-speculation when the awaited store arrives), AArch64 `yield`; elsewhere only a
 * compiler barrier. Callable from anywhere; never switches; never fails. */
static inline void weft_spin_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield" ::: "memory");
#else
  __asm__ __volatile__("" ::: "memory");
#endif
}

/* One step of a spin-wait loop. *spins counts the caller's steps (start at 0): every
 * step relaxes, and every WEFT_SPIN_OS_YIELD_SPINS-th one also gives the processor to
 * the kernel (see above). Internal to the spinlock headers. */
static inline void weft__spin_wait(unsigned *spins) {
  weft_spin_relax();
#if WEFT_SPIN_OS_YIELD_SPINS > 0
  if (++*spins % WEFT_SPIN_OS_YIELD_SPINS == 0) sched_yield();
#else
  (void)spins;
#endif
}

#ifdef __cplusplus
}
#endif
#endif
