// Per-row negative log-likelihood of a target token from fp32 logits (for perplexity).
#include "kernels/model/block_reduce.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void nll_kernel(const float* logits, int vocab, const int32_t* targets, float* nll) {
  __shared__ float sh[32];
  const int64_t r = blockIdx.x;
  const int tgt = targets[r];
  if (tgt < 0) {  // uniform across the block: everyone returns
    if (threadIdx.x == 0) nll[r] = 0.0f;
    return;
  }
  const float* l = logits + r * vocab;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) m = fmaxf(m, l[j]);
  m = detail::block_max(m, sh);
  float s = 0.0f;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) s += expf(l[j] - m);
  s = detail::block_sum(s, sh);
  if (threadIdx.x == 0) nll[r] = tgt < vocab ? (m + logf(s)) - l[tgt] : __int_as_float(0x7fc00000);
}
}  // namespace

Status nll_rows(const float* logits, int rows, int vocab, const int32_t* targets, float* nll, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(logits && targets && nll, "nll_rows: null pointer");
  LOWBIT_CHECK_ARG(rows > 0 && vocab > 0, "nll_rows: rows=%d vocab=%d must be > 0", rows, vocab);
  nll_kernel<<<rows, 256, 0, stream>>>(logits, vocab, targets, nll);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
