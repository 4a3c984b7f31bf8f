// INT4-weight (W4A16) CUDA kernels: dense GEMM and the fused MoE layer. Framework-free:
// device pointers, sizes, a stream in; a lowbit::Status out. Every entry point validates
// its arguments (shapes, group size, pointer alignment, expert/top-k bounds) before it
// launches anything. Weights are in the kernel layout (kernel_layout.h), on the device.
// Activations/outputs are 16-bit (fp16 or bf16 = weights.shape.act), row-major.
// Accumulation is fp32; dequantized weights (dequantize(), the cuBLAS slabs, the N-packed
// kernels) equal the CPU contract bit-for-bit.
// Kernels and tilings: docs/int4-kernels.md.
//
// This header compiles without CUDA (the stream is the opaque CUDA handle type).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lowbit/int4/kernel_layout.h"
#include "lowbit/status.h"

struct CUstream_st;

namespace lowbit::int4 {

using Stream = CUstream_st*;  // == cudaStream_t

// ---- dequantization (tests, debugging) ---------------------------------------------------
// w_out[e, n, k] (activation dtype, row-major [E, N, K]) = contract dequantization.
Status dequantize(const KernelWeightsView& w, uint16_t* w_out, Stream stream);

// ---- dense GEMM ----------------------------------------------------------------------------
// y[M, N] = x[M, K] * W[expert]^T. x, y: 16 B aligned on the MMA-tiled and N-packed
// layouts; any 2 B alignment on the K-packed fallback.
// The kernel is picked from M and the layout. MMA-tiled (the dense default): M <= 32 a
// decode kernel that streams the tiled words straight into mma.m16n8k16 fragments (one
// launch, split-K reduced in a thread-block cluster; gemm_decode.cu; at M = 9..32 on large
// weights a short launch before it first copies x into the workspace in the order its 16-row
// tiles load it, which it skips, reading x itself with the same outputs, when the workspace
// is smaller than gemm_workspace_size() says), larger M the pipelined kernel (up to 256 rows;
// at 257..2047 where a time model of both paths fitted on H200 says it is faster) or dequant +
// cuBLAS (kernels/int4/pipelined_plan.h; gemm_resolved_path() below names the choice). The decode kernel applies zero point and scale to fp32
// sums of (q - z) x per window of K (the unrounded weight), the other paths multiply by the
// contract's rounded weights: outputs agree within the tolerance test_gemm.cu states.
// N-packed: small M (< 128; < 64 when K < 8192) a streaming tensor-core kernel (mma m16n8k16 on
// y^T = W x^T, each weight word dequantized once per block for up to 32 rows, cp.async
// pipeline) with split-K over the grid (fp32 partials in the workspace, reduced in a fixed
// order: deterministic); larger M (prefill) dequantizes the weight on the GPU into a 16-bit
// slab in the workspace (bit-exact with the contract, column chunks of <= 64 MiB) and runs
// cuBLAS on it (fp32 accumulation); K-packed layout: a simple fallback. The crossover M is
// documented in docs/int4-kernels.md (measured on H200).
//
// Act-order weights (w.k_perm set, GPTQ desc_act): x is taken in checkpoint order and gathered
// as x[:, k_perm] into the head of the workspace first (one more launch; the workspace must hold
// gemm_workspace_size(view, ...), which counts it; x then needs only 2 B alignment).
// GemmPath forces one path (tests, benchmarks; kTiled needs the N-packed layout); kAuto
// picks by M and layout. The environment
// variable LOWBIT_INT4_GEMM_PATH = skinny | tiled | cublas | pipelined (read once per process) replaces
// kAuto where that path can serve the M (skinny: M <= 512), for gemm() and
// gemm_workspace_size() alike. Forcing a path on the K-packed layout is refused.
enum class GemmPath : uint8_t {
  kAuto = 0,
  kSkinny,         // decode kernel of the layout: gemm_decode.cu (MMA-tiled) / gemm_skinny.cu (N-packed), M <= 512
  kTiled,          // WMMA tiled kernel (gemm_tc.cu)
  kDequantCublas,  // dequantize to a slab + cuBLAS (gemm_dequant.cu)
  kPipelined,      // MMA-tiled layout only: multistage tensor-core kernel (pipelined_tile.cuh), any M
};
const char* gemm_path_name(GemmPath p);
struct GemmArgs {
  const void* x = nullptr;  // [M, K]
  void* y = nullptr;        // [M, N]
  int m = 0;
  int expert = 0;           // which expert of w (dense layers: 0)
  GemmPath path = GemmPath::kAuto;
};
// Scratch bytes gemm() needs for any M' <= m with this weight shape and path (0 when none).
// Independent of the pointers, so it can be sized once for the largest M. The dequant +
// cuBLAS path needs a 32 MiB cuBLAS workspace plus the slab (<= 64 MiB for K <= 262144).
Status gemm_workspace_size(const WeightShape& shape, int m, size_t* bytes, GemmPath path = GemmPath::kAuto);
// The same for one weight: adds the copy of x that gemm() gathers for an act-order weight
// (w.k_perm set: M * K * 2 bytes, rounded up to 256). Sizes every weight, act-order or not.
Status gemm_workspace_size(const KernelWeightsView& w, int m, size_t* bytes, GemmPath path = GemmPath::kAuto);
Status gemm(const GemmArgs& args, const KernelWeightsView& w, void* workspace, size_t workspace_bytes,
            Stream stream);
// The path gemm() runs for a weight of this shape in this layout at M rows when asked for
// `requested`: kAuto's choice on the current device (after LOWBIT_INT4_GEMM_PATH), or the
// forced path itself. K-packed weights have one kernel (kAuto). For logs and benchmarks: which
// kernel a call takes, without running it.
GemmPath gemm_resolved_path(const WeightShape& shape, KernelLayoutKind kind, int m,
                            GemmPath requested = GemmPath::kAuto);

// ---- fused MoE -----------------------------------------------------------------------------
// y[M, H] = sum_{s < topk} rw[m, s] * W2[e_s] ( silu(W13[e_s, :I] x_m) * (W13[e_s, I:] x_m) )
// w13: shape E x (N = 2I) x (K = H); w2: shape E x (N = H) x (K = I); same E, act dtype.
// Both in the N-packed layout (H % 32 == 0, I % 32 == 0) or both MMA-tiled (repack's default
// for H % 128 == 0, 2I % 128 == 0).
//
// Paths: kFused runs the five stages below (graph-capturable); on MMA-tiled experts its GEMMs
// are the decode tile at up to 8 rows per expert and the pipelined tile past that (align
// blocks of 16..128 rows), at M = 1 one launch each with the routing inside. kGrouped (prefill, many
// tokens per expert) gathers each expert's sorted rows, dequantizes the expert weights into
// a slab and runs cuBLAS per expert (GEMM1 -> silu*up -> GEMM2), then the same slot-order
// sum; it reads the per-expert row counts back to the host (one stream synchronization),
// so it cannot be captured in a CUDA graph: under capture kAuto takes kFused and a forced
// kGrouped is refused. kAuto picks by a cost model of both paths fitted to H200 measurements
// (many tokens per expert -> grouped; docs/int4-kernels.md).
// LOWBIT_INT4_MOE_PATH = fused | grouped (read once) replaces kAuto, like GemmPath.
enum class MoePath : uint8_t { kAuto = 0, kFused, kGrouped };
const char* moe_path_name(MoePath p);
// The path kAuto takes at this size for experts in this layout when the stream is not being
// captured (honours LOWBIT_INT4_MOE_PATH); under capture it is always kFused.
MoePath moe_auto_path(int m, int topk, int experts, int hidden, int inter,
                      KernelLayoutKind layout = KernelLayoutKind::kMmaTiled);
//
// Routing: either router_logits (the layer takes softmax top-k, optionally renormalized, as
// Mixtral, Qwen3 and DeepSeek-V2 route), or the caller's own top-k in topk_ids / topk_weights
// (router_logits null), as engines pass it to vLLM's fused_experts: any scoring (sigmoid,
// grouped top-k with a bias, a routed scaling factor folded into the weights, a shared
// expert appended as expert E-1 with weight 1). A caller id outside [0, E) (e.g. -1 for an
// expert held by another rank under expert parallelism) contributes nothing to its token.
// Caller-routed calls take the single-token path too (two launches at M <= 2, M <= 8 on small MMA-tiled
// experts: each GEMM block reads its pick instead of routing; a foreign pick streams expert 0 at
// weight 0, which adds +0 to its token), and the four launches (align, GEMM1, GEMM2, sum) past it.
//
// Act-order experts (w13.k_perm and / or w2.k_perm set: GPTQ desc_act, compressed-tensors
// actorder "group"; each expert its own permutation): x and the intermediate are taken in
// checkpoint order and gathered per routed (token, slot) pair into the workspace before the GEMM
// that needs them (x[t, k_perm13[e]] before GEMM1, inter[p, k_perm2[e]] before GEMM2: one launch
// each, a copy of M * topk rows). Such a layer runs the kFused stages as separate launches at
// every M (no single-token path, no warp-specialized 128-row layer); kAuto never takes
// kGrouped for it and a forced kGrouped is refused (it dequantizes experts in stored row order).
// Size the workspace with the views' moe_workspace_size, which counts the gathered copies.
struct MoeArgs {
  const void* x = nullptr;              // [M, H] activations
  const float* router_logits = nullptr;  // [M, E] fp32, or null with topk_ids / topk_weights (NaN / -inf: moe_topk)
  void* y = nullptr;                    // [M, H]
  int m = 0;
  int topk = 0;
  bool renormalize = true;  // divide the top-k softmax weights by their sum (router_logits only)
  int block_m = 0;          // 0: picked from M and the layout (fused_moe.cu; grouped path: 8)
  MoePath path = MoePath::kAuto;
  const int32_t* topk_ids = nullptr;   // [M, topk] the caller's experts per token (device memory)
  const float* topk_weights = nullptr;  // [M, topk] their weights (device memory)
};
// Which kernels fused_moe() runs for these arguments on `stream` (capture included), without
// running anything: for logs, benchmarks and tests. The tiles round alike except one: in fp16 the
// decode tile computes output columns 8..15 of every 16 from nibbles read 16x up (another fp32
// rounding of the same sums; act_order_fold.h), so columns that move between those halves, as a
// folded permutation moves them, may change in their last bits there and nowhere else.
enum class MoeTile : uint8_t {
  kNPacked = 0,      // the N-packed experts' skinny tile (moe_gemm1.cu / moe_gemm2.cu)
  kDecode,           // the MMA-tiled decode tile's MoE modes (moe_decode.cu): align blocks of <= 8 rows
  kPipelined,        // the pipelined tile's MoE modes (moe_pipelined.cu): blocks of 16..128 rows
  kWarpSpecialized,  // the 128-row layer on the warp-specialized tile (x gathered in align order;
                     // the pipelined tile instead where its tensor maps cannot be made)
  kDequantCublas,    // MoePath::kGrouped: dequantized experts + cuBLAS
};
const char* moe_tile_name(MoeTile t);
struct MoeResolved {
  MoePath path = MoePath::kFused;  // never kAuto
  int block_m = 0;                 // align block rows
  bool single_token = false;       // two launches, the routing inside the GEMMs (a few tokens)
  MoeTile gemm1 = MoeTile::kNPacked, gemm2 = MoeTile::kNPacked;
};
// Refuses what fused_moe() refuses for the weights, sizes, path and workspace size (not the
// pointers, which it does not read).
Status moe_resolved(const MoeArgs& args, const KernelWeightsView& w13, const KernelWeightsView& w2,
                    size_t workspace_bytes, Stream stream, MoeResolved* out);

int moe_default_block_m(int m, int topk, int experts);
// Worst-case number of sorted slots: M*topk + E*(BM-1), rounded up to BM.
int64_t moe_max_padded(int m, int topk, int experts, int block_m);
// Scratch bytes for fused_moe at this M with this path (kAuto: enough for whichever path
// kAuto picks at any M' <= m, so it can be sized once for the largest M). block_m 0: enough for
// every align block fused_moe may pick at this M (an upper bound: the call may need less);
// block_m > 0: what a call with MoeArgs::block_m = block_m needs.
Status moe_workspace_size(int m, int topk, int experts, int hidden, int inter, DType act, int block_m,
                          size_t* bytes, MoePath path = MoePath::kAuto);
// The same for these weights: adds the act-order copies of x and the intermediate when w13 or w2
// carries k_perm (M * topk * H and M * topk * I elements, 16-bit). Sizes every layer.
Status moe_workspace_size(const KernelWeightsView& w13, const KernelWeightsView& w2, int m, int topk, int block_m,
                          size_t* bytes, MoePath path = MoePath::kAuto);
Status fused_moe(const MoeArgs& args, const KernelWeightsView& w13, const KernelWeightsView& w2, void* workspace,
                 size_t workspace_bytes, Stream stream);

// The fused MoE's stages, usable on their own (fused_moe calls them in this order).
// Top-k over softmax(logits[m, :]): ids by descending logit, ties -> lower expert index;
// weights = softmax probability (renormalized over the k chosen when renormalize).
// Non-finite logits are checked by no one on the device; they never crash a layer: NaN and -inf
// logits are never picked, and a token with fewer than topk other logits gets expert 0 at weight 0
// for each missing pick (a masked router: the layer's output is that of its real picks). A NaN
// logit makes all of its token's weights NaN, so its output row is NaN on every path; a token
// with no pickable logit gets inf / NaN weights.
Status moe_topk(const float* logits, int m, int experts, int topk, bool renormalize, int32_t* topk_ids,
                float* topk_weights, Stream stream);
// Align: pairs p = m*topk + s sorted by (expert, p) (pairs whose id is outside [0, experts)
// are left out); each expert's run padded to a multiple of block_m with the sentinel M*topk; expert_ids[b] the expert of block b (-1 for blocks at
// or past num_post_padded); sorted_ids has moe_max_padded() entries, expert_ids that / block_m.
Status moe_align(const int32_t* topk_ids, int m, int topk, int experts, int block_m, int32_t* sorted_ids,
                 int32_t* expert_ids, int32_t* num_post_padded, Stream stream);
// moe_topk then moe_align, in one launch for decode-sized batches (m <= 64; the pairs stay in
// shared memory between the two), else the two kernels. Same outputs either way.
Status moe_route(const float* logits, int m, int experts, int topk, bool renormalize, int block_m, int32_t* topk_ids,
                 float* topk_weights, int32_t* sorted_ids, int32_t* expert_ids, int32_t* num_post_padded,
                 Stream stream);
// inter[p, I] = silu(x[p/topk] . w13[e, n]) * (x[p/topk] . w13[e, I+n]) per sorted block.
// The GEMMs read the align output as moe_align / moe_route write it: sorted ids outside [0, m *
// topk) are padding (no row), a block of expert id -1 is skipped; an expert id >= E is not
// checked on the device (its block would read past the expert stacks).
Status moe_gemm1(const void* x, const KernelWeightsView& w13, const int32_t* sorted_ids, const int32_t* expert_ids,
                 const int32_t* num_post_padded, int m, int topk, int block_m, void* inter, Stream stream);
// slot_out[p, H] (fp32) = topk_weights[p] * (inter[p] . w2[e, h]).
Status moe_gemm2(const void* inter, const KernelWeightsView& w2, const int32_t* sorted_ids, const int32_t* expert_ids,
                 const int32_t* num_post_padded, const float* topk_weights, int m, int topk, int block_m,
                 float* slot_out, Stream stream);
// y[m, h] = act(sum over s in slot order of slot_out[m*topk + s, h]); with topk_ids, the slots
// whose id is outside [0, experts) are left out of the sum (align gave them no rows, so
// GEMM2 never wrote them).
Status moe_sum(const float* slot_out, int m, int topk, int hidden, DType act, void* y, Stream stream,
               const int32_t* topk_ids = nullptr, int experts = 0);

}  // namespace lowbit::int4
