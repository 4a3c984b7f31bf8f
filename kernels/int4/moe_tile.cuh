// The inner loop of the MoE GEMMs: for MT gathered activation rows and NW N-packed word
// columns of one expert, dot products over all of K, split across the block's K slices
// and reduced in shared memory in slice order (deterministic). Same streaming scheme and
// dequantization as the skinny dense GEMM (gemm_skinny.cu).
#pragma once

#include "kernels/int4/common.cuh"

namespace lowbit::int4::kern {

// Block: 32 x kMoeKSlices threads. Lane l owns word column (l & 7) of the block's 8 (64
// output columns) and K group (l >> 3) + 4 * threadIdx.y of kMoeKGroups: narrow column
// tiles so that decode (one token per expert) still spreads over many SMs; a warp reads 4
// rows x 32 B (whole sectors).
constexpr int kMoeKSlices = 4;
constexpr int kMoeWords = 8;                      // words per block
constexpr int kMoeKGroups = 4 * kMoeKSlices;      // K groups per block
constexpr int kMoeRows = 4;                       // rows per pass (MT)
constexpr int kMoeCols = 8 * kMoeWords;           // output columns per block

// Prologue shared by the MoE GEMM kernels: block b of the align output. Returns the block's
// expert, or -1 when the block has nothing to do (past num_post_padded, an empty expert
// slot, or only padding entries: such blocks exit before any K loop). s_ids receives the
// block's BM sorted (token, slot) ids (padding = P = M * topk); *nvalid the non-padding count.
__device__ __forceinline__ int moe_block_prologue(const int32_t* __restrict__ sorted_ids,
                                                  const int32_t* __restrict__ expert_ids,
                                                  const int32_t* __restrict__ num_post_padded, int P, int BM,
                                                  int* s_ids, int* s_valid, int* nvalid) {
  const int b = blockIdx.y;
  if (b * BM >= *num_post_padded) return -1;
  const int e = expert_ids[b];
  if (e < 0) return -1;
  const int tid = threadIdx.y * 32 + threadIdx.x;
  if (tid == 0) *s_valid = 0;
  __syncthreads();
  for (int r = tid; r < BM; r += blockDim.x * blockDim.y) {
    const int id = sorted_ids[b * BM + r];
    s_ids[r] = id;
    if (id < P) atomicAdd(s_valid, 1);
  }
  __syncthreads();
  *nvalid = *s_valid;
  return *nvalid == 0 ? -1 : e;
}

// rows[m]: row base pointer or nullptr (row absent: zeros). words[w]: the word column of
// this lane (valid when col_ok). red is overwritten; out[w][m][j] holds the full sum for
// column 8*words[w] + j in the lanes of K group 0 (lane < 8, threadIdx.y == 0), K groups
// added in order; other lanes get zeros.
template <typename T, int NW>
__device__ __forceinline__ void moe_rows_dot(const T* const (&rows)[kMoeRows], int K, int G, int N,
                                             const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                                             const uint16_t* __restrict__ zeros, const int (&words)[NW], bool col_ok,
                                             float (*red)[NW * kMoeRows * 8][kMoeWords + 1], float (&out)[NW][kMoeRows][8]) {
  using T2 = typename Act<T>::T2;
  constexpr int MT = kMoeRows;
  const int wl = threadIdx.x % kMoeWords;
  const int kg = threadIdx.x / kMoeWords + 4 * threadIdx.y;
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
    for (int c = kg; c < chunks; c += kMoeKGroups) {
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
      for (int j = 0; j < 8; ++j) red[kg][(w * MT + m) * 8 + j][wl] = acc[w][m][j];
  __syncthreads();
  // Every lane reads back its word's sums, K groups added in order.
#pragma unroll
  for (int w = 0; w < NW; ++w)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float s = 0.f;
        if (kg == 0)  // only K group 0 writes results; the others skip the read-back
#pragma unroll
          for (int t = 0; t < kMoeKGroups; ++t) s += red[t][(w * MT + m) * 8 + j][wl];
        out[w][m][j] = s;
      }
}

}  // namespace lowbit::int4::kern
