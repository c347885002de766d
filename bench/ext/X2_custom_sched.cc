// X2 - a user-defined scheduler against the built-in one on L2 and L3 (BENCHMARKS.md
// X2; target: within 20%). The same loops as L2_null_thread.cc and L3_switch.cc, run by
// weft threads of a bundle scheduled by
//   example_fifo  examples/custom_sched.c (compiled in): dispatch queues only
//   fifo_lazy     weft/schedlib.h's FIFO, lazy stacks: new threads wait in its own
//                 run lists and are handed out by processor_idle
// Compare with L2_null_thread/weft and L3_switch/weft (root bundle, inlined handlers).
#include "latency.h"

extern "C" const weft_sched_ops_t custom_fifo_ops;  // examples/custom_sched.c

namespace {

enum { kExample, kFifoLazy };

// A bundle of the given scheduler; destroyed (with its state) by Bundle's destructor.
struct Bundle {
  weft_bundle_t *b = nullptr;
  explicit Bundle(int which) {
    if (which == kExample)
      bench_check(weft_bundle_create(&b, nullptr, &custom_fifo_ops, nullptr), "weft_bundle_create");
    else
      bench_check(weft_schedlib_bundle_create(&b, nullptr, WEFT_SCHED_FIFO | WEFT_SCHED_LAZY),
                        "weft_schedlib_bundle_create");
  }
  ~Bundle() { bench_check(weft_schedlib_bundle_destroy(b), "bundle destroy"); }
  weft_attr_t attr() const {
    weft_attr_t a;
    weft_attr_init(&a);
    a.bundle = b;
    return a;
  }
};

// Runs fn(arg) in a thread of bundle b and returns its result (untimed set-up).
template <class F>
double in_bundle(const Bundle &bd, F f) {
  weft_attr_t a = bd.attr();
  weft_thread_t *t;
  double ns = 0;
  struct Ctx { F *f; double *ns; } ctx{&f, &ns};
  bench_check(weft_create(&t, &a, [](void *p) -> void * {
    auto *c = static_cast<Ctx *>(p);
    *c->ns = (*c->f)();
    return nullptr;
  }, &ctx), "weft_create");
  bench_check(weft_join(t, nullptr), "weft_join");
  return ns;
}

// Timed: n x (weft_create() + weft_join()) of an empty thread, by a thread of the
// bundle, of a thread in the same bundle, on one VP.
void X2_L2(benchmark::State &state, int which) {
  Bundle bd(which);
  weft_attr_t a = bd.attr();
  weft_bench::run_batches(state, 1000, [&](benchmark::IterationCount n) {
    return in_bundle(bd, [&]() {
      double t0 = bench_now_ns();
      for (int i = 0; i < n; i++) {
        weft_thread_t *t;
        bench_check(weft_create(&t, &a, weft_bench::empty_body, nullptr), "weft_create");
        bench_check(weft_join(t, nullptr), "weft_join");
      }
      return bench_now_ns() - t0;
    });
  });
}
BENCHMARK_CAPTURE(X2_L2, example_fifo, kExample)->Name("X2_L2_null_thread/example_fifo")->Apply(weft_bench::defaults);
BENCHMARK_CAPTURE(X2_L2, fifo_lazy, kFifoLazy)->Name("X2_L2_null_thread/schedlib_fifo_lazy")->Apply(weft_bench::defaults);

// L3 in a bundle: the partner is a thread of the bundle that yields until told to stop.
long x2_partner_yields;
bool x2_stop;
weft_sem_t x2_started;

void *x2_partner(void *) {
  weft_sem_signal(&x2_started);
  while (!x2_stop) {
    weft_yield();
    x2_partner_yields++;
  }
  return nullptr;
}

// Timed: n/2 weft_yield() calls of a bundle thread with one partner bundle thread
// yielding back, one VP. Reported: time / (yields of both threads). The driver waits
// for the partner to start by blocking on a semaphore (a yield does not reach a thread
// that a scheduler keeps to itself, weft/schedlib.h).
void X2_L3(benchmark::State &state, int which) {
  Bundle bd(which);
  weft_attr_t a = bd.attr();
  x2_stop = false;
  weft_sem_init(&x2_started, 0);
  double mine = 0, theirs = 0;
  weft_thread_t *partner = nullptr;
  in_bundle(bd, [&]() {
    bench_check(weft_create(&partner, &a, x2_partner, nullptr), "weft_create");
    weft_sem_wait(&x2_started);
    weft_bench::run_batches(state, 2000, [&](benchmark::IterationCount n) {
      long p0 = x2_partner_yields;
      double t0 = bench_now_ns();
      for (int i = 0; i < n / 2; i++) weft_yield();
      double ns = bench_now_ns() - t0;
      mine += static_cast<double>(n / 2);
      theirs += static_cast<double>(x2_partner_yields - p0);
      return ns * static_cast<double>(n) / static_cast<double>(n / 2 + (x2_partner_yields - p0));
    });
    x2_stop = true;
    bench_check(weft_join(partner, nullptr), "weft_join");
    return 0.0;
  });
  weft_sem_destroy(&x2_started);
  state.counters["partner_per_main_yield"] = theirs / mine;
}
BENCHMARK_CAPTURE(X2_L3, example_fifo, kExample)->Name("X2_L3_switch/example_fifo")->Apply(weft_bench::defaults);
BENCHMARK_CAPTURE(X2_L3, fifo_lazy, kFifoLazy)->Name("X2_L3_switch/schedlib_fifo_lazy")->Apply(weft_bench::defaults);

}  // namespace
