/* src/os/os.h - the small system interface (OpenThreads §3.3): kernel threads, futex
 * parking, stack memory with guard regions, CPU count and pinning, clocks. */
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
/* Asymmetric fences through membarrier(2) (MEMBARRIER_CMD_PRIVATE_EXPEDITED). register:
 * 0 once the process may use weft__os_membarrier, -1 where the kernel, a seccomp
 * profile or valgrind refuses it. weft__os_membarrier: every thread of the process
 * that is running has executed a full memory barrier when it returns (it aborts with
 * a message if the kernel refuses after registering, which it does not do). */
int weft__os_membarrier_register(void);
void weft__os_membarrier(void);

int weft__os_ncpus(void);
size_t weft__os_page_size(void);
/* Pins the calling kernel thread to cpu; returns 0 or -1. */
int weft__os_pin(int cpu);
uint64_t weft__os_now_ns(void);  /* CLOCK_MONOTONIC */
void weft__os_sleep_ns(uint64_t ns);

/* ---- stack memory (docs/design.md "Stacks") ----------------------------------------
 * Guard mechanisms. MADVISE: guard regions in the page tables (MADV_GUARD_INSTALL,
 * Linux 6.13+): they cost no kernel memory area (VMA) and survive MADV_DONTNEED.
 * MPROTECT: a PROT_NONE range, which splits its mapping (two more VMAs). */
enum { WEFT__GUARD_NONE = 0, WEFT__GUARD_MADVISE = 1, WEFT__GUARD_MPROTECT = 2 };

/* 1 if this kernel supports MADV_GUARD_INSTALL (probed once per process). */
int weft__os_guard_probe(void);
/* Reserves `bytes` (a page multiple) of read-write anonymous memory for stacks:
 * MAP_NORESERVE | MAP_STACK, transparent huge pages off (MADV_NOHUGEPAGE, so that a
 * touched page costs one page). Returns the base, or NULL with errno set. */
void *weft__os_reserve(size_t bytes);
void weft__os_release(void *base, size_t bytes);
/* Makes [addr, addr + len) a guard region with mechanism `mech`: 0 or an errno. */
int weft__os_guard(void *addr, size_t len, int mech);
/* Gives the pages of [addr, addr + len) back to the kernel (MADV_DONTNEED; they
 * read as zero afterwards; guard regions stay): 0 or an errno. */
int weft__os_discard(void *addr, size_t len);
/* Valgrind stack registration of [lo, hi) (0 and no-ops without Valgrind). */
unsigned weft__os_stack_register(void *lo, void *hi);
void weft__os_stack_deregister(unsigned vg_id);

/* Maps one stack of `size` usable bytes (a page multiple) with a guard region of
 * `guard` bytes below it (mechanism `mech`) and registers it with Valgrind
 * (*vg_id). Returns the lowest usable address, or NULL with errno set. */
void *weft__os_stack_map(size_t size, size_t guard, int mech, unsigned *vg_id);
void weft__os_stack_unmap(void *lo, size_t size, size_t guard, unsigned vg_id);

/* Limits: vm.max_map_count (65530 if unreadable); RLIMIT_AS's soft limit in bytes
 * (SIZE_MAX if unlimited); the number of mappings the process has now (lines of
 * /proc/self/maps; -1 if unreadable; not async-signal-safe, slow: diagnostics only). */
long weft__os_max_map_count(void);
size_t weft__os_rlimit_as(void);
long weft__os_map_count(void);

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
