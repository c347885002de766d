// tests/unit/monitor_test.cc - the system monitor (weft_config_t.monitor_us,
// weft_monitor_info): a thread that blocks in the kernel without telling weft (a
// plain read(2), usleep) does not keep the ready threads of its VP waiting.
//
// Every test runs under a watchdog (alarm): without the monitor the blocked VP's
// queue would wait for a call that only a queued thread can end, and the test would
// hang. No test asserts a time; examples/monitor_delay.c measures the delays.
#include "weft_test.h"

#include <weft/io.h>

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <chrono>
#include <vector>

using namespace weft_test;

namespace {

struct Watchdog {
  explicit Watchdog(unsigned seconds) { alarm(seconds); }
  ~Watchdog() { alarm(0); }
};

int InitMonitor(int nvps, int monitor_us) {
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps;
  cfg.monitor_us = monitor_us;
  return weft_init(&cfg);
}

class MonitorTest : public WeftTest {
 protected:
  void SetUp() override { unsetenv("WEFT_MONITOR"); }
  void TearDown() override {
    WeftTest::TearDown();
    unsetenv("WEFT_MONITOR");
  }
};

// Closed with weft_close (close() once weft is down): weft forgets what it cached of
// the descriptors, which a later pipe may reuse.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe(fd), 0); }
  ~Pipe() {
    weft_close(fd[0]);
    weft_close(fd[1]);
  }
};

// A plain read(2) of one byte: blocks the kernel thread, weft does not know.
void *Reader(void *p) {
  char c = 0;
  ssize_t n = read(static_cast<Pipe *>(p)->fd[0], &c, 1);
  return reinterpret_cast<void *>(static_cast<intptr_t>(n == 1 ? c : -1));
}

void *Writer(void *p) {
  char c = 'x';
  ssize_t n = write(static_cast<Pipe *>(p)->fd[1], &c, 1);
  return reinterpret_cast<void *>(static_cast<intptr_t>(n));
}

// The only VP's thread blocks in read() on a pipe; the main thread, ready behind
// it, must still run, and a thread it creates writes the byte that ends the read.
TEST_F(MonitorTest, OneVpBlockedReadLetsReadyThreadsRun) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  Pipe p;
  weft_thread_t *r = Spawn(Reader, &p);
  ASSERT_NE(r, nullptr);
  weft_yield();  // the reader runs and blocks the VP; we are queued behind it
  int vp = weft_vp_self();  // wherever we run now, it is VP 0 to the program
  EXPECT_EQ(vp, 0);
  weft_thread_t *w = Spawn(Writer, &p);
  ASSERT_NE(w, nullptr);
  void *res = nullptr;
  ASSERT_EQ(weft_join(w, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 1);
  ASSERT_EQ(weft_join(r, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x');
  weft_monitor_info_t mi;
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_EQ(mi.bound_us, 20);
  EXPECT_GE(mi.stalls, 1u);
  EXPECT_GE(mi.spares_started, 1u);
  EXPECT_GE(mi.spare_slots, 1);
}

// A thread that waits by yielding on a spare VP lets the stalled VP's other ready
// threads run: its yield takes the next of them (the spare took them only in its own
// loop, which a yielding thread never lets run, so the thread it waits for stayed
// queued behind the stalled VP for the whole blocking call; here, for ever: that
// thread is the one that ends the call).
std::atomic<int> g_spare_flag{0};
TEST_F(MonitorTest, YieldOnASpareRunsTheStalledVpsOtherThreads) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  static Pipe p;
  g_spare_flag = 0;
  // created in this order, they run in the reverse one (the newest first): r blocks
  // the only VP in read(), b goes to the spare and yields, c waits behind
  weft_thread_t *c = Spawn(+[](void *) -> void * {
    g_spare_flag = 1;
    return Writer(&p);
  });
  weft_thread_t *b = Spawn(+[](void *) -> void * {
    while (!g_spare_flag.load()) weft_yield();
    return nullptr;
  });
  weft_thread_t *r = Spawn(Reader, &p);
  void *res = nullptr;
  ASSERT_EQ(weft_join(c, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 1);
  ASSERT_EQ(weft_join(b, nullptr), 0);
  ASSERT_EQ(weft_join(r, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x');
}

// Synchronisation events counted while a thread runs on a spare VP are in
// weft_sync_stats (it summed the regular VPs only, and a timeout counted on the spare
// was lost: CondTest.StatsMove failed under TSan on a loaded machine). The reader
// blocks the only VP; the main thread, on a spare, times out in a condition wait.
TEST_F(MonitorTest, SyncStatsCountEventsOnSpares) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  weft_sync_stats_reset();
  Pipe p;
  weft_thread_t *r = Spawn(Reader, &p);
  ASSERT_NE(r, nullptr);
  weft_yield();  // the reader runs and blocks the VP; we go on on a spare
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  ASSERT_EQ(weft_mutex_lock(&m), 0);
  EXPECT_EQ(weft_cond_timedwait(&c, &m, weft_deadline_after(1000000)), WEFT_ETIMEDOUT);
  ASSERT_EQ(weft_mutex_unlock(&m), 0);
  weft_sync_stats_t st;
  weft_sync_stats(&st);
  weft_monitor_info_t mi;
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_GE(mi.spares_started, 1u);
  EXPECT_EQ(st.timeouts, 1u);
  char x = 'x';
  ASSERT_EQ(write(p.fd[1], &x, 1), 1);
  void *res = nullptr;
  ASSERT_EQ(weft_join(r, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x');
}

// The same with the main thread itself writing: it is the ready thread.
TEST_F(MonitorTest, OneVpMainWritesTheByte) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  Pipe p;
  weft_thread_t *r = Spawn(Reader, &p);
  ASSERT_NE(r, nullptr);
  weft_yield();  // the reader blocks the VP; we run again only on a spare
  char c = 'y';
  ASSERT_EQ(write(p.fd[1], &c, 1), 1);
  void *res = nullptr;
  ASSERT_EQ(weft_join(r, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'y');
}

// The only VP's thread wakes one thread and then blocks its kernel thread in a call
// weft is not told about. The woken thread sits in the VP's hand-off slot (the queue
// was empty), where the monitor did not look: it never ran during the call, and
// here, where only it can end the call, nothing ran again. With a semaphore, a
// mutex and a condition variable as the waking object.
struct SlotCase {
  int kind = 0;  // 0 semaphore, 1 mutex, 2 condition
  weft_sem_t s = WEFT_SEM_INIT(0);
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  bool go = false;  // m
  Pipe p;
};

void *SlotWaiter(void *arg) {
  auto *k = static_cast<SlotCase *>(arg);
  if (k->kind == 0) {
    weft_sem_wait(&k->s);
  } else if (k->kind == 1) {
    weft_mutex_lock(&k->m);  // blocks: the main thread holds it
    weft_mutex_unlock(&k->m);
  } else {
    weft_mutex_lock(&k->m);
    while (!k->go) weft_cond_wait(&k->c, &k->m);
    weft_mutex_unlock(&k->m);
  }
  char x = 'w';
  return reinterpret_cast<void *>(static_cast<intptr_t>(write(k->p.fd[1], &x, 1)));
}

TEST_F(MonitorTest, ThreadWokenJustBeforeTheVpBlocksRuns) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  for (int kind = 0; kind < 3; ++kind) {
    SlotCase k;
    k.kind = kind;
    if (kind == 1) {
      ASSERT_EQ(weft_mutex_lock(&k.m), 0);
    }
    weft_thread_t *w = Spawn(SlotWaiter, &k);
    ASSERT_NE(w, nullptr);
    if (kind == 0) {
      ASSERT_TRUE(WaitForWaiters(&k.s, 1));
      ASSERT_EQ(weft_sem_signal(&k.s), 0);
    } else if (kind == 1) {
      ASSERT_TRUE(WaitForWaiters(&k.m, 1));
      ASSERT_EQ(weft_mutex_unlock(&k.m), 0);
    } else {
      ASSERT_TRUE(WaitForWaiters(&k.c, 1));
      ASSERT_EQ(weft_mutex_lock(&k.m), 0);
      k.go = true;
      ASSERT_EQ(weft_cond_signal(&k.c), 0);
      ASSERT_EQ(weft_mutex_unlock(&k.m), 0);
    }
    char x = 0;
    ASSERT_EQ(read(k.p.fd[0], &x, 1), 1) << "kind " << kind;  // only the woken thread writes
    EXPECT_EQ(x, 'w');
    void *res = nullptr;
    ASSERT_EQ(weft_join(w, &res), 0);
    EXPECT_EQ(reinterpret_cast<intptr_t>(res), 1);
  }
}

// A thread left on a spare after the stall ended: the reader blocks the only VP,
// the main thread goes on on a spare (the only place left to it) and ends the read; once the VP has had time to
// run again and park (the stall is over, the spare takes no more), the main thread,
// still on the spare, creates a thread and spins until it has run, never coming back
// to the spare. The new thread is queued on the spare: the VP, idle again, must take
// it from there (a spare's queue is not a dead end), or the watchdog fires.
std::atomic<int> g_read_done{0}, g_marker_ran{0};

void *ReaderFlag(void *p) {
  void *r = Reader(p);
  g_read_done = 1;
  return r;
}

void *Marker(void *) {
  g_marker_ran = 1;
  return nullptr;
}

TEST_F(MonitorTest, ThreadQueuedOnASpareAfterTheStallRuns) {
  Watchdog wd(60);
  const int rounds = static_cast<int>(20 * Scale()) + 3;
  for (int i = 0; i < rounds; i++) {
    // a fresh start each round: the main thread begins on the VP, so the reader's
    // read leaves it only the spare to run on
    ASSERT_EQ(InitMonitor(1, 0), 0);
    g_read_done = 0;
    g_marker_ran = 0;
    Pipe p;
    weft_thread_t *r = Spawn(ReaderFlag, &p);
    ASSERT_NE(r, nullptr);
    weft_yield();  // the reader blocks the VP; we go on on a spare
    char c = 'z';
    ASSERT_EQ(write(p.fd[1], &c, 1), 1);
    while (!g_read_done) usleep(50);
    usleep(5000);  // the VP finishes the reader and parks; the monitor sees it
    weft_thread_t *m = Spawn(Marker, nullptr);
    ASSERT_NE(m, nullptr);
    while (!g_marker_ran) {
    }
    ASSERT_EQ(weft_join(m, nullptr), 0) << i;
    ASSERT_EQ(weft_join(r, nullptr), 0) << i;
    ASSERT_EQ(weft_shutdown(), 0) << i;
  }
}

struct Sleepers {
  std::atomic<int> done{0};
  int us;
};

// Threads that sleep in the kernel (usleep) on every VP, with many more threads
// than VPs; some of them also sleep with weft (timers that may be armed on a spare
// VP, which may have gone by the time they are due).
void *SleepyWorker(void *p) {
  auto *s = static_cast<Sleepers *>(p);
  for (int i = 0; i < 3; i++) {
    usleep(static_cast<useconds_t>(s->us));
    weft_sleep_ns(200000);
    weft_yield();
  }
  s->done.fetch_add(1);
  return nullptr;
}

TEST_F(MonitorTest, KernelSleepersOnEveryVpAllFinish) {
  Watchdog wd(120);
  for (int nvps : {1, 2}) {
    ASSERT_EQ(InitMonitor(nvps, 0), 0);
    Sleepers s;
    s.us = 2000;
    const int n = 16;
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < n; i++) ts.push_back(Spawn(SleepyWorker, &s));
    for (auto *t : ts) ASSERT_EQ(weft_join(t, nullptr), 0);
    EXPECT_EQ(s.done.load(), n);
    ASSERT_EQ(weft_shutdown(), 0) << nvps;
    EXPECT_EQ(weft_debug_live_blocks(), 0) << nvps;
  }
}

// Shutdown while a spare VP runs: the last thread's read ends just before the
// main thread shuts down; shutdown waits for it and stops the spare cleanly.
void *ReadThenSpin(void *p) {
  Reader(p);
  for (int i = 0; i < 100; i++) weft_yield();
  return nullptr;
}

TEST_F(MonitorTest, ShutdownWithSpareActive) {
  Watchdog wd(60);
  for (int round = 0; round < 5; round++) {
    ASSERT_EQ(InitMonitor(1, 0), 0);
    Pipe p;
    weft_thread_t *r = nullptr;
    ASSERT_EQ(weft_create(&r, nullptr, ReadThenSpin, &p), 0);
    ASSERT_EQ(weft_detach(r), 0);
    weft_yield();
    char c = 'z';
    ASSERT_EQ(write(p.fd[1], &c, 1), 1);
    ASSERT_EQ(weft_shutdown(), 0) << round;
    EXPECT_EQ(weft_debug_live_blocks(), 0) << round;
  }
}

// weft_shutdown called while the only other thread sleeps in an unannounced call
// and then blocks for good: the main thread goes on on a spare meanwhile, and must
// still see that nothing can run (WEFT_EBUSY), not wait for ever on the spare (it
// hung in about a third of the runs of a prober's program on a loaded machine). The
// reader here blocks the VP until the main thread, on the spare, writes the byte;
// then it waits on a condition nobody signals.
struct ReadThenWaitCase {
  Pipe p;
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  bool go = false;
};

void *ReadThenWait(void *a) {
  auto *k = static_cast<ReadThenWaitCase *>(a);
  Reader(&k->p);
  weft_mutex_lock(&k->m);
  while (!k->go) weft_cond_wait(&k->c, &k->m);
  weft_mutex_unlock(&k->m);
  return nullptr;
}

TEST_F(MonitorTest, ShutdownOnASpareSeesEveryThreadBlocked) {
  Watchdog wd(60);
  for (int round = 0; round < 3; round++) {
    ASSERT_EQ(InitMonitor(1, 0), 0);
    ReadThenWaitCase k;
    weft_thread_t *r = nullptr;
    ASSERT_EQ(weft_create(&r, nullptr, ReadThenWait, &k), 0);
    weft_yield();  // the reader blocks the VP in read(); we go on on a spare
    char x = 'x';
    ASSERT_EQ(write(k.p.fd[1], &x, 1), 1);
    EXPECT_EQ(weft_shutdown(), WEFT_EBUSY) << round;
    ASSERT_EQ(weft_mutex_lock(&k.m), 0);
    k.go = true;
    ASSERT_EQ(weft_cond_signal(&k.c), 0);
    ASSERT_EQ(weft_mutex_unlock(&k.m), 0);
    ASSERT_EQ(weft_join(r, nullptr), 0);
    ASSERT_EQ(weft_shutdown(), 0) << round;
  }
}

TEST_F(MonitorTest, ConfigAndEnvironment) {
  EXPECT_EQ(InitMonitor(1, -2), WEFT_EINVAL);
  EXPECT_EQ(InitMonitor(1, 1000001), WEFT_EINVAL);
  weft_monitor_info_t mi;
  EXPECT_EQ(weft_monitor_info(&mi), WEFT_ENOTINIT);
  ASSERT_EQ(InitMonitor(1, WEFT_MONITOR_OFF), 0);
  EXPECT_EQ(weft_monitor_info(nullptr), WEFT_EINVAL);
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_EQ(mi.bound_us, 0);
  EXPECT_EQ(mi.spare_slots, 0);
  ASSERT_EQ(weft_shutdown(), 0);
  ASSERT_EQ(InitMonitor(2, 500), 0);
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_EQ(mi.bound_us, 500);
  EXPECT_EQ(mi.spare_slots, 5);
  ASSERT_EQ(weft_shutdown(), 0);
  setenv("WEFT_MONITOR", "off", 1);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_EQ(mi.bound_us, 0);
  ASSERT_EQ(weft_shutdown(), 0);
  setenv("WEFT_MONITOR", "100", 1);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_EQ(mi.bound_us, 100);
}

// A timer left in the heap of a spare that has gone fires while the only VP is busy.
// The reader blocks the VP; the main thread, on a spare, creates a sleeper (a weft
// sleep: its timer is armed in the spare's heap) and ends the read. The reader then
// yields in a loop until the sleeper has woken, so the VP never idles (an idle VP
// polls the spares' heaps itself) and checks only its own heap at its switches; the
// spare's kernel thread leaves once the stall is over. Only the monitor fires that
// timer now: without it the reader's wait runs out and the round fails.
std::atomic<int> g_slept{0};

void *ShortSleeper(void *) {
  weft_sleep_ns(20 * 1000 * 1000);
  g_slept = 1;
  return nullptr;
}

void *ReadThenWaitForSleeper(void *p) {
  void *r = Reader(p);
  bool woke = YieldUntil([] { return g_slept.load() != 0; }, 20.0);
  return woke ? r : nullptr;
}

TEST_F(MonitorTest, TimerLeftOnASpareFiresWhileTheVpIsBusy) {
  Watchdog wd(120);
  const int rounds = static_cast<int>(10 * Scale()) + 2;
  for (int i = 0; i < rounds; i++) {
    ASSERT_EQ(InitMonitor(1, 0), 0);
    g_slept = 0;
    Pipe p;
    weft_thread_t *r = Spawn(ReadThenWaitForSleeper, &p);
    ASSERT_NE(r, nullptr);
    weft_yield();  // the reader blocks the VP; we go on on a spare
    weft_thread_t *s = Spawn(ShortSleeper, nullptr);
    ASSERT_NE(s, nullptr);
    weft_yield();  // the sleeper runs here and arms its timer in this spare's heap
    char c = 'q';
    ASSERT_EQ(write(p.fd[1], &c, 1), 1);
    void *res = nullptr;
    ASSERT_EQ(weft_join(r, &res), 0) << i;
    EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'q')
        << "round " << i << ": the sleeper's timer never fired while the VP was busy";
    ASSERT_EQ(weft_join(s, nullptr), 0) << i;
    ASSERT_EQ(weft_shutdown(), 0) << i;
  }
}

// The only VP's kernel thread sleeps in a plain read() that only a thread sleeping
// in weft will end: that thread's timer is in the blocked VP's own heap, which the VP
// checks only at its switches, and no VP is idle to check it. The monitor fires it;
// the woken thread is queued on the stalled VP, whose spare runs it, and it writes
// the byte the read waits for. Without that the read never returns (watchdog).
void *SleepThenWrite(void *p) {
  weft_sleep_ns(30 * 1000 * 1000);
  return Writer(p);
}

TEST_F(MonitorTest, TimerOfAVpBlockedInTheKernelFires) {
  Watchdog wd(60);
  for (int nvps : {1, 2}) {
    ASSERT_EQ(InitMonitor(nvps, 0), 0);
    Pipe p;
    std::vector<weft_thread_t *> ts;
    // with 2 VPs, one sleeper per VP; each writes one byte
    for (int i = 0; i < nvps; i++) ts.push_back(Spawn(SleepThenWrite, &p));
    weft_yield();  // the sleepers run and arm their timers (one VP: on ours)
    char c[2] = {0, 0};
    for (int i = 0; i < nvps; i++) ASSERT_EQ(read(p.fd[0], &c[i], 1), 1) << nvps;
    for (auto *t : ts) ASSERT_EQ(weft_join(t, nullptr), 0);
    EXPECT_EQ(c[0], 'x');
    ASSERT_EQ(weft_shutdown(), 0) << nvps;
  }
}

// The only VP's kernel thread sleeps in pthread_join (a call weft is not told of)
// while a weft thread is parked in weft_read; the joined OS thread writes what it
// reads and waits for its echo. No VP is idle to poll the engine: the monitor polls
// it, the reader is queued on the stalled VP, and its spare runs it. Under each
// engine this build and kernel offer; without the monitor's poll the join never
// returns (watchdog).
struct EchoPipes {
  Pipe in, out;
  char got = 0;
};

void *EchoOnce(void *p) {
  auto *e = static_cast<EchoPipes *>(p);
  char c = 0;
  if (weft_read(e->in.fd[0], &c, 1) != 1) return nullptr;
  return weft_write(e->out.fd[1], &c, 1) == 1 ? p : nullptr;
}

void *OsClient(void *p) {
  auto *e = static_cast<EchoPipes *>(p);
  usleep(10000);  // the VP's kernel thread is in pthread_join by now
  char c = 'e';
  if (write(e->in.fd[1], &c, 1) == 1 && read(e->out.fd[0], &c, 1) == 1) e->got = c;
  return nullptr;
}

TEST_F(MonitorTest, IoReadinessWhileTheOnlyVpIsBlockedInTheKernel) {
  Watchdog wd(60);
  for (const char *engine : {"epoll", "uring"}) {
    setenv("WEFT_IO", engine, 1);
    int rc = InitMonitor(1, 0);
    unsetenv("WEFT_IO");
    if (rc == WEFT_EINVAL || rc == WEFT_ESYS) continue;  // not in this build or kernel
    ASSERT_EQ(rc, 0) << engine;
    for (int round = 0; round < 3; round++) {
      EchoPipes e;
      weft_thread_t *t = Spawn(EchoOnce, &e);
      ASSERT_NE(t, nullptr);
      ASSERT_TRUE(YieldUntil([] { return weft_io_parked() == 1; }, 30)) << engine << " round " << round;
      pthread_t os;
      ASSERT_EQ(pthread_create(&os, nullptr, OsClient, &e), 0);
      pthread_join(os, nullptr);  // the VP's kernel thread sleeps here
      EXPECT_EQ(e.got, 'e') << engine << " round " << round;
      void *r = nullptr;
      ASSERT_EQ(weft_join(t, &r), 0);
      EXPECT_EQ(r, &e) << engine;
    }
    ASSERT_EQ(weft_shutdown(), 0) << engine;
  }
}

// A spare whose own thread blocks in the kernel while its VP is still stalled: the
// only VP's kernel thread waits in pthread_join; T, on a spare, creates H and blocks
// in a plain read that only H ends; H runs on a second spare (standing in for the
// first) and sleeps in weft, so its timer, fired by the monitor, makes it ready on the
// VP, whose spare takes nothing now. Another spare must stand in for the VP, or H,
// and so T and the joined OS thread, wait for the join: a deadlock the OS thread
// breaks only at its 10 s timeout, which fails the test.
struct SpareChain {
  Pipe t_in;    // T reads, H writes
  Pipe os_in;   // the OS thread waits, T writes
  std::atomic<int> os_timed_out{0};
};

void *ChainH(void *p) {
  weft_sleep_ns(2 * 1000 * 1000);
  char c = 'h';
  return write(static_cast<SpareChain *>(p)->t_in.fd[1], &c, 1) == 1 ? p : nullptr;
}

void *ChainT(void *p) {
  auto *s = static_cast<SpareChain *>(p);
  weft_thread_t *h = nullptr;
  if (weft_create(&h, nullptr, ChainH, p) != 0) return nullptr;
  char c = 0;
  ssize_t n = read(s->t_in.fd[0], &c, 1);  // unannounced: this spare stalls
  char d = 't';
  if (write(s->os_in.fd[1], &d, 1) != 1) return nullptr;
  void *hr = nullptr;
  weft_join(h, &hr);
  return n == 1 && c == 'h' && hr == p ? p : nullptr;
}

void *ChainOs(void *p) {
  auto *s = static_cast<SpareChain *>(p);
  struct pollfd pf = {s->os_in.fd[0], POLLIN, 0};
  if (poll(&pf, 1, 10000) != 1) s->os_timed_out = 1;
  return nullptr;
}

TEST_F(MonitorTest, ThreadReadyOnAVpWhoseSpareIsBlockedToo) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  for (int round = 0; round < 2; round++) {
    SpareChain s;
    weft_thread_t *t = Spawn(ChainT, &s);
    ASSERT_NE(t, nullptr);
    pthread_t os;
    ASSERT_EQ(pthread_create(&os, nullptr, ChainOs, &s), 0);
    pthread_join(os, nullptr);  // the VP's kernel thread sleeps here
    EXPECT_EQ(s.os_timed_out.load(), 0) << "round " << round << ": H never ran while T blocked";
    void *r = nullptr;
    ASSERT_EQ(weft_join(t, &r), 0);
    EXPECT_EQ(r, &s) << round;
  }
}

// Rounds in which the thread that runs on a spare blocks in the kernel too (a spare
// for the spare), and the VP it stood in for runs again meanwhile: every thread
// made ready on a spare comes back to a VP that runs it (a lost one would leave
// the main thread blocked: the deadlock report aborts, or the watchdog fires).
void *Nap(void *p) {
  usleep(static_cast<useconds_t>(*static_cast<int *>(p)));
  return nullptr;
}

struct Late {
  weft_sem_t sem;
  std::atomic<int> in{0};
};

void *SemWaiter(void *p) {
  weft_sem_wait(&static_cast<Late *>(p)->sem);
  return nullptr;
}

void *NapFlag(void *p) {
  static_cast<Late *>(p)->in = 1;
  usleep(500);
  return nullptr;
}

void *Signal(void *p) {
  auto *l = static_cast<Late *>(p);
  while (!l->in) usleep(20);
  usleep(150);
  weft_sem_signal(&l->sem);
  return nullptr;
}

TEST_F(MonitorTest, BlockedThreadsOnSparesAreNeverLost) {
  Watchdog wd(120);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  int us = 500;
  const int rounds = static_cast<int>(60 * Scale()) + 10;
  for (int i = 0; i < rounds; i++) {
    weft_thread_t *b = Spawn(Nap, &us);
    weft_yield();  // b blocks whatever VP we are on; we go on on a spare
    ASSERT_EQ(weft_join(b, nullptr), 0) << i;
  }
  Late l;
  ASSERT_EQ(weft_sem_init(&l.sem, 0), 0);
  for (int i = 0; i < rounds; i++) {
    l.in = 0;
    weft_thread_t *b = Spawn(NapFlag, &l);
    weft_thread_t *w = Spawn(SemWaiter, &l);  // runs first, waits on the semaphore
    pthread_t os;
    ASSERT_EQ(pthread_create(&os, nullptr, Signal, &l), 0);
    ASSERT_EQ(weft_join(b, nullptr), 0) << i;
    ASSERT_EQ(weft_join(w, nullptr), 0) << i;
    pthread_join(os, nullptr);
  }
  EXPECT_EQ(weft_sem_destroy(&l.sem), 0);
}

// A spare whose own thread sleeps in a call, with nothing queued behind it, is no
// reason to look every half bound: nothing can be queued on a spare but by the
// spare itself or the monitor. The only VP blocks in r1's read; the main thread goes
// on on a spare, where r2 blocks that spare's kernel thread while main waits in
// weft_join. Served and asleep with an empty queue, nothing is at risk, and the
// monitor backs off (weft_monitor_info().period_ns grows past half the bound). It
// stayed at half the bound: the monitor woke every 10 us for as long as the calls
// lasted, and the kernel kept two busy VPs on one CPU beside the CPU its wake-ups
// kept from looking idle (row I3, "unannounced", took twice as long in some runs).
struct BackOff {
  Pipe p1, p2;
  std::atomic<int> r2_in{0}, backed_off{0};
  unsigned long long fast_ns = 0;
};

void *ReaderFlagged(void *p) {
  auto *b = static_cast<BackOff *>(p);
  b->r2_in = 1;
  return Reader(&b->p2);
}

void *WatchPeriod(void *p) {
  auto *b = static_cast<BackOff *>(p);
  while (!b->r2_in) usleep(1000);
  usleep(20000);  // r2 is in its read: the monitor has seen the spare asleep
  weft_monitor_info_t mi;
  for (int i = 0; i < 20000 && !b->backed_off; i++) {  // 20 s at most
    if (weft_monitor_info(&mi) == 0 && mi.period_ns > b->fast_ns)
      b->backed_off = 1;
    else
      usleep(1000);
  }
  char c = 'x';  // end both calls, r2's first
  if (write(b->p2.fd[1], &c, 1) != 1 || write(b->p1.fd[1], &c, 1) != 1) b->backed_off = -1;
  return nullptr;
}

TEST_F(MonitorTest, SpareAsleepInACallWithNothingQueuedLetsTheMonitorBackOff) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  BackOff b;
  weft_monitor_info_t mi;
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  b.fast_ns = static_cast<unsigned long long>(mi.bound_us) * 1000u / 2u;
  weft_thread_t *r1 = Spawn(Reader, &b.p1);
  ASSERT_NE(r1, nullptr);
  weft_yield();  // r1 runs and blocks the only VP; we go on on a spare
  weft_thread_t *r2 = Spawn(ReaderFlagged, &b);  // on the spare's queue
  ASSERT_NE(r2, nullptr);
  pthread_t os;
  ASSERT_EQ(pthread_create(&os, nullptr, WatchPeriod, &b), 0);
  void *res = nullptr;
  ASSERT_EQ(weft_join(r2, &res), 0);  // r2 blocks the spare meanwhile
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x');
  ASSERT_EQ(weft_join(r1, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x');
  pthread_join(os, nullptr);
  EXPECT_EQ(b.backed_off.load(), 1) << "the monitor kept looking every half bound";
}

// One VP (nvps + 3 = 4 spare slots). The main thread and two readers each block in a
// plain read(2), and each reader first creates a child, queued behind it on the spare
// that runs it: that spare, stalled with a thread queued, gets a stand-in of its own,
// which runs the child. The stand-in must then give its slot back: three stand-ins
// idling beside three blocked spares held every slot, and the writers queued on the
// only VP (each sleeps first: the monitor fires its timer and queues it there) never
// ran, so nothing ended the reads (the watchdog fired in 19 of 20 runs).
struct Trio {
  Pipe p[3];
};

void *Child(void *p) { return p; }

void *ReaderWithChild(void *p) {
  weft_thread_t *c = nullptr;
  if (weft_create(&c, nullptr, Child, p) != 0) return reinterpret_cast<void *>(intptr_t{-2});
  char ch = 0;
  ssize_t n = read(static_cast<Pipe *>(p)->fd[0], &ch, 1);  // unannounced: blocks the spare
  void *r = nullptr;
  if (weft_join(c, &r) != 0 || r != p) return reinterpret_cast<void *>(intptr_t{-3});
  return reinterpret_cast<void *>(static_cast<intptr_t>(n == 1 ? ch : -1));
}

TEST_F(MonitorTest, StandInsForSparesWithNothingQueuedGiveTheirSlotsBack) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  const int rounds = static_cast<int>(Scaled(5, 2));
  for (int round = 0; round < rounds; round++) {
    Trio t;
    weft_thread_t *w[3], *r[2];
    for (int k = 0; k < 3; k++) ASSERT_NE(w[k] = Spawn(SleepThenWrite, &t.p[k]), nullptr);  // 30 ms
    for (int k = 0; k < 2; k++) ASSERT_NE(r[k] = Spawn(ReaderWithChild, &t.p[k + 1]), nullptr);
    char ch = 0;
    ASSERT_EQ(read(t.p[0].fd[0], &ch, 1), 1);  // the main thread blocks the only VP
    for (int k = 0; k < 2; k++) {
      void *res = nullptr;
      ASSERT_EQ(weft_join(r[k], &res), 0);
      EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x') << "round " << round << " reader " << k;
    }
    for (int k = 0; k < 3; k++) {
      void *res = nullptr;
      ASSERT_EQ(weft_join(w[k], &res), 0);
      EXPECT_EQ(reinterpret_cast<intptr_t>(res), 1) << "round " << round << " writer " << k;
    }
  }
}

// The descriptors of the program's table that name a /proc stat file.
int StatFilesOpen() {
  return FdsWhoseTarget(
      [](const char *t) { return strncmp(t, "/proc/", 6) == 0 && strstr(t, "/stat") != nullptr; });
}

// The monitor's reads of /proc stat files (a VP's kernel thread asleep in a call or
// only kept off its CPU; the deadlock check's count of kernel threads) take no number
// of the program's descriptor table. An open there took the lowest free number for a
// moment, one the program had just closed while its other threads still read it: a
// weft_pread after a weft_close then read a spare's stat file, and failed with ESRCH
// once that kernel thread had gone. Checked here on what lasts: the stat files kept
// open for the VPs and a spare, while the spare runs and after.
TEST_F(MonitorTest, StatFilesTakeNoDescriptorOfTheProgram) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  Pipe p;
  weft_thread_t *r = Spawn(Reader, &p);
  ASSERT_NE(r, nullptr);
  weft_yield();  // the reader blocks the VP; a spare runs us
  usleep(20000);  // unannounced too: the monitor looks closely at both kernel threads
  weft_monitor_info_t mi;
  ASSERT_EQ(weft_monitor_info(&mi), 0);
  EXPECT_GE(mi.spares_started, 1u);
  EXPECT_EQ(StatFilesOpen(), 0) << "while a spare runs";
  weft_thread_t *w = Spawn(Writer, &p);
  ASSERT_NE(w, nullptr);
  void *res = nullptr;
  ASSERT_EQ(weft_join(w, &res), 0);
  ASSERT_EQ(weft_join(r, &res), 0);
  EXPECT_EQ(reinterpret_cast<intptr_t>(res), 'x');
  EXPECT_EQ(StatFilesOpen(), 0) << "after the stall";
}

// One VP. A thread loops on usleep() (each call a stall) and two threads compute and
// yield to each other: on the spare standing in for the VP they keep its queue full,
// and a spare took from the stalled VP only with its own queue empty, so the main
// thread, made ready on the VP when its sleep ended, never ran again (10 of 10 runs
// hung). The monitor now hands a spare that runs but takes nothing the VP's front.
std::atomic<int> g_loop_stop{0};

void *UsleepLoop(void *) {
  while (!g_loop_stop.load()) usleep(1000);
  return nullptr;
}

void *ComputeAndYield(void *) {
  volatile long x = 0;
  while (!g_loop_stop.load()) {
    for (int i = 0; i < 10000; i++) x = x + i;
    weft_yield();
  }
  return nullptr;
}

TEST_F(MonitorTest, ThreadsYieldingOnASpareDoNotStarveTheStalledVpsQueue) {
  Watchdog wd(60);
  ASSERT_EQ(InitMonitor(1, 0), 0);
  g_loop_stop = 0;
  weft_thread_t *b = Spawn(UsleepLoop, nullptr);
  weft_thread_t *y1 = Spawn(ComputeAndYield, nullptr);
  weft_thread_t *y2 = Spawn(ComputeAndYield, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(y1, nullptr);
  ASSERT_NE(y2, nullptr);
  EXPECT_EQ(weft_sleep_ns(100000000), 0);  // ends on the stalled VP's queue
  g_loop_stop = 1;
  Join(b);
  Join(y1);
  Join(y2);
}

// More threads looping on unannounced calls than the VP and its spare slots: the
// threads queued on the VP wait until one of those calls returns. weft says so once on
// stderr (it hung silently). The child's stderr goes through a pipe that a plain OS
// thread reads: once the message has come it is passed on and the loops end (after
// 20 s without it they end anyway, and the test fails on the missing message).
int g_stderr_saved = -1;
int g_stderr_pipe = -1;

void *EndLoopsOnTheMessage(void *) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got.find("no spare VP") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    struct pollfd p = {g_stderr_pipe, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[512];
    ssize_t n = read(g_stderr_pipe, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  if (write(g_stderr_saved, got.data(), got.size()) < 0) std::_Exit(8);
  g_loop_stop = 1;
  return nullptr;
}

void SlotsAllTaken() {
  alarm(60);
  int p[2];
  if (pipe(p) != 0) std::_Exit(2);
  g_stderr_saved = dup(2);
  g_stderr_pipe = p[0];
  if (g_stderr_saved < 0 || dup2(p[1], 2) < 0) std::_Exit(2);
  close(p[1]);
  if (InitMonitor(1, 0) != 0) std::_Exit(3);
  weft_monitor_info_t mi;
  if (weft_monitor_info(&mi) != 0) std::_Exit(4);
  g_loop_stop = 0;
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < mi.spare_slots + 1; i++) ts.push_back(Spawn(UsleepLoop, nullptr));
  pthread_t os;
  if (pthread_create(&os, nullptr, EndLoopsOnTheMessage, nullptr) != 0) std::_Exit(5);
  if (weft_sleep_ns(1000000) != 0) std::_Exit(6);
  for (auto *t : ts) Join(t);
  pthread_join(os, nullptr);
  std::_Exit(weft_shutdown() == 0 ? 0 : 7);
}

TEST_F(MonitorTest, NoSpareLeftIsSaidOnce) {
#ifdef WEFT_TEST_TSAN
  GTEST_SKIP() << "death tests fork; TSan's runtime thread makes that unreliable";
#endif
  SetDeathTestStyle();
  EXPECT_EXIT(SlotsAllTaken(), ::testing::ExitedWithCode(0),
              "weft: the system monitor has had no spare VP for VP 0 for 100 ms");
}

}  // namespace
