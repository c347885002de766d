// sync_common.h - helpers of the synchronization latency rows L4-L7: CPU pinning for
// the pthreads baselines, the Boost.Fiber counting semaphore (Boost.Fiber has none, so
// one is built from boost::fibers::mutex + condition_variable and labelled so), and the
// weft runtime re-start for the rows that need more than one VP.
#ifndef WEFT_BENCH_SYNC_COMMON_H
#define WEFT_BENCH_SYNC_COMMON_H

#include <pthread.h>
#include <sched.h>

#include "latency.h"
#ifdef WEFT_BENCH_BOOST
#include <boost/fiber/all.hpp>
#endif

namespace weft_bench {

// Pins the calling OS thread to `cpu` for its lifetime (restore() puts the saved mask
// back). cpu < 0 means the CPU it runs on now.
struct Pin {
  cpu_set_t saved;
  explicit Pin(int cpu) {
    pthread_getaffinity_np(pthread_self(), sizeof saved, &saved);
    set(cpu < 0 ? sched_getcpu() : cpu);
  }
  static void set(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  }
  ~Pin() { pthread_setaffinity_np(pthread_self(), sizeof saved, &saved); }
};

// Starts a pthread running fn(arg) pinned to `cpu`.
inline pthread_t start_pinned(int cpu, void *(*fn)(void *), void *arg) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setaffinity_np(&attr, sizeof one, &one);
  pthread_t t;
  if (pthread_create(&t, &attr, fn, arg) != 0) std::abort();
  pthread_attr_destroy(&attr);
  return t;
}

// The CPU other than `cpu` for the 2-CPU pthreads variants (cpu itself on one core).
inline int other_cpu(int cpu) {
  cpu_set_t s;
  pthread_getaffinity_np(pthread_self(), sizeof s, &s);
  for (int i = 0; i < CPU_SETSIZE; i++)
    if (i != cpu && CPU_ISSET(i, &s)) return i;
  return cpu;
}

// The latency binary runs weft with nvps=1 (latency_main.cc). A row that needs another
// VP count re-starts the runtime for its duration: with_vps(n) shuts weft down and
// starts it with n VPs; the destructor goes back to nvps=1. Called from the main weft
// thread with no other weft thread alive.
struct WithVps {
  int n;
  explicit WithVps(int nvps) : n(nvps) {
    if (n == 1) return;
    restart(n);
  }
  static void restart(int nvps) {
    check(weft_shutdown(), "weft_shutdown");
    weft_config_t cfg;
    weft_config_init(&cfg);
    cfg.nvps = nvps;
    check(weft_init(&cfg), "weft_init");
  }
  ~WithVps() {
    if (n != 1) restart(1);
  }
};

#ifdef WEFT_BENCH_BOOST
// Counting semaphore from boost::fibers::mutex + condition_variable (Boost.Fiber has
// no semaphore); rows that use it are labelled boost_fiber(mutex+cv).
struct FiberSem {
  boost::fibers::mutex m;
  boost::fibers::condition_variable cv;
  long count = 0;
  void wait() {
    std::unique_lock<boost::fibers::mutex> lk(m);
    while (count == 0) cv.wait(lk);
    --count;
  }
  bool trywait() {
    std::unique_lock<boost::fibers::mutex> lk(m);
    if (count == 0) return false;
    --count;
    return true;
  }
  void signal() {
    {
      std::unique_lock<boost::fibers::mutex> lk(m);
      ++count;
    }
    cv.notify_one();
  }
};
#endif

}  // namespace weft_bench

#endif
