// SwiGLU activation: out = silu(gate) * up from the fused gate/up GEMM output.
#include <algorithm>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void silu_mul_kernel(const bf16* gu, int64_t n_tokens, int inter, bf16* out) {
  const int64_t total = n_tokens * inter;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / inter;
    const int i = static_cast<int>(idx - t * inter);
    const float g = __bfloat162float(gu[t * 2 * inter + i]);
    const float u = __bfloat162float(gu[t * 2 * inter + inter + i]);
    const float silu = g / (1.0f + expf(-g));
    out[idx] = __float2bfloat16_rn(__fmul_rn(silu, u));
  }
}
}  // namespace

Status silu_mul(const bf16* gate_up, int n_tokens, int inter, bf16* out, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(gate_up && out, "silu_mul: null pointer");
  LOWBIT_CHECK_ARG(n_tokens > 0 && inter > 0, "silu_mul: n_tokens=%d inter=%d must be > 0", n_tokens, inter);
  const int64_t total = static_cast<int64_t>(n_tokens) * inter;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 132 * 64);
  silu_mul_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(gate_up, n_tokens, inter, out);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
