// tests/unit/wire_test.cc - wiring (weft/wire.h): a wired thread blocked in read() on
// a pipe does not stall its VP (one VP: another weft thread on it still runs and
// writes to the pipe); a wired thread keeps its identity (weft_self, keys, the local
// pointer) and uses mutexes, conditions and joins with threads on VPs; a mutex held
// across wire/unwire; weft_exit and weft_shutdown of wired threads; errors. The
// kernel threads come from the weft_blocking pool: kept after an unwire and reused by
// the next wire or job, many wire/unwire cycles at 1 and 2 VPs, wires racing
// weft_shutdown, and a wire while the pool is at its limit (it starts a thread past
// the limit: weft/wire.h).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "weft_test.h"

using namespace weft_test;

namespace {

class WireTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (weft_is_running()) {
      EXPECT_EQ(weft_shutdown(), 0);
    }
  }
};

struct PipeRun {
  int fd[2] = {-1, -1};
  weft_thread_t *reader = nullptr;     // set before the reader can run
  std::atomic<int> reader_ready{0};    // the reader is wired and about to read()
  std::atomic<int> writer_ran{0};
  std::atomic<int> watchdog_fired{0};
  std::atomic<int> done{0};
  char got = 0;
  int self_ok = 0, vp_while_wired = 0, wired_flag = 0, vp_after = -2;
};

void *Reader(void *p) {
  auto *r = static_cast<PipeRun *>(p);
  if (weft_wire() != 0) return P(-1);
  r->wired_flag = weft_is_wired();
  r->self_ok = weft_self() == r->reader;
  r->vp_while_wired = weft_vp_self();
  r->reader_ready.store(1);
  char c = 0;
  ssize_t n = read(r->fd[0], &c, 1);  // blocks this kernel thread only
  r->got = c;
  if (weft_unwire() != 0) return P(-2);
  r->vp_after = weft_vp_self();
  return P(n);
}

void *Writer(void *p) {
  auto *r = static_cast<PipeRun *>(p);
  // the only VP runs this thread only if the reader's read() did not take it
  while (!r->reader_ready.load()) weft_yield();
  r->writer_ran.store(1);
  char c = 'x';
  return P(write(r->fd[1], &c, 1));
}

// The case wiring exists for: ONE VP; the wired reader blocks in read(); the writer, a weft
// thread on that VP, still runs and writes. A watchdog OS thread turns a failure into
// a failed assertion instead of a hang (it writes to the pipe after 30 s).
TEST_F(WireTest, BlockingReadDoesNotStallTheOnlyVp) {
  ASSERT_EQ(InitWithVps(1), 0);
  PipeRun r;
  ASSERT_EQ(pipe(r.fd), 0);
  std::thread watchdog([&r] {
    for (int i = 0; i < 3000 && !r.done.load(); i++) usleep(10000);
    if (!r.done.load()) {
      r.watchdog_fired.store(1);
      char c = 'w';
      ssize_t n = write(r.fd[1], &c, 1);
      (void)n;
    }
  });
  ASSERT_EQ(weft_create(&r.reader, nullptr, Reader, &r), 0);
  weft_thread_t *w = Spawn(Writer, &r);
  void *rr = nullptr, *wr = nullptr;
  EXPECT_EQ(weft_join(r.reader, &rr), 0);
  EXPECT_EQ(weft_join(w, &wr), 0);
  r.done.store(1);
  watchdog.join();
  EXPECT_EQ(r.watchdog_fired.load(), 0) << "the writer never ran: read() stalled the VP";
  EXPECT_EQ(r.writer_ran.load(), 1);
  EXPECT_EQ(I(rr), 1);
  EXPECT_EQ(I(wr), 1);
  EXPECT_EQ(r.got, 'x');
  EXPECT_EQ(r.wired_flag, 1);
  EXPECT_EQ(r.self_ok, 1);
  EXPECT_EQ(r.vp_while_wired, -1);
  EXPECT_EQ(r.vp_after, 0);
  EXPECT_EQ(weft_wired_count(), 0);
  close(r.fd[0]);
  close(r.fd[1]);
}

// Ping-pong through a weft mutex and condition between a wired thread and a thread
// on a VP, for 1 and 2 VPs: every hand-off arrives (no lost wake-up either way).
struct PingPong {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  long turn = 0;  // m
  long rounds = 0;
  std::atomic<int> bad{0};
};

void PlayTurns(PingPong *pp, long me) {
  for (long i = 0; i < pp->rounds; i++) {
    weft_mutex_lock(&pp->m);
    while (pp->turn % 2 != me) weft_cond_wait(&pp->c, &pp->m);
    pp->turn++;
    weft_cond_signal(&pp->c);
    weft_mutex_unlock(&pp->m);
  }
}

void *WiredPlayer(void *p) {
  auto *pp = static_cast<PingPong *>(p);
  if (weft_wire() != 0) pp->bad.fetch_add(1);
  PlayTurns(pp, 0);
  if (weft_unwire() != 0) pp->bad.fetch_add(1);
  return nullptr;
}

void *VpPlayer(void *p) {
  PlayTurns(static_cast<PingPong *>(p), 1);
  return nullptr;
}

TEST_F(WireTest, CondPingPongWithAThreadOnAVp) {
  for (int nvps : {1, 2}) {
    ASSERT_EQ(InitWithVps(nvps), 0);
    PingPong pp;
    pp.rounds = Scaled(2000, 50);
    weft_thread_t *a = Spawn(WiredPlayer, &pp), *b = Spawn(VpPlayer, &pp);
    EXPECT_EQ(weft_join(a, nullptr), 0);
    EXPECT_EQ(weft_join(b, nullptr), 0);
    EXPECT_EQ(pp.turn, 2 * pp.rounds) << "nvps " << nvps;
    EXPECT_EQ(pp.bad.load(), 0);
    ASSERT_EQ(weft_shutdown(), 0);
  }
}

// A mutex taken on a VP, held while wired, released after unwiring (checked builds
// check the owner at each unlock: the wired thread is the same owner).
void *HoldAcross(void *p) {
  auto *m = static_cast<weft_mutex_t *>(p);
  long bad = 0;
  bad += weft_mutex_lock(m) != 0;
  bad += weft_wire() != 0;
  bad += weft_mutex_unlock(m) != 0;  // taken unwired, released wired
  bad += weft_mutex_lock(m) != 0;    // taken wired ...
  bad += weft_unwire() != 0;
  bad += weft_mutex_unlock(m) != 0;  // ... released unwired
  return P(bad);
}

TEST_F(WireTest, MutexHeldAcrossWireAndUnwire) {
  ASSERT_EQ(InitWithVps(2), 0);
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_thread_t *t = Spawn(HoldAcross, &m);
  void *r = P(-1);
  EXPECT_EQ(weft_join(t, &r), 0);
  EXPECT_EQ(I(r), 0);
  EXPECT_EQ(weft_mutex_destroy(&m), 0);
}

// Identity survives wiring: the local pointer and key values set on a VP are seen
// wired, and values set wired are seen after unwiring; joins both ways.
weft_key_t g_key;

void *Child(void *p) { return p; }

void *Identity(void *) {
  long bad = 0;
  weft_thread_t *me = weft_self();
  bad += weft_local_set(P(11)) != 0;
  bad += weft_key_set(g_key, P(22)) != 0;
  bad += weft_wire() != 0;
  bad += weft_self() != me;
  bad += weft_thread_id(weft_self()) != weft_thread_id(me);
  bad += weft_local_get() != P(11);
  bad += weft_key_get(g_key) != P(22);
  bad += weft_local_set(P(33)) != 0;
  bad += weft_key_set(g_key, P(44)) != 0;
  // a wired thread creates and joins a thread that runs on a VP
  weft_thread_t *c = nullptr;
  void *cr = nullptr;
  bad += weft_create(&c, nullptr, Child, P(5)) != 0;
  bad += weft_join(c, &cr) != 0;
  bad += cr != P(5);
  bad += weft_join(me, nullptr) != WEFT_EDEADLK;
  weft_yield();  // sched_yield on its kernel thread
  bad += weft_wire() != 0;  // already wired: left as it is
  bad += weft_is_wired() != 1;
  bad += weft_unwire() != 0;
  bad += weft_unwire() != 0;  // not wired: left as it is
  bad += weft_is_wired() != 0;
  bad += weft_local_get() != P(33);
  bad += weft_key_get(g_key) != P(44);
  bad += weft_self() != me;
  return P(bad);
}

TEST_F(WireTest, IdentityKeysLocalAndJoins) {
  ASSERT_EQ(weft_key_create(&g_key, nullptr), 0);
  ASSERT_EQ(InitWithVps(2), 0);
  weft_thread_t *t = Spawn(Identity);
  void *r = P(-1);
  EXPECT_EQ(weft_join(t, &r), 0);
  EXPECT_EQ(I(r), 0);
  EXPECT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// weft_exit from a wired thread unwires it first; its joiner (on a VP) gets the result.
void *ExitWired(void *) {
  if (weft_wire() != 0) return P(-1);
  weft_exit(P(77));
  return P(-2);
}

TEST_F(WireTest, ExitFromAWiredThread) {
  ASSERT_EQ(InitWithVps(1), 0);
  weft_thread_t *t = Spawn(ExitWired);
  void *r = nullptr;
  EXPECT_EQ(weft_join(t, &r), 0);
  EXPECT_EQ(I(r), 77);
  EXPECT_EQ(weft_wired_count(), 0);
}

// Shutdown: a wired main weft thread is unwired by weft_shutdown; a thread that is
// wired and asleep in the kernel is waited for (it can run), not reported as EBUSY.
TEST_F(WireTest, ShutdownFromWiredMain) {
  ASSERT_EQ(InitWithVps(1), 0);
  weft_thread_t *main_self = weft_self();
  ASSERT_EQ(weft_wire(), 0);
  EXPECT_EQ(weft_self(), main_self);
  EXPECT_EQ(weft_vp_self(), -1);
  EXPECT_EQ(weft_exit(nullptr), WEFT_EPERM);  // the main weft thread never exits
  EXPECT_EQ(weft_is_wired(), 1);
  EXPECT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_is_running(), 0);
  EXPECT_EQ(weft_is_wired(), 0);
}

std::atomic<int> g_seen_wired{0};

void *WiredSleeper(void *) {
  if (weft_wire() != 0) return P(-1);
  // kernel sleeps until main has seen it wired and gone into weft_shutdown: no VP is
  // busy and nothing is queued, yet this thread can run
  while (!g_seen_wired.load()) usleep(1000);
  usleep(50000);
  if (weft_unwire() != 0) return P(-2);
  return nullptr;
}

TEST_F(WireTest, ShutdownWaitsForAWiredThread) {
  ASSERT_EQ(InitWithVps(2), 0);
  weft_thread_t *t = nullptr;
  weft_attr_t a = DetachedAttr();
  ASSERT_EQ(weft_create(&t, &a, WiredSleeper, nullptr), 0);
  ASSERT_TRUE(YieldUntil([] { return weft_wired_count() == 1; }));
  g_seen_wired.store(1);
  EXPECT_EQ(weft_shutdown(), 0);
}

// A thread of a custom bundle (schedlib FIFO) wires and unwires: its scheduler gets it
// back through thread_unblocked and runs it to the end.
void *WireTwice(void *) {
  long bad = 0;
  for (int i = 0; i < 2; i++) {
    bad += weft_wire() != 0;
    bad += weft_is_wired() != 1;
    bad += weft_unwire() != 0;
  }
  return P(bad);
}

TEST_F(WireTest, ThreadOfACustomBundle) {
  ASSERT_EQ(InitWithVps(2), 0);
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, WEFT_SCHED_FIFO), 0);
  weft_attr_t a;
  weft_attr_init(&a);
  a.bundle = b;
  weft_thread_t *t = Spawn(WireTwice, nullptr, &a);
  void *r = P(-1);
  EXPECT_EQ(weft_join(t, &r), 0);
  EXPECT_EQ(I(r), 0);
  EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
}

TEST_F(WireTest, Errors) {
  EXPECT_EQ(weft_wire(), WEFT_ENOTINIT);
  EXPECT_EQ(weft_unwire(), WEFT_ENOTINIT);
  EXPECT_EQ(weft_is_wired(), 0);
  ASSERT_EQ(InitWithVps(1), 0);
  int w = 0, u = 0;
  std::thread os([&] {
    w = weft_wire();
    u = weft_unwire();
  });
  os.join();
  EXPECT_EQ(w, WEFT_EPERM);
  EXPECT_EQ(u, WEFT_EPERM);
  EXPECT_EQ(weft_unwire(), 0);  // main, not wired
}

// ---- the kernel threads come from the weft_blocking pool ----------------------------

// Lets every idle pool thread go (1 ms idle time), then sets a long idle time so that
// no pool thread leaves on its own during the test. Returns 1 if the pool emptied.
int DrainPool() {
  EXPECT_EQ(weft_blocking_limits(64, 1000000), 0);
  bool empty = YieldUntil([] { return weft_blocking_threads() == 0; });
  EXPECT_EQ(weft_blocking_limits(0, 3600ull * 1000000000ull), 0);
  return empty;
}

// The pool's defaults (weft/io.h), for the tests after these.
void RestorePoolDefaults() { EXPECT_EQ(weft_blocking_limits(64, 10000000000ull), 0); }

// Wire + unwire leaves the kernel thread in the pool; a second wire and then a
// weft_blocking job run on that same kernel thread (its tid), with no new thread; with
// a short idle time it leaves.
void *WiredTid(void *p) {
  auto *out = static_cast<long *>(p);
  if (weft_wire() != 0) return P(-1);
  out[0] = Tid();
  out[1] = weft_blocking_threads();
  out[2] = weft_is_wired();
  if (weft_unwire() != 0) return P(-2);
  return P(0);
}

TEST_F(WireTest, UnwiredKernelThreadStaysInThePoolAndIsReused) {
  ASSERT_EQ(InitWithVps(1), 0);
  ASSERT_TRUE(DrainPool());
  long vp_tid = Tid();
  long first[3] = {0, 0, 0}, second[3] = {0, 0, 0};
  EXPECT_EQ(RunInThread([&] { return WiredTid(first); }), P(0));
  EXPECT_EQ(first[2], 1);
  EXPECT_EQ(first[1], 1) << "the wire started one pool thread";
  EXPECT_NE(first[0], vp_tid);
  EXPECT_EQ(weft_blocking_threads(), 1) << "the kernel thread is kept after the unwire";
  EXPECT_EQ(RunInThread([&] { return WiredTid(second); }), P(0));
  EXPECT_EQ(second[0], first[0]) << "the second wire reused the kernel thread";
  EXPECT_EQ(second[1], 1) << "no new pool thread";
  // a weft_blocking job takes the same idle thread
  void *job_tid = nullptr;
  ASSERT_EQ(weft_blocking(+[](void *) -> void * { return P(Tid()); }, nullptr, &job_tid), 0);
  EXPECT_EQ(I(job_tid), first[0]);
  EXPECT_EQ(weft_blocking_threads(), 1);
  // the main weft thread wires onto it too
  ASSERT_EQ(weft_wire(), 0);
  EXPECT_EQ(Tid(), first[0]);
  ASSERT_EQ(weft_unwire(), 0);
  EXPECT_EQ(Tid(), vp_tid);
  // and it leaves after the idle time, like any pool thread
  EXPECT_EQ(weft_blocking_limits(0, 1000000), 0);
  EXPECT_TRUE(YieldUntil([] { return weft_blocking_threads() == 0; }));
  RestorePoolDefaults();
}

// A pool thread outlives the run that started it. A program that blocks a signal in
// its main thread before weft_init, to take it with signalfd (docs/limits.md), must
// find it blocked in every kernel thread weft runs, an idle pool thread of an earlier
// run too: that thread, which did not block it, took the signal, and the process died
// of it. (Not under TSan, whose one process runs every test of this file beside its own
// threads, nor under the emulator, which has threads of its own.)
TEST(PoolSignalMask, IdleThreadsOfAnEarlierRunTakeTheNewRunsMask) {
#if defined(WEFT_TEST_TSAN) || defined(WEFT_TEST_EMULATED)
  GTEST_SKIP() << "signals to the process reach threads that are not weft's here";
#endif
  ASSERT_EQ(InitWithVps(2), 0);
  void *r = nullptr;
  ASSERT_EQ(weft_blocking(+[](void *) -> void * { return P(1); }, nullptr, &r), 0);
  ASSERT_EQ(weft_shutdown(), 0);
  ASSERT_GE(weft_blocking_threads(), 1) << "a pool thread idles across the runs";
  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
  ASSERT_EQ(InitWithVps(2), 0);
  int sfd = signalfd(-1, &usr1, SFD_CLOEXEC);
  ASSERT_GE(sfd, 0);
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);  // without the fix: the process dies here
  pollfd p = {sfd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1);
  signalfd_siginfo si;
  ASSERT_EQ(read(sfd, &si, sizeof si), static_cast<ssize_t>(sizeof si));
  EXPECT_EQ(si.ssi_signo, static_cast<uint32_t>(SIGUSR1));
  close(sfd);
  EXPECT_EQ(weft_shutdown(), 0);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
}

// Many weft threads wire and unwire many times each, at 1 and 2 VPs: each sees itself
// wired (no VP, its own identity, a kernel thread no other wired thread holds at that
// moment) and back on a VP after; the pool never holds more threads than were wired
// at once.
struct Cycles {
  static constexpr int kThreads = 8;
  long rounds = 0;
  std::atomic<int> bad{0};
  std::atomic<long> holder[kThreads];  // tid each thread runs on while wired, else 0
  std::atomic<int> most_threads{0};
};

struct CycleArg {
  Cycles *c;
  int me;
};

void *CycleBody(void *p) {
  auto *a = static_cast<CycleArg *>(p);
  Cycles *c = a->c;
  weft_thread_t *me = weft_self();
  weft_local_set(p);
  for (long i = 0; i < c->rounds; i++) {
    if (weft_wire() != 0) {
      c->bad.fetch_add(1);
      continue;
    }
    long tid = Tid();
    c->holder[a->me].store(tid);
    for (int k = 0; k < Cycles::kThreads; k++)
      if (k != a->me && c->holder[k].load() == tid) c->bad.fetch_add(1);  // shared K
    if (weft_is_wired() != 1 || weft_vp_self() != -1 || weft_self() != me ||
        weft_local_get() != p)
      c->bad.fetch_add(1);
    int n = weft_blocking_threads(), m = c->most_threads.load();
    while (n > m && !c->most_threads.compare_exchange_weak(m, n)) {
    }
    if (i % 3 == 0) weft_yield();  // sched_yield on K
    c->holder[a->me].store(0);
    if (weft_unwire() != 0) c->bad.fetch_add(1);
    if (weft_is_wired() != 0 || weft_vp_self() < 0 || weft_self() != me) c->bad.fetch_add(1);
    if (i % 2 == 0) weft_yield();
  }
  return nullptr;
}

TEST_F(WireTest, ManyCyclesFromManyThreads) {
  for (int nvps : {1, 2}) {
    ASSERT_EQ(InitWithVps(nvps), 0);
    ASSERT_TRUE(DrainPool());
    Cycles c;
    c.rounds = Scaled(300, 10);
    for (auto &h : c.holder) h.store(0);
    CycleArg args[Cycles::kThreads];
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < Cycles::kThreads; i++) {
      args[i] = {&c, i};
      ts.push_back(Spawn(CycleBody, &args[i]));
    }
    for (auto *t : ts) EXPECT_EQ(weft_join(t, nullptr), 0);
    EXPECT_EQ(c.bad.load(), 0) << "nvps " << nvps;
    EXPECT_EQ(weft_wired_count(), 0);
    EXPECT_LE(c.most_threads.load(), Cycles::kThreads) << "nvps " << nvps;
    EXPECT_LE(weft_blocking_threads(), Cycles::kThreads) << "nvps " << nvps;
    EXPECT_GE(weft_blocking_threads(), 1) << "unwired kernel threads stay in the pool";
    ASSERT_EQ(weft_shutdown(), 0);
  }
  RestorePoolDefaults();
}

// Detached threads wire and unwire in a loop while main calls weft_shutdown at once:
// shutdown waits for them (a wired thread can run), returns 0, and leaves no thread
// wired; the next weft_init finds the pool's threads usable.
void *WireLoopDetached(void *p) {
  auto *bad = static_cast<std::atomic<int> *>(p);
  for (int i = 0; i < 20; i++) {
    if (weft_wire() != 0) bad->fetch_add(1);
    if (i % 4 == 0) usleep(100);  // a kernel sleep while wired
    if (weft_unwire() != 0) bad->fetch_add(1);
  }
  return nullptr;
}

TEST_F(WireTest, WiresRacingShutdown) {
  std::atomic<int> bad{0};
  for (int round = 0; round < Scaled(20, 3); round++) {
    for (int nvps : {1, 2}) {
      ASSERT_EQ(InitWithVps(nvps), 0);
      weft_attr_t a = DetachedAttr();
      for (int i = 0; i < 4; i++) {
        weft_thread_t *t = nullptr;
        ASSERT_EQ(weft_create(&t, &a, WireLoopDetached, &bad), 0);
      }
      if (round % 2) weft_yield();  // let some be wired already
      ASSERT_EQ(weft_shutdown(), 0) << "round " << round << " nvps " << nvps;
      EXPECT_EQ(weft_wired_count(), 0);
    }
  }
  EXPECT_EQ(bad.load(), 0);
}

// The pool at its limit (1 thread, busy with a weft_blocking job): a wire does not
// wait, it starts a thread past the limit (weft/wire.h). The wired thread does not take
// capacity from jobs: while it is wired, a second job runs on the limit's one thread.
// Once unwired, the pool shrinks back to its limit.
struct Full {
  std::atomic<int> job_running{0}, release{0};
  long job_tid = 0, wired_tid = 0, second_job_tid = 0;
  int threads_wired = 0;
  std::atomic<int> bad{0};
};

void *LongJob(void *p) {
  auto *f = static_cast<Full *>(p);
  f->job_tid = Tid();
  f->job_running.store(1);
  while (!f->release.load()) usleep(200);  // only the wired thread releases it
  return nullptr;
}

void *JobCaller(void *p) {
  auto *f = static_cast<Full *>(p);
  if (weft_blocking(LongJob, f, nullptr) != 0) f->bad.fetch_add(1);
  return nullptr;
}

void *SecondJobCaller(void *p) {
  auto *f = static_cast<Full *>(p);
  void *r = nullptr;
  if (weft_blocking(+[](void *) -> void * { return P(Tid()); }, nullptr, &r) != 0)
    f->bad.fetch_add(1);
  f->second_job_tid = I(r);
  return nullptr;
}

void *WireWhileFull(void *p) {
  auto *f = static_cast<Full *>(p);
  if (weft_wire() != 0) return P(-1);  // would wait forever for the busy thread if queued
  f->wired_tid = Tid();
  f->threads_wired = weft_blocking_threads();
  f->release.store(1);  // the job can end only because this thread runs
  // a job started now runs on the limit's thread, not behind this wired one; the
  // wired thread joins its caller from its kernel thread
  weft_thread_t *c = nullptr;
  if (weft_create(&c, nullptr, SecondJobCaller, f) != 0 || weft_join(c, nullptr) != 0)
    f->bad.fetch_add(1);
  if (weft_unwire() != 0) return P(-2);
  return P(0);
}

TEST_F(WireTest, WireWhileThePoolIsAtItsLimit) {
  for (int nvps : {1, 2}) {
    ASSERT_EQ(InitWithVps(nvps), 0);
    ASSERT_TRUE(DrainPool());
    ASSERT_EQ(weft_blocking_limits(1, 0), 0);
    Full f;
    weft_thread_t *jc = Spawn(JobCaller, &f);
    ASSERT_TRUE(YieldUntil([&] { return f.job_running.load() == 1; }));
    EXPECT_EQ(weft_blocking_threads(), 1);
    weft_thread_t *w = Spawn(WireWhileFull, &f);
    void *r = P(-3);
    EXPECT_EQ(weft_join(w, &r), 0);
    EXPECT_EQ(I(r), 0) << "nvps " << nvps;
    EXPECT_EQ(weft_join(jc, nullptr), 0);
    EXPECT_EQ(f.bad.load(), 0);
    EXPECT_EQ(f.threads_wired, 2) << "the wire started a thread past the limit";
    EXPECT_NE(f.wired_tid, f.job_tid);
    EXPECT_EQ(f.second_job_tid, f.job_tid) << "the job ran on the limit's thread";
    EXPECT_TRUE(YieldUntil([] { return weft_blocking_threads() == 1; }))
        << "above the limit once unwired, one thread leaves";
    EXPECT_EQ(weft_wired_count(), 0);
    ASSERT_EQ(weft_shutdown(), 0);
    RestorePoolDefaults();
  }
}

// A wired thread whose function returns without weft_unwire (undefined, weft/wire.h)
// is caught by a checked build with a message. The finish path read the missing VP
// first and the process died of SIGSEGV with nothing said.
TEST(WireDeathTest, ReturnFromAWiredThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse: a wired thread returned without weft_unwire",
    weft_thread_t *t = Spawn(+[](void *) -> void * {
      if (weft_wire() != 0) std::_Exit(3);
      return nullptr;
    });
    weft_join(t, nullptr));
}

}  // namespace
