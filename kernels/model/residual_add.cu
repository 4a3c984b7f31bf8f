// Residual connection: x += y in fp32, rounded once to bf16. Vectorized by 8 elements
// (16-byte accesses) when both pointers are 16-byte aligned.
#include <algorithm>
#include <cstdint>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__global__ void residual_add_vec_kernel(bf16* x, const bf16* y, int64_t n8) {
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < n8;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint4 a = reinterpret_cast<uint4*>(x)[v];
    const uint4 b = reinterpret_cast<const uint4*>(y)[v];
    __nv_bfloat162* pa = reinterpret_cast<__nv_bfloat162*>(&a);
    const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 fa = __bfloat1622float2(pa[k]), fb = __bfloat1622float2(pb[k]);
      pa[k] = __floats2bfloat162_rn(__fadd_rn(fa.x, fb.x), __fadd_rn(fa.y, fb.y));
    }
    reinterpret_cast<uint4*>(x)[v] = a;
  }
}
__global__ void residual_add_kernel(bf16* x, const bf16* y, int64_t begin, int64_t n) {
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16_rn(__fadd_rn(__bfloat162float(x[i]), __bfloat162float(y[i])));
}
}  // namespace

Status residual_add(bf16* x, const bf16* y, int64_t n, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(x && y, "residual_add: null pointer");
  LOWBIT_CHECK_ARG(n > 0, "residual_add: n=%lld must be > 0", static_cast<long long>(n));
  const int threads = 256;
  int64_t done = 0;
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0) {
    const int64_t n8 = n / 8;
    if (n8 > 0) {
      const int64_t blocks = std::min<int64_t>((n8 + threads - 1) / threads, 132 * 32);
      residual_add_vec_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, n8);
      LOWBIT_CUDA_RETURN_LAUNCH();
    }
    done = n8 * 8;
  }
  if (done < n) {
    const int64_t blocks = std::min<int64_t>((n - done + threads - 1) / threads, 132 * 32);
    residual_add_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(x, y, done, n);
    LOWBIT_CUDA_RETURN_LAUNCH();
  }
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
