// tests/unit/handoff_test.cc - hand-off on wake (docs/design.md "Hand-off on wake"):
// a thread woken while its waker's dispatch queue is empty waits in the VP's
// hand-off slot and runs at the waker's next switch without a trip through the
// queue. These tests check what must hold whatever the slot does:
//   - a yield runs the woken thread (the slot is the queue's front), also after a
//     thread was created beside it;
//   - FIFO fairness: a yielding thread is not starved by a pair that wake each
//     other in turn (semaphores, condition variables);
//   - a waker that keeps running (spins) at 2 VPs does not strand the woken thread:
//     the idle VP takes it (the slot is stealable);
//   - a thread that creates and joins in a loop (each finish hands the VP straight
//     to its joiner) does not starve a thread woken by a timer or a yielding one;
//   - weft_shutdown runs a thread left in the slot;
//   - ping-pong pairs at 1, 2 and 4 VPs lose no wake-up and never run a thread
//     on two VPs at once.
// Every wait is bounded (a watchdog, timed predicates), so a regression fails.
#include <atomic>

#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class HandoffOneVp : public SyncOneVpTest {};

struct Flagged {
  weft_sem_t s = WEFT_SEM_INIT(0);
  std::atomic<int> flag{0};
};

void *wait_then_flag(void *a) {
  auto *f = static_cast<Flagged *>(a);
  EXPECT_EQ(weft_sem_wait(&f->s), 0);
  f->flag.store(1);
  return nullptr;
}

// The waker wakes B with an empty queue (B goes to the slot), then yields until B
// has run: the yield must switch to B although the dispatch queue is empty.
TEST_F(HandoffOneVp, YieldRunsWokenThread) {
  Flagged f;
  weft_thread_t *b = Spawn(wait_then_flag, &f);
  ASSERT_TRUE(WaitForWaiters(&f.s, 1));
  ASSERT_EQ(weft_sem_signal(&f.s), 0);
  EXPECT_TRUE(YieldUntil([&] { return f.flag.load() == 1; }, 10.0))
      << "a yield never ran the thread the caller had just woken";
  Join(b);
  EXPECT_EQ(weft_sem_destroy(&f.s), 0);
}

// The same with a thread created between the wake and the yields: the creation
// pushes at the front of the queue, the woken thread must not be passed over by
// the two threads yielding to each other.
TEST_F(HandoffOneVp, YieldersDoNotPassOverWokenThread) {
  Flagged f;
  weft_thread_t *b = Spawn(wait_then_flag, &f);
  ASSERT_TRUE(WaitForWaiters(&f.s, 1));
  ASSERT_EQ(weft_sem_signal(&f.s), 0);
  auto yielder = [&] {
    YieldUntil([&] { return f.flag.load() == 1; }, 10.0);
    return nullptr;
  };
  weft_thread_t *c = SpawnCall(&yielder);
  EXPECT_TRUE(YieldUntil([&] { return f.flag.load() == 1; }, 10.0))
      << "two yielding threads kept the woken thread from running";
  Join(c);
  Join(b);
  EXPECT_EQ(weft_sem_destroy(&f.s), 0);
}

// A ping-pong pair and a thread that yields in a loop, on one VP: the woken thread
// of each half-round goes behind the yielder (it is in the queue), so the yielder
// runs about twice per round. Fails if woken threads ran ahead of ready ones.
struct Fairness {
  long rounds = 0;
  std::atomic<int> stop{0};
  std::atomic<long> yields{0};
  long yields_during = -1;
};

void *yield_loop(void *a) {
  auto *x = static_cast<Fairness *>(a);
  while (!x->stop.load()) {
    x->yields.fetch_add(1);
    weft_yield();
  }
  return nullptr;
}

struct SemPair : Fairness {
  weft_sem_t s1 = WEFT_SEM_INIT(0), s2 = WEFT_SEM_INIT(0);
};

TEST_F(HandoffOneVp, SemPingPongDoesNotStarveYielder) {
  SemPair x;
  x.rounds = Scaled(2000, 100);
  auto b = [&] {
    for (long i = 0; i < x.rounds; i++) {
      weft_sem_wait(&x.s1);
      weft_sem_signal(&x.s2);
    }
    return nullptr;
  };
  auto a = [&] {
    long y0 = x.yields.load();
    for (long i = 0; i < x.rounds; i++) {
      weft_sem_signal(&x.s1);
      weft_sem_wait(&x.s2);
    }
    x.yields_during = x.yields.load() - y0;
    return nullptr;
  };
  weft_thread_t *tb = SpawnCall(&b);
  weft_thread_t *ty = Spawn(yield_loop, &x);
  ASSERT_TRUE(WaitForWaiters(&x.s1, 1));
  weft_thread_t *ta = SpawnCall(&a);
  Join(ta);
  Join(tb);
  x.stop.store(1);
  Join(ty);
  EXPECT_GE(x.yields_during, x.rounds) << "the yielding thread was starved by the pair";
  EXPECT_EQ(weft_sem_destroy(&x.s1), 0);
  EXPECT_EQ(weft_sem_destroy(&x.s2), 0);
}

struct CondPair : Fairness {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  int turn = 0;
};

void cond_pass(CondPair *x, int me) {
  weft_mutex_lock(&x->m);
  while (x->turn != me) weft_cond_wait(&x->c, &x->m);
  x->turn = 1 - me;
  weft_cond_signal(&x->c);
  weft_mutex_unlock(&x->m);
}

TEST_F(HandoffOneVp, CondPingPongDoesNotStarveYielder) {
  CondPair x;
  x.rounds = Scaled(2000, 100);
  auto b = [&] {
    for (long i = 0; i < x.rounds; i++) cond_pass(&x, 1);
    return nullptr;
  };
  auto a = [&] {
    long y0 = x.yields.load();
    for (long i = 0; i < x.rounds; i++) cond_pass(&x, 0);
    x.yields_during = x.yields.load() - y0;
    return nullptr;
  };
  weft_thread_t *ty = Spawn(yield_loop, &x);
  weft_thread_t *tb = SpawnCall(&b);
  weft_thread_t *ta = SpawnCall(&a);
  Join(ta);
  Join(tb);
  x.stop.store(1);
  Join(ty);
  EXPECT_GE(x.yields_during, x.rounds) << "the yielding thread was starved by the pair";
  EXPECT_EQ(weft_cond_destroy(&x.c), 0);
  EXPECT_EQ(weft_mutex_destroy(&x.m), 0);
}

// Shutdown with a woken thread still in the slot: weft_shutdown must run it.
// A create + join loop hands the VP from each finishing child straight to the loop
// (the joiner): it once did so for ever, passing every thread queued behind, so a
// sleeper woken by its timer and a yielder never ran again on the only VP (the
// watchdog ends that). Now one hand-off in so many lets a queued thread that has run
// before go first.
std::atomic<int> g_loop_stop{0};
std::atomic<long> g_loops{0};
void *create_join_loop(void *) {
  while (!g_loop_stop.load()) {
    weft_thread_t *t = nullptr;
    if (weft_create(&t, nullptr, [](void *p) -> void * { return p; }, nullptr) != 0 ||
        weft_join(t, nullptr) != 0)
      return P(1);
    g_loops++;
  }
  return nullptr;
}
TEST_F(HandoffOneVp, CreateJoinLoopDoesNotStarveSleeperOrYielder) {
  for (int yielder = 0; yielder < 2; yielder++) {
    g_loop_stop = 0;
    g_loops = 0;
    weft_thread_t *loop = Spawn(create_join_loop, nullptr);
    // let the loop get going, then wait in a way that needs the VP back from it
    while (g_loops.load() < 100) weft_yield();
    if (yielder) {
      for (int k = 0; k < 1000; k++) weft_yield();
    } else {
      EXPECT_EQ(weft_sleep_ns(2000000), 0);
    }
    g_loop_stop = 1;
    EXPECT_EQ(Join(loop), nullptr);
  }
}

TEST_F(HandoffOneVp, ShutdownRunsWokenThread) {
  static Flagged f;  // outlives the detached thread
  f.flag.store(0);
  weft_attr_t attr = DetachedAttr();
  ASSERT_EQ(weft_create(nullptr, &attr, wait_then_flag, &f), 0);
  ASSERT_TRUE(WaitForWaiters(&f.s, 1));
  ASSERT_EQ(weft_sem_signal(&f.s), 0);
  EXPECT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(f.flag.load(), 1);
}

// Two VPs: the waker spins (never switches) until the woken thread has run. The
// woken thread sits in the waker's VP's slot; the other VP must take it.
class HandoffTwoVps : public WeftTest {
 protected:
  void SetUp() override { StartWeft(2); }
  Watchdog watchdog_;
};

TEST_F(HandoffTwoVps, SpinningWakerDoesNotStrandWokenThread) {
  for (int rep = 0; rep < 20; rep++) {
    Flagged f;
    weft_thread_t *b = Spawn(wait_then_flag, &f);
    ASSERT_TRUE(WaitForWaiters(&f.s, 1));
    ASSERT_EQ(weft_sem_signal(&f.s), 0);
    ASSERT_TRUE(SpinUntil([&] { return f.flag.load() == 1; }, 20.0))
        << "rep " << rep << ": the woken thread never ran while its waker spun";
    Join(b);
    EXPECT_EQ(weft_sem_destroy(&f.s), 0);
  }
}

// Ping-pong pairs (semaphores, condition variables, mutexes taken hand over hand
// by the waker) at 1, 2 and 4 VPs: every round is counted exactly once, and a
// thread is never resumed twice at the same time (each thread's `inside` word).
class HandoffVps : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(HandoffVps);

struct Pair {
  weft_sem_t s1 = WEFT_SEM_INIT(0), s2 = WEFT_SEM_INIT(0);
  CondPair cp;
  long rounds = 0;
  std::atomic<long> a_done{0}, b_done{0};
  std::atomic<int> inside_a{0}, inside_b{0};
  std::atomic<long> overlaps{0};
};

void enter(Pair *p, std::atomic<int> *in) {
  if (in->fetch_add(1) != 0) p->overlaps.fetch_add(1);
}
void leave(std::atomic<int> *in) { in->fetch_sub(1); }

TEST_P(HandoffVps, PairsLoseNothingAndNeverRunTwice) {
  const int npairs = 4;
  const long rounds = Scaled(3000, 100);
  std::vector<Pair> pairs(npairs);
  std::vector<weft_thread_t *> ts;
  for (auto &p : pairs) {
    p.rounds = rounds;
    auto *pp = &p;
    ts.push_back(Spawn(+[](void *v) -> void * {
      auto *p = static_cast<Pair *>(v);
      for (long i = 0; i < p->rounds; i++) {
        weft_sem_wait(&p->s1);
        enter(p, &p->inside_b);
        p->b_done.fetch_add(1);
        leave(&p->inside_b);
        weft_sem_signal(&p->s2);
        cond_pass(&p->cp, 1);
      }
      return nullptr;
    }, pp));
    ts.push_back(Spawn(+[](void *v) -> void * {
      auto *p = static_cast<Pair *>(v);
      for (long i = 0; i < p->rounds; i++) {
        weft_sem_signal(&p->s1);
        weft_sem_wait(&p->s2);
        enter(p, &p->inside_a);
        if (p->b_done.load() != i + 1) p->overlaps.fetch_add(1);  // strict alternation
        p->a_done.fetch_add(1);
        leave(&p->inside_a);
        cond_pass(&p->cp, 0);
      }
      return nullptr;
    }, pp));
  }
  for (weft_thread_t *t : ts) Join(t);
  for (auto &p : pairs) {
    EXPECT_EQ(p.a_done.load(), rounds);
    EXPECT_EQ(p.b_done.load(), rounds);
    EXPECT_EQ(p.overlaps.load(), 0);
    EXPECT_EQ(weft_sem_value(&p.s1), 0);
    EXPECT_EQ(weft_sem_value(&p.s2), 0);
  }
}

}  // namespace
