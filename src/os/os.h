/* src/os/os.h - the small system interface (papers/003 3.3): kernel threads, futex
 * parking, stack mapping with guard pages, CPU count and pinning, clocks. */
#ifndef WEFT_OS_H
#define WEFT_OS_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

/* Futex on a 32-bit word. wait returns when *word != expected, on a wake, or
 * spuriously; callers loop. */
void weft__os_futex_wait(_Atomic uint32_t *word, uint32_t expected);
/* Like weft__os_futex_wait, but returns by `deadline` (CLOCK_MONOTONIC ns) at the
 * latest; UINT64_MAX means no deadline. */
void weft__os_futex_wait_until(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline);
void weft__os_futex_wake(_Atomic uint32_t *word, int n);

int weft__os_ncpus(void);
size_t weft__os_page_size(void);
/* Pins the calling kernel thread to cpu; returns 0 or -1. */
int weft__os_pin(int cpu);
uint64_t weft__os_now_ns(void);  /* CLOCK_MONOTONIC */
void weft__os_sleep_ns(uint64_t ns);

/* Maps `size` usable bytes (a page multiple) of stack with one PROT_NONE guard page
 * below it and registers it with Valgrind (*vg_id). Returns the lowest usable
 * address, or NULL. */
void *weft__os_stack_map(size_t size, unsigned *vg_id);
void weft__os_stack_unmap(void *lo, size_t size, unsigned vg_id);

/* Bounds of the calling OS thread's own stack (for the sanitizers). */
void weft__os_thread_stack(void **lo, size_t *size);

static inline void weft__os_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

#endif
