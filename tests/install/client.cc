// tests/install/client.cc - a C++17 program built against the installed package only,
// through the header layer (weft/weft.hpp). Eight weft::threads add to one counter under
// a weft::mutex; main joins them and prints the total, which run.sh checks.
#include <weft/weft.hpp>

#include <cstdio>
#include <mutex>
#include <vector>

int main() {
  constexpr int kThreads = 8, kAdds = 1000;
  long counter = 0;  // guarded by m
  {
    weft::runtime rt;
    weft::mutex m;
    std::vector<weft::thread> threads;
    for (int i = 0; i < kThreads; i++) {
      threads.emplace_back([&] {
        for (int k = 0; k < kAdds; k++) {
          std::lock_guard<weft::mutex> guard(m);
          counter++;
          if (k % 100 == 0) weft::this_thread::yield();
        }
      });
    }
    for (auto &t : threads) t.join();
    rt.shutdown();
  }
  std::printf("weft C++ client: %ld\n", counter);
  return 0;
}
