// MoE GEMM2: per sorted block of one expert, slot_out[p, :] = topk_weight[p] *
// (inter[p] W2^T) with w2 [E, H, I]. Per-slot fp32 outputs (no atomics) keep the top-k sum
// (moe_sum.cu) deterministic. Padding blocks/rows exit before any K loop.
#include "kernels/int4/moe_tile.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

template <typename T>
__global__ void __launch_bounds__(32 * kMoeKSlices)
    moe_gemm2_kernel(const T* __restrict__ inter, const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                     const uint16_t* __restrict__ zeros, const int32_t* __restrict__ sorted_ids,
                     const int32_t* __restrict__ expert_ids, const int32_t* __restrict__ num_post_padded,
                     const float* __restrict__ topk_weights, int M, int topk, int BM, int H, int I, int G,
                     float* __restrict__ slot_out) {
  __shared__ float red[kMoeKGroups][kMoeRows * 8][kMoeWords + 1];
  __shared__ int s_ids[128];
  __shared__ int s_valid;
  const int P = M * topk;
  int nvalid = 0;
  const int e = moe_block_prologue(sorted_ids, expert_ids, num_post_padded, P, BM, s_ids, &s_valid, &nvalid);
  if (e < 0) return;
  const int N = H, K = I, NG = K / G;
  const uint32_t* qe = qw + static_cast<size_t>(e) * K * (N / 8);
  const size_t so = static_cast<size_t>(e) * NG * N;
  const int word = blockIdx.x * kMoeWords + threadIdx.x % kMoeWords;
  const bool col_ok = word < N / 8;
  const int words[1] = {word};
  for (int r0 = 0; r0 < nvalid; r0 += kMoeRows) {
    const T* rows[kMoeRows];
#pragma unroll
    for (int m = 0; m < kMoeRows; ++m)
      rows[m] = (r0 + m < nvalid) ? inter + static_cast<size_t>(s_ids[r0 + m]) * K : nullptr;
    float out[1][kMoeRows][8];
    moe_rows_dot<T, 1>(rows, K, G, N, qe, scales + so, zeros ? zeros + so : nullptr, words, col_ok, red, out);
    if (threadIdx.y == 0 && threadIdx.x < kMoeWords && col_ok) {  // K group 0 writes
#pragma unroll
      for (int m = 0; m < kMoeRows; ++m) {
        if (r0 + m >= nvalid) break;
        const int id = s_ids[r0 + m];
        const float rw = topk_weights[id];
        float4* dst = reinterpret_cast<float4*>(slot_out + static_cast<size_t>(id) * N + 8 * word);
        dst[0] = make_float4(rw * out[0][m][0], rw * out[0][m][1], rw * out[0][m][2], rw * out[0][m][3]);
        dst[1] = make_float4(rw * out[0][m][4], rw * out[0][m][5], rw * out[0][m][6], rw * out[0][m][7]);
      }
    }
  }
}

template <typename T>
cudaError_t launch(const void* inter, const KernelWeightsView& w, const int32_t* sorted_ids, const int32_t* expert_ids,
                   const int32_t* npp, const float* tw, int m, int topk, int bm, float* slot_out, cudaStream_t st) {
  const int E = w.shape.experts, H = w.shape.n, I = w.shape.k;
  const int64_t blocks = moe_max_padded(m, topk, E, bm) / bm;
  dim3 grid(ceil_div(H, kMoeCols), static_cast<unsigned>(blocks));
  moe_gemm2_kernel<T><<<grid, dim3(32, kMoeKSlices), 0, st>>>(
      static_cast<const T*>(inter), static_cast<const uint32_t*>(w.qweight), w.scales, w.zeros, sorted_ids, expert_ids,
      npp, tw, m, topk, bm, H, I, w.shape.group_len(), slot_out);
  return cudaGetLastError();
}

}  // namespace
}  // namespace kern

Status moe_gemm2(const void* inter, const KernelWeightsView& w2, const int32_t* sorted_ids, const int32_t* expert_ids,
                 const int32_t* num_post_padded, const float* topk_weights, int m, int topk, int block_m,
                 float* slot_out, Stream stream) {
  LOWBIT_CHECK_ARG(inter && sorted_ids && expert_ids && num_post_padded && topk_weights && slot_out,
                   "int4::moe_gemm2: null pointer");
  LOWBIT_CHECK_ARG(w2.kind == KernelLayoutKind::kNPackedInterleaved && w2.qweight && w2.scales,
                   "int4::moe_gemm2: w2 must be an N-packed weight with qweight and scales");
  LOWBIT_CHECK_ARG(w2.shape.n % 8 == 0 && w2.shape.k % kKernelKChunk == 0,
                   "int4::moe_gemm2: needs H %% 8 == 0 and I %% 32 == 0 (H=%d I=%d)", w2.shape.n, w2.shape.k);
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1 && block_m >= 1 && block_m <= 128, "int4::moe_gemm2: m=%d topk=%d block_m=%d", m,
                   topk, block_m);
  LOWBIT_CHECK_ARG(moe_max_padded(m, topk, w2.shape.experts, block_m) / block_m <= 65535,
                   "int4::moe_gemm2: %lld sorted blocks exceed the grid limit 65535 (raise block_m)",
                   static_cast<long long>(moe_max_padded(m, topk, w2.shape.experts, block_m) / block_m));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  LOWBIT_CUDA_RETURN(w2.shape.act == DType::kF16
                         ? kern::launch<__half>(inter, w2, sorted_ids, expert_ids, num_post_padded, topk_weights, m,
                                                topk, block_m, slot_out, st)
                         : kern::launch<__nv_bfloat16>(inter, w2, sorted_ids, expert_ids, num_post_padded,
                                                       topk_weights, m, topk, block_m, slot_out, st));
  return Status::Ok();
}

}  // namespace lowbit::int4
