// Argument checks shared by the MoE stages: routing (moe_topk.cu, moe_align.cu and the
// one-launch moe_route.cu) and the two GEMMs (moe_gemm1.cu, moe_gemm2.cu): the same rules,
// with the caller's name in every message.
#include <cstdint>

#include "kernels/int4/internal.h"

namespace lowbit::int4::detail {

Status validate_topk_args(const char* who, int m, int experts, int topk) {
  LOWBIT_CHECK_ARG(m >= 1, "%s: m=%d must be >= 1", who, m);
  LOWBIT_CHECK_ARG(experts >= 1 && experts <= 1024, "%s: experts=%d outside [1, 1024]", who, experts);
  LOWBIT_CHECK_ARG(topk >= 1 && topk <= 32 && topk <= experts, "%s: topk=%d outside [1, min(32, E=%d)]", who, topk,
                   experts);
  return Status::Ok();
}

Status validate_align_args(const char* who, int m, int topk, int experts, int block_m) {
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1, "%s: m=%d topk=%d must be >= 1", who, m, topk);
  LOWBIT_CHECK_ARG(experts >= 1 && experts <= 1024, "%s: experts=%d outside [1, 1024]", who, experts);
  LOWBIT_CHECK_ARG(block_m >= 1 && block_m <= 128, "%s: block_m=%d outside [1, 128]", who, block_m);
  const int64_t maxp = moe_max_padded(m, topk, experts, block_m);
  LOWBIT_CHECK_ARG(maxp < (int64_t{1} << 31), "%s: m*topk too large (%lld padded slots)", who,
                   static_cast<long long>(maxp));
  return Status::Ok();
}

Status validate_moe_gemm(const char* who, const char* act_name, const void* act, const KernelWeightsView& w,
                         int n_multiple, int m, int topk, int block_m) {
  const bool tiled = w.kind == KernelLayoutKind::kMmaTiled;
  LOWBIT_CHECK_ARG(w.kind == KernelLayoutKind::kNPackedInterleaved || tiled,
                   "%s: the weight must be N-packed or MMA-tiled (got %s)", who, kernel_layout_name(w.kind));
  // MMA-tiled: whole 64-column groups (gate/up: per half, so N % 128 for w13).
  if (tiled) n_multiple = n_multiple == 16 ? 128 : 64;
  LOWBIT_CHECK_ARG(w.shape.n % n_multiple == 0 && w.shape.k % kKernelKChunk == 0,
                   "%s: needs N %% %d == 0 and K %% 32 == 0 for the %s layout (N=%d K=%d)", who, n_multiple,
                   kernel_layout_name(w.kind), w.shape.n, w.shape.k);
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1 && block_m >= 1 && block_m <= 128, "%s: m=%d topk=%d block_m=%d", who, m, topk,
                   block_m);
  const long long blocks = static_cast<long long>(moe_max_padded(m, topk, w.shape.experts, block_m) / block_m);
  LOWBIT_CHECK_ARG(blocks <= 65535, "%s: %lld sorted blocks exceed the grid limit 65535 (raise block_m)", who, blocks);
  if (tiled) {
    const long long rows = static_cast<long long>(moe_decode_grid_rows(m, topk, w.shape.experts, block_m));
    LOWBIT_CHECK_ARG(rows <= 65535, "%s: %lld align-block parts exceed the grid limit 65535 (raise block_m)", who,
                     rows);
  }
  // The weight's own checks (null pointers, per-layout alignment: MMA-tiled qweight 16 B for
  // the bulk copies and scales/zeros 16 B for the lanes' vector loads, N-packed scales/zeros
  // 16 B), then the activations' 16 B.
  LOWBIT_RETURN_IF_ERROR(validate_weights_view(w, who));
  if (reinterpret_cast<uintptr_t>(act) % 16 != 0)
    return make_status(StatusCode::kMisaligned, "%s: %s=%p must be 16 B aligned", who, act_name, act);
  return Status::Ok();
}

}  // namespace lowbit::int4::detail
