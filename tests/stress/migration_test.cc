// tests/stress/migration_test.cc - threads move between VPs (stolen by idle VPs,
// woken on another VP); after every resume weft_vp_self(), weft_sched_vp_self()
// and the kernel thread underneath agree, so nothing thread-local was cached
// across a switch.
#include <set>

#include "weft_test.h"

using namespace weft_test;

namespace {

// A spare VP of the system monitor reports the index of the VP it stands in for on a
// kernel thread of its own, which is what this test reports as wrong (seen under TSan,
// where a VP's kernel thread waits in TSan's own futex and looks stalled): off here.
class MigrationTest : public VpTest {
  MonitorOffEnv monitor_off_;  // before SetUp's weft_init
};
WEFT_INSTANTIATE_VPS(MigrationTest);

constexpr int kMinIterations = 200;     // every thread checks at least this many resumes
constexpr int kMaxIterations = 20000;   // bound on the search for migrations
constexpr long kWantedMigrations = 20;

struct World {
  explicit World(int n) : nvps(n), tid_of_vp(n) {}
  int nvps;
  std::vector<std::atomic<long>> tid_of_vp;  // VP -> its kernel thread, learned on first sight
  std::atomic<long> resumes{0}, migrations{0}, disagreements{0}, wrong_kernel_thread{0};
  std::atomic<int> done{0};
  WaitList wl;
};

// Checks where the caller resumed: weft_vp_self() and weft_sched_vp_self() name
// the same VP, and that VP is always the same kernel thread. Returns the VP.
int CheckResume(World *w) {
  int vp = weft_vp_self();
  weft_vp_t *svp = weft_sched_vp_self();
  long tid = Tid();
  w->resumes.fetch_add(1, std::memory_order_relaxed);
  if (vp < 0 || vp >= w->nvps || svp == nullptr || weft_sched_vp_index(svp) != vp ||
      weft_vp_self() != vp) {
    w->disagreements++;
    return vp;
  }
  long expected = 0;
  if (!w->tid_of_vp[vp].compare_exchange_strong(expected, tid) && expected != tid) {
    w->wrong_kernel_thread++;
  }
  return vp;
}

// Alternates yields and blocks (woken by the waker, on the waker's VP), checking
// every resume, until enough migrations were seen (or the bound is reached).
void *Mover(void *arg) {
  auto *w = static_cast<World *>(arg);
  const long wanted = w->nvps > 1 ? kWantedMigrations : 0;
  int vp = CheckResume(w);
  for (int i = 0; i < kMaxIterations; ++i) {
    if (i >= kMinIterations && w->migrations.load() >= wanted) break;
    if (i % 4 == 3) {
      w->wl.Wait();
    } else {
      weft_yield();
    }
    int now = CheckResume(w);
    if (now != vp) w->migrations++;
    vp = now;
  }
  w->done++;
  return P(0);
}

// Wakes blocked movers until all are done.
void *Waker(void *arg) {
  auto *w = static_cast<World *>(arg);
  const int movers = static_cast<int>(I(weft_local_get()));
  while (w->done.load() < movers) {
    if (!w->wl.WakeOne()) weft_yield();
    CheckResume(w);
  }
  return P(0);
}

// Migration happens (with more than one VP) and every resume is consistent.
TEST_P(MigrationTest, ThreadLocalStateFollowsMigration) {
  World w(nvps());
  w.tid_of_vp[0] = Tid();  // VP 0 is the OS thread that called weft_init
  const int movers = 4 * nvps() + 2;
  std::vector<weft_thread_t *> ts;
  for (int i = 0; i < movers; ++i) ts.push_back(Spawn(Mover, &w));
  weft_thread_t *waker = Spawn(+[](void *a) {
    weft_local_set(P(static_cast<World *>(a)->nvps * 4 + 2));
    return Waker(a);
  }, &w);
  for (weft_thread_t *t : ts) {
    Join(t);
    CheckResume(&w);  // the main thread migrates too
  }
  Join(waker);
  EXPECT_EQ(w.disagreements.load(), 0) << "weft_vp_self and weft_sched_vp_self disagreed";
  EXPECT_EQ(w.wrong_kernel_thread.load(), 0) << "a VP index was reported on another VP's kernel thread";
  EXPECT_GE(w.resumes.load(), static_cast<long>(movers) * kMinIterations);
  if (nvps() > 1) {
    EXPECT_GE(w.migrations.load(), 1) << "no thread ever resumed on another VP";
  } else {
    EXPECT_EQ(w.migrations.load(), 0);
  }
  std::set<long> tids;
  int seen = 0;
  for (auto &t : w.tid_of_vp) {
    if (t.load() != 0) {
      ++seen;
      tids.insert(t.load());
    }
  }
  EXPECT_EQ(static_cast<int>(tids.size()), seen) << "two VPs share a kernel thread";
  RecordProperty("migrations", static_cast<int>(w.migrations.load()));
}

}  // namespace
