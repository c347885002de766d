// tests/unit/switch_mode_test.cc - context-switch modes (OpenThreads §3.1.3): a thread
// in WEFT_SWITCH_ALL keeps its own floating-point control state (rounding mode:
// MXCSR and the x87 control word on x86-64, FPCR on AArch64) across every kind of
// switch, next to threads that change theirs; a WEFT_SWITCH_INTEGER thread does not
// (it sees what the last thread on its VP left), except in the ucontext build,
// whose swapcontext saves the FP environment of every context.
#include <fenv.h>

#include <atomic>

#include "weft_test.h"

using namespace weft_test;

namespace {

// The rounding mode as the FP control register(s) say (fegetround) and as the
// SSE/NEON unit computes it: 1/3 rounded up is larger than rounded down.
volatile double g_one = 1.0, g_three = 3.0;
double Third() { return g_one / g_three; }

struct ModeCheck {
  int want;               // the thread's rounding mode
  std::atomic<int> bad{0};  // times it found another
  double third_want = 0;  // 1/3 computed in its mode at the start
};

// Checks the caller still has c's rounding mode, by both measures.
void Check(ModeCheck *c) {
  if (fegetround() != c->want || Third() != c->third_want) c->bad.fetch_add(1);
}

// Sets the caller's rounding mode to c->want and records 1/3 in it.
void Enter(ModeCheck *c) {
  fesetround(c->want);
  c->third_want = Third();
}

struct Pair {
  ModeCheck keeper;               // the thread under test
  int rounds = 200;
  std::atomic<bool> done{false};
};

// The disturber: sets another rounding mode before every switch.
void *Disturber(void *arg) {
  auto *p = static_cast<Pair *>(arg);
  while (!p->done.load()) {
    fesetround(FE_DOWNWARD);
    weft_yield();
  }
  fesetround(FE_TONEAREST);
  return nullptr;
}

void *Keeper(void *arg) {
  auto *p = static_cast<Pair *>(arg);
  Enter(&p->keeper);
  for (int i = 0; i < p->rounds; i++) {
    weft_yield();
    Check(&p->keeper);
  }
  p->done.store(true);
  fesetround(FE_TONEAREST);
  return nullptr;
}

class SwitchModeTest : public VpTest {};
WEFT_INSTANTIATE_VPS(SwitchModeTest);

// An ALL-mode thread keeps FE_UPWARD across yields while a disturber sets
// FE_DOWNWARD before each of its own switches (on the same VP with 1 VP; with more
// VPs both migrate, and the keeper may resume after the disturber anywhere).
TEST_P(SwitchModeTest, AllModeKeepsRoundingModeAcrossYields) {
  Pair p;
  p.keeper.want = FE_UPWARD;
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.switch_mode = WEFT_SWITCH_ALL;
  weft_thread_t *d = Spawn(Disturber, &p);
  weft_thread_t *k = Spawn(Keeper, &p, &attr);
  Join(k);
  Join(d);
  EXPECT_EQ(p.keeper.bad.load(), 0);
  fesetround(FE_TONEAREST);
}

// The same with the mode set by the thread itself, and across blocking switches:
// a semaphore wait, a join, a sleep, a migration.
struct BlockCase {
  ModeCheck keeper;
  weft_sem_t sem;
  std::atomic<bool> done{false};
};

void *BlockingKeeper(void *arg) {
  auto *c = static_cast<BlockCase *>(arg);
  EXPECT_EQ(weft_switch_mode_get(), WEFT_SWITCH_INTEGER);
  EXPECT_EQ(weft_switch_mode_set(WEFT_SWITCH_ALL), 0);
  EXPECT_EQ(weft_switch_mode_get(), WEFT_SWITCH_ALL);
  Enter(&c->keeper);
  for (int i = 0; i < 50; i++) {
    weft_sem_wait(&c->sem);  // blocks: the poster changed the mode before posting
    Check(&c->keeper);
    weft_thread_t *t = weft_self();
    (void)t;
    weft_thread_t *j = nullptr;
    weft_create(&j, nullptr, +[](void *) -> void * {
      fesetround(FE_TOWARDZERO);
      weft_yield();
      return nullptr;
    }, nullptr);
    weft_join(j, nullptr);  // blocks (or not) while the child changes the mode
    Check(&c->keeper);
    if (i % 10 == 0) {
      weft_sleep_ns(1000);
      Check(&c->keeper);
      weft_set_affinity(i / 10);  // a migration when there are several VPs
      Check(&c->keeper);
    }
  }
  c->done.store(true);
  fesetround(FE_TONEAREST);
  return nullptr;
}

// An ALL-mode thread that changes its rounding mode while wired (weft/wire.h: on a
// kernel thread of its own) keeps the new mode when it unwires onto a VP whose last
// thread left another one: the unwire switch saves its FP control state too.
void *WiredKeeper(void *arg) {
  auto *p = static_cast<Pair *>(arg);
  EXPECT_EQ(weft_switch_mode_set(WEFT_SWITCH_ALL), 0);
  fesetround(FE_UPWARD);
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ(weft_wire(), 0);
    p->keeper.want = i % 2 ? FE_UPWARD : FE_TOWARDZERO;
    Enter(&p->keeper);  // changed on the wired kernel thread
    EXPECT_EQ(weft_unwire(), 0);
    for (int k = 0; k < 20; k++) {
      weft_yield();
      Check(&p->keeper);
    }
  }
  p->done.store(true);
  fesetround(FE_TONEAREST);
  return nullptr;
}

TEST_P(SwitchModeTest, AllModeKeepsRoundingModeSetWhileWired) {
  Pair p;
  weft_thread_t *d = Spawn(Disturber, &p);
  weft_thread_t *k = Spawn(WiredKeeper, &p);
  Join(k);
  Join(d);
  EXPECT_EQ(p.keeper.bad.load(), 0);
  fesetround(FE_TONEAREST);
}

TEST_P(SwitchModeTest, AllModeKeepsRoundingModeAcrossBlocking) {
  BlockCase c;
  c.keeper.want = FE_UPWARD;
  ASSERT_EQ(weft_sem_init(&c.sem, 0), 0);
  weft_thread_t *k = Spawn(BlockingKeeper, &c);
  while (!c.done.load()) {
    fesetround(FE_DOWNWARD);
    weft_sem_signal(&c.sem);
    weft_yield();
  }
  fesetround(FE_TONEAREST);
  Join(k);
  EXPECT_EQ(c.keeper.bad.load(), 0);
  weft_sem_destroy(&c.sem);
}

class SwitchModeOneVpTest : public OneVpTest {};

// An INTEGER-mode thread (the default) is not given its rounding mode back: on one
// VP, after it yields to a thread that sets FE_DOWNWARD, it runs in FE_DOWNWARD.
// The ucontext build keeps it (swapcontext restores the FP environment).
TEST_F(SwitchModeOneVpTest, IntegerModeLeavesFpControlToWhateverRanLast) {
  struct Case {
    int seen = -1;
    std::atomic<bool> changed{false};
  } c;
  // d is created first: the newest thread runs first, so i sets its mode, then d
  weft_thread_t *d = Spawn(+[](void *a) -> void * {
    auto *c = static_cast<Case *>(a);
    fesetround(FE_DOWNWARD);
    c->changed.store(true);
    weft_yield();  // the integer thread runs next, on this VP
    fesetround(FE_TONEAREST);
    return nullptr;
  }, &c);
  weft_thread_t *i = Spawn(+[](void *a) -> void * {
    auto *c = static_cast<Case *>(a);
    fesetround(FE_UPWARD);
    while (!c->changed.load()) weft_yield();
    c->seen = fegetround();
    fesetround(FE_TONEAREST);
    return nullptr;
  }, &c);
  Join(i);
  Join(d);
  fesetround(FE_TONEAREST);
#if defined(WEFT_CONTEXT_UCONTEXT)
  EXPECT_EQ(c.seen, FE_UPWARD) << "swapcontext restores the FP environment";
#else
  EXPECT_EQ(c.seen, FE_DOWNWARD) << "integer mode does not restore FP control state";
#endif
}

// The mode of the main weft thread can be set too; unknown modes are refused;
// without weft running there is no caller to set it for.
TEST_F(SwitchModeOneVpTest, SetAndErrors) {
  EXPECT_EQ(weft_switch_mode_set(2), WEFT_EINVAL);
  EXPECT_EQ(weft_switch_mode_set(-1), WEFT_EINVAL);
  EXPECT_EQ(weft_switch_mode_set(WEFT_SWITCH_ALL), 0);
  EXPECT_EQ(weft_switch_mode_get(), WEFT_SWITCH_ALL);
  fesetround(FE_UPWARD);
  Join(Spawn(+[](void *) -> void * {
    fesetround(FE_DOWNWARD);
    weft_yield();
    return nullptr;
  }));
  EXPECT_EQ(fegetround(), FE_UPWARD);
  fesetround(FE_TONEAREST);
  EXPECT_EQ(weft_switch_mode_set(WEFT_SWITCH_INTEGER), 0);
  EXPECT_EQ(weft_switch_mode_get(), WEFT_SWITCH_INTEGER);

  weft_attr_t attr;
  weft_attr_init(&attr);
  EXPECT_EQ(attr.switch_mode, WEFT_SWITCH_INTEGER);
  attr.switch_mode = 3;
  weft_thread_t *t = nullptr;
  EXPECT_EQ(weft_create(&t, &attr, +[](void *) -> void * { return nullptr; }, nullptr), WEFT_EINVAL);
  EXPECT_EQ(t, nullptr);

  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_switch_mode_set(WEFT_SWITCH_ALL), WEFT_EPERM);
  EXPECT_EQ(weft_switch_mode_get(), WEFT_SWITCH_INTEGER);
}

}  // namespace
