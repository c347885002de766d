// tests/unit/tstate_test.cc - per-thread C library state that travels with a weft
// thread across switches and migrations between kernel threads: errno, and the C++
// runtime's exception state (caught exceptions, std::uncaught_exceptions()).
//
// Each test runs at 1 VP (every switch changes the thread on one kernel thread) and
// at 2 VPs (threads also resume on the other kernel thread). Without the switch
// carrying the state, a thread reads errno set by another thread, `throw;` rethrows
// another thread's exception (or, on a kernel thread with none, terminates), and
// std::uncaught_exceptions() counts other threads' exceptions.
//
// errno is read and written through GetErrno/SetErrno in code that also makes weft
// calls: GCC and Clang keep errno's address across calls in one function (glibc
// declares __errno_location const), and after a migration that address is the other
// kernel thread's errno. docs/design.md "State that travels with a thread" states the
// rule; ReadAfterCallWithoutHelpers checks the plain pattern it allows.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <exception>
#include <weft/weft.hpp>

#include "sync_test_util.h"
#include "weft_test.h"

using weft_test::Scaled;

namespace {

// errno through a fresh __errno_location() call every time (the asm hides it).
__attribute__((noinline)) int GetErrno() {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));
  return *p;
}
__attribute__((noinline)) void SetErrno(int v) {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));
  *p = v;
}

class TstateTest : public weft_test::VpTest {
 protected:
  weft_sync_test::Watchdog watchdog_{120.0};
};

constexpr int kThreads = 8;

// ---- errno -------------------------------------------------------------------------

struct ErrnoRun {
  weft_mutex_t m;
  long rounds = 0;
  std::atomic<long> bad{0};       // reads that saw another value
  std::atomic<long> moved{0};     // resumes on another VP than the call started on
  std::atomic<long> first_bad{0}; // the first wrong value seen (0: none)
  void Check(int want, int vp_before) {
    int got = GetErrno();
    if (got != want) {
      bad.fetch_add(1);
      long z = 0;
      first_bad.compare_exchange_strong(z, got);
    }
    if (weft_vp_self() != vp_before) moved.fetch_add(1);
  }
  // Runs call() (a weft call that may switch, or block and migrate) and checks
  // that errno is still `want` after it.
  template <class F>
  void Across(int want, F call) {
    int vp = weft_vp_self();
    call();
    Check(want, vp);
  }
  void ExpectNoneBad() const {
    EXPECT_EQ(bad.load(), 0) << "first wrong errno seen: " << first_bad.load()
                             << " (resumes on another VP: " << moved.load() << ")";
  }
};

struct ErrnoArg {
  ErrnoRun *run;
  int id;
};

// Every thread sets its own errno (distinct values; thread 0 by a failed write, EBADF,
// thread 1 by a failed open, ENOENT), then takes a contended mutex, yields holding
// it (the others block in weft_mutex_lock meanwhile) and releases it.
void *ErrnoMutexBody(void *p) {
  auto *a = static_cast<ErrnoArg *>(p);
  ErrnoRun *run = a->run;
  for (long r = 0; r < run->rounds; r++) {
    int want;
    if (a->id == 0) {
      if (write(-1, "x", 1) != -1) run->bad.fetch_add(1);
      want = EBADF;
    } else if (a->id == 1) {
      if (open("/nonexistent/weft-tstate", O_RDONLY) != -1) run->bad.fetch_add(1);
      want = ENOENT;
    } else {
      want = 1000 + a->id * 100 + static_cast<int>(r % 100);
      SetErrno(want);
    }
    run->Across(want, [run] { weft_mutex_lock(&run->m); });
    run->Across(want, weft_yield);
    run->Across(want, [run] { weft_mutex_unlock(&run->m); });
  }
  return nullptr;
}

void RunErrnoThreads(ErrnoRun &run, weft_thread_fn body, const weft_attr_t *attr = nullptr) {
  ErrnoArg args[kThreads];
  weft_thread_t *t[kThreads];
  for (int i = 0; i < kThreads; i++) {
    args[i] = {&run, i};
    t[i] = weft_test::Spawn(body, &args[i], attr);
  }
  for (auto *x : t) weft_test::Join(x);
}

TEST_P(TstateTest, ErrnoSurvivesBlockingMutexLock) {
  ErrnoRun run;
  run.rounds = Scaled(2000, 20);
  ASSERT_EQ(weft_mutex_init(&run.m), 0);
  RunErrnoThreads(run, ErrnoMutexBody);
  run.ExpectNoneBad();
  weft_mutex_destroy(&run.m);
}

void *ErrnoYieldBody(void *p) {
  auto *a = static_cast<ErrnoArg *>(p);
  for (long r = 0; r < a->run->rounds; r++) {
    int want = 5000 + a->id * 1000 + static_cast<int>(r % 1000);
    SetErrno(want);
    a->run->Across(want, weft_yield);
  }
  return nullptr;
}

TEST_P(TstateTest, ErrnoSurvivesYield) {
  ErrnoRun run;
  run.rounds = Scaled(5000, 50);
  RunErrnoThreads(run, ErrnoYieldBody);
  run.ExpectNoneBad();
}

// A child that overwrites errno, then waits (yielding) until its joiner blocks.
void *ErrnoChild(void *p) {
  SetErrno(static_cast<int>(weft_test::I(p)));
  if (!weft_test::YieldUntil([] { return weft_test::Waiters(weft_self()) == 1; })) return p;
  SetErrno(static_cast<int>(weft_test::I(p)) + 1);
  return nullptr;
}

void *ErrnoJoinSleepBody(void *p) {
  auto *a = static_cast<ErrnoArg *>(p);
  for (long r = 0; r < a->run->rounds; r++) {
    int want = 9000 + a->id * 100 + static_cast<int>(r % 100);
    SetErrno(want);
    weft_thread_t *c = nullptr;
    int rc = 0;
    a->run->Across(want, [&] { rc = weft_create(&c, nullptr, ErrnoChild, weft_test::P(77000 + a->id)); });
    if (rc != 0) {
      a->run->bad.fetch_add(1);
      return nullptr;
    }
    void *cr = nullptr;
    a->run->Across(want, [&] { weft_join(c, &cr); });  // blocks: the child waits for that
    if (cr != nullptr) a->run->bad.fetch_add(1);      // the child never saw its joiner
    a->run->Across(want, [] { weft_sleep_ns(100000); });
  }
  return nullptr;
}

TEST_P(TstateTest, ErrnoSurvivesJoinAndSleep) {
  ErrnoRun run;
  run.rounds = Scaled(100, 5);
  RunErrnoThreads(run, ErrnoJoinSleepBody);
  run.ExpectNoneBad();
}

// The pattern of ordinary code, without the helpers: a failing call, a weft call that
// blocks, then errno, read for the first time in the function after that call.
__attribute__((noinline)) int FailThenLock(weft_mutex_t *m) {
  if (write(-1, "x", 1) != -1) return -1;
  weft_mutex_lock(m);
  int e = errno;
  weft_mutex_unlock(m);
  return e;
}

struct PlainArg {
  weft_mutex_t *m;
  long rounds;
  std::atomic<long> *bad;
};

void *PlainBody(void *p) {
  auto *a = static_cast<PlainArg *>(p);
  for (long r = 0; r < a->rounds; r++) {
    if (FailThenLock(a->m) != EBADF) a->bad->fetch_add(1);
    weft_yield();
  }
  return nullptr;
}

void *OverwriterBody(void *p) {
  auto *a = static_cast<PlainArg *>(p);
  for (long r = 0; r < a->rounds; r++) {
    weft_mutex_lock(a->m);
    SetErrno(ENOENT);
    weft_yield();  // holding m: the other threads block in FailThenLock's lock
    SetErrno(ENOENT);
    weft_mutex_unlock(a->m);
  }
  return nullptr;
}

TEST_P(TstateTest, ReadAfterCallWithoutHelpers) {
  weft_mutex_t m;
  ASSERT_EQ(weft_mutex_init(&m), 0);
  std::atomic<long> bad{0};
  PlainArg arg{&m, Scaled(2000, 20), &bad};
  weft_thread_t *t[kThreads];
  for (int i = 0; i < kThreads; i++)
    t[i] = weft_test::Spawn(i % 2 ? OverwriterBody : PlainBody, &arg);
  for (auto *x : t) weft_test::Join(x);
  EXPECT_EQ(bad.load(), 0) << "errno after a blocking lock was not EBADF";
  weft_mutex_destroy(&m);
}

TEST_P(TstateTest, NewThreadStartsWithErrnoZero) {
  SetErrno(EBADF);
  for (int i = 0; i < 16; i++) {
    void *r = weft_test::RunInThread([] {
      int e = GetErrno();
      SetErrno(ENOENT);  // left behind in a control block that a later thread reuses
      return weft_test::P(e);
    });
    EXPECT_EQ(weft_test::I(r), 0) << "thread " << i;
  }
  EXPECT_EQ(GetErrno(), EBADF);
}

TEST_P(TstateTest, ErrnoSurvivesWireAndUnwire) {
  void *r = weft_test::RunInThread([] {
    SetErrno(4242);
    if (weft_wire() != 0) return weft_test::P(-1);
    int on_wire = GetErrno();  // on the wire kernel thread
    SetErrno(4343);
    if (weft_unwire() != 0) return weft_test::P(-2);
    int back = GetErrno();  // on a VP again
    return weft_test::P((on_wire == 4242 && back == 4343) ? 1 : (on_wire * 100000 + back));
  });
  EXPECT_EQ(weft_test::I(r), 1);
}

// ---- C++ exception state -------------------------------------------------------------

struct Tagged {
  int id;
  long round;
};

struct CxxRun {
  long rounds = 0;
  std::atomic<long> bad{0};
  std::atomic<long> checks{0};
  // Runs body(i, r) for every round r in kThreads weft::threads (i: the thread's
  // index) and joins them.
  template <class F>
  void Run(F body) {
    std::vector<weft::thread> ts;
    for (int i = 0; i < kThreads; i++)
      ts.emplace_back([this, &body, i] {
        for (long r = 0; r < rounds; r++) body(i, r);
      });
    for (auto &t : ts) t.join();
  }
  // Every thread made its check every round, and none went wrong.
  void ExpectAllGood(const char *what) const {
    EXPECT_EQ(checks.load(), kThreads * rounds);
    EXPECT_EQ(bad.load(), 0) << what;
  }
};

// throw; inside a catch block, after yields, rethrows the thread's own exception.
TEST_P(TstateTest, RethrowAfterYieldRethrowsOwnException) {
  CxxRun run;
  run.rounds = Scaled(1000, 20);
  run.Run([&run](int i, long r) {
    try {
      throw Tagged{i, r};
    } catch (...) {
      weft::this_thread::yield();
      weft::this_thread::yield();
      try {
        throw;
      } catch (const Tagged &t) {
        if (t.id != i || t.round != r) run.bad.fetch_add(1);
      } catch (...) {
        run.bad.fetch_add(1);
      }
      run.checks.fetch_add(1);
    }
    if (std::uncaught_exceptions() != 0 || std::current_exception()) run.bad.fetch_add(1);
  });
  run.ExpectAllGood("a rethrow gave another thread's exception");
}

// A destructor that yields during unwinding sees its own thread's count of
// exceptions in flight, before and after the switches, while other threads run with
// none (and others unwind their own).
struct YieldingGuard {
  CxxRun *run;
  int want;
  ~YieldingGuard() {
    if (std::uncaught_exceptions() != want) run->bad.fetch_add(1);
    weft::this_thread::yield();
    if (std::uncaught_exceptions() != want) run->bad.fetch_add(1);
    weft::this_thread::yield();
    if (std::uncaught_exceptions() != want) run->bad.fetch_add(1);
    run->checks.fetch_add(1);
  }
};

TEST_P(TstateTest, UncaughtExceptionsInYieldingDestructor) {
  CxxRun run;
  run.rounds = Scaled(1000, 20);
  run.Run([&run](int i, long r) {
    if (i % 2 == 0) {
      try {
        YieldingGuard g{&run, 1};
        throw Tagged{i, r};
      } catch (const Tagged &t) {
        if (t.id != i || t.round != r) run.bad.fetch_add(1);
      }
    } else {
      YieldingGuard g{&run, 0};
    }
    if (std::uncaught_exceptions() != 0) run.bad.fetch_add(1);
  });
  run.ExpectAllGood("std::uncaught_exceptions() was another thread's");
}

// Nested handlers with switches between them: the inner exception is current inside
// the inner handler, the outer one again after it.
TEST_P(TstateTest, NestedCatchWithYields) {
  CxxRun run;
  run.rounds = Scaled(500, 10);
  run.Run([&run](int i, long r) {
    try {
      throw Tagged{i, r};
    } catch (const Tagged &outer) {
      weft::this_thread::yield();
      try {
        throw Tagged{-i - 1, -r};
      } catch (const Tagged &inner) {
        weft::this_thread::yield();
        try {
          throw;
        } catch (const Tagged &t) {
          if (t.id != -i - 1 || t.round != -r) run.bad.fetch_add(1);
        }
      }
      weft::this_thread::yield();
      try {
        throw;
      } catch (const Tagged &t) {
        if (t.id != i || t.round != r || &t != &outer) run.bad.fetch_add(1);
      }
      run.checks.fetch_add(1);
    }
  });
  run.ExpectAllGood("a rethrow in a nested handler gave another exception");
}

// A thread created inside a handler starts with no exception; its parent keeps its own
// across the join (which blocks).
TEST_P(TstateTest, NewThreadStartsWithoutException) {
  int child_state = -1;
  bool parent_ok = false;
  try {
    throw Tagged{7, 7};
  } catch (const Tagged &) {
    weft::thread c([&child_state] {
      // until the parent blocks in the join (watchdog: the fixture's)
      weft_test::YieldUntil([] { return weft_test::Waiters(weft_self()) == 1; });
      child_state = (std::current_exception() ? 1 : 0) + (std::uncaught_exceptions() ? 2 : 0);
    });
    c.join();
    try {
      throw;
    } catch (const Tagged &t) {
      parent_ok = t.id == 7;
    }
  }
  EXPECT_EQ(child_state, 0);
  EXPECT_TRUE(parent_ok);
  EXPECT_FALSE(std::current_exception());
}

// The hand-over to a wire kernel thread and back carries the handler's exception.
TEST_P(TstateTest, RethrowAcrossWire) {
  void *r = weft_test::RunInThread([] {
    intptr_t ok = 0;
    try {
      throw Tagged{3, 4};
    } catch (const Tagged &) {
      {
        weft::this_thread::wired w;
        try {
          throw;
        } catch (const Tagged &t) {
          ok += t.id == 3;
        }
      }
      try {
        throw;
      } catch (const Tagged &t) {
        ok += t.round == 4;
      }
    }
    return weft_test::P(ok);
  });
  EXPECT_EQ(weft_test::I(r), 2);
}

// Threads in the all-registers switch mode, whose saved frames are rewritten after the
// switch (weft__ctx_fp_save moves the frame and the exception words below it).
void *AllModeBody(void *p) {
  auto *a = static_cast<ErrnoArg *>(p);
  ErrnoRun *run = a->run;
  for (long r = 0; r < run->rounds; r++) {
    int want = 3000 + a->id * 100 + static_cast<int>(r % 100);
    SetErrno(want);
    try {
      throw Tagged{a->id, r};
    } catch (...) {
      run->Across(want, [run] {
        weft_mutex_lock(&run->m);  // contended: blocks
        weft_yield();
        weft_mutex_unlock(&run->m);
      });
      try {
        throw;
      } catch (const Tagged &t) {
        if (t.id != a->id || t.round != r) run->bad.fetch_add(1);
      }
    }
    run->Across(want, weft_yield);
  }
  return nullptr;
}

TEST_P(TstateTest, AllRegistersModeCarriesState) {
  ErrnoRun run;
  run.rounds = Scaled(1000, 20);
  ASSERT_EQ(weft_mutex_init(&run.m), 0);
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.switch_mode = WEFT_SWITCH_ALL;
  RunErrnoThreads(run, AllModeBody, &attr);
  run.ExpectNoneBad();
  weft_mutex_destroy(&run.m);
}

INSTANTIATE_TEST_SUITE_P(Vps, TstateTest, ::testing::Values(1, 2), ::weft_test::VpName);

}  // namespace
