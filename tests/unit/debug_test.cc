// tests/unit/debug_test.cc - thread names (weft_set_name/weft_get_name and the C++
// wrappers) and weft_dump: every live thread with its name and state, what a
// blocked thread waits on (mutex, condition, semaphore, future, join, sleep) by
// kind and address, backtraces of parked threads, from a weft thread and from a
// plain OS thread; weft_dump_fd; the dump-on-signal handler; the deadlock report's
// listing through the dump.
#include <weft/debug.h>
#include <weft/future.h>
#include <weft/io.h>
#include <weft/weft.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <thread>
#include <vector>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <regex>
#include <sstream>
#include <string>

#include "sync_test_util.h"

using namespace weft_sync_test;

// The scene's thread functions have external linkage, so that -rdynamic exports
// them and dladdr names them in the dump's backtraces.
struct Scene {
  weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_cond_t c = WEFT_COND_INIT;
  weft_mutex_t cm = WEFT_MUTEX_INIT;
  weft_sem_t s = WEFT_SEM_INIT(0);
  weft_future_t fu = WEFT_FUTURE_INIT;
  std::atomic<int> in{0};
  int cond_go = 0;
  weft_thread_t *t_mutex = nullptr, *t_cond = nullptr, *t_sem = nullptr, *t_future = nullptr,
                *t_join = nullptr;
};

extern "C" void *OnMutex(void *a) {
  auto *s = static_cast<Scene *>(a);
  weft_set_name(nullptr, "on-mutex");
  s->in.fetch_add(1);
  weft_mutex_lock(&s->m);
  weft_mutex_unlock(&s->m);
  return nullptr;
}
extern "C" void *OnCond(void *a) {
  auto *s = static_cast<Scene *>(a);
  weft_set_name(nullptr, "on-cond");
  weft_mutex_lock(&s->cm);
  s->in.fetch_add(1);
  while (!s->cond_go) weft_cond_wait(&s->c, &s->cm);
  weft_mutex_unlock(&s->cm);
  return nullptr;
}
extern "C" void *OnSem(void *a) {
  auto *s = static_cast<Scene *>(a);
  weft_set_name(nullptr, "on-sem");
  s->in.fetch_add(1);
  weft_sem_wait(&s->s);
  return nullptr;
}
extern "C" void *OnFuture(void *a) {
  auto *s = static_cast<Scene *>(a);
  weft_set_name(nullptr, "on-future");
  s->in.fetch_add(1);
  weft_future_wait(&s->fu, nullptr);
  return nullptr;
}
extern "C" void *OnJoin(void *a) {
  auto *s = static_cast<Scene *>(a);
  weft_set_name(nullptr, "on-join");
  s->in.fetch_add(1);
  weft_join(s->t_sem, nullptr);
  return nullptr;
}

namespace {

class DebugTest : public SyncVpTest {};
WEFT_INSTANTIATE_VPS(DebugTest);

TEST_P(DebugTest, Names) {
  char buf[WEFT_NAME_MAX];
  ASSERT_EQ(weft_get_name(nullptr, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "") << "no name at first";
  EXPECT_EQ(weft_set_name(nullptr, "main-thread"), 0);
  ASSERT_EQ(weft_get_name(weft_self(), buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "main-thread");
  // truncation: WEFT_NAME_MAX - 1 bytes kept; a small buffer gets len - 1
  std::string longname(100, 'n');
  EXPECT_EQ(weft_set_name(nullptr, longname.c_str()), 0);
  ASSERT_EQ(weft_get_name(nullptr, buf, sizeof buf), 0);
  EXPECT_EQ(std::string(buf), std::string(WEFT_NAME_MAX - 1, 'n'));
  char small[4];
  ASSERT_EQ(weft_get_name(nullptr, small, sizeof small), 0);
  EXPECT_STREQ(small, "nnn");
  // a shorter name replaces a longer one completely
  EXPECT_EQ(weft_set_name(nullptr, "ab"), 0);
  ASSERT_EQ(weft_get_name(nullptr, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "ab");
  EXPECT_EQ(weft_set_name(nullptr, nullptr), 0);
  ASSERT_EQ(weft_get_name(nullptr, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "");
  EXPECT_EQ(weft_get_name(nullptr, nullptr, 4), WEFT_EINVAL);
  EXPECT_EQ(weft_get_name(nullptr, buf, 0), WEFT_EINVAL);
  // another thread's name, set by this thread and read by that one (which waits for
  // the set: with several VPs an idle VP may run it at once, before the set)
  static std::atomic<int> named;
  named = 0;
  weft_thread_t *t = Spawn(+[](void *) -> void * {
    while (!named.load()) weft_yield();
    char b[WEFT_NAME_MAX];
    weft_get_name(nullptr, b, sizeof b);
    return P(std::strcmp(b, "child") == 0 ? 1 : 0);
  });
  EXPECT_EQ(weft_set_name(t, "child"), 0);
  named = 1;
  EXPECT_EQ(Join(t), P(1));
  // a reused control block starts without a name
  t = Spawn(+[](void *) -> void * {
    char b[WEFT_NAME_MAX];
    weft_get_name(nullptr, b, sizeof b);
    return P(b[0] == 0 ? 1 : 0);
  });
  EXPECT_EQ(Join(t), P(1));
  // plain OS threads have no name of their own
  std::thread os([] {
    char b[8] = "x";
    EXPECT_EQ(weft_set_name(nullptr, "os"), WEFT_EPERM);
    EXPECT_EQ(weft_get_name(nullptr, b, sizeof b), WEFT_EPERM);
    EXPECT_STREQ(b, "");
  });
  os.join();
}

TEST_P(DebugTest, CppNames) {
  weft::promise<void> go;
  auto f = go.get_future().share();
  weft::thread t([f] {
    f.wait();
    EXPECT_EQ(weft::this_thread::get_name(), "cpp-worker");
    weft::this_thread::set_name(std::string("renamed"));
  });
  t.set_name("cpp-worker");
  EXPECT_EQ(t.get_name(), "cpp-worker");
  go.set_value();
  t.join();
  EXPECT_EQ(t.get_name(), "") << "not joinable";
  EXPECT_THROW(t.set_name("x"), std::system_error);
}

// ---- weft_dump -------------------------------------------------------------------

std::string Hex(const void *p) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)(uintptr_t)p);
  return b;
}

// weft_dump's text (its return code not checked: the callers look at the text).
std::string DumpText() {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return std::string();
  weft_dump(f);
  fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

// Waits until every thread of the scene is parked where the test put it: the dump
// itself says so (no time assumed). A thread shows as blocked from the moment it
// announces its wait, a little before its context is saved (weft_dump is a snapshot
// taken without stopping the VPs); where backtraces reach the threads' functions,
// the dump must also show them in those functions' frames.
std::string DumpWhenParked(Scene &s) {
  std::string out;
  EXPECT_TRUE(YieldUntil([&] {
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return false;
    int rc = weft_dump(f);
    fclose(f);
    out.assign(buf, len);
    free(buf);
    if (rc != 0) return false;
    return s.in.load() == 5 &&
           out.find("\"on-mutex\": blocked on mutex " + Hex(&s.m)) != std::string::npos &&
           out.find("\"on-cond\": blocked on condition " + Hex(&s.c)) != std::string::npos &&
           out.find("\"on-sem\": blocked on semaphore " + Hex(&s.s)) != std::string::npos &&
           out.find("\"on-future\": blocked on future " + Hex(&s.fu)) != std::string::npos &&
           out.find("\"on-join\": blocked in weft_join on thread " +
                    std::to_string(weft_thread_id(s.t_sem))) != std::string::npos
#if !defined(WEFT_CONTEXT_UCONTEXT) && (defined(WEFT_TEST_FRAME_POINTERS) || defined(WEFT_TEST_LIBUNWIND))
           && out.find(" OnMutex+0x") != std::string::npos && out.find(" OnCond+0x") != std::string::npos &&
           out.find(" OnJoin+0x") != std::string::npos
#endif
        ;
  }, 60.0)) << out;
  return out;
}

void StartScene(Scene &s) {
  weft_mutex_lock(&s.m);
  s.t_mutex = Spawn(OnMutex, &s);
  s.t_cond = Spawn(OnCond, &s);
  s.t_sem = Spawn(OnSem, &s);
  s.t_future = Spawn(OnFuture, &s);
  s.t_join = Spawn(OnJoin, &s);
}

void EndScene(Scene &s) {
  weft_mutex_unlock(&s.m);
  weft_mutex_lock(&s.cm);
  s.cond_go = 1;
  weft_cond_broadcast(&s.c);
  weft_mutex_unlock(&s.cm);
  weft_sem_signal(&s.s);
  weft_future_set(&s.fu, nullptr);
  for (weft_thread_t *t : {s.t_mutex, s.t_cond, s.t_future, s.t_join}) Join(t);
}

TEST_P(DebugTest, DumpShowsEveryThreadAndWhatItWaitsOn) {
  Scene s;
  weft_set_name(nullptr, "test-main");
  StartScene(s);
  std::string out = DumpWhenParked(s);
  EXPECT_NE(out.find("weft: dump: " + std::to_string(nvps()) + " VPs, backtraces: "),
            std::string::npos) << out;
#if defined(WEFT_CONTEXT_UCONTEXT)
  EXPECT_NE(out.find(" VPs, backtraces: none (ucontext build)\n"), std::string::npos) << out;
#elif defined(WEFT_TEST_LIBUNWIND)
  EXPECT_NE(out.find(" VPs, backtraces: libunwind\n"), std::string::npos) << out;
#else
  EXPECT_NE(out.find(" VPs, backtraces: frame pointers\n"), std::string::npos) << out;
#endif
  EXPECT_NE(out.find("thread " + std::to_string(weft_thread_id(weft_self())) +
                     " \"test-main\" (main): running on VP "), std::string::npos) << out;
  EXPECT_NE(out.find("weft: dump: 6 threads\n"), std::string::npos) << out;
#ifndef WEFT_CONTEXT_UCONTEXT  // the ucontext build prints no backtraces
  // each parked thread has a backtrace: at least its resume address
  std::regex parked("\"on-mutex\": blocked on mutex 0x[0-9a-f]+\n    #0 0x[0-9a-f]+");
  EXPECT_TRUE(std::regex_search(out, parked)) << out;
  // symbolized with dladdr: at least the module and offset (weft's own functions
  // are hidden, so they have no name for dladdr)
  std::regex sym("\n    #0 0x[0-9a-f]+( [A-Za-z_][A-Za-z0-9_]*\\+0x[0-9a-f]+)? \\([^+]+\\+0x[0-9a-f]+\\)\n");
  EXPECT_TRUE(std::regex_search(out, sym)) << out;
#ifdef WEFT_TEST_LIBUNWIND
  // libunwind unwinds weft's frames without frame pointers (a release build of weft
  // has none) from the saved context, and names weft's hidden functions from the
  // symbol table: the backtraces reach the threads' functions through them
  EXPECT_NE(out.find(" weft__wait_on+0x"), std::string::npos) << out;
  EXPECT_NE(out.find(" weft_join+0x"), std::string::npos) << out;
#endif
#if defined(WEFT_TEST_FRAME_POINTERS) || defined(WEFT_TEST_LIBUNWIND)
  // with frame pointers in weft as well, or with libunwind, the backtrace reaches
  // the thread's function (exported by -rdynamic)
  EXPECT_NE(out.find(" OnMutex+0x"), std::string::npos) << out;
  EXPECT_NE(out.find(" OnCond+0x"), std::string::npos) << out;
  EXPECT_NE(out.find(" OnJoin+0x"), std::string::npos) << out;
#endif
#endif
  EndScene(s);
  weft_set_name(nullptr, nullptr);
}

TEST_P(DebugTest, DumpFromPlainOsThreadAndFd) {
  Scene s;
  StartScene(s);
  DumpWhenParked(s);
  std::string out;
  std::thread os([&] {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(weft_dump(f), 0);
    fclose(f);
    out.assign(buf, len);
    free(buf);
    // the fd form: raw addresses, no symbols; read back through a pipe by a
    // second OS thread (the dump may exceed the pipe's buffer)
    std::string piped;
    std::thread reader([&] {
      char b[4096];
      ssize_t n;
      while ((n = read(fds[0], b, sizeof b)) > 0) piped.append(b, (size_t)n);
    });
    EXPECT_EQ(weft_dump_fd(fds[1]), 0);
    close(fds[1]);
    reader.join();
    close(fds[0]);
    EXPECT_NE(piped.find("\"on-sem\": blocked on semaphore " + Hex(&s.s)), std::string::npos) << piped;
    EXPECT_EQ(weft_dump_fd(-1), WEFT_EINVAL);
  });
  os.join();
  EXPECT_NE(out.find("\"on-future\": blocked on future " + Hex(&s.fu)), std::string::npos) << out;
  EXPECT_EQ(weft_dump(nullptr), WEFT_EINVAL);
  EndScene(s);
}

// A dump longer than a pipe's buffer, to a pipe in non-blocking mode (weft's own I/O
// calls set O_NONBLOCK on pipes: a stderr shared with stdout) whose reader is slow:
// every line arrives (write's EAGAIN cut it short at 64 KiB), from weft_dump_fd and
// from weft_dump on a FILE of that descriptor.
TEST_P(DebugTest, DumpToANonBlockingPipeIsWhole) {
  if (nvps() != 1) GTEST_SKIP() << "one configuration is enough";
  weft_sem_t sem = WEFT_SEM_INIT(0);
  const int n = 1500;  // about 60 bytes a line: over 64 KiB
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < n; i++)
    ts.push_back(Spawn(+[](void *p) -> void * {
      weft_sem_wait(static_cast<weft_sem_t *>(p));
      return nullptr;
    }, &sem));
  ASSERT_TRUE(WaitForWaiters(&sem, n));
  for (int form = 0; form < 2; form++) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK), 0);
    std::string piped;
    std::thread reader([&] {
      usleep(100000);  // the writer fills the pipe first
      char b[4096];
      ssize_t k;
      while ((k = read(fds[0], b, sizeof b)) > 0) piped.append(b, (size_t)k);
    });
    if (form == 0) {
      EXPECT_EQ(weft_dump_fd(fds[1]), 0);
    } else {
      FILE *f = fdopen(fds[1], "w");
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(weft_dump(f), 0);
      fclose(f);  // closes fds[1]
    }
    if (form == 0) close(fds[1]);
    reader.join();
    close(fds[0]);
    EXPECT_GT(piped.size(), 65536u) << "form " << form;
    EXPECT_NE(piped.find("weft: dump: " + std::to_string(n + 1) + " threads\n"), std::string::npos)
        << "form " << form << ": the dump was cut short at " << piped.size() << " bytes";
  }
  for (int i = 0; i < n; i++) weft_sem_signal(&sem);
  for (auto *t : ts) Join(t);
}

// A sleeping thread, a new thread that has not run, a finished one not yet joined.
TEST_P(DebugTest, DumpStates) {
  weft_future_t stop = WEFT_FUTURE_INIT;
  std::atomic<int> in{0};
  struct A { weft_future_t *stop; std::atomic<int> *in; } a{&stop, &in};
  weft_thread_t *sleeper = Spawn(+[](void *p) -> void * {
    auto *x = static_cast<A *>(p);
    weft_set_name(nullptr, "sleeper");
    x->in->store(1);
    while (!weft_future_is_set(x->stop)) weft_sleep_ns(1000000);
    return nullptr;
  }, &a);
  weft_thread_t *done = Spawn(+[](void *) -> void * { return nullptr; });
  std::string out;
  ASSERT_TRUE(YieldUntil([&] {
    out = DumpText();
    return out.find("\"sleeper\": sleeping") != std::string::npos &&
           out.find("thread " + std::to_string(weft_thread_id(done)) +
                    ": finished, not yet joined") != std::string::npos;
  }, 60.0)) << out;
  weft_future_set(&stop, nullptr);
  Join(sleeper);
  Join(done);
  // a wired thread blocked in the kernel (here on a semaphore, as a plain OS thread
  // blocks): it shows as wired, with no backtrace from its stale saved context
  {
    weft_sem_t sem = WEFT_SEM_INIT(0);
    std::atomic<int> wired{0};
    struct W { weft_sem_t *sem; std::atomic<int> *wired; } wa{&sem, &wired};
    weft_thread_t *wt = Spawn(+[](void *p) -> void * {
      auto *x = static_cast<W *>(p);
      weft_set_name(nullptr, "wired");
      if (weft_wire() != 0) return P(1);
      x->wired->store(1);
      weft_sem_wait(x->sem);
      return P(weft_unwire());
    }, &wa);
    ASSERT_TRUE(YieldUntil([&] { return wired.load() == 1; }, 60.0));
    ASSERT_TRUE(YieldUntil([&] {
      out = DumpText();
      return out.find("\"wired\": wired, on kernel thread ") != std::string::npos;
    }, 60.0)) << out;
    size_t at = out.find("\"wired\": wired");
    size_t eol = out.find('\n', at);
    EXPECT_TRUE(eol == std::string::npos || out.compare(eol + 1, 5, "    #") != 0)
        << "a backtrace was printed for the wired thread:\n" << out;
    ASSERT_EQ(weft_sem_signal(&sem), 0);
    EXPECT_EQ(Join(wt), nullptr);
  }
  if (nvps() == 1) {
    // on one VP a new thread cannot run before this one switches
    weft_thread_t *fresh = Spawn(+[](void *) -> void * { return nullptr; });
    weft_set_name(fresh, "fresh");
    out = DumpText();
    // "VP 0 (spare N)": on a loaded machine the system monitor may have handed VP 0's
    // queue to a spare kernel thread (its own kernel thread seemed stuck)
    const std::string vp0 = "VP 0( \\(spare [0-9]+\\))?";
    EXPECT_TRUE(std::regex_search(out, std::regex("\"fresh\": new, ready on " + vp0))) << out;
    Join(fresh);
    // a thread a signal made ready keeps its waiting word until it runs: the dump
    // finds it in the VP's hand-off slot and says ready, not blocked
    weft_sem_t sem = WEFT_SEM_INIT(0);
    weft_thread_t *woken = Spawn(+[](void *p) -> void * {
      weft_set_name(nullptr, "woken");
      weft_sem_wait(static_cast<weft_sem_t *>(p));
      return nullptr;
    }, &sem);
    ASSERT_TRUE(WaitForWaiters(&sem, 1));
    ASSERT_EQ(weft_sem_signal(&sem), 0);
    out = DumpText();
    EXPECT_TRUE(std::regex_search(out, std::regex("\"woken\": ready on " + vp0 +
                                                  " \\(woken; it was blocked on semaphore " +
                                                  Hex(&sem) + "\\)")))
        << out;
    Join(woken);
  }
}

// The pool's job for DumpShowsIoAndBlockingWaits: waits until the test lets it go
// (a plain OS thread on the pool blocks on the semaphore as a kernel thread does).
extern "C" void *DebugTestPoolJob(void *p) {
  weft_sem_wait(static_cast<weft_sem_t *>(p));
  return nullptr;
}

// Threads parked in weft's I/O and in weft_blocking say on what: the descriptor
// and the direction, and the function the pool runs (named: it is exported).
TEST_P(DebugTest, DumpShowsIoAndBlockingWaits) {
  int rd[2], wr[2];
  ASSERT_EQ(pipe(rd), 0);
  ASSERT_EQ(pipe2(wr, O_NONBLOCK), 0);
  char fill[4096] = {};
  while (write(wr[1], fill, sizeof fill) > 0) {}  // full: a write must wait
  weft_sem_t release = WEFT_SEM_INIT(0);
  struct A { int rd, wr; weft_sem_t *release; } a{rd[0], wr[1], &release};
  weft_thread_t *reader = Spawn(+[](void *p) -> void * {
    auto *x = static_cast<A *>(p);
    weft_set_name(nullptr, "io-reader");
    char c;
    return P(weft_read(x->rd, &c, 1));
  }, &a);
  weft_thread_t *writer = Spawn(+[](void *p) -> void * {
    auto *x = static_cast<A *>(p);
    weft_set_name(nullptr, "io-writer");
    return P(weft_fd_wait(x->wr, POLLOUT));
  }, &a);
  weft_thread_t *pooled = Spawn(+[](void *p) -> void * {
    auto *x = static_cast<A *>(p);
    weft_set_name(nullptr, "pooled");
    return P(weft_blocking(DebugTestPoolJob, x->release, nullptr));
  }, &a);
  std::string out;
  EXPECT_TRUE(YieldUntil([&] {
    out = DumpText();
    return out.find("\"io-reader\": waiting in weft I/O for fd " + std::to_string(rd[0]) +
                    " to be readable") != std::string::npos &&
           out.find("\"io-writer\": waiting in weft I/O for fd " + std::to_string(wr[1]) +
                    " to be writable") != std::string::npos &&
           out.find("\"pooled\": in weft_blocking, running " + Hex((void *)DebugTestPoolJob) +
                    " DebugTestPoolJob on a pool kernel thread") != std::string::npos;
  }, 60.0)) << out;
  ASSERT_EQ(write(rd[1], "x", 1), 1);
  char drain[4096];
  while (read(wr[0], drain, sizeof drain) > 0) {}
  ASSERT_EQ(weft_sem_signal(&release), 0);
  EXPECT_EQ(I(Join(reader)), 1);
  EXPECT_NE(I(Join(writer)) & POLLOUT, 0);
  EXPECT_EQ(I(Join(pooled)), 0);
  for (int fd : {rd[0], rd[1], wr[0], wr[1]}) close(fd);
}

// A thread in switch mode ALL parks with a rewritten frame (weft__ctx_fp_save) that
// resumes through weft__ctx_fp_resume: its backtrace starts at the real resume
// address, not at that stub, and (libunwind or frame pointers) reaches its function.
extern "C" void weft__ctx_fp_resume(void);
extern "C" void *FpAllWaiter(void *a) {
  auto *s = static_cast<Scene *>(a);
  weft_set_name(nullptr, "fp-all");
  if (weft_switch_mode_set(WEFT_SWITCH_ALL) != 0) return P(1);
  s->in.fetch_add(1);
  weft_mutex_lock(&s->m);
  weft_mutex_unlock(&s->m);
  return nullptr;
}

TEST_P(DebugTest, DumpOfSwitchModeAllThread) {
#ifdef WEFT_CONTEXT_UCONTEXT
  GTEST_SKIP() << "the ucontext build prints no backtraces";
#else
  Scene s;
  weft_mutex_lock(&s.m);
  weft_thread_t *t = Spawn(FpAllWaiter, &s);
  std::string out, mine;
  ASSERT_TRUE(YieldUntil([&] {
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return false;
    weft_dump(f);
    fclose(f);
    out.assign(buf, len);
    free(buf);
    // blocked, and (where backtraces reach it) seen in its function's frame: it shows
    // as blocked a little before its context is saved (see DumpWhenParked)
    size_t at = out.find("\"fp-all\": blocked on mutex " + Hex(&s.m) + "\n    #0 ");
    if (at == std::string::npos) return false;
    mine = out.substr(at, out.find("\nthread ", at) - at);  // its own lines only
#if defined(WEFT_TEST_FRAME_POINTERS) || defined(WEFT_TEST_LIBUNWIND)
    return mine.find(" FpAllWaiter+0x") != std::string::npos;
#else
    return true;
#endif
  }, 60.0)) << out;
  weft_mutex_unlock(&s.m);
  EXPECT_EQ(Join(t), nullptr);
  // (where backtraces reach it, the wait above required its function's frame)
  EXPECT_EQ(mine.find("#0 " + Hex((void *)weft__ctx_fp_resume) + " "), std::string::npos) << mine;
#endif
}

// weft_dump_on_signal: the handler writes the dump to standard error.
TEST_P(DebugTest, DumpOnSignal) {
  EXPECT_EQ(weft_dump_on_signal(SIGKILL), WEFT_EINVAL);
  EXPECT_EQ(weft_dump_on_signal(-3), WEFT_EINVAL);
  EXPECT_EQ(weft_dump_on_signal(SIGSEGV), WEFT_EINVAL) << "a fault signal would loop";
  ASSERT_EQ(weft_dump_on_signal(SIGUSR2), 0);
  weft_set_name(nullptr, "signalled");
  char path[] = "/tmp/weft_dump_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  raise(SIGUSR2);
  dup2(saved, 2);
  close(saved);
  EXPECT_EQ(weft_dump_on_signal(0), 0);
  std::string out;
  char b[4096];
  ssize_t n;
  lseek(fd, 0, SEEK_SET);
  while ((n = read(fd, b, sizeof b)) > 0) out.append(b, (size_t)n);
  close(fd);
  EXPECT_NE(out.find("\"signalled\" (main): running on VP"), std::string::npos) << out;
  weft_set_name(nullptr, nullptr);
}

// Raises sig with standard error sent to a file; returns what was written.
std::string RaiseCapturingStderr(int sig) {
  char path[] = "/tmp/weft_dump_test_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  raise(sig);
  dup2(saved, 2);
  close(saved);
  std::string out;
  char b[4096];
  ssize_t n;
  lseek(fd, 0, SEEK_SET);
  while ((n = read(fd, b, sizeof b)) > 0) out.append(b, (size_t)n);
  close(fd);
  return out;
}

bool HandlerIsDefault(int sig) {
  struct sigaction sa;
  sigaction(sig, nullptr, &sa);
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

// weft_config_t.dump_signal: bad values are refused by weft_init; a good one is
// installed by weft_init in place of the dump signal installed before, and
// weft_shutdown puts that one back.
TEST(DebugConfigTest, DumpSignalField) {
  alarm(60);
  weft_config_t c;
  weft_config_init(&c);
  EXPECT_EQ(c.dump_signal, 0) << "off by default";
  c.nvps = 2;
  for (int bad : {-1, SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGILL, SIGFPE, 32, SIGRTMIN - 1, NSIG, 1 << 20}) {
    c.dump_signal = bad;
    EXPECT_EQ(weft_init(&c), WEFT_EINVAL) << "dump_signal " << bad;
    EXPECT_FALSE(weft_is_running());
  }
  // a dump signal installed before (as WEFT_DUMP_SIGNAL would)
  ASSERT_EQ(weft_dump_on_signal(SIGUSR1), 0);
  ASSERT_TRUE(HandlerIsDefault(SIGUSR2));
  c.dump_signal = SIGUSR2;
  ASSERT_EQ(weft_init(&c), 0);
  weft_set_name(nullptr, "config-signalled");
  std::string out = RaiseCapturingStderr(SIGUSR2);
  EXPECT_NE(out.find("weft: dump: 2 VPs, backtraces: "), std::string::npos) << out;
  EXPECT_NE(out.find("\"config-signalled\" (main): running on VP"), std::string::npos) << out;
  EXPECT_TRUE(HandlerIsDefault(SIGUSR1)) << "one dump signal at a time";
  weft_set_name(nullptr, nullptr);
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_TRUE(HandlerIsDefault(SIGUSR2)) << "weft_shutdown removes it";
  EXPECT_FALSE(HandlerIsDefault(SIGUSR1)) << "and puts back the one before";
  EXPECT_EQ(weft_dump_on_signal(0), 0);
  EXPECT_TRUE(HandlerIsDefault(SIGUSR1));
  // with none installed before, shutdown leaves none
  ASSERT_EQ(weft_init(&c), 0);
  EXPECT_FALSE(HandlerIsDefault(SIGUSR2));
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_TRUE(HandlerIsDefault(SIGUSR2));
  alarm(0);
}

// The deadlock report lists the threads through the dump: kinds, names, addresses.
void MutexDeadlock(int nvps) {
  alarm(30);
  if (InitWithVps(nvps) != 0) std::_Exit(3);
  static weft_mutex_t m = WEFT_MUTEX_INIT;
  weft_mutex_lock(&m);
  weft_thread_t *t;
  weft_create(&t, nullptr, +[](void *) -> void * {
    weft_set_name(nullptr, "stuck");
    weft_mutex_lock(&m);
    return nullptr;
  }, nullptr);
  weft_join(t, nullptr);
  std::_Exit(5);
}

class DebugDeathTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Vps, DebugDeathTest, ::testing::Values(1, 2), ::weft_test::VpName);

TEST_P(DebugDeathTest, DeadlockReportShowsTheDump) {
#ifdef WEFT_TEST_EMULATED
  GTEST_SKIP() << "no kernel-thread count under a user-mode emulator (no report)";
#endif
  SetDeathTestStyle();
  EXPECT_DEATH(MutexDeadlock(GetParam()),
               "deadlock!\n(.|\n)*weft: thread [0-9]+ \"stuck\": blocked on a synchronization "
               "object(.|\n)*weft: dump:(.|\n)*\\(main\\): blocked in weft_join on thread "
               "[0-9]+\n(.|\n)*\"stuck\": blocked on mutex 0x[0-9a-f]+\n");
}

}  // namespace
