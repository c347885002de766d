// icount_fiber.cc - the Boost.Fiber L2-L7 loops, alone, for bench/icount.sh
// (same protocol as icount.c: only the loop is collected; prints "ops=<count>").
//
//   weft_icount_fiber l2 N   N x (construct fiber + join) of an empty fiber
//   weft_icount_fiber l3 N   N yields of the main fiber against one yielding partner
//   weft_icount_fiber l4m N  N x boost::fibers::mutex lock + unlock, uncontested
//   weft_icount_fiber l4s N  N x signal + wait of a mutex+condition_variable semaphore
//   weft_icount_fiber l6m N  N rounds of mutex ping-pong (three mutexes hand over hand)
//   weft_icount_fiber l6s N  N rounds of semaphore (mutex+cv) ping-pong
//   weft_icount_fiber l7 N   N rounds of condition-variable ping-pong
// The patterns are those of bench/latency/pingpong.h, two fibers on one thread.
#include <boost/fiber/all.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

static void l2(long n) {
  for (long i = 0; i < n; i++) boost::fibers::fiber([] {}).join();
}

using Mutex = boost::fibers::mutex;
using Cond = boost::fibers::condition_variable;

// Counting semaphore from mutex + condition_variable (as weft_bench::FiberSem).
struct Sem {
  Mutex m;
  Cond cv;
  long count = 0;
  void wait() {
    std::unique_lock<Mutex> lk(m);
    while (count == 0) cv.wait(lk);
    --count;
  }
  void signal() {
    {
      std::unique_lock<Mutex> lk(m);
      ++count;
    }
    cv.notify_one();
  }
};

static Mutex pm[3], mx;
static Sem sm, s1, s2;
static Cond cv;
static int turn, a_older;
static bool stop;

static void l4m(long n) {
  for (long i = 0; i < n; i++) {
    mx.lock();
    mx.unlock();
  }
}
static void l4s(long n) {
  for (long i = 0; i < n; i++) {
    sm.signal();
    sm.wait();
  }
}
static void l6m_partner() {
  int older = 2;
  pm[older].lock();
  for (;;) {
    int next = older == 2 ? 0 : older + 1;
    pm[next].lock();
    if (stop) {
      pm[next].unlock();
      pm[older].unlock();
      return;
    }
    pm[older].unlock();
    older = next;
  }
}
static void l6m(long n) {
  for (long i = 0; i < n; i++) {
    int next = a_older == 0 ? 2 : a_older - 1;
    pm[a_older].unlock();
    pm[next].lock();
    a_older = a_older == 2 ? 0 : a_older + 1;
  }
}
static void l6s_partner() {
  for (;;) {
    s1.wait();
    if (stop) return;
    s2.signal();
  }
}
static void l6s(long n) {
  for (long i = 0; i < n; i++) {
    s1.signal();
    s2.wait();
  }
}
static void l7_partner() {
  for (;;) {
    std::unique_lock<Mutex> lk(mx);
    while (turn != 1 && !stop) cv.wait(lk);
    if (stop) return;
    turn = 0;
    cv.notify_one();
  }
}
static void l7(long n) {
  for (long i = 0; i < n; i++) {
    std::unique_lock<Mutex> lk(mx);
    while (turn != 0) cv.wait(lk);
    turn = 1;
    cv.notify_one();
  }
}

static void collect(void (*loop)(long), long n) {
  loop(1000);
  CALLGRIND_TOGGLE_COLLECT;
  loop(n);
  CALLGRIND_TOGGLE_COLLECT;
}

// Ping-pong `loop` against `partner`: n rounds collected.
static void pingpong(void (*partner)(), void (*loop)(long), long n) {
  if (loop == l6m) {
    pm[0].lock();
    pm[1].lock();
  }
  boost::fibers::fiber f(partner);
  boost::this_fiber::yield();  // the partner starts (l6m: takes pm[2]) and blocks
  collect(loop, n);
  stop = true;
  if (loop == l6m) {
    pm[a_older].unlock();
    pm[a_older == 2 ? 0 : a_older + 1].unlock();
  } else if (loop == l6s) {
    s1.signal();
  } else {
    std::unique_lock<Mutex> lk(mx);
    cv.notify_one();
  }
  f.join();
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"l2", "l3", "l4m", "l4s", "l6m", "l6s", "l7"};
  int mode = -1;
  for (int i = 0; argc == 3 && i < 7; i++)
    if (std::strcmp(argv[1], modes[i]) == 0) mode = i;
  if (mode < 0) {
    std::fprintf(stderr, "usage: %s l2|l3|l4m|l4s|l6m|l6s|l7 N\n", argv[0]);
    return 1;
  }
  long n = std::atol(argv[2]);
  long ops;
  if (mode >= 2) {
    switch (mode) {
    case 2: collect(l4m, n); break;
    case 3: collect(l4s, n); break;
    case 4: pingpong(l6m_partner, l6m, n); break;
    case 5: pingpong(l6s_partner, l6s, n); break;
    default: pingpong(l7_partner, l7, n); break;
    }
    ops = n;
  } else if (mode == 0) {
    l2(1000);
    CALLGRIND_TOGGLE_COLLECT;
    l2(n);
    CALLGRIND_TOGGLE_COLLECT;
    ops = n;
  } else {
    static long partner_yields;
    static bool stop;
    boost::fibers::fiber partner([] {
      while (!stop) {
        boost::this_fiber::yield();
        partner_yields++;
      }
    });
    for (int i = 0; i < 1000; i++) boost::this_fiber::yield();
    long p0 = partner_yields;
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < n; i++) boost::this_fiber::yield();
    CALLGRIND_TOGGLE_COLLECT;
    ops = n + (partner_yields - p0);
    stop = true;
    partner.join();
  }
  std::printf("ops=%ld\n", ops);
  return 0;
}
