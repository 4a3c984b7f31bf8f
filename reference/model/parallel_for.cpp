#include <thread>
#include <vector>

#include "lowbit/model/cpu_ops.h"

namespace lowbit::model::cpu {

void parallel_for(int n, int threads, const std::function<void(int, int)>& fn) {
  if (threads <= 1 || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  if (threads > n) threads = n;
  std::vector<std::thread> pool;
  int per = (n + threads - 1) / threads;
  for (int i = 1; i < threads; ++i) {
    int b = i * per, e = std::min(n, b + per);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  fn(0, std::min(n, per));  // the caller works too
  for (auto& t : pool) t.join();
}

}  // namespace lowbit::model::cpu
