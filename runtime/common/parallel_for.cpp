#include "lowbit/detail/parallel_for.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace lowbit::detail {

void parallel_for(int n, int threads, const std::function<void(int, int)>& fn) {
  if (threads <= 1 || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  if (threads > n) threads = n;
  std::vector<std::thread> pool;
  const int per = (n + threads - 1) / threads;
  for (int i = 1; i < threads; ++i) {
    const int b = i * per, e = std::min(n, b + per);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  fn(0, std::min(n, per));  // the caller works too
  for (auto& t : pool) t.join();
}

int host_threads() {
  static const int v = [] {
    if (const char* e = std::getenv("LOWBIT_HOST_THREADS"); e != nullptr && std::atoi(e) >= 1) return std::atoi(e);
    const int hw = static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(hw, 1, 16);
  }();
  return v;
}

}  // namespace lowbit::detail
