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
// Each warp streams its chunks through a private cp.async pipeline in shared memory
// (StageLayout below): 2-3 chunks in flight while one is dequantized and multiplied.
//
// LOWBIT_INT4_SKINNY_TILE=1 (read once) routes this path to the shared decode tile instead
// (skinny_tile.cuh: one launch, split-K reduced in a cluster, no workspace use); see
// docs/int4-kernels.md for the measurements behind keeping this kernel the default.
#include <cstdlib>
#include <cstring>

#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"
#include "kernels/int4/skinny_dense.h"
#include "kernels/int4/skinny_tile.cuh"

namespace lowbit::int4 {
namespace detail {

// Activation rows per block (z) tile: 8 * NT with NT = 1, 2 or 4 MMA n8 tiles.
int skinny_rows_per_tile(int m) { return m <= 8 ? 8 : m <= 16 ? 16 : 32; }

// Split-K factor: enough blocks for about one full wave and a small last-wave tail.
// Resident blocks per SM (registers / shared memory of the kernel): 3 for 8-row tiles,
// 2 for 16- and 32-row tiles; kSkinnySMs is a design constant so that the workspace size
// does not depend on the device. Picks the smallest s whose grid fills >= 90% of the
// slots of every wave it starts; else the best such fill.
int skinny_splits(int m, int n, int k) {
  const int mt = skinny_rows_per_tile(m);
  const int base = kern::ceil_div(n, kSkinnyCols) * kern::ceil_div(m, mt);
  const int slots = kSkinnySMs * (mt == 8 ? 3 : 2);
  const int chunks = k / kKernelKChunk;
  int max_s = chunks / (2 * kSkinnyKSlices);  // >= 2 chunks per warp (pipeline)
  // fp32 partials (L2 resident) stay well below the weight bytes: s * rows * 4 <= K / 4.
  const int rows = m < mt ? m : mt;
  const int max_traffic = k / (16 * rows);
  if (max_s > max_traffic) max_s = max_traffic;
  if (max_s < 1) max_s = 1;
  int best = 1;
  double best_score = -1.0;
  for (int s = 1; s <= max_s; ++s) {
    const double waves = static_cast<double>(base) * s / slots;
    const double fill = waves / static_cast<double>(kern::ceil_div(base * s, slots));
    const double score = (waves < 1.0 ? waves : 1.0) * fill;
    if (score >= 0.9) return s;
    if (score > best_score) best_score = score, best = s;
  }
  return best;
}

}  // namespace detail

namespace kern {
namespace {

constexpr int kWN = detail::kSkinnyCols / 64;  // column warps per block
constexpr int kKS = detail::kSkinnyKSlices;    // K-slice warps per block

// Per-warp cp.async pipeline: kStages buffers of one 32-row K chunk each (weight words of
// the warp's 8 octets, their scales and zeros, and the chunk of the 8 NT activation rows);
// kStages - 1 chunks are in flight while one is computed, so each warp keeps ~3 KB of
// weights outstanding without holding them in registers.
constexpr int kXStride = kKernelKChunk + 8;  // halves per staged x row: 80 B, conflict-free B reads
template <int NT>
struct StageLayout {
  static constexpr int kWords = kKernelKChunk * 8 * 4;  // 32 rows x 8 words
  static constexpr int kScales = kWords;                // 8 octets x 16 B
  static constexpr int kZeros = kScales + 128;
  static constexpr int kX = kZeros + 128;
  static constexpr int kBytes = kX + 8 * NT * kXStride * 2;
  static constexpr int kStages = NT >= 4 ? 3 : 4;
  static constexpr int kWarpBytes = kBytes * kStages;
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Issues the copies of chunk c (K rows 32c..32c+31) into the stage at smem address st.
// oct0: the warp's first octet; vec16: all 8 octets exist and rows are 16 B aligned.
template <typename T, int NT>
__device__ __forceinline__ void issue_chunk(uint32_t st, int c, int lane, const uint32_t* __restrict__ qw, int nw,
                                            int oct0, bool vec16, const uint16_t* __restrict__ scales,
                                            const uint16_t* __restrict__ zeros, int N, int G, const T* __restrict__ x,
                                            int M, int K, int m0) {
  using L = StageLayout<NT>;
  const int k0 = c * kKernelKChunk;
  const uint32_t* row = qw + static_cast<size_t>(k0 + lane) * nw + oct0;  // lane = K row of the chunk
  const uint32_t wdst = st + lane * 32;
  if (vec16) {
    cp_async16(wdst, row, true);
    cp_async16(wdst + 16, row + 4, true);
  } else {
#pragma unroll
    for (int o = 0; o < 8; ++o) {
      const bool v = oct0 + o < nw;
      cp_async4(wdst + 4 * o, v ? row + o : qw, v);
    }
  }
  const size_t pidx = static_cast<size_t>(k0 / G) * N + 8 * (oct0 + lane % 8);
  if (lane < 8) {
    const bool v = oct0 + lane < nw;
    cp_async16(st + L::kScales + 16 * lane, v ? scales + pidx : scales, v);
  } else if (lane < 16 && zeros != nullptr) {
    const bool v = oct0 + lane % 8 < nw;
    cp_async16(st + L::kZeros + 16 * (lane % 8), v ? zeros + pidx : zeros, v);
  }
  // x: 8 NT rows x 4 pieces of 16 B.
#pragma unroll
  for (int i = lane; i < 8 * NT * 4; i += 32) {
    const int r = i / 4, q = i % 4;
    const bool v = m0 + r < M;
    cp_async16(st + L::kX + (r * kXStride + 8 * q) * 2, v ? x + static_cast<size_t>(m0 + r) * K + k0 + 8 * q : x, v);
  }
}

template <typename T, int NT>
__global__ void __launch_bounds__(32 * kWN * kKS)
    gemm_skinny_tc_kernel(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partials, int M, int N,
                          int K, int G, const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                          const uint16_t* __restrict__ zeros, int splits) {
  using T2 = typename Act<T>::T2;
  using L = StageLayout<NT>;
  constexpr int S = L::kStages;
  constexpr int kAcc = 4 * NT * 4;  // 4 column tiles x NT row tiles x 4 fp32
  extern __shared__ __align__(16) unsigned char smem[];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wn = warp % kWN, ks = warp / kWN;
  const int g = lane / 4, t = lane % 4;
  const int nw = N / 8;
  const int oct0 = (blockIdx.x * kWN + wn) * 8;
  const int octet = oct0 + g;
  const bool ok = octet < nw;
  const bool vec16 = (nw % 4 == 0) && (oct0 + 8 <= nw) && (reinterpret_cast<uintptr_t>(qw) % 16 == 0);
  const int m0 = blockIdx.z * 8 * NT;
  const int chunks = K / kKernelKChunk;
  const int c_begin = static_cast<int>(static_cast<long long>(blockIdx.y) * chunks / splits);
  const int c_end = static_cast<int>(static_cast<long long>(blockIdx.y + 1) * chunks / splits);
  // This warp's chunks: c_begin + ks + i * kKS, i < n_my.
  const int n_my = c_end - c_begin > ks ? (c_end - c_begin - ks + kKS - 1) / kKS : 0;
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + warp * L::kWarpBytes;
  const unsigned char* sgen = smem + warp * L::kWarpBytes;

  float acc[4][NT][4] = {};  // fp32 accumulators of the warp's 4 column tiles x NT row tiles

#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    if (i < n_my)
      issue_chunk<T, NT>(sbase + i * L::kBytes, c_begin + ks + i * kKS, lane, qw, nw, oct0, vec16, scales, zeros, N, G,
                         x, M, K, m0);
    cp_async_commit();
  }
  for (int i = 0; i < n_my; ++i) {
    __syncwarp();  // every lane is done with the stage refilled below (computed at i - 1)
    if (i + S - 1 < n_my)
      issue_chunk<T, NT>(sbase + ((i + S - 1) % S) * L::kBytes, c_begin + ks + (i + S - 1) * kKS, lane, qw, nw, oct0,
                         vec16, scales, zeros, N, G, x, M, K, m0);
    cp_async_commit();
    cp_async_wait<S - 1>();  // chunk i has landed (this lane's copies)
    __syncwarp();            // ... and every other lane's
    const unsigned char* st = sgen + (i % S) * L::kBytes;
    const uint32_t* sw = reinterpret_cast<const uint32_t*>(st);
    OctetParams<T> p;
    {
      const uint4 sv = *reinterpret_cast<const uint4*>(st + L::kScales + 16 * g);
      if (zeros != nullptr) {
        const uint4 zv = *reinterpret_cast<const uint4*>(st + L::kZeros + 16 * g);
        octet_params_from<T>(sv, &zv, p);
      } else {
        octet_params_from<T>(sv, nullptr, p);
      }
    }
    const T* sx = reinterpret_cast<const T*>(st + L::kX);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      uint32_t d[4][4];  // [row slot][column pair j]
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int k = 16 * s + 2 * t + (r & 1) + ((r & 2) ? 8 : 0);
        T2 w2[4];
        dequant_word<T>(sw[k * 8 + g], p, w2);
#pragma unroll
        for (int j = 0; j < 4; ++j) d[r][j] = as_bits(w2[j]);
      }
      uint32_t xb[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          xb[nt][h] = *reinterpret_cast<const uint32_t*>(sx + (8 * nt + g) * kXStride + 16 * s + 2 * t + 8 * h);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Low halves: column 2j (MMA row g); high halves: column 2j+1 (row g+8).
        const uint32_t a[4] = {__byte_perm(d[0][j], d[1][j], 0x5410), __byte_perm(d[0][j], d[1][j], 0x7632),
                               __byte_perm(d[2][j], d[3][j], 0x5410), __byte_perm(d[2][j], d[3][j], 0x7632)};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(acc[j][nt], a, xb[nt][0], xb[nt][1]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stage buffers become the reduction buffer

  // K slices 1.. park their sums; slice 0 adds them in order.
  float* red = reinterpret_cast<float*>(smem);  // [kKS - 1][kWN][kAcc][32]
  if (ks > 0) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int q = 0; q < 4; ++q) red[(((ks - 1) * kWN + wn) * kAcc + (j * NT + nt) * 4 + q) * 32 + lane] = acc[j][nt][q];
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
        for (int q = 0; q < 4; ++q) acc[j][nt][q] += red[((r * kWN + wn) * kAcc + (j * NT + nt) * 4 + q) * 32 + lane];
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
  using L = StageLayout<NT>;
  constexpr int kSmem = L::kWarpBytes * kWN * kKS;
  static_assert((kKS - 1) * kWN * 16 * NT * 32 * 4 <= kSmem, "reduction buffer must fit in the stages");
  // Per function and per device: set on every launch (once per process breaks a second GPU).
  const cudaError_t attr =
      cudaFuncSetAttribute(gemm_skinny_tc_kernel<T, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attr != cudaSuccess) return attr;
  gemm_skinny_tc_kernel<T, NT><<<grid, 32 * kWN * kKS, kSmem, stream>>>(
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


// The shared decode tile (skinny_tile.cuh) as a dense GEMM: grid x = column tile x split
// (cluster), y = tile of 8 NT activation rows.
template <typename T, int NT>
cudaError_t launch_tile(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, NG = s.num_groups();
  const int units = ceil_div(m, 8 * NT);
  const SkinnyPlan plan = skinny_plan(N, false, units, K / kKernelKChunk, NT);
  SkinnyParams p;
  p.x = x;
  p.out = y;
  p.qw = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(expert) * K * (N / 8);
  const size_t so = static_cast<size_t>(expert) * NG * N;
  p.scales = w.scales + so;
  p.zeros = w.zeros ? w.zeros + so : nullptr;
  p.M = m;
  p.N = N;
  p.nw = N / 8;
  p.K = K;
  p.G = s.group_len();
  p.gshift = skinny_gshift(p.G, K);
  p.chunks = K / kKernelKChunk;
  p.splits = plan.splits;
  p.wn = plan.wn;
  p.vec16 = skinny_vec16(p.qw, p.nw, p.nw, 0);
  return launch_skinny<T, NT, kSkDense>(p, plan.tiles, static_cast<unsigned>(units), 1, stream);
}

template <typename T>
cudaError_t launch_tile_t(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  switch (detail::skinny_rows_per_tile(m)) {
    case 8: return launch_tile<T, 1>(x, y, m, w, expert, stream);
    case 16: return launch_tile<T, 2>(x, y, m, w, expert, stream);
    default: return launch_tile<T, 4>(x, y, m, w, expert, stream);
  }
}

}  // namespace
}  // namespace kern

namespace detail {
cudaError_t launch_gemm_skinny_tile(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                    cudaStream_t stream) {
  return w.shape.act == DType::kF16 ? kern::launch_tile_t<__half>(x, y, m, w, expert, stream)
                                    : kern::launch_tile_t<__nv_bfloat16>(x, y, m, w, expert, stream);
}

cudaError_t launch_gemm_skinny(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                               cudaStream_t stream) {
  static const bool use_tile = [] {
    const char* e = std::getenv("LOWBIT_INT4_SKINNY_TILE");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  if (use_tile) return launch_gemm_skinny_tile(x, y, m, w, expert, stream);
  return w.shape.act == DType::kF16 ? kern::launch_t<__half>(x, y, m, w, expert, partials, stream)
                                    : kern::launch_t<__nv_bfloat16>(x, y, m, w, expert, partials, stream);
}
}  // namespace detail
}  // namespace lowbit::int4
