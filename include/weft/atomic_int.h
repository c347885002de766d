/* weft/atomic_int.h - Presto's AtomicInt (Presto §3.2): a shared integer whose
 * operations are indivisible, in two forms with the same operations.
 *
 *   weft_atomic_int_t  each operation is one hardware atomic instruction (or a
 *                      load/store). What to use.
 *   weft_locked_int_t  each operation takes a spinlock (weft_spin_t, the default kind),
 *                      does the plain integer operation and releases: Presto's
 *                      original AtomicInt (and HP_AtomicInt with a queue lock). Kept to
 *                      measure the difference (bench row S5, Presto Fig 2).
 *
 * Operations (X is atomic_int or locked_int): init, load, store, add and sub (return
 * the new value), fetch_add (returns the old value), inc and dec (return the new value),
 * exchange (returns the old value), compare_exchange(a, &expected, desired) (1 and the
 * value replaced if *a == *expected; else 0 and *expected = the current value). All are
 * static inline, callable from weft threads, plain OS threads and scheduler handlers,
 * never switch the caller and cannot fail. Arithmetic wraps (two's complement), never
 * undefined. Every operation of weft_atomic_int_t is sequentially consistent, like
 * <stdatomic.h>'s default order: an AtomicInt is a synchronisation object, and on x86-64
 * and AArch64 (LSE or LL/SC with acquire-release) a read-modify-write costs the same
 * either way. Every operation of weft_locked_int_t is ordered by its spinlock (acquire
 * on lock, release on unlock).
 *
 * An all-zero object of either type holds 0 and is ready to use. The hardware form
 * uses the __atomic builtins on a plain field, for the reason given in
 * weft/spinlock/relax.h (C and C++ both include this header).
 */
#ifndef WEFT_ATOMIC_INT_H
#define WEFT_ATOMIC_INT_H

#include "weft/spinlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- hardware atomics ------------------------------------------------------------- */

/* The value; accessed only through the __atomic builtins. */
typedef struct weft_atomic_int {
  long value;
} weft_atomic_int_t;

/* Static initializer holding v. (An all-zero object holds 0.) */
#define WEFT_ATOMIC_INT_INIT(v) {(v)}

/* weft_atomic_int_init() sets *a to v; not concurrently with other operations on *a
 * (it is a relaxed store: whatever hands *a to other threads publishes it). */
static inline void weft_atomic_int_init(weft_atomic_int_t *a, long v) {
  __atomic_store_n(&a->value, v, __ATOMIC_RELAXED);
}
/* weft_atomic_int_load() returns the value. */
static inline long weft_atomic_int_load(const weft_atomic_int_t *a) {
  return __atomic_load_n(&a->value, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_store() sets the value to v. */
static inline void weft_atomic_int_store(weft_atomic_int_t *a, long v) {
  __atomic_store_n(&a->value, v, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_fetch_add() adds d and returns the value before. */
static inline long weft_atomic_int_fetch_add(weft_atomic_int_t *a, long d) {
  return __atomic_fetch_add(&a->value, d, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_add() adds d and returns the value after. */
static inline long weft_atomic_int_add(weft_atomic_int_t *a, long d) {
  return __atomic_add_fetch(&a->value, d, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_sub() subtracts d and returns the value after. */
static inline long weft_atomic_int_sub(weft_atomic_int_t *a, long d) {
  return __atomic_sub_fetch(&a->value, d, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_inc() adds 1 and returns the value after. */
static inline long weft_atomic_int_inc(weft_atomic_int_t *a) {
  return __atomic_add_fetch(&a->value, 1L, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_dec() subtracts 1 and returns the value after. */
static inline long weft_atomic_int_dec(weft_atomic_int_t *a) {
  return __atomic_sub_fetch(&a->value, 1L, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_exchange() sets the value to v and returns the value before. */
static inline long weft_atomic_int_exchange(weft_atomic_int_t *a, long v) {
  return __atomic_exchange_n(&a->value, v, __ATOMIC_SEQ_CST);
}
/* weft_atomic_int_compare_exchange(): if the value equals *expected, sets it to desired
 * and returns 1; otherwise stores the current value in *expected and returns 0. Never
 * fails spuriously (strong CAS). */
static inline int weft_atomic_int_compare_exchange(weft_atomic_int_t *a, long *expected,
                                                   long desired) {
  return __atomic_compare_exchange_n(&a->value, expected, desired, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

/* ---- lock-protected (Presto's AtomicInt) --------------------------------------------- */

/* `value` is read and written only while holding `lock` (relaxed __atomic accesses:
 * the lock orders them; atomic only so that a racy misuse stays defined for TSan). */
typedef struct weft_locked_int {
  weft_spin_t lock;
  long value;
} weft_locked_int_t;

/* Static initializer holding v (unlocked). (An all-zero object holds 0.) */
#define WEFT_LOCKED_INT_INIT(v) {WEFT_SPIN_INIT, (v)}

/* Internal: the plain integer operations, under the lock. */
#define WEFT__LOCKED(a, body)       \
  do {                              \
    weft_spin_lock(&(a)->lock);     \
    body;                           \
    weft_spin_unlock(&(a)->lock);   \
  } while (0)
static inline long weft__locked_get(const weft_locked_int_t *a) {
  return __atomic_load_n(&a->value, __ATOMIC_RELAXED); /* under a->lock */
}
static inline void weft__locked_set(weft_locked_int_t *a, long v) {
  __atomic_store_n(&a->value, v, __ATOMIC_RELAXED); /* under a->lock */
}
/* Wrapping addition without signed overflow. */
static inline long weft__locked_wrap_add(long x, long d) {
  return (long)((unsigned long)x + (unsigned long)d);
}

/* weft_locked_int_init() makes *a an unlocked integer holding v; not concurrently with
 * other operations on *a. */
static inline void weft_locked_int_init(weft_locked_int_t *a, long v) {
  weft_spin_init(&a->lock);
  weft__locked_set(a, v);
}
/* weft_locked_int_load() returns the value. */
static inline long weft_locked_int_load(weft_locked_int_t *a) {
  long r;
  WEFT__LOCKED(a, r = weft__locked_get(a));
  return r;
}
/* weft_locked_int_store() sets the value to v. */
static inline void weft_locked_int_store(weft_locked_int_t *a, long v) {
  WEFT__LOCKED(a, weft__locked_set(a, v));
}
/* weft_locked_int_fetch_add() adds d and returns the value before. */
static inline long weft_locked_int_fetch_add(weft_locked_int_t *a, long d) {
  long r;
  WEFT__LOCKED(a, (r = weft__locked_get(a), weft__locked_set(a, weft__locked_wrap_add(r, d))));
  return r;
}
/* weft_locked_int_add() adds d and returns the value after. */
static inline long weft_locked_int_add(weft_locked_int_t *a, long d) {
  long r;
  WEFT__LOCKED(a, (r = weft__locked_wrap_add(weft__locked_get(a), d), weft__locked_set(a, r)));
  return r;
}
/* weft_locked_int_sub() subtracts d and returns the value after. */
static inline long weft_locked_int_sub(weft_locked_int_t *a, long d) {
  return weft_locked_int_add(a, (long)(0UL - (unsigned long)d));
}
/* weft_locked_int_inc() adds 1 and returns the value after. */
static inline long weft_locked_int_inc(weft_locked_int_t *a) { return weft_locked_int_add(a, 1); }
/* weft_locked_int_dec() subtracts 1 and returns the value after. */
static inline long weft_locked_int_dec(weft_locked_int_t *a) { return weft_locked_int_add(a, -1); }
/* weft_locked_int_exchange() sets the value to v and returns the value before. */
static inline long weft_locked_int_exchange(weft_locked_int_t *a, long v) {
  long r;
  WEFT__LOCKED(a, (r = weft__locked_get(a), weft__locked_set(a, v)));
  return r;
}
/* weft_locked_int_compare_exchange(): if the value equals *expected, sets it to desired
 * and returns 1; otherwise stores the current value in *expected and returns 0. */
static inline int weft_locked_int_compare_exchange(weft_locked_int_t *a, long *expected,
                                                   long desired) {
  int ok;
  long cur;
  WEFT__LOCKED(a, (cur = weft__locked_get(a), ok = cur == *expected,
                   ok ? weft__locked_set(a, desired) : (void)0));
  if (!ok) *expected = cur;
  return ok;
}

#ifdef __cplusplus
}
#endif
#endif
