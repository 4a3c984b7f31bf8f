// MoE routing: top-k of softmax(logits) per token, one warp per token (the selection rule is
// in moe_routing.cuh, shared with moe_route.cu).
#include <cfloat>

#include "kernels/int4/moe_routing.cuh"

#include "kernels/int4/internal.h"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

__global__ void moe_topk_kernel(const float* __restrict__ logits, int M, int E, int topk, bool renorm,
                                int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int m = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (m >= M) return;
  topk_token(logits, m, E, topk, renorm, ids, weights, nullptr, threadIdx.x % 32);
}

}  // namespace
}  // namespace kern

Status moe_topk(const float* logits, int m, int experts, int topk, bool renormalize, int32_t* topk_ids,
                float* topk_weights, Stream stream) {
  LOWBIT_CHECK_ARG(logits && topk_ids && topk_weights, "int4::moe_topk: null pointer");
  LOWBIT_RETURN_IF_ERROR(detail::validate_topk_args("int4::moe_topk", m, experts, topk));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  constexpr int kWarps = 8;
  kern::moe_topk_kernel<<<(m + kWarps - 1) / kWarps, 32 * kWarps, 0, st>>>(logits, m, experts, topk, renormalize,
                                                                           topk_ids, topk_weights);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::int4
