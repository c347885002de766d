// X3_icount_cpp.cc - X3: the L1-L4 loops of L_icount.cc written with the C++ layer
// (weft/weft.hpp), for instruction counting under callgrind (bench/icount.sh runs both
// and prints the C and C++ rows side by side).
//
//   weft_icount_cpp --mode MODE --n N, MODE:
//   weft_icount_cpp l1 N   N x weft::thread(fn) that has not run (batches of 500; the
//                          joins are not collected)
//   weft_icount_cpp l2 N   N x weft::thread(fn).join(), nvps=1
//   weft_icount_cpp l3 N   N yields (weft::this_thread::yield) against a yielding partner
//   weft_icount_cpp l4m N  N x std::lock_guard<weft::mutex>, uncontested
// Prints "ops=<count>" (for l3 the yields of both threads).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "bench.h"
#include "weft/weft.hpp"

#ifdef WEFT_BENCH_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#endif

namespace {

void empty_fn() {}

void l1(long n, bool collect) {
  constexpr long B = 500;
  static weft::thread t[B];
  for (long done = 0; done < n; done += B) {
    long k = n - done < B ? n - done : B;
    if (collect) CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < k; i++) t[i] = weft::thread(empty_fn);
    if (collect) CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < k; i++) t[i].join();
  }
}

void l2(long n) {
  for (long i = 0; i < n; i++) weft::thread(empty_fn).join();
}

weft::mutex mx;
void l4m(long n) {
  for (long i = 0; i < n; i++) std::lock_guard<weft::mutex> g(mx);
}

long partner_yields;
bool partner_stop;

}  // namespace

int main(int argc, char **argv) {
  const char *mode_name = nullptr;
  long n = 0;
  const bench_opt_t opts[] = {
      {"--mode", BENCH_STR, &mode_name, nullptr, 0, "l1|l2|l3|l4m"},
      {"--n", BENCH_LONG, &n, nullptr, 0, "operations"},
  };
  bench_args(argc, argv, opts, 2, "X3: the L1-L4 loops through the C++ layer, for callgrind (bench/icount.sh)");
  if (!mode_name || n < 1 || (std::strcmp(mode_name, "l1") && std::strcmp(mode_name, "l2") &&
                              std::strcmp(mode_name, "l3") && std::strcmp(mode_name, "l4m")))
    bench_die(argv[0], "--mode l1|l2|l3|l4m and --n >= 1 are needed");
  const std::string mode = mode_name;
  long ops = n;
  try {
    weft::runtime rt(1);
    if (mode == "l1") {
      l1(1000, false);
      l1(n, true);
    } else if (mode == "l2" || mode == "l4m") {
      void (*loop)(long) = mode == "l2" ? l2 : l4m;
      loop(1000);
      CALLGRIND_TOGGLE_COLLECT;
      loop(n);
      CALLGRIND_TOGGLE_COLLECT;
    } else {
      weft::thread partner([] {
        while (!partner_stop) {
          weft::this_thread::yield();
          partner_yields++;
        }
      });
      for (int i = 0; i < 1000; i++) weft::this_thread::yield();
      long p0 = partner_yields;
      CALLGRIND_TOGGLE_COLLECT;
      for (long i = 0; i < n; i++) weft::this_thread::yield();
      CALLGRIND_TOGGLE_COLLECT;
      ops = n + (partner_yields - p0);
      partner_stop = true;
      partner.join();
    }
  } catch (const std::system_error &e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 2;
  }
  std::printf("ops=%ld\n", ops);
  return 0;
}
