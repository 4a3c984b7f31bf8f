// Fused MoE layer entry point: validation, workspace carving, path choice, and the stages of
// the fused path (routing: topk -> align, one launch at decode sizes -> GEMM1 + silu*up ->
// GEMM2 * routing weight -> slot-order sum). The grouped prefill path (dequantized experts + cuBLAS) is
// moe_grouped.cu; kAuto takes it when a cost model says it is faster (many tokens per
// expert) and the stream is not being captured (it synchronizes once).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/int4/internal.h"
#include "kernels/int4/pipelined_plan.h"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {

namespace {

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// kAuto's choice between the paths: a cost model (microseconds) fitted to H200
// measurements (docs/int4-kernels.md). Fused on N-packed experts (the skinny tile): ~80
// TFLOP/s on the 6*P*H*I flops at large M; on MMA-tiled experts (the pipelined tile past 8
// rows per expert): ~430 TFLOP/s with wgmma (Mixtral-8x7B M = 2048 / 8192: 426 / 433,
// Qwen3-30B-A3B 283, DeepSeek-V2-Lite 333 at M = 8192), 250 assumed on mma.sync (the dense
// tile's rate at M = 512, not measured on MoE shapes). Grouped: dequantizing the touched experts (3*H*I weights each, 4.5 B per weight: int4
// read, 16-bit slab write and read back) at ~2.5 TB/s effective, ~8 us of host launch cost
// per cuBLAS call (two per expert), the GEMMs at ~550 TFLOP/s. The grouped path wins only
// when many tokens share each expert: N-packed e.g. Mixtral from M ~ 512, DeepSeek-V2-Lite
// ~ 2048, Qwen3-30B-A3B ~ 4096; MMA-tiled only Mixtral-sized experts at M ~ 8192. Once it
// wins at some M it wins at every larger M.
constexpr double kFusedFlopsPerUs = 80e6, kGroupedFlopsPerUs = 550e6;
// The rate stays 430 with the warp-specialized layer of session 32 (Mixtral-8x7B M = 2048 / 8192:
// 537 / ~550 TFLOP/s): at M = 8192 the grouped path still took 10114-10140 us against the layer's
// 10292-10529 (round B), and the model with the true rate would pick the layer there.
constexpr double kTiledWgmmaFlopsPerUs = 430e6, kTiledMmaFlopsPerUs = 250e6;
constexpr double kDequantBytesPerUs = 2.5e6, kLaunchUs = 8.0;
constexpr int kGroupedBlockM = 8;  // align block of the grouped path: little padding

MoePath env_moe_path() {
  static const MoePath v = [] {
    const char* e = std::getenv("LOWBIT_INT4_MOE_PATH");
    if (e && std::strcmp(e, "fused") == 0) return MoePath::kFused;
    if (e && std::strcmp(e, "grouped") == 0) return MoePath::kGrouped;
    return MoePath::kAuto;
  }();
  return v;
}
bool grouped_by_size(int m, int topk, int experts, int hidden, int inter, double fused_flops_per_us = kFusedFlopsPerUs) {
  const double P = static_cast<double>(m) * topk;
  const double flops = 6.0 * P * hidden * inter;
  const double touched = P < experts ? P : experts;
  const double fused_us = flops / fused_flops_per_us;
  const double grouped_us = touched * (3.0 * hidden * inter * 4.5 / kDequantBytesPerUs + 2 * kLaunchUs) +
                            flops / kGroupedFlopsPerUs;
  return grouped_us < fused_us;
}

// Workspace layout (each region 256 B aligned), in this order. With 128-row align blocks the
// warp-specialized layer (detail::launch_moe_ws_layer) also needs the gathered activations xs and
// inter in the align order (maxp rows each, inter's region grown to them): total_ws, past total.
struct MoeWorkspace {
  size_t ids = 0, weights = 0, sorted = 0, experts = 0, npp = 0, counters = 0, inter = 0, slots = 0, total = 0;
  size_t inter_sorted = 0, xs = 0, total_ws = 0;
};

MoeWorkspace moe_layout(int m, int topk, int E, int H, int I, int bm) {
  MoeWorkspace w;
  const size_t P = static_cast<size_t>(m) * topk;
  const size_t maxp = static_cast<size_t>(moe_max_padded(m, topk, E, bm));
  size_t off = 0;
  w.ids = off;
  off += align256(P * 4);
  w.weights = off;
  off += align256(P * 4);
  w.sorted = off;
  off += align256(maxp * 4);
  w.experts = off;
  off += align256(maxp / bm * 4);
  w.npp = off;
  off += 256;
  w.counters = off;  // the single-token path's sum counters, one per token and 64 columns of H
  off += align256(static_cast<size_t>(std::min(m, detail::kMoeSingleMaxM) * (H / kMmaTileCols) + 1) * 4);
  w.inter = off;
  off += align256(P * I * 2);
  w.slots = off;
  off += align256(P * H * 4);
  w.total = off;
  w.total_ws = off;
  if (bm == 128) {
    w.inter_sorted = off;
    off += align256(maxp * I * 2);
    w.xs = off;
    off += align256(maxp * H * 2);
    w.total_ws = off;
  }
  return w;
}

// Act-order experts (kernels.h): the gathered copies of x (w13.k_perm) and of the intermediate
// (w2.k_perm), M * topk rows each, past the fused stages' regions (`base` = MoeWorkspace::total;
// such a layer never runs the warp-specialized layer whose buffers lie there).
struct ActOrderRegions {
  size_t xg = 0, inter_g = 0, total = 0;
};
ActOrderRegions act_order_layout(size_t base, int m, int topk, int H, int I, bool perm13, bool perm2) {
  ActOrderRegions r;
  const size_t P = static_cast<size_t>(m) * topk;
  size_t off = base;
  if (perm13) {
    r.xg = off;
    off += align256(P * H * 2);
  }
  if (perm2) {
    r.inter_g = off;
    off += align256(P * I * 2);
  }
  r.total = off;
  return r;
}
constexpr const char* kActOrderGrouped =
    "int4::fused_moe: act-order experts (k_perm) run the fused stages; MoePath::kGrouped dequantizes experts in "
    "stored row order and is refused for them (use kAuto or kFused)";

// Rows per expert on average (M * topk / E).
int64_t avg_rows(int m, int topk, int experts) { return static_cast<int64_t>(m) * topk / (experts > 0 ? experts : 1); }
// The workspace holds the align output of the largest choice, whatever the layout and whether
// wgmma runs (with it the pipelined tile takes 32-row blocks where mma.sync takes 64).
int workspace_block_m(int m, int topk, int experts) {
  const int64_t avg = avg_rows(m, topk, experts);
  const int d = moe_default_block_m(m, topk, experts), wg = kern::moe_pipelined_block_m(avg, true),
            mma = kern::moe_pipelined_block_m(avg, false);
  // Past kMoeRowsModelMinAvg rows (kMoeRowsModelMinAvgWs where 128-row blocks run warp-specialized)
  // the wgmma tiles' choice is 64 or 128 by a model of the shapes.
  return std::max({d, wg, mma, avg > kern::kMoeRowsModelMinAvgWs ? 128 : 0});
}
int tiled_block_m(int m, int topk, int experts, int hidden, int inter) {
  if (!detail::moe_pipelined_enabled()) return moe_default_block_m(m, topk, experts);
  return kern::moe_pipelined_block_m_for(m, topk, experts, hidden, inter, detail::pipelined_uses_wgmma(),
                                         detail::device_sm_count(), detail::moe_ws_takes(inter));
}

}  // namespace

int moe_default_block_m(int m, int topk, int experts) {
  // Small runs per expert want small blocks (less padding: decode), long runs fewer, larger blocks.
  const int64_t avg = avg_rows(m, topk, experts);
  return avg <= 8 ? 8 : avg <= 16 ? 16 : avg <= 32 ? 32 : 64;
}

const char* moe_path_name(MoePath p) {
  return p == MoePath::kFused ? "fused" : p == MoePath::kGrouped ? "grouped" : "auto";
}

MoePath moe_auto_path(int m, int topk, int experts, int hidden, int inter, KernelLayoutKind layout) {
  const MoePath e = env_moe_path();
  if (e != MoePath::kAuto) return e;
  const double fused = layout != KernelLayoutKind::kMmaTiled || !detail::moe_pipelined_enabled() ? kFusedFlopsPerUs
                       : detail::pipelined_uses_wgmma()                                        ? kTiledWgmmaFlopsPerUs
                                                                                                : kTiledMmaFlopsPerUs;
  return grouped_by_size(m, topk, experts, hidden, inter, fused) ? MoePath::kGrouped : MoePath::kFused;
}

Status moe_workspace_size(int m, int topk, int experts, int hidden, int inter, DType, int block_m, size_t* bytes,
                          MoePath path) {
  LOWBIT_CHECK_ARG(bytes != nullptr, "int4::moe_workspace_size: bytes is null");
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1 && experts >= 1 && hidden >= 1 && inter >= 1,
                   "int4::moe_workspace_size: m=%d topk=%d E=%d H=%d I=%d", m, topk, experts, hidden, inter);
  const int bm = block_m > 0 ? block_m : workspace_block_m(m, topk, experts);
  const size_t fused = moe_layout(m, topk, experts, hidden, inter, bm).total_ws;
  const size_t grouped = detail::moe_grouped_workspace_bytes(m, topk, experts, hidden, inter,
                                                             block_m > 0 ? block_m : kGroupedBlockM);
  if (path == MoePath::kAuto) path = env_moe_path();
  // Both needs grow with m; kAuto may take either path at this m (capture forces fused).
  if (path == MoePath::kFused)
    *bytes = fused;
  else if (path == MoePath::kGrouped)
    *bytes = grouped > fused ? grouped : fused;  // under capture a forced-by-env grouped runs fused
  else
    *bytes = grouped_by_size(m, topk, experts, hidden, inter) && grouped > fused ? grouped : fused;
  return Status::Ok();
}

Status moe_workspace_size(const KernelWeightsView& w13, const KernelWeightsView& w2, int m, int topk, int block_m,
                          size_t* bytes, MoePath path) {
  LOWBIT_CHECK_ARG(bytes != nullptr, "int4::moe_workspace_size: bytes is null");
  const int E = w13.shape.experts, H = w13.shape.k, I = w13.shape.n / 2;
  LOWBIT_CHECK_ARG(w13.shape.n % 2 == 0 && w2.shape.experts == E && w2.shape.n == H && w2.shape.k == I,
                   "int4::moe_workspace_size: w13 (E=%d N=%d K=%d) and w2 (E=%d N=%d K=%d) are not one layer's "
                   "[E, 2I, H] and [E, H, I]",
                   E, w13.shape.n, H, w2.shape.experts, w2.shape.n, w2.shape.k);
  const bool p13 = w13.k_perm != nullptr, p2 = w2.k_perm != nullptr;
  if (!p13 && !p2) return moe_workspace_size(m, topk, E, H, I, w13.shape.act, block_m, bytes, path);
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1 && E >= 1 && H >= 1 && I >= 1,
                   "int4::moe_workspace_size: m=%d topk=%d E=%d H=%d I=%d", m, topk, E, H, I);
  if (path == MoePath::kGrouped) return make_status(StatusCode::kNotSupported, "%s", kActOrderGrouped);
  // The fused stages without the warp-specialized layer, for the largest block choice at this M.
  const int bm = block_m > 0 ? block_m : workspace_block_m(m, topk, E);
  *bytes = act_order_layout(moe_layout(m, topk, E, H, I, bm).total, m, topk, H, I, p13, p2).total;
  return Status::Ok();
}

namespace {

// The weights and layer sizes fused_moe() and moe_resolved() take (not the pointers).
Status check_layer(const MoeArgs& a, const KernelWeightsView& w13, const KernelWeightsView& w2) {
  LOWBIT_RETURN_IF_ERROR(validate_weights_view(w13, "int4::fused_moe(w13)", /*act_order_ok=*/true));
  LOWBIT_RETURN_IF_ERROR(validate_weights_view(w2, "int4::fused_moe(w2)", /*act_order_ok=*/true));
  const int E = w13.shape.experts, H = w13.shape.k, I = w13.shape.n / 2;
  LOWBIT_CHECK_ARG(w13.shape.n % 2 == 0, "int4::fused_moe: w13 has N=%d rows, must be 2I", w13.shape.n);
  LOWBIT_CHECK_ARG(w2.shape.experts == E && w2.shape.n == H && w2.shape.k == I,
                   "int4::fused_moe: w2 shape E=%d N=%d K=%d does not match w13 (E=%d, H=%d, I=%d)", w2.shape.experts,
                   w2.shape.n, w2.shape.k, E, H, I);
  LOWBIT_CHECK_ARG(w13.shape.act == w2.shape.act, "int4::fused_moe: w13 and w2 activation dtypes differ");
  for (const KernelWeightsView* w : {&w13, &w2})
    LOWBIT_CHECK_ARG(w->kind == KernelLayoutKind::kNPackedInterleaved || w->kind == KernelLayoutKind::kMmaTiled,
                     "int4::fused_moe: %s is %s; the MoE kernels read N-packed or MMA-tiled expert stacks (needs H %% 32 "
                     "== 0, I %% 32 == 0; H=%d I=%d)",
                     w == &w13 ? "w13" : "w2", kernel_layout_name(w->kind), H, I);
  LOWBIT_CHECK_ARG(I % 8 == 0, "int4::fused_moe: I=%d must be a multiple of 8", I);
  LOWBIT_CHECK_ARG(a.m >= 1, "int4::fused_moe: m=%d must be >= 1", a.m);
  LOWBIT_CHECK_ARG(E <= 1024, "int4::fused_moe: E=%d above 1024", E);
  LOWBIT_CHECK_ARG(a.topk >= 1 && a.topk <= 32 && a.topk <= E, "int4::fused_moe: topk=%d outside [1, min(32, E=%d)]",
                   a.topk, E);
  LOWBIT_CHECK_ARG(static_cast<int>(a.path) <= static_cast<int>(MoePath::kGrouped), "int4::fused_moe: unknown path %d",
                   static_cast<int>(a.path));
  return Status::Ok();
}

// fused_moe's choices for one call: moe_resolved() reports them, fused_moe() runs them, so the two
// cannot drift apart.
struct LayerPlan {
  MoeResolved r;
  MoeWorkspace L;
  ActOrderRegions R;
};

// After check_layer: the path, the align block, the workspace regions (checked against
// workspace_bytes) and each GEMM's tile. `ws`: the workspace's address (fused_moe's, 16 B aligned),
// or 0 (moe_resolved: the tiles then see only the regions' offsets, whose 256 B alignment is all
// the pointers decide).
Status plan_layer(const MoeArgs& a, const KernelWeightsView& w13, const KernelWeightsView& w2, uintptr_t ws,
                  size_t workspace_bytes, bool capturing, LayerPlan* p) {
  const int E = w13.shape.experts, H = w13.shape.k, I = w13.shape.n / 2;
  LOWBIT_CHECK_ARG(!(a.path == MoePath::kGrouped && capturing),
                   "int4::fused_moe: the grouped path synchronizes the stream and cannot be captured in a CUDA graph "
                   "(use MoePath::kAuto or kFused under capture)");
  const bool act_order = w13.k_perm != nullptr || w2.k_perm != nullptr;
  if (act_order && a.path == MoePath::kGrouped) return make_status(StatusCode::kNotSupported, "%s", kActOrderGrouped);
  const bool tiled = w13.kind == KernelLayoutKind::kMmaTiled && w2.kind == KernelLayoutKind::kMmaTiled;
  MoeResolved& r = p->r;
  r = MoeResolved{};
  r.path = a.path == MoePath::kAuto
               ? moe_auto_path(a.m, a.topk, E, H, I,
                               tiled ? KernelLayoutKind::kMmaTiled : KernelLayoutKind::kNPackedInterleaved)
               : a.path;
  if (capturing || act_order) r.path = MoePath::kFused;
  if (r.path == MoePath::kGrouped) {
    r.block_m = a.block_m > 0 ? a.block_m : kGroupedBlockM;
    LOWBIT_CHECK_ARG(r.block_m >= 1 && r.block_m <= 128, "int4::fused_moe: block_m=%d outside [1, 128]", r.block_m);
    r.gemm1 = r.gemm2 = MoeTile::kDequantCublas;
    const size_t need = detail::moe_grouped_workspace_bytes(a.m, a.topk, E, H, I, r.block_m);
    LOWBIT_CHECK_ARG(workspace_bytes >= need,
                     "int4::fused_moe (grouped path): workspace of %zu bytes given, %zu needed (moe_workspace_size)",
                     workspace_bytes, need);
    return Status::Ok();
  }
  const int64_t w13_elems = static_cast<int64_t>(w13.shape.n) * w13.shape.k;  // one expert's 2I x H
  const int bm = a.block_m > 0 ? a.block_m
                 : tiled        ? tiled_block_m(a.m, a.topk, E, H, I)
                                : moe_default_block_m(a.m, a.topk, E);
  LOWBIT_CHECK_ARG(bm >= 1 && bm <= 128, "int4::fused_moe: block_m=%d outside [1, 128]", bm);
  r.block_m = bm;
  p->L = moe_layout(a.m, a.topk, E, H, I, bm);
  p->R = act_order_layout(p->L.total, a.m, a.topk, H, I, w13.k_perm != nullptr, w2.k_perm != nullptr);
  LOWBIT_CHECK_ARG(workspace_bytes >= p->R.total,
                   "int4::fused_moe: workspace of %zu bytes given, %zu needed (moe_workspace_size%s)", workspace_bytes,
                   p->R.total, act_order ? " of the views: act-order experts" : "");
  const MoeWorkspace& L = p->L;
  if (!act_order && a.m <= detail::moe_single_max_m(w13_elems) && bm == 8 && E <= 256 && tiled) {
    r.single_token = true;
    r.gemm1 = r.gemm2 = MoeTile::kDecode;
    return Status::Ok();
  }
  auto at = [ws](size_t off) { return reinterpret_cast<const void*>(ws + off); };
  const auto* slots = static_cast<const float*>(at(L.slots));
  if (!act_order && tiled && workspace_bytes >= L.total_ws &&
      detail::moe_ws_fits(w13, w2, a.m, a.topk, bm, at(L.inter_sorted), slots)) {
    r.gemm1 = r.gemm2 = MoeTile::kWarpSpecialized;
    return Status::Ok();
  }
  // Act-order: GEMM1 runs on the gathered rows as a top-1 routing of M * topk rows (fused_moe).
  const bool gather13 = w13.k_perm != nullptr;
  r.gemm1 = detail::moe_gemm_tile(true, w13, gather13 ? a.m * a.topk : a.m, gather13 ? 1 : a.topk, bm, at(L.inter));
  r.gemm2 = detail::moe_gemm_tile(false, w2, a.m, a.topk, bm, slots);
  return Status::Ok();
}

}  // namespace

const char* moe_tile_name(MoeTile t) {
  switch (t) {
    case MoeTile::kNPacked: return "npacked";
    case MoeTile::kDecode: return "decode";
    case MoeTile::kPipelined: return "pipelined";
    case MoeTile::kWarpSpecialized: return "warp-specialized";
    case MoeTile::kDequantCublas: return "dequant+cublas";
  }
  return "unknown";
}

Status moe_resolved(const MoeArgs& a, const KernelWeightsView& w13, const KernelWeightsView& w2, size_t workspace_bytes,
                    Stream stream, MoeResolved* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "int4::moe_resolved: out is null");
  LOWBIT_RETURN_IF_ERROR(check_layer(a, w13, w2));
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  LOWBIT_CUDA_RETURN(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &cap));
  LayerPlan p;
  LOWBIT_RETURN_IF_ERROR(plan_layer(a, w13, w2, 0, workspace_bytes, cap != cudaStreamCaptureStatusNone, &p));
  *out = p.r;
  return Status::Ok();
}

Status fused_moe(const MoeArgs& a, const KernelWeightsView& w13, const KernelWeightsView& w2, void* workspace,
                 size_t workspace_bytes, Stream stream) {
  LOWBIT_RETURN_IF_ERROR(check_layer(a, w13, w2));
  const int E = w13.shape.experts, H = w13.shape.k, I = w13.shape.n / 2;
  LOWBIT_CHECK_ARG(a.x && a.y, "int4::fused_moe: x or y is null");
  // Routing: the logits, or the caller's ids and weights (kernels.h), never both.
  const bool routed = a.topk_ids != nullptr || a.topk_weights != nullptr;
  LOWBIT_CHECK_ARG(!routed || (a.topk_ids != nullptr && a.topk_weights != nullptr),
                   "int4::fused_moe: topk_ids and topk_weights come together (one of them is null)");
  LOWBIT_CHECK_ARG(routed != (a.router_logits != nullptr),
                   routed ? "int4::fused_moe: router_logits and topk_ids / topk_weights both given; pass one routing"
                          : "int4::fused_moe: no routing: router_logits, or topk_ids and topk_weights, is null");
  if ((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(a.y) | reinterpret_cast<uintptr_t>(workspace)) %
          16 != 0)
    return make_status(StatusCode::kMisaligned, "int4::fused_moe: x, y and workspace must be 16 B aligned");
  cudaStream_t cst = reinterpret_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  LOWBIT_CUDA_RETURN(cudaStreamIsCapturing(cst, &cap));
  char* ws = static_cast<char*>(workspace);
  LayerPlan plan;
  LOWBIT_RETURN_IF_ERROR(plan_layer(a, w13, w2, reinterpret_cast<uintptr_t>(workspace), workspace_bytes, cap != cudaStreamCaptureStatusNone, &plan));
  const MoeResolved& r = plan.r;
  // (plan_layer checked its size for the path taken)
  LOWBIT_CHECK_ARG(workspace != nullptr, "int4::fused_moe: workspace is null (moe_workspace_size gives its size)");
  if (r.path == MoePath::kGrouped) return detail::fused_moe_grouped(a, w13, w2, r.block_m, workspace, cst);
  const int bm = r.block_m;
  const MoeWorkspace& L = plan.L;
  const ActOrderRegions& R = plan.R;
  auto* ids = reinterpret_cast<int32_t*>(ws + L.ids);
  auto* tw = reinterpret_cast<float*>(ws + L.weights);
  auto* sorted = reinterpret_cast<int32_t*>(ws + L.sorted);
  auto* eids = reinterpret_cast<int32_t*>(ws + L.experts);
  auto* npp = reinterpret_cast<int32_t*>(ws + L.npp);
  void* inter = ws + L.inter;
  auto* slots = reinterpret_cast<float*>(ws + L.slots);
  if (r.single_token) {
    // Decode of a few tokens: a block per pick, routing inside both GEMMs, the slot sum inside
    // GEMM2 (internal.h).
    LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::fused_moe", "x", a.x, w13, 16, a.m, a.topk, bm));
    LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::fused_moe", "inter", inter, w2, 8, a.m, a.topk, bm));
    detail::MoeSingleToken st;
    st.logits = a.router_logits;  // or the caller's picks (internal.h: MoeSingleToken)
    st.ids = a.topk_ids;
    st.weights = a.topk_weights;
    st.experts = E;
    st.renormalize = a.renormalize;
    st.counters = reinterpret_cast<int*>(ws + L.counters);
    st.num_counters = a.m * (H / kMmaTileCols);
    st.y = a.y;
    LOWBIT_CUDA_RETURN(detail::launch_moe_decode(true, a.x, w13, sorted, eids, npp, nullptr, a.m, a.topk, bm, inter, cst, &st));
    LOWBIT_CUDA_RETURN(detail::launch_moe_decode(false, inter, w2, sorted, eids, npp, tw, a.m, a.topk, bm, slots, cst, &st));
    return Status::Ok();
  }
  // Act-order experts (kernels.h): GEMM1 reads x gathered per pair p = token * topk + slot in
  // its expert's input order, as the rows of a top-1 routing of M * topk tokens (row p of the
  // copy is pair p's; the align output names pairs either way, so the tiles and sums are the
  // same); GEMM2 reads the intermediate gathered the same way. The GEMMs get views without
  // k_perm: their activations are in stored row order by then.
  KernelWeightsView v13 = w13, v2 = w2;
  v13.k_perm = v2.k_perm = nullptr;
  const int P = a.m * a.topk;
  const bool gather13 = w13.k_perm != nullptr, gather2 = w2.k_perm != nullptr;
  const void* x1 = gather13 ? static_cast<const void*>(ws + R.xg) : a.x;
  const int m1 = gather13 ? P : a.m, topk1 = gather13 ? 1 : a.topk;
  const void* inter2 = gather2 ? static_cast<const void*>(ws + R.inter_g) : inter;
  // Both GEMMs' inputs checked before the first launch (nothing runs on a refusal).
  LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::fused_moe", "x", x1, v13, 16, m1, topk1, bm));
  LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::fused_moe", "inter", inter2, v2, 8, a.m, a.topk, bm));
  if (routed) {  // the caller's top-k: align only (ids outside [0, E) get no rows)
    tw = const_cast<float*>(a.topk_weights);  // read only below
    LOWBIT_RETURN_IF_ERROR(moe_align(a.topk_ids, a.m, a.topk, E, bm, sorted, eids, npp, stream));
  } else {
    LOWBIT_RETURN_IF_ERROR(
        moe_route(a.router_logits, a.m, E, a.topk, a.renormalize, bm, ids, tw, sorted, eids, npp, stream));
  }
  // The slot sum leaves out caller ids outside [0, E) (their slots were never written).
  const int32_t* sum_ids = routed ? a.topk_ids : nullptr;
  // 128-row align blocks on the warp-specialized tile where the workspace has room for its
  // buffers (a workspace sized for another block_m runs the pipelined tile below).
  if (r.gemm1 == MoeTile::kWarpSpecialized) {
    LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::fused_moe", "x", a.x, w13, 16, a.m, a.topk, bm));
    LOWBIT_RETURN_IF_ERROR(
        detail::validate_moe_gemm("int4::fused_moe", "inter", ws + L.inter_sorted, w2, 8, a.m, a.topk, bm));
    bool launched = false;
    LOWBIT_CUDA_RETURN(detail::launch_moe_ws_layer(a.x, ws + L.xs, w13, w2, sorted, eids, npp, tw, a.m, a.topk,
                                                   ws + L.inter_sorted, slots, cst,
                                                   detail::moe_early_down_enabled(), &launched));
    if (launched) return moe_sum(slots, a.m, a.topk, H, w13.shape.act, a.y, stream, sum_ids, E);
  }
  // Act-order: the gathers (their views and inputs above).
  const int32_t* pair_ids = routed ? a.topk_ids : ids;
  if (gather13)
    LOWBIT_CUDA_RETURN(detail::launch_gather_moe_act_order(a.x, a.topk, pair_ids, P, E, w13.k_perm, H, ws + R.xg, cst));
  LOWBIT_RETURN_IF_ERROR(moe_gemm1(x1, v13, sorted, eids, npp, m1, topk1, bm, inter, stream));
  if (gather2)
    LOWBIT_CUDA_RETURN(detail::launch_gather_moe_act_order(inter, 1, pair_ids, P, E, w2.k_perm, I, ws + R.inter_g, cst));
  // GEMM2 right after GEMM1: on the decode tile its weights may stream during GEMM1's tail
  // (internal.h: launch_moe_decode's ids_early; only with MMA-tiled GEMM1, whose blocks wait for
  // the routing before letting GEMM2 launch, and not after a gather, an ordinary launch that ran
  // once GEMM1 completed).
  LOWBIT_RETURN_IF_ERROR(detail::moe_gemm2_launch(inter2, v2, sorted, eids, npp, tw, a.m, a.topk, bm, slots, cst,
                                                  w13.kind == KernelLayoutKind::kMmaTiled &&
                                                      w2.kind == KernelLayoutKind::kMmaTiled && !gather2));
  LOWBIT_RETURN_IF_ERROR(moe_sum(slots, a.m, a.topk, H, w13.shape.act, a.y, stream, sum_ids, E));
  return Status::Ok();
}

}  // namespace lowbit::int4
