// MoE GEMM1 on the shared decode tensor-core tile (skinny_tile.cuh, mode kSkMoeGateUp):
// per align block of one expert, inter[p] = silu(x[p/topk] W_gate^T) * (x[p/topk] W_up^T)
// with w13 [E, 2I, H]. A block's columns are half gate octets and half up octets (I/8 words
// apart), so gate and up column n meet in the reduction epilogue (no [M*topk, 2I]
// intermediate). Grid: x = column tile x split-K (cluster), y = align block (only the
// min(#blocks, M*topk) that can hold rows; the rest exit at once: past num_post_padded),
// z = pass of 8 NT rows. Activation rows are gathered by sorted id; padding rows cost no K loop.
#include "kernels/int4/internal.h"
#include "kernels/int4/skinny_tile.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

template <typename T, int NT>
cudaError_t launch(const void* x, const KernelWeightsView& w, const int32_t* sorted_ids, const int32_t* expert_ids,
                   const int32_t* npp, int m, int topk, int bm, void* inter, cudaStream_t st) {
  const int E = w.shape.experts, H = w.shape.k, I = w.shape.n / 2;
  const int64_t max_blocks = moe_max_padded(m, topk, E, bm) / bm;
  const int64_t P = static_cast<int64_t>(m) * topk;
  // Align blocks that can hold rows: <= one per (token, slot) pair.
  const int blocks = static_cast<int>(max_blocks < P ? max_blocks : P);
  const int passes = ceil_div(bm, 8 * NT);
  // Planning estimate of the busy blocks: at most one per expert (decode: distinct experts).
  const int busy = (blocks < E ? blocks : E) * passes;
  const SkinnyPlan plan = skinny_plan(I, true, busy, H / kKernelKChunk, NT);
  SkinnyParams p;
  p.x = x;
  p.out = inter;
  p.qw = static_cast<const uint32_t*>(w.qweight);
  p.scales = w.scales;
  p.zeros = w.zeros;
  p.qw_estride = static_cast<size_t>(H) * (w.shape.n / 8);
  p.sc_estride = static_cast<size_t>(w.shape.num_groups()) * w.shape.n;
  p.M = m;
  p.N = I;
  p.nw = w.shape.n / 8;
  p.K = H;
  p.G = w.shape.group_len();
  p.gshift = skinny_gshift(p.G, p.K);
  p.chunks = H / kKernelKChunk;
  p.splits = plan.splits;
  p.wn = plan.wn;
  p.vec16 = skinny_vec16(p.qw, p.nw, I / 8, p.qw_estride);
  p.sorted_ids = sorted_ids;
  p.expert_ids = expert_ids;
  p.npp = npp;
  p.topk = topk;
  p.BM = bm;
  return launch_skinny<T, NT, kSkMoeGateUp>(p, plan.tiles, static_cast<unsigned>(blocks), static_cast<unsigned>(passes),
                                           st);
}

template <typename T>
cudaError_t launch_t(const void* x, const KernelWeightsView& w, const int32_t* sorted_ids, const int32_t* expert_ids,
                     const int32_t* npp, int m, int topk, int bm, void* inter, cudaStream_t st) {
  switch (moe_tile_nt(bm)) {
    case 1: return launch<T, 1>(x, w, sorted_ids, expert_ids, npp, m, topk, bm, inter, st);
    case 2: return launch<T, 2>(x, w, sorted_ids, expert_ids, npp, m, topk, bm, inter, st);
    default: return launch<T, 4>(x, w, sorted_ids, expert_ids, npp, m, topk, bm, inter, st);
  }
}

}  // namespace
}  // namespace kern

Status moe_gemm1(const void* x, const KernelWeightsView& w13, const int32_t* sorted_ids, const int32_t* expert_ids,
                 const int32_t* num_post_padded, int m, int topk, int block_m, void* inter, Stream stream) {
  LOWBIT_CHECK_ARG(x && sorted_ids && expert_ids && num_post_padded && inter, "int4::moe_gemm1: null pointer");
  LOWBIT_RETURN_IF_ERROR(detail::validate_moe_gemm("int4::moe_gemm1", "x", x, w13, 16, m, topk, block_m));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  const MoeTile tile = detail::moe_gemm_tile(true, w13, m, topk, block_m, inter);
  if (tile == MoeTile::kPipelined) {
    LOWBIT_CUDA_RETURN(detail::launch_moe_pipelined(true, x, w13, sorted_ids, expert_ids, num_post_padded, nullptr, m,
                                                    topk, block_m, inter, st));
    return Status::Ok();
  }
  if (tile == MoeTile::kDecode) {
    LOWBIT_CUDA_RETURN(detail::launch_moe_decode(true, x, w13, sorted_ids, expert_ids, num_post_padded, nullptr, m,
                                                 topk, block_m, inter, st));
    return Status::Ok();
  }
  LOWBIT_CUDA_RETURN(w13.shape.act == DType::kF16
                         ? kern::launch_t<__half>(x, w13, sorted_ids, expert_ids, num_post_padded, m, topk, block_m,
                                                  inter, st)
                         : kern::launch_t<__nv_bfloat16>(x, w13, sorted_ids, expert_ids, num_post_padded, m, topk,
                                                         block_m, inter, st));
  return Status::Ok();
}

}  // namespace lowbit::int4
