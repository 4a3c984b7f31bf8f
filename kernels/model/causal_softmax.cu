// Causal row softmax of attention scores (fp32 in, bf16 probabilities out), one block per
// row. Row i of a [seq, seq] matrix (row pitch ld >= seq) keeps j <= i; masked entries are
// written as 0 so the following P*V GEMM can run over the full square; columns [seq, ld)
// are left alone.
#include "kernels/model/block_reduce.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void causal_softmax_kernel(const float* scores, bf16* probs, int seq, int64_t ld) {
  __shared__ float sh[32];
  const int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % seq);
  const float* s = scores + row * ld;
  bf16* p = probs + row * ld;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, s[j]);
  m = detail::block_max(m, sh);
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= i; j += blockDim.x) sum += expf(s[j] - m);
  sum = detail::block_sum(sum, sh);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < seq; j += blockDim.x)
    p[j] = __float2bfloat16_rn(j <= i ? __fmul_rn(expf(s[j] - m), inv) : 0.0f);
}
}  // namespace

Status causal_softmax(const float* scores, bf16* probs, int64_t n_mat, int seq, int64_t ld, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(scores && probs, "causal_softmax: null pointer");
  LOWBIT_CHECK_ARG(n_mat > 0 && seq > 0, "causal_softmax: n_mat=%lld seq=%d must be > 0",
                   static_cast<long long>(n_mat), seq);
  LOWBIT_CHECK_ARG(ld >= seq, "causal_softmax: row pitch ld=%lld < seq=%d", static_cast<long long>(ld), seq);
  const int64_t rows = n_mat * seq;
  LOWBIT_CHECK_ARG(rows < (1ll << 31), "causal_softmax: %lld rows exceed the grid limit", static_cast<long long>(rows));
  const int threads = seq >= 512 ? 256 : 128;
  causal_softmax_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(scores, probs, seq, ld);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
