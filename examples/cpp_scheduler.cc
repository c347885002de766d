// examples/cpp_scheduler.cc - a scheduler written by inheritance (weft::scheduler).
//
// The scheduler is the class `lifo`: every ready thread of its bundle goes on one
// stack, and an idle virtual processor takes the newest. That is the whole scheduler;
// the rest of the file runs threads under it.
#include <weft/weft.hpp>

#include <cstdio>
#include <mutex>
#include <vector>

struct lifo : weft::scheduler {
  weft::spinlock<> lock;             // handlers run on several VPs at once
  weft_thread_t *top = nullptr;      // threads linked through their scheduler word

  void push(weft_thread_t *t) {
    std::lock_guard<weft::spinlock<>> g(lock);
    data(t) = reinterpret_cast<uintptr_t>(top);
    top = t;
  }
  void thread_created(weft_thread_t *t) override { push(t); }
  void thread_unblocked(weft_thread_t *t) override { push(t); }
  weft_thread_t *processor_idle(weft_vp_t *) override {
    std::lock_guard<weft::spinlock<>> g(lock);
    weft_thread_t *t = top;
    if (t) top = reinterpret_cast<weft_thread_t *>(data(t));
    return t;
  }
};

int main() {
  weft::runtime rt(1);  // one VP, so the order below is the scheduler's alone
  lifo sched;
  weft::bundle b(sched);
  weft::thread::attributes in_b;
  in_b.bundle = b.native_handle();

  weft::mutex m;
  std::vector<int> order;
  std::vector<weft::thread> ts;
  for (int i = 0; i < 5; i++)
    ts.emplace_back(in_b, [&, i] {
      std::lock_guard<weft::mutex> g(m);
      order.push_back(i);
    });
  for (auto &t : ts) t.join();  // main blocks: the VP asks `sched` for threads
  b.destroy();

  std::printf("ran in order:");
  for (int i : order) std::printf(" %d", i);
  std::printf("  (newest first: a LIFO)\n");
  return order.size() == 5 && order.front() == 4 ? 0 : 1;
}
