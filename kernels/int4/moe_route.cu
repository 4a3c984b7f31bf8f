// MoE routing in one launch for decode-sized batches: top-k (one warp per token, the
// block's 8-32 warps over the tokens) and then the align of the block's own ids from shared
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

// One block: its warps share the tokens for top-k (a warp per token up to 32 tokens: 256
// threads up to M = 8, 512 up to 16, 1024 above, so the serial top-k of a warp stays at 1-2
// tokens); above 64 tokens the two kernels (a warp per token over the whole GPU) win.
constexpr int kRouteOneLaunchMaxTokens = 64;

// kPerLane: topk_token_t's register set for E (topk_per_lane), one per instantiation so the
// kernel holds only the code it runs.
template <int kThreads, int kPerLane>
__global__ void __launch_bounds__(kThreads)
    moe_route_kernel(const float* __restrict__ logits, int M, int E, int topk, bool renorm, int BM, int max_padded,
                     int32_t* __restrict__ ids, float* __restrict__ weights, int32_t* __restrict__ sorted_ids,
                     int32_t* __restrict__ expert_ids, int32_t* __restrict__ num_post_padded) {
  // Programmatic dependent launch: wait for the kernel before us (it may write the logits or
  // still read our outputs), then let GEMM1 launch; it waits for our completion itself.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  extern __shared__ int smem[];
  int* s_ids = smem + align_smem_ints(E, kThreads);  // [M * topk]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int m = warp; m < M; m += kThreads / 32)
    topk_token_t<kPerLane>(logits, m, E, topk, renorm, ids, weights, s_ids, lane);
  __syncthreads();
  align_block<kThreads>(s_ids, M * topk, E, BM, max_padded, sorted_ids, expert_ids, num_post_padded, smem);
}

using RouteKernel = void (*)(const float*, int, int, int, bool, int, int, int32_t*, float*, int32_t*, int32_t*,
                             int32_t*);

template <int kThreads>
RouteKernel route_kernel_for(int per_lane) {
  switch (per_lane) {
    case 1: return moe_route_kernel<kThreads, 1>;
    case 2: return moe_route_kernel<kThreads, 2>;
    case 4: return moe_route_kernel<kThreads, 4>;
    case 8: return moe_route_kernel<kThreads, 8>;
    default: return moe_route_kernel<kThreads, 0>;
  }
}

RouteKernel route_kernel_for(int threads, int per_lane) {
  return threads == 256   ? route_kernel_for<256>(per_lane)
         : threads == 512 ? route_kernel_for<512>(per_lane)
                          : route_kernel_for<1024>(per_lane);
}

size_t route_smem_bytes(int threads, int m, int experts, int topk) {
  return (static_cast<size_t>(align_smem_ints(experts, threads)) + static_cast<size_t>(m) * topk) * sizeof(int);
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
  // The block size for m (above); a smaller one where E makes the larger's align counters too
  // large for 48 KiB of shared memory; the two kernels where even 256 threads' do not fit.
  int threads = m <= 8 ? 256 : m <= 16 ? 512 : 1024;
  while (threads > kern::kRouteThreads && kern::route_smem_bytes(threads, m, experts, topk) > 48 * 1024) threads /= 2;
  const size_t smem = kern::route_smem_bytes(threads, m, experts, topk);
  if (m > kern::kRouteOneLaunchMaxTokens || smem > 48 * 1024) {
    LOWBIT_RETURN_IF_ERROR(moe_topk(logits, m, experts, topk, renormalize, topk_ids, topk_weights, stream));
    return moe_align(topk_ids, m, topk, experts, block_m, sorted_ids, expert_ids, num_post_padded, stream);
  }
  const int maxp = static_cast<int>(moe_max_padded(m, topk, experts, block_m));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  const kern::RouteKernel kernel = kern::route_kernel_for(threads, kern::topk_per_lane(experts));
  LOWBIT_CUDA_RETURN(kern::launch_programmatic(kernel, dim3(1), dim3(threads), smem, st, logits, m, experts, topk,
                                               renormalize, block_m, maxp, topk_ids, topk_weights, sorted_ids,
                                               expert_ids, num_post_padded));
  return Status::Ok();
}

}  // namespace lowbit::int4
