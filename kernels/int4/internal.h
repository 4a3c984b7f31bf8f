// Launchers shared between the INT4 kernel files (one op per .cu file). Arguments are
// validated by the public entry points (gemm.cu, fused_moe.cu) before these are called.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
// Shape, pointer and per-layout alignment checks of a weight view (gemm.cu). An act-order view
// (k_perm set) is refused unless act_order_ok: only int4::gemm gathers its activations.
Status validate_weights_view(const KernelWeightsView& w, const char* who, bool act_order_ok = false);
}  // namespace lowbit::int4

namespace lowbit::int4::detail {

// Skinny (decode) GEMM tiling (gemm_skinny.cu): a block is 2 column warps x
// kSkinnyKSlices K-slice warps, 64 columns per warp (mma m16n8k16, y^T = W x^T), 128
// columns per block; K is split across the block's slices and across the grid (split-K),
// partial sums reduced in a fixed order.
constexpr int kSkinnyCols = 128;
constexpr int kSkinnyKSlices = 4;
constexpr int kSkinnySMs = 132;  // H200; fixed so the workspace size does not depend on the device
int skinny_rows_per_tile(int m);
int skinny_splits(int m, int n, int k);

cudaError_t launch_gemm_skinny(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                               cudaStream_t stream);
// out[r, j] = x[r, perm[j]] for r < m, j < k (act_order_gather.cu): the activations of an
// act-order weight in its stored row order. 16-bit elements, bit-exact.
cudaError_t launch_gather_act_order(const void* x, void* out, const int32_t* perm, int m, int k, cudaStream_t stream);
// The MoE form (fused_moe.cu): out[p, j] = src[p / row_div, perm[ids[p] * k + j]] for the rows p <
// rows whose expert ids[p] is in [0, experts) (the others are left as they are: no GEMM reads
// them). k % 8 == 0 and out 16 B aligned, else cudaErrorInvalidValue.
cudaError_t launch_gather_moe_act_order(const void* src, int row_div, const int32_t* ids, int rows, int experts,
                                        const int32_t* perm, int k, void* out, cudaStream_t stream);
// Decode GEMM on the MMA-tiled layout (gemm_decode.cu): 1 <= m <= 512. Where the plan
// copies x first (decode_plan.h decode_x_steps_planned) and `workspace` holds
// decode_x_steps_bytes(m, K) (16 B aligned), the copy goes there; with less the kernel reads
// x itself (same outputs, slower on large weights at M = 9..32).
cudaError_t launch_gemm_decode(const void* x, void* y, int m, const KernelWeightsView& w, int expert, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream);
// The decode tiles' copy of x (decode_x_steps.cu; layout: decode_plan.h decode_x_steps_index,
// rows past m zeros up to the 16-row tile's end), K % 32 == 0, x and xs 16 B aligned; a
// programmatic dependent launch.
cudaError_t launch_decode_x_steps(const void* x, int m, int k, void* xs, cudaStream_t stream);
// LOWBIT_INT4_DECODE_XSTEPS (read once): 0 never copies x step-major, 2 wherever the tiles can
// read the copy, else (1) the plan.
int decode_x_steps_mode();
// Rows per part of an align block in the MoE decode modes: 16 for blocks of >= 16 rows
// (prefill-sized M: each part re-reads the expert's weights, so fewer, taller parts unpack
// them fewer times), else 8.
// One expert's share of a stack in the MMA-tiled layout: its words in 16 B units (K x N / 8
// 32-bit words; K % 32 == 0, so a whole number) and its scale (or zero) entries.
inline size_t tiled_expert_uint4s(const WeightShape& s) { return static_cast<size_t>(s.k) * (s.n / 8) / 4; }
inline size_t expert_scale_entries(const WeightShape& s) { return static_cast<size_t>(s.num_groups()) * s.n; }

inline int moe_decode_part_rows(int block_m) { return block_m >= 16 ? 16 : 8; }
// grid.y of the MoE decode modes: the align blocks that can hold rows (at most one per
// (token, slot) pair; the rest of the max_padded / block_m blocks exit at once), times their
// parts. Checked against the grid limit by validate_moe_gemm.
inline int64_t moe_decode_grid_rows(int m, int topk, int experts, int block_m) {
  const int64_t blocks = moe_max_padded(m, topk, experts, block_m) / block_m, pairs = static_cast<int64_t>(m) * topk;
  const int part = moe_decode_part_rows(block_m);
  return (blocks < pairs ? blocks : pairs) * ((block_m + part - 1) / part);
}
// The MoE single-token path (fused_moe at m <= moe_single_max_m(2I x H) on MMA-tiled experts, block_m
// 8, E <= 256): two launches instead of four (routing, GEMM1, GEMM2, sum). Every block of both
// GEMMs computes its token's top-k itself (one warp, the routing kernel's code: same picks and
// weights) and takes pick b (one row; the four-launch path groups the rows by expert, which
// changes no output row). GEMM2 routes before waiting for GEMM1, so its
// first weight batches stream during GEMM1's tail. GEMM1's first block zeroes the sum
// counters; per token and 64-column group, the last of GEMM2's topk blocks to finish (an atomic
// counter) adds the topk slot rows in slot order into y, exactly as moe_sum does; at topk 2..6
// the topk blocks of a token's column group form one cluster instead and rank 0 adds the slot rows from
// their shared memory (moe_ysum_max_topk below; session 15). Output bit-identical to the
// four-launch path. A single launch for the whole layer was measured 2x slower (session 15,
// docs/int4-kernels-sessions.md). Both halves were also tried at M > 1 within the four-launch grid and
// measured slower (docs/int4-kernels-sessions.md, "Session 13"): every block routing the whole batch (the
// serial top-k of several tokens per warp, paid by every block), and the slot sum in GEMM2
// behind the align kernel (its fence, atomic and sum lengthen GEMM2's tail more than the
// programmatic moe_sum launch costs); a block per pick (one top-k per block, no align) pays at
// M = 2 (session 24, below).
struct MoeSingleToken {
  const float* logits = nullptr;  // [M, E], or null with ids / weights
  // Caller routing (MoeArgs::topk_ids / topk_weights, [M, topk]): each block reads its pick
  // instead of routing. A pick outside [0, experts) streams expert 0 at weight 0, so every
  // block of a token still takes part in its slot sum (the four-launch path skips such a
  // slot instead: the same bits, x + 0 = x).
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  int experts = 0;
  bool renormalize = false;
  int* counters = nullptr;        // [num_counters = M * H / 64], zeroed by GEMM1, counted by GEMM2
  int num_counters = 0;
  void* y = nullptr;              // [M, H] activation dtype (GEMM2)
  __host__ __device__ bool active() const { return logits != nullptr || ids != nullptr; }
};
// The single-token path serves M <= moe_single_max_m(2I x H): every block takes one pick (token b /
// topk, slot b % topk) and routes its token itself, so the routing, align and sum launches
// drop out at small M too; experts picked by several tokens are streamed once per pick. The
// block shape and GEMM2's mode are the four-launch path's at the same M (moe_decode.cu), so
// the outputs stay bit-identical to it. kMoeSingleMaxM bounds the workspace's counters.
// Measured on H200 (session 24, rounds ND / NE, bf16, min of two, us; single path vs four
// launches at the same M): M = 2 pays on every benchmark model (Qwen3-30B-A3B TP2 18.3 vs 24.0,
// TP1 25.1 vs 27.0, DeepSeek-V2-Lite 29.2 vs 31.0, Mixtral 105.2 vs 108.7); from M = 3 the
// duplicate expert streams cost more than the launches save except on small experts (Qwen3 TP2,
// w13 2I x H = 1.5 Mi elements: M = 3 / 4 22.8 / 25.8 vs 28.1 / 28.9; at M = 6 / 8 33.6 / 36.1
// vs 34.9 / 36.3), while TP1 (3 Mi) lost at M = 3 / 4 (38.9 / 41.9 vs 37.1 / 39.3), DeepSeek
// (5.5 Mi) at M = 4 (49.4 vs 42.3) and Mixtral (112 Mi) at M = 3 (165.6 vs 146.8). So the bound
// was 4 for w13 of <= kMoeSingleSmallW13 elements, else 2. Session 45 (1x H100, the same
// decode-size MoE kernels, min of 3 alternated passes, us, single path up to M = 8 vs the rule's
// four launches): Qwen3 TP2 M = 5 / 6 / 8 30.5 / 35.7 / 37.1 vs 33.3 / 38.3 / 40.5, Qwen3.5-35B-A3B
// (w13 2.0 Mi) 38.9 / 41.0 / 46.4 vs 43.0 / 44.6 / 48.9 (0.91-0.95x; M = 3 / 4 unchanged), while
// the larger experts stayed mixed (Qwen3 TP1 0.89-1.13x, DeepSeek-V2-Lite TP2 (2.75 Mi) 0.89-1.10x
// at M = 5..8): small experts take the path up to kMoeSingleMaxM.
constexpr int kMoeSingleMaxM = 8;
constexpr int kMoeSingleDefaultMaxM = 2, kMoeSingleSmallMaxM = kMoeSingleMaxM;
constexpr long long kMoeSingleSmallW13 = 2LL << 20;
// LOWBIT_INT4_MOE_SINGLE=0 turns the path off, LOWBIT_INT4_MOE_SINGLE_MAXM=n (1..8) sets its
// bound for every shape (read once; measurements); set_moe_single_max_m(n) overrides both
// (tests; 0: undo). w13_elems: one expert's 2I x H.
int moe_single_max_m(long long w13_elems);
void set_moe_single_max_m(int m);
// The largest topk whose single-token GEMM2 adds its slot rows in a cluster (DecodeParams::ysum;
// moe_decode.cu: 6 as measured, LOWBIT_INT4_MOE_YSUM=0 / 2 for none / up to 8).
int moe_ysum_max_topk();
#ifdef LOWBIT_INT4_TRACE
// The MoE decode modes' timeline records (decode_tile.cuh's probes, a -DLOWBIT_INT4_TRACE=1
// build) as CSV into `path`; clears the ring.
void moe_trace_dump(const char* path);
// The same for the dense decode GEMM's blocks (gemm_decode.cu); routed = the weight pointer.
void dense_trace_dump(const char* path);
// The same for the dense warp-specialized pipelined tiles (pipelined_ws_tile.cuh's probes).
void pipe_trace_dump(const char* path);
#endif
// MoE GEMMs on MMA-tiled expert stacks (moe_decode.cu, the decode tile in its MoE modes):
// gate_up: inter[id] = act(silu(x[id/topk] Wg^T) * (x[id/topk] Wu^T)) for w13 [E, 2I, H]
// (I % 64 == 0); else slot_out[id] = topk_weights[id] * (inter[id] W2^T) in fp32. Rows by
// the align kernel's sorted ids (block_m rows per block, any block_m <= 128); with `single`,
// the single-token path above (m <= kMoeSingleMaxM, block_m 8), which reads no sorted / expert ids.
cudaError_t launch_moe_decode(bool gate_up, const void* x, const KernelWeightsView& w, const int32_t* sorted_ids,
                              const int32_t* expert_ids, const int32_t* npp, const float* topk_weights, int m, int topk,
                              int bm, void* out, cudaStream_t stream, const MoeSingleToken* single = nullptr,
                              bool ids_early = false);
// ids_early (down only; fused_moe, launching GEMM2 right after GEMM1; launch_moe_pipelined
// below takes it too): GEMM2 reads the ids and requests its first weight batches before
// waiting for GEMM1, whose blocks each waited for the routing before letting GEMM2 launch; its
// weights then stream during GEMM1's tail. Not for a GEMM2 whose predecessor may still be
// writing the ids (moe_gemm2 launches without it). moe_early_down_enabled():
// LOWBIT_INT4_MOE_EARLY=0 turns it off (read once; measurements), applied in moe_gemm2_launch.
bool moe_early_down_enabled();
// MoE GEMMs on the pipelined tile (moe_pipelined.cu), same contract as launch_moe_decode
// (no single-token path): align blocks of 16 / 32 / 64 rows, or 128 with wgmma; launched only
// where moe_pipelined_fits() holds (the callers check it).
// moe_pipelined_fits(): whether it takes this weight and block_m (MMA-tiled, I % 64 == 0 for
// gate/up, rows x K < 2^32, a 16 B aligned output, LOWBIT_INT4_MOE_PIPE not 0); the callers
// fall back to the decode tile.
bool moe_pipelined_enabled();
bool moe_pipelined_fits(bool gate_up, const KernelWeightsView& w, int m, int topk, int block_m, const void* out);
// The tile one MoE GEMM runs (moe_gemm1 / moe_gemm2 follow it): the pipelined tile where it fits,
// else the decode tile on MMA-tiled experts, else the N-packed skinny tile.
MoeTile moe_gemm_tile(bool gate_up, const KernelWeightsView& w, int m, int topk, int block_m, const void* out);
cudaError_t launch_moe_pipelined(bool gate_up, const void* x, const KernelWeightsView& w, const int32_t* sorted_ids,
                                 const int32_t* expert_ids, const int32_t* npp, const float* topk_weights, int m,
                                 int topk, int bm, void* out, cudaStream_t stream, bool ids_early = false);
// fused_moe's prefill layer on the warp-specialized tile (moe_pipelined.cu; 128-row align
// blocks, MMA-tiled experts, sm_90a): x gathered into xs in the align order
// (launch_moe_gather_rows), GEMM1 storing inter in that order (padding rows zero), GEMM2 reading
// it, both by tensor copies; the sums are gemm_pipelined_kernel's in the same order, so the
// layer's outputs are bit-identical to the other path. moe_ws_fits(): block_m 128, both GEMMs on
// the pipelined tile (moe_pipelined_fits), K % 8 == 0, I >= 512 (LOWBIT_INT4_MOE_WS=0 / 2: never /
// at any I; set_moe_ws: 0 as the variable says, 1 never, 2 at any I; tests). launch_moe_ws_layer:
// xs and inter_sorted hold moe_max_padded(m, topk, E, 128) rows; *launched false (nothing
// launched) where a tensor map or a bulk copy's alignment is not available; moe_ws_launches()
// counts the layers launched (tests).
bool moe_ws_fits(const KernelWeightsView& w13, const KernelWeightsView& w2, int m, int topk, int block_m,
                 const void* inter, const float* slot_out);
cudaError_t launch_moe_ws_layer(const void* x, void* xs, const KernelWeightsView& w13, const KernelWeightsView& w2,
                                const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* npp,
                                const float* topk_weights, int m, int topk, void* inter_sorted, float* slot_out,
                                cudaStream_t stream, bool ids_early, bool* launched);
void set_moe_ws(int mode);
long long moe_ws_launches();
bool moe_ws_takes(int inter);  // on, wgmma available, and experts of this I (the 128-row block model)
// xs[b] = x[sorted_ids[b] / topk] for b < *npp (zeros for padding ids >= m * topk) and, where pos is
// not null, pos[sorted_ids[b]] = b for the real ids: 16-bit rows of `hidden` elements (hidden % 8 ==
// 0), 16 B aligned buffers; max_rows bounds *npp (moe_gather.cu; the WS layer and the grouped path).
cudaError_t launch_moe_gather_rows(const void* x, const int32_t* sorted_ids, const int32_t* npp, int m, int topk,
                                   int hidden, int max_rows, void* xs, int32_t* pos, cudaStream_t stream);
// Pipelined GEMM on the MMA-tiled layout (gemm_pipelined.cu): any m >= 1, no workspace.
// pipelined_uses_wgmma(): whether its 32..128-row tiles run on wgmma here (sm_90a build, a
// compute capability 9.0 device, LOWBIT_INT4_PIPE_WGMMA not 0); kAuto's crossovers depend on it.
bool pipelined_uses_wgmma();
// The current device's SM count (132 when there is none: the H200 kAuto's rules were measured on).
int device_sm_count();
// The 96- and 128-row wgmma tiles warp-specialized (pipelined_ws_tile.cuh; bit-identical sums):
// 0 as LOWBIT_INT4_PIPE_WS says, 1 never, 2 wherever they can run; pipe_ws_launches(): how many
// launches took them so far. Tests.
void set_pipe_ws(int mode);
long long pipe_ws_launches();
// The split tail of the warp-specialized dense launches (pipe_split_tail, pipelined_plan.h): 0 as
// LOWBIT_INT4_PIPE_TAIL says (on unless 0), 1 off, 2 on (tests); pipe_split_tail_on(): whether
// launches and kAuto's time model use it now (also off where the warp-specialized tiles are).
void set_pipe_tail(int mode);
bool pipe_split_tail_on();
// Stream-K of the 32- and 48-row wgmma tiles (pipe_sk_plan, pipelined_plan.h): 0 as
// LOWBIT_INT4_PIPE_SK says (unset: the plan's rule; 0: never; n: n blocks), -1 never, n > 0 n
// blocks wherever such a tile runs (tests). pipelined_sk_workspace_bytes: the workspace a
// stream-K launch may take at this M on this device (0 where the rule never takes it).
void set_pipe_sk(int blocks);
long long pipe_sk_launches();
size_t pipelined_sk_workspace_bytes(const WeightShape& s, int m);
// The workspace (may be null) holds the stream-K partial sums; with too little the kernel runs
// its plan without stream-K.
cudaError_t launch_gemm_pipelined(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                  cudaStream_t stream, void* workspace = nullptr, size_t workspace_bytes = 0);
cudaError_t launch_gemm_tc(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream);
cudaError_t launch_gemm_kpacked(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                cudaStream_t stream);

// ---- dequantize-to-slab + cuBLAS (gemm_dequant.cu; used by gemm.cu and moe_grouped.cu) ----
// The slab holds a chunk of nc output columns of one or more experts, dequantized to the
// activation dtype (bit-exact with the contract). Two layouts:
//   kNK: slab[e][n][k] row-major (ld K)    -> cuBLAS "TN" (op(A) = T)
//   kKN: slab[e][k][n] row-major (ld ldn)  -> cuBLAS "NN", the default (faster dequant)
// LOWBIT_INT4_SLAB_LAYOUT = nk | kn and LOWBIT_INT4_SLAB_MIB (1..64, default 64) select
// them at run time (read once; for measurements).
enum class SlabLayout : int { kNK = 0, kKN = 1 };
SlabLayout slab_layout();
constexpr size_t kSlabMaxBytes = size_t{64} << 20;
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // cuBLAS's recommendation for Hopper
// Columns per chunk for a weight with n columns and k rows: n when the whole weight fits the
// slab budget, else chunks balanced over ceil(n / max) pieces, each a multiple of 128.
int slab_chunk_cols(int n, int k);
// Workspace of the dense dequant + cuBLAS path: cuBLAS workspace + slab (+256 B alignment).
size_t dequant_gemm_workspace_bytes(const WeightShape& shape);
// Dequantizes columns [n0, n0 + nc) of experts [e0, e0 + ne) into slab (ld = K for kNK,
// ld = ldn >= nc for kKN; consecutive experts `expert_stride` elements apart).
cudaError_t launch_dequant_slab(const KernelWeightsView& w, int e0, int ne, int n0, int nc, SlabLayout layout,
                                int ldn, size_t expert_stride, void* slab, cudaStream_t stream);
// The run-time slab budget (LOWBIT_INT4_SLAB_MIB, else kSlabMaxBytes) and the chunk width
// under a given budget (monotone in the budget, so a workspace sized with kSlabMaxBytes fits).
size_t slab_budget_bytes();
void set_slab_budget(size_t bytes);  // tests: > 0 overrides the budget (<= kSlabMaxBytes), 0 restores
int slab_chunk_cols_for(int n, int k, size_t budget);
// The dense path: validated arguments, workspace >= dequant_gemm_workspace_bytes.
Status gemm_dequant_cublas(const void* x, void* y, int m, const KernelWeightsView& w, int expert, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream);

constexpr int kLeaseWorkers = 4;   // worker streams per device (grouped MoE GEMMs run concurrently)
constexpr int kLeaseEvents = 16;   // events per device for the grouped MoE schedule
// A locked, library-internal cuBLAS handle of the current device (created lazily once per
// device; never destroyed), bound to `stream` with `workspace` as its workspace. Holding the
// object serializes users of that handle across threads.
class CublasLease {
 public:
  CublasLease() = default;
  ~CublasLease();
  CublasLease(const CublasLease&) = delete;
  CublasLease& operator=(const CublasLease&) = delete;
  Status acquire(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  const void* slot() const { return slot_; }  // the device's slot (gemm_dequant.cu internals)
  // Rebinds the held handle to another stream and workspace (cublasSetStream + Workspace).
  Status bind(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  // The device's worker streams (non-blocking) and pool events (timing disabled).
  cudaStream_t worker(int i) const;
  cudaEvent_t event(int i) const;
  // c[rows x nc] (column-major view: row r of the row-major [rows, ldc] output, columns
  // 0..nc) = x[rows, K] * slab^T, fp32 accumulation; ctype_f32: c is fp32, else act dtype.
  Status slab_gemm(DType act, SlabLayout layout, int nc, int rows, int k, const void* slab, int slab_ld, const void* x,
                   int ldx, void* c, int ldc, bool ctype_f32, const char* who);

 private:
  void* handle_ = nullptr;  // cublasHandle_t
  void* mutex_ = nullptr;   // std::mutex*, locked while held
  void* slot_ = nullptr;
};
// Overlapped dequantization of the dense path (chunk i+1 dequantized on a side stream while
// chunk i's GEMM runs; used when the weight spans >= 2 slab chunks): -1 default (off unless
// LOWBIT_INT4_OVERLAP=1; not yet measured on the device), 0 off, 1 on. Tests.
void set_dequant_overlap(int mode);
// Split-K clusters in the decode tile (2 ranks, 3 in the dense 8-row tiles; dense and MoE
// modes): 0 default (push unless LOWBIT_INT4_DECODE_PUSH=0), 1 ranks 1.. push their sums into
// rank 0, 2 rank 0 loads them. Tests.
void set_decode_push(int mode);

// ---- MoE decode GEMMs (moe_gemm1.cu, moe_gemm2.cu) -----------------------------------------
// Shared argument checks (moe_args.cu): an N-packed weight with N % n_multiple == 0 or an
// MMA-tiled one of whole 64-column groups (per half for gate/up), K % 32 == 0, m/topk/block_m
// ranges, the grid limits, the weight view's own checks (validate_weights_view) and 16 B
// alignment of the activations (`act`, named act_name in the message).
// Routing argument checks shared by moe_topk / moe_align and moe_route (moe_args.cu): the
// caller's name leads every message.
Status validate_topk_args(const char* who, int m, int experts, int topk);
Status validate_align_args(const char* who, int m, int topk, int experts, int block_m);
Status validate_moe_gemm(const char* who, const char* act_name, const void* act, const KernelWeightsView& w,
                         int n_multiple, int m, int topk, int block_m);
// moe_gemm2's checks and path choice (pipelined tile, decode tile, N-packed tile); ids_early is
// passed to both MMA-tiled paths (launch_moe_pipelined, launch_moe_decode): fused_moe sets it when
// GEMM1 ran right before on MMA-tiled experts, moe_gemm2 never.
Status moe_gemm2_launch(const void* inter, const KernelWeightsView& w2, const int32_t* sorted_ids,
                        const int32_t* expert_ids, const int32_t* num_post_padded, const float* topk_weights, int m,
                        int topk, int block_m, float* slot_out, cudaStream_t stream, bool ids_early);

// ---- grouped MoE prefill (moe_grouped.cu; dispatched from fused_moe.cu) -------------------
size_t moe_grouped_workspace_bytes(int m, int topk, int experts, int hidden, int inter, int block_m);
// Streams the grouped path spreads its per-expert GEMMs over: 0 default
// (LOWBIT_INT4_MOE_STREAMS, else 1 = everything on the caller's stream), up to kLeaseWorkers.
void set_moe_grouped_streams(int n);
// Arguments validated by fused_moe (the workspace non-null and of moe_grouped_workspace_bytes() at
// least); the stream must not be capturing (host synchronization).
Status fused_moe_grouped(const MoeArgs& a, const KernelWeightsView& w13, const KernelWeightsView& w2, int block_m,
                         void* workspace, cudaStream_t stream);

}  // namespace lowbit::int4::detail
