// Rotary position embedding, GGUF/llama.cpp "normal" convention for LLaMA: adjacent pairs
// (2i, 2i+1) of each head. One thread per pair; the fused QKV rotates Q and K heads in one
// launch because K heads follow Q heads in every row.
#include <algorithm>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void rope_kernel(bf16* x, int64_t row_stride, int n_tokens, int n_heads, int head_dim,
                            const int32_t* positions, float theta) {
  const int half = head_dim / 2;
  const int64_t total = static_cast<int64_t>(n_tokens) * n_heads * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const int64_t th = idx / half;
    const int h = static_cast<int>(th % n_heads);
    const int64_t t = th / n_heads;
    // inv_freq = theta^(-2i/d) in fp32, the same expression as the CPU reference.
    const float inv_freq = powf(theta, -static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const float ang = static_cast<float>(positions[t]) * inv_freq;
    float s, c;
    sincosf(ang, &s, &c);
    bf16* p = x + t * row_stride + static_cast<int64_t>(h) * head_dim + 2 * i;
    const float a = __bfloat162float(p[0]), b = __bfloat162float(p[1]);
    p[0] = __float2bfloat16_rn(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    p[1] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
  }
}
}  // namespace

Status rope(bf16* x, int64_t row_stride, int n_tokens, int n_heads, int head_dim, const int32_t* positions,
            float theta, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(x && positions, "rope: null pointer");
  LOWBIT_CHECK_ARG(n_tokens > 0 && n_heads > 0 && head_dim > 0, "rope: n_tokens=%d n_heads=%d head_dim=%d", n_tokens,
                   n_heads, head_dim);
  LOWBIT_CHECK_ARG(head_dim % 2 == 0, "rope: head_dim=%d must be even", head_dim);
  LOWBIT_CHECK_ARG(row_stride >= static_cast<int64_t>(n_heads) * head_dim, "rope: row_stride=%lld < heads*head_dim",
                   static_cast<long long>(row_stride));
  LOWBIT_CHECK_ARG(theta > 0.0f, "rope: theta=%g must be > 0", theta);
  const int64_t total = static_cast<int64_t>(n_tokens) * n_heads * (head_dim / 2);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65535 * 16);
  rope_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, row_stride, n_tokens, n_heads, head_dim,
                                                                      positions, theta);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
