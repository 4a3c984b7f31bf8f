// Act-order activations: x'[r, j] = x[r, k_perm[j]], the input order of a weight whose rows are
// stored sorted by group (GPTQ desc_act, compressed-tensors actorder "group"; weights.h). Dense
// (int4::gemm, gemm.cu): one permutation for every row. MoE (fused_moe.cu): row p is the pair
// (token p / topk, slot) routed to expert ids[p], whose own permutation applies; GEMM1 then reads
// the gathered rows as tokens of top-1 routing, and the intermediate is gathered again for w2.
// A copy, bit for bit: 16-bit elements moved, no arithmetic.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/int4/internal.h"

namespace lowbit::int4::detail {

namespace {

// One thread per 8 consecutive outputs of a row (one 16 B store): the row's K inputs are read
// through the permutation (a row of x is at most a few hundred KB; L1 / L2 serve the scattered
// reads), the writes are coalesced.
__global__ void gather_act_order_kernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ out,
                                        const int32_t* __restrict__ perm, int m, int k) {
  const int chunks = k / 8;
  const size_t total = static_cast<size_t>(m) * chunks;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / chunks;
    const int j0 = static_cast<int>(i % chunks) * 8;
    const uint16_t* row = x + r * k;
    uint32_t packed[4];
#pragma unroll
    for (int p = 0; p < 4; ++p)
      packed[p] = static_cast<uint32_t>(row[perm[j0 + 2 * p]]) | static_cast<uint32_t>(row[perm[j0 + 2 * p + 1]]) << 16;
    *reinterpret_cast<uint4*>(out + r * k + j0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// Any even K (the K-packed layout's weights): one element per thread.
__global__ void gather_act_order_scalar_kernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ out,
                                               const int32_t* __restrict__ perm, int m, int k) {
  const size_t total = static_cast<size_t>(m) * k;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / k;
    out[i] = x[r * k + perm[i % k]];
  }
}

// MoE: out[p, j] = src[p / row_div, perm[e * k + j]] for e = ids[p] in [0, experts); rows of
// other ids (foreign experts: the align gave them no rows, so no GEMM reads them) are left as
// they are. One thread per 8 outputs, as above (k % 8 == 0: H % 32 and I % 8 in fused_moe).
__global__ void gather_moe_act_order_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ out,
                                            const int32_t* __restrict__ ids, const int32_t* __restrict__ perm,
                                            int rows, int row_div, int experts, int k) {
  const int chunks = k / 8;
  const size_t total = static_cast<size_t>(rows) * chunks;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t p = i / chunks;
    const int e = ids[p];
    if (e < 0 || e >= experts) continue;
    const int j0 = static_cast<int>(i % chunks) * 8;
    const uint16_t* row = src + (p / row_div) * k;
    const int32_t* pe = perm + static_cast<size_t>(e) * k + j0;
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      packed[q] = static_cast<uint32_t>(row[pe[2 * q]]) | static_cast<uint32_t>(row[pe[2 * q + 1]]) << 16;
    *reinterpret_cast<uint4*>(out + p * k + j0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

int gather_blocks(size_t items, int threads) {
  const size_t want = (items + threads - 1) / threads;
  return static_cast<int>(want < 65535 ? (want > 0 ? want : 1) : 65535);
}

}  // namespace

cudaError_t launch_gather_act_order(const void* x, void* out, const int32_t* perm, int m, int k,
                                    cudaStream_t stream) {
  const bool vec = k % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const size_t items = static_cast<size_t>(m) * (vec ? k / 8 : k);
  const int threads = 256;
  const int blocks = gather_blocks(items, threads);
  if (vec)
    gather_act_order_kernel<<<blocks, threads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                            static_cast<uint16_t*>(out), perm, m, k);
  else
    gather_act_order_scalar_kernel<<<blocks, threads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                                   static_cast<uint16_t*>(out), perm, m, k);
  return cudaGetLastError();
}

cudaError_t launch_gather_moe_act_order(const void* src, int row_div, const int32_t* ids, int rows, int experts,
                                        const int32_t* perm, int k, void* out, cudaStream_t stream) {
  if (k % 8 != 0 || row_div < 1 || reinterpret_cast<uintptr_t>(out) % 16 != 0) return cudaErrorInvalidValue;
  const int threads = 256;
  gather_moe_act_order_kernel<<<gather_blocks(static_cast<size_t>(rows) * (k / 8), threads), threads, 0, stream>>>(
      static_cast<const uint16_t*>(src), static_cast<uint16_t*>(out), ids, perm, rows, row_div, experts, k);
  return cudaGetLastError();
}

}  // namespace lowbit::int4::detail
