// Decode W4A16 GEMM (M <= 512, built for M <= 16) on the MMA-tiled layout
// (kernel_layout.h, kMmaTiled): y^T = W x^T with mma.sync m16n8k16, the weight's columns
// as the MMA's 16 rows and 8 or 16 activation rows as its n8 tiles.
//
// Why this kernel: a decode GEMM must stream the weight at HBM speed. The N-packed kernel
// (gemm_skinny.cu) stages words through shared memory and spends ~20 instructions per word
// (unpack, subtract, scale multiply, four byte permutes into MMA order). Here a warp loads
// 16 B per lane straight into registers (512 contiguous bytes per K step of 64 columns; a
// warp's K range is one contiguous run), and each word already holds the A fragment pairs:
// a word costs 3 shifts and 4 LOP3 (magic | q), nothing else. The zero point and the group
// scale are applied to fp32 sums once per window of <= 8 K steps (see "Numerics").
// Measured on H200 against the N-packed kernel and cuBLAS: docs/int4-kernels.md.
//
// Numerics: the MMAs multiply (magic + q), exact in the activation dtype, by x; a fifth MMA
// per step with an all-ones A gives sum(x) over the same K. At each window end
// tot += s * (acc - (magic + z) * sum(x)) in fp32 = s * sum (q - z) x: the unrounded
// dequantized weight, never rounded to the activation dtype. Outputs are compared with an
// fp64 reference under the GEMM tolerance (tests/gpu/int4/test_gemm.cu, which states the
// extra weight-rounding term); the sum order is fixed (windows, warps, then cluster ranks,
// in order): runs are bit-identical.
//
// Work split: block = kDecWarps warps on one 64-column group, each warp a contiguous run of
// K batches, partial sums added in warp order in shared memory; grid.x = split-K blocks of
// one thread-block cluster, added in rank order through distributed shared memory by rank
// 0; grid.y = tiles of 8 NT activation rows (adjacent in launch order, so tiles sharing a
// weight read it from L2); grid.z = column groups. One launch, no workspace.
#include <cooperative_groups.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"

namespace cg = cooperative_groups;

namespace lowbit::int4 {
namespace kern {
namespace {

constexpr int kDecWarps = 4;
constexpr int kDecMaxSplits = kClusterMaxSplits;
constexpr int kDecMaxDevices = kClusterMaxDevices;

// Streaming 16 B load: read once, keep out of L1, let L2 fetch 256 B lines.
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float act_bits_to_float(uint16_t b, bool bf16) {
  return bf16 ? __uint_as_float(static_cast<uint32_t>(b) << 16) : __half2float(__ushort_as_half(b));
}

struct DecodeParams {
  const void* x;
  void* y;
  const uint4* qw;          // this expert's tiled words, 16 B per lane per K step
  const uint16_t* scales;   // [NG, N]
  const uint16_t* zeros;    // [NG, N] or nullptr (symmetric: z = 8)
  int M, N, K, G;
  int splits;               // cluster size along grid.x
};

// Per-group constants of this lane's 8 columns (16j + g + 8h, j = 0..3, h = 0..1): the
// scale and magic + z (the offset the MMA operands carry), both as fp32.
struct GroupParams {
  float s[4][2];
  float zc[4][2];
};

template <typename T, bool kSym>
__device__ __forceinline__ void load_group(const DecodeParams& p, int grp, int col0, GroupParams& gp) {
  constexpr bool kBf16 = Act<T>::kMagic == 0x43004300u;
  constexpr float kMagicF = kBf16 ? 128.f : 1024.f;
  const size_t base = static_cast<size_t>(grp) * p.N + col0;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      gp.s[j][h] = act_bits_to_float(__ldg(p.scales + base + 16 * j + 8 * h), kBf16);
      gp.zc[j][h] = kMagicF + (kSym ? 8.f : act_bits_to_float(__ldg(p.zeros + base + 16 * j + 8 * h), kBf16));
    }
}

// Dynamic shared memory: the block's reduction buffer.
template <int NT>
constexpr int decode_smem_bytes() {
  return kDecWarps * 16 * NT * 32 * 4;
}

// D: K steps per register batch (8 for 8-row tiles, 4 for 16-row: ~200 registers, two
// blocks per SM), double buffered: one batch is computed while the next is in flight.
// W: K steps per scale window (2 / 4 for G = 32 / 64, else D; W divides D and the group),
// folded once per window at a compile-time position of the unrolled batch (a fold inlined
// behind a run-time test at every step made the loop body several times larger and slower).
template <typename T, int NT, int D, int W, bool kSym>
__global__ void __launch_bounds__(32 * kDecWarps) gemm_decode_kernel(const DecodeParams p) {
  static_assert(D % W == 0, "windows tile the batch");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, mtile = blockIdx.y, cgrp = blockIdx.z;
  const int steps = p.K / kMmaTileK;
  const int gsteps = (p.G < p.K ? p.G : p.K) / kMmaTileK;  // K steps per group
  // This warp's K steps [s0, s1) in whole batches: the block's share of the split, cut in
  // kDecWarps pieces. Batches (and so windows) are aligned: a window never crosses a group.
  const int batches = (steps + D - 1) / D;
  const int bb0 = static_cast<int>(static_cast<long long>(split) * batches / p.splits);
  const int bb1 = static_cast<int>(static_cast<long long>(split + 1) * batches / p.splits);
  const int wb0 = bb0 + static_cast<int>(static_cast<long long>(warp) * (bb1 - bb0) / kDecWarps);
  const int wb1 = bb0 + static_cast<int>(static_cast<long long>(warp + 1) * (bb1 - bb0) / kDecWarps);
  const int s0 = wb0 * D, s1 = min(wb1 * D, steps);
  const int col0 = cgrp * kMmaTileCols + g;
  const uint4* wp = p.qw + static_cast<size_t>(cgrp) * steps * 32 + lane;
  const T* x = static_cast<const T*>(p.x);
  const int m0 = mtile * 8 * NT;
  // x rows of the B fragments: row m0 + 8 nt + g; rows >= M read as zero.
  const uint32_t* xr[NT];
  bool xv[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int m = m0 + 8 * nt + g;
    xv[nt] = m < p.M;
    xr[nt] = reinterpret_cast<const uint32_t*>(x + static_cast<size_t>(xv[nt] ? m : 0) * p.K) + t;
  }

  // acc: the current window's sums; tot: scaled sums so far; accx: the window's sum(x).
  float acc[4][NT][4] = {}, tot[4][NT][4] = {}, accx[NT][4] = {};

  // The MMAs take the weights as magic + q (one LOP3 per pair, exact) and a fifth MMA per
  // step with an all-ones A sums x over the same K: at each window end (<= 8 K steps,
  // inside one group) tot += s * (acc - (magic + z) * sum(x)) in fp32, i.e. s * sum (q - z) x.
  // The short window keeps the fp32 sums small: (magic + q) x is exact in fp32 and a window
  // sum loses about log2(magic / 8) bits to the cancellation (~2^-16 relative for fp16),
  // far below the output's rounding.
  const uint32_t ones = Act<T>::kMagic == 0x43004300u ? 0x3F803F80u : 0x3C003C00u;
  const uint32_t ones_a[4] = {ones, ones, ones, ones};
  GroupParams cur, nxt;
  int grp = s0 / gsteps;
  if (s0 < s1) {
    load_group<T, kSym>(p, grp, col0, cur);
    if ((grp + 1) * gsteps < s1) load_group<T, kSym>(p, grp + 1, col0, nxt);
  }
  auto fold = [&](int st_end) {  // st_end: first step after the window
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          // C fragment: q & 1 picks the activation row (2t, 2t+1), q >> 1 the column (g, g+8).
          const float d = fmaf(-cur.zc[j][q >> 1], accx[nt][q & 1], acc[j][nt][q]);
          tot[j][nt][q] = fmaf(d, cur.s[j][q >> 1], tot[j][nt][q]);
          acc[j][nt][q] = 0.f;
        }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) accx[nt][q] = 0.f;
    if (st_end % gsteps == 0 && st_end < s1) {  // group end: next group's constants
      ++grp;
      cur = nxt;
      if ((grp + 1) * gsteps < s1) load_group<T, kSym>(p, grp + 1, col0, nxt);
    }
  };

  uint4 wa[D], wb[D];
  uint2 xa[D][NT], xb[D][NT];
  auto load_w = [&](uint4 (&w)[D], int sb) {
#pragma unroll
    for (int i = 0; i < D; ++i)
      w[i] = sb + i < s1 ? ld_stream(wp + static_cast<size_t>(sb + i) * 32) : make_uint4(0, 0, 0, 0);
  };
  auto load_x = [&](uint2 (&xx)[D][NT], int sb) {
#pragma unroll
    for (int i = 0; i < D; ++i)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const bool vx = sb + i < s1 && xv[nt];
        xx[i][nt].x = vx ? __ldg(xr[nt] + (kMmaTileK * (sb + i)) / 2) : 0u;
        xx[i][nt].y = vx ? __ldg(xr[nt] + (kMmaTileK * (sb + i) + 8) / 2) : 0u;
      }
  };
  auto compute = [&](const uint4 (&w)[D], const uint2 (&xx)[D][NT], int sb) {
    const int n_in = s1 - sb;  // steps of this batch inside the range (>= 1)
#pragma unroll
    for (int i = 0; i < D; ++i) {
      if (i < n_in) {
        const uint32_t words[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t a[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) a[r] = lop3_and_or(words[j] >> (4 * r), 0x000F000Fu, Act<T>::kMagic);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(acc[j][nt], a, xx[i][nt].x, xx[i][nt].y);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(accx[nt], ones_a, xx[i][nt].x, xx[i][nt].y);
      }
      // Window end (a window with at least one step in range; the tail window may be short).
      if ((i + 1) % W == 0 && i + 1 - W < n_in) fold(sb + i + 1);
    }
  };
  // Programmatic dependent launch (when the launch allows it): the weights and scales do not
  // depend on the kernel before us, so the first batch of them is requested before waiting
  // for that kernel's completion (x and y do); and the next kernel may start its own weight
  // prefetch on the SMs our blocks leave free. Without the launch attribute both are no-ops.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  int sb = s0;
  if (sb < s1) load_w(wa, sb);
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (sb < s1) load_x(xa, sb);
  while (sb < s1) {
    if (sb + D < s1) load_w(wb, sb + D), load_x(xb, sb + D);
    compute(wa, xa, sb);
    sb += D;
    if (sb >= s1) break;
    if (sb + D < s1) load_w(wa, sb + D), load_x(xa, sb + D);
    compute(wb, xb, sb);
    sb += D;
  }

  // Warps -> block sum in warp order, then cluster ranks -> rank 0 in rank order.
  constexpr int kElems = 16 * NT;  // per lane
  extern __shared__ __align__(16) unsigned char smem[];
  static_assert(kDecWarps * kElems * 32 * 4 <= decode_smem_bytes<NT>(), "reduction buffer size");
  auto& red = *reinterpret_cast<float(*)[kDecWarps][kElems][32]>(smem);
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) red[warp][(j * NT + nt) * 4 + q][lane] = tot[j][nt][q];
  __syncthreads();
  float* flat = &red[0][0][0];
  for (int e = threadIdx.x; e < kElems * 32; e += 32 * kDecWarps) {
    float v = flat[e];
#pragma unroll
    for (int w = 1; w < kDecWarps; ++w) v += flat[w * kElems * 32 + e];
    flat[e] = v;  // red[0] now holds the block's sums (each element written by one thread)
  }
  cg::cluster_group cluster = cg::this_cluster();
  if (p.splits > 1) {
    cluster.sync();
    if (cluster.block_rank() != 0) {
      cluster.sync();  // rank 0 reads our red[0] before we exit
      return;
    }
  } else {
    __syncthreads();
  }
  T* y = static_cast<T*>(p.y);
  for (int e = threadIdx.x; e < kElems * 32; e += 32 * kDecWarps) {
    float v = flat[e];
    for (int r = 1; r < p.splits; ++r) v += cluster.map_shared_rank(flat, r)[e];
    const int l = e % 32, idx = e / 32;
    const int q = idx % 4, nt = (idx / 4) % NT, j = idx / (4 * NT);
    const int m = m0 + 8 * nt + 2 * (l & 3) + (q & 1);
    const int n = cgrp * kMmaTileCols + 16 * j + (l >> 2) + 8 * (q >> 1);
    if (m < p.M) y[static_cast<size_t>(m) * p.N + n] = Act<T>::from_float(v);
  }
  if (p.splits > 1) cluster.sync();
}

int sm_count(int dev) {
  static std::atomic<int> cache[kDecMaxDevices] = {};
  std::atomic<int>& slot = cache[dev < kDecMaxDevices ? dev : kDecMaxDevices - 1];
  int v = slot.load(std::memory_order_relaxed);
  if (v == 0) {
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v < 1) {
      (void)cudaGetLastError();
      v = 132;
    }
    slot.store(v, std::memory_order_relaxed);
  }
  return v;
}

// Split-K cluster size, from measurements on H200 (docs/int4-kernels.md; 4-warp blocks of
// ~200 registers, two resident per SM): one block per (column group, row tile) unit when
// the units outnumber the SMs; a pair when they fit in one wave (two blocks per SM streamed
// better than one); larger clusters only when the units cover less than a quarter of the
// SMs (their reductions and co-scheduling cost more than they gained elsewhere). Each warp
// keeps >= 2 batches of D K steps.
int decode_splits(int units, int steps, int sms, int d) {
  int max_s = steps / (kDecWarps * 2 * d);
  if (max_s > kDecMaxSplits) max_s = kDecMaxSplits;
  if (max_s < 1) max_s = 1;
  int s = units > sms ? 1 : units > sms / 4 ? 2 : sms / units;
  return s < 1 ? 1 : s > max_s ? max_s : s;
}

// LOWBIT_INT4_DECODE_SPLITS=n (read once; measurements): the split-K cluster size instead
// of decode_splits()'s choice (still clipped to 1..8 and to what the device can schedule).
int env_splits() {
  static const int v = [] {
    const char* e = std::getenv("LOWBIT_INT4_DECODE_SPLITS");
    const int n = e ? std::atoi(e) : 0;
    return n >= 1 && n <= kDecMaxSplits ? n : 0;
  }();
  return v;
}

// Programmatic dependent launch of the decode kernel: on unless LOWBIT_INT4_PDL=0 (read
// once; for measurements).
bool pdl_enabled() {
  static const bool v = [] {
    const char* e = std::getenv("LOWBIT_INT4_PDL");
    return !(e != nullptr && std::strcmp(e, "0") == 0);
  }();
  return v;
}

template <typename T, int NT, int D, int W, bool kSym>
cudaError_t launch(DecodeParams p, cudaStream_t stream) {
  auto kernel = gemm_decode_kernel<T, NT, D, W, kSym>;
  constexpr int kSmem = decode_smem_bytes<NT>();
  // Per function and per device: set on every launch (once per process breaks a second GPU).
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      e != cudaSuccess)
    return e;
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const int mtiles = ceil_div(p.M, 8 * NT), groups = p.N / kMmaTileCols;
  p.splits = env_splits() ? env_splits() : decode_splits(groups * mtiles, p.K / kMmaTileK, sm_count(dev), D);
  static ClusterSchedulable known = {};
  p.splits = schedulable_splits(kernel, p.splits, 1, static_cast<unsigned>(mtiles), static_cast<unsigned>(groups),
                                32 * kDecWarps, kSmem, known);
  return launch_split_clusters(kernel, p, p.splits, 1, static_cast<unsigned>(mtiles), static_cast<unsigned>(groups),
                               32 * kDecWarps, kSmem, stream, pdl_enabled());
}

template <typename T, int NT, int D, int W>
cudaError_t launch_w(const DecodeParams& p, cudaStream_t stream) {
  return p.zeros == nullptr ? launch<T, NT, D, W, true>(p, stream) : launch<T, NT, D, W, false>(p, stream);
}

template <typename T, int NT, int D>
cudaError_t launch_nt(const DecodeParams& p, cudaStream_t stream) {
  const int gsteps = (p.G < p.K ? p.G : p.K) / kMmaTileK;
  if (gsteps == 2) return launch_w<T, NT, D, 2>(p, stream);
  if constexpr (D == 4) {
    return launch_w<T, NT, D, 4>(p, stream);
  } else {
    if (gsteps == 4) return launch_w<T, NT, D, 4>(p, stream);
    return launch_w<T, NT, D, 8>(p, stream);  // G = 128 or per-channel (one group, windows of 8)
  }
}

template <typename T>
cudaError_t launch_t(const DecodeParams& p, cudaStream_t stream) {
  return p.M <= 8 ? launch_nt<T, 1, 8>(p, stream) : launch_nt<T, 2, 4>(p, stream);
}

}  // namespace
}  // namespace kern

namespace detail {
cudaError_t launch_gemm_decode(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                               cudaStream_t stream) {
  const WeightShape& s = w.shape;
  kern::DecodeParams p;
  p.x = x;
  p.y = y;
  p.qw = static_cast<const uint4*>(w.qweight) + static_cast<size_t>(expert) * s.k * (s.n / 8) / 4;
  const size_t so = static_cast<size_t>(expert) * s.num_groups() * s.n;
  p.scales = w.scales + so;
  p.zeros = w.zeros ? w.zeros + so : nullptr;
  p.M = m;
  p.N = s.n;
  p.K = s.k;
  p.G = s.group_len();
  p.splits = 1;
  return s.act == DType::kF16 ? kern::launch_t<__half>(p, stream) : kern::launch_t<__nv_bfloat16>(p, stream);
}
}  // namespace detail
}  // namespace lowbit::int4
