// The decode tile on the MMA-tiled layout: kernel, launch rules and measurement knobs,
// shared by the dense decode GEMM (gemm_decode.cu) and the MoE GEMMs on MMA-tiled expert
// stacks (moe_decode.cu); each file instantiates only the modes it launches. The design,
// numerics and measurements are described in gemm_decode.cu and docs/int4-kernels.md.
#pragma once

#include <cooperative_groups.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/common.cuh"
#include "kernels/int4/decode_plan.h"
#include "kernels/int4/internal.h"
#include "kernels/int4/moe_routing.cuh"
#include "kernels/int4/trace_ring.cuh"

namespace cg = cooperative_groups;

namespace lowbit::int4 {
namespace kern {
// detail::set_decode_push (tests): 0 as LOWBIT_INT4_DECODE_PUSH says, 1 push, 2 remote loads.
// Defined in gemm_decode.cu: one flag for every translation unit of this header.
extern std::atomic<int> g_decode_push_override;
namespace {


// Modes: kDecDense y[m, n] (act dtype); the MoE modes gather the 8 rows of an align block
// (or of one 8-row part of it) by sorted id, with the block's expert:
//   kDecMoeGateUp: w13 [E, 2I, H]; half of the warps stream gate column group c, half up
//                  group I/64 + c; inter[id, n] = act(silu(gate) * up) (as moe_gemm1.cu).
//   kDecMoeDown:   w2 [E, H, I]; slot_out[id, n] = topk_weight[id] * sum in fp32.
enum DecodeMode : int { kDecDense = 0, kDecMoeGateUp = 1, kDecMoeDown = 2 };

#ifdef LOWBIT_INT4_TRACE
// Timeline probes (a measurement build only: -DLOWBIT_INT4_TRACE=1; the default build has none
// of this). Each block writes one record of %globaltimer stamps at its end into a ring;
// moe_decode.cu's moe_trace_dump() and gemm_decode.cu's dense_trace_dump() copy their file's
// ring out (trace_ring.cuh; bench moe / bench gemm write it with LOWBIT_INT4_TRACE_OUT=prefix).
// Fields: mode, blockIdx.x/y/z, smid, then the stamps at entry, routed (ids known; dense: the
// weight pointer, which names the launch among the bench's rotated copies), after
// griddepcontrol.wait, warp 0's first batch landed, K loop done, end. docs/int4-kernels-sessions.md,
// "Session 15" and "Session 29", read timelines from them.
constexpr int kTraceRecords = 1 << 14;
__device__ unsigned long long g_trace[kTraceRecords][11];
__device__ unsigned int g_trace_next;
#define LOWBIT_TRACE_STAMP(var) var = trace_now()
// This file's ring (one per translation unit: the kernels of moe_decode.cu and gemm_decode.cu
// each write their own) as CSV into `path`; clears it.
inline void trace_dump_ring(const char* path, const char* who) {
  trace_dump_csv(path, who, g_trace, g_trace_next, "mode,bx,by,bz,smid,entry,routed,waited,first,loop,end");
}
#else
#define LOWBIT_TRACE_STAMP(var) (void)0
#endif

struct DecodeParams {
  const void* x = nullptr;         // dense [M, K]; gate/up: tokens [M, H]; down: inter [P, I]
  void* y = nullptr;               // dense [M, N] act; gate/up: inter [P, I] act; down: slot_out [P, H] f32
  const uint4* qw = nullptr;       // tiled words (dense: this expert's), 16 B per lane per K step
  const uint16_t* scales = nullptr;  // [NG, N] per expert
  const uint16_t* zeros = nullptr;   // [NG, N] per expert, or nullptr (symmetric: z = 8)
  int M = 0, N = 0, K = 0, G = 0;  // MoE: M = tokens, N = the weight's columns
  int splits = 1;                  // cluster size along grid.x
  // K steps (of kMmaTileK) per scale group: the fold windows divide it (per-channel: all of K).
  __host__ __device__ int group_steps() const { return (G < K ? G : K) / kMmaTileK; }
  // Dense 16-row tiles that read the 16-row-tile-major copy of x (DecodeCfg::XP; decode_x_steps.cu,
  // decode_plan.h decode_x_steps_index): 16-row tile mt's rows of K step s are 512
  // contiguous bytes, so one load instruction of a row tile reads 8 rows x 16 B within 256
  // bytes (2 cache lines) instead of 8 rows K * 2 B apart (8 lines). Set by launch_gemm_decode;
  // the other configurations read x.
  const void* x_steps = nullptr;
  // MoE modes
  const int32_t* sorted_ids = nullptr;
  const int32_t* expert_ids = nullptr;
  const int32_t* npp = nullptr;
  const float* topk_weights = nullptr;
  int topk = 1, BM = 8, parts = 1;  // parts: 8-row parts per align block (grid.y = blocks x parts)
  size_t qw_estride = 0;            // uint4 per expert
  size_t sc_estride = 0;            // scale elements per expert
  int half_groups = 0;              // gate/up: I / 64
  // The MoE single-token path (internal.h): gate/up routes the token when single.logits is
  // set; down adds the slots into single.y when that is set.
  detail::MoeSingleToken single;
  // MoE down with a short K (set by moe_decode.cu; 4-warp blocks, no split): warp w streams
  // column group blockIdx.z * NW + w over the whole K and stores its own outputs, instead of
  // the block's warps splitting one group's K (1-2 batches each) and reducing through shared
  // memory. Sums over K in one warp's order: not bit-identical to the split mode (both are
  // checked against fp64).
  int wide = 0;
  // kHalf tiles (decode_x_ahead): x fragments ahead of their MMAs; 0 loads each batch's at
  // its start (x_prefetch_rule; LOWBIT_INT4_DECODE_XPREFETCH=0 for measurements). kFull tiles
  // always load ahead.
  int x_prefetch = 1;
  // kFull tiles: batch 1's x fragments are requested at griddepcontrol.wait together with batch
  // 0's (batch 0 straight into xa, batch 1 into xn) instead of once batch 0's have arrived: one
  // L2 round trip after the wait instead of two where a warp has two batches (8B o at M = 1).
  // Set by x_early_rule (LOWBIT_INT4_DECODE_XEARLY=0 / 2: never / every kFull tile).
  int x_early = 0;
  // Where the block lets the next kernel launch (griddepcontrol.launch_dependents; dense by
  // launch()'s rule, MoE down by moe_down_pdl_trigger, MoE gate/up always 0): 0 at the start,
  // 1 once the warp's first weight batch has arrived, 2 after its K loop (measurements:
  // LOWBIT_INT4_DECODE_TRIGGER, LOWBIT_INT4_MOE_TRIGGER).
  int pdl_trigger = 0;
  // MoE down launched by fused_moe right after GEMM1 (launch_moe_decode's ids_early): the ids
  // are read, and the first weight batches requested, before waiting for GEMM1 (see the kernel).
  int ids_early = 0;
  // Single-token path, down (launch() sets it when it can): the topk blocks of a column group
  // form one cluster along y, keep their slot rows in shared memory, and rank 0 adds them in
  // slot order (moe_sum's expression) after a cluster barrier, instead of storing them and
  // counting on a global counter whose last block reads them back (the timeline of session 15:
  // ~4 us from GEMM2's last batch to its end at Qwen3 TP1 M = 1).
  int ysum = 0;
  // Split-K clusters of 2 (3 in the dense mode; not XS): ranks 1.. push their block sums into
  // rank 0's receive buffer (st.async, counted by an mbarrier there) instead of rank 0 loading
  // them (set by launch() unless LOWBIT_INT4_DECODE_PUSH=0 or detail::set_decode_push says
  // otherwise).
  int push = 0;
};

// Per-group constants of this lane's 8 columns (16j + g + 8h, j = 0..3, h = 0..1), kept as
// the raw 16-bit values, two columns per register (h = 0 low, h = 1 high): 8 registers per
// group instead of 16 fp32 (the kernel holds the current and the next group; registers
// decide how many blocks fit on an SM). Converted to fp32 at each window fold.
struct GroupParams {
  uint32_t s[4];
  uint32_t z[4];  // asymmetric only
};

// The MMA-tiled scale layout (mma_tiled_scale_col) stores them as 16 contiguous bytes at
// lane_col = 64 c + 8 g of the group's row: one vector load each, in register order (a
// column-order layout took eight 16-bit loads, merged in pairs right after they were issued,
// so the warp waited for them there).
template <bool kSym>
__device__ __forceinline__ void load_group(const uint16_t* scales, const uint16_t* zeros, int N, int grp, int lane_col,
                                           GroupParams& gp) {
  const size_t base = static_cast<size_t>(grp) * N + lane_col;
  const uint4 s = __ldg(reinterpret_cast<const uint4*>(scales + base));
  gp.s[0] = s.x, gp.s[1] = s.y, gp.s[2] = s.z, gp.s[3] = s.w;
  if constexpr (!kSym) {
    const uint4 z = __ldg(reinterpret_cast<const uint4*>(zeros + base));
    gp.z[0] = z.x, gp.z[1] = z.y, gp.z[2] = z.z, gp.z[3] = z.w;
  }
}

// Where accumulator element q of the lane (g = lane / 4, t = lane % 4) lies in MMA tile
// (j, nt): q & 1 picks the activation row (2t, 2t + 1 of 8-row tile nt), q >> 1 the column
// (g, g + 8 of the 16 columns j of the 64-column group).
__device__ __forceinline__ int frag_row(int nt, int t, int q) { return 8 * nt + 2 * t + (q & 1); }
__device__ __forceinline__ int frag_col(int j, int g, int q) { return 16 * j + g + 8 * (q >> 1); }
// f(j, nt, q) for every accumulator element of the lane (4 column tiles x NT row tiles x 4),
// unrolled: the window fold, the wide-mode stores and the reduction buffer walk them alike.
template <int NT, typename F>
__device__ __forceinline__ void for_each_acc(F&& f) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) f(j, nt, q);
}

// Steps [kLo, kHi) of a batch, as a compile-time argument of the tile's lambdas.
template <int kLo, int kHi>
struct Steps {
  static constexpr int lo = kLo, hi = kHi;
};

// Column h of a packed pair as fp32.
template <typename T>
__device__ __forceinline__ float pair_to_float(uint32_t v, int h) {
  return Act<T>::bits_to_float(static_cast<uint16_t>(h ? v >> 16 : v & 0xFFFFu));
}

// Block-shared x (DecodeCfg::XS): the block's 8 * NT activation rows of one batch (D K steps)
// form a chunk in shared memory, one row per xs_pitch() bytes (the batch's 32 B per step plus
// 16 B, so that the 8 rows an ldmatrix phase reads fall in 8 different 16 B bank groups);
// kXsSlots chunks in a ring, each with its mbarrier and a consumption counter.
constexpr int kXsSlots = 4;
template <int D>
constexpr int xs_pitch() {
  return D * kMmaTileK * 2 + 16;
}
template <int NT, int D>
constexpr int xs_chunk_bytes() {
  return 8 * NT * xs_pitch<D>();
}
// Dynamic shared memory: the warps' weight stages (S per warp, D K steps of 512 B each),
// their mbarriers, then each stage's group scales (+ zeros) when staged (kScBytes per stage,
// see the kernel), then (XS) the x chunks, their mbarriers and counters; the block's
// reduction buffer reuses the stages after the K loop.
template <int D, int S, int NW, int kScBytes>
constexpr int decode_stage_region_bytes() {
  return NW * S * (D * 512 + 8 + kScBytes);
}
template <int NT, int D, int S, int NW, int kScBytes, bool XS = false, bool XW = false>
constexpr int decode_smem_base_bytes() {
  constexpr int red = NW * 16 * NT * 32 * 4;
  constexpr int stages = decode_stage_region_bytes<D, S, NW, kScBytes>();
  constexpr int all = stages + (XS ? kXsSlots * (xs_chunk_bytes<NT, D>() + 8 + 4) : 0) +  // x after the stages
                      (XW ? NW * S * xs_chunk_bytes<NT, D>() : 0);
  return red > all ? red : all;
}
// Split-K push (DecodeParams::push): rank 0's receive buffer for the block sums of ranks 1..
// (one stream, two for gate/up; one slot per pushing rank) and its mbarrier, after everything
// else: the other ranks may push while rank 0 still streams its stages. Dense 8-row tiles
// take clusters of up to 3 in 4-warp blocks (two slots: the 4-warp block with asymmetric G =
// 128 scales still fits 4 per SM with them, not with three) and in the 16-warp blocks of
// LOWBIT_INT4_DECODE_WARPS=16 (kRows8W16; larger clusters there add by remote loads), up to 4 in
// 8-warp blocks (three slots, 6 KB: two blocks per SM still fit), the other tiles clusters of 2
// (a second slot would cost the 4-warp 16-row tiles their fourth block per SM).
template <int NT, int MODE, int NW>
constexpr int decode_push_peers() {
  if (MODE == kDecDense && NT == 1) return NW == 8 ? 3 : 2;
  return 1;
}
template <int NT, int MODE>
constexpr int decode_push_floats() {  // one rank's block sums: 16 * NT per lane per stream
  return 16 * NT * 32 * (MODE == kDecMoeGateUp ? 2 : 1);
}
template <int NT, int MODE, int NW>
constexpr int decode_push_bytes() {
  return decode_push_peers<NT, MODE, NW>() * decode_push_floats<NT, MODE>() * 4 + 16;
}
template <int NT, int D, int S, int NW, int kScBytes, bool XS, bool XW, int MODE>
constexpr int decode_smem_bytes() {
  return decode_smem_base_bytes<NT, D, S, NW, kScBytes, XS, XW>() + (XS ? 0 : decode_push_bytes<NT, MODE, NW>());
}
// Bytes of one group's scales (+ zeros) of a 64-column group in a weight stage: the kernels
// with windows of a whole batch (W == D) stage them with the batch's words.
template <typename Cfg, int W, bool kSym>
constexpr int decode_stage_scale_bytes() {
  return W == Cfg::D ? (kSym ? 1 : 2) * kMmaTileCols * 2 : 0;
}

// Weight stages: lane 0 of each warp moves a whole batch (D * 512 B, one contiguous run)
// with one bulk asynchronous copy (TMA unit) into the warp's stage and an mbarrier counts
// the bytes (mbar_* and bulk_copy: common.cuh); S - 1 batches stay in flight while one is
// computed, and they hold no registers.
// One K step's x fragments of both 8-row tiles from a block-shared chunk (DecodeCfg::XS, 16-row
// tiles): ldmatrix reads the four 8 x 8 tiles (rows 8 nt .. 8 nt + 7, K halves 0-7 / 8-15);
// tile 2 nt + h is xf[nt].x (h = 0) or .y (h = 1): row g, k = 2t, 2t + 1 of the half, the B
// fragment of m16n8k16. addr: this lane's tile row (xs_lane_offset) in the chunk, plus 32 B
// per K step.
__device__ __forceinline__ void ldsm_x(uint32_t addr, uint2 (&xf)[2]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(xf[0].x), "=r"(xf[0].y), "=r"(xf[1].x), "=r"(xf[1].y)
               : "r"(addr));
}
// The chunk offset of the tile row whose address lane `lane` gives ldmatrix: tile lane / 8,
// row lane % 8 of it.
template <int D>
__device__ __forceinline__ uint32_t xs_lane_offset(int lane) {
  const int tile = lane >> 3;
  return static_cast<uint32_t>((8 * (tile >> 1) + (lane & 7)) * xs_pitch<D>() + 16 * (tile & 1));
}

// W: K steps per scale window (2 / 4 for G = 32 / 64, else D; W divides D and the group),
// folded once per window at a compile-time position of the unrolled batch (a fold inlined
// behind a run-time test at every step made the loop body several times larger and slower).
// Cfg: NT (8-row activation tiles), D (K steps per batch), S (weight stages per warp), NW
// (warps per block), kMinBlocks (blocks per SM the registers must allow).
// XS: block-shared x (dense 16-row tiles, windows of a whole batch): the block's warps
// stream NW adjacent column groups over one K range (the split's) and read x from chunks of
// shared memory filled once for all of them (cp.async; see the kernel).
// XW: staged x (dense 16-row tiles, one block per SM, windows of a whole batch): each warp's
// stage also holds its batch's x rows (one bulk copy per row, on the stage's mbarrier), read
// by ldmatrix like XS's chunks, instead of 4 B loads from L2 per row tile and K half.
// XP: x from its 16-row-tile-major copy (DecodeParams::x_steps; dense 16-row tiles that read
// x from L2: the deep and lean tiles).
template <int NT_, int D_, int S_, int NW_, int kMinBlocks_, bool XS_ = false, bool XW_ = false, bool XP_ = false>
struct DecodeCfg {
  static constexpr int NT = NT_, D = D_, S = S_, NW = NW_, kMinBlocks = kMinBlocks_;
  static constexpr bool XS = XS_, XW = XW_, XP = XP_;
};

// How far ahead of their MMAs a configuration loads the x fragments (the loads are L2 hits
// whose latency otherwise stalls the warp once per batch):
// - kFull: a batch's fragments are loaded (into a second set of registers) while the batch
//   before it computes. It costs 2 * D * NT registers, so only where that does not spill
//   (ptxas): windows of a whole batch (G = 128 / per-channel), not the 4-warp 16-row deep
//   tiles (3 blocks per SM). Measured on/off in one run (session 8, bf16): M = 8 / 16 up to
//   11% faster (70b.down M = 16 60 vs 67 us, 70b.gate_up M = 8 77 vs 84), M = 1 from 3%
//   slower (8b.qkv 8.0 vs 7.8) to 3% faster (8b.gate_up 22.6 vs 23.2). Since session 19
//   always (not switchable by DecodeParams::x_prefetch): the kernels then have no second copy
//   of the batch loop that loads at the batch start, 5-7% less code, and ran 1-2% faster
//   (round IC, 1x H200, bf16 / fp16 / MoE, old and new binaries alternating: 0.96-1.01x the
//   time, 70b.qkv M = 1 16.8 vs 17.5 us, 70b.down M = 16 53.5 vs 54.8).
// - kHalf (the 4-warp 16-row deep tiles): the second half of a batch's fragments is loaded
//   when the batch starts and the first half of the next batch's once the first half has
//   been multiplied, each behind half a batch of MMAs, in the registers that loading the
//   whole batch at its start takes. Launched only in split-K clusters (x_prefetch_rule).
// - kNow: the whole batch at its start (windows shorter than a batch: G = 32 / 64).
enum class XAhead : int { kNow = 0, kFull = 1, kHalf = 2 };
template <typename Cfg, int W>
constexpr XAhead decode_x_ahead() {
  if (W != Cfg::D || Cfg::XS || Cfg::XW) return XAhead::kNow;  // XS / XW: x from shared memory, per step
  if (Cfg::NT == 2 && Cfg::D == 8 && Cfg::NW == 4 && Cfg::kMinBlocks > 1) return XAhead::kHalf;
  return XAhead::kFull;
}
// DecodeParams::x_prefetch for a launch: kHalf tiles measured on / off in one run (session 9,
// bf16, 1x H200): in clusters of 2 (70b.qkv M = 9..16, 8b.qkv M = 24 / 32) 3-7% faster
// (70b.qkv M = 16 26.9 vs 29.0 us); alone (70b.gate_up M = 9..32, 8b.gate_up M = 32) from 6%
// slower (70b.gate_up M = 9 119 vs 112 us) to 6% faster (M = 24 192 vs 204): off there.
// Measured again with the staged scales (session 9, round E; 70b.gate_up M = 9..32, 8b.gate_up
// M = 32): from 3% slower to 3% faster alone, still no rule to tell them apart.
template <typename Cfg, int W>
int x_prefetch_rule(int env_on, int splits) {
  if (decode_x_ahead<Cfg, W>() == XAhead::kHalf && splits == 1) return 0;
  return env_on;
}

// DecodeParams::x_early for a launch (env: env_x_early, 1 = this rule). Measured on / off
// alternated three times in one run (session 61, 1x H100, bf16 G = 128, branch exp/x-early,
// docs/benchmarks/logs/session61_raw): faster on the 8-row tiles and on 16-row deep tiles in
// split-K pairs (8b.o M = 1 / 8 6.4 / 7.1 vs 6.8 / 7.5 us, 8b.down M = 1 / 16 15.9 / 20.5 vs
// 16.2 / 21.1, 70b.o M = 1 16.6 vs 16.9, 8b.gate_up M = 8 27.5 vs 27.9, the MoE models at M = 1
// / 8 0.2-0.7 us), within 0.15 us elsewhere (8b.qkv M = 8 10.4 vs 10.3); slower on the 8-warp
// 16-row deep tile alone (70b.o M = 16, 8 batches per warp: 23.6 vs 22.8), which keeps off
// (since staged x took the plan's 8-warp deep tiles, that tile runs only where forced:
// LOWBIT_INT4_DECODE_XW=0, _WARPS, _SPLITS).
template <typename Cfg, int W>
int x_early_rule(int env, int splits) {
  if (decode_x_ahead<Cfg, W>() != XAhead::kFull || env == 0) return 0;
  if (env == 2) return 1;
  return Cfg::NT == 2 && splits == 1 ? 0 : 1;
}

template <typename T, typename Cfg, int W, bool kSym, int MODE>
__global__ void __launch_bounds__(32 * Cfg::NW, Cfg::kMinBlocks) gemm_decode_kernel(const DecodeParams p) {
  constexpr int NT = Cfg::NT, D = Cfg::D, S = Cfg::S, NW = Cfg::NW;
  constexpr bool kMoe = MODE != kDecDense, kGateUp = MODE == kDecMoeGateUp;
  constexpr bool kXS = Cfg::XS, kXW = Cfg::XW, kXP = Cfg::XP;
  static_assert(D % W == 0, "windows tile the batch");
  static_assert(!kXP || (MODE == kDecDense && NT == 2 && !kXS && !kXW), "the x copy: dense 16-row tiles reading x from L2");
  static_assert(!kXS || (MODE == kDecDense && W == D && NT == 2),
                "block-shared x: dense 16-row tiles, windows of a whole batch");
  static_assert(!kXW || (MODE == kDecDense && W == D && NT == 2 && !kXS),
                "staged x: dense 16-row tiles, windows of a whole batch");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, mtile = blockIdx.y, cblk = blockIdx.z;
  // Split-K push (DecodeParams::push): rank 0's receive buffer and its mbarrier.
  constexpr int kPushOff = decode_smem_base_bytes<NT, D, S, NW, decode_stage_scale_bytes<Cfg, W, kSym>(), kXS, kXW>();
  constexpr int kPushFloats = decode_push_floats<NT, MODE>();
  constexpr int kPushBar = kPushOff + decode_push_peers<NT, MODE, NW>() * kPushFloats * 4;  // its mbarrier
  static_assert(kPushOff % 16 == 0, "16 B stores into the receive buffer, its mbarrier 8 B aligned after it");
#ifdef LOWBIT_INT4_TRACE
  unsigned long long tr_entry = 0, tr_routed = 0, tr_waited = 0, tr_first = 0, tr_loop = 0;
  LOWBIT_TRACE_STAMP(tr_entry);
#endif
  const T* x = static_cast<const T*>(p.x);
  const uint4* qw = p.qw;
  const uint16_t* scales = p.scales;
  const uint16_t* zeros = p.zeros;
  // x rows of the B fragments (row g of 8-row tile nt); rows past M and MoE padding rows
  // read row 0 (their outputs are never stored).
  const uint32_t* xr[NT];
  __shared__ int s_id[8 * NT];  // MoE: the part's sorted ids (-1: padding)
  __shared__ float s_wt[32];    // single-token path, down: the routing weights of the block's token
  int single_token = 0, single_slot = 0;  // single-token path: the block's pick b = token * topk + slot
  if constexpr (kMoe) {
    const bool single = p.single.active();
    const int b = mtile / p.parts, r0 = (mtile % p.parts) * 8 * NT;
    const int P = p.M * p.topk;
    int npp, e, ids[NT];
    if (single) {
      // Single-token path (internal.h): M <= kMoeSingleMaxM, BM = 8, parts = 1, grid.y = M * topk.
      // Warp 0 picks the experts and weights of the block's token b / topk; block b takes pick
      // b (pair id b: the token's slot b % topk). Gate/up waits for
      // the kernel before it (which writes the logits) first. Down does not wait here: it is
      // GEMM1's programmatic dependent, and GEMM1's blocks let it launch only after their
      // own wait, so the logits are complete; its routing and first weight batches then run
      // during GEMM1's tail, and it waits for GEMM1 (inter) before loading activations.
      if constexpr (kGateUp) asm volatile("griddepcontrol.wait;\n" ::: "memory");
      __shared__ int s_pick[32];
      single_token = b / p.topk;
      if (warp == 0 && p.single.ids != nullptr) {  // caller routing: the token's picks as given
        if (lane < p.topk) {
          const size_t at = static_cast<size_t>(single_token) * p.topk + lane;
          const int id = __ldg(p.single.ids + at);
          const bool here = id >= 0 && id < p.single.experts;  // else expert 0 at weight 0
          s_pick[lane] = here ? id : 0;
          if (!kGateUp) s_wt[lane] = here ? __ldg(p.single.weights + at) : 0.f;
        }
      } else if (warp == 0) {  // E <= 256 on this path; the same picks and weights for either register set
        // The token's logits as row 0, so that its picks and weights land at [0, topk).
        const float* logits = p.single.logits + static_cast<size_t>(single_token) * p.single.experts;
        if (p.single.experts <= 128)  // topk_per_lane's bound of the 4-per-lane set (asserted there)
          topk_token_t<4>(logits, 0, p.single.experts, p.topk, p.single.renormalize, nullptr, kGateUp ? nullptr : s_wt,
                          s_pick, lane);
        else
          topk_token_t<8>(logits, 0, p.single.experts, p.topk, p.single.renormalize, nullptr, kGateUp ? nullptr : s_wt,
                          s_pick, lane);
      }
      __syncthreads();
      if (kGateUp && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)  // GEMM2 counts from zero
        for (int i = threadIdx.x; i < p.single.num_counters; i += blockDim.x) p.single.counters[i] = 0;
      npp = P * p.BM;
      single_slot = b - single_token * p.topk;
      e = s_pick[single_slot];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) ids[nt] = r0 + 8 * nt + g == 0 ? b : P;
    } else {
      // The align kernel before us wrote the ids: wait for it before reading them. The whole
      // cluster shares blockIdx.y, so it takes the same exit decisions. The three reads are
      // independent (one memory latency before the weights are requested, not three): block
      // b < the grid's align blocks <= max_padded / BM, so expert_ids[b] and sorted_ids[b *
      // BM + r] are in bounds (the align fills them past the end too).
      // ids_early (down only): GEMM1's blocks let us launch only after their own wait for the
      // routing, so the ids are complete already; the weight batches below then stream during
      // GEMM1's tail (as in the single-token path), and the main loop's wait comes before inter
      // is read.
      if (!(MODE == kDecMoeDown && p.ids_early != 0)) asm volatile("griddepcontrol.wait;\n" ::: "memory");
      npp = __ldg(p.npp);
      e = __ldg(p.expert_ids + b);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int r = r0 + 8 * nt + g;
        ids[nt] = r < p.BM ? __ldg(p.sorted_ids + static_cast<size_t>(b) * p.BM + r) : P;
      }
    }
    LOWBIT_TRACE_STAMP(tr_routed);
    if (b * p.BM >= npp || e < 0) return;
    bool any = false;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int id = ids[nt];
      const bool valid = id >= 0 && id < P;
      any = any || valid;
      if (threadIdx.x < 32 && t == 0) s_id[8 * nt + g] = valid ? id : -1;
      const int row = valid ? (kGateUp ? id / p.topk : id) : 0;
      xr[nt] = reinterpret_cast<const uint32_t*>(x + static_cast<size_t>(row) * p.K) + t;
    }
    if (!__syncthreads_or(any)) return;  // only padding rows in this part
    qw += static_cast<size_t>(e) * p.qw_estride;
    scales += static_cast<size_t>(e) * p.sc_estride;
    if (zeros != nullptr) zeros += static_cast<size_t>(e) * p.sc_estride;
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int m = mtile * 8 * NT + 8 * nt + g;
      if constexpr (kXP)  // this 16-row tile's rows, 8 words per row per K step (rows past M: zeros)
        xr[nt] = static_cast<const uint32_t*>(p.x_steps) + static_cast<size_t>(mtile) * p.K * 8 + (8 * nt + g) * 8 + t;
      else
        xr[nt] = reinterpret_cast<const uint32_t*>(x + static_cast<size_t>(m < p.M ? m : 0) * p.K) + t;
    }
  }
  // Gate/up: warps [0, NW/2) stream the gate group, [NW/2, NW) the up group.
  constexpr int kStreamWarps = kGateUp ? NW / 2 : NW;
  const int wi = warp % kStreamWarps;
  const bool wide = MODE == kDecMoeDown && p.wide != 0;  // DecodeParams::wide
  // Wide and XS: warp w streams column group blockIdx.z * NW + w; the last block's spare
  // warps idle (XS: they still count their x chunks consumed).
  const bool group_per_warp = wide || kXS;
  const int cgrp_w = group_per_warp ? cblk * NW + warp : kGateUp ? cblk + (warp / kStreamWarps) * p.half_groups : cblk;
  const bool cvalid = !group_per_warp || cgrp_w < p.N / kMmaTileCols;
  const int cgrp = kXS && !cvalid ? 0 : cgrp_w;  // XS spare warps: in-bounds addresses, never read
  const int steps = p.K / kMmaTileK;
  const int gsteps = p.group_steps();
  // This warp's K steps [s0, s1) in whole batches: the block's share of the split, cut in
  // NW pieces (wide: all of K). Batches (and so windows) are aligned: a window never crosses
  // a group.
  const int batches = (steps + D - 1) / D;
  const int bb0 = static_cast<int>(static_cast<long long>(split) * batches / p.splits);
  const int bb1 = static_cast<int>(static_cast<long long>(split + 1) * batches / p.splits);
  // XS: every warp the block's whole share.
  const int wb0 = wide  ? 0
                  : kXS ? bb0
                        : bb0 + static_cast<int>(static_cast<long long>(wi) * (bb1 - bb0) / kStreamWarps);
  const int wb1 = wide  ? (cvalid ? batches : 0)
                  : kXS ? bb1
                        : bb0 + static_cast<int>(static_cast<long long>(wi + 1) * (bb1 - bb0) / kStreamWarps);
  const int s0 = wb0 * D, s1 = min(wb1 * D, steps);
  const int lane_col = cgrp * kMmaTileCols + 8 * g;  // load_group
  const uint4* wp = qw + static_cast<size_t>(cgrp) * steps * 32 + lane;

  // acc: the current window's sums; tot: scaled sums so far; accx: the window's sum(x).
  // acc and accx are written by the window's first MMA (zero accumulator in), never cleared.
  // accx: 8-row tiles, the C fragment of (all-ones A) x (x as B): elements 0 / 1 are rows
  // 2t / 2t + 1 (every A row alike). 16-row tiles, one MMA for both row tiles with the roles
  // swapped, (x as A: rows g, g + 8, the B fragments' registers reordered) x (all-ones B):
  // elements 0 / 2 are rows g / g + 8, handed to the fold's layout by shuffles (sum_x): 8 of
  // a batch's 80 MMAs and 4 registers less than one MMA per row tile; as fast (0.98-1.01x,
  // session 20: the 16-row tiles are latency-bound, not tensor-bound; docs/int4-kernels-sessions.md).
  float acc[4][NT][4] = {}, tot[4][NT][4] = {}, accx[1][4] = {};
  static_assert(NT == 1 || NT == 2, "8- or 16-row tiles");

  // The MMAs take the weights as magic + q (one LOP3 per pair, exact) and one more MMA per
  // step sums x over the same K (accx): at each window end (<= 8 K steps,
  // inside one group) tot += s * (acc - (magic + z) * sum(x)) in fp32, i.e. s * sum (q - z) x.
  // The short window keeps the fp32 sums small: (magic + q) x is exact in fp32 and a window
  // sum loses about log2(magic / 8) bits to the cancellation (~2^-16 relative for fp16),
  // far below the output's rounding.
  // fp16 only: the nibbles of A rows g + 8 (registers 1 and 3) are masked in place, one
  // nibble up, as 1024 + 16 q (exact: fp16's ulp at 1024 is 1), which saves two of the three
  // shifts per word; their fold uses magic + 16 z and s / 16 (exact power-of-two scaling).
  // bf16 has 7 mantissa bits: no room for a nibble above bit 3, so it shifts every nibble.
  constexpr bool kHiX16 = !Act<T>::kBf16;
  constexpr float kMagicF = Act<T>::kMagicValue;
  const uint32_t ones = Act<T>::kBf16 ? 0x3F803F80u : 0x3C003C00u;  // 1.0 pairs
  const uint32_t ones_a[4] = {ones, ones, ones, ones};
  // Group scales (+ zeros). With windows of a whole batch (W == D: G = 128, or one group per
  // channel) every batch lies in one group, and its 64 columns' scale row (128 B) travels in
  // the batch's stage, copied with its words (kStagedScales): they arrive S - 1 batches
  // ahead like the words and take no registers. Loaded into registers a group ahead instead
  // (G = 32 / 64, several windows per batch), each a full memory latency that the next
  // group's first fold waited for at M = 1..16 (Nsight Compute, 70b.gate_up: 13-16% of the
  // stall samples on the first use of the registers, which also waited for the x loads
  // issued with them).
  constexpr bool kStagedScales = decode_stage_scale_bytes<Cfg, W, kSym>() > 0;
  const bool grouped = p.G < p.K;
  uint32_t sc_stage = 0;  // staged: this lane's 16 B (8 g) of the current stage's scale row
  GroupParams cur, nxt;
  int grp = s0 / gsteps;
  // Windows left in the current group (grouped weights: W divides the group's steps and the
  // warp's range starts at a batch, hence window, boundary); per-channel: one group.
  int wleft = grouped ? ((grp + 1) * gsteps - s0) / W : 0x7FFFFFFF;
  if (!kStagedScales && s0 < s1) {
    load_group<kSym>(scales, zeros, p.N, grp, lane_col, cur);
    if ((grp + 1) * gsteps < s1) load_group<kSym>(scales, zeros, p.N, grp + 1, lane_col, nxt);
  }
  auto group_params = [&]() -> GroupParams {
    if constexpr (kStagedScales) {
      GroupParams gs;
      const uint4 v = lds128(sc_stage);
      gs.s[0] = v.x, gs.s[1] = v.y, gs.s[2] = v.z, gs.s[3] = v.w;
      if constexpr (!kSym) {
        const uint4 z = lds128(sc_stage + kMmaTileCols * 2);
        gs.z[0] = z.x, gs.z[1] = z.y, gs.z[2] = z.z, gs.z[3] = z.w;
      }
      return gs;
    } else {
      return cur;
    }
  };
  // sum(x) of activation rows 8 nt + 2t + b (b = 0, 1) in the C-fragment layout.
  auto sum_x = [&](float(&sx)[NT][2]) {
    if constexpr (NT == 1) {
      sx[0][0] = accx[0][0], sx[0][1] = accx[0][1];
    } else {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int b = 0; b < 2; ++b) sx[nt][b] = __shfl_sync(0xFFFFFFFFu, accx[0][2 * nt], 4 * (2 * t + b));
    }
  };
  auto fold = [&](int st_end) {  // st_end: first step after the window
    const GroupParams gp = group_params();
    float sx[NT][2];
    sum_x(sx);
    for_each_acc<NT>([&](int j, int nt, int q) {
      // C fragment: element q is at activation row frag_row(nt, t, q), column frag_col(j, g, q).
      const int h = q >> 1;
      const float mul = kHiX16 && h ? 16.f : 1.f;
      const float zc = kMagicF + mul * (kSym ? 8.f : pair_to_float<T>(gp.z[j], h));
      const float sc = kHiX16 && h ? pair_to_float<T>(gp.s[j], h) * 0.0625f : pair_to_float<T>(gp.s[j], h);
      const float d = fmaf(-zc, sx[nt][q & 1], acc[j][nt][q]);
      tot[j][nt][q] = fmaf(d, sc, tot[j][nt][q]);
    });
    if (!kStagedScales && --wleft == 0 && st_end < s1) {  // group end: next group's constants
      ++grp;
      wleft = gsteps / W;
      cur = nxt;
      if ((grp + 1) * gsteps < s1) load_group<kSym>(scales, zeros, p.N, grp + 1, lane_col, nxt);
    }
  };

  // x fragments, loaded for every row and step of the batch without predicates: rows outside
  // M (or MoE padding) read row 0 and their outputs are never stored; in the tail batch,
  // steps past the range re-read the last one and the MMAs skip them. How far ahead of
  // their MMAs: XAhead (decode_x_ahead; kHalf with x_prefetch = 0 loads each batch's at its
  // start).
  constexpr XAhead kXAhead = decode_x_ahead<Cfg, W>();
  const XAhead xmode = kXAhead == XAhead::kFull || p.x_prefetch != 0 ? kXAhead : XAhead::kNow;
  constexpr XAhead kXFull = XAhead::kFull, kXHalf = XAhead::kHalf;
  // DecodeParams::x_early: batch 0's x straight into xa and batch 1's into xn at the wait.
  // (A lambda evaluated where used: a bool computed here compiled to other PTX, with the
  // parameter load moved ahead; as written the PTX of both TUs is unchanged.)
  auto x_early = [&] { return kXAhead == kXFull && xmode == kXFull && p.x_early != 0; };
  constexpr int kHalf = D / 2;
  // The lean 16-row tile (DecodeTiles::kRows16Lean: 8 warps held to 128 registers, two blocks
  // per SM) keeps fewer values live than the others: kStepWords, the batch's words are read
  // from the stage one K step at a time in the step instead of all at the batch start (4 * D
  // registers); kRollX, x rolls in one register set of R = D / 2 steps: the fragments of step
  // i + R are loaded into xa[i % R] right after step i's MMAs have read them (from this batch,
  // or from the next one: roll_base / roll_last are its first step and its last step in range
  // minus roll_base, roll_on that there is one), half a batch ahead of their use (~4 K steps
  // of every warp of the SM, longer than the loads' L2 latency) in D / 2 * NT registers
  // instead of two sets of D * NT and the copy between them. (Rolling a whole batch ahead in
  // the other kFull tiles measured 2-7% slower at M = 1 / 8 in bf16, round KA.)
  constexpr bool kStepWords = NT == 2 && 65536 / (32 * NW * Cfg::kMinBlocks) <= 128;
  constexpr bool kRollX = kStepWords && kXAhead == XAhead::kFull;
  constexpr int kXRing = kRollX ? D / 2 : D;
  uint4 wa[kStepWords ? 1 : D];
  uint32_t st_words = 0;  // kStepWords: this lane's 16 B of step 0 in the current stage
  uint2 xa[kXRing][NT], xn[kRollX ? 1 : D][NT];
  int roll_base = 0, roll_last = 0;
  bool roll_on = false;
  uint32_t xs_lane = 0;  // XS: this lane's ldmatrix address in the current batch's x chunk
  // Steps [steps.lo, steps.hi) of the batch starting at step sb (n_in of its steps inside the
  // range) into xs (xn or xa; a generic parameter: the array-reference type uint2 (&)[D][NT]
  // crashed nvcc 13.0's front end here).
  // Words between K steps: 8 in row-major x, 16 rows x 8 in the copy (DecodeCfg::XP).
  constexpr unsigned xstep = kXP ? 128u : 8u;
  auto load_x = [&](auto steps, auto& xs, int sb, int n_in, auto full_tag) {
    constexpr bool kFull = decltype(full_tag)::value;
#pragma unroll
    for (int i = decltype(steps)::lo; i < decltype(steps)::hi; ++i) {
      const unsigned off = xstep * static_cast<unsigned>(kFull ? sb + i : sb + min(i, n_in - 1));
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        xs[i][nt].x = __ldg(xr[nt] + off);
        xs[i][nt].y = __ldg(xr[nt] + off + 4u);
      }
    }
  };
  auto load_x_batch = [&](auto steps, auto& xs, int sb) {  // the batch starting at step sb (< s1)
    if (s1 - sb >= D)
      load_x(steps, xs, sb, s1 - sb, std::true_type{});
    else
      load_x(steps, xs, sb, s1 - sb, std::false_type{});
  };
  // Steps [steps.lo, steps.hi) of the batch; n_in: steps of this batch inside the range (>= 1).
  auto compute = [&](auto steps, int sb, int n_in, auto full_tag) {
    constexpr bool kFull = decltype(full_tag)::value;
#pragma unroll
    for (int i = decltype(steps)::lo; i < decltype(steps)::hi; ++i) {
      if (kFull || i < n_in) {
        const bool first = i % W == 0;  // window start: zero accumulators in
        const uint4 wv = kStepWords ? lds128(st_words + 512u * i) : wa[kStepWords ? 0 : i];
        const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
        uint2 xf[NT];
        if constexpr (kXS || kXW) {
          ldsm_x(xs_lane + 32u * i, xf);
        } else {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) xf[nt] = xa[i % kXRing][nt];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t a[4];
          if constexpr (kHiX16) {
            const uint32_t w8 = words[j] >> 8;
            a[0] = lop3_and_or(words[j], 0x000F000Fu, Act<T>::kMagic);
            a[1] = lop3_and_or(words[j], 0x00F000F0u, Act<T>::kMagic);
            a[2] = lop3_and_or(w8, 0x000F000Fu, Act<T>::kMagic);
            a[3] = lop3_and_or(w8, 0x00F000F0u, Act<T>::kMagic);
          } else {
#pragma unroll
            for (int r = 0; r < 4; ++r) a[r] = lop3_and_or(words[j] >> (4 * r), 0x000F000Fu, Act<T>::kMagic);
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            if (first)
              mma_m16n8k16_zc<T>(acc[j][nt], a, xf[nt].x, xf[nt].y);
            else
              mma_m16n8k16<T>(acc[j][nt], a, xf[nt].x, xf[nt].y);
          }
        }
        if constexpr (NT == 1) {
          if (first)
            mma_m16n8k16_zc<T>(accx[0], ones_a, xf[0].x, xf[0].y);
          else
            mma_m16n8k16<T>(accx[0], ones_a, xf[0].x, xf[0].y);
        } else {
          const uint32_t xrows[4] = {xf[0].x, xf[1].x, xf[0].y, xf[1].y};  // A: rows g, g + 8
          if (first)
            mma_m16n8k16_zc<T>(accx[0], xrows, ones, ones);
          else
            mma_m16n8k16<T>(accx[0], xrows, ones, ones);
        }
      }
      if constexpr (kRollX) {  // step i + R: of this batch, or the next's
        const int ia = i + kXRing;  // (a constant of the unrolled loop: one of the two loads)
        if (ia < D || roll_on) {
          const int st = ia < D ? sb + min(ia, n_in - 1) : roll_base + min(ia - D, roll_last);
          const unsigned off = xstep * static_cast<unsigned>(st);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            xa[i % kXRing][nt].x = __ldg(xr[nt] + off);
            xa[i % kXRing][nt].y = __ldg(xr[nt] + off + 4u);
          }
        }
      }
      // Window end (a window with at least one step in range; the tail window may be short).
      if ((i + 1) % W == 0 && (kFull || i + 1 - W < n_in)) fold(sb + i + 1);
    }
  };
  // Programmatic dependent launch (when the launch allows it): the weights and scales do not
  // depend on the kernel before us, so the first batch of them is requested before waiting
  // for that kernel's completion (x and y do); and the next kernel may start its own weight
  // prefetch on the SMs our blocks leave free. Without the launch attribute both are no-ops.
  extern __shared__ __align__(128) unsigned char smem[];
  {
    const uint32_t stage0 = smem_addr(smem) + static_cast<uint32_t>(warp * S * D * 512);
    const uint32_t bar0 = smem_addr(smem) + static_cast<uint32_t>(NW * S * D * 512 + warp * S * 8);
    constexpr int kScBytes = decode_stage_scale_bytes<Cfg, W, kSym>();
    const uint32_t sc0 = smem_addr(smem) + static_cast<uint32_t>(NW * S * (D * 512 + 8) + warp * S * kScBytes);
    const char* wsrc = reinterpret_cast<const char*>(wp - lane);  // this column group's words
    const int nb = (s1 - s0 + D - 1) / D;                          // batches of this warp
    // Block-shared x (XS): chunk b % kXsSlots holds batch b's rows [row0, row0 + xrows) of x.
    // Warp 0 fills the first kXsSlots chunks after griddepcontrol.wait; each warp counts a
    // chunk consumed after its batch b, and the warp whose count completes the block's NW
    // refills it with batch b + kXsSlots (the counters only grow: generation b / kXsSlots
    // expects NW * (b / kXsSlots + 1)). Rows past M are never copied (stale rows: their outputs
    // are not stored). The refills are cp.async by the warp's 32 lanes rather than one bulk
    // copy per row: measured faster on all eight Llama-3 shapes at M = 16 (session 10, round D:
    // 8b.down 26.6 vs 30.3 us, 70b.gate_up 134.5 vs 144.2), the per-row bulk copies queueing
    // behind the weight batches' and issued one lane at a time.
    constexpr int kXsOff = decode_stage_region_bytes<D, S, NW, kScBytes>();
    constexpr int kXsChunk = xs_chunk_bytes<NT, D>();
    const uint32_t xs0 = smem_addr(smem) + static_cast<uint32_t>(kXsOff);
    const uint32_t xbar0 = xs0 + static_cast<uint32_t>(kXsSlots * kXsChunk);
    int* const xcnt = reinterpret_cast<int*>(smem + kXsOff + kXsSlots * (kXsChunk + 8));
    const int row0 = mtile * 8 * NT, xrows = min(8 * NT, p.M - row0);
    // Staged x (XW): stage st of this warp has an x chunk (xs_chunk_bytes, XS's row pitch)
    // after all the stages; lane r < xrows copies row row0 + r of the batch with one bulk copy
    // on the stage's mbarrier (lane 0's expect_tx counts them). x depends on the previous
    // kernel: the first S batches' rows are copied after griddepcontrol.wait (the weights
    // before). Rows past M are never copied (stale rows: their outputs are not stored).
    constexpr int kXwChunk = xs_chunk_bytes<NT, D>();
    const uint32_t xw0 = smem_addr(smem) + static_cast<uint32_t>(kXsOff + warp * S * kXwChunk);
    auto issue_xw = [&](int b, int stage) {  // the whole warp, after lane 0's expect_tx
      if (b >= nb || lane >= xrows) return;
      const int sb = s0 + b * D, n = min(D, s1 - sb);
      bulk_copy(xw0 + static_cast<uint32_t>(stage * kXwChunk + lane * xs_pitch<D>()),
                x + static_cast<size_t>(row0 + lane) * p.K + static_cast<size_t>(sb) * kMmaTileK,
                static_cast<uint32_t>(n * kMmaTileK * 2), bar0 + 8 * stage);
    };
    if (lane == 0)
      for (int st = 0; st < S; ++st) mbar_init(bar0 + 8 * st);
    if (kXS && threadIdx.x == 0)
      for (int i = 0; i < kXsSlots; ++i) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;\n" ::"r"(xbar0 + 8 * i) : "memory");
        xcnt[i] = 0;
      }
    if constexpr (!kXS) {  // expects the other ranks' bytes before they come
      const bool receiver = p.push != 0 && split == 0 && threadIdx.x == 0;
      const uint32_t rbar = smem_addr(smem) + static_cast<uint32_t>(kPushBar);
      if (receiver) mbar_init(rbar);
      // (the initialization is a warp-wide store on the uniform datapath: racecheck counts it
      // against the arrival below unless the warp synchronizes between them)
      __syncwarp();
      if (receiver) mbar_arrive_expect_tx(rbar, static_cast<uint32_t>((p.splits - 1) * kPushFloats * 4));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    // Push: ranks 1.. wait for this arrival (after the receive barrier's initialization)
    // before they push; the phase completes long before that, during the K loop.
    if (!kXS && p.push != 0) asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    if (kXS)
      __syncthreads();  // the x chunks' barriers are the block's
    else
      __syncwarp();
    auto issue_x = [&](int b) {  // batch b's x rows into its chunk (the whole calling warp)
      if (b >= nb) return;
      const int sb = s0 + b * D, n = min(D, s1 - sb), slot = b % kXsSlots;
      const uint32_t chunk = xs0 + static_cast<uint32_t>(slot * kXsChunk);
      const T* src = x + static_cast<size_t>(row0) * p.K + static_cast<size_t>(sb) * kMmaTileK;
      // 16 B pieces: 2 per K step of a row, lane-strided over (row, piece); each lane's
      // arrival on the chunk's barrier (32 per phase) comes once its own copies have landed.
      for (int q = lane; q < xrows * 2 * D; q += 32) {
        const int r = q / (2 * D), c = q % (2 * D);
        if (c < 2 * n)
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(chunk + static_cast<uint32_t>(
                                                                              r * xs_pitch<D>() + 16 * c)),
                       "l"(src + static_cast<size_t>(r) * p.K + 8 * c)
                       : "memory");
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(xbar0 + 8u * static_cast<uint32_t>(slot))
                   : "memory");
    };
    auto issue = [&](int b, int stage, bool with_x) {  // batch b into stage `stage` (lane 0; XW: x rows too)
      bool active = lane == 0 && b < nb;  // (wide spare warps have no batches)
      if constexpr (kXS) active = active && cvalid;  // (not named otherwise: a capture costs registers)
      if (active) {
        const int sb = s0 + b * D, n = min(D, s1 - sb);
        const uint32_t bar = bar0 + 8 * stage;
        mbar_arrive_expect_tx(bar, static_cast<uint32_t>(n * 512 + kScBytes + (kXW ? xrows * n * kMmaTileK * 2 : 0)));
        bulk_copy(stage0 + static_cast<uint32_t>(stage * D * 512), wsrc + static_cast<size_t>(sb) * 512,
                  static_cast<uint32_t>(n * 512), bar);
        if constexpr (kStagedScales) {  // the batch's group row of this column group (16 B aligned: gemm.cu)
          const size_t row = static_cast<size_t>(sb / gsteps) * p.N + cgrp * kMmaTileCols;  // per-channel: row 0
          const uint32_t dst = sc0 + static_cast<uint32_t>(stage * kScBytes);
          bulk_copy(dst, scales + row, kMmaTileCols * 2, bar);
          if constexpr (!kSym) bulk_copy(dst + kMmaTileCols * 2, zeros + row, kMmaTileCols * 2, bar);
        }
      }
      if constexpr (kXW) {
        if (with_x) {
          __syncwarp();  // the bytes announced before their copies
          issue_xw(b, stage);
        }
      }
    };
    // DecodeParams::pdl_trigger; MoE GEMM1 always here, at the start (moe_down_pdl_trigger in
    // moe_decode.cu says why; the single-token path's GEMM2 relies on GEMM1 triggering after its
    // own wait, which this is).
    const int trig = kGateUp ? 0 : p.pdl_trigger;
    if (trig == 0) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
    for (int b = 0; b < S; ++b) issue(b, b, false);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    LOWBIT_TRACE_STAMP(tr_waited);
    if constexpr (kXW) {
      __syncwarp();  // lane 0's expect_tx of the first stages before their x copies
#pragma unroll
      for (int b = 0; b < S; ++b) issue_xw(b, b);
    }
    if (kXS && warp == 0)
      for (int b = 0; b < kXsSlots; ++b) issue_x(b);
    if (nb > 0) {
      if constexpr (kRollX)
        load_x_batch(Steps<0, kXRing>{}, xa, s0);  // the first R steps; then rolled
      else if (x_early()) {
        load_x_batch(Steps<0, D>{}, xa, s0);  // batch 0 into xa,
        if (nb > 1) load_x_batch(Steps<0, D>{}, xn, s0 + D);  // batch 1 at once
      } else if (kXAhead == kXFull && xmode == kXFull)
        load_x_batch(Steps<0, D>{}, xn, s0);
      if (kXAhead == kXHalf && xmode == kXHalf) load_x_batch(Steps<0, kHalf>{}, xa, s0);
    }
    int stage = 0;
    uint32_t phase = 0;
    for (int b = 0; b < nb; ++b) {
      const int sb = s0 + b * D, n_in = s1 - sb;
      const uint32_t st = stage0 + static_cast<uint32_t>(stage * D * 512) + 16u * lane;
      sc_stage = sc0 + static_cast<uint32_t>(stage * kScBytes) + 16u * g;
      auto read_stage = [&] {  // the stage's words once its copies have landed
        mbar_wait(bar0 + 8 * stage, phase);
        if (b == 0) LOWBIT_TRACE_STAMP(tr_first);
        if (trig == 1 && b == 0) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < D; ++i)  // tail: stale stage words, skipped
          if constexpr (!kStepWords) wa[i] = lds128(st + 512u * i);
        st_words = st;
      };
      auto consume = [&](auto full_tag) {  // full batch: no per-step range tests
        if constexpr (kXW) {
          xs_lane = xw0 + static_cast<uint32_t>(stage * kXwChunk) + xs_lane_offset<D>(lane);
          read_stage();
          compute(Steps<0, D>{}, sb, n_in, full_tag);
          return;
        }
        if constexpr (kXS) {
          const int slot = b % kXsSlots;
          xs_lane = xs0 + static_cast<uint32_t>(slot * kXsChunk) + xs_lane_offset<D>(lane);
          if (cvalid) read_stage();
          mbar_wait(xbar0 + 8 * slot, static_cast<uint32_t>(b / kXsSlots) & 1u);
          if (cvalid) compute(Steps<0, D>{}, sb, n_in, full_tag);
          return;
        }
        if (kXAhead == kXHalf && xmode == kXHalf) {
          load_x(Steps<kHalf, D>{}, xa, sb, n_in, full_tag);  // this batch's second half
          read_stage();
          compute(Steps<0, kHalf>{}, sb, n_in, full_tag);
          if (b + 1 < nb) load_x_batch(Steps<0, kHalf>{}, xa, sb + D);  // the next batch's first half
          compute(Steps<kHalf, D>{}, sb, n_in, full_tag);
          return;
        }
        if constexpr (kRollX) {  // xa holds this batch's first R steps; compute() rolls in the rest
          roll_on = b + 1 < nb;
          roll_base = sb + D;
          roll_last = min(D, s1 - roll_base) - 1;
        } else if (!(x_early() && b == 0)) {  // (x_early: batch 0 already in xa)
          if (xmode == XAhead::kNow) load_x(Steps<0, D>{}, xn, sb, n_in, full_tag);  // this batch's, now
#pragma unroll
          for (int i = 0; i < D; ++i)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) xa[i][nt] = xn[i][nt];
          if (kXAhead == kXFull && xmode == kXFull && b + 1 < nb)
            load_x_batch(Steps<0, D>{}, xn, sb + D);  // the next batch's, hidden by this one's MMAs
        }
        read_stage();
        compute(Steps<0, D>{}, sb, n_in, full_tag);
      };
      if (n_in >= D)
        consume(std::true_type{});
      else
        consume(std::false_type{});
      __syncwarp();  // every lane has consumed the stage before it is refilled
      if constexpr (kXS) {  // count x chunk b consumed; the block's last warp refills it
        int last = 0;
        if (lane == 0) {
          __threadfence_block();  // the warp's reads of the chunk before its count
          last = atomicAdd(xcnt + b % kXsSlots, 1) == NW * (b / kXsSlots + 1) - 1;
          __threadfence_block();  // every warp's count (and so its reads) before the refill
        }
        if (__shfl_sync(0xFFFFFFFFu, last, 0)) issue_x(b + kXsSlots);
      }
      issue(b + S, stage, true);
      if (++stage == S) {
        stage = 0;
        phase ^= 1u;
      }
    }
    if ((trig == 1 && (nb == 0 || (kXS && !cvalid))) || trig == 2)
      asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    __syncthreads();  // the reduction below reuses the stages of all warps
    LOWBIT_TRACE_STAMP(tr_loop);
  }

  // Single-token path: the last of the token's topk blocks of this grid.z index (every one
  // stored its slot row for columns [n0, n0 + ncols); cluster rank 0 only) adds the token's slot
  // rows in slot order, as moe_sum does.
  // Down: the routing weight of slot row id (the single-token path computed its token's in s_wt;
  // its block holds one row, its own pick).
  auto slot_weight = [&](int id) { return p.single.active() ? s_wt[single_slot] : p.topk_weights[id]; };
  // ysum: the block's slot rows (its columns of row 0), after the reduction buffer.
  float* const s_slot = reinterpret_cast<float*>(smem) + NW * 16 * NT * 32;
  auto single_token_sum = [&](int n0, int ncols) {
    if constexpr (MODE == kDecMoeDown) {
      if (p.single.y == nullptr) return;
      if (p.ysum != 0) {
        cg::cluster_group cl = cg::this_cluster();
        cl.sync();  // every rank's slot row in its shared memory
        if (cl.block_rank() == 0) {
          const float* src[kClusterMaxSplits];
#pragma unroll
          for (int r = 0; r < kClusterMaxSplits; ++r) src[r] = r < p.topk ? cl.map_shared_rank(s_slot, r) : s_slot;
          for (int c = threadIdx.x; c < ncols; c += 32 * NW) {
            float v[kClusterMaxSplits];
#pragma unroll
            for (int r = 0; r < kClusterMaxSplits; ++r) v[r] = r < p.topk ? src[r][c] : 0.f;
            float s = 0.f;
#pragma unroll
            for (int r = 0; r < kClusterMaxSplits; ++r)
              if (r < p.topk) s += v[r];
            static_cast<T*>(p.single.y)[static_cast<size_t>(single_token) * p.N + n0 + c] = Act<T>::from_float(s);
          }
        }
        cl.sync();  // no rank exits before rank 0 has read its row
        return;
      }
      __shared__ int s_last;
      __threadfence();  // this thread's slot stores before the block's arrival
      __syncthreads();
      // One counter per token and 64 columns of H (GEMM2's N).
      int* const counter = p.single.counters + single_token * (p.N / kMmaTileCols) + cblk;
      if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == p.topk - 1;
      __syncthreads();
      if (s_last) {
        __threadfence();
        const float* slot = static_cast<const float*>(p.y) + static_cast<size_t>(single_token) * p.topk * p.N;
        for (int c = threadIdx.x; c < ncols; c += 32 * NW) {
          const int n = n0 + c;
          float s = 0.f;
          for (int t = 0; t < p.topk; ++t) s += __ldcg(slot + static_cast<size_t>(t) * p.N + n);
          static_cast<T*>(p.single.y)[static_cast<size_t>(single_token) * p.N + n] = Act<T>::from_float(s);
        }
      }
    }
  };
#ifdef LOWBIT_INT4_TRACE
  auto trace_record = [&] {
    if (threadIdx.x == 0) {
      const unsigned long long tr_end = trace_now();  // before the ring's atomic (session 16: it
                                                      // took ~1 us under load, inside the end stamp)
      unsigned long long* r = g_trace[atomicAdd(&g_trace_next, 1u) % kTraceRecords];
      r[0] = MODE, r[1] = blockIdx.x, r[2] = blockIdx.y, r[3] = blockIdx.z, r[4] = trace_smid();
      r[5] = tr_entry, r[6] = kMoe ? tr_routed : reinterpret_cast<unsigned long long>(p.qw);
      r[7] = tr_waited, r[8] = tr_first, r[9] = tr_loop, r[10] = tr_end;
    }
  };
#define LOWBIT_TRACE_RECORD() trace_record()
#else
#define LOWBIT_TRACE_RECORD() (void)0
#endif
  if constexpr (MODE == kDecMoeDown) {
    if (wide) {  // each warp's sums are final: store them (no split, so no cluster)
      if (cvalid) {
        for_each_acc<NT>([&](int j, int nt, int q) {
          const int id = s_id[frag_row(nt, t, q)];
          if (id < 0) return;
          const int n = cgrp * kMmaTileCols + frag_col(j, g, q);
          if (p.ysum != 0)
            s_slot[warp * kMmaTileCols + frag_col(j, g, q)] = slot_weight(id) * tot[j][nt][q];
          else
            static_cast<float*>(p.y)[static_cast<size_t>(id) * p.N + n] = slot_weight(id) * tot[j][nt][q];
        });
      }
      const int n0 = cblk * NW * kMmaTileCols;
      single_token_sum(n0, min(NW * kMmaTileCols, p.N - n0));
      LOWBIT_TRACE_RECORD();
      return;
    }
  }

  // XS alone: each warp's sums are its column group's, final.
  auto store_dense = [&](int m, int n, float v) {
    if (m < p.M) static_cast<T*>(p.y)[static_cast<size_t>(m) * p.N + n] = Act<T>::from_float(v);
  };
  if constexpr (kXS) {
    if (p.splits == 1) {
      if (cvalid)
        for_each_acc<NT>([&](int j, int nt, int q) {
          store_dense(mtile * 8 * NT + frag_row(nt, t, q), cgrp * kMmaTileCols + frag_col(j, g, q), tot[j][nt][q]);
        });
      return;
    }
  }

  // Warps -> block sum in warp order, then cluster ranks -> rank 0 in rank order (XS: each
  // warp's group added over the ranks).
  constexpr int kElems = 16 * NT;  // per lane
  static_assert((NW * kElems * 32 + NW * kMmaTileCols) * 4 <=
                    decode_stage_region_bytes<D, S, NW, decode_stage_scale_bytes<Cfg, W, kSym>()>(),
                "reduction buffer and slot rows (ysum) size");
  auto& red = *reinterpret_cast<float(*)[NW][kElems][32]>(smem);
  for_each_acc<NT>([&](int j, int nt, int q) { red[warp][(j * NT + nt) * 4 + q][lane] = tot[j][nt][q]; });
  __syncthreads();
  float* flat = &red[0][0][0];
  constexpr int kOut = kElems * 32;  // outputs per block (per stream)
  // Element e of a stream's block sums: lane l = e % 32 of the flat red layout, accumulator
  // element q of tile (j, nt); its activation row within the block's rows and its column in
  // the 64-column group.
  auto out_pos = [&](int e, int& mloc, int& ncol) {
    const int l = e % 32, idx = e / 32;
    const int q = idx % 4, nt = (idx / 4) % NT, j = idx / (4 * NT);
    mloc = frag_row(nt, l & 3, q);
    ncol = frag_col(j, l >> 2, q);
  };
  if constexpr (kXS) {
    // splits > 1: rank r adds slice r of the block's NW * kOut sums over the ranks, in rank
    // order, each thread's remote loads for an element issued together. (Rank 0 adding all
    // of them, one remote load at a time, left the other ranks waiting at the cluster
    // barrier for most of the kernel: Nsight Compute, 8b.o M = 16 in clusters of 8.)
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    const float* src[kClusterMaxSplits];
#pragma unroll
    for (int r = 0; r < kClusterMaxSplits; ++r) src[r] = r < p.splits ? cl.map_shared_rank(flat, r) : flat;
    constexpr int kAll = NW * kOut;
    const int per = (kAll + p.splits - 1) / p.splits;
    const int e0 = static_cast<int>(cl.block_rank()) * per, e1 = min(kAll, e0 + per);
    for (int e = e0 + static_cast<int>(threadIdx.x); e < e1; e += 32 * NW) {
      float v[kClusterMaxSplits];
#pragma unroll
      for (int r = 0; r < kClusterMaxSplits; ++r) v[r] = r < p.splits ? src[r][e] : 0.f;
      float sum = v[0];
#pragma unroll
      for (int r = 1; r < kClusterMaxSplits; ++r)
        if (r < p.splits) sum += v[r];
      const int grp = cblk * NW + e / kOut;
      int mloc, ncol;
      out_pos(e % kOut, mloc, ncol);
      if (grp < p.N / kMmaTileCols) store_dense(mtile * 8 * NT + mloc, grp * kMmaTileCols + ncol, sum);
    }
    cl.sync();  // no rank exits while another reads its sums
  } else {
    for (int e = threadIdx.x; e < kOut; e += 32 * NW) {
      // Stream sums in warp order; gate/up: the gate sum to red[0], the up sum to red[1] (each
      // element is read and written by one thread only).
      float v0 = flat[e], v1 = kGateUp ? flat[kStreamWarps * kOut + e] : 0.f;
#pragma unroll
      for (int w = 1; w < kStreamWarps; ++w) {
        v0 += flat[w * kOut + e];
        if constexpr (kGateUp) v1 += flat[(kStreamWarps + w) * kOut + e];
      }
      flat[e] = v0;
      if constexpr (kGateUp) flat[kOut + e] = v1;
    }
    cg::cluster_group cluster = cg::this_cluster();
    const float* recv = reinterpret_cast<const float*>(smem + kPushOff);
    if (p.push != 0) {
      // Ranks 1.. send their block sums into their slots of rank 0's receive buffer (one-way
      // stores that count their bytes on rank 0's barrier) and rank 0 adds them, in rank
      // order, once all have landed: no remote loads and one cluster barrier less on rank 0's
      // path than below. All wait at the end so that no rank exits before its stores landed.
      asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // rank 0's barrier initialized
      __syncthreads();  // the block sums above
      const uint32_t rbuf = smem_addr(smem) + static_cast<uint32_t>(kPushOff);
      const uint32_t rbar_local = smem_addr(smem) + static_cast<uint32_t>(kPushBar);
      if (split != 0) {
        const uint32_t slot = rbuf + static_cast<uint32_t>((split - 1) * kPushFloats * 4);
        uint32_t rdst, rbar;
        asm volatile("mapa.shared::cluster.u32 %0, %1, 0;\n" : "=r"(rdst) : "r"(slot));
        asm volatile("mapa.shared::cluster.u32 %0, %1, 0;\n" : "=r"(rbar) : "r"(rbar_local));
        const uint4* src = reinterpret_cast<const uint4*>(flat);
        for (int i = threadIdx.x; i < kPushFloats / 4; i += 32 * NW) {
          const uint4 v = src[i];
          asm volatile(
              "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                  rdst + 16u * static_cast<uint32_t>(i)),
              "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(rbar)
              : "memory");
        }
        asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
        asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");  // rank 0 has all our bytes
        LOWBIT_TRACE_RECORD();
        return;
      }
      mbar_wait(rbar_local, 0);
      asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");  // the others may exit
    } else if (p.splits > 1) {
      cluster.sync();
      if (cluster.block_rank() != 0) {
        cluster.sync();  // rank 0 reads our sums before we exit
        LOWBIT_TRACE_RECORD();
        return;
      }
    } else {
      __syncthreads();
    }
    for (int e = threadIdx.x; e < kOut; e += 32 * NW) {
      float v = flat[e], u = kGateUp ? flat[kOut + e] : 0.f;
      // The other ranks' sums in rank order, pushed into our slots or read from their blocks:
      // the same additions either way (bit-identical, Int4GemmDecodePush).
      for (int r = 1; r < p.splits; ++r) {
        const float* rf = p.push != 0 ? recv + (r - 1) * kPushFloats : cluster.map_shared_rank(flat, r);
        v += rf[e];
        if constexpr (kGateUp) u += rf[kOut + e];
      }
      int mloc, ncol;  // activation row within the block's rows, column within the group
      out_pos(e, mloc, ncol);
      const int n = cblk * kMmaTileCols + ncol;
      if constexpr (MODE == kDecDense) {
        store_dense(mtile * 8 * NT + mloc, n, v);
      } else {
        const int id = s_id[mloc];
        if (id < 0) continue;
        if constexpr (kGateUp) {
          const int I = p.half_groups * kMmaTileCols;
          static_cast<T*>(p.y)[static_cast<size_t>(id) * I + n] = Act<T>::from_float(v / (1.f + expf(-v)) * u);
        } else {
          if (p.ysum != 0)
            s_slot[ncol] = slot_weight(id) * v;
          else
            static_cast<float*>(p.y)[static_cast<size_t>(id) * p.N + n] = slot_weight(id) * v;
        }
      }
    }
    single_token_sum(cblk * kMmaTileCols, kMmaTileCols);
    if (p.push != 0)
      asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
    else if (p.splits > 1)
      cluster.sync();
    LOWBIT_TRACE_RECORD();
  }
}

// LOWBIT_INT4_DECODE_SPLITS=n / LOWBIT_INT4_DECODE_WARPS=4|8|16 (read once; measurements):
// the split-K cluster size (clipped to 1..8 and to what the device can schedule) and the
// block's warps instead of decode_shape()'s choice. 16 (session 69, not yet measured) runs
// dense 8-row tiles in 16-warp blocks, one per SM (kRows8W16 in launch_t); other tiles and the
// MoE modes take 8 then.
int env_splits() {
  static const int v = [] {
    const char* e = std::getenv("LOWBIT_INT4_DECODE_SPLITS");
    const int n = e ? std::atoi(e) : 0;
    return n >= 1 && n <= kClusterMaxSplits ? n : 0;
  }();
  return v;
}
// LOWBIT_INT4_DECODE_PUSH=0 (read once; measurements and tests): split-K clusters add the
// other ranks' sums by rank 0's remote loads instead of their pushes (DecodeParams::push).
bool env_push() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_DECODE_PUSH");
  const int o = g_decode_push_override.load(std::memory_order_relaxed);
  return o == 0 ? v : o == 1;
}
int env_warps() {
  static const int v = [] {
    const char* e = std::getenv("LOWBIT_INT4_DECODE_WARPS");
    const int n = e ? std::atoi(e) : 0;
    return n == 4 || n == 8 || n == 16 ? n : 0;
  }();
  return v;
}

// LOWBIT_INT4_DECODE_XSHARED=0 / 2 (read once; measurements and tests): block-shared x
// tiles never / wherever they can run, instead of where measured faster (dense_decode_plan's
// xshared).
int env_x_shared() {
  static const int v = env_012("LOWBIT_INT4_DECODE_XSHARED");
  return v;
}

// LOWBIT_INT4_DECODE_TRIGGER=0 / 1 / 2 (read once; measurements): the dense kernel lets the
// next launch start at its own start / once its warps' first batches landed / after their K
// loops, instead of by the rule in launch(); -1 when unset.
int env_pdl_trigger() {
  static const int v = [] {
    const char* e = std::getenv("LOWBIT_INT4_DECODE_TRIGGER");
    return e != nullptr && e[0] >= '0' && e[0] <= '2' && e[1] == 0 ? e[0] - '0' : -1;
  }();
  return v;
}

// LOWBIT_INT4_DECODE_XEARLY=0 / 2 (read once; measurements and tests): DecodeParams::x_early
// never / on every kFull tile, instead of by x_early_rule.
int env_x_early() {
  static const int v = env_012("LOWBIT_INT4_DECODE_XEARLY");
  return v;
}

// LOWBIT_INT4_DECODE_XPREFETCH=0 (read once; measurements): DecodeParams::x_prefetch off (the
// kHalf tiles' half-batch prefetch; kFull tiles always load a batch ahead).
int env_x_prefetch() {
  static const int v = env_on_unless_zero("LOWBIT_INT4_DECODE_XPREFETCH") ? 1 : 0;
  return v;
}

// LOWBIT_INT4_DECODE_LEAN=0 / 2 (read once; measurements and tests): the plan's lean 16-row
// tiles run as 8-warp deep tiles (0), or every 8-warp deep tile runs lean (2).
int env_lean() {
  static const int v = env_012("LOWBIT_INT4_DECODE_LEAN");
  return v;
}

// LOWBIT_INT4_DECODE_XW=0 / 2 (read once; measurements and tests): the plan's staged-x 16-row
// tiles (DecodeCfg::XW) load x from L2 as the deep tile does (0), or every 8-warp deep tile
// stages its x (2).
int env_staged_x() {
  static const int v = env_012("LOWBIT_INT4_DECODE_XW");
  return v;
}

// The largest M on 16-row tiles for dense_decode_plan() (read once; measurements):
// LOWBIT_INT4_DECODE_ROWS16=0 gives 8 (none), else LOWBIT_INT4_DECODE_ROWS16_MAX=m (9..32),
// else 32.
int env_rows16_max() {
  static const int v = [] {
    const char* off = std::getenv("LOWBIT_INT4_DECODE_ROWS16");
    if (off != nullptr && std::strcmp(off, "0") == 0) return 8;
    const char* e = std::getenv("LOWBIT_INT4_DECODE_ROWS16_MAX");
    const int n = e ? std::atoi(e) : 0;
    return n >= 9 && n <= 32 ? n : 32;
  }();
  return v;
}

// LOWBIT_INT4_DECODE_FEW8=0 (read once; measurements): dense_decode_plan() without its M = 9..16
// rule for few groups (rows16_few_groups_shape: two 8-row tiles per group in 8-warp clusters of
// 3 or pairs; the 16-row plan instead, as before session 63).
bool env_few_rows8() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_DECODE_FEW8");
  return v;
}
// LOWBIT_INT4_DECODE_C4=0 (read once; measurements): dense_decode_plan() without its 8-warp
// clusters of 4 on few groups and K >= 8192 (few_units_k8192; the plan before session 68).
bool env_clusters4() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_DECODE_C4");
  return v;
}

// Grid: x = split-K cluster, y = row tiles (dense) or align blocks x 8-row parts (MoE),
// z = column groups (gate/up: groups of one half).
struct DecodeGrid {
  int splits, y, groups;
};

template <typename T, typename Cfg, int W, bool kSym, int MODE>
cudaError_t launch(DecodeParams p, DecodeGrid gr, cudaStream_t stream) {
  auto kernel = gemm_decode_kernel<T, Cfg, W, kSym, MODE>;
  constexpr int kSmem =
      decode_smem_bytes<Cfg::NT, Cfg::D, Cfg::S, Cfg::NW, decode_stage_scale_bytes<Cfg, W, kSym>(), Cfg::XS, Cfg::XW,
                        MODE>();
  // The blocks per SM that the configuration's registers allow must also fit in an SM's 228 KB
  // of shared memory (each block: its dynamic bytes, < 512 B of static ones, 1 KB reserved):
  // the stages, x ring and push slots are sized for that (decode_push_peers).
  static_assert(Cfg::kMinBlocks * (kSmem + 512 + 1024) <= 228 * 1024,
                "decode configuration: shared memory would cost blocks per SM");
  // Per function and per device: set on every launch (once per process breaks a second GPU).
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      e != cudaSuccess)
    return e;
  static ClusterSchedulable known = {};
  // (A plan of one wave of blocks gets all its split-K clusters resident at once: schedulable_splits.)
  p.splits = schedulable_splits(kernel, gr.splits, 1, static_cast<unsigned>(gr.y), static_cast<unsigned>(gr.groups),
                                32 * Cfg::NW, kSmem, known,
                                static_cast<long long>(Cfg::kMinBlocks) * current_sm_count());
  p.x_prefetch = x_prefetch_rule<Cfg, W>(env_x_prefetch(), p.splits);
  p.x_early = x_early_rule<Cfg, W>(env_x_early(), p.splits);
  p.push = !Cfg::XS && p.splits >= 2 && p.splits <= 1 + decode_push_peers<Cfg::NT, MODE, Cfg::NW>() && env_push() ? 1 : 0;
  if constexpr (MODE == kDecDense) {  // the only mode that reads it
    p.pdl_trigger = dense_pdl_trigger(static_cast<long long>(p.splits) * gr.y * gr.groups, current_sm_count(), Cfg::NW,
                                      p.splits, Cfg::NT == 1 && !Cfg::XS && !Cfg::XW,
                                      std::is_same_v<T, __nv_bfloat16>);
    if (const int forced = env_pdl_trigger(); forced >= 0) p.pdl_trigger = forced;
  }
  if constexpr (MODE == kDecMoeDown) {
    // DecodeParams::ysum: single-token down, no K split, the topk (>= 2: one slot row needs no
    // sum) blocks of a token's column group (grid.y = M * topk) one cluster along y that the
    // device can run.
    static ClusterSchedulable ysum_known = {};
    const int k = p.topk;
    if (p.ysum != 0 && (p.splits != 1 || k < 2 || k > kClusterMaxSplits || gr.y % k != 0 ||
                        active_clusters(kernel, 1, 1, static_cast<unsigned>(gr.y), static_cast<unsigned>(gr.groups),
                                        32 * Cfg::NW, kSmem, ysum_known, k) == 0))
      p.ysum = 0;
    if (p.ysum != 0)
      return launch_split_clusters(kernel, p, 1, 1, static_cast<unsigned>(gr.y), static_cast<unsigned>(gr.groups),
                                   32 * Cfg::NW, kSmem, stream, pdl_enabled(), k);
  }
  return launch_split_clusters(kernel, p, p.splits, 1, static_cast<unsigned>(gr.y), static_cast<unsigned>(gr.groups),
                               32 * Cfg::NW, kSmem, stream, pdl_enabled());
}

template <typename T, typename Cfg, int MODE, int W>
cudaError_t launch_w(const DecodeParams& p, DecodeGrid gr, cudaStream_t stream) {
  return p.zeros == nullptr ? launch<T, Cfg, W, true, MODE>(p, gr, stream)
                            : launch<T, Cfg, W, false, MODE>(p, gr, stream);
}

template <typename T, typename Cfg, int MODE>
cudaError_t launch_cfg(const DecodeParams& p, DecodeGrid gr, cudaStream_t stream) {
  const int w = decode_window(p.group_steps(), Cfg::D);
  if constexpr (Cfg::NT == 2 && Cfg::D == 8) {  // planned only with windows of 8 (it spills with 2 or 4)
    if (w != 8) return cudaErrorInvalidValue;
    return launch_w<T, Cfg, MODE, 8>(p, gr, stream);
  } else {
    if (w == 2) return launch_w<T, Cfg, MODE, 2>(p, gr, stream);
    if (w == 4) return launch_w<T, Cfg, MODE, 4>(p, gr, stream);
    return launch_w<T, Cfg, MODE, Cfg::D>(p, gr, stream);
  }
}

// Configurations (registers measured by ptxas, no spills at W = 8): 8-row tiles in batches
// of 8 K steps (4 KB per warp) with 3 stages: ~128 registers, 48 KB (4 warps) / 96 KB (8)
// of stages, 4 x 4 or 2 x 8 warps per SM; kRows16Deep as above (160-179 registers: 3 x 4 or
// 1 x 8 warps per SM); kRows16Lean the 8-warp deep tile at 127-128 registers, 2 x 8 warps per
// SM (session 21); kRows16 (M > 32, forced paths; MoE parts of 16 rows) in batches of 4 with 6
// stages. The shape's warps and splits are the caller's, then LOWBIT_INT4_DECODE_WARPS /
// _SPLITS override them, and LOWBIT_INT4_DECODE_LEAN=0 / 2 the lean / deep choice.
// kRows8W16 (LOWBIT_INT4_DECODE_WARPS=16 only; not in any plan until measured): the dense 8-row
// tile in one 16-warp block per SM. On few column groups with a short K (8B o: 64 groups, K =
// 4096, pairs) the K loop after griddepcontrol.wait is bound by how fast a scheduler issues
// MMAs, one per 12.8 cycles with the two warps of today's 8-warp block and one per 7.2 with four
// (docs/int4-kernels-sessions.md, "Session 62"); 16 warps on the same blocks give each warp half
// the K steps at four warps per scheduler. The same 128-register budget and 3 stages per warp
// as the 8-warp tile at two blocks per SM (16 x 3 stages with asymmetric scales and the push
// slots: 213,392 B); windows of 8 only (G = 128, per-channel: a first build, with 2 stages, spilled
// 12-16 B at windows of 2 / 4, so G = 32 / 64 keep 8 warps). The cost to weigh: such a block fills
// the SM's registers, so the next launch's blocks cannot start their weight stream on that SM
// before it exits (an 8-warp block leaves room for one).
using kRows8W16 = DecodeCfg<1, 8, 3, 16, 1>;

template <typename T, int MODE>
cudaError_t launch_t(const DecodeParams& p, DecodeTiles tiles, DecodeShape sh, DecodeGrid gr, cudaStream_t stream) {
  if (env_warps()) sh.warps = env_warps();
  // 16-warp blocks exist only for the dense 8-row tiles with windows of a whole batch (G = 128,
  // per-channel; kRows8W16 below).
  if (sh.warps == 16 &&
      (MODE != kDecDense || tiles != DecodeTiles::kRows8 || decode_window(p.group_steps(), 8) != 8))
    sh.warps = 8;
  // The lean tile is the 8-warp deep tile held to 128 registers: other widths, or the knob at
  // 0, run the deep tile.
  if (tiles == DecodeTiles::kRows16Lean && (env_lean() == 0 || sh.warps != 8)) tiles = DecodeTiles::kRows16Deep;
  if (tiles == DecodeTiles::kRows16Deep && sh.warps == 8 && env_lean() == 2) tiles = DecodeTiles::kRows16Lean;
  // Staged x likewise: other widths, or the knob at 0, run the deep tile; at 2 every 8-warp
  // deep tile stages its x.
  if (tiles == DecodeTiles::kRows16Staged && (env_staged_x() == 0 || sh.warps != 8)) tiles = DecodeTiles::kRows16Deep;
  if (tiles == DecodeTiles::kRows16Deep && sh.warps == 8 && env_staged_x() == 2) tiles = DecodeTiles::kRows16Staged;
  if (env_splits()) sh.splits = env_splits();
  if (p.wide) sh = {4, 1};  // the caller's grid.z counts groups of 4 column groups
  gr.splits = sh.splits;
  switch (tiles) {
    case DecodeTiles::kRows8:
      if constexpr (MODE == kDecDense) {
        if (sh.warps == 16) return launch_w<T, kRows8W16, MODE, 8>(p, gr, stream);  // windows of 8 (above)
      }
      return sh.warps == 8 ? launch_cfg<T, DecodeCfg<1, 8, 3, 8, 2>, MODE>(p, gr, stream)
                           : launch_cfg<T, DecodeCfg<1, 8, 3, 4, 4>, MODE>(p, gr, stream);
    case DecodeTiles::kRows16Shared:  // dense only (dense_decode_plan); grid.z: blocks of NW column groups
      if constexpr (MODE != kDecDense) {
        return cudaErrorInvalidValue;
      } else {
        gr.groups = (gr.groups + sh.warps - 1) / sh.warps;
        return sh.warps == 8 ? launch_cfg<T, DecodeCfg<2, 8, 3, 8, 1, true>, MODE>(p, gr, stream)
                             : launch_cfg<T, DecodeCfg<2, 8, 3, 4, 3, true>, MODE>(p, gr, stream);
      }
    case DecodeTiles::kRows16Deep:
      if constexpr (MODE != kDecDense) {  // dense only (dense_decode_plan)
        return cudaErrorInvalidValue;
      } else {
        if (p.x_steps != nullptr)
          return sh.warps == 8 ? launch_cfg<T, DecodeCfg<2, 8, 3, 8, 1, false, false, true>, MODE>(p, gr, stream)
                               : launch_cfg<T, DecodeCfg<2, 8, 3, 4, 3, false, false, true>, MODE>(p, gr, stream);
        return sh.warps == 8 ? launch_cfg<T, DecodeCfg<2, 8, 3, 8, 1>, MODE>(p, gr, stream)
                             : launch_cfg<T, DecodeCfg<2, 8, 3, 4, 3>, MODE>(p, gr, stream);
      }
    case DecodeTiles::kRows16Staged:  // dense only (dense_decode_plan); 8 warps (see above)
      if constexpr (MODE != kDecDense) {
        return cudaErrorInvalidValue;
      } else {
        return launch_cfg<T, DecodeCfg<2, 8, 3, 8, 1, false, true>, MODE>(p, gr, stream);
      }
    case DecodeTiles::kRows16Lean:  // dense only (dense_decode_plan); 8 warps (see above)
      if constexpr (MODE != kDecDense) {
        return cudaErrorInvalidValue;
      } else {
        if (p.x_steps != nullptr) return launch_cfg<T, DecodeCfg<2, 8, 3, 8, 2, false, false, true>, MODE>(p, gr, stream);
        return launch_cfg<T, DecodeCfg<2, 8, 3, 8, 2>, MODE>(p, gr, stream);
      }
    default:
      return sh.warps == 8 ? launch_cfg<T, DecodeCfg<2, 4, 6, 8, 1>, MODE>(p, gr, stream)
                           : launch_cfg<T, DecodeCfg<2, 4, 6, 4, 2>, MODE>(p, gr, stream);
  }
}

template <int MODE>
cudaError_t launch_dtype(DType act, const DecodeParams& p, DecodeTiles tiles, DecodeShape sh, DecodeGrid gr,
                         cudaStream_t stream) {
  return act == DType::kF16 ? launch_t<__half, MODE>(p, tiles, sh, gr, stream)
                            : launch_t<__nv_bfloat16, MODE>(p, tiles, sh, gr, stream);
}

}  // namespace
}  // namespace kern
}  // namespace lowbit::int4
