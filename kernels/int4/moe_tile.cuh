// The inner loop of the MoE GEMMs: for MT gathered activation rows and NW N-packed word
// columns of one expert, dot products over all of K, split across the block's K slices
// and reduced in shared memory in slice order (deterministic). Same streaming scheme and
// dequantization as the skinny dense GEMM (gemm_skinny.cu).
#pragma once

#include "kernels/int4/common.cuh"

namespace lowbit::int4::kern {

constexpr int kMoeKSlices = 4;
constexpr int kMoeRows = 4;  // rows per pass (MT)
constexpr int kMoeCols = 256;  // columns (32 words) per block

// Block: (32, kMoeKSlices) threads. rows[m]: row base pointer or nullptr (row absent: zeros).
// words[w]: the word column of this lane (valid when < nw). On return red[0..] is
// overwritten; out[w][m][j] holds the full sum for column 8*words[w] + j (all threads).
template <typename T, int NW>
__device__ __forceinline__ void moe_rows_dot(const T* const (&rows)[kMoeRows], int K, int G, int N,
                                             const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                                             const uint16_t* __restrict__ zeros, const int (&words)[NW], bool col_ok,
                                             float (*red)[NW * kMoeRows * 8][33], float (&out)[NW][kMoeRows][8]) {
  using T2 = typename Act<T>::T2;
  constexpr int MT = kMoeRows;
  const int lane = threadIdx.x, ty = threadIdx.y;
  const int nw = N / 8;
  float acc[NW][MT][8];
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[w][m][j] = 0.f;
  if (col_ok) {
    const int chunks = K / kKernelKChunk;
    for (int c = ty; c < chunks; c += kMoeKSlices) {
      const int k0 = c * kKernelKChunk;
      OctetParams<T> p[NW];
#pragma unroll
      for (int w = 0; w < NW; ++w) load_octet_params<T>(scales, zeros, static_cast<size_t>(k0 / G) * N + 8 * words[w], p[w]);
#pragma unroll
      for (int kb = 0; kb < kKernelKChunk; kb += 8) {
        uint32_t wv[NW][8];
#pragma unroll
        for (int w = 0; w < NW; ++w)
#pragma unroll
          for (int i = 0; i < 8; ++i) wv[w][i] = __ldg(qw + static_cast<size_t>(k0 + kb + i) * nw + words[w]);
        uint4 xv[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m)
          xv[m] = rows[m] ? __ldg(reinterpret_cast<const uint4*>(rows[m] + k0 + kb)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          float xs[MT];
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            const float2 xf = Act<T>::to_float2(bits_as<T2>((&xv[m].x)[i / 2]));
            xs[m] = (i & 1) ? xf.y : xf.x;
          }
#pragma unroll
          for (int w = 0; w < NW; ++w) {
            T2 w2[4];
            dequant_word<T>(wv[w][i], p[w], w2);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const float2 f = Act<T>::to_float2(w2[j]);
#pragma unroll
              for (int m = 0; m < MT; ++m) {
                acc[w][m][2 * j] = __fmaf_rn(xs[m], f.x, acc[w][m][2 * j]);
                acc[w][m][2 * j + 1] = __fmaf_rn(xs[m], f.y, acc[w][m][2 * j + 1]);
              }
            }
          }
        }
      }
    }
  }
  __syncthreads();  // red may still be read by a previous pass
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < 8; ++j) red[ty][(w * MT + m) * 8 + j][lane] = acc[w][m][j];
  __syncthreads();
  // Every thread reads back its own column's sums, slices added in order.
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float s = 0.f;
#pragma unroll
        for (int t = 0; t < kMoeKSlices; ++t) s += red[t][(w * MT + m) * 8 + j][lane];
        out[w][m][j] = s;
      }
}

}  // namespace lowbit::int4::kern
