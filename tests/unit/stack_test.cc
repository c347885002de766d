// tests/unit/stack_test.cc - thread stacks: the default, minimum and large sizes are
// usable, and running off the end (frames of 512 bytes or 64 KiB, either guard
// mechanism) hits the guard region and kills the process with a report naming the
// thread and its stack bounds; an unguarded stack's canary catches the same at finish.
#include <alloca.h>

#include <cstdio>
#include <regex>
#include <string>
#include <tuple>

#include "weft_test.h"


using namespace weft_test;

namespace {

class StackTest : public VpTest {};
WEFT_INSTANTIATE_VPS(StackTest);

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

// Uses `bytes` of stack in one frame, writing one byte per KiB from the high end
// down (the order a growing stack is touched in); returns a checksum.
__attribute__((noinline)) intptr_t TouchStack(size_t bytes) {
  volatile char *p = static_cast<volatile char *>(alloca(bytes));
  for (size_t i = bytes; i >= KiB; i -= KiB) p[i - 1] = static_cast<char>(i / KiB);
  intptr_t sum = 0;
  for (size_t i = bytes; i >= KiB; i -= KiB) sum += p[i - 1];
  return sum;
}
intptr_t ExpectedSum(size_t bytes) {
  intptr_t sum = 0;
  for (size_t i = bytes; i >= KiB; i -= KiB) sum += static_cast<char>(i / KiB);
  return sum;
}

void *TouchThread(void *arg) {
  size_t bytes = static_cast<size_t>(I(arg));
  weft_yield();  // and again after a switch, possibly on another VP
  return P(TouchStack(bytes) + TouchStack(bytes));
}

// Runs a thread with the given stack size that uses `bytes` of it.
void ExpectUsable(size_t stack_size, size_t bytes) {
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.stack_size = stack_size;
  EXPECT_EQ(Join(Spawn(TouchThread, P(static_cast<intptr_t>(bytes)), &attr)), P(2 * ExpectedSum(bytes)));
}

// Most of the default 256 KiB stack is usable.
TEST_P(StackTest, DefaultStackIsUsable) { ExpectUsable(0, 192 * KiB); }

// Half of a minimum-size stack is usable.
TEST_P(StackTest, MinimumStackIsUsable) { ExpectUsable(WEFT_MIN_STACK_SIZE, WEFT_MIN_STACK_SIZE / 2); }

// A 4 MiB stack can be used for 3 MiB.
TEST_P(StackTest, LargeStackIsUsable) { ExpectUsable(4 * MiB, 3 * MiB); }

// Stacks of different sizes, created and recycled in any order, each give the
// thread at least the size it asked for.
TEST_P(StackTest, MixedSizesAreRecycledCorrectly) {
  const size_t sizes[] = {0, WEFT_MIN_STACK_SIZE, 1 * MiB, 64 * KiB, 2 * MiB, 0};
  for (int round = 0; round < 3; ++round) {
    std::vector<weft_thread_t *> ts;
    std::vector<size_t> used;
    for (int i = 0; i < 24; ++i) {
      size_t size = sizes[i % 6];
      size_t effective = size == 0 ? WEFT_DEFAULT_STACK_SIZE : size;
      weft_attr_t attr;
      weft_attr_init(&attr);
      attr.stack_size = size;
      used.push_back(effective / 2);
      ts.push_back(Spawn(TouchThread, P(static_cast<intptr_t>(used.back())), &attr));
    }
    for (size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(Join(ts[i]), P(2 * ExpectedSum(used[i])));
  }
}

// Threads created one after another with the same custom stack size reuse their
// stacks, as default-size ones do: a few system allocations for a thousand threads,
// not one each (every such stack was mapped and unmapped per thread: fib with a
// thread per call and 16 KiB stacks ran 100 times slower than with the default's).
// Each thread still gets a whole, usable stack, and another size is mapped anew.
TEST_P(StackTest, StacksOfOneCustomSizeAreReused) {
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.stack_size = 64 * KiB;
  ASSERT_EQ(Join(Spawn(TouchThread, P(static_cast<intptr_t>(32 * KiB)), &attr)),
            P(2 * ExpectedSum(32 * KiB)));  // warm: one of this size cached
  long before = weft_debug_alloc_count();
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(Join(Spawn(TouchThread, P(static_cast<intptr_t>(48 * KiB)), &attr)),
              P(2 * ExpectedSum(48 * KiB)));
  long made = weft_debug_alloc_count() - before;
  // at more than one VP a thread may finish on another VP, whose cache starts empty
  EXPECT_LE(made, 4L * nvps()) << "system allocations for 1000 threads of one stack size";
  attr.stack_size = 128 * KiB;  // another size: its own mapping, and it is usable
  EXPECT_EQ(Join(Spawn(TouchThread, P(static_cast<intptr_t>(96 * KiB)), &attr)),
            P(2 * ExpectedSum(96 * KiB)));
}

// ---- overflow death tests -------------------------------------------------------------

std::atomic<bool> g_recurse{true};

// Recurses without bound (the flag is never cleared; it only defeats the
// compiler's infinite-recursion analysis and tail calls).
__attribute__((noinline)) int Recurse(int depth) {
  volatile char pad[512];
  pad[0] = static_cast<char>(depth);
  asm volatile("" ::: "memory");
  if (g_recurse.load(std::memory_order_relaxed)) return Recurse(depth + 1) + pad[0];
  return pad[0];
}

// The same with 64 KiB frames: each frame is larger than a page and writes its
// lowest bytes first, so a one-page guard would be jumped (into whatever lies below).
__attribute__((noinline)) int RecurseBig(int depth) {
  volatile char pad[64 * 1024];
  pad[0] = static_cast<char>(depth);  // the lowest byte first
  pad[sizeof pad - 1] = pad[0];
  asm volatile("" ::: "memory");
  if (g_recurse.load(std::memory_order_relaxed)) return RecurseBig(depth + 1) + pad[0];
  return pad[0];
}

// Frames of 1 KiB written in full, down to `floor` (an address), then back: an
// overflow that runs a few KiB past the stack's bottom and returns.
__attribute__((noinline)) int RecurseTo(uintptr_t floor) {
  volatile char pad[1024];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = static_cast<char>(i);
  asm volatile("" ::: "memory");
  if (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) > floor) return RecurseTo(floor) + pad[1];
  return pad[1];
}

// The same with frames that write one byte of their array (and the call's return
// address and saved registers): most words below the stack are never written.
__attribute__((noinline)) int RecurseToSparse(uintptr_t floor) {
  volatile char pad[1024];
  pad[0] = 1;
  asm volatile("" ::: "memory");
  if (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) > floor) return RecurseToSparse(floor) + pad[0];
  return pad[0];
}

enum class Overflow { kSmallFrames, kBigFrames, kPastBottomAndBack, kPastBottomSparse };
Overflow g_overflow = Overflow::kSmallFrames;

void *OverflowThread(void *) {
  char local = 0;
  weft_set_name(nullptr, "overflower");  // the report names it
  std::fprintf(stderr, "overflowing thread id=%llu local=%p\n",
               static_cast<unsigned long long>(weft_thread_id(weft_self())),
               static_cast<void *>(&local));
  std::fflush(stderr);
  if (g_overflow == Overflow::kBigFrames) {
    // Start the big frames about 2 KiB above the bottom of the default stack (the
    // first frame is within a page of its top), so that the first one writes about
    // 62 KiB below the bottom: far past a one-page guard, inside the default one.
    uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    uintptr_t lo = ((here + 4095) & ~uintptr_t{4095}) - WEFT_DEFAULT_STACK_SIZE;
    volatile char *gap = static_cast<volatile char *>(alloca(here - lo - 2 * KiB - 512));
    gap[0] = 0;
    return P(RecurseBig(local) + gap[0]);
  }
  if (g_overflow == Overflow::kPastBottomAndBack) {
    // 8 KiB below the bottom of the default stack (the first frame is within a
    // page of its top), inside the 128 KiB guard range
    uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    return P(RecurseTo(here - WEFT_DEFAULT_STACK_SIZE - 8 * KiB));
  }
  if (g_overflow == Overflow::kPastBottomSparse) {
    uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    return P(RecurseToSparse(here - WEFT_DEFAULT_STACK_SIZE - 8 * KiB));
  }
  return P(Recurse(local));
}

// Starts weft, runs OverflowThread with `stack_size`, and waits for it. With more
// than one VP the main thread keeps VP 0 busy, so the thread overflows on another
// VP's kernel thread. `guard`: WEFT_STACK_GUARD for weft_init (NULL: default).
void OverflowInWeftThread(int nvps, size_t stack_size, Overflow how = Overflow::kSmallFrames,
                          const char *guard = nullptr) {
  g_overflow = how;
  if (guard) setenv("WEFT_STACK_GUARD", guard, 1);
  if (InitWithVps(nvps) != 0) return;
  weft_attr_t attr;
  weft_attr_init(&attr);
  attr.stack_size = stack_size;
  attr.vproc = nvps > 1 ? WEFT_VPROC(1) : 0;
  weft_thread_t *t = nullptr;
  if (weft_create(&t, &attr, OverflowThread, nullptr) != 0) return;
  if (nvps > 1) SpinUntil([] { return false; }, 30.0);
  weft_join(t, nullptr);
}

// Matches stderr that has weft's report for the overflowing thread: a line
// "weft: stack overflow in thread <its id>" carrying two hex addresses that bound
// the thread's stack (they bracket an address on it, and are at most 64 MiB apart).
class OverflowReport : public ::testing::MatcherInterface<const std::string &> {
 public:
  bool MatchAndExplain(const std::string &err, ::testing::MatchResultListener *listener) const override {
    std::smatch m;
    if (!std::regex_search(err, m, std::regex("overflowing thread id=([0-9]+) local=(0x[0-9a-fA-F]+)"))) {
      *listener << "the overflowing thread never ran";
      return false;
    }
    const std::string id = m[1].str();
    const uintptr_t local = std::stoull(m[2].str(), nullptr, 16);
    std::smatch line;
    if (!std::regex_search(err, line, std::regex("weft: stack overflow in thread " + id + "([^0-9\n][^\n]*)?"))) {
      *listener << "no line 'weft: stack overflow in thread " << id << "'";
      return false;
    }
    const std::string text = line[0].str();
    if (text.find(" \"overflower\": ") == std::string::npos) {
      *listener << "the report line '" << text << "' does not name the thread";
      return false;
    }
    std::vector<uintptr_t> addrs;
    std::regex hex("0x[0-9a-fA-F]+");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), hex); it != std::sregex_iterator(); ++it) {
      addrs.push_back(std::stoull(it->str(), nullptr, 16));
    }
    for (uintptr_t a : addrs) {
      for (uintptr_t b : addrs) {
        if (a <= local && local < b && b - a <= 64 * MiB) return true;
      }
    }
    *listener << "the report line '" << text << "' has no stack bounds around " << std::hex << local;
    return false;
  }
  void DescribeTo(std::ostream *os) const override {
    *os << "reports 'weft: stack overflow in thread <id>' with the stack bounds";
  }
};

class StackDeathTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// A thread that recurses without bound dies on its guard page; weft reports the
// thread id and its stack bounds on stderr.
TEST_P(StackDeathTest, OverflowIsReported) {
  SetDeathTestStyle();
  const int nvps = std::get<0>(GetParam());
  const size_t stack_size = std::get<1>(GetParam());
  EXPECT_DEATH(OverflowInWeftThread(nvps, stack_size),
               ::testing::Matcher<const std::string &>(new OverflowReport));
}

// A thread whose 64 KiB frames overflow its stack is reported, whatever the guard
// mechanism (the default guard region is larger than such a frame), at 1 and 2 VPs.
class BigFrameDeathTest : public ::testing::TestWithParam<std::tuple<int, const char *>> {};

TEST_P(BigFrameDeathTest, OverflowIsReported) {
  SetDeathTestStyle();
  const int nvps = std::get<0>(GetParam());
  const char *guard = std::get<1>(GetParam());
  EXPECT_DEATH(OverflowInWeftThread(nvps, 0, Overflow::kBigFrames, guard),
               ::testing::Matcher<const std::string &>(new OverflowReport));
}

INSTANTIATE_TEST_SUITE_P(Guards, BigFrameDeathTest,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values("madvise", "mprotect")),
                         [](const ::testing::TestParamInfo<std::tuple<int, const char *>> &info) {
                           return std::to_string(std::get<0>(info.param)) + "vp_" + std::get<1>(info.param);
                         });

#if defined(WEFT_TEST_CHECKED) && !defined(WEFT_TEST_ASAN)
// With the mprotect fallback's budget used up (here: 0) a stack has no guard; a
// thread that ran a few KiB past its bottom and came back is caught by the canary
// when it finishes (checked builds), and reported with its id and stack bounds.
TEST(StackCanaryDeathTest, UnguardedOverflowIsCaughtAtFinish) {
  SetDeathTestStyle();
  EXPECT_DEATH(OverflowInWeftThread(1, 0, Overflow::kPastBottomAndBack, "mprotect:0"),
               ::testing::Matcher<const std::string &>(new OverflowReport));
}

// The same overflow by frames that leave most words below the stack unwritten (the
// first word below it among them): the canary covers the top page of the guard range,
// not one word, which such an overflow stepped over unseen.
TEST(StackCanaryDeathTest, SparseUnguardedOverflowIsCaughtAtFinish) {
  SetDeathTestStyle();
  EXPECT_DEATH(OverflowInWeftThread(1, 0, Overflow::kPastBottomSparse, "mprotect:0"),
               ::testing::Matcher<const std::string &>(new OverflowReport));
}
#endif

INSTANTIATE_TEST_SUITE_P(Sizes, StackDeathTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(size_t{0}, WEFT_MIN_STACK_SIZE, 1 * MiB)),
                         [](const ::testing::TestParamInfo<std::tuple<int, size_t>> &info) {
                           size_t s = std::get<1>(info.param);
                           return std::to_string(std::get<0>(info.param)) + "vp_" +
                                  (s == 0 ? std::string("default") : std::to_string(s / KiB) + "KiB");
                         });

}  // namespace
