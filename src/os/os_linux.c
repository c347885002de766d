/* src/os/os_linux.c - Linux implementation of src/os/os.h. */
#include "os/os.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

void *weft__os_stack_map(size_t size, unsigned *vg_id) {
  size_t page = weft__os_page_size();
  char *base = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) return NULL;
  if (mprotect(base, page, PROT_NONE) != 0) {  /* the guard page, below the stack */
    munmap(base, size + page);
    return NULL;
  }
  *vg_id = 0;
#ifdef WEFT_HAVE_VALGRIND
  *vg_id = VALGRIND_STACK_REGISTER(base + page, base + page + size);
#endif
  return base + page;
}

void weft__os_stack_unmap(void *lo, size_t size, unsigned vg_id) {
  size_t page = weft__os_page_size();
  (void)vg_id;
#ifdef WEFT_HAVE_VALGRIND
  VALGRIND_STACK_DEREGISTER(vg_id);
#endif
  munmap((char *)lo - page, size + page);
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
