// tests/unit/bundle_test.cc - bundles, the scheduler table (weft/sched.h) and the
// kernel services schedulers use: enqueue, steal, stack binding, block/unblock.
#include <cstring>
#include <set>
#include <thread>

#include "weft_test.h"
#include "weft/schedlib.h"

using namespace weft_test;

namespace {

class BundleTest : public VpTest {};
WEFT_INSTANTIATE_VPS(BundleTest);
class BundleOneVpTest : public OneVpTest {};

constexpr uintptr_t kUsedWord = 0xDEADBEEF;

// A FIFO scheduler written against weft/sched.h alone: one queue for all VPs,
// linked through each thread's scheduler word, under a spinlock. thread_created and
// thread_unblocked push; processor_idle pops. Events raised on a plain OS thread
// (no VP will poll for them) go straight to VP 0's dispatch queue instead.
// Every event is counted.
struct FifoSched {
  SpinLock lock;
  weft_thread_t *head = nullptr;  // under lock
  weft_thread_t *tail = nullptr;  // under lock
  std::atomic<int> created{0}, started{0}, terminated{0}, blocked{0}, unblocked{0};
  std::atomic<int> bundles_created{0}, bundles_terminated{0};
  std::atomic<weft_bundle_t *> child_created{nullptr}, child_terminated{nullptr};
  std::atomic<int> nonzero_word_at_create{0}, wrong_bundle{0}, on_plain_thread{0};
  // If set, blocked_event is Set() when `blocked` reaches notify_blocked_at.
  std::atomic<int> notify_blocked_at{-1};
  Event *blocked_event = nullptr;

  static FifoSched *Of(weft_bundle_t *b) { return static_cast<FifoSched *>(weft_bundle_data(b)); }

  void Push(weft_thread_t *t) {
    if (weft_sched_vp_self() == nullptr) {
      on_plain_thread++;
      weft_sched_enqueue(weft_sched_vp(0), t);
      return;
    }
    *weft_sched_thread_data(t) = 0;
    lock.lock();
    if (tail != nullptr) {
      *weft_sched_thread_data(tail) = reinterpret_cast<uintptr_t>(t);
    } else {
      head = t;
    }
    tail = t;
    lock.unlock();
  }
  weft_thread_t *Pop() {
    lock.lock();
    weft_thread_t *t = head;
    if (t != nullptr) {
      head = reinterpret_cast<weft_thread_t *>(*weft_sched_thread_data(t));
      if (head == nullptr) tail = nullptr;
    }
    lock.unlock();
    return t;
  }

  static void Created(weft_bundle_t *b, weft_thread_t *t) {
    FifoSched *s = Of(b);
    s->created++;
    if (*weft_sched_thread_data(t) != 0) s->nonzero_word_at_create++;
    if (weft_thread_bundle(t) != b) s->wrong_bundle++;
    s->Push(t);
  }
  static void Started(weft_bundle_t *b, weft_thread_t *t) {
    Of(b)->started++;
    *weft_sched_thread_data(t) = kUsedWord;  // off the queue: the word is ours to dirty
  }
  static void Terminated(weft_bundle_t *b, weft_thread_t *t) {
    Of(b)->terminated++;
    *weft_sched_thread_data(t) = kUsedWord;  // a recycled control block must be re-zeroed
  }
  static void Blocked(weft_bundle_t *b, weft_thread_t *) {
    FifoSched *s = Of(b);
    if (s->blocked.fetch_add(1) + 1 == s->notify_blocked_at.load()) s->blocked_event->Set();
  }
  static void Unblocked(weft_bundle_t *b, weft_thread_t *t) {
    Of(b)->unblocked++;
    Of(b)->Push(t);
  }
  static void BundleCreated(weft_bundle_t *b, weft_bundle_t *child) {
    Of(b)->bundles_created++;
    Of(b)->child_created = child;
  }
  static void BundleTerminated(weft_bundle_t *b, weft_bundle_t *child) {
    Of(b)->bundles_terminated++;
    Of(b)->child_terminated = child;
  }
  static weft_thread_t *Idle(weft_bundle_t *b, weft_vp_t *) { return Of(b)->Pop(); }

  static constexpr weft_sched_ops_t kOps = {Created,   Started,       Terminated,       Blocked,
                                            Unblocked, BundleCreated, BundleTerminated, Idle, 0};
};

// A scheduler that holds new threads until the test releases them (so they are
// certainly unstarted), then runs them on VP dispatch queues.
struct GateSched {
  SpinLock lock;
  std::vector<weft_thread_t *> held;  // under lock
  std::atomic<int> started{0};

  static GateSched *Of(weft_bundle_t *b) { return static_cast<GateSched *>(weft_bundle_data(b)); }
  static void Created(weft_bundle_t *b, weft_thread_t *t) {
    GateSched *s = Of(b);
    s->lock.lock();
    s->held.push_back(t);
    s->lock.unlock();
  }
  static void Started(weft_bundle_t *b, weft_thread_t *) { Of(b)->started++; }
  static void Unblocked(weft_bundle_t *, weft_thread_t *t) {
    weft_vp_t *vp = weft_sched_vp_self();
    weft_sched_enqueue(vp != nullptr ? vp : weft_sched_vp(0), t);
  }
  // Removes and returns the held threads; the caller must hand each to a queue.
  std::vector<weft_thread_t *> Take() {
    lock.lock();
    std::vector<weft_thread_t *> ts;
    ts.swap(held);
    lock.unlock();
    return ts;
  }
  // Hands every held thread to a VP's dispatch queue, round robin.
  void ReleaseAll() {
    std::vector<weft_thread_t *> ts = Take();
    for (size_t i = 0; i < ts.size(); ++i) {
      weft_sched_enqueue(weft_sched_vp(static_cast<int>(i) % weft_vp_count()), ts[i]);
    }
  }
  size_t Held() {
    lock.lock();
    size_t n = held.size();
    lock.unlock();
    return n;
  }
  static constexpr weft_sched_ops_t kOps = {Created, Started, nullptr, nullptr,
                                            Unblocked, nullptr, nullptr, nullptr, 0};
};

// A scheduler that spreads threads over the VPs' dispatch queues round robin and,
// when a VP is idle, steals from the others with weft_sched_steal().
struct SpreadSched {
  std::atomic<unsigned> next{0};
  std::atomic<int> steals{0};
  static SpreadSched *Of(weft_bundle_t *b) { return static_cast<SpreadSched *>(weft_bundle_data(b)); }
  static void Place(weft_bundle_t *b, weft_thread_t *t) {
    unsigned i = Of(b)->next.fetch_add(1) % static_cast<unsigned>(weft_vp_count());
    weft_sched_enqueue(weft_sched_vp(static_cast<int>(i)), t);
  }
  static weft_thread_t *Idle(weft_bundle_t *b, weft_vp_t *vp) {
    int n = weft_vp_count(), me = weft_sched_vp_index(vp);
    for (int k = 1; k < n; ++k) {
      weft_thread_t *t = weft_sched_steal(weft_sched_vp((me + k) % n));
      if (t != nullptr) {
        Of(b)->steals++;
        return t;
      }
    }
    return nullptr;
  }
  static constexpr weft_sched_ops_t kOps = {Place, nullptr, nullptr, nullptr,
                                            Place, nullptr, nullptr, Idle, 0};
};

weft_bundle_t *MakeBundle(const weft_sched_ops_t *ops, void *data, weft_bundle_t *parent = nullptr) {
  weft_bundle_t *b = nullptr;
  int rc = weft_bundle_create(&b, parent, ops, data);
  EXPECT_EQ(rc, 0) << weft_err_name(rc);
  return b;
}

// Yields a few times, creates a child in the same bundle, joins it.
void *BundleWorker(void *arg) {
  weft_bundle_t *b = weft_thread_bundle(weft_self());
  for (int i = 0; i < 3; ++i) weft_yield();
  if (weft_thread_bundle(weft_self()) != b) return P(-1);
  weft_attr_t attr = InBundle(b);
  weft_thread_t *child = Spawn(+[](void *a) { return P(I(a) + 1); }, arg, &attr);
  return P(I(Join(child)) * 2);
}

// ---- bundles ----------------------------------------------------------------------

// The root bundle exists while running; threads created without a bundle (and the
// main weft thread) belong to it.
TEST_P(BundleTest, RootBundle) {
  weft_bundle_t *root = weft_bundle_root();
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(weft_thread_bundle(weft_self()), root);
  weft_thread_t *t = Spawn(+[](void *) { return static_cast<void *>(weft_thread_bundle(weft_self())); });
  EXPECT_EQ(Join(t), root);
}

// A bundle scheduled by a copy of weft_sched_default (so the runtime cannot
// recognise the built-in table) runs its threads correctly.
TEST_P(BundleTest, CopyOfDefaultSchedulerRunsThreads) {
  weft_sched_ops_t ops = weft_sched_default;
  int data = 0;
  weft_bundle_t *b = MakeBundle(&ops, &data);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(weft_bundle_data(b), &data);
  weft_attr_t attr = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 100; ++i) {
    ts.push_back(Spawn(BundleWorker, P(i), &attr));
    EXPECT_EQ(weft_thread_bundle(ts.back()), b);
  }
  for (intptr_t i = 0; i < 100; ++i) EXPECT_EQ(Join(ts[i]), P(2 * (i + 1)));
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// Blocks once on a WaitList, then returns `value`.
struct BlockOnce {
  WaitList *wl;
  intptr_t value;
};
void *BlockOnceThenReturn(void *arg) {
  auto *p = static_cast<BlockOnce *>(arg);
  p->wl->Wait();
  return P(p->value);
}

// A custom FIFO scheduler runs every thread, and sees exactly one created, started
// and terminated event per thread and one blocked/unblocked pair per block; the
// scheduler word is zero at creation, also in recycled control blocks. The main
// thread waits by blocking (never by polling), so a VP goes idle and asks the
// scheduler for work.
TEST_P(BundleTest, CustomSchedulerCountsEvents) {
  FifoSched s;
  weft_bundle_t *b = MakeBundle(&FifoSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  weft_attr_t attr = InBundle(b);
  const int kThreads = 20, kRounds = 3;
  WaitList wl;
  for (int round = 1; round <= kRounds; ++round) {
    Event all_blocked;
    s.blocked_event = &all_blocked;
    s.notify_blocked_at = round * kThreads;
    std::vector<BlockOnce> args(kThreads);
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < kThreads; ++i) {
      args[i] = {&wl, round * 100 + i};
      ts.push_back(Spawn(BlockOnceThenReturn, &args[i], &attr));
    }
    all_blocked.Wait();
    EXPECT_EQ(wl.Size(), static_cast<size_t>(kThreads)) << "round " << round;
    for (int i = 0; i < kThreads; ++i) EXPECT_TRUE(wl.WakeOne());
    for (int i = 0; i < kThreads; ++i) EXPECT_EQ(Join(ts[i]), P(round * 100 + i));
    s.notify_blocked_at = -1;
    s.blocked_event = nullptr;
  }
  const int n = kThreads * kRounds;
  EXPECT_EQ(s.created.load(), n);
  EXPECT_EQ(s.started.load(), n);
  EXPECT_EQ(s.terminated.load(), n);
  EXPECT_EQ(s.blocked.load(), n);
  EXPECT_EQ(s.unblocked.load(), n);
  EXPECT_EQ(s.nonzero_word_at_create.load(), 0) << "scheduler word not zero at creation";
  EXPECT_EQ(s.wrong_bundle.load(), 0);
  EXPECT_EQ(s.on_plain_thread.load(), 0);
  EXPECT_EQ(wl.ReleaseViolations(), 0);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// A thread that joins an unfinished thread blocks: the custom scheduler sees a
// blocked and an unblocked event for the joiner (and for the joinee's own block).
TEST_P(BundleTest, CustomSchedulerSeesJoinBlock) {
  FifoSched s;
  weft_bundle_t *b = MakeBundle(&FifoSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  weft_attr_t attr = InBundle(b);
  WaitList wl;
  Event both_blocked;
  s.blocked_event = &both_blocked;
  s.notify_blocked_at = 2;
  BlockOnce child_arg{&wl, 5};
  weft_thread_t *child = Spawn(BlockOnceThenReturn, &child_arg, &attr);
  weft_thread_t *parent = Spawn(+[](void *c) {
    return P(I(Join(static_cast<weft_thread_t *>(c))) + 1);
  }, child, &attr);
  both_blocked.Wait();  // the child waits in wl, the parent in weft_join
  EXPECT_EQ(s.blocked.load(), 2);
  EXPECT_TRUE(wl.WakeOne());
  EXPECT_EQ(Join(parent), P(6));
  EXPECT_EQ(s.created.load(), 2);
  EXPECT_EQ(s.started.load(), 2);
  EXPECT_EQ(s.terminated.load(), 2);
  EXPECT_EQ(s.blocked.load(), 2);
  EXPECT_EQ(s.unblocked.load(), 2);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// Threads of a custom-scheduled bundle may be created by a plain OS thread: the
// handler then runs with no VP (weft_sched_vp_self() is NULL).
TEST_P(BundleTest, CustomSchedulerWithPlainThreadCreator) {
  FifoSched s;
  weft_bundle_t *b = MakeBundle(&FifoSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  const int kThreads = 10;
  Event done;
  intptr_t sum = 0;
  std::thread plain([&] {
    weft_attr_t attr = InBundle(b);
    std::vector<weft_thread_t *> ts(kThreads, nullptr);
    for (intptr_t i = 0; i < kThreads; ++i) weft_create(&ts[i], &attr, BundleWorker, P(i));
    for (weft_thread_t *t : ts) {
      void *r = nullptr;
      if (t != nullptr && weft_join(t, &r) == 0) sum += I(r);
    }
    done.Set();
  });
  done.Wait();
  plain.join();
  EXPECT_EQ(sum, 2 * (kThreads * (kThreads + 1) / 2));
  EXPECT_GE(s.on_plain_thread.load(), kThreads);  // at least the creations
  EXPECT_EQ(s.created.load(), 2 * kThreads);      // each worker creates one child
  EXPECT_EQ(s.terminated.load(), 2 * kThreads);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// bundle_created and bundle_terminated are raised on the parent with the child;
// a bundle with a child cannot be destroyed.
TEST_P(BundleTest, BundleEventsRaisedOnParent) {
  FifoSched parent_s;
  weft_bundle_t *parent = MakeBundle(&FifoSched::kOps, &parent_s);
  ASSERT_NE(parent, nullptr);
  weft_sched_ops_t ops = weft_sched_default;
  weft_bundle_t *child = MakeBundle(&ops, nullptr, parent);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(parent_s.bundles_created.load(), 1);
  EXPECT_EQ(parent_s.child_created.load(), child);
  EXPECT_EQ(parent_s.bundles_terminated.load(), 0);
  weft_attr_t attr = InBundle(child);
  EXPECT_EQ(Join(Spawn(BundleWorker, P(3), &attr)), P(8));
  EXPECT_EQ(weft_bundle_destroy(parent), WEFT_EBUSY);
  EXPECT_EQ(weft_bundle_destroy(child), 0);
  EXPECT_EQ(parent_s.bundles_terminated.load(), 1);
  EXPECT_EQ(parent_s.child_terminated.load(), child);
  EXPECT_EQ(parent_s.created.load(), 0) << "the child's threads are not the parent's";
  EXPECT_EQ(weft_bundle_destroy(parent), 0);
}

// A bundle with a live thread cannot be destroyed (WEFT_EBUSY); once the thread is
// joined it can.
TEST_P(BundleTest, DestroyNonEmptyIsBusy) {
  weft_sched_ops_t ops = weft_sched_default;
  weft_bundle_t *b = MakeBundle(&ops, nullptr);
  ASSERT_NE(b, nullptr);
  static std::atomic<bool> open;
  open = false;
  weft_attr_t attr = InBundle(b);
  weft_thread_t *t = Spawn(+[](void *) {
    YieldUntil([] { return open.load(); });
    return P(1);
  }, nullptr, &attr);
  EXPECT_EQ(weft_bundle_destroy(b), WEFT_EBUSY);
  open = true;
  EXPECT_EQ(Join(t), P(1));
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// The root bundle and NULL cannot be destroyed (WEFT_EINVAL).
TEST_P(BundleTest, DestroyRootOrNullIsEinval) {
  EXPECT_EQ(weft_bundle_destroy(weft_bundle_root()), WEFT_EINVAL);
  EXPECT_EQ(weft_bundle_destroy(nullptr), WEFT_EINVAL);
  EXPECT_EQ(Join(Spawn(+[](void *a) { return a; }, P(2))), P(2));  // root still works
}

// weft_bundle_create() rejects NULL out/ops and a table missing a required handler,
// leaving *out untouched.
TEST_P(BundleTest, CreateRejectsBadArguments) {
  weft_bundle_t *sentinel = reinterpret_cast<weft_bundle_t *>(0x1234);
  weft_bundle_t *b = sentinel;
  weft_sched_ops_t ops = weft_sched_default;
  EXPECT_EQ(weft_bundle_create(nullptr, nullptr, &ops, nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_bundle_create(&b, nullptr, nullptr, nullptr), WEFT_EINVAL);
  EXPECT_EQ(b, sentinel);
  ops.thread_created = nullptr;
  EXPECT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), WEFT_EINVAL);
  EXPECT_EQ(b, sentinel);
  ops = weft_sched_default;
  ops.thread_unblocked = nullptr;
  EXPECT_EQ(weft_bundle_create(&b, nullptr, &ops, nullptr), WEFT_EINVAL);
  EXPECT_EQ(b, sentinel);
}

// Optional handlers may be NULL: a scheduler with only thread_created,
// thread_started and thread_unblocked (the gate scheduler) runs yielding threads.
TEST_P(BundleTest, OptionalHandlersMayBeNull) {
  GateSched s;
  weft_bundle_t *b = MakeBundle(&GateSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  weft_attr_t attr = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 20; ++i) {
    ts.push_back(Spawn(+[](void *a) {
      for (int k = 0; k < 5; ++k) weft_yield();
      return P(3 * I(a));
    }, P(i), &attr));
  }
  EXPECT_EQ(s.Held(), 20u);
  s.ReleaseAll();
  for (intptr_t i = 0; i < 20; ++i) EXPECT_EQ(Join(ts[i]), P(3 * i));
  EXPECT_EQ(s.started.load(), 20);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// The handler table is copied at creation: changing the caller's copy afterwards
// has no effect.
std::atomic<int> g_stale_table_calls{0};
void StaleCreated(weft_bundle_t *b, weft_thread_t *t) {
  g_stale_table_calls++;
  FifoSched::Created(b, t);
}
TEST_P(BundleTest, OpsTableIsCopied) {
  FifoSched s;
  weft_sched_ops_t ops = FifoSched::kOps;
  weft_bundle_t *b = MakeBundle(&ops, &s);
  ASSERT_NE(b, nullptr);
  g_stale_table_calls = 0;
  ops.thread_created = StaleCreated;
  ops.processor_idle = nullptr;
  weft_attr_t attr = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 10; ++i) ts.push_back(Spawn(+[](void *a) { return a; }, P(i), &attr));
  for (intptr_t i = 0; i < 10; ++i) EXPECT_EQ(Join(ts[i]), P(i));
  EXPECT_EQ(g_stale_table_calls.load(), 0);
  EXPECT_EQ(s.created.load(), 10);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// A scheduler that spreads threads over all VPs with weft_sched_enqueue() and
// steals with weft_sched_steal() runs a yielding, joining workload correctly.
TEST_P(BundleTest, EnqueueAndStealScheduler) {
  SpreadSched s;
  weft_bundle_t *b = MakeBundle(&SpreadSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  weft_attr_t attr = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 200; ++i) ts.push_back(Spawn(BundleWorker, P(i), &attr));
  for (intptr_t i = 0; i < 200; ++i) EXPECT_EQ(Join(ts[i]), P(2 * (i + 1)));
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// ---- kernel services ----------------------------------------------------------------

// A dispatch queue is a deque: weft_sched_enqueue adds at the back, weft_sched_push
// at the front, the VP (weft_sched_steal) takes the front. weft_sched_steal_half(
// victim, to) returns victim's back thread and moves the rest of the back half, in
// order, to the back of to's queue; with victim == to it is a plain dequeue from
// the front. Made deterministic with 2 VPs by keeping both busy: the main
// thread spins on its VP and a spinner thread occupies the other, so neither
// dispatch queue is touched by anyone else. The threads are held by the gate
// scheduler until the test puts them on a queue.
TEST_P(BundleTest, StealHalfTakesBackHalf) {
  if (nvps() > 2) GTEST_SKIP() << "needs every VP busy; checked with 1 and 2 VPs";
  GateSched s;
  weft_bundle_t *b = MakeBundle(&GateSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  weft_attr_t attr = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 6; ++i) ts.push_back(Spawn(+[](void *a) { return a; }, P(i), &attr));
  ASSERT_EQ(s.Take(), ts);  // the test places them itself
  weft_vp_t *here = weft_sched_vp_self();
  static std::atomic<int> spinner_state;  // 0: not started, 1: spinning, 2: released
  spinner_state = 0;
  weft_thread_t *spinner = nullptr;
  weft_vp_t *other = here;
  if (nvps() == 2) {
    other = weft_sched_vp(1 - weft_sched_vp_index(here));
    weft_attr_t sattr;
    weft_attr_init(&sattr);
    sattr.vproc = WEFT_VPROC(weft_sched_vp_index(other));
    spinner = Spawn(+[](void *) {
      spinner_state = 1;
      SpinUntil([] { return spinner_state.load() == 2; });
      return P(0);
    }, nullptr, &sattr);
    ASSERT_TRUE(SpinUntil([] { return spinner_state.load() == 1; })) << "spinner never started";
  }
  // front to back: ts[5] ts[4] ts[3] ts[0] ts[1] ts[2]
  for (int i = 0; i < 3; ++i) weft_sched_enqueue(here, ts[i]);
  for (int i = 3; i < 6; ++i) weft_sched_push(here, ts[i]);
  weft_thread_t *got = weft_sched_steal_half(here, other);
  if (nvps() == 2) {
    // Back half of 6 is 3: ts[2] returned, ts[0..1] moved in order; ts[5,4,3] stay.
    EXPECT_EQ(got, ts[2]) << "the back thread is returned";
    EXPECT_EQ(weft_sched_steal(other), ts[0]);
    EXPECT_EQ(weft_sched_steal(other), ts[1]);
    EXPECT_EQ(weft_sched_steal(other), nullptr);
    EXPECT_EQ(weft_sched_steal(here), ts[5]);
    EXPECT_EQ(weft_sched_steal(here), ts[4]);
    EXPECT_EQ(weft_sched_steal(here), ts[3]);
  } else {
    EXPECT_EQ(got, ts[5]) << "victim == to: the front";
    for (int i : {4, 3, 0, 1, 2}) EXPECT_EQ(weft_sched_steal(here), ts[i]) << i;
  }
  EXPECT_EQ(weft_sched_steal(here), nullptr);
  for (weft_thread_t *t : ts) weft_sched_enqueue(here, t);  // run them all after all
  spinner_state = 2;
  if (spinner != nullptr) Join(spinner);
  for (intptr_t i = 0; i < 6; ++i) EXPECT_EQ(Join(ts[i]), P(i));
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// weft_sched_vp(i) gives distinct VPs numbered i; out-of-range gives NULL; the
// caller's VP agrees with weft_vp_self(); a plain OS thread has no VP.
TEST_P(BundleTest, VpAccessors) {
  std::set<weft_vp_t *> vps;
  for (int i = 0; i < nvps(); ++i) {
    weft_vp_t *vp = weft_sched_vp(i);
    ASSERT_NE(vp, nullptr);
    EXPECT_EQ(weft_sched_vp_index(vp), i);
    vps.insert(vp);
  }
  EXPECT_EQ(vps.size(), static_cast<size_t>(nvps()));
  EXPECT_EQ(weft_sched_vp(-1), nullptr);
  EXPECT_EQ(weft_sched_vp(nvps()), nullptr);
  EXPECT_EQ(weft_sched_vp_self(), weft_sched_vp(0));
  EXPECT_EQ(I(RunInThread([] {
    weft_yield();
    return P(weft_sched_vp_index(weft_sched_vp_self()) == weft_vp_self());
  })), 1);
  weft_vp_t *plain_vp = weft_sched_vp(0);
  std::thread plain([&] { plain_vp = weft_sched_vp_self(); });
  plain.join();
  EXPECT_EQ(plain_vp, nullptr);
}

// weft_sched_bind_stack() binds the stack of threads that have not run yet; they
// then run normally on it (once each: one started event).
TEST_P(BundleTest, BindStackOnUnstartedThread) {
  GateSched s;
  weft_bundle_t *b = MakeBundle(&GateSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  weft_attr_t attr = InBundle(b);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 0; i < 10; ++i) {
    attr.stack_size = (i % 2) ? 64 * 1024 : 0;
    ts.push_back(Spawn(+[](void *a) {
      volatile char buf[8192];
      for (size_t k = 0; k < sizeof buf; ++k) buf[k] = static_cast<char>(k);
      weft_yield();
      return P(I(a) + buf[1]);
    }, P(i), &attr));
  }
  ASSERT_EQ(s.Held(), 10u);
  EXPECT_EQ(s.started.load(), 0);
  for (weft_thread_t *t : ts) EXPECT_EQ(weft_sched_bind_stack(t), 0);
  EXPECT_EQ(s.started.load(), 0);
  s.ReleaseAll();
  for (intptr_t i = 0; i < 10; ++i) EXPECT_EQ(Join(ts[i]), P(i + 1));
  EXPECT_EQ(s.started.load(), 10);
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// weft_sched_bind_stack(NULL) is WEFT_EINVAL.
TEST_P(BundleTest, BindStackNullIsEinval) { EXPECT_EQ(weft_sched_bind_stack(nullptr), WEFT_EINVAL); }

// With one VP, a thread just created by the main thread has not run: its stack can
// be bound eagerly in the root bundle too.
TEST_F(BundleOneVpTest, BindStackInRootBundle) {
  weft_thread_t *t = Spawn(+[](void *a) { return a; }, P(8));
  EXPECT_EQ(weft_sched_bind_stack(t), 0);
  EXPECT_EQ(Join(t), P(8));
}

// An idle VP steals work from a busy one: the main thread keeps its VP busy
// (spinning, never switching) after creating threads on it, so only another VP,
// by stealing, can run them.
// The system monitor is off here: under an emulator (qemu-user) or a loaded machine
// the spinning kernel thread can be seen asleep in the kernel (qemu's own locks)
// with its CPU time short, and a spare standing in for the main thread's VP would
// run the threads under that VP's number.
TEST_P(BundleTest, IdleVpStealsFromBusyVp) {
  if (nvps() == 1) GTEST_SKIP() << "needs a second VP";
  ASSERT_EQ(weft_shutdown(), 0);
  weft_config_t cfg;
  weft_config_init(&cfg);
  cfg.nvps = nvps();
  cfg.monitor_us = 0;
  ASSERT_EQ(weft_init(&cfg), 0);
  static std::atomic<int> ran_on;
  ran_on = -1;
  weft_debug_stats_t before, after;
  weft_debug_stats(&before);
  const int here = weft_vp_self();
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 10; ++i) ts.push_back(Spawn(+[](void *) {
    int expected = -1;
    ran_on.compare_exchange_strong(expected, weft_vp_self());
    return P(0);
  }));
  EXPECT_TRUE(SpinUntil([] { return ran_on.load() != -1; })) << "no VP took work from the busy one";
  EXPECT_NE(ran_on.load(), here);
  weft_debug_stats(&after);
  EXPECT_GE(after.steals, before.steals + 1);
  for (weft_thread_t *t : ts) Join(t);
}

// A thread enqueued while the other VPs sleep wakes one of them: the main thread
// keeps its own VP busy (spinning) long enough for the idle VPs to go to sleep in
// the kernel, then creates a thread hinted at another VP; some other VP must wake
// up and run it. (No custom bundle here: while one exists, idle VPs keep polling.)
TEST_P(BundleTest, EnqueueWakesSleepingVp) {
  if (nvps() == 1) GTEST_SKIP() << "needs a second VP";
  static std::atomic<int> ran_on;
  ran_on = -1;
  // Spin (never switching) for 1000 times spin_us, so the idle VPs sleep. This is
  // set-up only: the assertions below hold whether or not they did.
  SpinUntil([] { return false; }, 0.05);
  const int here = weft_vp_self();
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.vproc = WEFT_VPROC((here + 1) % nvps());
  weft_thread_t *t = Spawn(+[](void *) {
    ran_on = weft_vp_self();
    return P(0);
  }, nullptr, &attr);
  EXPECT_TRUE(SpinUntil([] { return ran_on.load() != -1; }, 20.0)) << "no VP woke up for the thread";
  EXPECT_NE(ran_on.load(), here);
  Join(t);
}

// While a custom bundle exists, idle VPs still go to sleep (they do not poll its
// processor_idle forever), and a thread the custom scheduler keeps to itself wakes
// one of them (the kernel's weft_sched_notify after thread_created).
TEST_P(BundleTest, CustomBundleLetsIdleVpsSleepAndWakesThem) {
  if (nvps() == 1) GTEST_SKIP() << "needs a second VP";
  FifoSched s;
  weft_bundle_t *b = MakeBundle(&FifoSched::kOps, &s);
  ASSERT_NE(b, nullptr);
  // Wake every VP (a thread placed on each), then spin without switching: the other
  // VPs run out of work and must go to sleep again. The VPs may already be asleep
  // when the count is read, so try a few rounds.
  bool slept = false;
  for (int round = 0; round < 10 && !slept; ++round) {
    // counted before the VPs are woken: a VP that runs its thread and goes back to
    // sleep before the spin below starts still counts
    weft_debug_stats_t st;
    weft_debug_stats(&st);
    const uint64_t sleeps_before = st.sleeps;
    std::vector<weft_thread_t *> ts;
    for (int v = 0; v < nvps(); ++v) {
      weft_attr_t a;
      weft_attr_init(&a);
      a.vproc = WEFT_VPROC(v);
      ts.push_back(Spawn(+[](void *x) { return x; }, P(v), &a));
    }
    for (weft_thread_t *t : ts) Join(t);
    slept = SpinUntil([&] {
      weft_debug_stats_t now;
      weft_debug_stats(&now);
      return now.sleeps > sleeps_before;
    }, 2.0);
  }
  EXPECT_TRUE(slept) << "idle VPs never slept while a custom bundle existed";
  static std::atomic<int> ran_on;
  ran_on = -1;
  weft_attr_t attr = InBundle(b);
  weft_thread_t *t = Spawn(+[](void *) {
    ran_on = weft_vp_self();
    return P(7);
  }, nullptr, &attr);
  // still never switching: only another VP, woken for the custom scheduler, can run it
  EXPECT_TRUE(SpinUntil([] { return ran_on.load() != -1; }, 20.0))
      << "no VP woke up for a thread held by a custom scheduler";
  EXPECT_NE(ran_on.load(), weft_vp_self());
  EXPECT_EQ(Join(t), P(7));
  EXPECT_EQ(weft_bundle_destroy(b), 0);
}

// weft_thread_block()/weft_thread_unblock() round trip: many threads block on a
// spinlock-protected wait list (the release callback unlocks it, after the
// blocker's context is saved and never on the blocker itself), and a waker thread
// unblocks them, many times over.
TEST_P(BundleTest, BlockUnblockRoundTrip) {
  struct Shared {
    WaitList wl;
    std::atomic<int> resumed{0}, done{0};
  } sh;
  const int kThreads = 8, kRounds = 200;
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.push_back(Spawn(+[](void *a) {
      auto *s = static_cast<Shared *>(a);
      for (int r = 0; r < kRounds; ++r) {
        s->wl.Wait();
        s->resumed++;
      }
      s->done++;
      return P(0);
    }, &sh));
  }
  weft_thread_t *waker = Spawn(+[](void *a) {
    auto *s = static_cast<Shared *>(a);
    intptr_t wakes = 0;
    while (s->done.load() < kThreads) {
      if (s->wl.WakeOne()) {
        wakes++;
      } else {
        weft_yield();
      }
    }
    return P(wakes);
  }, &sh);
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(Join(waker), P(kThreads * kRounds));
  EXPECT_EQ(sh.resumed.load(), kThreads * kRounds);
  EXPECT_EQ(sh.wl.ReleaseViolations(), 0) << "release ran on the blocking thread";
}

// The release callback may unblock the blocker itself at once: by then its context
// is saved, so it simply resumes.
TEST_P(BundleTest, ReleaseMayUnblockAtOnce) {
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < 4; ++i) {
    ts.push_back(Spawn(+[](void *) {
      for (int r = 0; r < 500; ++r) {
        weft_thread_block(+[](void *self) { weft_thread_unblock(static_cast<weft_thread_t *>(self)); },
                          weft_self());
      }
      return P(1);
    }));
  }
  for (weft_thread_t *t : ts) EXPECT_EQ(Join(t), P(1));
}

// A plain OS thread can unblock a blocked weft thread.
TEST_P(BundleTest, UnblockFromPlainThread) {
  WaitList wl;
  BlockOnce arg{&wl, 31};
  weft_thread_t *t = Spawn(BlockOnceThenReturn, &arg);
  std::thread plain([&] {
    while (!wl.WakeOne()) sched_yield();
  });
  EXPECT_EQ(Join(t), P(31));
  plain.join();
}

// ---- threads a scheduler keeps to itself, on a VP that never goes idle -----------------

// With one VP, a root thread that waits for a bundle's thread by yielding lets it run:
// the yield, finding nothing in the dispatch queue, asks the bundles as an idle VP
// would (the scheduler library's FIFO keeps new threads in its run lists, which only
// processor_idle hands out). It waited for ever before.
TEST_F(BundleOneVpTest, YieldingRootThreadLetsHeldThreadsRun) {
  for (unsigned kind : {unsigned(WEFT_SCHED_FIFO), unsigned(WEFT_SCHED_PRIORITY)}) {
    weft_bundle_t *b = nullptr;
    ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, kind), 0);
    static std::atomic<int> flag;
    flag = 0;
    weft_attr_t at;
    weft_attr_init(&at);
    at.bundle = b;
    weft_thread_t *t = nullptr;
    ASSERT_EQ(weft_create(&t, &at, +[](void *) -> void * {
      flag = 1;
      return nullptr;
    }, nullptr), 0);
    long n = 0;
    while (!flag && n < 1000000) {
      weft_yield();
      ++n;
    }
    EXPECT_EQ(flag.load(), 1) << weft_schedlib_kind_name(kind) << ": never ran in " << n << " yields";
    EXPECT_EQ(Join(t), nullptr);
    EXPECT_EQ(weft_schedlib_bundle_destroy(b), 0);
  }
}

// weft_shutdown runs the threads a bundle's scheduler holds, with one VP too (it
// returned WEFT_EBUSY and ran none of them), and frees a bundle the program did not
// destroy (with the scheduler library's state): the fixture's teardown checks that
// nothing is left.
TEST_F(BundleOneVpTest, ShutdownRunsHeldThreadsAndFreesBundles) {
  static std::atomic<int> ran;
  ran = 0;
  for (unsigned kind : {unsigned(WEFT_SCHED_FIFO), unsigned(WEFT_SCHED_LIFO | WEFT_SCHED_EAGER),
                        unsigned(WEFT_SCHED_PRIORITY)}) {
    weft_bundle_t *b = nullptr, *child = nullptr;
    ASSERT_EQ(weft_schedlib_bundle_create(&b, nullptr, kind), 0);
    ASSERT_EQ(weft_schedlib_bundle_create(&child, b, WEFT_SCHED_FIFO), 0);
    for (weft_bundle_t *x : {b, child}) {
      weft_attr_t at;
      weft_attr_init(&at);
      at.bundle = x;
      at.detached = 1;
      for (int i = 0; i < 3; i++)
        ASSERT_EQ(weft_create(nullptr, &at, +[](void *) -> void * {
          ran.fetch_add(1);
          return nullptr;
        }, nullptr), 0);
    }
  }
  EXPECT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(ran.load(), 18);
}

// ---- misuse caught by checked builds ------------------------------------------------------

// In a checked build, weft_thread_block() from a plain OS thread is caught.
TEST(BundleDeathTest, BlockFromPlainThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse",
    std::thread plain([] { weft_thread_block(+[](void *) {}, nullptr); });
    plain.join());
}

// In a checked build, unblocking a thread that is not blocked (here: the running
// main thread) is caught, as weft/sched.h promises.
TEST(BundleDeathTest, UnblockOfRunningThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse",
    weft_thread_unblock(weft_self()));
}

// In a checked build, unblocking a thread that was created but never blocked is caught.
TEST(BundleDeathTest, UnblockOfReadyThreadIsCaughtInCheckedBuild) {
  WEFT_EXPECT_MISUSE_DEATH("weft: misuse",
    weft_thread_t *t = Spawn(+[](void *a) { return a; });
    weft_thread_unblock(t));  // t is ready (queued), not blocked
}

}  // namespace
