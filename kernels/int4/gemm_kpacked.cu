// Fallback W4A16 GEMM for shapes the N-packed layout cannot hold (N % 8 != 0 or
// K % 32 != 0): reads the canonical K-packed bytes [E, N, K/2] directly. One warp per
// output column n walks K (coalesced along the row's bytes), one fp32 sum per row of x;
// slower than the fast paths but any N and even K work.
#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"

namespace lowbit::int4 {
namespace kern {
namespace {

constexpr int kRows = 4;  // x rows per warp pass

template <typename T>
__global__ void gemm_kpacked_kernel(const T* __restrict__ x, T* __restrict__ y, int M, int N, int K, int G,
                                    const uint8_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                                    const uint16_t* __restrict__ zeros) {
  const int lane = threadIdx.x % 32;
  const int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (n >= N) return;
  const int m0 = blockIdx.y * kRows;
  const uint8_t* row = qw + static_cast<size_t>(n) * (K / 2);
  float acc[kRows] = {};
  for (int b = lane; b < K / 2; b += 32) {
    const uint8_t byte = row[b];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = 2 * b + h;
      const size_t gi = static_cast<size_t>(k / G) * N + n;
      const float s = Act<T>::to_float(*reinterpret_cast<const T*>(scales + gi));
      const float z = zeros ? Act<T>::to_float(*reinterpret_cast<const T*>(zeros + gi)) : 8.f;
      const float d = static_cast<float>((byte >> (4 * h)) & 0xF) - z;  // exact
      const float w = Act<T>::to_float(Act<T>::from_float(d * s));      // exact product, one rounding
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (m0 + r < M) acc[r] = __fmaf_rn(Act<T>::to_float(x[static_cast<size_t>(m0 + r) * K + k]), w, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = acc[r];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0 && m0 + r < M) y[static_cast<size_t>(m0 + r) * N + n] = Act<T>::from_float(v);
  }
}

template <typename T>
cudaError_t launch(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, NG = s.num_groups();
  const uint8_t* qw = static_cast<const uint8_t*>(w.qweight) + static_cast<size_t>(expert) * N * (K / 2);
  const size_t so = static_cast<size_t>(expert) * NG * N;
  constexpr int kWarps = 8;
  dim3 grid(ceil_div(N, kWarps), ceil_div(m, kRows));
  gemm_kpacked_kernel<T><<<grid, 32 * kWarps, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), m, N, K,
                                                           s.group_len(), qw, w.scales + so,
                                                           w.zeros ? w.zeros + so : nullptr);
  return cudaGetLastError();
}

}  // namespace
}  // namespace kern

namespace detail {
cudaError_t launch_gemm_kpacked(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                cudaStream_t stream) {
  return w.shape.act == DType::kF16 ? kern::launch<__half>(x, y, m, w, expert, stream)
                                    : kern::launch<__nv_bfloat16>(x, y, m, w, expert, stream);
}
}  // namespace detail
}  // namespace lowbit::int4
