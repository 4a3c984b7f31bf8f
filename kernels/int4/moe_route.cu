// MoE routing in one launch for decode-sized batches: top-k (one warp per token, the
// block's 8 warps over the tokens) and then the align of the block's own ids from shared
// memory, so the pairs never round-trip through global memory between two launches. Same
// outputs as moe_topk followed by moe_align (the device code is shared: moe_routing.cuh).
// Larger batches run the two kernels (one warp per token over the whole GPU for top-k).
#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/moe_routing.cuh"
#include "kernels/int4/internal.h"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

// One block: 8 warps share the tokens for top-k; above ~8 tokens per warp the serial top-k
// outweighs the launch saved.
constexpr int kRouteOneLaunchMaxTokens = 64;

__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const float* __restrict__ logits, int M, int E, int topk, bool renorm, int BM, int max_padded,
                     int32_t* __restrict__ ids, float* __restrict__ weights, int32_t* __restrict__ sorted_ids,
                     int32_t* __restrict__ expert_ids, int32_t* __restrict__ num_post_padded) {
  // Programmatic dependent launch: wait for the kernel before us (it may write the logits or
  // still read our outputs), then let GEMM1 launch; it waits for our completion itself.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  extern __shared__ int smem[];
  int* s_ids = smem + align_smem_ints(E);  // [M * topk]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int m = warp; m < M; m += kRouteWarps) topk_token(logits, m, E, topk, renorm, ids, weights, s_ids, lane);
  __syncthreads();
  align_block(s_ids, M * topk, E, BM, max_padded, sorted_ids, expert_ids, num_post_padded, smem);
}

}  // namespace
}  // namespace kern

Status moe_route(const float* logits, int m, int experts, int topk, bool renormalize, int block_m, int32_t* topk_ids,
                 float* topk_weights, int32_t* sorted_ids, int32_t* expert_ids, int32_t* num_post_padded,
                 Stream stream) {
  LOWBIT_CHECK_ARG(logits && topk_ids && topk_weights && sorted_ids && expert_ids && num_post_padded,
                   "int4::moe_route: null pointer");
  LOWBIT_RETURN_IF_ERROR(detail::validate_topk_args("int4::moe_route", m, experts, topk));
  LOWBIT_RETURN_IF_ERROR(detail::validate_align_args("int4::moe_route", m, topk, experts, block_m));
  const size_t smem = (static_cast<size_t>(kern::align_smem_ints(experts)) + static_cast<size_t>(m) * topk) * 4;
  if (m > kern::kRouteOneLaunchMaxTokens || smem > 48 * 1024) {
    LOWBIT_RETURN_IF_ERROR(moe_topk(logits, m, experts, topk, renormalize, topk_ids, topk_weights, stream));
    return moe_align(topk_ids, m, topk, experts, block_m, sorted_ids, expert_ids, num_post_padded, stream);
  }
  const int64_t maxp = moe_max_padded(m, topk, experts, block_m);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  LOWBIT_CUDA_RETURN(kern::launch_programmatic(kern::moe_route_kernel, dim3(1), dim3(kern::kRouteThreads), smem, st,
                                               logits, m, experts, topk, renormalize, block_m, static_cast<int>(maxp),
                                               topk_ids, topk_weights, sorted_ids, expert_ids, num_post_padded));
  return Status::Ok();
}

}  // namespace lowbit::int4
