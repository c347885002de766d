// tests/stress/cross_vp_test.cc - threads created on one VP are joined by threads on
// other VPs; handles travel through a shared array.
#include "weft_test.h"

using namespace weft_test;

namespace {

class CrossVpTest : public VpTest {};
WEFT_INSTANTIATE_VPS(CrossVpTest);

struct Board {
  int creators = 0;
  int per_creator = 0;
  std::vector<std::atomic<weft_thread_t *>> slots;  // published by creators
  Board(int c, int m) : creators(c), per_creator(m), slots(static_cast<size_t>(c) * m) {}
};
struct Role {
  Board *board;
  int index;
};

void *Leaf(void *arg) {
  weft_yield();
  return P(3 * I(arg));
}

// Creator i creates per_creator leaves and publishes their handles.
void *Creator(void *arg) {
  auto *role = static_cast<Role *>(arg);
  Board *b = role->board;
  for (int j = 0; j < b->per_creator; ++j) {
    intptr_t slot = static_cast<intptr_t>(role->index) * b->per_creator + j;
    weft_thread_t *t = Spawn(Leaf, P(slot));
    b->slots[slot].store(t, std::memory_order_release);
    if (j % 16 == 0) weft_yield();
  }
  return P(0);
}

// Joiner i joins the leaves of creator (i + 1) mod creators, waiting for each
// handle to appear, and returns the sum of their results.
void *Joiner(void *arg) {
  auto *role = static_cast<Role *>(arg);
  Board *b = role->board;
  int from = (role->index + 1) % b->creators;
  intptr_t sum = 0;
  for (int j = 0; j < b->per_creator; ++j) {
    auto &slot = b->slots[static_cast<size_t>(from) * b->per_creator + j];
    YieldUntil([&] { return slot.load(std::memory_order_acquire) != nullptr; });
    weft_thread_t *t = slot.load(std::memory_order_acquire);
    if (t == nullptr) return P(-1);
    sum += I(Join(t));
  }
  return P(sum);
}

// Creators and joiners, spread over the VPs by affinity hints, create and join
// each other's threads; every leaf is joined exactly once with its result.
TEST_P(CrossVpTest, CreateHereJoinThere) {
  const int creators = 2 * nvps() + 1;
  const int per_creator = static_cast<int>(Scaled(400, 10));
  Board board(creators, per_creator);
  std::vector<Role> roles(creators);
  std::vector<weft_thread_t *> creator_ts, joiner_ts;
  for (int i = 0; i < creators; ++i) {
    roles[i] = {&board, i};
    weft_attr_t attr;
    weft_attr_init(&attr);
    attr.vproc = WEFT_VPROC(i);
    creator_ts.push_back(Spawn(Creator, &roles[i], &attr));
    attr.vproc = WEFT_VPROC(i + 1);
    joiner_ts.push_back(Spawn(Joiner, &roles[i], &attr));
  }
  for (weft_thread_t *t : creator_ts) Join(t);
  for (int i = 0; i < creators; ++i) {
    int from = (i + 1) % creators;
    intptr_t expected = 0;
    for (int j = 0; j < per_creator; ++j) expected += 3 * (static_cast<intptr_t>(from) * per_creator + j);
    EXPECT_EQ(Join(joiner_ts[i]), P(expected)) << "joiner " << i;
  }
}

}  // namespace
