// MoE align: the (token, slot) pairs grouped by expert and padded to align blocks, one
// block (the algorithm is in moe_routing.cuh, shared with moe_route.cu).
#include "kernels/int4/moe_routing.cuh"
#include "kernels/int4/internal.h"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

__global__ void __launch_bounds__(kRouteThreads)
    moe_align_kernel(const int32_t* __restrict__ topk_ids, int P, int E, int BM, int max_padded,
                     int32_t* __restrict__ sorted_ids, int32_t* __restrict__ expert_ids,
                     int32_t* __restrict__ num_post_padded) {
  extern __shared__ int smem[];
  align_block(topk_ids, P, E, BM, max_padded, sorted_ids, expert_ids, num_post_padded, smem);
}

}  // namespace
}  // namespace kern

int64_t moe_max_padded(int m, int topk, int experts, int block_m) {
  const int64_t raw = static_cast<int64_t>(m) * topk + static_cast<int64_t>(experts) * (block_m - 1);
  return (raw + block_m - 1) / block_m * block_m;
}

Status moe_align(const int32_t* topk_ids, int m, int topk, int experts, int block_m, int32_t* sorted_ids,
                 int32_t* expert_ids, int32_t* num_post_padded, Stream stream) {
  LOWBIT_CHECK_ARG(topk_ids && sorted_ids && expert_ids && num_post_padded, "int4::moe_align: null pointer");
  LOWBIT_RETURN_IF_ERROR(detail::validate_align_args("int4::moe_align", m, topk, experts, block_m));
  const int64_t maxp = moe_max_padded(m, topk, experts, block_m);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  const size_t smem = static_cast<size_t>(kern::align_smem_ints(experts)) * sizeof(int);
  kern::moe_align_kernel<<<1, kern::kRouteThreads, smem, st>>>(topk_ids, m * topk, experts, block_m, static_cast<int>(maxp),
                                                          sorted_ids, expert_ids, num_post_padded);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::int4
