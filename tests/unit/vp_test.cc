// tests/unit/vp_test.cc - affinity and migration, where a thread runs, and
// do-when-idle functions (weft/vp.h).
#include "weft_test.h"

#include <weft/vp.h>

#include <atomic>
#include <thread>

namespace {

using weft_test::VpTest;

class VpApiTest : public VpTest {};

TEST_P(VpApiTest, SetAffinityMovesTheCallerToItsVp) {
  // The move queues the caller on its VP, but an idle VP may take it first (vp.h):
  // landing is checked only where no other VP exists.
  for (int round = 0; round < 20; round++) {
    for (int v = 0; v < 2 * nvps() + 3; v++) {
      ASSERT_EQ(weft_set_affinity(v), 0);
      EXPECT_EQ(weft_get_affinity(), v);
      if (nvps() == 1) {
        EXPECT_EQ(weft_vp_self(), 0);
      }
      EXPECT_GE(weft_vp_self(), 0);
      EXPECT_LT(weft_vp_self(), nvps());
    }
  }
  ASSERT_EQ(weft_set_affinity(-1), 0);
  EXPECT_EQ(weft_get_affinity(), -1);
  EXPECT_EQ(weft_set_affinity(-2), WEFT_EINVAL);
}

TEST_P(VpApiTest, MigratedThreadsKeepWorking) {
  static std::atomic<long> sum;
  sum = 0;
  const int n = 16;
  weft_thread_t *ts[n];
  for (int i = 0; i < n; i++)
    ASSERT_EQ(weft_create(&ts[i], nullptr,
                          [](void *a) -> void * {
                            long id = weft_test::I(a);
                            for (int k = 0; k < 50; k++) {
                              if (weft_set_affinity(static_cast<int>(id + k)) != 0) return weft_test::P(1);
                              if (weft_get_affinity() != static_cast<int>(id + k)) return weft_test::P(2);
                              sum.fetch_add(1);
                              weft_yield();
                            }
                            return nullptr;
                          },
                          weft_test::P(i)),
              0);
  for (int i = 0; i < n; i++) EXPECT_EQ(weft_test::Join(ts[i]), nullptr) << "thread " << i;
  EXPECT_EQ(sum.load(), n * 50);
}

TEST_P(VpApiTest, CpuSelfIsAnOsCpu) {
  int c = weft_cpu_self();
  EXPECT_GE(c, -1);
  EXPECT_LT(c, 4096);
}

TEST(VpApiNoRuntime, FromPlainOsThread) {
  EXPECT_EQ(weft_set_affinity(0), WEFT_EPERM);
  EXPECT_EQ(weft_get_affinity(), -1);
  EXPECT_EQ(weft_idle_func_add([](void *) {}, nullptr), WEFT_ENOTINIT);
}

std::atomic<long> idle_calls;
void CountIdle(void *) { idle_calls.fetch_add(1, std::memory_order_relaxed); }

TEST_P(VpApiTest, IdleFunctionsRunWhileIdleAndStopAfterRemove) {
  idle_calls = 0;
  ASSERT_EQ(weft_idle_func_add(CountIdle, nullptr), 0);
  // the main thread sleeps, so its VP (and every other) is idle
  for (int i = 0; i < 100 && idle_calls.load() < 3; i++) ASSERT_EQ(weft_sleep_ns(2000000), 0);
  EXPECT_GE(idle_calls.load(), 3);
  ASSERT_EQ(weft_idle_func_remove(CountIdle, nullptr), 0);
  EXPECT_EQ(weft_idle_func_remove(CountIdle, nullptr), WEFT_EINVAL);
  ASSERT_EQ(weft_sleep_ns(5000000), 0);  // a call already started may still finish
  long after = idle_calls.load();
  ASSERT_EQ(weft_sleep_ns(20000000), 0);
  EXPECT_EQ(idle_calls.load(), after);
}

// An idle function that makes a thread ready: the polling pattern of Active Threads.
std::atomic<int> polled_ready;
weft_sem_t poll_sem;
void PollDevice(void *) {
  int expect = 1;
  if (polled_ready.compare_exchange_strong(expect, 2)) weft_sem_signal(&poll_sem);
}

TEST_P(VpApiTest, IdleFunctionCanWakeAThread) {
  weft_sem_init(&poll_sem, 0);
  polled_ready = 0;
  ASSERT_EQ(weft_idle_func_add(PollDevice, nullptr), 0);
  std::thread device([] { polled_ready = 1; });  // "the device has data"
  device.join();
  ASSERT_EQ(weft_sem_timedwait(&poll_sem, weft_deadline_after(5000000000ull)), 0);
  ASSERT_EQ(weft_idle_func_remove(PollDevice, nullptr), 0);
}

TEST_P(VpApiTest, IdleFunctionTableLimits) {
  EXPECT_EQ(weft_idle_func_add(nullptr, nullptr), WEFT_EINVAL);
  for (int i = 0; i < WEFT_IDLE_FUNCS_MAX; i++)
    ASSERT_EQ(weft_idle_func_add(CountIdle, weft_test::P(i + 1)), 0);
  EXPECT_EQ(weft_idle_func_add(CountIdle, nullptr), WEFT_EAGAIN);
  for (int i = 0; i < WEFT_IDLE_FUNCS_MAX; i++)
    ASSERT_EQ(weft_idle_func_remove(CountIdle, weft_test::P(i + 1)), 0);
}

// A do-when-idle function runs on a VP's idle loop, where no weft thread runs: the calls
// about "the calling thread" answer as for a plain OS thread (weft/thread.h, weft/vp.h),
// and a work-first create is made help-first (weft_attr_t.work_first). Each of these
// read the VP's current thread, NULL there, and crashed.
std::atomic<int> idle_probe_state;  // 0 armed, 1 taken, 2 done
std::atomic<int> idle_probe_bad;
std::atomic<int> idle_created_ran;
void *IdleCreatedBody(void *) {
  idle_created_ran.store(1);
  return nullptr;
}
void IdleProbe(void *) {
  int expect = 0;
  if (!idle_probe_state.compare_exchange_strong(expect, 1)) return;
  int bad = 0;
  if (weft_self() != nullptr) bad |= 1;
  if (weft_local_get() != nullptr) bad |= 2;
  if (weft_local_set(weft_test::P(1)) != WEFT_EPERM) bad |= 4;
  if (weft_switch_mode_get() != WEFT_SWITCH_INTEGER) bad |= 8;
  if (weft_switch_mode_set(WEFT_SWITCH_ALL) != WEFT_EPERM) bad |= 16;
  if (weft_get_affinity() != -1) bad |= 32;
  if (weft_set_affinity(-1) != WEFT_EPERM) bad |= 128;  // it dereferenced no thread
  weft_attr_t a;
  weft_attr_init(&a);
  a.detached = 1;
  a.work_first = 1;
  if (weft_create(nullptr, &a, IdleCreatedBody, nullptr) != 0) bad |= 64;
  idle_probe_bad.store(bad);
  idle_probe_state.store(2);
}

TEST_P(VpApiTest, IdleFunctionCallsAboutTheCallerAnswerAsNoThread) {
  idle_probe_state = 0;
  idle_probe_bad = 0;
  idle_created_ran = 0;
  ASSERT_EQ(weft_idle_func_add(IdleProbe, nullptr), 0);
  for (int i = 0; i < 2000 && (idle_probe_state.load() != 2 || !idle_created_ran.load()); i++)
    ASSERT_EQ(weft_sleep_ns(1000000), 0);
  ASSERT_EQ(weft_idle_func_remove(IdleProbe, nullptr), 0);
  EXPECT_EQ(idle_probe_state.load(), 2);
  EXPECT_EQ(idle_probe_bad.load(), 0);
  EXPECT_EQ(idle_created_ran.load(), 1);
}

WEFT_INSTANTIATE_VPS(VpApiTest);

}  // namespace
