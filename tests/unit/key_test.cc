// tests/unit/key_test.cc - thread-specific data keys: values, destructors, limits.
#include <algorithm>
#include <mutex>
#include <thread>

#include "weft_test.h"

using namespace weft_test;

namespace {

class KeyTest : public VpTest {};
WEFT_INSTANTIATE_VPS(KeyTest);

// Records destructor calls (value per call) for the key under test.
struct DtorLog {
  std::mutex mu;
  std::vector<intptr_t> values;
  void Add(void *v) {
    std::lock_guard<std::mutex> lock(mu);
    values.push_back(I(v));
  }
  std::vector<intptr_t> Sorted() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<intptr_t> v = values;
    std::sort(v.begin(), v.end());
    return v;
  }
};
DtorLog *g_log;
weft_key_t g_key;
void LogDtor(void *v) { g_log->Add(v); }

// A key starts NULL, holds what is set, and can be deleted once.
TEST_P(KeyTest, CreateSetGetDelete) {
  weft_key_t key;
  ASSERT_EQ(weft_key_create(&key, nullptr), 0);
  EXPECT_EQ(weft_key_get(key), nullptr);
  EXPECT_EQ(weft_key_set(key, P(17)), 0);
  EXPECT_EQ(weft_key_get(key), P(17));
  EXPECT_EQ(weft_key_set(key, P(18)), 0);
  EXPECT_EQ(weft_key_get(key), P(18));
  EXPECT_EQ(weft_key_set(key, nullptr), 0);
  EXPECT_EQ(weft_key_get(key), nullptr);
  EXPECT_EQ(weft_key_delete(key), 0);
  EXPECT_EQ(weft_key_delete(key), WEFT_EINVAL);
}

// weft_key_create(NULL) is WEFT_EINVAL.
TEST(Key, CreateNullIsEinval) { EXPECT_EQ(weft_key_create(nullptr, nullptr), WEFT_EINVAL); }

// Keys can be created and deleted without a running runtime.
TEST(Key, UsableWithoutRuntime) {
  ASSERT_EQ(weft_is_running(), 0);
  weft_key_t key;
  ASSERT_EQ(weft_key_create(&key, LogDtor), 0);
  EXPECT_EQ(weft_key_get(key), nullptr);
  EXPECT_EQ(weft_key_set(key, P(1)), WEFT_EPERM);  // not a weft thread
  EXPECT_EQ(weft_key_delete(key), 0);
  EXPECT_EQ(weft_debug_live_blocks(), 0);
}

// Each thread sees only its own value, across switches; new threads start NULL.
TEST_P(KeyTest, ValuesArePerThread) {
  ASSERT_EQ(weft_key_create(&g_key, nullptr), 0);
  ASSERT_EQ(weft_key_set(g_key, P(-5)), 0);
  std::vector<weft_thread_t *> ts;
  for (intptr_t i = 1; i <= 50; ++i) {
    ts.push_back(Spawn(+[](void *a) {
      if (weft_key_get(g_key) != nullptr) return P(-1);
      if (weft_key_set(g_key, a) != 0) return P(-2);
      for (int k = 0; k < 10; ++k) {
        weft_yield();
        if (weft_key_get(g_key) != a) return P(-3);
      }
      return a;
    }, P(i)));
  }
  for (intptr_t i = 1; i <= 50; ++i) EXPECT_EQ(Join(ts[i - 1]), P(i));
  EXPECT_EQ(weft_key_get(g_key), P(-5));
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// Destructors run at thread exit with each thread's last non-NULL value, before
// weft_join() returns, and not for NULL values.
TEST_P(KeyTest, DestructorsRunAtExitWithValue) {
  DtorLog log;
  g_log = &log;
  ASSERT_EQ(weft_key_create(&g_key, LogDtor), 0);
  std::vector<weft_thread_t *> ts;
  std::vector<intptr_t> expected;
  for (intptr_t i = 1; i <= 40; ++i) {
    if (i % 4 != 0) expected.push_back(100 + i);
    ts.push_back(Spawn(+[](void *a) {
      EXPECT_EQ(weft_key_set(g_key, P(1)), 0);  // overwritten below
      weft_yield();
      intptr_t i = I(a);
      EXPECT_EQ(weft_key_set(g_key, i % 4 == 0 ? nullptr : P(100 + i)), 0);
      return P(0);
    }, P(i)));
  }
  for (weft_thread_t *t : ts) Join(t);
  EXPECT_EQ(log.Sorted(), expected);
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// Destructors also run when a thread ends with weft_exit().
TEST_P(KeyTest, DestructorsRunOnExit) {
  DtorLog log;
  g_log = &log;
  ASSERT_EQ(weft_key_create(&g_key, LogDtor), 0);
  weft_thread_t *t = Spawn(+[](void *) {
    EXPECT_EQ(weft_key_set(g_key, P(55)), 0);
    weft_exit(P(3));
    return P(0);
  });
  EXPECT_EQ(Join(t), P(3));
  EXPECT_EQ(log.Sorted(), std::vector<intptr_t>{55});
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// Destructors run for detached threads too.
TEST_P(KeyTest, DestructorsRunForDetachedThreads) {
  DtorLog log;
  g_log = &log;
  ASSERT_EQ(weft_key_create(&g_key, LogDtor), 0);
  weft_attr_t attr = DetachedAttr();
  for (intptr_t i = 0; i < 10; ++i) {
    ASSERT_EQ(weft_create(nullptr, &attr, +[](void *a) {
      EXPECT_EQ(weft_key_set(g_key, a), 0);
      return P(0);
    }, P(i + 1)), 0);
  }
  ASSERT_TRUE(YieldUntil([&] { return log.Sorted().size() == 10; }));
  EXPECT_EQ(log.Sorted(), (std::vector<intptr_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// The main weft thread's destructors run in weft_shutdown().
TEST_P(KeyTest, MainThreadDestructorsRunAtShutdown) {
  DtorLog log;
  g_log = &log;
  ASSERT_EQ(weft_key_create(&g_key, LogDtor), 0);
  ASSERT_EQ(weft_key_set(g_key, P(42)), 0);
  EXPECT_TRUE(log.Sorted().empty());
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(log.Sorted(), std::vector<intptr_t>{42});
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// A destructor of the main thread that creates a thread: weft_shutdown runs that
// thread and waits for it, then succeeds (it once returned WEFT_EBUSY at once).
std::atomic<int> g_child_ran{0};
void SpawningDtor(void *) {
  weft_attr_t a;
  weft_attr_init(&a);
  a.detached = 1;
  EXPECT_EQ(weft_create(nullptr, &a, +[](void *) -> void * {
    weft_yield();
    g_child_ran++;
    return nullptr;
  }, nullptr), 0);
}
TEST_P(KeyTest, MainThreadDestructorThatCreatesAThreadIsWaitedFor) {
  g_child_ran = 0;
  ASSERT_EQ(weft_key_create(&g_key, SpawningDtor), 0);
  ASSERT_EQ(weft_key_set(g_key, P(1)), 0);
  ASSERT_EQ(weft_shutdown(), 0);
  EXPECT_EQ(g_child_ran.load(), 1);
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// A destructor that sets its key again is called again: at most 4 rounds in all.
std::atomic<int> g_rounds{0};
std::atomic<int> g_resets_left{0};
void ResettingDtor(void *v) {
  g_rounds++;
  if (g_resets_left.fetch_sub(1) > 0) {
    EXPECT_EQ(weft_key_set(g_key, v), 0);
  }
}
TEST_P(KeyTest, DestructorRoundsAreBounded) {
  ASSERT_EQ(weft_key_create(&g_key, ResettingDtor), 0);
  auto body = +[](void *) {
    EXPECT_EQ(weft_key_set(g_key, P(9)), 0);
    return P(0);
  };
  g_rounds = 0;
  g_resets_left = 1000;  // always re-sets: stops after 4 rounds
  Join(Spawn(body));
  EXPECT_EQ(g_rounds.load(), 4);
  g_rounds = 0;
  g_resets_left = 2;  // re-sets twice: 3 rounds
  Join(Spawn(body));
  EXPECT_EQ(g_rounds.load(), 3);
  EXPECT_EQ(weft_key_delete(g_key), 0);
}

// A value set for one key by another key's destructor is destroyed in a later round.
weft_key_t g_key2;
DtorLog *g_log2;
void SetsOtherKeyDtor(void *) { EXPECT_EQ(weft_key_set(g_key2, P(77)), 0); }
TEST_P(KeyTest, DestructorMaySetAnotherKey) {
  DtorLog log2;
  g_log2 = &log2;
  ASSERT_EQ(weft_key_create(&g_key, SetsOtherKeyDtor), 0);
  ASSERT_EQ(weft_key_create(&g_key2, +[](void *v) { g_log2->Add(v); }), 0);
  Join(Spawn(+[](void *) {
    EXPECT_EQ(weft_key_set(g_key, P(1)), 0);
    return P(0);
  }));
  EXPECT_EQ(log2.Sorted(), std::vector<intptr_t>{77});
  EXPECT_EQ(weft_key_delete(g_key), 0);
  EXPECT_EQ(weft_key_delete(g_key2), 0);
}

// A deleted key is stale: get returns NULL, set and delete fail with WEFT_EINVAL,
// and its destructor no longer runs.
TEST_P(KeyTest, StaleKeyAfterDelete) {
  DtorLog log;
  g_log = &log;
  ASSERT_EQ(weft_key_create(&g_key, LogDtor), 0);
  static std::atomic<bool> value_set, deleted;
  value_set = false;
  deleted = false;
  weft_thread_t *t = Spawn(+[](void *) {
    EXPECT_EQ(weft_key_set(g_key, P(3)), 0);
    value_set = true;
    YieldUntil([] { return deleted.load(); });
    EXPECT_EQ(weft_key_get(g_key), nullptr);
    EXPECT_EQ(weft_key_set(g_key, P(4)), WEFT_EINVAL);
    return P(0);
  });
  ASSERT_EQ(weft_key_set(g_key, P(8)), 0);
  ASSERT_TRUE(YieldUntil([] { return value_set.load(); }));
  ASSERT_EQ(weft_key_delete(g_key), 0);
  deleted = true;
  EXPECT_EQ(weft_key_get(g_key), nullptr);
  EXPECT_EQ(weft_key_set(g_key, P(4)), WEFT_EINVAL);
  EXPECT_EQ(weft_key_delete(g_key), WEFT_EINVAL);
  Join(t);
  ASSERT_EQ(weft_shutdown(), 0);  // the main thread's value is not destroyed either
  EXPECT_TRUE(log.Sorted().empty()) << "destructor ran for a deleted key";
}

// A key created after another was deleted reads NULL in every thread, even one that
// had a value for the old key (whose slot the new key may reuse).
TEST_P(KeyTest, NewKeyDoesNotSeeOldValues) {
  for (int round = 0; round < 3; ++round) {
    weft_key_t old_key, new_key;
    ASSERT_EQ(weft_key_create(&old_key, nullptr), 0);
    ASSERT_EQ(weft_key_set(old_key, P(12)), 0);
    ASSERT_EQ(weft_key_delete(old_key), 0);
    ASSERT_EQ(weft_key_create(&new_key, nullptr), 0);
    EXPECT_EQ(weft_key_get(new_key), nullptr);
    EXPECT_EQ(weft_key_get(old_key), nullptr);
    EXPECT_EQ(weft_key_set(old_key, P(1)), WEFT_EINVAL);
    EXPECT_EQ(weft_key_get(new_key), nullptr);
    ASSERT_EQ(weft_key_delete(new_key), 0);
  }
}

// A made-up key is invalid.
TEST_P(KeyTest, ForgedKeyIsInvalid) {
  const weft_key_t forged[] = {{WEFT_KEYS_MAX, 0}, {9999, 1}, {UINT32_MAX, UINT32_MAX}};
  for (const weft_key_t &k : forged) {
    EXPECT_EQ(weft_key_get(k), nullptr);
    EXPECT_EQ(weft_key_set(k, P(1)), WEFT_EINVAL);
    EXPECT_EQ(weft_key_delete(k), WEFT_EINVAL);
  }
}

// At most WEFT_KEYS_MAX keys live at once (then WEFT_EAGAIN); deleting one frees a slot.
TEST_P(KeyTest, KeyLimit) {
  std::vector<weft_key_t> keys;
  weft_key_t k;
  int rc;
  for (;;) {
    rc = weft_key_create(&k, nullptr);
    if (rc != 0) break;
    keys.push_back(k);
    if (keys.size() > WEFT_KEYS_MAX) break;
  }
  EXPECT_EQ(rc, WEFT_EAGAIN);
  EXPECT_EQ(keys.size(), static_cast<size_t>(WEFT_KEYS_MAX));
  // Every key works, including the last.
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(weft_key_set(keys[i], P(i + 1)), 0);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(weft_key_get(keys[i]), P(i + 1));
  ASSERT_EQ(weft_key_delete(keys[5]), 0);
  weft_key_t again;
  EXPECT_EQ(weft_key_create(&again, nullptr), 0);
  EXPECT_EQ(weft_key_get(again), nullptr);
  EXPECT_EQ(weft_key_create(&k, nullptr), WEFT_EAGAIN);
  keys[5] = again;
  for (const weft_key_t &key : keys) EXPECT_EQ(weft_key_delete(key), 0);
}

// From a plain OS thread, set fails with WEFT_EPERM and get returns NULL.
TEST_P(KeyTest, PlainThreadCannotSet) {
  weft_key_t key;
  ASSERT_EQ(weft_key_create(&key, nullptr), 0);
  ASSERT_EQ(weft_key_set(key, P(1)), 0);
  int rc = 0;
  void *got = P(1);
  std::thread plain([&] {
    rc = weft_key_set(key, P(2));
    got = weft_key_get(key);
  });
  plain.join();
  EXPECT_EQ(rc, WEFT_EPERM);
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(weft_key_get(key), P(1));
  EXPECT_EQ(weft_key_delete(key), 0);
}

}  // namespace
