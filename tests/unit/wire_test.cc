// tests/unit/wire_test.cc - wiring (weft/wire.h): a wired thread blocked in read() on
// a pipe does not stall its VP (one VP: another weft thread on it still runs and
// writes to the pipe); a wired thread keeps its identity (weft_self, keys, the local
// pointer) and uses mutexes, conditions and joins with threads on VPs; a mutex held
// across wire/unwire; weft_exit and weft_shutdown of wired threads; errors.
#include <fcntl.h>
#include <unistd.h>

#include <thread>

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

}  // namespace
