// tests/unit/rwlock_test.cc - reader/writer locks (weft/rwlock.h): readers share
// (deterministically: k readers inside at once), writers exclude (exact counts,
// with readers checking they never see a writer), writers do not starve behind
// overlapping readers and readers do not starve behind a stream of writers
// (bounded by counted entries with one VP; with several, only a watchdog that
// turns starvation into a failure), try variants, timed read/write locks
// that time out (including a timed-out writer at the head of the queue letting
// the readers queued behind it in), a plain OS waiter woken to compete is
// overtaken a bounded number of times, EPERM, initializers, destroy busy.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "sync_test_util.h"

using namespace weft_sync_test;

namespace {

class RwLockTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(RwLockTest);

// The starvation tests' watchdog: a thread that has not got in after this long,
// while the others kept taking the lock, starved (the lock lets it in after a few
// entries: a host stall of this length does not happen). Not a timing assertion.
constexpr std::chrono::seconds kStarvedAfter{20};

// k readers (weft and OS) are all inside at once: each holds its read lock until
// it has seen k readers inside (bounded wait: fails instead of hanging).
TEST_P(RwLockTest, ReadersShare) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  const int nweft = 2 * nvps() + 2, nos = 2, k = nweft + nos;
  std::atomic<int> inside{0}, max_inside{0}, timeouts{0}, bad{0};
  RunMixed(nweft, nos, [&](int) {
    if (weft_rwlock_rdlock(&l) != 0) bad.fetch_add(1);
    int now = inside.fetch_add(1) + 1;
    int m = max_inside.load();
    while (now > m && !max_inside.compare_exchange_weak(m, now)) {
    }
    if (!WaitFor([&] { return max_inside.load() >= k; }, 20)) timeouts.fetch_add(1);
    inside.fetch_sub(1);
    if (weft_rwlock_unlock(&l) != 0) bad.fetch_add(1);
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(timeouts.load(), 0) << "readers did not share: at most " << max_inside.load() << " of "
                                << k << " inside at once";
  EXPECT_EQ(max_inside.load(), k);
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Writers exclude readers and each other: writers increment a plain counter (read
// twice with a yield in between), readers check that no writer is inside and that
// the counter does not change under them. Exact count at the end.
TEST_P(RwLockTest, WriterExclusionExactCounts) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  long counter = 0;  // l
  std::atomic<int> writers_in{0}, readers_in{0};
  std::atomic<long> violations{0}, bad{0}, reads{0};
  const int nwriters = nvps() + 2, nreaders = nvps() + 2, nos_w = 1, nos_r = 1;
  const long iters = Scaled(3000, 20);
  // [0, nwriters) weft writers, then weft readers; OS: a writer, then a reader
  RunMixed(nwriters + nreaders, nos_w + nos_r, [&](int i) {
    bool writer = i < nwriters || i == nwriters + nreaders;
    bool weft = weft_self() != nullptr;
    for (long k = 0; k < iters; ++k) {
      if (writer) {
        if (weft_rwlock_wrlock(&l) != 0) bad.fetch_add(1);
        if (writers_in.fetch_add(1) != 0 || readers_in.load() != 0) violations.fetch_add(1);
        long c = counter;
        Work(50);
        if (weft && (k & 3) == 0) weft_yield();
        counter = c + 1;
        writers_in.fetch_sub(1);
      } else {
        if (weft_rwlock_rdlock(&l) != 0) bad.fetch_add(1);
        readers_in.fetch_add(1);
        if (writers_in.load() != 0) violations.fetch_add(1);
        long c = counter;
        if (weft && (k & 3) == 0) weft_yield();
        if (counter != c) violations.fetch_add(1);
        readers_in.fetch_sub(1);
        reads.fetch_add(1);
      }
      if (weft_rwlock_unlock(&l) != 0) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(violations.load(), 0) << "a writer overlapped a reader or another writer";
  EXPECT_EQ(counter, (nwriters + nos_w) * iters);
  EXPECT_EQ(reads.load(), (nreaders + nos_r) * iters);
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Writers do not starve: readers enter and leave continuously, always overlapping
// (each holds across a yield, several run at once). A writer that arrives must get
// in after a bounded number of further reader entries. Readers go on until the
// writer is done; if it starves, a watchdog (kStarvedAfter) stops them and fails.
TEST_P(RwLockTest, WriterDoesNotStarveBehindReaders) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  const int nreaders = 2 * nvps() + 2;
  const auto stop = std::chrono::steady_clock::now() + kStarvedAfter;
  std::atomic<long> entries{0};
  std::atomic<bool> writer_done{false};
  std::atomic<long> at_arrival{-1}, at_entry{-1};
  std::atomic<bool> writer_in{false};
  std::atomic<long> jumped{0};
  RunMixed(nreaders + 1, 0, [&](int i) {
    if (i == nreaders) {  // the writer
      WaitFor([&] { return entries.load() >= 200; });
      at_arrival = entries.load();
      EXPECT_EQ(weft_rwlock_wrlock(&l), 0);
      writer_in = true;
      at_entry = entries.load();
      EXPECT_EQ(weft_rwlock_unlock(&l), 0);
      writer_done = true;
      return;
    }
    while (!writer_done.load() && std::chrono::steady_clock::now() < stop) {
      // A failing tryrdlock while no writer holds the lock means a writer waits:
      // this reader arrived after it queued, so FIFO lets it in only after it.
      int rc = weft_rwlock_tryrdlock(&l);
      bool behind = rc == WEFT_EBUSY && !writer_in.load();
      if (rc != 0) {
        EXPECT_EQ(weft_rwlock_rdlock(&l), 0);
      }
      if (behind && !writer_in.load()) jumped.fetch_add(1);
      entries.fetch_add(1);
      weft_yield();
      Work(100);
      EXPECT_EQ(weft_rwlock_unlock(&l), 0);
    }
  });
  ASSERT_TRUE(writer_done.load()) << "the writer never got in while readers kept going ("
                                  << entries.load() << " reader entries)";
  EXPECT_EQ(jumped.load(), 0) << "readers that arrived behind a waiting writer got in first";
  long after = at_entry.load() - at_arrival.load();
  // Counted from the writer's side, the bound also includes the time between its
  // read of the counter and its queueing. With several VPs the host can stall the
  // writer's VP there while the others go on (seen in CI's ucontext run), and an
  // emulator stretches it at will: there only the check above holds. With one VP a
  // stall stops every thread alike.
#ifndef WEFT_TEST_EMULATED
  if (nvps() == 1) {
    EXPECT_LE(after, 50L * nreaders) << "writer waited through " << after << " reader entries";
  }
#endif
  (void)after;
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Readers do not starve: writers take the lock back to back (each holds across a
// yield); a reader that arrives gets in after a bounded number of writer entries.
TEST_P(RwLockTest, ReaderDoesNotStarveBehindWriters) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  const int nwriters = 2 * nvps() + 2;
  const auto stop = std::chrono::steady_clock::now() + kStarvedAfter;
  std::atomic<long> entries{0};
  std::atomic<bool> reader_done{false};
  std::atomic<long> at_arrival{-1}, at_entry{-1};
  RunMixed(nwriters + 1, 0, [&](int i) {
    if (i == nwriters) {  // the reader
      WaitFor([&] { return entries.load() >= 200; });
      at_arrival = entries.load();
      EXPECT_EQ(weft_rwlock_rdlock(&l), 0);
      at_entry = entries.load();
      EXPECT_EQ(weft_rwlock_unlock(&l), 0);
      reader_done = true;
      return;
    }
    while (!reader_done.load() && std::chrono::steady_clock::now() < stop) {
      EXPECT_EQ(weft_rwlock_wrlock(&l), 0);
      entries.fetch_add(1);
      weft_yield();
      EXPECT_EQ(weft_rwlock_unlock(&l), 0);
    }
  });
  long after = at_entry.load() - at_arrival.load();
  // No starvation at any VP count: the reader got in while the writers kept going.
  // Not bounded by a count of entries with several VPs: the host can deschedule the
  // reader's VP (its kernel thread) between the reader's read of the counter and its
  // queueing, while the writers on the other VP go on. A release build at 2 VPs once
  // reached a cap of 200,000 entries that way; on a 2-core host with three busy loops
  // beside it, 2 runs in 2,000 saw over 100,000 (most see 6, the writers queued
  // ahead): there the count measures host scheduling, not the lock. The tight bound counts from the reader's read of
  // the counter and holds with one VP (a stall then stops every thread alike).
  ASSERT_TRUE(reader_done.load()) << "the reader never got in while writers kept going ("
                                  << entries.load() << " writer entries)";
#ifndef WEFT_TEST_EMULATED
  if (nvps() == 1) {
    EXPECT_LE(after, 50L * nwriters) << "reader waited through " << after << " writer entries";
  }
#endif
  (void)after;
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Polls until `pred` holds, using only try operations (no API shows that a
// thread is queued): a bounded wait that fails instead of hanging.
template <class F>
bool Eventually(F pred) {
  return WaitFor(pred, 30);
}

std::pair<int, int> Both(int rc) { return {rc, rc}; }

// tryrdlock fails while a writer holds the lock or a writer waits; trywrlock fails
// while anyone holds it. Both succeed on a free lock.
TEST_P(RwLockTest, TryVariants) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  auto other = [](auto f) {  // result of f() on a plain OS thread and on a weft thread
    int a = 0;
    std::thread([&] { a = f(); }).join();
    int b = I(RunInThread([&] { return P(f()); }));
    return std::make_pair(a, b);
  };
  auto tryrd_release = [&l] {
    int rc = weft_rwlock_tryrdlock(&l);
    if (rc == 0) weft_rwlock_unlock(&l);
    return rc;
  };
  auto trywr_release = [&l] {
    int rc = weft_rwlock_trywrlock(&l);
    if (rc == 0) weft_rwlock_unlock(&l);
    return rc;
  };
  // free
  EXPECT_EQ(other(tryrd_release), Both(0));
  EXPECT_EQ(other(trywr_release), Both(0));
  // write-held
  ASSERT_EQ(weft_rwlock_wrlock(&l), 0);
  EXPECT_EQ(weft_rwlock_tryrdlock(&l), WEFT_EBUSY);
  EXPECT_EQ(weft_rwlock_trywrlock(&l), WEFT_EBUSY);
  EXPECT_EQ(other(tryrd_release), Both(WEFT_EBUSY));
  EXPECT_EQ(other(trywr_release), Both(WEFT_EBUSY));
  ASSERT_EQ(weft_rwlock_unlock(&l), 0);
  // read-held: readers may join, writers may not
  ASSERT_EQ(weft_rwlock_rdlock(&l), 0);
  EXPECT_EQ(other(tryrd_release), Both(0));
  EXPECT_EQ(other(trywr_release), Both(WEFT_EBUSY));
  // read-held with a writer waiting: tryrdlock fails too
  std::atomic<int> wstate{0};
  std::pair<weft_rwlock_t *, std::atomic<int> *> warg(&l, &wstate);
  weft_thread_t *w = Spawn(+[](void *a) -> void * {
    auto *st = static_cast<std::pair<weft_rwlock_t *, std::atomic<int> *> *>(a);
    st->second->store(1);
    int rc = weft_rwlock_wrlock(st->first);
    st->second->store(2);
    if (rc == 0) weft_rwlock_unlock(st->first);
    return P(rc);
  }, &warg);
  EXPECT_TRUE(Eventually([&] { return tryrd_release() == WEFT_EBUSY; }))
      << "tryrdlock kept succeeding while a writer waited";
  EXPECT_EQ(other(tryrd_release), Both(WEFT_EBUSY));
  EXPECT_EQ(other(trywr_release), Both(WEFT_EBUSY));
  EXPECT_EQ(wstate.load(), 1);
  ASSERT_EQ(weft_rwlock_unlock(&l), 0);  // hands it to the writer
  EXPECT_EQ(Join(w), P(0));
  EXPECT_EQ(wstate.load(), 2);
  EXPECT_EQ(other(tryrd_release), Both(0));
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Timed read and write locks time out with WEFT_ETIMEDOUT (not before the
// deadline) and leave the lock consistent.
TEST_P(RwLockTest, TimedLocksTimeOut) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  std::atomic<int> wrong{0}, early{0};
  auto expect_timeout = [&](bool read, uint64_t ms) {
    uint64_t d = weft_deadline_after(ms * kMs);
    int rc = read ? weft_rwlock_timedrdlock(&l, d) : weft_rwlock_timedwrlock(&l, d);
    if (rc != WEFT_ETIMEDOUT) {
      wrong.fetch_add(1);
      if (rc == 0) weft_rwlock_unlock(&l);
    }
    if (weft_time_now() < d) early.fetch_add(1);
  };
  // write-held: both modes time out
  ASSERT_EQ(weft_rwlock_wrlock(&l), 0);
  RunMixed(3, 1, [&](int i) {
    expect_timeout(true, 1 + i);
    expect_timeout(false, 1 + i);
    expect_timeout(i & 1, 0);
  });
  ASSERT_EQ(weft_rwlock_unlock(&l), 0);
  // read-held: writers time out, readers get in
  ASSERT_EQ(weft_rwlock_rdlock(&l), 0);
  RunMixed(2, 1, [&](int i) { expect_timeout(false, 1 + i); });
  EXPECT_EQ(weft_rwlock_timedrdlock(&l, weft_deadline_after(kMs)), 0);
  EXPECT_EQ(weft_rwlock_unlock(&l), 0);
  ASSERT_EQ(weft_rwlock_unlock(&l), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(early.load(), 0);
  // consistent
  EXPECT_EQ(weft_rwlock_trywrlock(&l), 0);
  EXPECT_EQ(weft_rwlock_unlock(&l), 0);
  EXPECT_EQ(weft_rwlock_tryrdlock(&l), 0);
  EXPECT_EQ(weft_rwlock_unlock(&l), 0);
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// A timed read lock whose deadline has passed still enters a lock that only readers
// hold and nobody waits for: weft threads take timedrdlock with deadline 0 while
// plain OS threads take and drop read locks beside them, and no writer ever comes.
// The fast path's one CAS loses to another reader's now and then; the slow path then
// answered WEFT_ETIMEDOUT without trying (tens of thousands of times in 400,000).
TEST_P(RwLockTest, ExpiredTimedReadLockEntersAReadHeldLock) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  std::atomic<long> timedout{0}, other{0}, ok{0};
  std::atomic<int> weft_done{0};
  const long n = static_cast<long>(Scaled(40000, 4000));
  RunMixed(2, 2, [&](int i) {
    if (i < 2) {
      for (long k = 0; k < n; k++) {
        int rc = weft_rwlock_timedrdlock(&l, 0);
        if (rc == 0) {
          ok.fetch_add(1, std::memory_order_relaxed);
          weft_rwlock_unlock(&l);
        } else if (rc == WEFT_ETIMEDOUT) {
          timedout.fetch_add(1, std::memory_order_relaxed);
        } else {
          other.fetch_add(1, std::memory_order_relaxed);
        }
        if ((k & 63) == 0) weft_yield();
      }
      weft_done.fetch_add(1);
    } else {
      while (weft_done.load() < 2) {
        ASSERT_EQ(weft_rwlock_rdlock(&l), 0);
        ASSERT_EQ(weft_rwlock_unlock(&l), 0);
      }
    }
  });
  EXPECT_EQ(timedout.load(), 0) << "of " << 2 * n << " expired timed read locks, no writer ever";
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load(), 2 * n);
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// A timed-out writer at the head of the queue lets the readers queued behind it
// in: the main thread holds a read lock throughout; a writer queues (timed);
// readers arrive and queue behind it (FIFO); when the writer gives up, the readers
// must join the main thread's read hold, without the main thread unlocking.
TEST_P(RwLockTest, TimedOutWriterAtHeadLetsReadersIn) {
  const int rounds = static_cast<int>(Scaled(10, 2));
  for (int r = 0; r < rounds; ++r) {
    weft_rwlock_t l = WEFT_RWLOCK_INIT;
    ASSERT_EQ(weft_rwlock_rdlock(&l), 0);
    std::atomic<int> wrc{1};
    std::atomic<bool> wdone{false};
    const uint64_t wait_ms = 150;
    auto writer = [&]() -> void * {
      wrc = weft_rwlock_timedwrlock(&l, weft_deadline_after(wait_ms * kMs));
      wdone = true;
      return nullptr;
    };
    weft_thread_t *wt = SpawnCall(&writer);
    // the writer is queued once tryrdlock fails
    ASSERT_TRUE(Eventually([&] {
      int rc = weft_rwlock_tryrdlock(&l);
      if (rc == 0) weft_rwlock_unlock(&l);
      return rc == WEFT_EBUSY;
    }));
    std::atomic<int> in{0}, started{0};
    const int nweft = 3, nos = 1;
    auto reader = [&] {
      started.fetch_add(1);
      EXPECT_EQ(weft_rwlock_rdlock(&l), 0);
      in.fetch_add(1);
      EXPECT_EQ(weft_rwlock_unlock(&l), 0);
    };
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < nweft; ++i)
      ts.push_back(SpawnCall(&reader));
    std::thread os(reader);
    // every reader queued behind the writer, unless the writer gave up first (a
    // slow host): then they got in and the check below holds anyway
    ASSERT_TRUE(YieldUntil([&] { return Waiters(&l) == 1 + nweft + nos || wdone.load(); }));
    bool covered = !wdone.load();  // the readers queued while the writer still waited
    if (covered) {
      EXPECT_EQ(in.load(), 0) << "readers jumped a queued writer";
    }
    // the writer times out (we still hold the read lock); the readers get in
    EXPECT_TRUE(WaitFor([&] { return wdone.load(); }, 30));
    EXPECT_EQ(wrc.load(), WEFT_ETIMEDOUT);
    EXPECT_TRUE(WaitFor([&] { return in.load() == nweft + nos; }, 30))
        << "readers queued behind a timed-out writer were not let in (" << in.load() << " of "
        << nweft + nos << ")";
    Join(wt);
    for (auto *t : ts) Join(t);
    os.join();
    ASSERT_EQ(weft_rwlock_unlock(&l), 0);
    EXPECT_EQ(weft_rwlock_trywrlock(&l), 0);
    EXPECT_EQ(weft_rwlock_unlock(&l), 0);
    EXPECT_EQ(weft_rwlock_destroy(&l), 0);
  }
}

// The readers' limit holds for a reader queued behind a writer too: with 2^29 - 1
// readers inside, a weft reader that queued behind a (timed) writer fails with
// WEFT_EAGAIN when the writer gives up, as tryrdlock does. It was let in: the count
// wrapped to 0, and a writer then took the lock while every reader still held it.
// (2^29 read locks take seconds: one VP count only, and not where every atomic
// operation is slowed down many times, under TSan or an emulator.)
TEST_P(RwLockTest, QueuedReaderPastTheReadersLimitGetsEagain) {
#if defined(WEFT_TEST_TSAN) || defined(WEFT_TEST_EMULATED)
  GTEST_SKIP() << "2^29 read locks: too slow here";
#endif
  if (nvps() != 1) GTEST_SKIP() << "once is enough";
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  long n = 0;
  int rc;
  while ((rc = weft_rwlock_tryrdlock(&l)) == 0) n++;
  ASSERT_EQ(rc, WEFT_EAGAIN);
  ASSERT_EQ(n, (1L << 29) - 1);
  std::atomic<int> wrc{1}, rrc{1};
  auto writer = [&]() -> void * {
    wrc = weft_rwlock_timedwrlock(&l, weft_deadline_after(100 * kMs));
    return nullptr;
  };
  weft_thread_t *wt = SpawnCall(&writer);
  ASSERT_TRUE(YieldUntil([&] { return Waiters(&l) == 1 || wrc.load() != 1; }));
  auto reader = [&]() -> void * {
    rrc = weft_rwlock_rdlock(&l);
    return nullptr;
  };
  weft_thread_t *rt = SpawnCall(&reader);
  Join(wt);
  Join(rt);
  EXPECT_EQ(wrc.load(), WEFT_ETIMEDOUT);
  EXPECT_EQ(rrc.load(), WEFT_EAGAIN) << "a queued reader entered past the readers' limit";
  EXPECT_EQ(weft_rwlock_trywrlock(&l), WEFT_EBUSY) << "a writer entered while readers held the lock";
  EXPECT_EQ(weft_rwlock_tryrdlock(&l), WEFT_EAGAIN);
  EXPECT_EQ(weft_rwlock_destroy(&l), WEFT_EBUSY);  // l is left held: nothing else uses it
}

// A timed-out writer in the middle of a queue of writers: the writers queued
// behind it still get the lock when the holder leaves.
TEST_P(RwLockTest, TimedOutWriterDoesNotStrandQueue) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  ASSERT_EQ(weft_rwlock_wrlock(&l), 0);
  std::atomic<int> got{0}, timed_out{0}, started{0};
  auto forever = [&] {
    started.fetch_add(1);
    EXPECT_EQ(weft_rwlock_wrlock(&l), 0);
    got.fetch_add(1);
    EXPECT_EQ(weft_rwlock_unlock(&l), 0);
  };
  auto timed = [&](bool read) {
    started.fetch_add(1);
    uint64_t d = weft_deadline_after(3 * kMs);
    int rc = read ? weft_rwlock_timedrdlock(&l, d) : weft_rwlock_timedwrlock(&l, d);
    EXPECT_EQ(rc, WEFT_ETIMEDOUT);
    if (rc == WEFT_ETIMEDOUT) timed_out.fetch_add(1);
    if (rc == 0) weft_rwlock_unlock(&l);
  };
  std::thread os([&] { forever(); });
  auto body = [&](int i) {
    if (i == 3) forever();
    else timed(i == 1);
  };
  struct Arg {
    decltype(body) *f;
    int i;
  } args[4] = {{&body, 0}, {&body, 1}, {&body, 2}, {&body, 3}};
  std::vector<weft_thread_t *> ts;
  for (auto &a : args)
    ts.push_back(Spawn(+[](void *p) -> void * {
      auto *x = static_cast<Arg *>(p);
      (*x->f)(x->i);
      return nullptr;
    }, &a));
  EXPECT_TRUE(WaitFor([&] { return timed_out.load() == 3; }, 30));
  EXPECT_EQ(got.load(), 0);
  EXPECT_EQ(weft_rwlock_unlock(&l), 0);
  for (auto *t : ts) Join(t);
  EXPECT_TRUE(WaitFor([&] { return got.load() == 2; }, 30)) << "waiters stranded";
  os.join();
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Timed read/write locks racing with unlocks: every call returns 0 or
// WEFT_ETIMEDOUT, writers' counts are exact, the lock is free at the end.
TEST_P(RwLockTest, TimedLocksRaceWithUnlock) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  long counter = 0;  // l (write)
  std::atomic<long> wins{0}, bad{0}, violations{0};
  std::atomic<int> writers_in{0}, readers_in{0}, last{0};
  const long iters = Scaled(3000, 20);
  RunMixed(2 * nvps() + 2, 2, [&](int i) {
    std::minstd_rand rng(static_cast<unsigned>(i) + 99u);
    bool weft = weft_self() != nullptr;
    for (long k = 0; k < iters; ++k) {
      bool write = (rng() % 3) == 0;
      uint64_t d = weft_deadline_after(rng() % (100 * kUs));
      int rc = write ? weft_rwlock_timedwrlock(&l, d) : weft_rwlock_timedrdlock(&l, d);
      if (rc == WEFT_ETIMEDOUT) continue;
      if (rc != 0) {
        bad.fetch_add(1);
        last.store(rc);
        continue;
      }
      if (write) {
        if (writers_in.fetch_add(1) != 0 || readers_in.load() != 0) violations.fetch_add(1);
        long c = counter;
        if (weft && (k & 3) == 0) weft_yield();
        counter = c + 1;
        wins.fetch_add(1);
        writers_in.fetch_sub(1);
      } else {
        readers_in.fetch_add(1);
        if (writers_in.load() != 0) violations.fetch_add(1);
        if (weft && (k & 3) == 0) weft_yield();
        readers_in.fetch_sub(1);
      }
      if (weft_rwlock_unlock(&l) != 0) bad.fetch_add(1);
    }
  });
  EXPECT_EQ(bad.load(), 0) << Err(last.load());
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(counter, wins.load());
  EXPECT_EQ(weft_rwlock_trywrlock(&l), 0) << "lock not free after the race";
  EXPECT_EQ(weft_rwlock_unlock(&l), 0);
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// A plain OS waiter is woken to compete, and arrivals may take the lock before it
// runs, but only a bounded number of times per wait (rwlock.h: it is handed the
// lock after 8 losses). Two adversaries, a weft thread and an OS thread, take
// turns: the holder keeps a read lock until the OS writer is queued (a second
// tryrdlock fails only while someone waits) and asleep in the kernel (its /proc
// state is S; not waited for if unreadable), then leaves, waking the writer,
// while the other spins on tryrdlock, which succeeds only while the woken writer
// has not come back: it then holds the lock until the writer has queued again,
// and so on. They count how often they got in ahead of one wrlock call. If the
// writer starved, the watchdog (kStarvedAfter) stops them and the count fails.
TEST_P(RwLockTest, BargersDoNotStarveOsWaiter) {
  weft_rwlock_t l = WEFT_RWLOCK_INIT;
  const int rounds = 3;
  const auto stop = std::chrono::steady_clock::now() + kStarvedAfter;
  std::atomic<long> writer_entries{0}, writer_tid{0}, seen{-1};
  std::atomic<bool> writer_done{false}, started{false};
  std::atomic<int> holder{0};  // the adversary holding the read lock; -1 while handing over
  std::atomic<int> ready{-1};  // the adversary waiting to barge
  std::atomic<long> last{-1}, run{0}, max_run{0};
  auto done = [&] { return writer_done.load() || std::chrono::steady_clock::now() >= stop; };
  auto pause = [] {
    if (weft_self() != nullptr) weft_yield();
    else std::this_thread::yield();
  };
  // Whether the writer's kernel thread sleeps, or its state cannot be read.
  auto writer_asleep = [&] {
    std::ifstream f("/proc/self/task/" + std::to_string(writer_tid.load()) + "/stat");
    std::string stat;
    if (!std::getline(f, stat)) return true;
    size_t p = stat.rfind(')');
    return p == std::string::npos || p + 2 >= stat.size() || stat[p + 2] == 'S';
  };
  RunMixed(1, 2, [&](int i) {
    if (i == 2) {  // the plain OS writer
      writer_tid = static_cast<long>(syscall(SYS_gettid));
      WaitFor([&] { return started.load(); });
      for (int r = 0; r < rounds; ++r) {
        EXPECT_EQ(weft_rwlock_wrlock(&l), 0);
        writer_entries.fetch_add(1);
        EXPECT_EQ(weft_rwlock_unlock(&l), 0);
      }
      writer_done = true;
      return;
    }
    // the adversaries: 0 (weft) holds first, 1 (OS)
    bool holding = i == 0;
    if (holding) {
      EXPECT_EQ(weft_rwlock_rdlock(&l), 0);
      started = true;
    }
    while (!done()) {
      if (holding) {
        if (weft_rwlock_tryrdlock(&l) == 0) {  // nobody waits yet
          EXPECT_EQ(weft_rwlock_unlock(&l), 0);
          pause();
          continue;
        }
        if (ready.load() != 1 - i || !writer_asleep()) {
          pause();
          continue;
        }
        seen = writer_entries.load();
        holder = -1;
        holding = false;
        EXPECT_EQ(weft_rwlock_unlock(&l), 0);  // the last reader: the writer is woken
        continue;
      }
      ready = i;
      while (holder.load() != -1 && !done()) pause();
      if (holder.load() != -1) break;
      ready = -1;
      long s = seen.load();
      for (;;) {  // barge
        if (weft_rwlock_tryrdlock(&l) == 0) {
          if (writer_entries.load() == s) {  // got in ahead of the waiting writer
            run = s == last.load() ? run.load() + 1 : 1;
            last = s;
            max_run = std::max(max_run.load(), run.load());
          }
          break;
        }
        if (writer_entries.load() != s || done()) {  // the writer got in first
          EXPECT_EQ(weft_rwlock_rdlock(&l), 0);
          break;
        }
        pause();
      }
      holding = true;
      holder = i;
    }
    if (holding) {
      EXPECT_EQ(weft_rwlock_unlock(&l), 0);
    }
  });
  EXPECT_TRUE(writer_done.load());
  EXPECT_LE(max_run.load(), 8) << "an OS waiter was overtaken " << max_run.load() << " times in one wait";
  EXPECT_EQ(weft_rwlock_destroy(&l), 0);
}

// Unlock when not held: WEFT_EPERM; static initializer, all-zero object, EINVAL,
// destroy busy (held in either mode, or waited on).
TEST_P(RwLockTest, EpermInitDestroy) {
  weft_rwlock_t a = WEFT_RWLOCK_INIT, z, in;
  std::memset(&z, 0, sizeof z);
  std::memset(&in, 0x5A, sizeof in);
  ASSERT_EQ(weft_rwlock_init(&in), 0);
  for (weft_rwlock_t *l : {&a, &z, &in}) {
    EXPECT_EQ(weft_rwlock_unlock(l), WEFT_EPERM);
    EXPECT_EQ(weft_rwlock_rdlock(l), 0);
    EXPECT_EQ(weft_rwlock_rdlock(l), 0);
    EXPECT_EQ(weft_rwlock_destroy(l), WEFT_EBUSY) << "read-held";
    EXPECT_EQ(weft_rwlock_unlock(l), 0);
    EXPECT_EQ(weft_rwlock_unlock(l), 0);
    EXPECT_EQ(weft_rwlock_unlock(l), WEFT_EPERM) << "after the last reader left";
    EXPECT_EQ(weft_rwlock_wrlock(l), 0);
    EXPECT_EQ(weft_rwlock_destroy(l), WEFT_EBUSY) << "write-held";
    EXPECT_EQ(weft_rwlock_unlock(l), 0);
    EXPECT_EQ(weft_rwlock_unlock(l), WEFT_EPERM) << "after the writer left";
    EXPECT_EQ(weft_rwlock_destroy(l), 0);
  }
  EXPECT_EQ(weft_rwlock_init(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_destroy(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_rdlock(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_wrlock(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_tryrdlock(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_trywrlock(nullptr), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_timedrdlock(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_timedwrlock(nullptr, weft_deadline_after(kMs)), WEFT_EINVAL);
  EXPECT_EQ(weft_rwlock_unlock(nullptr), WEFT_EINVAL);
}

}  // namespace
