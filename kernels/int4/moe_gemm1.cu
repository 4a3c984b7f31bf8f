// MoE GEMM1: per sorted block of one expert, inter[p] = silu(x[p/topk] W_gate^T) *
// (x[p/topk] W_up^T) with w13 [E, 2I, H]; gate and up columns n and I+n are computed by the
// same lane so the activation is fused in the epilogue (no [M*topk, 2I] intermediate).
// Blocks at or past num_post_padded (and padding rows) exit before any K loop; valid rows
// are a prefix of each block (align pads at the end of an expert's run), processed
// kMoeRows at a time.
#include "kernels/int4/moe_tile.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

template <typename T>
__global__ void __launch_bounds__(32 * kMoeKSlices)
    moe_gemm1_kernel(const T* __restrict__ x, const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                     const uint16_t* __restrict__ zeros, const int32_t* __restrict__ sorted_ids,
                     const int32_t* __restrict__ expert_ids, const int32_t* __restrict__ num_post_padded, int M,
                     int topk, int BM, int H, int I, int G, T* __restrict__ inter) {
  __shared__ float red[kMoeKGroups][2 * kMoeRows * 8][kMoeWords + 1];
  __shared__ int s_ids[128];
  __shared__ int s_valid;
  const int P = M * topk;
  int nvalid = 0;
  const int e = moe_block_prologue(sorted_ids, expert_ids, num_post_padded, P, BM, s_ids, &s_valid, &nvalid);
  if (e < 0) return;
  const int N = 2 * I, NG = H / G;
  const uint32_t* qe = qw + static_cast<size_t>(e) * H * (N / 8);
  const size_t so = static_cast<size_t>(e) * NG * N;
  const int word = blockIdx.x * kMoeWords + threadIdx.x % kMoeWords;
  const bool col_ok = word < I / 8;
  const int words[2] = {word, I / 8 + word};
  for (int r0 = 0; r0 < nvalid; r0 += kMoeRows) {
    const T* rows[kMoeRows];
#pragma unroll
    for (int m = 0; m < kMoeRows; ++m)
      rows[m] = (r0 + m < nvalid) ? x + static_cast<size_t>(s_ids[r0 + m] / topk) * H : nullptr;
    float out[2][kMoeRows][8];
    moe_rows_dot<T, 2>(rows, H, G, N, qe, scales + so, zeros ? zeros + so : nullptr, words, col_ok, red, out);
    if (threadIdx.y == 0 && threadIdx.x < kMoeWords && col_ok) {  // K group 0 writes
#pragma unroll
      for (int m = 0; m < kMoeRows; ++m) {
        if (r0 + m >= nvalid) break;
        const int id = s_ids[r0 + m];
        typename Act<T>::T2 o[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float g0 = out[0][m][2 * j], g1 = out[0][m][2 * j + 1];
          const float a0 = g0 / (1.f + expf(-g0)) * out[1][m][2 * j];
          const float a1 = g1 / (1.f + expf(-g1)) * out[1][m][2 * j + 1];
          o[j].x = Act<T>::from_float(a0);
          o[j].y = Act<T>::from_float(a1);
        }
        *reinterpret_cast<uint4*>(inter + static_cast<size_t>(id) * I + 8 * word) =
            make_uint4(as_bits(o[0]), as_bits(o[1]), as_bits(o[2]), as_bits(o[3]));
      }
    }
  }
}

template <typename T>
cudaError_t launch(const void* x, const KernelWeightsView& w, const int32_t* sorted_ids, const int32_t* expert_ids,
                   const int32_t* npp, int m, int topk, int bm, void* inter, cudaStream_t st) {
  const int E = w.shape.experts, H = w.shape.k, I = w.shape.n / 2;
  const int64_t blocks = moe_max_padded(m, topk, E, bm) / bm;
  dim3 grid(ceil_div(I, kMoeCols), static_cast<unsigned>(blocks));
  moe_gemm1_kernel<T><<<grid, dim3(32, kMoeKSlices), 0, st>>>(
      static_cast<const T*>(x), static_cast<const uint32_t*>(w.qweight), w.scales, w.zeros, sorted_ids, expert_ids, npp,
      m, topk, bm, H, I, w.shape.group_len(), static_cast<T*>(inter));
  return cudaGetLastError();
}

}  // namespace
}  // namespace kern

Status moe_gemm1(const void* x, const KernelWeightsView& w13, const int32_t* sorted_ids, const int32_t* expert_ids,
                 const int32_t* num_post_padded, int m, int topk, int block_m, void* inter, Stream stream) {
  LOWBIT_CHECK_ARG(x && sorted_ids && expert_ids && num_post_padded && inter, "int4::moe_gemm1: null pointer");
  LOWBIT_CHECK_ARG(w13.kind == KernelLayoutKind::kNPackedInterleaved && w13.qweight && w13.scales,
                   "int4::moe_gemm1: w13 must be an N-packed weight with qweight and scales");
  LOWBIT_CHECK_ARG(w13.shape.n % 16 == 0 && w13.shape.k % kKernelKChunk == 0,
                   "int4::moe_gemm1: needs 2I %% 16 == 0 and H %% 32 == 0 (2I=%d H=%d)", w13.shape.n, w13.shape.k);
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1 && block_m >= 1 && block_m <= 128, "int4::moe_gemm1: m=%d topk=%d block_m=%d", m,
                   topk, block_m);
  LOWBIT_CHECK_ARG(moe_max_padded(m, topk, w13.shape.experts, block_m) / block_m <= 65535,
                   "int4::moe_gemm1: %lld sorted blocks exceed the grid limit 65535 (raise block_m)",
                   static_cast<long long>(moe_max_padded(m, topk, w13.shape.experts, block_m) / block_m));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  LOWBIT_CUDA_RETURN(w13.shape.act == DType::kF16
                         ? kern::launch<__half>(x, w13, sorted_ids, expert_ids, num_post_padded, m, topk, block_m, inter, st)
                         : kern::launch<__nv_bfloat16>(x, w13, sorted_ids, expert_ids, num_post_padded, m, topk, block_m,
                                                       inter, st));
  return Status::Ok();
}

}  // namespace lowbit::int4
