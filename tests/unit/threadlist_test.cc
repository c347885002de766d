// tests/unit/threadlist_test.cc - first-class thread lists (weft/threadlist.h):
// FIFO, LIFO and a user-defined priority list used as a bundle's run list
// (weft_sched_threadlist) and as the wait list of a semaphore built on
// weft_threadlist_yield_onto, plus yield onto a list, at 1, 2 and 4 VPs.
#include <weft/threadlist.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "weft_test.h"

using namespace weft_test;

namespace {

// ---- a user-defined policy: highest priority first, FIFO among equals ----------
// Link space: word 0 = next, word 1 = priority. The priority of a thread comes from
// a test-side table, read by put under the list's lock.
SpinLock g_prio_lock;
std::map<weft_thread_t *, int> g_prio;  // under g_prio_lock
std::atomic<int> g_create_prio{0};      // the priority of threads being created

int PrioOf(weft_thread_t *t) {
  g_prio_lock.lock();
  auto it = g_prio.find(t);
  int p = it == g_prio.end() ? g_create_prio.load() : it->second;
  g_prio_lock.unlock();
  return p;
}
void SetPrio(weft_thread_t *t, int p) {
  g_prio_lock.lock();
  g_prio[t] = p;
  g_prio_lock.unlock();
}

struct PrioHead {
  weft_thread_t *head = nullptr;
};

void PrioPut(weft_threadlist_t *l, weft_thread_t *t) {
  auto *h = static_cast<PrioHead *>(weft_threadlist_data(l));
  auto *link = static_cast<uintptr_t *>(weft_threadlist_link(t));
  link[1] = static_cast<uintptr_t>(PrioOf(t));
  weft_thread_t **pp = &h->head;
  while (*pp) {
    auto *ln = static_cast<uintptr_t *>(weft_threadlist_link(*pp));
    if (static_cast<int>(ln[1]) < static_cast<int>(link[1])) break;
    pp = reinterpret_cast<weft_thread_t **>(&ln[0]);
  }
  link[0] = reinterpret_cast<uintptr_t>(*pp);
  *pp = t;
}

weft_thread_t *PrioGet(weft_threadlist_t *l) {
  auto *h = static_cast<PrioHead *>(weft_threadlist_data(l));
  weft_thread_t *t = h->head;
  if (t) h->head = reinterpret_cast<weft_thread_t *>(static_cast<uintptr_t *>(weft_threadlist_link(t))[0]);
  return t;
}

const weft_threadlist_ops_t kPrioOps = {2 * sizeof(uintptr_t), PrioPut, PrioGet};

enum Policy { FIFO, LIFO, PRIO };
const char *PolicyName(Policy p) { return p == FIFO ? "fifo" : p == LIFO ? "lifo" : "prio"; }

// A list of the given policy (priority lists get a PrioHead as data).
struct List {
  weft_threadlist_t *l = nullptr;
  PrioHead head;
  explicit List(Policy p) {
    const weft_threadlist_ops_t *ops = p == FIFO ? &weft_threadlist_fifo
                                       : p == LIFO ? &weft_threadlist_lifo
                                                   : &kPrioOps;
    EXPECT_EQ(weft_threadlist_create(&l, ops, &head), 0);
  }
  ~List() { EXPECT_EQ(weft_threadlist_destroy(l), 0); }
};

// ---- errors ------------------------------------------------------------------------

TEST(ThreadListApi, Errors) {
  weft_threadlist_t *l = nullptr;
  EXPECT_EQ(weft_threadlist_create(nullptr, &weft_threadlist_fifo, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_threadlist_create(&l, nullptr, nullptr), WEFT_EINVAL);
  weft_threadlist_ops_t bad = {8, PrioPut, nullptr};
  EXPECT_EQ(weft_threadlist_create(&l, &bad, nullptr), WEFT_EINVAL);
  bad = {WEFT_THREADLIST_LINK_MAX + 1, PrioPut, PrioGet};
  EXPECT_EQ(weft_threadlist_create(&l, &bad, nullptr), WEFT_EINVAL);
  EXPECT_EQ(l, nullptr);
  bad = {WEFT_THREADLIST_LINK_MAX, PrioPut, PrioGet};
  int data = 7;
  ASSERT_EQ(weft_threadlist_create(&l, &bad, &data), 0);
  EXPECT_EQ(weft_threadlist_data(l), &data);
  EXPECT_EQ(weft_threadlist_get(nullptr), nullptr);
  EXPECT_EQ(weft_threadlist_put(nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_threadlist_put(l, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_threadlist_destroy(nullptr), WEFT_EINVAL);
  // yield onto a list from a plain OS thread (weft not running): refused
  EXPECT_EQ(weft_threadlist_yield_onto(l, nullptr, nullptr), WEFT_EPERM);
  EXPECT_EQ(weft_threadlist_yield_onto(nullptr, nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_threadlist_destroy(l), 0);
}

// ---- as a run list -------------------------------------------------------------------

class RunListTest : public WeftTest, public ::testing::WithParamInterface<std::tuple<Policy, int>> {
 protected:
  void SetUp() override { StartWeft(std::get<1>(GetParam())); }
  Policy policy() const { return std::get<0>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(Lists, RunListTest,
                         ::testing::Combine(::testing::Values(FIFO, LIFO, PRIO), ::testing::Values(1, 2, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<Policy, int>> &i) {
                           return std::string(PolicyName(std::get<0>(i.param))) + "_" +
                                  std::to_string(std::get<1>(i.param)) + "vp";
                         });

struct RunLog {
  SpinLock lock;
  std::vector<int> order;  // under lock
  std::atomic<int> runs{0};
};

struct RunArg {
  RunLog *log;
  int index;
  int yields;
};

void *Logged(void *p) {
  auto *a = static_cast<RunArg *>(p);
  a->log->lock.lock();
  a->log->order.push_back(a->index);
  a->log->lock.unlock();
  for (int i = 0; i < a->yields; i++) weft_yield();  // back through thread_unblocked
  a->log->runs.fetch_add(1);
  return nullptr;
}

// A bundle scheduled from a thread list: with one VP the threads start in the
// list's order (FIFO: creation order; LIFO: reverse; priority: highest first, FIFO
// among equals); with any number of VPs each runs exactly once, also when they
// yield (which puts them back on the list).
TEST_P(RunListTest, BundleRunsThreadsInListOrder) {
  List list(policy());
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &weft_sched_threadlist, list.l), 0);
  for (int yields : {0, 3}) {
    const int n = 12;
    RunLog log;
    std::vector<RunArg> args(n);
    std::vector<weft_thread_t *> ts(n);
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.bundle = b;
    for (int i = 0; i < n; i++) {
      args[i] = {&log, i, yields};
      g_create_prio = i % 3;  // priorities 0,1,2,0,1,2,...
      ts[i] = Spawn(Logged, &args[i], &attr);
    }
    for (weft_thread_t *t : ts) Join(t);
    EXPECT_EQ(log.runs.load(), n);
    ASSERT_EQ(log.order.size(), static_cast<size_t>(n));
    std::vector<int> sorted = log.order;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; i++) EXPECT_EQ(sorted[i], i) << "each thread starts once";
    if (std::get<1>(GetParam()) == 1) {
      std::vector<int> want(n);
      for (int i = 0; i < n; i++) want[i] = i;
      if (policy() == LIFO) std::reverse(want.begin(), want.end());
      if (policy() == PRIO)
        std::stable_sort(want.begin(), want.end(), [](int a, int c) { return a % 3 > c % 3; });
      EXPECT_EQ(log.order, want) << PolicyName(policy()) << " yields=" << yields;
    }
    EXPECT_EQ(weft_threadlist_count(list.l), 0);
  }
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// ---- as a wait list: a semaphore built on a thread list ----------------------------

// The waiter keeps the semaphore's spinlock across weft_threadlist_yield_onto and
// releases it in the release callback, after it is on the list: a poster that takes
// the lock finds it there (no lost wake-up).
struct ListSem {
  SpinLock lock;
  long count = 0;  // under lock
  weft_threadlist_t *waiters;
  explicit ListSem(weft_threadlist_t *l, long c = 0) : count(c), waiters(l) {}
  void Wait() {
    lock.lock();
    if (count > 0) {
      count--;
      lock.unlock();
      return;
    }
    EXPECT_EQ(weft_threadlist_yield_onto(waiters, &SpinLock::Unlock, &lock), 0);
    // woken by Post: the unit was handed over
  }
  void Post() {
    lock.lock();
    weft_thread_t *t = weft_threadlist_get(waiters);
    if (!t) count++;
    lock.unlock();
    if (t) weft_thread_unblock(t);
  }
};

class WaitListTest : public RunListTest {};
INSTANTIATE_TEST_SUITE_P(Lists, WaitListTest,
                         ::testing::Combine(::testing::Values(FIFO, LIFO, PRIO), ::testing::Values(1, 2, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<Policy, int>> &i) {
                           return std::string(PolicyName(std::get<0>(i.param))) + "_" +
                                  std::to_string(std::get<1>(i.param)) + "vp";
                         });

struct WaitArg {
  ListSem *sem;
  RunLog *log;
  int index;
  int prio;
};

void *Waiter(void *p) {
  auto *a = static_cast<WaitArg *>(p);
  SetPrio(weft_self(), a->prio);
  a->sem->Wait();
  a->log->lock.lock();
  a->log->order.push_back(a->index);
  a->log->lock.unlock();
  return nullptr;
}

// Waiters are woken in the list's order. The waiters block one at a time (each is
// created once the previous is on the list), so the arrival order is known at any
// VP count; the wakes are posted while the main thread holds no lock, and each
// woken waiter logs itself before the next post (the main thread waits for it).
TEST_P(WaitListTest, SemaphoreWakesInListOrder) {
  List list(policy());
  ListSem sem(list.l);
  const int n = 9;
  RunLog log;
  std::vector<WaitArg> args(n);
  std::vector<weft_thread_t *> ts(n);
  for (int i = 0; i < n; i++) {
    args[i] = {&sem, &log, i, (i * 5) % 3};  // priorities 0,2,1,0,2,1,...
    ts[i] = Spawn(Waiter, &args[i]);
    ASSERT_TRUE(YieldUntil([&] { return weft_threadlist_count(list.l) == i + 1; }));
  }
  for (int i = 0; i < n; i++) {
    sem.Post();
    ASSERT_TRUE(YieldUntil([&] {
      log.lock.lock();
      size_t s = log.order.size();
      log.lock.unlock();
      return s == static_cast<size_t>(i + 1);
    }));
  }
  for (weft_thread_t *t : ts) Join(t);
  std::vector<int> want(n);
  for (int i = 0; i < n; i++) want[i] = i;
  if (policy() == LIFO) std::reverse(want.begin(), want.end());
  if (policy() == PRIO)
    std::stable_sort(want.begin(), want.end(), [&](int a, int c) { return args[a].prio > args[c].prio; });
  EXPECT_EQ(log.order, want) << PolicyName(policy());
  g_prio_lock.lock();
  g_prio.clear();
  g_prio_lock.unlock();
}

// The list semaphore as a mutex under contention: no lost wake-up, mutual
// exclusion (a plain counter), every thread finishes.
TEST_P(WaitListTest, SemaphoreAsMutexUnderContention) {
  List list(policy());
  ListSem sem(list.l, 1);
  const int n = static_cast<int>(Scaled(16, 4)), iters = static_cast<int>(Scaled(500, 20));
  struct Shared {
    ListSem *sem;
    int iters;
    long counter = 0;  // under sem
    std::atomic<int> inside{0}, overlaps{0};
  } sh{&sem, iters};
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < n; i++)
    ts.push_back(Spawn(+[](void *p) -> void * {
      auto *s = static_cast<Shared *>(p);
      for (int k = 0; k < s->iters; k++) {
        s->sem->Wait();
        if (s->inside.fetch_add(1) != 0) s->overlaps.fetch_add(1);
        long c = s->counter;
        if (k % 7 == 0) weft_yield();  // hold it across a switch now and then
        s->counter = c + 1;
        s->inside.fetch_sub(1);
        s->sem->Post();
      }
      return nullptr;
    }, &sh));
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(sh.counter, static_cast<long>(n) * iters);
  EXPECT_EQ(sh.overlaps.load(), 0);
  EXPECT_EQ(weft_threadlist_count(list.l), 0);
}

// ---- yield onto a list ------------------------------------------------------------------

class YieldOntoTest : public VpTest {};
WEFT_INSTANTIATE_VPS(YieldOntoTest);

// Threads yield onto a list; they stay off every VP until taken off and woken; each
// is woken once, returns from yield_onto, and finishes. The release callback runs
// after the caller is on the list.
TEST_P(YieldOntoTest, ThreadsWaitOnTheListUntilWoken) {
  weft_threadlist_t *l = nullptr;
  ASSERT_EQ(weft_threadlist_create(&l, &weft_threadlist_fifo, nullptr), 0);
  const int n = static_cast<int>(Scaled(32, 4));
  struct Shared {
    weft_threadlist_t *l;
    std::atomic<int> returned{0}, release_saw_on_list{0}, releases{0};
  } sh{l};
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < n; i++)
    ts.push_back(Spawn(+[](void *p) -> void * {
      auto *s = static_cast<Shared *>(p);
      int rc = weft_threadlist_yield_onto(s->l, +[](void *q) {
        auto *s2 = static_cast<Shared *>(q);
        if (weft_threadlist_count(s2->l) >= 1) s2->release_saw_on_list.fetch_add(1);
        s2->releases.fetch_add(1);
      }, s);
      EXPECT_EQ(rc, 0);
      s->returned.fetch_add(1);
      return nullptr;
    }, &sh));
  ASSERT_TRUE(YieldUntil([&] { return sh.releases.load() == n; }));
  EXPECT_EQ(sh.release_saw_on_list.load(), n);
  EXPECT_EQ(weft_threadlist_count(l), n);
  EXPECT_EQ(sh.returned.load(), 0) << "a thread on the list ran";
  EXPECT_EQ(weft_threadlist_destroy(l), WEFT_EBUSY);
  int woken = 0;
  while (weft_threadlist_wake(l)) woken++;
  EXPECT_EQ(woken, n);
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(sh.returned.load(), n);
  EXPECT_EQ(weft_threadlist_wake(l), nullptr);
  EXPECT_EQ(weft_threadlist_destroy(l), 0);
}

// A thread of a list-scheduled bundle yields onto a wait list; the waker moves it
// back to its bundle's run list by unblocking it (thread_unblocked puts it there).
TEST_P(YieldOntoTest, FromWaitListBackToRunList) {
  weft_threadlist_t *run = nullptr, *wait = nullptr;
  ASSERT_EQ(weft_threadlist_create(&run, &weft_threadlist_lifo, nullptr), 0);
  ASSERT_EQ(weft_threadlist_create(&wait, &weft_threadlist_fifo, nullptr), 0);
  weft_bundle_t *b = nullptr;
  ASSERT_EQ(weft_bundle_create(&b, nullptr, &weft_sched_threadlist, run), 0);
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.bundle = b;
  std::atomic<int> phase{0};
  struct Arg {
    weft_threadlist_t *wait;
    std::atomic<int> *phase;
  } a{wait, &phase};
  weft_thread_t *t = Spawn(+[](void *p) -> void * {
    auto *a = static_cast<Arg *>(p);
    a->phase->store(1);
    weft_threadlist_yield_onto(a->wait, nullptr, nullptr);
    a->phase->store(2);
    return nullptr;
  }, &a, &attr);
  // sleep, not yield: the bundle's threads run only on an idle VP
  ASSERT_TRUE(SleepUntil([&] { return weft_threadlist_count(wait) == 1; }));
  EXPECT_EQ(phase.load(), 1);
  EXPECT_EQ(weft_threadlist_wake(wait), t);
  Join(t);
  EXPECT_EQ(phase.load(), 2);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
  EXPECT_EQ(weft_threadlist_destroy(wait), 0);
  EXPECT_EQ(weft_threadlist_destroy(run), 0);
}

// The release callback runs as the next thread, not as the caller (which is already
// on the list), and may do what its contract allows: signal a semaphore (which
// wakes a waiter) and release a spinlock held across the call.
TEST_P(YieldOntoTest, ReleaseRunsAsTheNextThread) {
  weft_threadlist_t *l = nullptr;
  ASSERT_EQ(weft_threadlist_create(&l, &weft_threadlist_fifo, nullptr), 0);
  struct Shared {
    weft_threadlist_t *l;
    weft_sem_t released;
    SpinLock lock;
    weft_thread_t *caller = nullptr;
    std::atomic<weft_thread_t *> release_self{nullptr};
    std::atomic<int> on_list_at_release{-1};
  } sh{l, {}, {}};
  ASSERT_EQ(weft_sem_init(&sh.released, 0), 0);
  weft_thread_t *t = Spawn(+[](void *p) -> void * {
    auto *s = static_cast<Shared *>(p);
    s->caller = weft_self();
    s->lock.lock();  // released by the callback, once the caller is on the list
    EXPECT_EQ(weft_threadlist_yield_onto(s->l, +[](void *q) {
      auto *s2 = static_cast<Shared *>(q);
      s2->release_self = weft_self();
      s2->on_list_at_release = static_cast<int>(weft_threadlist_count(s2->l));
      s2->lock.unlock();
      weft_sem_signal(&s2->released);
    }, s), 0);
    return P(1);
  }, &sh);
  // timed: a release that never ran fails here instead of hanging
  ASSERT_EQ(weft_sem_timedwait(&sh.released, weft_deadline_after(30000000000ull)), 0);
  EXPECT_NE(sh.release_self.load(), sh.caller);
  EXPECT_EQ(sh.on_list_at_release.load(), 1);
  sh.lock.lock();  // the callback released it
  sh.lock.unlock();
  EXPECT_EQ(weft_threadlist_wake(l), t);
  EXPECT_EQ(Join(t), P(1));
  EXPECT_EQ(weft_sem_destroy(&sh.released), 0);
  EXPECT_EQ(weft_threadlist_destroy(l), 0);
}

// In a checked build, unlocking in the release callback a weft mutex that the caller
// holds is caught: the callback runs as another thread, which does not hold it.
// Other builds do not check (weft/threadlist.h says why).
TEST(ThreadListDeathTest, MutexUnlockInReleaseIsCaughtInCheckedBuild) {
#ifndef WEFT_TEST_CHECKED
  GTEST_SKIP() << "the library is not built with WEFT_CHECKED";
#endif
  SetDeathTestStyle();
  EXPECT_DEATH(
      {
        alarm(20);  // no abort would leave the caller on the list for good
        InitWithVps(1);
        static weft_mutex_t m;
        weft_mutex_init(&m);
        weft_threadlist_t *l = nullptr;
        weft_threadlist_create(&l, &weft_threadlist_fifo, nullptr);
        weft_mutex_lock(&m);
        weft_threadlist_yield_onto(l, +[](void *q) { weft_mutex_unlock(static_cast<weft_mutex_t *>(q)); }, &m);
        std::_Exit(0);
      },
      "weft: misuse: weft_mutex_unlock by a thread that does not hold it");
}

// In a checked build, putting the running thread on a list is caught (it must use
// weft_threadlist_yield_onto, which puts it once its context is saved).
TEST(ThreadListDeathTest, PutOfRunningThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse",
    weft_threadlist_t *l = nullptr;
    weft_threadlist_create(&l, &weft_threadlist_fifo, nullptr);
    weft_threadlist_put(l, weft_self()));
}

}  // namespace
