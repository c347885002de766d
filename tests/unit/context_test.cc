// tests/unit/context_test.cc - the context-switch primitives of src/arch/, alone
// (assembly on x86-64 and AArch64, or the ucontext fallback), without the runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <cstdlib>
#include <vector>

extern "C" {
#include "arch/context.h"
}

#include "weft_test.h"  // WEFT_TEST_SANITIZED

namespace {

constexpr size_t kStack = 64 * 1024;

// These tests call the raw primitives, which do not tell the sanitizers about the
// stack switch (the runtime's wrapper does, and the rest of the suite runs through
// it); under a sanitizer they would only test the sanitizer's confusion.
#ifdef WEFT_TEST_SANITIZED
#define SKIP_IF_SANITIZED() GTEST_SKIP() << "raw switches are not annotated for sanitizers"
#else
#define SKIP_IF_SANITIZED() (void)0
#endif

// A coroutine on its own malloc'd stack, switched to and from a "main" context
// that lives on the test's own stack.
struct Coro {
  weft_ctx_t main_ctx{};
  weft_ctx_t ctx{};
  alignas(16) unsigned char main_storage[WEFT__CTX_SELF_SIZE + 16];
  std::vector<unsigned char> stack = std::vector<unsigned char>(kStack);
  char *lo() { return reinterpret_cast<char *>(stack.data()); }
  char *hi() {
    return reinterpret_cast<char *>(
        (reinterpret_cast<uintptr_t>(stack.data()) + kStack - 64) & ~static_cast<uintptr_t>(63));
  }
  Coro(void (*entry)(void *), void *arg) {
    weft__ctx_init_self(&main_ctx, main_storage);
    weft__ctx_make(&ctx, lo(), hi(), entry, arg);
  }
};

// ---- ping-pong: control alternates exactly --------------------------------------------

struct PingPong {
  Coro *c;
  std::vector<int> trace;
};

void PingPongEntry(void *p) {
  auto *pp = static_cast<PingPong *>(p);
  for (int i = 0;; ++i) {
    pp->trace.push_back(100 + i);
    weft__ctx_switch(&pp->c->ctx, &pp->c->main_ctx, nullptr, nullptr);
  }
}

// Switching back and forth alternates control exactly, and the coroutine's state
// survives each switch.
TEST(Context, PingPongAlternates) {
  SKIP_IF_SANITIZED();
  PingPong pp;
  Coro c(PingPongEntry, &pp);
  pp.c = &c;
  for (int i = 0; i < 5; ++i) {
    pp.trace.push_back(i);
    weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);
  }
  std::vector<int> want = {0, 100, 1, 101, 2, 102, 3, 103, 4, 104};
  EXPECT_EQ(pp.trace, want);
}

// ---- the continuation ----------------------------------------------------------------

struct ContProbe {
  Coro *c;
  void *from_sp_seen = nullptr;     // main_ctx.sp as seen by the continuation
  uintptr_t cont_stack_addr = 0;    // address of a local of the continuation
  int resumed = 0;                  // how often the coroutine body resumed
  int order_ok = 1;                 // continuation ran before the resumed code
  int cont_runs = 0;
};

void ContFn(void *p) {
  auto *probe = static_cast<ContProbe *>(p);
  int local = 0;
  probe->cont_stack_addr = reinterpret_cast<uintptr_t>(&local);
  probe->from_sp_seen = probe->c->main_ctx.sp;
  if (probe->cont_runs != probe->resumed) probe->order_ok = 0;
  probe->cont_runs++;
}

void ContEntry(void *p) {
  auto *probe = static_cast<ContProbe *>(p);
  for (;;) {
    probe->resumed++;
    weft__ctx_switch(&probe->c->ctx, &probe->c->main_ctx, nullptr, nullptr);
  }
}

// The continuation runs after the old context is saved (its sp is already stored),
// on the new context's stack, and before the new context resumes; also for the
// first switch to a fresh context.
TEST(Context, ContinuationRunsOnNewStackAfterSave) {
  SKIP_IF_SANITIZED();
  ContProbe probe;
  Coro c(ContEntry, &probe);
  probe.c = &c;
  for (int i = 0; i < 3; ++i) {
#ifndef WEFT_CONTEXT_UCONTEXT
    // assembly: the switch itself stores the saved sp; the continuation must see it
    // (with ucontext, sp is the ucontext's storage, fixed at init)
    c.main_ctx.sp = nullptr;
#endif
    weft__ctx_switch(&c.main_ctx, &c.ctx, ContFn, &probe);
    EXPECT_NE(probe.from_sp_seen, nullptr) << "continuation ran before the save";
    EXPECT_GE(probe.cont_stack_addr, reinterpret_cast<uintptr_t>(c.lo()));
    EXPECT_LT(probe.cont_stack_addr, reinterpret_cast<uintptr_t>(c.hi()))
        << "continuation did not run on the new stack";
  }
  EXPECT_EQ(probe.cont_runs, 3);
  EXPECT_EQ(probe.resumed, 3);
  EXPECT_EQ(probe.order_ok, 1);
}

// ---- switch-and-unlock ----------------------------------------------------------------

struct UnlockProbe {
  Coro *c;
  std::atomic<uint32_t> word{1};
  uint32_t seen_by_coro = 99;
};

void UnlockEntry(void *p) {
  auto *u = static_cast<UnlockProbe *>(p);
  for (;;) {
    u->seen_by_coro = u->word.load();
    weft__ctx_switch(&u->c->ctx, &u->c->main_ctx, nullptr, nullptr);
  }
}

// weft__ctx_switch_unlock stores 0 to the word before the new context resumes.
TEST(Context, SwitchUnlockReleasesWordFirst) {
  SKIP_IF_SANITIZED();
  UnlockProbe u;
  Coro c(UnlockEntry, &u);
  u.c = &c;
  // the first switch to a fresh context goes through its trampoline; use the
  // general switch for that one, then the unlock variant
  weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);
  u.word.store(1);
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "layout");
  weft__ctx_switch_unlock(&c.main_ctx, &c.ctx, reinterpret_cast<uint32_t *>(&u.word));
  EXPECT_EQ(u.seen_by_coro, 0u);
  EXPECT_EQ(u.word.load(), 0u);
}

// ---- callee-saved state survives a switch ---------------------------------------------

struct Clobber {
  Coro *c;
};

// Uses many integer and floating-point values across the switch back, so that the
// compiler keeps some of them in callee-saved registers (x86-64: rbx, rbp, r12-r15;
// AArch64 also d8-d15), and scribbles over them on its side.
void ClobberEntry(void *p) {
  auto *cl = static_cast<Clobber *>(p);
  for (unsigned k = 1;; ++k) {
    volatile uint64_t sink = 0;
    uint64_t a = k * 3, b = k * 5, c = k * 7, d = k * 11, e = k * 13, f = k * 17;
    double x = k * 0.5, y = k * 0.25, z = k * 0.125, w = k * 0.0625;
    weft__ctx_switch(&cl->c->ctx, &cl->c->main_ctx, nullptr, nullptr);
    sink = a + b + c + d + e + f + static_cast<uint64_t>(x + y + z + w);
    (void)sink;
  }
}

TEST(Context, CalleeSavedValuesSurvive) {
  SKIP_IF_SANITIZED();
  Clobber cl;
  Coro c(ClobberEntry, &cl);
  cl.c = &c;
  uint64_t a = 0x1111, b = 0x2222, c1 = 0x3333, d = 0x4444, e = 0x5555, f = 0x6666;
  double x = 1.5, y = 2.5, z = 3.5, w = 4.5;
  for (int i = 0; i < 100; ++i) {
    weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);
    // each value is live across the call: kept in a callee-saved register or spilled
    ASSERT_EQ(a, 0x1111u + i);
    ASSERT_EQ(b, 0x2222u + i);
    ASSERT_EQ(c1, 0x3333u + i);
    ASSERT_EQ(d, 0x4444u + i);
    ASSERT_EQ(e, 0x5555u + i);
    ASSERT_EQ(f, 0x6666u + i);
    ASSERT_EQ(x, 1.5 + i);
    ASSERT_EQ(y, 2.5 + i);
    ASSERT_EQ(z, 3.5 + i);
    ASSERT_EQ(w, 4.5 + i);
    a++, b++, c1++, d++, e++, f++, x += 1, y += 1, z += 1, w += 1;
  }
}

// ---- errno and the C++ exception state travel with the context -----------------------
// (src/arch/tstate.c). The assembly has two switches: without the C++ state (_c, what
// a program without a C++ runtime gets) and with it (_cxx); each test selects one in
// weft__ctx_ops, as weft_init would, and builds its coroutine after that (the
// trampoline comes from there too). The ucontext fallback has one switch, which
// carries the C++ state once weft__ctx_tstate_init has found the runtime.

__attribute__((noinline)) int GetErrno() {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));  // a fresh __errno_location() every time
  return *p;
}
__attribute__((noinline)) void SetErrno(int v) {
  int *p = &errno;
  __asm__ volatile("" : "+r"(p));
  *p = v;
}

// Selects the switch with (cxx) or without the C++ state for one test.
class StateVariant {
 public:
  explicit StateVariant(bool cxx) {
    weft__ctx_tstate_init();  // finds this test binary's C++ runtime
#ifndef WEFT_CONTEXT_UCONTEXT
    saved_ = weft__ctx_ops;
    if (!cxx)
      weft__ctx_ops = {weft__ctx_switch_c, weft__ctx_switch_unlock_c, weft__ctx_trampoline};
#else
    (void)cxx;
#endif
  }
  ~StateVariant() {
#ifndef WEFT_CONTEXT_UCONTEXT
    weft__ctx_ops = saved_;
#endif
  }

 private:
#ifndef WEFT_CONTEXT_UCONTEXT
  weft__ctx_ops_t saved_{};
#endif
};

struct ErrnoProbe {
  Coro *c;
  std::vector<int> seen;  // errno the coroutine finds each time it runs
};

void SetErrno99(void *) { SetErrno(99); }  // a continuation that changes errno

void ErrnoEntry(void *p) {
  auto *e = static_cast<ErrnoProbe *>(p);
  for (int i = 0;; ++i) {
    e->seen.push_back(GetErrno());
    SetErrno(200 + i);
    if (i % 2)
      weft__ctx_switch(&e->c->ctx, &e->c->main_ctx, SetErrno99, nullptr);
    else
      weft__ctx_switch(&e->c->ctx, &e->c->main_ctx, nullptr, nullptr);
  }
}

class ContextState : public ::testing::TestWithParam<bool> {};

// Each side finds its own errno after every switch (through both entry points, with
// and without a continuation, which may itself change errno); a new context starts
// with 0.
TEST_P(ContextState, ErrnoTravelsWithContext) {
  SKIP_IF_SANITIZED();
  StateVariant v(GetParam());
  ErrnoProbe e;
  Coro c(ErrnoEntry, &e);
  e.c = &c;
  std::atomic<uint32_t> word{1};
  for (int i = 0; i < 6; ++i) {
    SetErrno(100 + i);
    if (i == 0 || i % 3 == 0)
      weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);
    else if (i % 3 == 1)
      weft__ctx_switch(&c.main_ctx, &c.ctx, SetErrno99, nullptr);
    else
      weft__ctx_switch_unlock(&c.main_ctx, &c.ctx, reinterpret_cast<uint32_t *>(&word));
    EXPECT_EQ(GetErrno(), 100 + i) << "switch " << i;
  }
  std::vector<int> want = {0, 200, 201, 202, 203, 204};
  EXPECT_EQ(e.seen, want);
}

struct EhProbe {
  Coro *c;
  int rethrown = 0;         // what the coroutine's `throw;` gave, after a switch
  int uncaught_seen = -1;   // std::uncaught_exceptions() in its destructor, after one
  int clean_at_start = 0;   // no exception when it first ran
};

struct SwitchingGuard {
  EhProbe *e;
  ~SwitchingGuard() {
    weft__ctx_switch(&e->c->ctx, &e->c->main_ctx, nullptr, nullptr);
    e->uncaught_seen = std::uncaught_exceptions();
  }
};

void EhEntry(void *p) {
  auto *e = static_cast<EhProbe *>(p);
  e->clean_at_start = !std::current_exception() && std::uncaught_exceptions() == 0;
  try {
    throw 1;
  } catch (int) {
    weft__ctx_switch(&e->c->ctx, &e->c->main_ctx, nullptr, nullptr);
    try {
      throw;
    } catch (int v) {
      e->rethrown = v;
    }
  }
  try {
    SwitchingGuard g{e};
    throw 3;
  } catch (int) {
  }
  for (;;) weft__ctx_switch(&e->c->ctx, &e->c->main_ctx, nullptr, nullptr);
}

// The coroutine is suspended inside a handler, and later inside a destructor run by
// unwinding, while the main side has an exception of its own: `throw;` and
// std::uncaught_exceptions() give each side its own.
TEST(ContextCxx, ExceptionStateTravelsWithContext) {
  SKIP_IF_SANITIZED();
  StateVariant v(true);
  ASSERT_TRUE(weft__ctx_tstate_cxx()) << "no C++ runtime found in a C++ test";
  EhProbe e;
  int main_rethrown = 0, main_uncaught = -1;
  bool main_clean = false;
  try {
    throw 2;
  } catch (int) {
    Coro c(EhEntry, &e);  // made inside our handler: starts with none the less
    e.c = &c;
    weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);  // it is in its handler
    weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);  // in its destructor
    main_uncaught = std::uncaught_exceptions();
    try {
      throw;
    } catch (int x) {
      main_rethrown = x;
    }
    weft__ctx_switch(&c.main_ctx, &c.ctx, nullptr, nullptr);  // finishes its unwinding
  }
  main_clean = !std::current_exception() && std::uncaught_exceptions() == 0;
  EXPECT_EQ(e.clean_at_start, 1);
  EXPECT_EQ(e.rethrown, 1);
  EXPECT_EQ(e.uncaught_seen, 1);
  EXPECT_EQ(main_rethrown, 2);
  EXPECT_EQ(main_uncaught, 0);
  EXPECT_TRUE(main_clean);
}

#ifdef WEFT_CONTEXT_UCONTEXT
INSTANTIATE_TEST_SUITE_P(Ucontext, ContextState, ::testing::Values(true));
#else
INSTANTIATE_TEST_SUITE_P(Asm, ContextState, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &i) {
                           return std::string(i.param ? "cxx" : "c");
                         });
#endif

}  // namespace
