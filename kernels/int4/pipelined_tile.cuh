// Pipelined W4A16 GEMM tile on the MMA-tiled layout (kernel_layout.h, kMmaTiled) for batched
// decode and short prefill (M = 17..~512; any M works): y^T = W x^T, the weight's columns as
// the MMA's rows and the activation rows as its columns. Dense GEMM: gemm_pipelined.cu; the
// MoE GEMMs (rows gathered by the align kernel's sorted ids, one expert per row tile, the
// silu * up and routing-weight epilogues): moe_pipelined.cu.
//
// Why this kernel: the decode kernel (gemm_decode.cu) is built for M <= 16. It keeps the
// group scale out of the MMA (fp32 window sums, folded per group) and reads x per warp, so
// its registers and its L2 traffic grow with M; past 32 rows it re-reads the weight per
// 16-row tile, and the dequant + cuBLAS path pays a whole extra pass over the weight. Here a
// block takes 4 adjacent 64-column groups and one tile of 16 / 32 / 64 / 128 rows, and a
// multistage cp.async pipeline (stages of 4 K steps: weights, x rows, scales, zeros) feeds it
// from shared memory: each weight word is unpacked once per row tile, each x element is read
// from L2 once per block and shared by all its warps.
//
// Two tensor-core forms (docs/int4-kernels-sessions.md, "Session 11"):
// - mma.sync m16n8k16 (16-row tiles; 32 / 64 rows without wgmma): warp w owns group w, reads x
//   fragments with ldmatrix (padded pitch), and one A fragment serves BM / 8 MMAs.
// - wgmma (32 / 48 / 64 / 96 / 128-row tiles, sm_90a): two warpgroups, each on 2 groups; A
//   (dequantized fragments) from registers, B (x) from the stage through a descriptor (128 B
//   swizzle). 32-, 48- and 96-row tiles (m64n32k16 / m64n48k16 / m64n96k16) since session 25:
//   0.78-0.95x the time of the mma.sync 32-row tile at M = 17..32 and of the 64-row tile at
//   M = 33..48 on the larger Llama-3 projections, 0.72-0.94x the 128-row tile at M = 65..96
//   (docs/int4-kernels-sessions.md, "Session 25").
//
// Numerics: each A-fragment pair is dequantized to the contract's weight, round((q - z) * s)
// in the activation dtype ((magic + q) - (magic + z) exact, one rounded multiply:
// dequant_pair of common.cuh, bit-identical to the CPU contract), and the MMAs accumulate
// the exact products in fp32. Sums run in a fixed order (K steps in one warp or warpgroup,
// then split-K ranks in rank order), so runs are bit-identical; outputs differ from the fp64
// reference only by fp32 accumulation and the final rounding (tests/gpu/int4/test_gemm.cu).
//
// Warp-specialized 96- / 128-row dense tiles (pipelined_ws_tile.cuh, since session 27): the same
// stage math (wg_stage) and epilogue (pipe_store_dense) with a producer warpgroup issuing TMA
// copies on per-stage mbarriers; gemm_pipelined.cu picks them (pipe_ws_rule).
//
// Work split (pipelined_plan.h): grid.x = col tiles x row tiles x split-K ranks, ranks
// fastest (one thread-block cluster), then the row tiles of one column tile (adjacent in
// launch order, so they share the weight through L2). Split-K ranks add their fp32 tiles
// through distributed shared memory, each rank a slice of the outputs, in rank order.
// One launch, no workspace.
//
// MoE modes (PipeMode): a row tile is one align block of BM rows of one expert (moe_align:
// sorted ids, expert_ids per block, padding ids >= P); the block waits for the routing, exits
// if its align block is past num_post_padded, and reads the expert's weights. Gate/up: the
// block's 4 groups are gate groups 2c, 2c + 1 and up groups I/64 + 2c, I/64 + 2c + 1 (w13 is
// [E, 2I, H]), so gate and up of a column meet in the block's epilogue: inter[id, n] =
// act(silu(gate) * up), the expression of the decode tile's MoE mode; x rows id / topk.
// Down: slot_out[id, n] = topk_weight[id] * sum in fp32 (x = inter rows id). No split-K; the
// blocks run in raster groups of row tiles (see the kernel).
#pragma once

#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <type_traits>

#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"
#include "kernels/int4/pipelined_plan.h"

namespace cg = cooperative_groups;

namespace lowbit::int4 {
namespace kern {
namespace {

struct PipeParams {
  const uint4* qw = nullptr;        // the expert's MMA-tiled words [N/64, K/16, 32 lanes] x 16 B
  const uint16_t* scales = nullptr; // the expert's [NG, N] (columns permuted per 64-group)
  const uint16_t* zeros = nullptr;  // same, or nullptr (symmetric)
  const void* x = nullptr;          // [M, K] activation dtype
  void* y = nullptr;                // [M, N] activation dtype
  int M = 0, N = 0, K = 0;
  int gsteps = 0;       // K steps per scale group (K / 16 for per-channel)
  int ksteps = 0;       // K / 16
  int split_steps = 0;  // K steps per split-K rank (multiple of kPipeStageSteps)
  int splits = 1, row_tiles = 1;
};
// MoE modes (see the top of the file): the dense kernel keeps the plain parameters (a larger
// parameter block changed its code: ptxas loaded the fields later and allocated differently).
struct PipeMoeParams : PipeParams {
  const int32_t* sorted_ids = nullptr;  // [row_tiles * BM] (align output)
  const int32_t* expert_ids = nullptr;  // [row_tiles]
  const int32_t* npp = nullptr;         // num_post_padded
  const float* topk_weights = nullptr;  // [P] (down)
  int topk = 1, P = 0;                  // P = tokens x topk (ids >= P are padding)
  int half_groups = 0;                  // gate/up: I / 64
  int col_tiles = 1, raster_rows = 1;   // block order: raster groups of raster_rows row tiles
  size_t qw_estride = 0;                // one expert's words, in uint4
  size_t sc_estride = 0;                // one expert's scales / zeros
  int ids_early = 0;  // down, launched by fused_moe right after GEMM1: ids before the wait (see the kernel)
};
// Stream-K dense launches (pipe_sk_plan of pipelined_plan.h): the runs and the workspace.
struct PipeSkParams : PipeParams {
  float* sk_part = nullptr;  // [sk_blocks][BM x 256] fp32 partial tiles
  int* sk_flags = nullptr;   // [sk_blocks], zeroed before the launch; 1: block b's partial is out
  long long sk_units = 0;    // tiles x sk_stages
  int sk_blocks = 0, sk_stages = 0;
};
enum PipeMode : int { kPipeDense = 0, kPipeMoeGateUp = 1, kPipeMoeDown = 2 };
template <int MODE, bool kSK = false>
using PipeParamsFor =
    std::conditional_t<kSK, PipeSkParams, std::conditional_t<MODE == kPipeDense, PipeParams, PipeMoeParams>>;

// Shared memory of one stage, in bytes: the 4 warps' weights (4 K steps x 512 B each), the
// tile's x rows (4 K steps x 32 B), and per warp two scale rows and two zero rows of 64
// columns (G = 32: a stage spans two groups; else one). mma.sync (kWg false): x rows padded to
// 144 B so that the 8 rows one ldmatrix phase reads fall in 8 different 16 B bank groups, 4
// stages, 3 ahead. wgmma (kWg): x rows of 128 B in the 128 B swizzle (16 B chunk c of row r at
// chunk c ^ (r % 8)) that the B descriptor names, the tile 1024 B aligned; 5 stages, 3 ahead
// (the stage computed two iterations ago may still be read by its last wgmma group).
constexpr int kXPitch = kPipeStageSteps * 32 + 16;
constexpr int kWgGroups = 2;  // column groups per warpgroup (wgmma)
__host__ __device__ constexpr int pipe_threads(bool wg) { return wg ? 64 * kPipeWarps : 32 * kPipeWarps; }
// kGroups: 64-column groups per block tile (4; 2 for the 256-row tile, whose accumulators
// allow one group per warpgroup).
template <int BM, bool kWg, int kGroups = kPipeWarps>
struct PipeSmem {
  static constexpr int kStages = kWg ? 5 : kPipeStages;
  static constexpr int kAhead = kPipeStages - 1;
  static constexpr int kPitch = kWg ? kPipeStageSteps * 32 : kXPitch;
  static constexpr int kW = 0;
  static constexpr int kX = kGroups * kPipeStageSteps * 512;  // 8 KB (4 KB for 2 groups): 1024 B aligned
  static constexpr int kS = kX + BM * kPitch;
  static constexpr int kZ = kS + kGroups * 2 * 128;
  static constexpr int kStage = kZ + kGroups * 2 * 128;  // kWg, BM = 64: 18 KB, 1024 B aligned
  // Epilogue: the block's fp32 sums [BM rows][64 kGroups columns], 4 floats of padding per row
  // (fragment stores of a warp then hit 32 different banks); reuses the stages.
  static constexpr int kEpiPitch = 64 * kGroups + 4;
  static constexpr int kEpi = BM * kEpiPitch * 4;
  static constexpr int kAlign = kWg ? 1024 : 0;  // slack to align the dynamic smem base
  static constexpr int kTotal = (kStage * kStages > kEpi ? kStage * kStages : kEpi) + kAlign;
  static_assert(!kWg || (kStage % 1024 == 0 && (BM == 32 || BM == 48 || BM == 64 || BM == 96 || BM == 128 ||
                                                (BM == 256 && kGroups == 2))),
                "wgmma: 1024 B aligned x tiles of 32 / 48 / 64 / 96 / 128 rows (256 with 2 groups)");
};

__device__ __forceinline__ void pipe_cp16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void pipe_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void pipe_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// B fragments of two n8 tiles (rows r0 .. r0 + 15 of the stage's x, one K step): ldmatrix
// matrix i = lane / 8 is rows r0 + 8 (i / 2) .. + 7, K half i % 2; b[2 * (i / 2) + (i % 2)].
__device__ __forceinline__ void pipe_ldsm_x4(uint32_t addr, uint32_t& b0, uint32_t& b1, uint32_t& b2, uint32_t& b3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
               : "r"(addr));
}

// Two fp32 sums rounded to the activation dtype, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  using T2 = typename Act<T>::T2;
  T2 v;
  v.x = Act<T>::from_float(lo);
  v.y = Act<T>::from_float(hi);
  return as_bits(v);
}

// A lane's shared-memory offsets within a stage (see the kernel).
struct PipeLane {
  uint32_t w, x, s, z_minus_s;
  uint32_t g32_slot;  // 128 when a stage spans two scale groups (G = 32): steps 2, 3 read the second row
};

// Scale and magic + z of this lane's 8 columns (16j + g + 8h) as register pairs (both halves
// one column's value): sc[j][h], mz[j][h].
template <typename T, bool kSym>
__device__ __forceinline__ void pipe_group(uint32_t addr, uint32_t z_minus_s, typename Act<T>::T2 (&sc)[4][2],
                                           typename Act<T>::T2 (&mz)[4][2]) {
  using T2 = typename Act<T>::T2;
  const uint4 sv = lds128(addr);
  const uint32_t sw[4] = {sv.x, sv.y, sv.z, sv.w};
  uint32_t zw[4] = {0, 0, 0, 0};
  if constexpr (!kSym) {
    const uint4 zv = lds128(addr + z_minus_s);
    zw[0] = zv.x, zw[1] = zv.y, zw[2] = zv.z, zw[3] = zv.w;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    sc[j][0] = bits_as<T2>(__byte_perm(sw[j], 0, 0x1010));
    sc[j][1] = bits_as<T2>(__byte_perm(sw[j], 0, 0x3232));
    if constexpr (kSym) {
      mz[j][0] = mz[j][1] = magic_plus_zero<T>(sym_zero_pair<T>());
    } else {
      mz[j][0] = magic_plus_zero<T>(__byte_perm(zw[j], 0, 0x1010));
      mz[j][1] = magic_plus_zero<T>(__byte_perm(zw[j], 0, 0x3232));
    }
  }
}

// NS K steps of one stage for this warp: per step, the B fragments of all NT n8 tiles
// (ldmatrix), the 4 weight words (one per 16-column tile j), each unpacked into its A
// fragment (dequant_pair: the contract's rounded weight) and multiplied into NT
// accumulators. Scales are (re)read at steps 0 and 2 without a test: G = 32 switches rows,
// otherwise the same row is read again.
template <typename T, int NT, int NS, bool kSym>
__device__ __forceinline__ void pipe_stage(float (&acc)[4][NT][4], uint32_t st, const PipeLane& ln) {
  typename Act<T>::T2 sc[4][2], mz[4][2];
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    if (s == 0) pipe_group<T, kSym>(st + ln.s, ln.z_minus_s, sc, mz);
    if (s == 2) pipe_group<T, kSym>(st + ln.s + ln.g32_slot, ln.z_minus_s, sc, mz);
    uint32_t b[NT][2];
#pragma unroll
    for (int q = 0; q < NT / 2; ++q)
      pipe_ldsm_x4(st + ln.x + static_cast<uint32_t>(q * 16 * kXPitch + s * 32), b[2 * q][0], b[2 * q][1],
                   b[2 * q + 1][0], b[2 * q + 1][1]);
    const uint4 wv = lds128(st + ln.w + static_cast<uint32_t>(s * 512));
    const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t a[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = as_bits(dequant_pair<T>(words[j], r, mz[j][r & 1], sc[j][r & 1]));
#pragma unroll
      for (int n = 0; n < NT; ++n) mma_m16n8k16<T>(acc[j][n], a, b[n][0], b[n][1]);
    }
  }
}

// ---- wgmma (sm_90a) ----------------------------------------------------------------------
// Two warpgroups per block, each on 2 of the block's 4 column groups against the shared x tile:
// 64 accumulator registers per thread instead of 128, so two blocks (16 warps) fit an SM; with
// one warpgroup on all 4 groups (8 warps per SM) the dequantization chains left the tensor
// cores idle (round Q, docs/int4-kernels-sessions.md).
// One warpgroup (the block's 4 warps) multiplies a 64-column group by the x tile: A (64
// weight columns x 16 K) from registers in the mma.m16n8k16 A-fragment layout, lane l of warp w
// holding the columns of word wj = (w + l / 8) % 4 of its 16 B (a row permutation that keeps the
// word loads free of bank conflicts; see the kernel), B (16 K x 64 rows of x, K-major) from the
// stage's swizzled x tile through a descriptor.
__device__ __forceinline__ uint32_t pipe_lds32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ void wg_fence() {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wg_wait() {
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// K-major B with the 128 B swizzle: start >> 4, leading byte offset 1 (unused when swizzled),
// stride byte offset 1024 >> 4 (8 rows of 128 B), layout type 1 (128 B swizzle).
__device__ __forceinline__ uint64_t wg_desc(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}
#define LOWBIT_WG_D6(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), \
      "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), \
      "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3])
#define LOWBIT_WG_ASM6(TY) \
  "wgmma.mma_async.sync.aligned.m64n48k16.f32." TY "." TY " {" \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23" \
  "}, {%24,%25,%26,%27}, %28, 1, 1, 1, 0;\n"
#define LOWBIT_WG_D4(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3])
#define LOWBIT_WG_ASM4(TY) \
  "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " {" \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15" \
  "}, {%16,%17,%18,%19}, %20, 1, 1, 1, 0;\n"
#define LOWBIT_WG_D8(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define LOWBIT_WG_ASM8(TY) \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {" \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24," \
  "%25,%26,%27,%28,%29,%30,%31" \
  "}, {%32,%33,%34,%35}, %36, 1, 1, 1, 0;\n"
#define LOWBIT_WG_D12(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), \
      "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), \
      "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), \
      "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), \
      "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), \
      "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), \
      "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])
#define LOWBIT_WG_ASM12(TY) \
  "wgmma.mma_async.sync.aligned.m64n96k16.f32." TY "." TY " {" \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24," \
  "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46," \
  "%47" \
  "}, {%48,%49,%50,%51}, %52, 1, 1, 1, 0;\n"
#define LOWBIT_WG_D16(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), \
      "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), \
      "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), \
      "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), \
      "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), \
      "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
#define LOWBIT_WG_ASM16(TY) \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24," \
  "%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46," \
  "%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63" \
  "}, {%64,%65,%66,%67}, %68, 1, 1, 1, 0;\n"
#define LOWBIT_WG_D32(d) \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), \
      "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
      "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), \
      "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), \
      "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), \
      "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), \
      "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), \
      "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]), "+f"(d[16][0]), \
      "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), \
      "+f"(d[17][3]), "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), \
      "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), \
      "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), "+f"(d[22][0]), \
      "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), \
      "+f"(d[23][3]), "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), "+f"(d[25][0]), \
      "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]), "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), \
      "+f"(d[26][3]), "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]), "+f"(d[28][0]), \
      "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), \
      "+f"(d[29][3]), "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), "+f"(d[31][0]), \
      "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
#define LOWBIT_WG_ASM32(TY) \
  "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {" \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23," \
  "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71," \
  "%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95," \
  "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111," \
  "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127" \
  "}, {%128,%129,%130,%131}, %132, 1, 1, 1, 0;\n"
// d (+)= A x B for one 64-column group: NT = 4 / 6 / 8 / 12 / 16 / 32 (32 / 48 / 64 / 96 / 128 / 256 x rows).
template <typename T, int NT>
__device__ __forceinline__ void wg_mma(float (&d)[NT][4], const uint32_t (&a)[4], uint64_t desc) {
  static_assert(NT == 4 || NT == 6 || NT == 8 || NT == 12 || NT == 16 || NT == 32,
                "wgmma tiles of 32, 48, 64, 96, 128 or 256 rows");
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (NT == 6 && Act<T>::kBf16) {
    asm volatile(LOWBIT_WG_ASM6("bf16") : LOWBIT_WG_D6(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 6) {
    asm volatile(LOWBIT_WG_ASM6("f16") : LOWBIT_WG_D6(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 4 && Act<T>::kBf16) {
    asm volatile(LOWBIT_WG_ASM4("bf16") : LOWBIT_WG_D4(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 4) {
    asm volatile(LOWBIT_WG_ASM4("f16") : LOWBIT_WG_D4(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 8 && Act<T>::kBf16) {
    asm volatile(LOWBIT_WG_ASM8("bf16") : LOWBIT_WG_D8(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 8) {
    asm volatile(LOWBIT_WG_ASM8("f16") : LOWBIT_WG_D8(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 12 && Act<T>::kBf16) {
    asm volatile(LOWBIT_WG_ASM12("bf16") : LOWBIT_WG_D12(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 12) {
    asm volatile(LOWBIT_WG_ASM12("f16") : LOWBIT_WG_D12(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 32 && Act<T>::kBf16) {
    asm volatile(LOWBIT_WG_ASM32("bf16") : LOWBIT_WG_D32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (NT == 32) {
    asm volatile(LOWBIT_WG_ASM32("f16") : LOWBIT_WG_D32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else if constexpr (Act<T>::kBf16) {
    asm volatile(LOWBIT_WG_ASM16("bf16") : LOWBIT_WG_D16(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  } else {
    asm volatile(LOWBIT_WG_ASM16("f16") : LOWBIT_WG_D16(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  }
#else
  __trap();  // not sm_90a code: the host never launches the wgmma tiles then (pipe_wgmma_ok)
#endif
}
#undef LOWBIT_WG_ASM4
#undef LOWBIT_WG_ASM6
#undef LOWBIT_WG_ASM8
#undef LOWBIT_WG_ASM12
#undef LOWBIT_WG_ASM16
#undef LOWBIT_WG_ASM32
#undef LOWBIT_WG_D4
#undef LOWBIT_WG_D6
#undef LOWBIT_WG_D8
#undef LOWBIT_WG_D12
#undef LOWBIT_WG_D16
#undef LOWBIT_WG_D32

// Scale and magic + z of this lane's two columns (16 wj + g, 16 wj + g + 8; wj: see the kernel)
// of group c.
template <typename T, bool kSym>
__device__ __forceinline__ void wg_group(uint32_t addr, uint32_t z_minus_s, typename Act<T>::T2 (&sc)[2],
                                         typename Act<T>::T2 (&mz)[2]) {
  using T2 = typename Act<T>::T2;
  const uint32_t sw = pipe_lds32(addr);
  sc[0] = bits_as<T2>(__byte_perm(sw, 0, 0x1010));
  sc[1] = bits_as<T2>(__byte_perm(sw, 0, 0x3232));
  if constexpr (kSym) {
    mz[0] = mz[1] = magic_plus_zero<T>(sym_zero_pair<T>());
  } else {
    const uint32_t zw = pipe_lds32(addr + z_minus_s);
    mz[0] = magic_plus_zero<T>(__byte_perm(zw, 0, 0x1010));
    mz[1] = magic_plus_zero<T>(__byte_perm(zw, 0, 0x3232));
  }
}

// NS K steps of one stage for a warpgroup: per step, each lane dequantizes its word wj (see the
// kernel) for the warpgroup's kWgGroups groups into one of two register sets (the other may still feed
// the previous step's wgmmas), then their wgmmas are issued as one group; at most one group
// stays in flight. Groups past N (the last column tile) are computed from whatever their stage
// holds and never stored: no branch splits the step (branches around the groups left the
// dequantization chains unscheduled across them). ln.w: this lane's word wj in group 0's first
// step; ln.s: its scale word.
template <typename T, int NT, int NS, bool kSym, int GW = kWgGroups>
__device__ __forceinline__ void wg_stage(float (&acc)[GW][NT][4], uint32_t st, const PipeLane& ln,
                                         uint32_t x_tile) {
  // 128-row tiles read the stage's words and both scale rows (steps 0-1, 2-3) at its start:
  // read per step, right before its dequantization, every step waited for a shared-memory
  // latency (Nsight Compute, Mixtral MoE M = 8192: 17% of the stall samples on the first
  // unpack instruction after the word's load); 3-5% faster there (round BF). The 64-row tiles
  // (two blocks per SM at 128 registers) read them per step: 1-4% slower the other way.
  constexpr bool kStageAhead = NT >= 12;  // 96-row tiles (one block per SM) as the 128-row ones
  typename Act<T>::T2 sc[2][GW][2], mz[2][GW][2];
  uint32_t words[NS][GW];
  auto load_word = [&](int s, int c) {
    words[s][c] = pipe_lds32(st + ln.w + static_cast<uint32_t>((c * kPipeStageSteps + s) * 512));
  };
  // Scales of steps 0, 1 (h = 0) or 2, 3 (h = 1; G = 32: the stage's second group) into set d.
  auto load_scales = [&](int h, int d) {
#pragma unroll
    for (int c = 0; c < GW; ++c)
      wg_group<T, kSym>(st + ln.s + static_cast<uint32_t>(c * 256) + (h == 1 ? ln.g32_slot : 0u), ln.z_minus_s,
                        sc[d][c], mz[d][c]);
  };
  if constexpr (kStageAhead) {
#pragma unroll
    for (int s = 0; s < NS; ++s)
#pragma unroll
      for (int c = 0; c < GW; ++c) load_word(s, c);
    load_scales(0, 0);
    if constexpr (NS > 2) load_scales(1, 1);
  }
  uint32_t a[2][GW][4];
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    if constexpr (!kStageAhead) {
      if (s == 0 || s == 2) load_scales(s / 2, 0);
    }
    const int set = kStageAhead ? s / 2 : 0;
#pragma unroll
    for (int c = 0; c < GW; ++c) {
      if constexpr (!kStageAhead) load_word(s, c);
#pragma unroll
      for (int r = 0; r < 4; ++r)
#ifdef LOWBIT_EXP_RAW_A  // measurement builds only (wrong sums): the tile without its dequantization
        a[s & 1][c][r] = words[s][c];
#else
        a[s & 1][c][r] = as_bits(dequant_pair<T>(words[s][c], r, mz[set][c][r & 1], sc[set][c][r & 1]));
#endif
    }
    wg_fence();
    const uint64_t desc = wg_desc(x_tile + static_cast<uint32_t>(s * 32));
#pragma unroll
    for (int c = 0; c < GW; ++c) wg_mma<T, NT>(acc[c], a[s & 1][c], desc);
    wg_commit();
    wg_wait<1>();
  }
}

// The dense epilogue: the block's fp32 tile `epi` (BM rows of kEpiPitch floats), rounded to the
// activation dtype; with split-K, the ranks' tiles added in rank order, each rank storing its
// share of the outputs (the tiles of the other ranks read through distributed shared memory;
// the caller's cluster barrier made them complete).
// One rank (no split-K): the tile is read by shared-memory loads, kStoreUnroll chunks' loads in
// flight per thread before their stores. Through the generic pointer of the split path (which
// compiled to generic loads, one chunk at a time) the store loop of a 128-row tile took ~4 us
// (session 33's timeline probes, 70b.o at M = 512: 3.9 us of a 94 us launch; 8b.o at M = 1280
// 4.1 us); the sums and their order are the same.
constexpr int kStoreUnroll = 4;
template <typename T, int BM, int kThreads, int kEpiPitch, int kCols>
__device__ __forceinline__ void pipe_store_split(const PipeParams& p, const float* epi, int m0, int ct, int rank, int tid);
// One rank's tile (no split-K): what pipe_store_dense does for splits == 1, on its own for the
// stream-K heads (the split-K branch beside it, inlined into their segment loop, raised the
// kernel past its register budget).
template <typename T, int BM, int kThreads, int kEpiPitch, int kCols = kPipeCols>
__device__ __forceinline__ void pipe_store_tile(const PipeParams& p, const float* epi, int m0, int ct, int tid) {
  T* __restrict__ y = static_cast<T*>(p.y);
  constexpr int kChunks = BM * (kCols / 8);
  constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
  const uint32_t e0 = smem_addr(epi);
#pragma unroll 1
  for (int j0 = 0; j0 < kIters; j0 += kStoreUnroll) {
    uint4 a[kStoreUnroll][2];
#pragma unroll
    for (int u = 0; u < kStoreUnroll; ++u) {
      const int i = (j0 + u) * kThreads + tid;
      if (i < kChunks) {  // (so j0 + u < kIters)
        const uint32_t src = e0 + static_cast<uint32_t>(((i / (kCols / 8)) * kEpiPitch + (i % (kCols / 8)) * 8) * 4);
        a[u][0] = lds128(src);
        a[u][1] = lds128(src + 16);
      }
    }
#pragma unroll
    for (int u = 0; u < kStoreUnroll; ++u) {
      const int i = (j0 + u) * kThreads + tid;
      if (i >= kChunks) continue;
      const int row = m0 + i / (kCols / 8), col = ct * kCols + (i % (kCols / 8)) * 8;
      if (row >= p.M || col >= p.N) continue;
      const float v[8] = {__uint_as_float(a[u][0].x), __uint_as_float(a[u][0].y), __uint_as_float(a[u][0].z),
                          __uint_as_float(a[u][0].w), __uint_as_float(a[u][1].x), __uint_as_float(a[u][1].y),
                          __uint_as_float(a[u][1].z), __uint_as_float(a[u][1].w)};
      uint32_t out[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) out[e] = pack_pair<T>(v[2 * e], v[2 * e + 1]);
      *reinterpret_cast<uint4*>(y + static_cast<size_t>(row) * p.N + col) = make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
}
template <typename T, int BM, int kThreads, int kEpiPitch, int kCols = kPipeCols>
__device__ __forceinline__ void pipe_store_dense(const PipeParams& p, const float* epi, int m0, int ct, int rank,
                                                 int tid) {
  if (p.splits == 1) {
    pipe_store_tile<T, BM, kThreads, kEpiPitch, kCols>(p, epi, m0, ct, tid);
    return;
  }
  pipe_store_split<T, BM, kThreads, kEpiPitch, kCols>(p, epi, m0, ct, rank, tid);
}

// Split-K ranks' share of the dense epilogue. Rank r owns every splits-th run of kThreads quads
// (4 outputs); lane l of a warp takes quad l of a run, so each warp-wide 16 B load reads 512
// contiguous bytes of a peer's tile (half a row), the access pattern distributed shared memory
// serves best (the Hopper tuning guide: coalesced, like global memory). Peers are read through
// the cluster window (mapa + ld.shared::cluster), kSplitUnroll quads of every rank requested
// before any is added, then summed in rank order.
// Before (session 33): 8 outputs per lane, two 16 B loads 32 B apart through generic pointers,
// one chunk at a time; the store loop of 8b.o at M = 128 (6 ranks) took ~7.7 us.
// Each load maps its own address (mapa) rather than reading a per-rank array of mapped bases:
// with that array ptxas moved the 32-row wgmma tile's K-loop index arithmetic off the uniform
// datapath (70 -> 12 uniform instructions in the loop), and that tile ran 7% slower on 8b / 70b
// gate_up at M = 32, where it does not even split K (session 34, round A); as written, the K
// loops of the wgmma and warp-specialized tiles compile to the same instructions as before.
template <typename T, int BM, int kThreads, int kEpiPitch, int kCols>
__device__ __forceinline__ void pipe_store_split(const PipeParams& p, const float* epi, int m0, int ct, int rank,
                                                 int tid) {
  T* __restrict__ y = static_cast<T*>(p.y);
  constexpr int kQuadsPerRow = kCols / 4;
  constexpr int kQuads = BM * kQuadsPerRow;
  constexpr int kSplitUnroll = 2;
  const uint32_t e0 = smem_addr(epi);
  const int stride = kThreads * p.splits;
#pragma unroll 1
  for (int i0 = rank * kThreads + tid; i0 < kQuads; i0 += kSplitUnroll * stride) {
    uint4 part[kSplitUnroll][kPipeMaxSplits];
    bool live[kSplitUnroll];
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      const int i = i0 + u * stride;
      // Only loads whose values are added and stored: a rank's exit arrival (relaxed) relies on
      // every remote load having returned, which the store's use of it guarantees.
      live[u] = i < kQuads && m0 + i / kQuadsPerRow < p.M && ct * kCols + (i % kQuadsPerRow) * 4 < p.N;
      if (!live[u]) continue;
      const uint32_t a = e0 + static_cast<uint32_t>(((i / kQuadsPerRow) * kEpiPitch + (i % kQuadsPerRow) * 4) * 4);
#pragma unroll
      for (int q = 0; q < kPipeMaxSplits; ++q)
        if (q < p.splits) part[u][q] = ldsc128(mapa_shared(a, q));
    }
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      if (!live[u]) continue;
      const int i = i0 + u * stride;
      const int row = m0 + i / kQuadsPerRow, col = ct * kCols + (i % kQuadsPerRow) * 4;
      float v[4] = {__uint_as_float(part[u][0].x), __uint_as_float(part[u][0].y), __uint_as_float(part[u][0].z),
                    __uint_as_float(part[u][0].w)};
#pragma unroll
      for (int q = 1; q < kPipeMaxSplits; ++q)
        if (q < p.splits) {
          v[0] += __uint_as_float(part[u][q].x);
          v[1] += __uint_as_float(part[u][q].y);
          v[2] += __uint_as_float(part[u][q].z);
          v[3] += __uint_as_float(part[u][q].w);
        }
      *reinterpret_cast<uint2*>(y + static_cast<size_t>(row) * p.N + col) =
          make_uint2(pack_pair<T>(v[0], v[1]), pack_pair<T>(v[2], v[3]));
    }
  }
}

// The split-K ranks' last barrier: no rank exits (its shared memory gone) while another still
// reads its tile. Every remote load of a rank has returned before it arrives (its values were
// added and stored), so the arrival needs no release: a relaxed one, without the full
// cluster.sync()'s memory barrier, which waited for this rank's global stores of y to complete
// (~1.1-1.8 us at 4-6 ranks in session 33's timeline probes).
__device__ __forceinline__ void pipe_split_exit_barrier() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}

// MoE gate/up epilogue: inter[id, c] = act(silu(gate) * up) for the block's 128 columns (gate
// sums in epi columns 0..127, up sums in 128..255), 8 per thread (threads 0 .. kThreads - 1).
// kSortedRows (the warp-specialized tile): row m0 + r of inter in the align order instead of row
// id, and zeros for padding rows, so that GEMM2 reads defined values in whole boxes.
template <typename T, int BM, int kThreads, int kEpiPitch, bool kSortedRows = false>
__device__ __forceinline__ void pipe_store_moe_gate_up(const PipeMoeParams& p, const float* epi, const int* s_ids,
                                                       int ct, int tid, int m0 = 0) {
  const int I = p.half_groups * 64;
  for (int i = tid; i < BM * 16; i += kThreads) {
    const int r = i / 16, c8 = (i % 16) * 8, id = s_ids[r], col = ct * 128 + c8;
    if constexpr (kSortedRows) {
      if (col >= I) continue;
      if (id < 0) {
        *reinterpret_cast<uint4*>(static_cast<T*>(p.y) + static_cast<size_t>(m0 + r) * I + col) = make_uint4(0, 0, 0, 0);
        continue;
      }
    } else {
      if (id < 0 || col >= I) continue;
    }
    const float* gv = epi + r * kEpiPitch + c8;
    const float4 g0 = *reinterpret_cast<const float4*>(gv), g1 = *reinterpret_cast<const float4*>(gv + 4);
    const float4 u0 = *reinterpret_cast<const float4*>(gv + 128), u1 = *reinterpret_cast<const float4*>(gv + 132);
    const float gs[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    const float us[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = gs[e] / (1.f + expf(-gs[e])) * us[e];
    uint32_t out[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = pack_pair<T>(v[2 * e], v[2 * e + 1]);
    *reinterpret_cast<uint4*>(static_cast<T*>(p.y) + static_cast<size_t>(kSortedRows ? m0 + r : id) * I + col) =
        make_uint4(out[0], out[1], out[2], out[3]);
  }
}
// MoE down epilogue: slot_out[id, c] = topk_weight[id] * sum, fp32 (moe_sum adds the slots in
// slot order).
template <int BM, int kThreads, int kEpiPitch>
__device__ __forceinline__ void pipe_store_moe_down(const PipeMoeParams& p, const float* epi, const int* s_ids, int ct,
                                                    int tid) {
  for (int i = tid; i < BM * (kPipeCols / 8); i += kThreads) {
    const int r = i / (kPipeCols / 8), c8 = (i % (kPipeCols / 8)) * 8, id = s_ids[r], col = ct * kPipeCols + c8;
    if (id < 0 || col >= p.N) continue;
    const float wt = __ldg(p.topk_weights + id);
    const float* src = epi + r * kEpiPitch + c8;
    float4 a = *reinterpret_cast<const float4*>(src), b = *reinterpret_cast<const float4*>(src + 4);
    a.x *= wt, a.y *= wt, a.z *= wt, a.w *= wt, b.x *= wt, b.y *= wt, b.z *= wt, b.w *= wt;
    float* dst = static_cast<float*>(p.y) + static_cast<size_t>(id) * p.N + col;
    *reinterpret_cast<float4*>(dst) = a;
    *reinterpret_cast<float4*>(dst + 4) = b;
  }
}

// Stream-K (kSK): a block whose run starts inside a tile publishes its fp32 sums of that tile
// (the epilogue's tile, BM x 256) and raises its flag; the tile's head (the block holding its
// first stage) waits for the flags of the blocks after it that hold the rest, adds their sums in
// block order and stores. Fence then flag (release); the head reads the flag (acquire), then
// the sums through L2.
template <int BM, int kThreads, int kEpiPitch>
__device__ __forceinline__ void pipe_sk_publish(const PipeSkParams& p, const float* epi, int tid) {
  float4* part = reinterpret_cast<float4*>(p.sk_part + static_cast<size_t>(blockIdx.x) * BM * kPipeCols);
  for (int i = tid; i < BM * kPipeCols / 4; i += kThreads)
    __stcg(part + i, *reinterpret_cast<const float4*>(epi + (i >> 6) * kEpiPitch + (i & 63) * 4));
  __threadfence();
  __syncthreads();
  if (tid == 0) asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p.sk_flags + blockIdx.x), "r"(1) : "memory");
}
template <int BM, int kThreads, int kEpiPitch>
__device__ __forceinline__ void pipe_sk_collect(const PipeSkParams& p, float* epi, long long tile, int tid) {
  const long long last_unit = (tile + 1) * p.sk_stages - 1;
  const int last = static_cast<int>(pipe_sk_block_of(last_unit, p.sk_units, p.sk_blocks));
  __shared__ int s_missing;  // a block whose sums never came (-1: none)
  if (tid == 0) {
    s_missing = -1;
    for (int q = static_cast<int>(blockIdx.x) + 1; q <= last && s_missing < 0; ++q) {
      unsigned long long t0 = 0, now = 0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
      for (;;) {
        int v;
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p.sk_flags + q) : "memory");
        if (v == 1) break;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - t0 > kPipeSkWaitNs) {  // (no printf here: a call in the kernel serializes its wgmmas)
          s_missing = q;
          break;
        }
        __nanosleep(64);
      }
    }
  }
  __syncthreads();
  if (s_missing >= 0) {  // no silent wrong numbers: the tile comes out NaN
    for (int i = tid; i < BM * kPipeCols; i += kThreads) epi[(i >> 8) * kEpiPitch + (i & 255)] = __int_as_float(0x7fc00000);
    __syncthreads();
    return;
  }
  for (int q = static_cast<int>(blockIdx.x) + 1; q <= last; ++q) {
    const float4* part = reinterpret_cast<const float4*>(p.sk_part + static_cast<size_t>(q) * BM * kPipeCols);
    for (int i = tid; i < BM * kPipeCols / 4; i += kThreads) {
      float4* e = reinterpret_cast<float4*>(epi + (i >> 6) * kEpiPitch + (i & 63) * 4);
      const float4 v = __ldcg(part + i);
      float4 a = *e;
      a.x += v.x, a.y += v.y, a.z += v.z, a.w += v.w;
      *e = a;
    }
  }
  __syncthreads();
}

template <typename T, int BM, bool kSym, bool kWg, int MODE, bool kSK = false>
// (wgmma tiles: the resident blocks per SM of pipe_wg_blocks_per_sm(), the wave the plans count on.)
__global__ void __launch_bounds__(pipe_threads(kWg), kWg ? pipe_wg_blocks_per_sm(BM) : 1)
    gemm_pipelined_kernel(const PipeParamsFor<MODE, kSK> p) {
  constexpr bool kMoe = MODE != kPipeDense, kGateUp = MODE == kPipeMoeGateUp;
  static_assert(!kSK || (MODE == kPipeDense && kWg), "stream-K: dense wgmma tiles");
  using L = PipeSmem<BM, kWg>;
  constexpr int NT = BM / 8;  // n8 tiles
  constexpr int kThreads = pipe_threads(kWg);
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, t = lane & 3;
  // wgmma: warpgroup wgi = warp / 4 multiplies groups 2 wgi, 2 wgi + 1; warps 0-3 load the
  // weights of group `warp` as in the mma.sync kernel.
  const int warp = (tid >> 5) & (kPipeWarps - 1), wgi = tid >> 7;
  const bool loader = !kWg || wgi == 0;
  // Stream-K: this block's run of units [sk_u, sk_end) (tile-major, a unit = one stage), one pass
  // of the loop below per tile it touches; otherwise one pass (the loop's last statement returns).
  long long sk_u = 0, sk_end = 0;
  if constexpr (kSK) {
    sk_u = static_cast<long long>(blockIdx.x) * p.sk_units / p.sk_blocks;
    sk_end = static_cast<long long>(blockIdx.x + 1) * p.sk_units / p.sk_blocks;
  }
  for (;;) {
    int rank = static_cast<int>(blockIdx.x % p.splits);
    int rt = static_cast<int>((blockIdx.x / p.splits) % p.row_tiles);
    int ct = static_cast<int>(blockIdx.x / (p.splits * p.row_tiles));
    long long sk_tile = 0;
    int sk_st0 = 0, sk_st1 = 0;  // the segment's stages of its tile
    if constexpr (kSK) {
      if (sk_u >= sk_end) return;
      sk_tile = sk_u / p.sk_stages;
      sk_st0 = static_cast<int>(sk_u - sk_tile * p.sk_stages);
      sk_st1 = static_cast<int>(sk_end - sk_tile * p.sk_stages < p.sk_stages ? sk_end - sk_tile * p.sk_stages
                                                                               : p.sk_stages);
      sk_u += sk_st1 - sk_st0;
      rank = 0;
      rt = static_cast<int>(sk_tile % p.row_tiles);
      ct = static_cast<int>(sk_tile / p.row_tiles);
    }
    if constexpr (kMoe) {
      // Raster groups of raster_rows row tiles: all column tiles of a group before the next
      // group, row tiles fastest within it. With every row tile first (the dense order) a wave
      // covered about one column tile of all rows, so at prefill sizes the gathered activations
      // (Mixtral M = 8192: 67 MB of x for GEMM1, 470 MB of inter for GEMM2) were re-read from HBM
      // once per column tile; a group's rows stay in L2 while its column tiles pass.
      const PipeTile tile = moe_raster_tile(static_cast<int>(blockIdx.x), p.row_tiles, p.col_tiles, p.raster_rows);
      rt = tile.rt;
      ct = tile.ct;
    }
    // MoE: wait for the routing (ids, experts, num_post_padded), leave if this align block
    // holds no rows, take its ids (-1: padding) and its expert's weights.
    const uint4* qw = p.qw;
    const uint16_t* scales = p.scales;
    const uint16_t* zeros = p.zeros;
    __shared__ int s_ids[kMoe ? BM : 1];
    if constexpr (kMoe) {
      // ids_early (down only): GEMM1's blocks let us launch only after their own wait for the
      // routing, so the ids are complete already; the first stages' weights below then stream
      // during GEMM1's tail, and we wait for GEMM1 before loading inter (x).
      if (!(MODE == kPipeMoeDown && p.ids_early != 0)) asm volatile("griddepcontrol.wait;\n" ::: "memory");
      const int npp = __ldg(p.npp), e = __ldg(p.expert_ids + rt);
      if (rt * BM >= npp || e < 0) return;
      for (int i = tid; i < BM; i += kThreads) {
        const int id = __ldg(p.sorted_ids + static_cast<size_t>(rt) * BM + i);
        s_ids[i] = id >= 0 && id < p.P ? id : -1;
      }
      qw += static_cast<size_t>(e) * p.qw_estride;
      scales += static_cast<size_t>(e) * p.sc_estride;
      if (zeros != nullptr) zeros += static_cast<size_t>(e) * p.sc_estride;
      __syncthreads();
    }
    // This warp's 64-column group (gate/up: slots 0, 1 gate, 2, 3 up; see the top).
    int group = ct * kPipeWarps + warp;
    bool wvalid = group < p.N / 64;
    if constexpr (kGateUp) {
      group = warp < 2 ? 2 * ct + warp : p.half_groups + 2 * ct + warp - 2;
      wvalid = 2 * ct + (warp & 1) < p.half_groups;
    }
    const int m0 = rt * BM;
    const int s_begin = kSK ? sk_st0 * kPipeStageSteps : rank * p.split_steps;
    const int s_end = kSK ? min(p.ksteps, sk_st1 * kPipeStageSteps) : min(p.ksteps, s_begin + p.split_steps);
    const int nstages = s_begin < s_end ? (s_end - s_begin + kPipeStageSteps - 1) / kPipeStageSteps : 0;
    // wgmma's swizzled x tiles need 1024 B aligned stages (L::kAlign bytes of slack).
    const uint32_t sbase = kWg ? (smem_addr(smem) + 1023u) & ~1023u : smem_addr(smem);
    unsigned char* const sgen = smem + (sbase - smem_addr(smem));
    const T* __restrict__ x = static_cast<const T*>(p.x);

    // Weights, scales and zeros of stage `it` (this warp's group only; no dependence on the
    // previous kernel, so the first stages are requested before griddepcontrol.wait).
    auto load_weights = [&](int it) {
      if (!wvalid || !loader) return;
      const int s0 = s_begin + it * kPipeStageSteps, ns = min(kPipeStageSteps, s_end - s0);
      const uint32_t st = sbase + static_cast<uint32_t>((it % L::kStages) * L::kStage);
      const uint4* src = qw + (static_cast<size_t>(group) * p.ksteps + s0) * 32 + lane;
#pragma unroll
      for (int s = 0; s < kPipeStageSteps; ++s)
        if (s < ns)
          pipe_cp16(st + L::kW + static_cast<uint32_t>((warp * kPipeStageSteps + s) * 512 + lane * 16), src + 32 * s);
      // Lanes 0-7: scale row of the stage's first group, 8-15 its second (G = 32 only),
      // 16-23 / 24-31: the zero rows.
      const int slot = (lane >> 3) & 1;
      const bool zrow = lane >= 16;
      const int groups_here = (p.gsteps == 2 && ns > 2) ? 2 : 1;
      if (slot < groups_here && (!kSym || !zrow)) {
        const size_t grp = static_cast<size_t>(s0 / p.gsteps + slot);
        const uint16_t* base = zrow ? zeros : scales;
        pipe_cp16(st + static_cast<uint32_t>((zrow ? L::kZ : L::kS) + (warp * 2 + slot) * 128 + (lane & 7) * 16),
                  base + grp * p.N + static_cast<size_t>(group) * 64 + (lane & 7) * 8);
      }
    };
    // x rows m0 .. m0 + BM - 1 of stage `it` (rows past M re-read row M - 1; never stored; MoE:
    // row id / topk (gate/up) or id of the align block's ids, padding rows read row 0). A
    // thread always copies the same 16 B chunk c = tid % 8 of the same rows, so their source
    // offsets (x is [M, K], below 2^32 elements by the launcher's check) and destinations are
    // computed once (the per-copy row arithmetic was ~15% of the kernel's instructions, round Z).
    // 48-row wgmma tiles (384 chunks for 256 threads): the last round of copies is partial, and
    // a thread copies chunk tid + u * kThreads only where it exists (has_chunk).
    constexpr int kXChunks = BM * 2 * kPipeStageSteps;
    constexpr int kXCopies = (kXChunks + kThreads - 1) / kThreads;
    constexpr bool kXPartial = kXChunks % kThreads != 0;
    auto has_chunk = [&](int u) { return !kXPartial || tid + u * kThreads < kXChunks; };
    const int xc = tid % (2 * kPipeStageSteps);
    uint32_t xsrc[kXCopies], xdst[kXCopies];
#pragma unroll
    for (int u = 0; u < kXCopies; ++u) {
      const int chunk = tid + u * kThreads;
      const int r = min(chunk, kXChunks - 1) / (2 * kPipeStageSteps);
      int row = min(m0 + r, p.M - 1);
      if constexpr (kMoe) {
        const int id = s_ids[r];
        row = id < 0 ? 0 : kGateUp ? id / p.topk : id;
      }
      xsrc[u] = static_cast<uint32_t>(row) * static_cast<uint32_t>(p.K) + static_cast<uint32_t>(xc * 8);
      // wgmma: 128 B swizzle
      xdst[u] = static_cast<uint32_t>(L::kX + r * L::kPitch + (kWg ? (xc ^ (r & 7)) : xc) * 16);
    }
    auto load_x = [&](int it) {
      const int s0 = s_begin + it * kPipeStageSteps, ns = min(kPipeStageSteps, s_end - s0);
      if (xc >= 2 * ns) return;
      const uint32_t st = sbase + static_cast<uint32_t>((it % L::kStages) * L::kStage);
      const T* xs = x + s0 * 16;
#pragma unroll
      for (int u = 0; u < kXCopies; ++u)
        if (has_chunk(u)) pipe_cp16(st + xdst[u], xs + xsrc[u]);
    };

#pragma unroll
    for (int i = 0; i < L::kAhead; ++i)
      if (i < nstages) load_weights(i);
    if constexpr (!kMoe)
      asm volatile("griddepcontrol.wait;\n" ::: "memory");  // MoE: waited above, unless ids_early
    else if (MODE == kPipeMoeDown && p.ids_early != 0)
      asm volatile("griddepcontrol.wait;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < L::kAhead; ++i) {
      if (i < nstages) load_x(i);
      pipe_commit();  // group i: stage i's x (and, in group 0, the first stages' weights)
    }

    constexpr int kAccGroups = kWg ? kWgGroups : 4;
    float acc[kAccGroups][NT][4];
#pragma unroll
    for (int j = 0; j < kAccGroups; ++j)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][n][e] = 0.f;

    // This lane's addresses in a stage. mma.sync: its 16 B of the warp's weight step, its
    // ldmatrix row (matrix lane / 8 = rows 8 (i / 2) .. + 7 of a 16-row pair, K half i % 2), and
    // its 16 B of the warp's scale / zero rows (entries 8g .. 8g + 7: columns 16j + g + 8h).
    // wgmma: word wj = (w + lane / 8) % 4 of its 16 B in group 0 and the scale word of columns
    // 16 wj + g (+ 8). Warp w's A rows 16w + g (+ 8) are those weight columns (the epilogue maps
    // them back): with word w for every lane, lanes l, l + 8, l + 16, l + 24 read the same bank
    // (16 B apart per lane), a 4-way conflict on every word load (Nsight Compute, 70b.gate_up
    // M = 512: 20% of the shared-memory wavefronts excessive, session 26); rotated by lane / 8
    // the warp's 32 words fall in 32 banks.
    const int wj = (warp + (lane >> 3)) & 3;
    const PipeLane ln = kWg ? PipeLane{static_cast<uint32_t>(L::kW + wgi * kWgGroups * kPipeStageSteps * 512 +
                                                             lane * 16 + wj * 4),
                                       0u, static_cast<uint32_t>(L::kS + wgi * kWgGroups * 256 + g * 16 + wj * 4),
                                       static_cast<uint32_t>(L::kZ - L::kS), p.gsteps == 2 ? 128u : 0u}
                            : PipeLane{static_cast<uint32_t>(L::kW + warp * kPipeStageSteps * 512 + lane * 16),
                                       static_cast<uint32_t>(L::kX + (8 * (lane >> 4) + (lane & 7)) * kXPitch +
                                                             16 * ((lane >> 3) & 1)),
                                       static_cast<uint32_t>(L::kS + warp * 256 + g * 16),
                                       static_cast<uint32_t>(L::kZ - L::kS), p.gsteps == 2 ? 128u : 0u};
    // wgmma: the warpgroups multiply the block's 4 groups (ng of them are stored).
    const int ng = kMoe ? kPipeWarps : min(kPipeWarps, p.N / 64 - ct * kPipeWarps);

    for (int it = 0; it < nstages; ++it) {
      pipe_wait<L::kAhead - 1>();
      if constexpr (kWg) fence_proxy_async();  // this thread's x copies, visible to wgmma's reads
      __syncthreads();  // stage it landed for every thread; the stage refilled below is free
      {
        const int nx = it + L::kAhead;
        if (nx < nstages) {
          load_weights(nx);
          load_x(nx);
        }
        pipe_commit();
      }
      const uint32_t st = sbase + static_cast<uint32_t>((it % L::kStages) * L::kStage);
      // Whole stages have no per-step tests (so the compiler can overlap a step's shared-memory
      // loads with the previous step's MMAs); only the last stage of K may hold 2 steps.
      const bool whole = s_end - (s_begin + it * kPipeStageSteps) >= kPipeStageSteps;
      if constexpr (kWg) {
        if (whole)
          wg_stage<T, NT, kPipeStageSteps, kSym>(acc, st, ln, st + L::kX);
        else
          wg_stage<T, NT, 2, kSym>(acc, st, ln, st + L::kX);
      } else {
        if (!wvalid) continue;
        if (whole)
          pipe_stage<T, NT, kPipeStageSteps, kSym>(acc, st, ln);
        else
          pipe_stage<T, NT, 2, kSym>(acc, st, ln);
      }
    }
    if constexpr (kWg) wg_wait<0>();
    pipe_wait<0>();
    __syncthreads();  // every warp is done with the stages: the epilogue reuses them
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

    // Fragment (j, n): rows (columns of W) 16j + g (+8) of the warp's group, activation rows
    // 8n + 2t (+1); wgmma: group j, the warp's rows 16w + g (+8), which hold columns 16 wj + g (+8).
    float* epi = reinterpret_cast<float*>(sgen);
    if (kWg || wvalid) {
#pragma unroll
      for (int j = 0; j < kAccGroups; ++j)
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          if (kWg && kWgGroups * wgi + j >= ng) continue;
          const int col = kWg ? 64 * (kWgGroups * wgi + j) + 16 * wj + g : warp * 64 + 16 * j + g, row = 8 * n + 2 * t;
          epi[row * L::kEpiPitch + col] = acc[j][n][0];
          epi[(row + 1) * L::kEpiPitch + col] = acc[j][n][1];
          epi[row * L::kEpiPitch + col + 8] = acc[j][n][2];
          epi[(row + 1) * L::kEpiPitch + col + 8] = acc[j][n][3];
        }
    }
    cg::cluster_group cluster = cg::this_cluster();
    if (p.splits > 1)
      cluster.sync();
    else
      __syncthreads();
    if constexpr (kGateUp) {
      pipe_store_moe_gate_up<T, BM, kThreads, L::kEpiPitch>(p, epi, s_ids, ct, tid);
      return;
    } else if constexpr (kMoe) {
      pipe_store_moe_down<BM, kThreads, L::kEpiPitch>(p, epi, s_ids, ct, tid);
      return;
    }
    if constexpr (kSK) {
      if (sk_st0 != 0) {
        pipe_sk_publish<BM, kThreads, L::kEpiPitch>(p, epi, tid);  // ends with a barrier: epi is free
        continue;
      }
      if (sk_st1 != p.sk_stages) pipe_sk_collect<BM, kThreads, L::kEpiPitch>(p, epi, sk_tile, tid);
      pipe_store_tile<T, BM, kThreads, L::kEpiPitch>(p, epi, m0, ct, tid);
      __syncthreads();  // the next segment's stages reuse epi
      continue;
    }
    pipe_store_dense<T, BM, kThreads, L::kEpiPitch>(p, epi, m0, ct, rank, tid);
    if (p.splits > 1) pipe_split_exit_barrier();  // no rank leaves while another still reads its tile
    return;
  }  // for: one pass per segment
}

// Measurement knobs (read once): LOWBIT_INT4_PIPE_ROWS=16|32|48|64|96|128 forces the rows per
// block tile (48, 96, 128: wgmma only), LOWBIT_INT4_PIPE_SPLITS=1..8 the split-K ranks (also past
// one wave, where the default plans never split: session 31, rounds E / F),
// LOWBIT_INT4_PIPE_WGMMA=0 keeps every tile on mma.sync (all: any M, same sums up to order).
inline int env_int_once(const char* name, int lo, int hi) {
  const char* e = std::getenv(name);
  const int v = e != nullptr ? std::atoi(e) : 0;
  return v >= lo && v <= hi ? v : 0;
}
inline int env_pipe_rows() {
  static const int v = [] {
    const int r = env_int_once("LOWBIT_INT4_PIPE_ROWS", 16, 256);
    return r == 16 || r == 32 || r == 48 || r == 64 || r == 96 || r == 128 || r == 256 ? r : 0;
  }();
  return v;
}
inline bool env_pipe_wgmma() {  // LOWBIT_INT4_PIPE_WGMMA=0: mma.sync only (64-row tiles at most)
  static const bool v = env_on_unless_zero("LOWBIT_INT4_PIPE_WGMMA");
  return v;
}
// LOWBIT_INT4_PIPE_WG32=0 (read once; measurements and tests): 32-row tiles on mma.sync even
// where wgmma runs (the kernel before session 25).
inline bool env_pipe_wg32() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_PIPE_WG32");
  return v;
}
// LOWBIT_INT4_PIPE_WG48=0 (read once; measurements and tests): 64-row tiles where
// pipelined_rows_for() takes 48-row ones.
inline bool env_pipe_wg48() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_PIPE_WG48");
  return v;
}
// LOWBIT_INT4_PIPE_WG96=0 (read once; measurements and tests): 128-row tiles where
// pipelined_rows_for() takes 96-row ones.
inline bool env_pipe_wg96() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_PIPE_WG96");
  return v;
}
inline int env_pipe_splits() {
  static const int v = env_int_once("LOWBIT_INT4_PIPE_SPLITS", 1, kPipeMaxSplits);
  return v;
}

// Once per kernel (cache: the caller's static): the shared-memory opt-in and the resident
// blocks per SM (the wave the plan fills).
template <typename Kernel>
cudaError_t blocks_per_sm_once(Kernel kernel, unsigned threads, size_t smem, std::atomic<int>& cache, int* blocks) {
  int nb = cache.load(std::memory_order_relaxed);
  if (nb == 0) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, kernel, static_cast<int>(threads), smem);
    if (e != cudaSuccess) return e;
    if (nb < 1) return cudaErrorInvalidConfiguration;
    cache.store(nb, std::memory_order_relaxed);
  }
  *blocks = nb;
  return cudaSuccess;
}
template <typename T, int BM, bool kSym, bool kWg, int MODE, bool kSK = false>
cudaError_t pipe_blocks_per_sm(int* blocks) {
  static std::atomic<int> per_sm{0};
  return blocks_per_sm_once(gemm_pipelined_kernel<T, BM, kSym, kWg, MODE, kSK>, pipe_threads(kWg),
                            PipeSmem<BM, kWg>::kTotal, per_sm, blocks);
}

// Stream-K blocks for dense launches (tests and measurements; read once from
// LOWBIT_INT4_PIPE_SK = 0 (never) / n > 0 (n blocks wherever a 32- or 48-row wgmma tile runs),
// unset: the plan's rule), or set by detail::set_pipe_sk (which wins over the environment).
inline std::atomic<int>& pipe_sk_override() {
  static std::atomic<int> v{0};  // 0: environment; -1: never; n > 0: n blocks
  return v;
}
inline std::atomic<long long>& pipe_sk_launch_count() {  // stream-K launches so far (tests)
  static std::atomic<long long> n{0};
  return n;
}
inline int pipe_sk_forced_blocks() {
  const int o = pipe_sk_override().load(std::memory_order_relaxed);
  if (o != 0) return o;
  static const int env = [] {
    const char* e = std::getenv("LOWBIT_INT4_PIPE_SK");
    if (e == nullptr) return 0;
    const int v = std::atoi(e);
    return v > 0 ? v : -1;
  }();
  return env;
}

// The split-K plan of a dense launch of `kernel` (bm-row tiles, nb resident blocks per SM; the
// caller keeps `clusters` static per kernel), written into q's splits, split_steps and row_tiles.
// Split-K clusters must all be resident at once, or a second wave doubles the time (clusters
// of 6 with 2 blocks per SM do not tile the GPCs: 70b.qkv at M = 64 ran 75 us against 59
// with 32-row tiles): fewer ranks until the device holds every cluster.
template <typename Kernel>
PipePlan pipe_dense_launch_plan(Kernel kernel, int bm, unsigned threads, size_t smem, int sms, int nb,
                                ClusterSchedulable& clusters, PipeParams& q) {
  const int forced = env_pipe_splits();
  PipePlan pl = pipelined_plan(q.M, q.N, q.K, bm, sms, nb, kPipeMaxSplits, forced);
  const int tiles = pl.row_tiles * pl.col_tiles;
  // A plan of one wave needs all its clusters resident at once (else its last ones would run as a
  // second wave); one of several waves only needs its cluster size to be schedulable.
  const long long wave = static_cast<long long>(nb > 0 ? nb : 1) * sms;
  auto fits = [&](const PipePlan& p) {
    const int act = active_clusters(kernel, p.splits, 1, 1, 1, threads, smem, clusters);
    return pipe_plan_blocks(p) > wave ? act > 0 : tiles <= act;
  };
  while (pl.splits > 1 && !fits(pl)) pl = pipelined_plan(q.M, q.N, q.K, bm, sms, nb, pl.splits - 1, forced);
  q.splits = pl.splits;
  q.split_steps = pl.split_steps;
  q.row_tiles = pl.row_tiles;
  return pl;
}

template <typename T, int BM, bool kSym, bool kWg>
cudaError_t launch_typed(const PipeParams& prm, int sms, cudaStream_t stream, void* ws = nullptr,
                         size_t ws_bytes = 0) {
  auto kernel = gemm_pipelined_kernel<T, BM, kSym, kWg, kPipeDense>;
  constexpr size_t kSmem = PipeSmem<BM, kWg>::kTotal;
  constexpr unsigned kThreads = pipe_threads(kWg);
  int nb = 0;
  if (const cudaError_t e = pipe_blocks_per_sm<T, BM, kSym, kWg, kPipeDense>(&nb); e != cudaSuccess) return e;
  static ClusterSchedulable clusters = {};
  PipeParams q = prm;
  const PipePlan pl = pipe_dense_launch_plan(kernel, BM, kThreads, kSmem, sms, nb, clusters, q);
  if constexpr (kWg && BM <= 48) {  // (the 64-row stream-K kernel spills at two blocks per SM's 128 registers)
    // Stream-K where the plan leaves SMs unevenly loaded (pipe_sk_plan), if the caller's
    // workspace holds its partial sums (gemm_workspace_size counts them; with less, the plan
    // above runs). Its blocks must all be resident at once: the stream-K kernel's own occupancy.
    const int forced = pipe_sk_forced_blocks();
    int nb_sk = 0;
    if (forced >= 0 && ws != nullptr) {
      if (const cudaError_t e = pipe_blocks_per_sm<T, BM, kSym, kWg, kPipeDense, true>(&nb_sk); e != cudaSuccess) return e;
      const PipeSkPlan sk = pipe_sk_plan(pl, q.K, sms, nb_sk, forced);
      if (sk.blocks > 0 && ws_bytes >= pipe_sk_workspace_bytes(BM, sk.blocks) &&
          reinterpret_cast<uintptr_t>(ws) % 256 == 0) {
        PipeSkParams s;
        static_cast<PipeParams&>(s) = q;
        s.splits = 1;
        s.split_steps = q.ksteps;
        s.sk_part = static_cast<float*>(ws);
        s.sk_flags = reinterpret_cast<int*>(static_cast<char*>(ws) + pipe_sk_partials_bytes(BM, sk.blocks));
        s.sk_units = sk.units;
        s.sk_blocks = sk.blocks;
        s.sk_stages = sk.stages;
        if (const cudaError_t e = cudaMemsetAsync(s.sk_flags, 0, static_cast<size_t>(sk.blocks) * 4, stream);
            e != cudaSuccess)
          return e;
        pipe_sk_launch_count().fetch_add(1, std::memory_order_relaxed);
        return launch_split_clusters(gemm_pipelined_kernel<T, BM, kSym, kWg, kPipeDense, true>, s, 1,
                                     static_cast<unsigned>(sk.blocks), 1, 1, kThreads, kSmem, stream, pdl_enabled());
      }
    }
  }
  return launch_split_clusters(kernel, q, pl.splits, static_cast<unsigned>(pl.row_tiles * pl.col_tiles), 1, 1,
                               kThreads, kSmem, stream, pdl_enabled());
}

// wgmma tiles: built for sm_90a (LOWBIT_SM90A, CMakeLists.txt) and running on compute
// capability 9.0, unless LOWBIT_INT4_PIPE_WGMMA=0.
inline bool pipe_wgmma_ok() {
#if defined(LOWBIT_SM90A)
  static const bool v = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return major == 9 && minor == 0 && env_pipe_wgmma();
  }();
  return v;
#else
  return false;
#endif
}

// MoE modes: tiles = column tiles x align blocks, no split-K (every block one cluster of 1).
template <typename T, int BM, bool kSym, bool kWg, int MODE>
cudaError_t launch_moe_typed(const PipeMoeParams& prm, unsigned tiles, cudaStream_t stream) {
  int nb = 0;  // only the shared-memory opt-in is needed here (no split-K plan to size)
  if (const cudaError_t e = pipe_blocks_per_sm<T, BM, kSym, kWg, MODE>(&nb); e != cudaSuccess) return e;
  return launch_split_clusters(gemm_pipelined_kernel<T, BM, kSym, kWg, MODE>, prm, 1, tiles, 1, 1, pipe_threads(kWg),
                               PipeSmem<BM, kWg>::kTotal, stream, pdl_enabled());
}
// bm: 16 (mma.sync), 32 / 64 (wgmma where pipe_wgmma_ok, else mma.sync), 128 (wgmma only;
// the caller checks).
template <typename T, bool kSym, int MODE>
cudaError_t launch_moe_rows(const PipeMoeParams& prm, int bm, unsigned tiles, cudaStream_t stream) {
  const bool wg = pipe_wgmma_ok();
  if (bm == 16) return launch_moe_typed<T, 16, kSym, false, MODE>(prm, tiles, stream);
  if (bm == 32)
    return wg && env_pipe_wg32() ? launch_moe_typed<T, 32, kSym, true, MODE>(prm, tiles, stream)
                                 : launch_moe_typed<T, 32, kSym, false, MODE>(prm, tiles, stream);
  if (bm == 64)
    return wg ? launch_moe_typed<T, 64, kSym, true, MODE>(prm, tiles, stream)
              : launch_moe_typed<T, 64, kSym, false, MODE>(prm, tiles, stream);
  if (bm == 128 && wg) return launch_moe_typed<T, 128, kSym, true, MODE>(prm, tiles, stream);
  return cudaErrorInvalidValue;
}

}  // namespace
}  // namespace kern
}  // namespace lowbit::int4
