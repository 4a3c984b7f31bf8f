// lowbit's MMA-tiled int4 weights into the inputs of vLLM's Marlin repack (make_weights() of
// bench/baselines/vllm_marlin.h; the words by bench/baselines/tiled_to_gptq.cuh). Exact: the
// same nibbles and scale bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "bench/baselines/tiled_to_gptq.cuh"
#include "lowbit/int4/kernel_layout.h"

namespace marlin {
// In marlin_repack.cu (vLLM's gptq_marlin_repack kernel, launcher written by prepare_sources.py).
cudaError_t lowbit_launch_repack4(const uint32_t* in, uint32_t* out, int size_k, int size_n, int blocks,
                                  int max_shared_mem, cudaStream_t stream);
}  // namespace marlin

namespace lowbit::bench::vllm_marlin::detail {

// vLLM's marlin_permute_scales for expert e of lowbit's [E, NG, N] scales (MMA-tiled column
// order, kernel_scale_index): the expert's [NG, N] flattened and taken in rows of 64 (grouped:
// entry 8i + j is i + 8j) or of 32 (one group: 8i + j is 2i + {0,1,8,9,16,17,24,25}[j]).
__global__ inline void permute_scales_kernel(const uint16_t* __restrict__ ours, uint16_t* __restrict__ out, int n,
                                             int ng, int e, bool grouped) {
  const size_t total = static_cast<size_t>(ng) * n;
  const int single[8] = {0, 1, 8, 9, 16, 17, 24, 25};
  for (size_t f = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; f < total;
       f += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int width = grouped ? 64 : 32;
    const size_t row = f / width;
    const int u = static_cast<int>(f % width), i = u / 8, j = u % 8;
    const size_t src = row * width + (grouped ? i + 8 * j : 2 * i + single[j]);
    const int g = static_cast<int>(src / n), c = static_cast<int>(src % n);
    out[f] = ours[int4::kernel_scale_index(int4::KernelLayoutKind::kMmaTiled, n, ng, e, g, c)];
  }
}

}  // namespace lowbit::bench::vllm_marlin::detail
