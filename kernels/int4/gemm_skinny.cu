// Skinny W4A16 GEMM for decode (M <= 64) on tensor cores. Computes y^T = W x^T so that
// the weight's N is the MMA's 16-row dimension and the few activation rows are the MMA's
// 8-column dimension: mma.sync m16n8k16 (fp32 accumulate), M padded to 8 per tile.
// Every weight word is loaded and dequantized ONCE per block and used for all M rows of
// the tile (the old CUDA-core kernel spent one fp32 FMA per weight per row, so its time
// grew linearly with M).
//
// Warp tile: lane (g = lane/4, t = lane%4) owns N-packed word column (octet) base + g and
// the K rows 2t, 2t+1, 2t+8, 2t+9 of each 16-row K step. Dequantizing those 4 words gives
// 8 columns x 4 k; PRMT regroups them into k-pairs, the A-fragment order. MMA tile j (0..3)
// maps its row g to column 8*octet + 2j and row g+8 to column 8*octet + 2j + 1, so one
// warp covers 64 columns with 4 MMAs per K step and per 8 activation rows. The B fragment
// (x^T) is two 32-bit loads of x per lane (rows m0 + g, k pairs 2t and 2t+8).
//
// Block: kWN column warps x kKS K-slice warps (128 columns); K chunks of 32 go round-robin
// to the K-slice warps, whose partial sums are added in slice order in shared memory.
// Split-K over grid.y fills the GPU; partials go to an fp32 workspace [splits, M, N] and a
// second kernel adds them in split order: results are deterministic.
// Weight words of the next chunk are loaded before the current chunk is computed (8
// independent 128 B warp loads in flight per warp on top of the current ones).
#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"

namespace lowbit::int4 {
namespace detail {

// Activation rows per block (z) tile: 8 * NT with NT = 1, 2 or 4 MMA n8 tiles.
int skinny_rows_per_tile(int m) { return m <= 8 ? 8 : m <= 16 ? 16 : 32; }

int skinny_splits(int m, int n, int k) {
  const int mt = skinny_rows_per_tile(m);
  const int base = kern::ceil_div(n, kSkinnyCols) * kern::ceil_div(m, mt);
  const int chunks = k / kKernelKChunk;
  int s = kern::ceil_div(kSkinnyTargetBlocks, base);
  const int max_s = chunks / (2 * kSkinnyKSlices);  // >= 2 chunks per warp (prefetch overlap)
  if (s > max_s) s = max_s;
  // fp32 partials (L2 resident) stay well below the weight bytes: s * rows * 4 <= K / 4.
  const int rows = m < mt ? m : mt;
  const int max_traffic = k / (16 * rows);
  if (s > max_traffic) s = max_traffic;
  return s < 1 ? 1 : s;
}

}  // namespace detail

namespace kern {
namespace {

constexpr int kWN = detail::kSkinnyCols / 64;  // column warps per block
constexpr int kKS = detail::kSkinnyKSlices;    // K-slice warps per block

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The 8 words of one 32-row chunk this lane needs: K step s (0, 1), row slot r (0..3) ->
// k0 + 16 s + {2t, 2t+1, 2t+8, 2t+9}[r].
__device__ __forceinline__ void load_chunk_words(const uint32_t* __restrict__ qw, int nw, int octet, bool ok, int k0,
                                                 int t, uint32_t (&w)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int s = i / 4, r = i % 4;
    const int k = k0 + 16 * s + 2 * t + (r & 1) + ((r & 2) ? 8 : 0);
    w[i] = ok ? __ldg(qw + static_cast<size_t>(k) * nw + octet) : 0u;
  }
}

template <typename T, int NT>
__global__ void __launch_bounds__(32 * kWN * kKS)
    gemm_skinny_tc_kernel(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partials, int M, int N,
                          int K, int G, const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                          const uint16_t* __restrict__ zeros, int splits) {
  using T2 = typename Act<T>::T2;
  constexpr int kAcc = 4 * NT * 4;  // 4 column tiles x NT row tiles x 4 fp32
  __shared__ float red[kKS - 1][kWN][kAcc][32];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wn = warp % kWN, ks = warp / kWN;
  const int g = lane / 4, t = lane % 4;
  const int nw = N / 8;
  const int octet = (blockIdx.x * kWN + wn) * 8 + g;
  const bool ok = octet < nw;
  const int m0 = blockIdx.z * 8 * NT;
  const int chunks = K / kKernelKChunk;
  const int c_begin = static_cast<int>(static_cast<long long>(blockIdx.y) * chunks / splits);
  const int c_end = static_cast<int>(static_cast<long long>(blockIdx.y + 1) * chunks / splits);

  // x rows of the B fragments (row m0 + 8 nt + g); nullptr when past M (zeros).
  const T* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int m = m0 + 8 * nt + g;
    xrow[nt] = m < M ? x + static_cast<size_t>(m) * K + 2 * t : nullptr;
  }

  float acc[4][NT][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[j][nt][q] = 0.f;

  int c = c_begin + ks;
  uint32_t wcur[8];
  if (c < c_end) load_chunk_words(qw, nw, octet, ok, c * kKernelKChunk, t, wcur);
  for (; c < c_end; c += kKS) {
    const int k0 = c * kKernelKChunk;
    uint32_t wnext[8];
    if (c + kKS < c_end) {
      load_chunk_words(qw, nw, octet, ok, k0 + kKS * kKernelKChunk, t, wnext);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) wnext[i] = 0u;
    }
    OctetParams<T> p;
    if (ok) {
      load_octet_params<T>(scales, zeros, static_cast<size_t>(k0 / G) * N + 8 * octet, p);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) p.zb[j] = p.s[j] = bits_as<T2>(0u);
    }
    uint32_t xb[2][NT][2];
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          xb[s][nt][h] = xrow[nt] ? __ldg(reinterpret_cast<const uint32_t*>(xrow[nt] + k0 + 16 * s + 8 * h)) : 0u;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      uint32_t d[4][4];  // [row slot][column pair j]
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        T2 w2[4];
        dequant_word<T>(wcur[4 * s + r], p, w2);
#pragma unroll
        for (int j = 0; j < 4; ++j) d[r][j] = as_bits(w2[j]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Low halves: column 2j (MMA row g); high halves: column 2j+1 (row g+8).
        const uint32_t a[4] = {__byte_perm(d[0][j], d[1][j], 0x5410), __byte_perm(d[0][j], d[1][j], 0x7632),
                               __byte_perm(d[2][j], d[3][j], 0x5410), __byte_perm(d[2][j], d[3][j], 0x7632)};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_16816<T>(acc[j][nt], a, xb[s][nt][0], xb[s][nt][1]);
      }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) wcur[i] = wnext[i];
  }

  // K slices 1.. park their sums; slice 0 adds them in order.
  if (ks > 0) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int q = 0; q < 4; ++q) red[ks - 1][wn][(j * NT + nt) * 4 + q][lane] = acc[j][nt][q];
  }
  __syncthreads();
  if (ks != 0 || !ok) return;
#pragma unroll
  for (int r = 0; r < kKS - 1; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[j][nt][q] += red[r][wn][(j * NT + nt) * 4 + q][lane];
  // C fragment: q = 0, 1: column 8 octet + 2j, rows 2t, 2t+1; q = 2, 3: column + 1.
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int m = m0 + 8 * nt + 2 * t + (q & 1);
        const int n = 8 * octet + 2 * j + (q >> 1);
        if (m < M) {
          if (splits == 1)
            y[static_cast<size_t>(m) * N + n] = Act<T>::from_float(acc[j][nt][q]);
          else
            partials[(static_cast<size_t>(blockIdx.y) * M + m) * N + n] = acc[j][nt][q];
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

template <typename T, int NT>
cudaError_t launch(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                   cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, G = s.group_len(), NG = s.num_groups();
  const int splits = detail::skinny_splits(m, N, K);
  const uint32_t* qw = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(expert) * K * (N / 8);
  const size_t so = static_cast<size_t>(expert) * NG * N;
  dim3 grid(ceil_div(N, detail::kSkinnyCols), splits, ceil_div(m, 8 * NT));
  gemm_skinny_tc_kernel<T, NT><<<grid, 32 * kWN * kKS, 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(y), partials, m, N, K, G, qw, w.scales + so,
      w.zeros ? w.zeros + so : nullptr, splits);
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
    case 8: return launch<T, 1>(x, y, m, w, expert, partials, stream);
    case 16: return launch<T, 2>(x, y, m, w, expert, partials, stream);
    default: return launch<T, 4>(x, y, m, w, expert, partials, stream);
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
