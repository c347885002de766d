// pingpong.h - the two-thread set-ups of L6 and L7, one template per pattern, run the
// same way for weft, pthreads and Boost.Fiber (a "spawn" policy starts and joins the
// partner; an "ops" policy names the library's lock/semaphore/condition calls). The one
// place the patterns are written: the latency rows (run_pingpong, sync_common.h) and the
// instruction counts (L_icount.cc, L_icount_fiber.cc: pingpong_rounds) both run them.
// No Google Benchmark here, so that the instruction-count programs build without it, and
// nothing that needs the C++ runtime unless Boost.Fiber is wanted: weft_icount is linked
// without one (WEFT_BENCH_NO_CXX_RUNTIME; bench/CMakeLists.txt says why).
//
// A round is one pass of each thread: the benchmark thread A passes once and the
// partner B passes once. The partner counts its passes; partner_per_round is 1 when
// the two strictly alternate.
#ifndef WEFT_BENCH_PINGPONG_H
#define WEFT_BENCH_PINGPONG_H

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>

#include <atomic>
#if defined(WEFT_BENCH_BOOST) && !defined(WEFT_BENCH_NO_CXX_RUNTIME)
#include <mutex>
#endif

#include "bench.h"
#include "weft/sync.h"
#include "weft/weft.h"
#if defined(WEFT_BENCH_BOOST) && !defined(WEFT_BENCH_NO_CXX_RUNTIME)
#include <boost/fiber/all.hpp>
#endif

namespace weft_bench {

// Pins the calling OS thread to `cpu` for its lifetime and then puts its affinity back.
// cpu < 0 means the CPU it runs on now.
struct Pin {
  cpu_set_t saved;
  explicit Pin(int cpu) {
    bench_affinity_save(&saved);
    bench_pin_self(cpu);
  }
  ~Pin() { bench_affinity_restore(&saved); }
};

#if defined(WEFT_BENCH_BOOST) && !defined(WEFT_BENCH_NO_CXX_RUNTIME)
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


// ---- spawn policies: start(fn, arg), wait_for(flag), join() ----
struct WeftSpawn {
  weft_thread_t *t = nullptr;
  int affinity = -1;
  void start(void *(*fn)(void *), void *arg) {
    weft_attr_t a;
    weft_attr_init(&a);
    a.vproc = WEFT_VPROC(affinity);
    bench_check(weft_create(&t, &a, fn, arg), "weft_create");
  }
  static void wait_for(const std::atomic<bool> &f) {
    while (!f.load(std::memory_order_acquire)) weft_yield();
  }
  void join() { bench_check(weft_join(t, nullptr), "weft_join"); }
};

// Main thread pinned to cpu_a (for the object's lifetime), partner to cpu_b.
struct PthreadSpawn {
  Pin pin;
  int cpu_b;
  pthread_t t{};
  PthreadSpawn(int cpu_a, int b) : pin(cpu_a), cpu_b(b) {}
  void start(void *(*fn)(void *), void *arg) { t = bench_start_pinned(cpu_b, fn, arg); }
  static void wait_for(const std::atomic<bool> &f) {
    while (!f.load(std::memory_order_acquire)) sched_yield();
  }
  void join() { pthread_join(t, nullptr); }
};

#if defined(WEFT_BENCH_BOOST) && !defined(WEFT_BENCH_NO_CXX_RUNTIME)
// A partner fiber on this thread (round_robin).
struct BoostSpawn {
  boost::fibers::fiber f;
  void start(void *(*fn)(void *), void *arg) { f = boost::fibers::fiber([=] { fn(arg); }); }
  static void wait_for(const std::atomic<bool> &f) {
    while (!f.load(std::memory_order_acquire)) boost::this_fiber::yield();
  }
  void join() { f.join(); }
};
#endif

// ---- ops policies ----
struct WeftMutexOps {
  using M = weft_mutex_t;
  static void init(M &m) { weft_mutex_init(&m); }
  static void lock(M &m) { weft_mutex_lock(&m); }
  static void unlock(M &m) { weft_mutex_unlock(&m); }
  static void destroy(M &m) { bench_check(weft_mutex_destroy(&m), "weft_mutex_destroy"); }
};
struct WeftHybridOps {
  using M = weft_hybrid_t;
  static void init(M &m) { weft_hybrid_init(&m); }
  static void lock(M &m) { weft_hybrid_lock(&m); }
  static void unlock(M &m) { weft_hybrid_unlock(&m); }
  static void destroy(M &m) { bench_check(weft_hybrid_destroy(&m), "weft_hybrid_destroy"); }
};
struct PthreadMutexOps {
  using M = pthread_mutex_t;
  static void init(M &m) { pthread_mutex_init(&m, nullptr); }
  static void lock(M &m) { pthread_mutex_lock(&m); }
  static void unlock(M &m) { pthread_mutex_unlock(&m); }
  static void destroy(M &m) { pthread_mutex_destroy(&m); }
};
struct WeftSemOps {
  using S = weft_sem_t;
  static void init(S &s) { weft_sem_init(&s, 0); }
  static void wait(S &s) { weft_sem_wait(&s); }
  static void signal(S &s) { weft_sem_signal(&s); }
  static void destroy(S &s) { bench_check(weft_sem_destroy(&s), "weft_sem_destroy"); }
};
struct PthreadSemOps {
  using S = sem_t;
  static void init(S &s) { sem_init(&s, 0, 0); }
  static void wait(S &s) { sem_wait(&s); }
  static void signal(S &s) { sem_post(&s); }
  static void destroy(S &s) { sem_destroy(&s); }
};
struct WeftCondOps {
  using M = weft_mutex_t;
  using C = weft_cond_t;
  static void init(M &m, C &c) { weft_mutex_init(&m), weft_cond_init(&c); }
  static void lock(M &m) { weft_mutex_lock(&m); }
  static void unlock(M &m) { weft_mutex_unlock(&m); }
  static void wait(C &c, M &m) { weft_cond_wait(&c, &m); }
  static void signal(C &c) { weft_cond_signal(&c); }
  static int vp() { return weft_vp_self(); }
  static void destroy(M &m, C &c) {
    bench_check(weft_cond_destroy(&c), "weft_cond_destroy");
    bench_check(weft_mutex_destroy(&m), "weft_mutex_destroy");
  }
};
struct PthreadCondOps {
  using M = pthread_mutex_t;
  using C = pthread_cond_t;
  static void init(M &m, C &c) { pthread_mutex_init(&m, nullptr), pthread_cond_init(&c, nullptr); }
  static void lock(M &m) { pthread_mutex_lock(&m); }
  static void unlock(M &m) { pthread_mutex_unlock(&m); }
  static void wait(C &c, M &m) { pthread_cond_wait(&c, &m); }
  static void signal(C &c) { pthread_cond_signal(&c); }
  static void destroy(M &m, C &c) { pthread_cond_destroy(&c), pthread_mutex_destroy(&m); }
};
#if defined(WEFT_BENCH_BOOST) && !defined(WEFT_BENCH_NO_CXX_RUNTIME)
struct BoostMutexOps {
  using M = boost::fibers::mutex;
  static void init(M &) {}
  static void lock(M &m) { m.lock(); }
  static void unlock(M &m) { m.unlock(); }
  static void destroy(M &) {}
};
struct BoostSemOps {
  using S = FiberSem;
  static void init(S &) {}
  static void wait(S &s) { s.wait(); }
  static void signal(S &s) { s.signal(); }
  static void destroy(S &) {}
};
struct BoostCondOps {
  using M = boost::fibers::mutex;
  using C = boost::fibers::condition_variable;
  static void init(M &, C &) {}
  static void lock(M &m) { m.lock(); }
  static void unlock(M &m) { m.unlock(); }
  static void wait(C &c, M &m) {
    std::unique_lock<M> lk(m, std::adopt_lock);
    c.wait(lk);
    lk.release();
  }
  static void signal(C &c) { c.notify_one(); }
  static void destroy(M &, C &) {}
};
#endif

// ---- L6 mutex ping-pong: three mutexes, hand over hand ----
//
// M0, M1, M2. A starts holding M0 and M1, B holding M2 (B takes it and raises `ready`
// before A's first step). A's step: unlock the older of its two mutexes, lock the next
// one (index + 2 mod 3). B's step: lock the next one (index + 1 mod 3), unlock its
// older one. The mutex A locks is always the one B holds, and the one B locks the one
// A holds, until the other's step releases it: the two strictly alternate, each lock
// blocks once (on one worker) and each unlock wakes the other. A round = one step of A
// + one step of B: 2 lock/unlock pairs, 2 blocks, 2 switches.
template <class Ops>
struct MutexPingPong {
  static constexpr bool kTrackVp = false;
  typename Ops::M m[3];
  std::atomic<bool> ready{false}, stop{false};
  long b_steps = 0;  // written by B before it unlocks; read by A after its lock
  int a_older = 0;   // A holds m[a_older] and m[a_older + 1]

  MutexPingPong() {
    for (auto &x : m) Ops::init(x);
  }
  ~MutexPingPong() {
    for (auto &x : m) Ops::destroy(x);
  }
  static void *partner(void *arg) {
    auto *p = static_cast<MutexPingPong *>(arg);
    int older = 2;
    Ops::lock(p->m[older]);
    p->ready.store(true, std::memory_order_release);
    for (;;) {
      int next = older == 2 ? 0 : older + 1;
      Ops::lock(p->m[next]);
      if (p->stop.load(std::memory_order_relaxed)) {
        Ops::unlock(p->m[next]);
        Ops::unlock(p->m[older]);
        return nullptr;
      }
      p->b_steps++;
      Ops::unlock(p->m[older]);
      older = next;
    }
  }
  // Before start(): A takes M0, M1.
  void begin() {
    Ops::lock(m[0]);
    Ops::lock(m[1]);
  }
  // One step of A (the caller of begin()).
  inline void step() {
    int next = a_older == 0 ? 2 : a_older - 1;  // a_older + 2 mod 3
    Ops::unlock(m[a_older]);
    Ops::lock(m[next]);
    a_older = a_older == 2 ? 0 : a_older + 1;
  }
  // After the last step: B takes the mutex A releases, sees stop, releases both.
  void end() {
    stop.store(true, std::memory_order_relaxed);
    Ops::unlock(m[a_older]);
    Ops::unlock(m[a_older == 2 ? 0 : a_older + 1]);
  }
};

// ---- L6 semaphore ping-pong: A signal(s1); wait(s2) / B wait(s1); signal(s2) ----
template <class Ops>
struct SemPingPong {
  static constexpr bool kTrackVp = false;
  typename Ops::S s1, s2;
  std::atomic<bool> ready{false}, stop{false};
  long b_steps = 0;
  SemPingPong() { Ops::init(s1), Ops::init(s2); }
  ~SemPingPong() { Ops::destroy(s1), Ops::destroy(s2); }
  static void *partner(void *arg) {
    auto *p = static_cast<SemPingPong *>(arg);
    p->ready.store(true, std::memory_order_release);
    for (;;) {
      Ops::wait(p->s1);
      if (p->stop.load(std::memory_order_relaxed)) return nullptr;
      p->b_steps++;
      Ops::signal(p->s2);
    }
  }
  void begin() {}
  inline void step() {
    Ops::signal(s1);
    Ops::wait(s2);
  }
  void end() {
    stop.store(true, std::memory_order_relaxed);
    Ops::signal(s1);
  }
};

// ---- L7 condition-variable ping-pong (C-Threads §5.1 PingPong) ----
// One mutex, one condition, a turn variable. Each pass: lock; wait while it is not my
// turn; flip the turn; signal; unlock.
// TrackVp (weft, nvps=2): each thread notes the VP of its pass (Ops::vp()); B counts
// the passes it made on a VP other than A's last one (counter b_on_other_vp).
template <class Ops, bool TrackVp = false>
struct CondPingPong {
  static constexpr bool kTrackVp = TrackVp;
  typename Ops::M m;
  typename Ops::C c;
  int turn = 0;  // 0: A's turn, 1: B's
  bool stop_flag = false;
  std::atomic<bool> ready{false}, stop{false};
  long b_steps = 0, b_other_vp = 0;
  int a_vp = -1;
  CondPingPong() { Ops::init(m, c); }
  ~CondPingPong() { Ops::destroy(m, c); }
  static void *partner(void *arg) {
    auto *p = static_cast<CondPingPong *>(arg);
    p->ready.store(true, std::memory_order_release);
    for (;;) {
      Ops::lock(p->m);
      while (p->turn != 1 && !p->stop_flag) Ops::wait(p->c, p->m);
      if (p->stop_flag) {
        Ops::unlock(p->m);
        return nullptr;
      }
      p->turn = 0;
      p->b_steps++;
      if constexpr (TrackVp) p->b_other_vp += Ops::vp() != p->a_vp;
      Ops::signal(p->c);
      Ops::unlock(p->m);
    }
  }
  void begin() {}
  inline void step() {
    Ops::lock(m);
    while (turn != 0) Ops::wait(c, m);
    turn = 1;
    if constexpr (TrackVp) a_vp = Ops::vp();
    Ops::signal(c);
    Ops::unlock(m);
  }
  void end() {
    Ops::lock(m);
    stop_flag = true;
    Ops::signal(c);
    Ops::unlock(m);
  }
};

// Runs pattern P for the instruction counts (bench/icount.sh): the partner started by
// `spawn`, 1000 warm-up rounds, then mark(p, true), n rounds, mark(p, false). Returns n.
template <class P, class Spawn, class Mark>
long pingpong_rounds(Spawn &spawn, long n, Mark mark) {
  P p;
  p.begin();
  spawn.start(&P::partner, &p);
  Spawn::wait_for(p.ready);
  for (int i = 0; i < 1000; i++) p.step();  // warm up
  mark(p, true);
  for (long i = 0; i < n; i++) p.step();
  mark(p, false);
  p.end();
  spawn.join();
  return n;
}

}  // namespace weft_bench

#endif
