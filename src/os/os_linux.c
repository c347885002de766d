/* src/os/os_linux.c - Linux implementation of src/os/os.h. */
#include "os/os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(WEFT_ASAN)
#include <sanitizer/asan_interface.h>
/* Memory weft gives back to the system: its shadow is cleared first. A stack keeps the
 * redzones of frames that never returned (a thread parked or switched away for good),
 * and ASan does not clear the shadow of an unmapped range, so the next mapping at that
 * address (the io_uring engine's rings, seen in the ASan tests: a write to a
 * submission queue entry reported as a stack-buffer-underflow) would inherit them.
 * It is done without committing the shadow of the range: the whole shadow pages in
 * the middle go back to the kernel (MADV_DONTNEED: they read
 * as zero again, which is "addressable", as the unpoison would have written), the
 * parts at either end are unpoisoned. Unpoisoning a 32 MiB stack chunk wrote 4 MiB of
 * shadow that stayed resident after the unmap: an ASan program that had 200,000
 * threads at once kept about 9.6 GB (48 KiB a thread) after they finished. */
static void asan_release_shadow(void *p, size_t n) {
  size_t scale = 0, off = 0;
  __asan_get_shadow_mapping(&scale, &off);
  uintptr_t b = (uintptr_t)p, e = b + n, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t sb = (b >> scale) + off, se = (e >> scale) + off;
  uintptr_t pb = (sb + pg - 1) & ~(pg - 1), pe = se & ~(pg - 1);
  if (pb >= pe) {
    __asan_unpoison_memory_region(p, n);
    return;
  }
  uintptr_t mb = (pb - off) << scale, me = (pe - off) << scale;  /* app addresses */
  if (mb > b) __asan_unpoison_memory_region(p, mb - b);
  if (e > me) __asan_unpoison_memory_region((void *)me, e - me);
  if (madvise((void *)pb, pe - pb, MADV_DONTNEED) != 0)
    __asan_unpoison_memory_region((void *)mb, me - mb);
}
#define WEFT_UNPOISON_UNMAP(p, n) asan_release_shadow((p), (n))
#else
#define WEFT_UNPOISON_UNMAP(p, n) ((void)0)
#endif

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WEFT_HAVE_VALGRIND 1
#endif
#endif

void weft__os_futex_wait(_Atomic uint32_t *word, uint32_t expected) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void weft__os_futex_wait_until(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline) {
  if (deadline == UINT64_MAX) {
    weft__os_futex_wait(word, expected);
    return;
  }
  struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
  /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time */
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET_PRIVATE, expected, &ts, NULL,
          FUTEX_BITSET_MATCH_ANY);
}

void weft__os_futex_wake(_Atomic uint32_t *word, int n) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

int weft__os_membarrier_register(void) {
  long have = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (have < 0 || !(have & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return -1;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : -1;
}

void weft__os_membarrier(void) {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    fprintf(stderr, "weft: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registering\n");
    abort();
  }
}

int weft__os_ncpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

size_t weft__os_page_size(void) {
  static size_t page;
  if (!page) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

int weft__os_pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? 0 : -1;
}

uint64_t weft__os_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void weft__os_sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* Linux 6.13 */
#endif

int weft__os_guard_probe(void) {
  /* 0 unknown, 1 supported, 2 not. Relaxed: every prober computes the same answer. */
  static _Atomic int known;
  int k = atomic_load_explicit(&known, memory_order_relaxed);
  if (k) return k == 1;
  size_t page = weft__os_page_size();
  char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  int ok = 0;
  if (p != MAP_FAILED) {
    ok = madvise(p, page, MADV_GUARD_INSTALL) == 0; /* EINVAL: an older kernel */
    /* and the region must really fault: the kernel's copy from it fails with EFAULT
     * (an emulator such as qemu-user may accept the advice and do nothing) */
    int fds[2];
    if (ok && pipe2(fds, O_CLOEXEC) == 0) {
      ok = write(fds[1], p, 1) < 0 && errno == EFAULT;
      close(fds[0]);
      close(fds[1]);
    } else {
      ok = 0;
    }
    munmap(p, 2 * page);
  }
  atomic_store_explicit(&known, ok ? 1 : 2, memory_order_relaxed);
  return ok;
}

void *weft__os_reserve(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return NULL;
  /* a huge page on a stack mapping would turn one touched page into 2 MiB of memory;
   * a kernel without transparent huge pages refuses the advice, which is fine */
  int e = errno;
  (void)madvise(p, bytes, MADV_NOHUGEPAGE);
  errno = e;
  return p;
}

void weft__os_release(void *base, size_t bytes) {
  WEFT_UNPOISON_UNMAP(base, bytes);
  munmap(base, bytes);
}

int weft__os_guard(void *addr, size_t len, int mech) {
  int rc = mech == WEFT__GUARD_MADVISE ? madvise(addr, len, MADV_GUARD_INSTALL)
           : mech == WEFT__GUARD_MPROTECT ? mprotect(addr, len, PROT_NONE) : 0;
  return rc == 0 ? 0 : errno;
}

int weft__os_discard(void *addr, size_t len) {
  return madvise(addr, len, MADV_DONTNEED) == 0 ? 0 : errno;
}

unsigned weft__os_stack_register(void *lo, void *hi) {
#ifdef WEFT_HAVE_VALGRIND
  return VALGRIND_STACK_REGISTER(lo, hi);
#else
  (void)lo;
  (void)hi;
  return 0;
#endif
}

void weft__os_stack_deregister(unsigned vg_id) {
#ifdef WEFT_HAVE_VALGRIND
  VALGRIND_STACK_DEREGISTER(vg_id);
#else
  (void)vg_id;
#endif
}

void *weft__os_stack_map(size_t size, size_t guard, int mech, unsigned *vg_id) {
  char *base = weft__os_reserve(size + guard);
  if (!base) return NULL;
  int e = guard ? weft__os_guard(base, guard, mech) : 0;  /* below the stack */
  if (e) {
    munmap(base, size + guard);
    errno = e;
    return NULL;
  }
  *vg_id = weft__os_stack_register(base + guard, base + guard + size);
  return base + guard;
}

void weft__os_stack_unmap(void *lo, size_t size, size_t guard, unsigned vg_id) {
  weft__os_stack_deregister(vg_id);
  WEFT_UNPOISON_UNMAP(lo, size);
  munmap((char *)lo - guard, size + guard);
}

long weft__os_max_map_count(void) {
  long v = 65530; /* the kernel's default */
  int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n > 0) {
      buf[n] = 0;
      long x = strtol(buf, NULL, 10);
      if (x > 0) v = x;
    }
    close(fd);
  }
  return v;
}

size_t weft__os_rlimit_as(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
      rl.rlim_cur >= (rlim_t)SIZE_MAX)
    return SIZE_MAX;
  return (size_t)rl.rlim_cur;
}

long weft__os_map_count(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long lines = 0;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
  close(fd);
  return lines;
}

void weft__os_thread_stack(void **lo, size_t *size) {
  pthread_attr_t attr;
  *lo = NULL;
  *size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, lo, size);
    pthread_attr_destroy(&attr);
  }
}
