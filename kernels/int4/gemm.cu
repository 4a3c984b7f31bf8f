// Dense W4A16 GEMM entry point: validation, workspace sizing, kernel choice.
//   MMA-tiled layout (dense default): tiled_auto_path() (pipelined_plan.h) picks
//     gemm_decode.cu (M <= 8..32 by group size and weight), gemm_pipelined.cu (up to M = 512 by
//     weight size), gemm_dequant.cu (slab from the tiled words; larger M)
//   N-packed layout, M <  128 (64 when K < 8192) -> gemm_skinny.cu (streaming, split-K, mma)
//   N-packed layout, larger M                    -> gemm_dequant.cu (dequantize to a slab + cuBLAS)
//   gemm_tc.cu (tiled WMMA) only when forced (GemmPath::kTiled)
//   K-packed layout                    -> gemm_kpacked.cu (any N, even K)
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/int4/decode_plan.h"
#include "kernels/int4/internal.h"
#include "kernels/int4/pipelined_plan.h"
#include "lowbit/detail/cuda_check.h"

namespace lowbit::int4 {

namespace {
constexpr int kSkinnyMaxM = 512;  // the skinny kernel's limit (32-row tiles over grid z)
// kAuto takes dequant + cuBLAS from kDequantMinM rows, and from kDequantMinMShortK rows when
// K < kShortK (measured on H200, docs/int4-kernels.md: at M = 128 it beats the skinny
// kernel on every Llama-3 projection; at M = 64 on those with K = 4096 and 14336, while the
// skinny kernel still wins on three of the four 70B shapes, K >= 8192).
constexpr int kDequantMinM = 128, kDequantMinMShortK = 64, kShortK = 8192;
bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }
// Bytes of the act-order copy of x at the head of gemm()'s workspace (256 B granules, so that
// the path's own workspace behind it keeps its alignment).
size_t act_order_x_bytes(int m, int k) { return (static_cast<size_t>(m) * k * 2 + 255) / 256 * 256; }
// Workspace bytes the skinny kernel needs at exactly this M on the N-packed layout (the
// MMA-tiled decode kernel: path_need below). gemm_workspace_size() takes a shape, not a layout:
// it sizes for the N-packed kernel whenever the shape can be N-packed, so one workspace
// serves a dense weight repacked either way.
size_t skinny_need(const WeightShape& shape, int m) {
  if (m > kSkinnyMaxM || shape.n % 8 != 0 || shape.k % kKernelKChunk != 0) return 0;
  const int splits = detail::skinny_splits(m, shape.n, shape.k);
  return splits > 1 ? static_cast<size_t>(splits) * m * shape.n * sizeof(float) : 0;
}
// LOWBIT_INT4_GEMM_PATH, read once: replaces kAuto where the path can serve the M.
GemmPath env_path() {
  static const GemmPath v = [] {
    const char* e = std::getenv("LOWBIT_INT4_GEMM_PATH");
    if (e == nullptr) return GemmPath::kAuto;
    if (std::strcmp(e, "skinny") == 0) return GemmPath::kSkinny;
    if (std::strcmp(e, "tiled") == 0) return GemmPath::kTiled;
    if (std::strcmp(e, "cublas") == 0) return GemmPath::kDequantCublas;
    if (std::strcmp(e, "pipelined") == 0) return GemmPath::kPipelined;
    return GemmPath::kAuto;
  }();
  return v;
}
// The path gemm() takes for a weight of this layout and shape at this M (kAuto on the
// MMA-tiled layout: tiled_auto_path() of pipelined_plan.h).
GemmPath resolve(GemmPath requested, int m, int n, int k, int group_len, KernelLayoutKind kind) {
  const bool tiled = kind == KernelLayoutKind::kMmaTiled;
  if (requested == GemmPath::kAuto) {
    requested = env_path();
    if (requested == GemmPath::kSkinny && m > kSkinnyMaxM) requested = GemmPath::kAuto;
    if (requested == GemmPath::kTiled && tiled) requested = GemmPath::kAuto;        // N-packed only
    if (requested == GemmPath::kPipelined && !tiled) requested = GemmPath::kAuto;   // MMA-tiled only
  }
  if (requested != GemmPath::kAuto) return requested;
  if (tiled)
    return kern::tiled_auto_path(m, n, k, group_len, detail::pipelined_uses_wgmma(), detail::device_sm_count(),
                                 detail::pipe_split_tail_on());
  const bool big = m >= kDequantMinM || (m >= kDequantMinMShortK && k < kShortK);
  return big ? GemmPath::kDequantCublas : GemmPath::kSkinny;
}
size_t path_need(const WeightShape& shape, GemmPath p, int m, bool tiled = false) {
  switch (p) {
    case GemmPath::kSkinny: {
      // MMA-tiled: the decode kernel's copy of x at M = 9..32 (gemm_decode.cu); it runs
      // without it (reading x itself) when the caller gives less.
      const size_t xs = tiled && m >= kern::kDecodeXStepsMinM && m <= kern::kDecodeXStepsMaxM
                            ? static_cast<size_t>(kern::decode_x_steps_bytes(m, shape.k))
                            : 0;
      return std::max(skinny_need(shape, m), xs);
    }
    case GemmPath::kDequantCublas: return detail::dequant_gemm_workspace_bytes(shape);
    case GemmPath::kPipelined: return tiled ? detail::pipelined_sk_workspace_bytes(shape, m) : 0;  // stream-K sums
    default: return 0;
  }
}
}  // namespace

const char* gemm_path_name(GemmPath p) {
  switch (p) {
    case GemmPath::kAuto: return "auto";
    case GemmPath::kSkinny: return "skinny";
    case GemmPath::kTiled: return "tiled";
    case GemmPath::kDequantCublas: return "cublas";
    case GemmPath::kPipelined: return "pipelined";
  }
  return "?";
}

Status validate_weights_view(const KernelWeightsView& w, const char* who, bool act_order_ok) {
  const WeightShape& s = w.shape;
  if (w.k_perm != nullptr && !act_order_ok)
    return make_status(StatusCode::kNotSupported,
                       "%s: act-order weight (k_perm set): this entry point takes activations in stored row order; "
                       "int4::gemm and fused_moe gather the activations themselves, this one does not", who);
  if (w.k_perm != nullptr && !aligned(w.k_perm, 4))
    return make_status(StatusCode::kMisaligned, "%s: k_perm must be 4 B aligned", who);
  LOWBIT_CHECK_ARG(s.experts >= 1 && s.n >= 1 && s.k >= 2, "%s: bad weight shape E=%d N=%d K=%d", who, s.experts, s.n,
                   s.k);
  LOWBIT_CHECK_ARG(s.k % 2 == 0, "%s: K=%d must be even", who, s.k);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.group_size == 32 || s.group_size == 64 || s.group_size == 128,
                   "%s: group_size=%d not in {32, 64, 128, -1}", who, s.group_size);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.k % s.group_size == 0, "%s: group_size=%d does not divide K=%d",
                   who, s.group_size, s.k);
  LOWBIT_CHECK_ARG(w.qweight != nullptr && w.scales != nullptr, "%s: qweight or scales is null", who);
  LOWBIT_CHECK_ARG(s.symmetric == (w.zeros == nullptr), "%s: zeros must be null iff symmetric (symmetric=%d, zeros=%p)",
                   who, static_cast<int>(s.symmetric), static_cast<const void*>(w.zeros));
  if (w.kind == KernelLayoutKind::kMmaTiled) {
    LOWBIT_CHECK_ARG(s.n % kMmaTileCols == 0 && s.k % kKernelKChunk == 0,
                     "%s: MMA-tiled layout needs N %% 64 == 0 and K %% 32 == 0 (N=%d K=%d)", who, s.n, s.k);
    if (!aligned(w.qweight, 16) || !aligned(w.scales, 16) || (w.zeros && !aligned(w.zeros, 16)))
      return make_status(StatusCode::kMisaligned, "%s: MMA-tiled qweight, scales and zeros must be 16 B aligned", who);
  } else if (w.kind == KernelLayoutKind::kNPackedInterleaved) {
    LOWBIT_CHECK_ARG(s.n % 8 == 0 && s.k % kKernelKChunk == 0,
                     "%s: N-packed layout needs N %% 8 == 0 and K %% 32 == 0 (N=%d K=%d); repack as K-packed", who, s.n,
                     s.k);
    if (!aligned(w.qweight, 4) || !aligned(w.scales, 16) || (w.zeros && !aligned(w.zeros, 16)))
      return make_status(StatusCode::kMisaligned, "%s: qweight must be 4 B and scales/zeros 16 B aligned", who);
  } else {
    LOWBIT_CHECK_ARG(w.kind == KernelLayoutKind::kKPacked, "%s: unknown layout kind %d", who, static_cast<int>(w.kind));
    if (!aligned(w.scales, 2) || (w.zeros && !aligned(w.zeros, 2)))
      return make_status(StatusCode::kMisaligned, "%s: scales/zeros must be 2 B aligned", who);
  }
  return Status::Ok();
}

Status gemm_workspace_size(const WeightShape& shape, int m, size_t* bytes, GemmPath path) {
  LOWBIT_CHECK_ARG(bytes != nullptr, "int4::gemm_workspace_size: bytes is null");
  LOWBIT_CHECK_ARG(m >= 1 && shape.n >= 1 && shape.k >= 2, "int4::gemm_workspace_size: m=%d n=%d k=%d", m, shape.n,
                   shape.k);
  // The maximum over every M' <= m, so that a workspace sized once for the largest M
  // serves every smaller one (split-K is not monotone in M; the path changes with M).
  *bytes = 0;
  if (kernel_layout_for(shape) == KernelLayoutKind::kKPacked) return Status::Ok();
  // Either word layout the shape allows (a dense weight may be forced N-packed).
  const bool tiled = kernel_layout_for(shape) == KernelLayoutKind::kMmaTiled;
  auto need_at = [&](int mm) {
    const size_t b = path_need(shape, resolve(path, mm, shape.n, shape.k, shape.group_len(), KernelLayoutKind::kNPackedInterleaved), mm);
    const size_t bt = tiled ? path_need(shape, resolve(path, mm, shape.n, shape.k, shape.group_len(), KernelLayoutKind::kMmaTiled), mm, true) : 0;
    return b > bt ? b : bt;
  };
  // Every M' up to the skinny range and kAuto's time-model range (pipelined_plan.h), where the
  // need or the path changes with M; beyond them neither does, so m itself.
  const int top = std::min(m, std::max(kSkinnyMaxM, kern::kPipeModelMaxM));
  for (int mm = 1; mm <= top; ++mm) *bytes = std::max(*bytes, need_at(mm));
  if (m > top) *bytes = std::max(*bytes, need_at(m));
  return Status::Ok();
}

Status gemm_workspace_size(const KernelWeightsView& w, int m, size_t* bytes, GemmPath path) {
  LOWBIT_RETURN_IF_ERROR(gemm_workspace_size(w.shape, m, bytes, path));
  if (w.k_perm != nullptr) *bytes += act_order_x_bytes(m, w.shape.k);
  return Status::Ok();
}

GemmPath gemm_resolved_path(const WeightShape& shape, KernelLayoutKind kind, int m, GemmPath requested) {
  if (kind == KernelLayoutKind::kKPacked) return GemmPath::kAuto;
  return resolve(requested, m, shape.n, shape.k, shape.group_len(), kind);
}

namespace {
// The dequant + cuBLAS path after `gather` (the act-order copy of x, or nothing): its workspace
// is checked first, so that nothing is launched for a call it would refuse.
template <class Gather>
Status gemm_dequant_after(Gather& gather, const GemmArgs& a, const KernelWeightsView& w, void* workspace,
                          size_t workspace_bytes, cudaStream_t st) {
  const size_t need = detail::dequant_gemm_workspace_bytes(w.shape);
  LOWBIT_CHECK_ARG(workspace != nullptr && workspace_bytes >= need,
                   "int4::gemm (dequant + cuBLAS path): workspace of %zu bytes given, %zu needed (gemm_workspace_size)",
                   workspace_bytes, need);
  LOWBIT_CUDA_RETURN(gather());
  return detail::gemm_dequant_cublas(a.x, a.y, a.m, w, a.expert, workspace, workspace_bytes, st);
}
}  // namespace

Status gemm(const GemmArgs& args, const KernelWeightsView& w, void* workspace, size_t workspace_bytes, Stream stream) {
  LOWBIT_RETURN_IF_ERROR(validate_weights_view(w, "int4::gemm", /*act_order_ok=*/true));
  LOWBIT_CHECK_ARG(args.x != nullptr && args.y != nullptr, "int4::gemm: x or y is null");
  LOWBIT_CHECK_ARG(args.m >= 1, "int4::gemm: m=%d must be >= 1", args.m);
  LOWBIT_CHECK_ARG(args.expert >= 0 && args.expert < w.shape.experts, "int4::gemm: expert=%d outside [0, %d)",
                   args.expert, w.shape.experts);
  LOWBIT_CHECK_ARG(static_cast<int>(args.path) <= static_cast<int>(GemmPath::kPipelined),
                   "int4::gemm: unknown path %d", static_cast<int>(args.path));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  GemmArgs a = args;
  if (w.k_perm != nullptr) {
    // Act-order: the weight's rows are in stored (group) order, so the kernels take x[:, k_perm],
    // gathered into the head of the workspace; the path's own workspace follows it.
    const size_t xb = act_order_x_bytes(a.m, w.shape.k);
    LOWBIT_CHECK_ARG(workspace != nullptr && workspace_bytes >= xb,
                     "int4::gemm: act-order weight: workspace of %zu bytes given, at least %zu needed for x[:, k_perm] "
                     "(gemm_workspace_size(view, ...))", workspace_bytes, xb);
    if (!aligned(workspace, 16)) return make_status(StatusCode::kMisaligned, "int4::gemm: workspace not 16 B aligned");
    if (!aligned(a.x, 2)) return make_status(StatusCode::kMisaligned, "int4::gemm: x must be 2 B aligned");
    a.x = workspace;
    workspace = static_cast<char*>(workspace) + xb;
    workspace_bytes -= xb;
  }
  // Launched right before the path's kernel, once every check has passed.
  auto gather_x = [&]() -> cudaError_t {
    if (w.k_perm == nullptr) return cudaSuccess;
    return detail::launch_gather_act_order(args.x, const_cast<void*>(a.x),
                                           w.k_perm + static_cast<size_t>(a.expert) * w.shape.k, a.m, w.shape.k, st);
  };
  if (w.kind == KernelLayoutKind::kKPacked) {
    LOWBIT_CHECK_ARG(a.path == GemmPath::kAuto, "int4::gemm: path %s needs the %s layout (this weight is K-packed)",
                     gemm_path_name(a.path), a.path == GemmPath::kPipelined ? "MMA-tiled" : "N-packed");
    if (!aligned(a.x, 2) || !aligned(a.y, 2))
      return make_status(StatusCode::kMisaligned, "int4::gemm: x and y must be 2 B aligned");
    LOWBIT_CUDA_RETURN(gather_x());
    LOWBIT_CUDA_RETURN(detail::launch_gemm_kpacked(a.x, a.y, a.m, w, a.expert, st));
    return Status::Ok();
  }
  if (!aligned(a.x, 16) || !aligned(a.y, 16))
    return make_status(StatusCode::kMisaligned, "int4::gemm: x=%p and y=%p must be 16 B aligned (16 B vector access)",
                       a.x, a.y);
  const GemmPath path = resolve(a.path, a.m, w.shape.n, w.shape.k, w.shape.group_len(), w.kind);
  if (w.kind == KernelLayoutKind::kMmaTiled) {
    LOWBIT_CHECK_ARG(path != GemmPath::kTiled, "int4::gemm: path tiled needs the N-packed layout (this weight is %s)",
                     kernel_layout_name(w.kind));
    if (path == GemmPath::kDequantCublas) return gemm_dequant_after(gather_x, a, w, workspace, workspace_bytes, st);
    if (path == GemmPath::kPipelined) {
      // The kernel addresses x with 32-bit element offsets (kAuto takes it up to M = 1024).
      LOWBIT_CHECK_ARG(static_cast<uint64_t>(a.m) * static_cast<uint64_t>(w.shape.k) < (uint64_t{1} << 32),
                       "int4::gemm: path pipelined needs M * K < 2^32 (M=%d K=%d)", a.m, w.shape.k);
      LOWBIT_CUDA_RETURN(gather_x());
      LOWBIT_CUDA_RETURN(detail::launch_gemm_pipelined(a.x, a.y, a.m, w, a.expert, st, workspace, workspace_bytes));
      return Status::Ok();
    }
    LOWBIT_CHECK_ARG(a.m <= kSkinnyMaxM, "int4::gemm: the decode path serves M <= %d (m=%d)", kSkinnyMaxM, a.m);
    LOWBIT_CUDA_RETURN(gather_x());
    LOWBIT_CUDA_RETURN(detail::launch_gemm_decode(a.x, a.y, a.m, w, a.expert, workspace, workspace_bytes, st));
    return Status::Ok();
  }
  LOWBIT_CHECK_ARG(path != GemmPath::kPipelined, "int4::gemm: path pipelined needs the MMA-tiled layout (this weight is %s)",
                   kernel_layout_name(w.kind));
  if (path == GemmPath::kTiled) {
    LOWBIT_CUDA_RETURN(gather_x());
    LOWBIT_CUDA_RETURN(detail::launch_gemm_tc(a.x, a.y, a.m, w, a.expert, st));
    return Status::Ok();
  }
  if (path == GemmPath::kDequantCublas) return gemm_dequant_after(gather_x, a, w, workspace, workspace_bytes, st);
  LOWBIT_CHECK_ARG(a.m <= kSkinnyMaxM, "int4::gemm: the skinny path serves M <= %d (m=%d)", kSkinnyMaxM, a.m);
  const size_t need = skinny_need(w.shape, a.m);  // exact for this M (<= gemm_workspace_size)
  if (need > 0) {
    LOWBIT_CHECK_ARG(workspace != nullptr && workspace_bytes >= need,
                     "int4::gemm: workspace of %zu bytes given, %zu needed (gemm_workspace_size)", workspace_bytes,
                     need);
    if (!aligned(workspace, 16)) return make_status(StatusCode::kMisaligned, "int4::gemm: workspace not 16 B aligned");
  }
  LOWBIT_CUDA_RETURN(gather_x());
  LOWBIT_CUDA_RETURN(detail::launch_gemm_skinny(a.x, a.y, a.m, w, a.expert, static_cast<float*>(workspace), st));
  return Status::Ok();
}

}  // namespace lowbit::int4
