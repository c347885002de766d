// L_icount_fiber.cc - the Boost.Fiber L2-L7 loops, alone, for bench/icount.sh
// (same protocol as L_icount.cc: only the loop is collected; prints "ops=<count>").
//
//   weft_icount_fiber --mode MODE --n N, MODE:
//   weft_icount_fiber l2 N   N x (construct fiber + join) of an empty fiber
//   weft_icount_fiber l3 N   N yields of the main fiber against one yielding partner
//   weft_icount_fiber l4m N  N x boost::fibers::mutex lock + unlock, uncontested
//   weft_icount_fiber l4s N  N x signal + wait of a mutex+condition_variable semaphore
//   weft_icount_fiber l6m N  N rounds of mutex ping-pong (three mutexes hand over hand)
//   weft_icount_fiber l6s N  N rounds of semaphore (mutex+cv) ping-pong
//   weft_icount_fiber l7 N   N rounds of condition-variable ping-pong
// The ping-pong patterns are pingpong.h's, two fibers on one thread.
#include <boost/fiber/all.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "pingpong.h"

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

using namespace weft_bench;

static Mutex mx;
static FiberSem sm;

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

static void collect(void (*loop)(long), long n) {
  loop(1000);
  CALLGRIND_TOGGLE_COLLECT;
  loop(n);
  CALLGRIND_TOGGLE_COLLECT;
}

// Ping-pong pattern P (pingpong.h) against a partner fiber: n rounds collected.
template <class P>
static void pingpong(long n) {
  BoostSpawn spawn;
  pingpong_rounds<P>(spawn, n, [](P &, bool) { CALLGRIND_TOGGLE_COLLECT; });
}

int main(int argc, char **argv) {
  static const char *const modes[] = {"l2", "l3", "l4m", "l4s", "l6m", "l6s", "l7"};
  const char *mode_name = nullptr;
  long n = 0;
  const bench_opt_t opts[] = {
      {"--mode", BENCH_STR, &mode_name, nullptr, 0, "l2|l3|l4m|l4s|l6m|l6s|l7"},
      {"--n", BENCH_LONG, &n, nullptr, 0, "operations (ping-pong: rounds)"},
  };
  bench_args(argc, argv, opts, 2, "the Boost.Fiber L2-L7 loops for callgrind (bench/icount.sh)");
  int mode = -1;
  for (int i = 0; mode_name && i < 7; i++)
    if (std::strcmp(mode_name, modes[i]) == 0) mode = i;
  if (mode < 0 || n < 1) bench_die(argv[0], "--mode (one of the list) and --n >= 1 are needed");
  long ops;
  if (mode >= 2) {
    switch (mode) {
    case 2: collect(l4m, n); break;
    case 3: collect(l4s, n); break;
    case 4: pingpong<MutexPingPong<BoostMutexOps>>(n); break;
    case 5: pingpong<SemPingPong<BoostSemOps>>(n); break;
    default: pingpong<CondPingPong<BoostCondOps>>(n); break;
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
