// RMSNorm, one block per row; the row is read twice (sum of squares, then scale) so any
// hidden size works without shared-memory staging.
#include "kernels/model/block_reduce.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void rmsnorm_kernel(const bf16* in, int64_t in_stride, const bf16* w, bf16* out, int64_t out_stride,
                               int hidden, float eps) {
  __shared__ float sh[32];
  const bf16* x = in + blockIdx.x * in_stride;
  bf16* y = out + blockIdx.x * out_stride;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(x[i]);
    ss = __fmaf_rn(v, v, ss);
  }
  ss = detail::block_sum(ss, sh);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(hidden) + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    y[i] = __float2bfloat16_rn(__fmul_rn(__fmul_rn(__bfloat162float(x[i]), inv), __bfloat162float(w[i])));
}
}  // namespace

Status rmsnorm(const bf16* in, int64_t in_stride, const bf16* weight, bf16* out, int64_t out_stride, int rows,
               int hidden, float eps, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(in && weight && out, "rmsnorm: null pointer");
  LOWBIT_CHECK_ARG(rows > 0 && hidden > 0, "rmsnorm: rows=%d hidden=%d must be > 0", rows, hidden);
  LOWBIT_CHECK_ARG(in_stride >= hidden && out_stride >= hidden, "rmsnorm: strides %lld/%lld below hidden=%d",
                   static_cast<long long>(in_stride), static_cast<long long>(out_stride), hidden);
  LOWBIT_CHECK_ARG(eps > 0.0f, "rmsnorm: eps=%g must be > 0", eps);
  const int threads = hidden >= 1024 ? 512 : (hidden >= 256 ? 256 : 128);
  rmsnorm_kernel<<<rows, threads, 0, stream>>>(in, in_stride, weight, out, out_stride, hidden, eps);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
