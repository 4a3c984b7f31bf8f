// Tensor-core W4A16 GEMM for prefill (M > 64): 128 x 128 output tiles, K steps of 32.
// Per K step the block stages x [128 x 32] and the weights dequantized to the activation
// dtype [32 x 128] in shared memory, and 8 warps (4 along M x 2 along N, 32 x 64 each) run
// m16n16k16 WMMA (HMMA m16n8k16 in SASS) with fp32 accumulators. The next step's global
// loads (x as 16 B vectors, weight words + scales) are issued into registers before the
// current step's MMAs, so memory latency overlaps the math.
// Dequantization is the LOP3 path of common.cuh, bit-identical to the CPU contract.
#include <mma.h>

#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"

namespace lowbit::int4 {
namespace kern {
namespace {

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int kThreads = 256;
constexpr int LDA = BK + 8;  // +8 elements (16 B): ldm multiple of 8, rows off-bank
constexpr int LDB = BN + 8;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gemm_tc_kernel(const T* __restrict__ x, T* __restrict__ y, int M, int N, int K, int G,
                   const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                   const uint16_t* __restrict__ zeros) {
  using namespace nvcuda;
  using T2 = typename Act<T>::T2;
  __shared__ __align__(128) T As[BM * LDA];
  __shared__ __align__(128) T Bs[BK * LDB];
  __shared__ __align__(128) float Cs[8][16 * 16];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int nw = N / 8;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  // Staging registers: 2 x-vectors and 2 weight words (+ their octet params) per thread.
  uint4 xa[2];
  uint32_t wq[2];
  OctetParams<T> wp[2];
  bool wok[2];
  auto load_stage = [&](int k0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = tid + r * kThreads;
      const int row = i / (BK / 8), kq = (i % (BK / 8)) * 8;
      xa[r] = (m0 + row < M) ? __ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(m0 + row) * K + k0 + kq))
                             : make_uint4(0, 0, 0, 0);
      const int krow = i / (BN / 8), wc = i % (BN / 8);
      const int word = n0 / 8 + wc;
      wok[r] = word < nw;
      if (wok[r]) {
        wq[r] = __ldg(qw + static_cast<size_t>(k0 + krow) * nw + word);
        load_octet_params<T>(scales, zeros, static_cast<size_t>((k0 + krow) / G) * N + 8 * word, wp[r]);
      }
    }
  };
  auto store_stage = [&]() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = tid + r * kThreads;
      const int row = i / (BK / 8), kq = (i % (BK / 8)) * 8;
      *reinterpret_cast<uint4*>(&As[row * LDA + kq]) = xa[r];
      const int krow = i / (BN / 8), wc = i % (BN / 8);
      uint4 v = make_uint4(0, 0, 0, 0);
      if (wok[r]) {
        T2 w2[4];
        dequant_word<T>(wq[r], wp[r], w2);
        v = make_uint4(as_bits(w2[0]), as_bits(w2[1]), as_bits(w2[2]), as_bits(w2[3]));
      }
      *reinterpret_cast<uint4*>(&Bs[krow * LDB + wc * 8]) = v;
    }
  };

  load_stage(0);
  for (int k0 = 0; k0 < K; k0 += BK) {
    store_stage();
    __syncthreads();
    if (k0 + BK < K) load_stage(k0 + BK);  // in flight during the MMAs below
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[(wm * 32 + i * 16) * LDA + kk], LDA);
#pragma unroll
      for (int j = 0; j < 4; ++j) wmma::load_matrix_sync(b[j], &Bs[kk * LDB + wn * 64 + j * 16], LDB);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: each warp bounces one 16 x 16 fragment at a time through shared memory and
  // writes 8 consecutive outputs per lane (one 16 B store; N % 8 == 0 keeps them whole).
  float* cs = Cs[warp];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wmma::store_matrix_sync(cs, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int r = lane / 2, c = (lane % 2) * 8;
      const int m = m0 + wm * 32 + i * 16 + r, n = n0 + wn * 64 + j * 16 + c;
      if (m < M && n < N) {
        T2 o[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          T lo = Act<T>::from_float(cs[r * 16 + c + 2 * t]);
          T hi = Act<T>::from_float(cs[r * 16 + c + 2 * t + 1]);
          o[t].x = lo;
          o[t].y = hi;
        }
        *reinterpret_cast<uint4*>(y + static_cast<size_t>(m) * N + n) =
            make_uint4(as_bits(o[0]), as_bits(o[1]), as_bits(o[2]), as_bits(o[3]));
      }
      __syncwarp();
    }
}

template <typename T>
cudaError_t launch(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, NG = s.num_groups();
  const uint32_t* qw = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(expert) * K * (N / 8);
  const size_t so = static_cast<size_t>(expert) * NG * N;
  dim3 grid(ceil_div(N, BN), ceil_div(m, BM));
  gemm_tc_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), m, N, K,
                                                   s.group_len(), qw, w.scales + so, w.zeros ? w.zeros + so : nullptr);
  return cudaGetLastError();
}

}  // namespace
}  // namespace kern

namespace detail {
cudaError_t launch_gemm_tc(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  return w.shape.act == DType::kF16 ? kern::launch<__half>(x, y, m, w, expert, stream)
                                    : kern::launch<__nv_bfloat16>(x, y, m, w, expert, stream);
}
}  // namespace detail
}  // namespace lowbit::int4
