// tasks.cc - the task-system baselines (no stacks: a task runs to completion on its
// worker's stack and cannot block) for the null-thread and fork-join rows:
//
//   L2  one empty task spawned and waited for, one after another, on one worker;
//       time per task (weft's L2: create + run + join of an empty thread)
//   T1  P chains, each task spawning its successor and finishing (T_sweep.c's T1);
//       N tasks in all; timed until every chain has ended
//   T5  fork-join: N tasks spawned in batches of 1000, each batch waited for
//
// for OpenMP tasks (`#pragma omp task`, GCC's libgomp) and oneTBB `task_group`
// (`tbb::task_arena` of P threads), P = 1..cores and 2 x cores (oversubscribed); and the
// two systems' own locks for the uncontested-lock rows, on the main thread:
//
//   L4_mutex    lock + unlock of a free lock: omp_set_lock/omp_unset_lock of an
//               omp_lock_t; tbb::mutex lock/unlock (oneTBB's blocking mutex, as weft's
//               is) and, as lib "tbb_spin_mutex", tbb::spin_mutex (never blocks a thread)
//   L5_trylock  a try-lock that succeeds + unlock: omp_test_lock; try_lock
//
// Each point: one warm-up, then --reps runs; median and min..max.
//
// usage: weft_tasks [--out DIR] [--reps 5] [--n 1000000] [--l2-n 200000] [--lock-n 20000000]
//                   [--procs 1,2] [--oversub 4] [--libs openmp_tasks,tbb_task_group]
//                   [--tests L2,T1,T5,L4_mutex,L5_trylock]
// Prints a table and writes DIR/tasks.json.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>


#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef WEFT_BENCH_TBB
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/mutex.h>
#include <oneapi/tbb/spin_mutex.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#endif

#include "bench.h"

namespace {

constexpr int kBatch = 1000;
std::atomic<long> sink{0};

double now_s() { return bench_now_ns() * 1e-9; }
long share(long n, int p, int i) { return n / p + (i < n % p); }

// L4_mutex / L5_trylock: n lock (or successful try-lock) + unlock pairs of one free
// lock, on the calling thread. The lock is the library's: the compiler cannot drop it.
template <class Lock, class Unlock>
double lock_loop(long n, Lock lock, Unlock unlock) {
  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    lock();
    unlock();
  }
  return now_s() - t0;
}

#ifdef _OPENMP
void omp_chain(long left) {
  if (left > 1) {
#pragma omp task firstprivate(left)
    omp_chain(left - 1);
  }
}

double omp_run(const std::string &test, int p, long n) {
  double t0 = 0, t1 = 0;
  if (test == "L4_mutex" || test == "L5_trylock") {
    omp_lock_t l;
    omp_init_lock(&l);
    double s = test == "L4_mutex"
                   ? lock_loop(n, [&] { omp_set_lock(&l); }, [&] { omp_unset_lock(&l); })
                   : lock_loop(n, [&] { if (!omp_test_lock(&l)) std::abort(); },
                               [&] { omp_unset_lock(&l); });
    omp_destroy_lock(&l);
    return s;
  }
  if (test == "L2") {
#pragma omp parallel num_threads(1)
#pragma omp single
    {
      t0 = now_s();
      for (long i = 0; i < n; i++) {
#pragma omp task
        sink.fetch_add(0, std::memory_order_relaxed);
#pragma omp taskwait
      }
      t1 = now_s();
    }
  } else if (test == "T1") {
    t0 = now_s();
#pragma omp parallel num_threads(p)
#pragma omp single
    for (int i = 0; i < p; i++) {
      long k = share(n, p, i);
#pragma omp task firstprivate(k)
      omp_chain(k);
    }
    t1 = now_s();  // the parallel region's end waits for every task
  } else {  // T5
#pragma omp parallel num_threads(p)
#pragma omp single
    {
      t0 = now_s();
      for (long done = 0; done < n; done += kBatch) {
        for (int j = 0; j < kBatch && done + j < n; j++) {
#pragma omp task
          sink.fetch_add(0, std::memory_order_relaxed);
        }
#pragma omp taskwait
      }
      t1 = now_s();
    }
  }
  return t1 - t0;
}
#endif

#ifdef WEFT_BENCH_TBB
template <class M>
double tbb_lock_run(const std::string &test, long n) {
  M m;
  if (test == "L4_mutex") return lock_loop(n, [&] { m.lock(); }, [&] { m.unlock(); });
  return lock_loop(n, [&] { if (!m.try_lock()) std::abort(); }, [&] { m.unlock(); });
}

void tbb_chain(tbb::task_group &g, long left) {
  if (left > 1) g.run([&g, left] { tbb_chain(g, left - 1); });
}

double tbb_run(const std::string &test, int p, long n) {
  if (test == "L4_mutex" || test == "L5_trylock") return tbb_lock_run<tbb::mutex>(test, n);
  tbb::task_arena arena(test == "L2" ? 1 : p);
  double t = 0;
  arena.execute([&] {
    tbb::task_group g;
    double t0 = now_s();
    if (test == "L2") {
      for (long i = 0; i < n; i++) {
        g.run([] { sink.fetch_add(0, std::memory_order_relaxed); });
        g.wait();
      }
    } else if (test == "T1") {
      for (int i = 0; i < p; i++) {
        long k = share(n, p, i);
        g.run([&g, k] { tbb_chain(g, k); });
      }
      g.wait();
    } else {
      for (long done = 0; done < n; done += kBatch) {
        for (int j = 0; j < kBatch && done + j < n; j++)
          g.run([] { sink.fetch_add(0, std::memory_order_relaxed); });
        g.wait();
      }
    }
    t = now_s() - t0;
  });
  return t;
}
#endif

struct Point {
  std::string test, lib;
  int p;
  bool oversub;
  long n;
  std::vector<double> s;
  double med, min, max;
};

}  // namespace

int main(int argc, char **argv) {
  bench_machine_t m;
  bench_machine_read(&m);
  const char *out = "bench-results", *libs = "openmp_tasks,tbb_task_group", *tests = "L2,T1,T5,L4_mutex,L5_trylock";
  long n = 1000000, l2n = 200000, lockn = 20000000;
  int reps = 5;
  int procs_v[16], over_v[16] = {2 * m.cores}, nprocs = 0, nover = 1;
  for (int p = 1; p <= m.cores && nprocs < 16; p++) procs_v[nprocs++] = p;
  const bench_opt_t opts[] = {
      BENCH_OPT_OUT(out, "tasks.json"),
      BENCH_OPT_REPS(reps),
      BENCH_OPT_N(n, "tasks per T point (1000000)"),
      {"--l2-n", BENCH_LONG, &l2n, nullptr, 0, "L2 tasks (200000)"},
      {"--lock-n", BENCH_LONG, &lockn, nullptr, 0, "L4_mutex, L5_trylock: lock+unlock pairs (20000000)"},
      BENCH_OPT_PROCS(procs_v, nprocs, 16),
      {"--oversub", BENCH_INTS, over_v, &nover, 16, "oversubscribed P values (2 x cores)"},
      {"--libs", BENCH_STR, &libs, nullptr, 0, "openmp_tasks,tbb_task_group"},
      {"--tests", BENCH_STR, &tests, nullptr, 0, "L2,T1,T5,L4_mutex,L5_trylock"},
  };
  bench_args(argc, argv, opts, 9, "task-system baselines of L2, T1, T5 (and their locks: L4, L5)");
  std::vector<int> procs(procs_v, procs_v + nprocs), over(over_v, over_v + nover);

  if (reps < 1 || reps > 50) reps = 5;
#ifndef _OPENMP
  if (bench_list_has(libs, "openmp_tasks")) std::printf("openmp_tasks: not built (no OpenMP): skipped\n");
#endif
#ifndef WEFT_BENCH_TBB
  if (bench_list_has(libs, "tbb_task_group")) std::printf("tbb_task_group: not built (oneTBB not found): skipped\n");
#endif
#ifdef WEFT_BENCH_TBB
  // Let an arena of 2 x cores threads exist (the oversubscribed points).
  int most = m.cores;
  for (int p : over) most = std::max(most, p);
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, (size_t)most);
#endif

  std::vector<Point> pts;
  auto run = [&](const std::string &lib, const std::string &test, int p, bool os) {
    bool lockrow = test == "L4_mutex" || test == "L5_trylock";
    long tn = test == "L2" ? l2n : lockrow ? lockn : n;
    Point pt{test, lib, p, os, tn, {}, 0, 0, 0};
    for (int r = -1; r < reps; r++) {
      double s = 0;
#ifdef _OPENMP
      if (lib == "openmp_tasks") s = omp_run(test, p, tn);
#endif
#ifdef WEFT_BENCH_TBB
      if (lib == "tbb_task_group") s = tbb_run(test, p, tn);
      if (lib == "tbb_spin_mutex") s = tbb_lock_run<tbb::spin_mutex>(test, tn);
#endif
      if (r >= 0) pt.s.push_back(s);
    }
    std::vector<double> v = pt.s;
    bench_summary_t sum = bench_summarize(v.data(), (int)v.size());
    pt.min = sum.min;
    pt.max = sum.max;
    pt.med = sum.median;
    pts.push_back(pt);
  };
  std::vector<std::string> avail;
#ifdef _OPENMP
  if (bench_list_has(libs, "openmp_tasks")) avail.push_back("openmp_tasks");
#endif
#ifdef WEFT_BENCH_TBB
  if (bench_list_has(libs, "tbb_task_group")) avail.push_back("tbb_task_group");
#endif
#ifdef WEFT_BENCH_TBB
  // tbb::spin_mutex: the lock rows only
  if (bench_list_has(libs, "tbb_task_group"))
    for (const char *t : {"L4_mutex", "L5_trylock"})
      if (bench_list_has(tests, t)) run("tbb_spin_mutex", t, 1, false);
#endif
  std::printf("tasks: machine %s, %d cores; T1/T5 %ld tasks, L2 %ld, L4/L5 %ld pairs; 1 warm-up + %d runs per point\n",
              m.model, m.cores, n, l2n, lockn, reps);
  for (const auto &lib : avail) {
    for (const char *t : {"L4_mutex", "L5_trylock"})
      if (bench_list_has(tests, t)) run(lib, t, 1, false);
    if (bench_list_has(tests, "L2")) run(lib, "L2", 1, false);
    for (const char *t : {"T1", "T5"}) {
      if (!bench_list_has(tests, t)) continue;
      for (int p : procs) run(lib, t, p, p > m.cores);
      for (int p : over) run(lib, t, p, true);
    }
  }

  std::printf("\n%-10s %3s  %-15s %9s  %10s  %-23s %9s\n", "test", "P", "library", "tasks",
              "median s", "[min .. max] s", "ns/task");
  for (const auto &pt : pts)
    std::printf("%-10s %3d  %-15s %9ld  %10.4f  [%8.4f .. %8.4f]  %9.1f%s\n", pt.test.c_str(), pt.p,
                pt.lib.c_str(), pt.n, pt.med, pt.min, pt.max, pt.med * 1e9 / (double)pt.n,
                pt.oversub ? "  (oversubscribed)" : "");

  bench_json_t f;
  if (bench_json_start(&f, out, "tasks.json", &m) != 0) return 2;
  bench_json_obj(&f, "config");
  bench_json_int(&f, "reps", reps);
  bench_json_int(&f, "warmup_runs", 1);
  bench_json_int(&f, "tasks", n);
  bench_json_int(&f, "l2_tasks", l2n);
  bench_json_int(&f, "lock_pairs", lockn);
  bench_json_str(&f, "locks", "L4_mutex, L5_trylock: omp_lock_t (openmp_tasks), tbb::mutex "
                              "(tbb_task_group), tbb::spin_mutex (tbb_spin_mutex), uncontested");
  bench_json_int(&f, "batch", kBatch);
  bench_json_str(&f, "note", "task systems without stacks: a task cannot block");
  bench_json_end(&f);
  bench_json_arr(&f, "results");
  for (const Point &pt : pts) {
    double one = 0;
    for (const auto &q : pts)
      if (q.test == pt.test && q.lib == pt.lib && q.p == 1) one = q.med;
    bench_json_record(&f, "lib", pt.lib.c_str(), pt.p, pt.oversub);
    bench_json_str(&f, "test", pt.test.c_str());
    bench_json_int(&f, "threads", pt.n);
    bench_json_num(&f, "ns_per_thread", pt.med * 1e9 / (double)pt.n);
    bench_json_num(&f, "speedup", one > 0 ? one / pt.med : 0);
    bench_json_times(&f, bench_summary_t{pt.med, pt.min, pt.max}, pt.s.data(), (int)pt.s.size());
    bench_json_end(&f);
  }
  return bench_json_finish(&f) == 0 ? 0 : 2;
}
