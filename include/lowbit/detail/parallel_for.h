// Host-side parallel loops for the CPU work around the kernels (load-time repacks, checkpoint
// conversion, the CPU model engine): std::threads over contiguous index ranges, the caller's
// thread taking the first range. Work items must write disjoint memory.
#pragma once

#include <functional>

namespace lowbit::detail {

// Runs fn(begin, end) over [0, n) split into at most `threads` contiguous ranges.
void parallel_for(int n, int threads, const std::function<void(int begin, int end)>& fn);

// Threads for the library's host-side loops: LOWBIT_HOST_THREADS when set (>= 1; 1 turns
// them off), else the hardware's concurrency, at most 16 (read once).
int host_threads();

}  // namespace lowbit::detail
