// R_peers.cc - the OpenMP tasks, oneTBB task_group and Boost.Fiber side of R1-R3
// (R_weft.c has weft's and the comment on what each benchmark does). One source,
// built three times (bench/trees/CMakeLists.txt), once per package, so that each process
// loads only its own runtime and the peak RSS is its own:
//
//   weft_trees_omp    -DTREES_OMP    fib, queens: `#pragma omp task` per call/placement,
//                                    `taskwait`; P = threads of the parallel region
//   weft_trees_tbb    -DTREES_TBB    fib, queens: a tbb::task_group per call (run, wait)
//                                    in a tbb::task_arena of P threads
//   weft_trees_fiber  -DTREES_FIBER  fib, queens: a boost::fibers::fiber per call/placement
//                                    (default launch::post, default fixedsize_stack),
//                                    joined; live: n fibers blocked on one condition
//                                    variable, released by notify_all, joined. P threads
//                                    scheduled by algo::work_stealing, as in the sweeps
//
// Task systems cannot keep a million tasks blocked (a task that waits holds its worker
// thread), so `live` is Boost.Fiber's only. Output, checks and exit codes as
// R_weft.c: one "RESULT {...}" line; "WRONG RESULT" and exit 3 on a wrong answer.
//
// usage: weft_trees_<pkg> --bench fib|queens|live [--p 1] [--n N] [--reps 3]
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(TREES_OMP)
#include <omp.h>
#define TREES_LIB "openmp_tasks"
#elif defined(TREES_TBB)
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#define TREES_LIB "tbb_task_group"
#elif defined(TREES_FIBER)
#include <boost/fiber/all.hpp>
#define TREES_LIB "boost_fiber"
namespace bf = boost::fibers;
#else
#error "define one of TREES_OMP, TREES_TBB, TREES_FIBER"
#endif

#include "R_common.h"
#include "bench.h"

namespace {

constexpr int kMaxReps = 50;
constexpr int kQMax = R_QMAX;
int qn;

[[noreturn]] void wrong(const char *what, long got, long want) {
  std::fprintf(stderr, "WRONG RESULT: %s: %ld, expected %ld\n", what, got, want);
  std::exit(3);
}

struct QNode {
  int row;
  uint32_t cols, d1, d2;
  uint32_t free_cols() const { return ~(cols | d1 | d2) & ((1u << qn) - 1); }
  QNode child(uint32_t bit) const { return {row + 1, cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1}; }
};

// ---- the three packages: fib and queens exactly as weft's (one task/fiber per call) ----

#if defined(TREES_OMP)
long fib(long n) {
  if (n < 2) return n;
  long x, y;
#pragma omp task shared(x)
  x = fib(n - 1);
  y = fib(n - 2);
#pragma omp taskwait
  return x + y;
}

long queens(const QNode &q) {
  if (q.row == qn) return 1;
  long r[kQMax];
  int k = 0;
  for (uint32_t f = q.free_cols(); f; f &= f - 1, k++) {
    QNode c = q.child(f & -f);
#pragma omp task shared(r) firstprivate(c, k)
    r[k] = queens(c);
  }
#pragma omp taskwait
  long sum = 0;
  for (int i = 0; i < k; i++) sum += r[i];
  return sum;
}

template <class F>
long on_p(int p, F fn) {
  long v = 0;
#pragma omp parallel num_threads(p)
#pragma omp single
  v = fn();
  return v;
}
#elif defined(TREES_TBB)
long fib(long n) {
  if (n < 2) return n;
  long x, y;
  tbb::task_group g;
  g.run([&] { x = fib(n - 1); });
  y = fib(n - 2);
  g.wait();
  return x + y;
}

long queens(const QNode &q) {
  if (q.row == qn) return 1;
  long r[kQMax];
  int k = 0;
  tbb::task_group g;
  for (uint32_t f = q.free_cols(); f; f &= f - 1, k++) {
    QNode c = q.child(f & -f);
    long *slot = &r[k];
    g.run([c, slot] { *slot = queens(c); });
  }
  g.wait();
  long sum = 0;
  for (int i = 0; i < k; i++) sum += r[i];
  return sum;
}

tbb::task_arena *arena;

template <class F>
long on_p(int, F fn) {
  long v = 0;
  arena->execute([&] { v = fn(); });
  return v;
}
#else
long fib(long n) {
  if (n < 2) return n;
  long x;
  bf::fiber f([&x, n] { x = fib(n - 1); });
  long y = fib(n - 2);
  f.join();
  return x + y;
}

long queens(const QNode &q) {
  if (q.row == qn) return 1;
  long r[kQMax];
  bf::fiber t[kQMax];
  int k = 0;
  for (uint32_t f = q.free_cols(); f; f &= f - 1, k++) {
    QNode c = q.child(f & -f);
    long *slot = &r[k];
    t[k] = bf::fiber([c, slot] { *slot = queens(c); });
  }
  long sum = 0;
  for (int i = 0; i < k; i++) {
    t[i].join();
    sum += r[i];
  }
  return sum;
}

template <class F>
long on_p(int, F fn) {
  return fn();  // the main fiber; the P - 1 helper threads steal
}

// live: n fibers wait on one condition until `released`; the last to start wakes main.
long live_n;
std::atomic<long> live_started{0}, live_finished{0};
bf::mutex gate_m;
bf::condition_variable gate_cv, started_cv;
bool released = false, all_started = false;

void live_body() {
  std::unique_lock<bf::mutex> lk(gate_m);
  if (live_started.fetch_add(1, std::memory_order_relaxed) + 1 == live_n) {
    all_started = true;
    started_cv.notify_one();
  }
  gate_cv.wait(lk, [] { return released; });
  live_finished.fetch_add(1, std::memory_order_relaxed);
}

// P OS threads under work_stealing: every one registers before any dispatches (a thief
// picks a random peer), as T_sweep_fiber.cc does; the helpers run fibers until `fini`.
struct FiberPool {
  std::vector<std::thread> helpers;
  bf::mutex fini_m;
  bf::condition_variable fini_cv;
  bool fini = false;
  std::atomic<int> registered{0};
  explicit FiberPool(int p) {
    auto barrier = [this, p] {
      registered++;
      while (registered.load() < p) std::this_thread::yield();
    };
    for (int i = 1; i < p; i++)
      helpers.emplace_back([this, p, barrier] {
        bf::use_scheduling_algorithm<bf::algo::work_stealing>(p);
        barrier();
        std::unique_lock<bf::mutex> lk(fini_m);
        fini_cv.wait(lk, [this] { return fini; });
      });
    bf::use_scheduling_algorithm<bf::algo::work_stealing>(p);
    barrier();
  }
  ~FiberPool() {
    {
      std::lock_guard<bf::mutex> lk(fini_m);
      fini = true;
    }
    fini_cv.notify_all();
    for (auto &h : helpers) h.join();
  }
};
#endif

void print_common(const char *bench, int p, long n) {
  bench_machine_t m;
  bench_machine_read(&m);
  std::printf("RESULT {\"bench\": \"%s\", \"lib\": \"%s\", \"P\": %d, \"n\": %ld, \"machine\": ", bench,
              TREES_LIB, p, n);
  bench_machine_json(stdout, &m);
}

int run_tree(bool is_fib, int p, long n, int reps) {
  long want, spawns = 0;
  if (is_fib) {
    if (n < 0 || n > 60) {
      std::fprintf(stderr, "fib: --n must be in 0..60\n");
      return 1;
    }
    want = r_fib(n, &spawns);
  } else {
    if (n < 1 || n > kQMax) {
      std::fprintf(stderr, "queens: --n must be in 1..%d\n", kQMax);
      return 1;
    }
    qn = static_cast<int>(n);
    want = r_queens_serial(qn, 0, 0, 0, 0, &spawns);
    if (want != r_queens_known[n]) wrong("serial queens", want, r_queens_known[n]);
  }
#if defined(TREES_TBB)
  // an arena of more threads than cores (the oversubscribed points) needs this
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(p));
  tbb::task_arena a(p);
  arena = &a;
#elif defined(TREES_FIBER)
  FiberPool pool(p);
#endif
  long rss_start = bench_rss_kib();
  double s[kMaxReps];
  for (int r = -1; r < reps; r++) {
    double t0 = bench_now_ns();
    long got = on_p(p, [&] { return is_fib ? fib(n) : queens(QNode{0, 0, 0, 0}); });
    double ns = bench_now_ns() - t0;
    if (got != want) wrong(is_fib ? "fib" : "queens", got, want);
    if (r >= 0) s[r] = ns * 1e-9;
  }
  print_common(is_fib ? "fib" : "queens", p, n);
  std::printf(", \"spawns\": %ld, \"result\": %ld, \"ok\": true, \"warmup_runs\": 1, \"seconds\": [", spawns,
              want);
  for (int r = 0; r < reps; r++) std::printf("%s%.6g", r ? ", " : "", s[r]);
  std::printf("], \"rss_start_kib\": %ld, \"peak_rss_kib\": %ld}\n", rss_start, bench_peak_rss_kib());
  return 0;
}

#if defined(TREES_FIBER)
int run_live(int p, long n) {
  live_n = n;
  std::vector<bf::fiber> t(static_cast<size_t>(n));  // touched before the first reading
  FiberPool pool(p);
  long rss_before = bench_rss_kib();
  double t0 = bench_now_ns();
  for (long i = 0; i < n; i++) t[i] = bf::fiber(live_body);
  {
    std::unique_lock<bf::mutex> lk(gate_m);
    started_cv.wait(lk, [] { return all_started; });
  }
  double t1 = bench_now_ns();
  long rss_blocked = bench_rss_kib();
  long early = live_finished.load();
  {
    std::lock_guard<bf::mutex> lk(gate_m);
    released = true;
  }
  gate_cv.notify_all();
  for (auto &f : t) f.join();
  double t2 = bench_now_ns();
  if (early != 0) wrong("live: fibers past the condition before the release", early, 0);
  if (live_finished.load() != n) wrong("live: fibers finished", live_finished.load(), n);
  print_common("live", p, n);
  std::printf(", \"threads\": %ld, \"ok\": true, \"create_s\": %.6g, \"release_join_s\": %.6g, "
              "\"rss_before_kib\": %ld, \"rss_blocked_kib\": %ld, \"peak_rss_kib\": %ld}\n",
              n, (t1 - t0) * 1e-9, (t2 - t1) * 1e-9, rss_before, rss_blocked, bench_peak_rss_kib());
  return 0;
}
#endif

}  // namespace

int main(int argc, char **argv) {
  const char *bench = nullptr;
  int p = 1, reps = 3;
  long n = -1;
  const bench_opt_t opts[] = {
      {"--bench", BENCH_STR, &bench, nullptr, 0, "fib|queens|live"},
      {"--p", BENCH_INT, &p, nullptr, 0, "worker threads (1)"},
      BENCH_OPT_N(n, "fib(n), n queens, n live threads"),
      BENCH_OPT_REPS(reps),
  };
  bench_args(argc, argv, opts, 4, "R1-R3 of " TREES_LIB);
  if (p < 1 || p > 256 || reps < 1 || reps > kMaxReps || !bench) {
    std::fprintf(stderr, "usage: --bench fib|queens|live [--p 1..256] [--n N] [--reps 1..%d]\n", kMaxReps);
    return 1;
  }
  if (!std::strcmp(bench, "fib")) return run_tree(true, p, n < 0 ? 30 : n, reps);
  if (!std::strcmp(bench, "queens")) return run_tree(false, p, n < 0 ? 12 : n, reps);
  if (!std::strcmp(bench, "live")) {
#if defined(TREES_FIBER)
    if (n < 0) n = 1000000;
    if (n < 1) {
      std::fprintf(stderr, "live: --n must be at least 1\n");
      return 1;
    }
    return run_live(p, n);
#else
    std::printf("%s live: not built (a task cannot block without holding its worker thread): skipped\n",
                TREES_LIB);
    return 4;
#endif
  }
  std::fprintf(stderr, "unknown --bench %s\n", bench);
  return 1;
}
