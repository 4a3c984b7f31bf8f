// MoE GEMM2 on the shared decode tensor-core tile (skinny_tile.cuh, mode kSkMoeDown): per
// align block of one expert, slot_out[p, :] = topk_weight[p] * (inter[p] W2^T) with
// w2 [E, H, I], fp32 per (token, slot) rows (no atomics), so the top-k sum (moe_sum.cu)
// stays deterministic. Grid as in moe_gemm1.cu; padding blocks and rows exit before any K loop.
#include "kernels/int4/internal.h"
#include "kernels/int4/skinny_tile.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

template <typename T, int NT>
cudaError_t launch(const void* inter, const KernelWeightsView& w, const int32_t* sorted_ids, const int32_t* expert_ids,
                   const int32_t* npp, const float* tw, int m, int topk, int bm, float* slot_out, cudaStream_t st) {
  const int E = w.shape.experts, H = w.shape.n, I = w.shape.k;
  const int64_t max_blocks = moe_max_padded(m, topk, E, bm) / bm;
  const int64_t P = static_cast<int64_t>(m) * topk;
  const int blocks = static_cast<int>(max_blocks < P ? max_blocks : P);
  const int passes = ceil_div(bm, 8 * NT);
  const int busy = (blocks < E ? blocks : E) * passes;
  const SkinnyPlan plan = skinny_plan(H, false, busy, I / kKernelKChunk, NT);
  SkinnyParams p;
  p.x = inter;
  p.out = slot_out;
  p.qw = static_cast<const uint32_t*>(w.qweight);
  p.scales = w.scales;
  p.zeros = w.zeros;
  p.qw_estride = static_cast<size_t>(I) * (H / 8);
  p.sc_estride = static_cast<size_t>(w.shape.num_groups()) * H;
  p.M = m;
  p.N = H;
  p.nw = H / 8;
  p.K = I;
  p.G = w.shape.group_len();
  p.gshift = skinny_gshift(p.G, p.K);
  p.chunks = I / kKernelKChunk;
  p.splits = plan.splits;
  p.wn = plan.wn;
  p.vec16 = skinny_vec16(p.qw, p.nw, p.nw, p.qw_estride);
  p.sorted_ids = sorted_ids;
  p.expert_ids = expert_ids;
  p.npp = npp;
  p.topk_weights = tw;
  p.topk = topk;
  p.BM = bm;
  return launch_skinny<T, NT, kSkMoeDown>(p, plan.tiles, static_cast<unsigned>(blocks), static_cast<unsigned>(passes),
                                         st);
}

template <typename T>
cudaError_t launch_t(const void* inter, const KernelWeightsView& w, const int32_t* sorted_ids,
                     const int32_t* expert_ids, const int32_t* npp, const float* tw, int m, int topk, int bm,
                     float* slot_out, cudaStream_t st) {
  switch (moe_tile_nt(bm)) {
    case 1: return launch<T, 1>(inter, w, sorted_ids, expert_ids, npp, tw, m, topk, bm, slot_out, st);
    case 2: return launch<T, 2>(inter, w, sorted_ids, expert_ids, npp, tw, m, topk, bm, slot_out, st);
    default: return launch<T, 4>(inter, w, sorted_ids, expert_ids, npp, tw, m, topk, bm, slot_out, st);
  }
}

}  // namespace
}  // namespace kern

Status detail::moe_gemm2_launch(const void* inter, const KernelWeightsView& w2, const int32_t* sorted_ids,
                                const int32_t* expert_ids, const int32_t* num_post_padded, const float* topk_weights,
                                int m, int topk, int block_m, float* slot_out, cudaStream_t st, bool ids_early) {
  LOWBIT_CHECK_ARG(inter && sorted_ids && expert_ids && num_post_padded && topk_weights && slot_out,
                   "int4::moe_gemm2: null pointer");
  LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::moe_gemm2", "inter", inter, w2, 8, m, topk, block_m));
  ids_early = ids_early && detail::moe_early_down_enabled();  // LOWBIT_INT4_MOE_EARLY=0: off on both tiles
  const MoeTile tile = detail::moe_gemm_tile(false, w2, m, topk, block_m, slot_out);
  if (tile == MoeTile::kPipelined) {
    LOWBIT_CUDA_RETURN(detail::launch_moe_pipelined(false, inter, w2, sorted_ids, expert_ids, num_post_padded,
                                                    topk_weights, m, topk, block_m, slot_out, st, ids_early));
    return Status::Ok();
  }
  if (tile == MoeTile::kDecode) {
    LOWBIT_CUDA_RETURN(detail::launch_moe_decode(false, inter, w2, sorted_ids, expert_ids, num_post_padded,
                                                 topk_weights, m, topk, block_m, slot_out, st, nullptr, ids_early));
    return Status::Ok();
  }
  LOWBIT_CUDA_RETURN(w2.shape.act == DType::kF16
                         ? kern::launch_t<__half>(inter, w2, sorted_ids, expert_ids, num_post_padded, topk_weights, m,
                                                  topk, block_m, slot_out, st)
                         : kern::launch_t<__nv_bfloat16>(inter, w2, sorted_ids, expert_ids, num_post_padded,
                                                         topk_weights, m, topk, block_m, slot_out, st));
  return Status::Ok();
}

Status moe_gemm2(const void* inter, const KernelWeightsView& w2, const int32_t* sorted_ids, const int32_t* expert_ids,
                 const int32_t* num_post_padded, const float* topk_weights, int m, int topk, int block_m,
                 float* slot_out, Stream stream) {
  return detail::moe_gemm2_launch(inter, w2, sorted_ids, expert_ids, num_post_padded, topk_weights, m, topk, block_m,
                                  slot_out, reinterpret_cast<cudaStream_t>(stream), false);
}

}  // namespace lowbit::int4
