// Skinny W4A16 GEMM for decode (M <= 64): memory-bound, so the kernel streams the int4
// weights once per row tile with coalesced 128 B warp reads (32 consecutive N-packed words
// of one row k), 8 word loads in flight per thread, dequantizes with LOP3 + one packed
// multiply, and accumulates in fp32 on CUDA cores (tensor cores buy nothing at M <= 8).
// Split-K over the grid fills the GPU when N/256 blocks are too few; partial sums go to an
// fp32 workspace [splits, M, N] and a second kernel adds them in split order, so results
// are deterministic.
#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"

namespace lowbit::int4 {
namespace detail {

int skinny_rows_per_tile(int m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

int skinny_splits(int m, int n, int k) {
  const int mt = skinny_rows_per_tile(m);
  const int base = kern::ceil_div(n, kSkinnyCols) * kern::ceil_div(m, mt);
  const int chunks = k / kKernelKChunk;
  int s = kern::ceil_div(kSkinnyTargetBlocks, base);
  const int max_s = chunks / kSkinnyKSlices;  // keep every slice busy
  if (s > max_s) s = max_s;
  return s < 1 ? 1 : s;
}

}  // namespace detail

namespace kern {
namespace {

template <typename T, int MT>
__global__ void __launch_bounds__(32 * detail::kSkinnyKSlices)
    gemm_skinny_kernel(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partials, int M, int N, int K,
                       int G, const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                       const uint16_t* __restrict__ zeros, int splits) {
  using T2 = typename Act<T>::T2;
  constexpr int KS = detail::kSkinnyKSlices;
  __shared__ float red[KS][MT * 8][33];  // +1: spread the lanes of a column over banks

  const int lane = threadIdx.x, ty = threadIdx.y;
  const int nw = N / 8;
  const int word = blockIdx.x * 32 + lane;
  const bool col_ok = word < nw;
  const int m0 = blockIdx.z * MT;
  const int chunks = K / kKernelKChunk;
  const int c_begin = static_cast<int>(static_cast<long long>(blockIdx.y) * chunks / splits);
  const int c_end = static_cast<int>(static_cast<long long>(blockIdx.y + 1) * chunks / splits);

  float acc[MT][8];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.f;

  if (col_ok) {
    for (int c = c_begin + ty; c < c_end; c += KS) {
      const int k0 = c * kKernelKChunk;
      OctetParams<T> p;
      load_octet_params<T>(scales, zeros, static_cast<size_t>(k0 / G) * N + 8 * word, p);
#pragma unroll
      for (int kb = 0; kb < kKernelKChunk; kb += 8) {
        uint32_t wv[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) wv[i] = __ldg(qw + static_cast<size_t>(k0 + kb + i) * nw + word);
        uint4 xv[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m)
          xv[m] = (m0 + m < M) ? __ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(m0 + m) * K + k0 + kb))
                               : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          T2 w2[4];
          dequant_word<T>(wv[i], p, w2);
          float wf[8];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            float2 f = Act<T>::to_float2(w2[j]);
            wf[2 * j] = f.x;
            wf[2 * j + 1] = f.y;
          }
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            const uint32_t xb = (&xv[m].x)[i / 2];
            const T2 x2 = bits_as<T2>(xb);
            const float2 xf = Act<T>::to_float2(x2);
            const float xs = (i & 1) ? xf.y : xf.x;
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[m][j] = __fmaf_rn(xs, wf[j], acc[m][j]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) red[ty][m * 8 + j][lane] = acc[m][j];
  __syncthreads();
  // Sum the K slices in order; thread t handles elements t, t + 128, ...: (m, column in tile).
  for (int e = ty * 32 + lane; e < MT * 256; e += 32 * KS) {
    const int m = e / 256, col = e % 256;
    const int l = col / 8, j = col % 8;
    float s = 0.f;
#pragma unroll
    for (int t = 0; t < KS; ++t) s += red[t][m * 8 + j][l];
    const int n = blockIdx.x * 256 + col;
    if (m0 + m < M && n < N) {
      if (splits == 1)
        y[static_cast<size_t>(m0 + m) * N + n] = Act<T>::from_float(s);
      else
        partials[(static_cast<size_t>(blockIdx.y) * M + m0 + m) * N + n] = s;
    }
  }
}

// y = act(sum over splits in order): deterministic split-K reduction.
template <typename T>
__global__ void splitk_reduce_kernel(const float* __restrict__ partials, T* __restrict__ y, int MN, int splits) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < MN; i += gridDim.x * blockDim.x) {
    float s = 0.f;
    for (int t = 0; t < splits; ++t) s += partials[static_cast<size_t>(t) * MN + i];
    y[i] = Act<T>::from_float(s);
  }
}

template <typename T, int MT>
cudaError_t launch(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                   cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, G = s.group_len(), NG = s.num_groups();
  const int splits = detail::skinny_splits(m, N, K);
  const uint32_t* qw = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(expert) * K * (N / 8);
  const size_t so = static_cast<size_t>(expert) * NG * N;
  dim3 grid(ceil_div(N, detail::kSkinnyCols), splits, ceil_div(m, MT));
  dim3 block(32, detail::kSkinnyKSlices);
  gemm_skinny_kernel<T, MT><<<grid, block, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), partials, m, N,
                                                         K, G, qw, w.scales + so, w.zeros ? w.zeros + so : nullptr,
                                                         splits);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  const int mn = m * N;
  splitk_reduce_kernel<T><<<ceil_div(mn, 256) < 1024 ? ceil_div(mn, 256) : 1024, 256, 0, stream>>>(
      partials, static_cast<T*>(y), mn, splits);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_t(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                     cudaStream_t stream) {
  switch (detail::skinny_rows_per_tile(m)) {
    case 1: return launch<T, 1>(x, y, m, w, expert, partials, stream);
    case 2: return launch<T, 2>(x, y, m, w, expert, partials, stream);
    case 4: return launch<T, 4>(x, y, m, w, expert, partials, stream);
    default: return launch<T, 8>(x, y, m, w, expert, partials, stream);
  }
}

}  // namespace
}  // namespace kern

namespace detail {
cudaError_t launch_gemm_skinny(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                               cudaStream_t stream) {
  return w.shape.act == DType::kF16 ? kern::launch_t<__half>(x, y, m, w, expert, partials, stream)
                                    : kern::launch_t<__nv_bfloat16>(x, y, m, w, expert, partials, stream);
}
}  // namespace detail
}  // namespace lowbit::int4
