#include "app/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace servesim::app {

size_t parallel_for(size_t n, int jobs, const std::function<void(size_t)>& f,
                    const std::function<bool()>& stop,
                    const std::function<void(size_t)>& progress) {
  std::atomic<size_t> next{0}, done{0};
  auto worker = [&] {
    for (;;) {
      if (stop && stop()) return;
      const size_t k = next.fetch_add(1);
      if (k >= n) return;
      f(k);
      done.fetch_add(1);
    }
  };
  const int threads_wanted = std::max(1, std::min<int>(jobs, static_cast<int>(n)));
  std::vector<std::thread> threads;
  for (int i = 0; i < threads_wanted; ++i) threads.emplace_back(worker);
  while (progress && done.load() < n && !(stop && stop())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    progress(done.load());
  }
  for (auto& t : threads) t.join();
  if (progress) progress(done.load());
  return done.load();
}

int default_jobs() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace servesim::app
