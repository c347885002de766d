// T_sweep_fiber.cc - the Boost.Fiber baseline of T_sweep.c: T1, T4 and T5 on P threads
// scheduled by boost::fibers::algo::work_stealing (default: suspend=false, idle threads
// spin). The same workloads and timed regions as weft's (see T_sweep.c); called in a
// child process per P, because work_stealing fixes its thread count once per process.
#include <boost/fiber/all.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "bench.h"

namespace bf = boost::fibers;

namespace {

constexpr int kBatch = 1000;

long share(long n, int p, int i) { return n / p + (i < n % p); }

std::atomic<long> chains_left;
bf::mutex done_mtx;
bf::condition_variable done_cv;
bool done;

void cycle(long left) {
  if (left > 1) {
    bf::fiber(cycle, left - 1).detach();
  } else if (chains_left.fetch_sub(1) == 1) {
    std::lock_guard<bf::mutex> lk(done_mtx);
    done = true;
    done_cv.notify_all();
  }
}

// T1: P detached chain heads; the main fiber waits for the last chain to finish.
double t1(int p, long n) {
  done = false;
  chains_left = p;
  double t0 = bench_now_ns();
  for (int i = 0; i < p; i++) bf::fiber(cycle, share(n, p, i)).detach();
  std::unique_lock<bf::mutex> lk(done_mtx);
  done_cv.wait(lk, [] { return done; });
  return bench_now_ns() - t0;
}

void create_join_batches(long n) {
  std::vector<bf::fiber> b;
  b.reserve(kBatch);
  for (long made = 0; made < n;) {
    long k = n - made < kBatch ? n - made : kBatch;
    for (long j = 0; j < k; j++) b.emplace_back(bf::launch::post, [] {});
    for (auto &f : b) f.join();
    b.clear();
    made += k;
  }
}

// T4: P worker fibers, each creating batches of unstarted fibers and joining them.
double t4(int p, long n) {
  double t0 = bench_now_ns();
  std::vector<bf::fiber> w;
  for (int i = 0; i < p; i++) w.emplace_back(create_join_batches, share(n, p, i));
  for (auto &f : w) f.join();
  return bench_now_ns() - t0;
}

// T5: the main fiber creates batches of fibers and joins each batch.
double t5(long n) {
  double t0 = bench_now_ns();
  create_join_batches(n);
  return bench_now_ns() - t0;
}

}  // namespace

extern "C" int weft_bench_fiber_sweep(int p, const long *n, int reps, const int *run_test,
                                      double *out) {
  // Every thread installs work_stealing before any dispatches: a thread steals from a
  // random peer, so all peers must be registered first (an OS-level barrier).
  std::atomic<int> registered{0};
  bf::mutex fini_mtx;
  bf::condition_variable fini_cv;
  bool fini = false;
  auto barrier = [&] {
    registered++;
    while (registered.load() < p) std::this_thread::yield();
  };
  std::vector<std::thread> helpers;
  for (int i = 1; i < p; i++)
    helpers.emplace_back([&] {
      bf::use_scheduling_algorithm<bf::algo::work_stealing>(p);
      barrier();
      std::unique_lock<bf::mutex> lk(fini_mtx);
      fini_cv.wait(lk, [&] { return fini; });  // this thread now runs/steals fibers
    });
  bf::use_scheduling_algorithm<bf::algo::work_stealing>(p);
  barrier();

  for (int t = 0; t < 3; t++) {
    if (!run_test[t]) continue;
    for (int r = -1; r < reps; r++) {  // r = -1: warm-up
      double ns = t == 0 ? t1(p, n[t]) : t == 1 ? t4(p, n[t]) : t5(n[t]);
      if (r >= 0) out[t * reps + r] = ns * 1e-9;
    }
  }
  {
    std::lock_guard<bf::mutex> lk(fini_mtx);
    fini = true;
  }
  fini_cv.notify_all();
  for (auto &h : helpers) h.join();
  return 0;
}
