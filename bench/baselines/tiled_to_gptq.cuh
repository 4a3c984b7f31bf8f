// lowbit's MMA-tiled int4 words into GPTQ's K-packed words, the input of vLLM's weight
// repacks (Marlin: gptq_marlin_repack, Machete: machete_prepack_B). Exact: the same nibbles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lowbit/int4/kernel_layout.h"

namespace lowbit::bench::baselines {

// GPTQ's K-packed words of one weight: word (r, c) of [K/8, N] holds elements (c, 8r + j) in
// bits 4j. Stored row-major ([K/8][N], gptq[r * N + c]: what Marlin's repack reads) or, with
// `column_major`, as [N][K/8] (gptq[c * K/8 + r]: the qweight.t().contiguous().t() that vLLM
// hands Machete's prepack). `tiled` is the weight's MMA-tiled words.
__global__ inline void tiled_to_gptq_kernel(const uint32_t* __restrict__ tiled, uint32_t* __restrict__ gptq, int n,
                                            int k, bool column_major) {
  const size_t rows = static_cast<size_t>(k / 8), total = rows * n;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i / n), c = static_cast<int>(i % n);
    uint32_t word = 0;
    for (int j = 0; j < 8; ++j) {
      const int4::MmaTiledPos pos = int4::mma_tiled_pos(c, 8 * r + j, k);
      word |= ((tiled[pos.word] >> (4 * pos.slot)) & 0xFu) << (4 * j);
    }
    gptq[column_major ? static_cast<size_t>(c) * rows + r : i] = word;
  }
}

}  // namespace lowbit::bench::baselines
