// icount_fiber.cc - the Boost.Fiber L2 and L3 loops, alone, for bench/icount.sh
// (same protocol as icount.c: only the loop is collected; prints "ops=<count>").
//
//   weft_icount_fiber l2 N   N x (construct fiber + join) of an empty fiber
//   weft_icount_fiber l3 N   N yields of the main fiber against one yielding partner
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

int main(int argc, char **argv) {
  if (argc != 3 || (std::strcmp(argv[1], "l2") && std::strcmp(argv[1], "l3"))) {
    std::fprintf(stderr, "usage: %s l2|l3 N\n", argv[0]);
    return 1;
  }
  long n = std::atol(argv[2]);
  long ops;
  if (std::strcmp(argv[1], "l2") == 0) {
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
