// examples/cpp_threads.cc - weft from C++, written the way one writes std::thread code.
//
// Four workers take numbers from a shared queue and add them up; main produces the
// numbers and waits for the result. Swap `weft::` for `std::` and it is the same
// program on kernel threads; with weft the threads are user-level threads, so
// thousands of them are cheap and blocking in mutex/condition_variable does not
// block a kernel thread.
#include <weft/weft.hpp>

#include <cstdio>
#include <deque>
#include <mutex>
#include <vector>

int main() {
  weft::runtime rt;  // starts weft: one virtual processor per CPU; stops it at the end

  weft::mutex m;
  weft::condition_variable cv;
  std::deque<long> queue;  // guarded by m
  bool closed = false;     // guarded by m
  long total = 0;          // guarded by m

  std::vector<weft::thread> workers;
  for (int i = 0; i < 4; i++) {
    workers.emplace_back([&] {
      long mine = 0;
      std::unique_lock<weft::mutex> lock(m);
      for (;;) {
        cv.wait(lock, [&] { return !queue.empty() || closed; });
        if (queue.empty()) break;  // closed and drained
        mine += queue.front();
        queue.pop_front();
      }
      total += mine;  // still holding the lock
    });
  }

  for (long n = 1; n <= 100000; n++) {
    {
      std::lock_guard<weft::mutex> lock(m);
      queue.push_back(n);
    }
    cv.notify_one();
  }
  {
    std::lock_guard<weft::mutex> lock(m);
    closed = true;
  }
  cv.notify_all();
  for (auto &w : workers) w.join();

  std::printf("sum of 1..100000 = %ld (expected %ld) on %d virtual processors\n", total,
              100000L * 100001L / 2, weft::runtime::vp_count());
  return total == 100000L * 100001L / 2 ? 0 : 1;
}
