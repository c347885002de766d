// tests/unit/atomic_int_test.cc - weft/atomic_int.h: both forms of Presto's AtomicInt
// (hardware atomics and lock-protected) pass the same typed suite: initializers and
// the all-zero object, every operation's result, wrap-around, and exact totals under
// contention from plain OS threads and from weft threads on 1, 2 and 4 VPs.
#include <pthread.h>

#include <climits>
#include <cstring>

#include "weft/atomic_int.h"
#include "weft_test.h"

namespace {

using weft_test::Scaled;

#define WEFT_ATOMIC_FORM(Name, p, INIT)                                                  \
  struct Name {                                                                          \
    using int_t = weft_##p##_t;                                                          \
    static int_t Make(long v) { return int_t INIT(v); }                                  \
    static void Init(int_t *a, long v) { weft_##p##_init(a, v); }                        \
    static long Load(int_t *a) { return weft_##p##_load(a); }                            \
    static void Store(int_t *a, long v) { weft_##p##_store(a, v); }                      \
    static long Add(int_t *a, long d) { return weft_##p##_add(a, d); }                   \
    static long FetchAdd(int_t *a, long d) { return weft_##p##_fetch_add(a, d); }        \
    static long Sub(int_t *a, long d) { return weft_##p##_sub(a, d); }                   \
    static long Inc(int_t *a) { return weft_##p##_inc(a); }                              \
    static long Dec(int_t *a) { return weft_##p##_dec(a); }                              \
    static long Exchange(int_t *a, long v) { return weft_##p##_exchange(a, v); }         \
    static int Cas(int_t *a, long *e, long d) { return weft_##p##_compare_exchange(a, e, d); } \
  }

WEFT_ATOMIC_FORM(Hardware, atomic_int, WEFT_ATOMIC_INT_INIT);
WEFT_ATOMIC_FORM(Locked, locked_int, WEFT_LOCKED_INT_INIT);

// Suite names "AtomicIntTest/atomic_int_<form>": `ctest -R atomic_int` selects them.
class FormNames {
 public:
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, Hardware> ? "atomic_int_hardware" : "atomic_int_locked";
  }
};

template <class F>
class AtomicIntTest : public weft_test::WeftTest {};
using Forms = ::testing::Types<Hardware, Locked>;
TYPED_TEST_SUITE(AtomicIntTest, Forms, FormNames);

TYPED_TEST(AtomicIntTest, InitializersAndZero) {
  typename TypeParam::int_t a = TypeParam::Make(42);
  EXPECT_EQ(TypeParam::Load(&a), 42);
  static typename TypeParam::int_t st = TypeParam::Make(-7);
  EXPECT_EQ(TypeParam::Load(&st), -7);
  alignas(typename TypeParam::int_t) unsigned char buf[sizeof(typename TypeParam::int_t)];
  std::memset(buf, 0, sizeof buf);
  auto *z = reinterpret_cast<typename TypeParam::int_t *>(buf);
  EXPECT_EQ(TypeParam::Load(z), 0);
  EXPECT_EQ(TypeParam::Inc(z), 1);
  TypeParam::Init(z, 5);
  EXPECT_EQ(TypeParam::Load(z), 5);
}

TYPED_TEST(AtomicIntTest, OperationsReturnWhatTheContractSays) {
  typename TypeParam::int_t a = TypeParam::Make(0);
  TypeParam::Store(&a, 10);
  EXPECT_EQ(TypeParam::Load(&a), 10);
  EXPECT_EQ(TypeParam::Add(&a, 5), 15);       // new value
  EXPECT_EQ(TypeParam::FetchAdd(&a, 5), 15);  // old value
  EXPECT_EQ(TypeParam::Load(&a), 20);
  EXPECT_EQ(TypeParam::Sub(&a, 8), 12);
  EXPECT_EQ(TypeParam::Inc(&a), 13);
  EXPECT_EQ(TypeParam::Dec(&a), 12);
  EXPECT_EQ(TypeParam::Exchange(&a, 100), 12);
  EXPECT_EQ(TypeParam::Load(&a), 100);
  long e = 99;
  EXPECT_EQ(TypeParam::Cas(&a, &e, 1), 0);  // mismatch: unchanged, e = current
  EXPECT_EQ(e, 100);
  EXPECT_EQ(TypeParam::Load(&a), 100);
  EXPECT_EQ(TypeParam::Cas(&a, &e, 1), 1);  // match: replaced, e untouched
  EXPECT_EQ(e, 100);
  EXPECT_EQ(TypeParam::Load(&a), 1);
  EXPECT_EQ(TypeParam::Add(&a, -3), -2);
  EXPECT_EQ(TypeParam::Sub(&a, -2), 0);
}

TYPED_TEST(AtomicIntTest, ArithmeticWraps) {
  typename TypeParam::int_t a = TypeParam::Make(LONG_MAX);
  EXPECT_EQ(TypeParam::Inc(&a), LONG_MIN);
  EXPECT_EQ(TypeParam::Dec(&a), LONG_MAX);
  EXPECT_EQ(TypeParam::Sub(&a, -1), LONG_MIN);
}

template <class F>
struct Ctx {
  typename F::int_t a = F::Make(0);
  typename F::int_t cas_count = F::Make(0);
  long per_thread = 0;
};

// Each contender adds +1 (inc), +2 (fetch_add), -1 (dec) and +1 by a CAS loop per
// iteration: +3 per iteration in all.
template <class F>
void *AddBody(void *arg) {
  auto *c = static_cast<Ctx<F> *>(arg);
  const bool weft = weft_self() != nullptr;
  for (long i = 0; i < c->per_thread; i++) {
    F::Inc(&c->a);
    F::FetchAdd(&c->a, 2);
    F::Dec(&c->a);
    long e = F::Load(&c->a);
    while (!F::Cas(&c->a, &e, e + 1)) {
    }
    if (weft && (i & 255) == 255) weft_yield();
  }
  return nullptr;
}

TYPED_TEST(AtomicIntTest, ExactTotalsFromPlainOsThreads) {
  Ctx<TypeParam> c;
  c.per_thread = Scaled(50000, 500);
  pthread_t t[4];
  for (auto &x : t) ASSERT_EQ(pthread_create(&x, nullptr, AddBody<TypeParam>, &c), 0);
  for (auto &x : t) pthread_join(x, nullptr);
  EXPECT_EQ(TypeParam::Load(&c.a), 3 * 4 * c.per_thread);
}

TYPED_TEST(AtomicIntTest, ExactTotalsFromWeftThreads) {
  for (int nvps : {1, 2, 4}) {
    this->StartWeft(nvps);
    Ctx<TypeParam> c;
    c.per_thread = Scaled(30000, 300);
    std::vector<weft_thread_t *> ts;
    for (int i = 0; i < 4; i++) {
      weft_attr_t at;
      weft_attr_init(&at);
      at.vproc = WEFT_VPROC(i);
      ts.push_back(weft_test::Spawn(AddBody<TypeParam>, &c, &at));
    }
    for (auto *t : ts) weft_test::Join(t);
    EXPECT_EQ(TypeParam::Load(&c.a), 3 * 4 * c.per_thread) << nvps << " VPs";
    ASSERT_EQ(weft_shutdown(), 0);
  }
}

}  // namespace
