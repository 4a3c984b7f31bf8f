// The decode (small-M) W4A16 tensor-core tile shared by the dense skinny GEMM
// (gemm_skinny.cu) and the two MoE GEMMs (moe_gemm1.cu, moe_gemm2.cu). It computes
// y^T = W x^T with mma.sync m16n8k16 (fp32 accumulate): the weight's N is the MMA's 16-row
// dimension, up to 8 * NT activation rows (NT = 1, 2, 4) its 8-column dimension(s).
//
// Why this shape (the previous per-warp pipeline reached 19-50% of the memory floor):
// - Loads: the whole block streams one tile of 8 * WN consecutive N-packed words (32 * WN
//   bytes per K row: 128 B for WN = 4, 64 B for WN = 2) with 16-byte cp.async per lane,
//   consecutive lanes on consecutive bytes, so each warp instruction moves whole 64/128-byte
//   row segments (the old kernel issued one 16 B request per lane per K row). A stage is 8 KB
//   of weights (32 * KS K rows); kSkStages - 1 = 4 stages (32 KB) are in flight per block,
//   2-3 blocks per SM, i.e. 64-96 KB outstanding per SM.
// - Split-K without a second kernel: the blocks of one output tile that split K form a
//   thread-block cluster (<= 8, portable); each parks its fp32 partial tile in its own
//   shared memory and, after a cluster barrier, the cluster's blocks reduce disjoint parts
//   of the tile by reading all partials through distributed shared memory in a fixed order
//   (split 0..s-1, K slice 0..KS-1): deterministic, no workspace, no counters, graph-safe.
// - Fewer instructions per weight word: two K-adjacent words w0 (row k) and w1 (row k+1)
//   are merged with one PRMT each into u = (low halves) and v = (high halves); nibble slot
//   j of u then holds column 2j at rows k and k+1 - already the k-pair an A-fragment
//   register needs - so dequantization (LOP3 + HSUB2 + HMUL2 per pair, the bit-exact
//   contract math of common.cuh) produces A registers directly (the old kernel needed 4
//   PRMTs per word after dequantizing); scales and zero constants are duplicated per
//   column once per 32-row chunk.
//
// Block: 8 warps = WN column warps x KS = 8 / WN K-slice warps (WN = 4 or 2, picked per
// launch). Warp (wn, ks): lane (g = lane/4, t = lane%4) owns local octet 8 wn + g and the K
// rows 2t, 2t+1, 2t+8, 2t+9 of each 16-row step of the stage's chunk ks. MMA tile j (0..3)
// maps its row g to column 8 octet + 2j, row g+8 to column 8 octet + 2j + 1.
//
// Modes:
//   kDense:      y[m, n] (act dtype); rows m0 + r of x, grid.y = M tiles.
//   kMoeGateUp:  the block's columns are half gate octets, half up octets (I/8 apart);
//                inter[id, n] = act(silu(gate) * up) for the sorted ids of one align block.
//   kMoeDown:    slot_out[id, n] = topk_weight[id] * sum (fp32).
// MoE blocks: grid.y = align block b, grid.z = row pass (8 NT rows each); blocks with
// b * BM >= num_post_padded or only padding rows exit before loading anything (the whole
// cluster takes the same decision: it shares b and the pass).
#pragma once

#include <cooperative_groups.h>

#include <atomic>

#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/common.cuh"

namespace lowbit::int4::kern {

enum SkinnyMode : int { kSkDense = 0, kSkMoeGateUp = 1, kSkMoeDown = 2 };

constexpr int kSkThreads = 256;  // 8 warps
constexpr int kSkStages = 5;     // 4 stages in flight while one is computed
constexpr int kSkMaxSplits = kClusterMaxSplits;
constexpr int kSkSMs = 132;      // H200; planning constant (the results do not depend on it)

struct SkinnyParams {
  const void* x = nullptr;  // act rows: dense [M, K]; gate/up: tokens [M, K = H]; down: inter [P, K = I]
  void* out = nullptr;      // dense y [M, N] act; gate/up inter [P, N = I] act; down slot_out [P, N = H] f32
  const uint32_t* qw = nullptr;      // [E, K, nw] (dense: already offset to the expert)
  const uint16_t* scales = nullptr;  // [E, K/G, 8 nw]
  const uint16_t* zeros = nullptr;   // same, or nullptr (symmetric)
  size_t qw_estride = 0;  // words per expert (MoE)
  size_t sc_estride = 0;  // scale elements per expert (MoE)
  int M = 0;              // dense rows / MoE tokens
  int N = 0;              // output columns (gate/up: I)
  int nw = 0;             // words per weight row
  int K = 0, G = 0, chunks = 0;
  int splits = 1;         // cluster size along grid.x
  int wn = 4;             // column warps
  int vec16 = 0;          // 16-byte weight copies allowed (row/segment alignment)
  int gshift = 0;         // group of chunk c = c >> gshift (G = 32 << gshift; per-channel: 31)
  const int32_t* sorted_ids = nullptr;
  const int32_t* expert_ids = nullptr;
  const int32_t* npp = nullptr;
  const float* topk_weights = nullptr;
  int topk = 1, BM = 8;
};

// Shared-memory stage: [32 KS rows][8 WN words + 4 pad] weights (pad: conflict-free reads),
// [KS chunks][8 WN octets] x 16 B scales, same for zeros, [8 NT rows][32 KS + 8 halves] x.
__host__ __device__ constexpr int sk_row_bytes(int wn) { return (8 * wn + 4) * 4; }
__host__ __device__ constexpr int sk_x_stride(int wn) { return (32 * (8 / wn) + 8) * 2; }
__host__ __device__ constexpr int sk_sc_off(int wn) { return 32 * (8 / wn) * sk_row_bytes(wn); }
__host__ __device__ constexpr int sk_x_off(int wn) { return sk_sc_off(wn) + 2048; }
__host__ __device__ constexpr int sk_stage_bytes(int wn, int nt) { return sk_x_off(wn) + 8 * nt * sk_x_stride(wn); }
__host__ __device__ constexpr int sk_smem_bytes(int wn, int nt) { return kSkStages * sk_stage_bytes(wn, nt); }
static_assert(8 * 16 * 4 * 32 * 4 <= sk_smem_bytes(4, 4) && 8 * 16 * 4 * 32 * 4 <= sk_smem_bytes(2, 4),
              "the fp32 reduction tile must fit in the stage buffers");

__device__ __forceinline__ void sk_cp16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
// Weights: also ask L2 to fetch the whole 128-byte line (the neighbouring tile reads the
// rest of it when WN = 2).
__device__ __forceinline__ void sk_cp16_w(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void sk_cp4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void sk_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void sk_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// One dequantized A register: nibble slot j of u holds one column at two K rows; the result
// is that column's pair of weights, round((q - z) * s) as in common.cuh (bit-exact).
template <typename T>
__device__ __forceinline__ uint32_t sk_deq(uint32_t u, int j, uint32_t zb, uint32_t s) {
  using T2 = typename Act<T>::T2;
  const uint32_t t = lop3_and_or(u >> (4 * j), 0x000F000Fu, Act<T>::kMagic);
  return as_bits(__hmul2_rn(__hsub2(bits_as<T2>(t), bits_as<T2>(zb)), bits_as<T2>(s)));
}

template <typename T, int NT, int WN, int MODE>
__global__ void __launch_bounds__(kSkThreads, NT == 1 ? 3 : NT == 2 ? 2 : 1) skinny_tc_kernel(const SkinnyParams p) {
  using T2 = typename Act<T>::T2;
  constexpr int RP = 8 * NT;  // activation rows of the tile
  constexpr int KS = 8 / WN, BW = 8 * WN;
  constexpr int RS = sk_row_bytes(WN), XS = sk_x_stride(WN), SB = sk_stage_bytes(WN, NT);
  constexpr int SC = sk_sc_off(WN), XO = sk_x_off(WN);
  constexpr int RSW = RS / 4, XSW = XS / 4;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ const T* s_xrow[RP];  // row base pointers (nullptr: no row)
  __shared__ int s_id[RP];         // dense: row m; MoE: sorted (token, slot) id
  __shared__ int s_nrows;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wn = warp % WN, ks = warp / WN;
  const int g = lane >> 2, t = lane & 3;
  const int split = static_cast<int>(blockIdx.x) % p.splits, tile = static_cast<int>(blockIdx.x) / p.splits;
  const T* x = static_cast<const T*>(p.x);
  const uint32_t* qw = p.qw;
  const uint16_t* scales = p.scales;
  const uint16_t* zeros = p.zeros;

  if (MODE == kSkDense) {
    const int m0 = blockIdx.y * RP;
    if (tid < RP) {
      s_xrow[tid] = m0 + tid < p.M ? x + static_cast<size_t>(m0 + tid) * p.K : nullptr;
      s_id[tid] = m0 + tid;
    }
    if (tid == 0) s_nrows = p.M - m0 < RP ? p.M - m0 : RP;
  } else {
    const int b = blockIdx.y, r0 = blockIdx.z * RP;
    if (r0 >= p.BM || b * p.BM >= *p.npp) return;  // past the sorted blocks: nothing to do
    const int e = p.expert_ids[b];
    if (e < 0) return;
    const int P = p.M * p.topk;
    if (warp == 0) {
      int id = P;
      if (lane < RP && r0 + lane < p.BM) id = p.sorted_ids[b * p.BM + r0 + lane];
      const bool v = lane < RP && id >= 0 && id < P;
      const unsigned bal = __ballot_sync(0xFFFFFFFFu, v);
      if (lane < RP) {
        s_id[lane] = id;
        s_xrow[lane] = v ? x + static_cast<size_t>(MODE == kSkMoeGateUp ? id / p.topk : id) * p.K : nullptr;
      }
      if (lane == 0) s_nrows = bal ? 32 - __clz(static_cast<int>(bal)) : 0;  // valid rows are a prefix
    }
    __syncthreads();
    if (s_nrows == 0) return;  // only padding rows in this pass
    qw += static_cast<size_t>(e) * p.qw_estride;
    scales += static_cast<size_t>(e) * p.sc_estride;
    if (zeros != nullptr) zeros += static_cast<size_t>(e) * p.sc_estride;
  }
  __syncthreads();
  const int nrows = s_nrows;

  // Local word o (0..BW-1) of this tile -> global word of the weight row, and whether it exists.
  constexpr int half = BW / 2;
  const int lim = MODE == kSkMoeGateUp ? p.N / 8 : p.nw;
  auto word_of = [&](int o, bool* valid) {
    if (MODE == kSkMoeGateUp) {
      const int up = o >= half;
      const int c = tile * half + o - up * half;
      *valid = c < lim;
      return c + up * lim;
    }
    const int c = tile * BW + o;
    *valid = c < lim;
    return c;
  };

  const int c_begin = static_cast<int>(static_cast<long long>(split) * p.chunks / p.splits);
  const int c_end = static_cast<int>(static_cast<long long>(split + 1) * p.chunks / p.splits);
  const int n_st = (c_end - c_begin + KS - 1) / KS;
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int Nw = 8 * p.nw;  // weight columns (scale row length)

  // Copy descriptors, fixed for the whole K loop (the per-stage work is one add and a test).
  // Weights: 32 KS rows x 2 WN pieces of 16 B = 512 pieces; thread tid copies piece tid and
  // piece tid + 256, which is the same column piece kWRows rows further down.
  constexpr int kWRows = kSkThreads / (2 * WN);
  const int w_row = tid / (2 * WN), w_cp = tid % (2 * WN);
  const uint32_t w_dst = w_row * RS + 16 * w_cp;
  bool w_ok = false;
  const int w_off = w_row * p.nw + word_of(4 * w_cp, &w_ok);
  // Scales (threads 0..63) and zeros (64..127): [KS chunks][BW octets] x 16 B.
  const bool sc_zero = tid >= 64;
  const int sc_idx = tid & 63, sc_kc = sc_idx / BW;
  bool sc_ok = false;
  size_t sc_col = 0;
  if (tid < 128 && (!sc_zero || zeros != nullptr)) {
    const int go = word_of(sc_idx % BW, &sc_ok);
    sc_col = 8 * static_cast<size_t>(go);
  }
  const uint16_t* sc_src = sc_zero ? zeros : scales;
  const uint32_t sc_dst = SC + (sc_zero ? 1024 : 0) + sc_idx * 16;
  // Activations: nrows x 4 KS pieces of 16 B (8-/16-row tiles: one per thread at most).
  constexpr int XR = (RP * 4 * KS + kSkThreads - 1) / kSkThreads;
  const T* x_src[XR];
  uint32_t x_dst[XR];
  int x_chunk[XR];
#pragma unroll
  for (int r = 0; r < XR; ++r) {
    const int idx = tid + kSkThreads * r;
    const int row = idx / (4 * KS), pc = idx % (4 * KS);
    x_src[r] = idx < nrows * 4 * KS ? s_xrow[row] : nullptr;
    if (x_src[r] != nullptr) x_src[r] += 8 * pc;
    x_dst[r] = XO + row * XS + 16 * pc;
    x_chunk[r] = pc / 4;
  }

  auto issue = [&](int i) {
    const uint32_t st = sbase + (i % kSkStages) * SB;
    const int c0 = c_begin + i * KS;
    const int nc = c_end - c0 < KS ? c_end - c0 : KS;
    const uint32_t* wbase = qw + static_cast<size_t>(c0) * 32 * p.nw;
    if (p.vec16) {
      if (w_ok) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
          if (w_row + r * kWRows < 32 * nc)
            sk_cp16_w(st + w_dst + r * kWRows * RS, wbase + w_off + static_cast<size_t>(r * kWRows) * p.nw);
      }
    } else {  // 4-byte copies (N/8 or the gate/up half not a multiple of 4 words)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = w_row + r * kWRows;
        if (row >= 32 * nc) continue;
        const uint32_t* src = wbase + static_cast<size_t>(row) * p.nw;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          bool v;
          const int gw = word_of(4 * w_cp + q, &v);
          if (v) sk_cp4(st + w_dst + r * kWRows * RS + 4 * q, src + gw);
        }
      }
    }
    if (sc_ok && sc_kc < nc)
      sk_cp16(st + sc_dst, sc_src + static_cast<size_t>((c0 + sc_kc) >> p.gshift) * Nw + sc_col);
#pragma unroll
    for (int r = 0; r < XR; ++r)
      if (x_src[r] != nullptr && x_chunk[r] < nc) sk_cp16(st + x_dst[r], x_src[r] + c0 * 32);
  };

  float acc[4][NT][4] = {};  // fp32 accumulators of the warp's 4 column tiles x NT row tiles

#pragma unroll
  for (int i = 0; i < kSkStages - 1; ++i) {
    if (i < n_st) issue(i);
    sk_commit();
  }
  const int oct = 8 * wn + g;
  for (int i = 0; i < n_st; ++i) {
    sk_wait<kSkStages - 2>();  // this thread's copies of stage i have landed
    __syncthreads();           // everyone's, and stage i - 1 is free for refilling
    if (i + kSkStages - 1 < n_st) issue(i + kSkStages - 1);
    sk_commit();
    if (c_begin + i * KS + ks >= c_end) continue;  // a short last stage
    const unsigned char* st = smem + (i % kSkStages) * SB;
    // Per-column constants of this chunk: scale pairs s4 and (magic + z) pairs z4 of columns
    // (2j, 2j+1), duplicated into both halves (the two K rows) below.
    uint32_t s4[4], z4[4];
    {
      const uint4 sv4 = *reinterpret_cast<const uint4*>(st + SC + (ks * BW + oct) * 16);
      s4[0] = sv4.x, s4[1] = sv4.y, s4[2] = sv4.z, s4[3] = sv4.w;
      if (zeros != nullptr) {
        const uint4 zv4 = *reinterpret_cast<const uint4*>(st + SC + 1024 + (ks * BW + oct) * 16);
        const uint32_t zr[4] = {zv4.x, zv4.y, zv4.z, zv4.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) z4[j] = as_bits(magic_plus_zero<T>(zr[j]));
      } else {
        const T2 m8 = magic_plus_zero<T>(sym_zero_pair<T>());
#pragma unroll
        for (int j = 0; j < 4; ++j) z4[j] = as_bits(m8);
      }
    }
    // 8- and 16-row tiles keep the 16 duplicated constants in registers for the chunk; 32-row
    // tiles (64 accumulator registers) rebuild them per use to stay spill-free.
    uint32_t su[4], sv[4], zu[4], zv[4];
    if constexpr (NT <= 2) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        su[j] = __byte_perm(s4[j], 0, 0x1010);  // column 2j in both halves
        sv[j] = __byte_perm(s4[j], 0, 0x3232);  // column 2j + 1
        zu[j] = __byte_perm(z4[j], 0, 0x1010);
        zv[j] = __byte_perm(z4[j], 0, 0x3232);
      }
    }
    const uint32_t* sw = reinterpret_cast<const uint32_t*>(st) + (32 * ks + 2 * t) * RSW + oct;
    const uint32_t* sx = reinterpret_cast<const uint32_t*>(st + XO) + g * XSW + 16 * ks + t;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t* r = sw + 16 * s * RSW;
      const uint32_t w0 = r[0], w1 = r[RSW], w2 = r[8 * RSW], w3 = r[9 * RSW];
      const uint32_t u01 = __byte_perm(w0, w1, 0x5410), v01 = __byte_perm(w0, w1, 0x7632);
      const uint32_t u23 = __byte_perm(w2, w3, 0x5410), v23 = __byte_perm(w2, w3, 0x7632);
      uint32_t xb[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        xb[nt][0] = sx[nt * 8 * XSW + 8 * s];
        xb[nt][1] = sx[nt * 8 * XSW + 8 * s + 4];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (NT > 2) {
          su[j] = __byte_perm(s4[j], 0, 0x1010);
          sv[j] = __byte_perm(s4[j], 0, 0x3232);
          zu[j] = __byte_perm(z4[j], 0, 0x1010);
          zv[j] = __byte_perm(z4[j], 0, 0x3232);
        }
        const uint32_t a[4] = {sk_deq<T>(u01, j, zu[j], su[j]), sk_deq<T>(v01, j, zv[j], sv[j]),
                               sk_deq<T>(u23, j, zu[j], su[j]), sk_deq<T>(v23, j, zv[j], sv[j])};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_m16n8k16<T>(acc[j][nt], a, xb[nt][0], xb[nt][1]);
      }
    }
  }
  sk_wait<0>();
  __syncthreads();  // the stage buffers become the reduction tile

  // Partial tile: red[ks][wn][(j NT + nt) 4 + q][lane], fp32.
  constexpr int EPW = 16 * NT * 32;
  constexpr int ETOT = WN * EPW;
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) red[ks * ETOT + wn * EPW + ((j * NT + nt) * 4 + q) * 32 + lane] = acc[j][nt][q];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (p.splits > 1)
    cluster.sync();  // every block's partial tile is complete and visible cluster-wide
  else
    __syncthreads();
  // The cluster's blocks reduce disjoint elements; each sums split 0..s-1, slice 0..KS-1.
  // A split's KS (x2) remote loads are issued together before their ordered sum.
  constexpr int n_el = MODE == kSkMoeGateUp ? ETOT / 2 : ETOT;
  constexpr int NV = MODE == kSkMoeGateUp ? 2 : 1;
  for (int e = split * kSkThreads + tid; e < n_el; e += p.splits * kSkThreads) {
    const int ln = e & 31, idx = e >> 5;
    const int q = idx & 3, nt = (idx >> 2) % NT, j = ((idx >> 2) / NT) & 3, w = idx / (16 * NT);
    const int mloc = 8 * nt + 2 * (ln & 3) + (q & 1);
    if (mloc >= nrows || s_xrow[mloc] == nullptr) continue;
    const int nloc = 8 * (8 * w + (ln >> 2)) + 2 * j + (q >> 1);
    const int n = tile * (MODE == kSkMoeGateUp ? 4 * BW : 8 * BW) + nloc;
    if (n >= p.N) continue;
    float s0 = 0.f, s1 = 0.f;
    for (int b = 0; b < p.splits; ++b) {
      const float* rb = p.splits > 1 ? cluster.map_shared_rank(red, b) : red;
      float v[KS][NV];  // this split's loads issued together, then added in slice order
#pragma unroll
      for (int k = 0; k < KS; ++k)
#pragma unroll
        for (int h = 0; h < NV; ++h) v[k][h] = rb[k * ETOT + e + h * (ETOT / 2)];
#pragma unroll
      for (int k = 0; k < KS; ++k) {
        s0 += v[k][0];
        if (MODE == kSkMoeGateUp) s1 += v[k][NV - 1];
      }
    }
    const int id = s_id[mloc];
    if (MODE == kSkDense) {
      static_cast<T*>(p.out)[static_cast<size_t>(id) * p.N + n] = Act<T>::from_float(s0);
    } else if (MODE == kSkMoeGateUp) {
      const float a = s0 / (1.f + expf(-s0)) * s1;
      static_cast<T*>(p.out)[static_cast<size_t>(id) * p.N + n] = Act<T>::from_float(a);
    } else {
      static_cast<float*>(p.out)[static_cast<size_t>(id) * p.N + n] = p.topk_weights[id] * s0;
    }
  }
  if (p.splits > 1) cluster.sync();  // keep this block's partials alive until all have read them
}

// Launch plan: column warps (4: 128-byte rows, or 2: 64-byte rows and twice the tiles) and
// the split-K cluster size, chosen for >= 90% fill of the resident-block slots in every wave
// (3 / 2 / 1 blocks per SM for 8 / 16 / 32-row tiles), else the best fill; fewer splits and wider
// rows first. units: independent row tiles (dense M tiles, MoE align blocks x passes).
struct SkinnyPlan {
  int wn = 4, splits = 1, tiles = 1;
};
inline SkinnyPlan skinny_plan(int cols, bool gate_up, int units, int chunks, int nt) {
  const int slots = kSkSMs * (nt == 1 ? 3 : nt == 2 ? 2 : 1);  // resident blocks (registers: 71 / 106 / 148)
  SkinnyPlan best;
  double best_score = -1.0;
  for (int wn : {4, 2}) {
    const int tiles = ceil_div(cols, (gate_up ? 32 : 64) * wn);
    int max_s = chunks / (8 / wn);  // every K-slice warp gets a chunk
    if (max_s > kSkMaxSplits) max_s = kSkMaxSplits;
    if (max_s < 1) max_s = 1;
    for (int s = 1; s <= max_s; ++s) {
      const double blocks = static_cast<double>(tiles) * units * s;
      const double waves = blocks / slots;
      const double fill = waves / static_cast<double>(ceil_div(static_cast<int>(blocks), slots));
      const double score = (waves < 1.0 ? waves : 1.0) * fill;
      if (score >= 0.9) return SkinnyPlan{wn, s, tiles};
      if (score > best_score + 1e-9) best_score = score, best = SkinnyPlan{wn, s, tiles};
    }
  }
  return best;
}

template <typename T, int NT, int WN, int MODE>
cudaError_t launch_skinny_wn(SkinnyParams p, int tiles, unsigned grid_y, unsigned grid_z, cudaStream_t stream) {
  auto kernel = skinny_tc_kernel<T, NT, WN, MODE>;
  // The attribute is per function AND per device: set it on every launch (a cheap host call,
  // allowed under graph capture). Set once per process, a second GPU (tensor parallelism)
  // got "invalid argument".
  const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, sk_smem_bytes(WN, NT));
  if (attr != cudaSuccess) return attr;
  static ClusterSchedulable known = {};
  p.splits = schedulable_splits(kernel, p.splits, static_cast<unsigned>(tiles), grid_y, grid_z, kSkThreads,
                                static_cast<size_t>(sk_smem_bytes(WN, NT)), known);
  return launch_split_clusters(kernel, p, p.splits, static_cast<unsigned>(tiles), grid_y, grid_z, kSkThreads,
                               static_cast<size_t>(sk_smem_bytes(WN, NT)), stream);
}

// Group shift of the chunk index (G = 32 << shift; one group per column: 31, always group 0).
inline int skinny_gshift(int G, int K) {
  if (G >= K) return 31;
  return G == 32 ? 0 : G == 64 ? 1 : 2;
}

template <typename T, int NT, int MODE>
cudaError_t launch_skinny(const SkinnyParams& p, int tiles, unsigned grid_y, unsigned grid_z, cudaStream_t stream) {
  return p.wn == 4 ? launch_skinny_wn<T, NT, 4, MODE>(p, tiles, grid_y, grid_z, stream)
                   : launch_skinny_wn<T, NT, 2, MODE>(p, tiles, grid_y, grid_z, stream);
}

// Rows per MoE tile from the align block size: 8 NT rows, NT = 1, 2, 4 (passes over grid.z
// cover block_m > 32).
inline int moe_tile_nt(int bm) { return bm <= 8 ? 1 : bm <= 16 ? 2 : 4; }

// 16-byte weight copies need every copied 4-word group inside one row segment and aligned.
inline int skinny_vec16(const void* qw, int nw, int seg_words, size_t estride_words) {
  return (reinterpret_cast<uintptr_t>(qw) % 16 == 0 && nw % 4 == 0 && seg_words % 4 == 0 && estride_words % 4 == 0)
             ? 1
             : 0;
}

}  // namespace lowbit::int4::kern
