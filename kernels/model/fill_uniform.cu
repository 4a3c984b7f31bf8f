// Deterministic synthetic weights generated on the device (benchmarks with real shapes:
// a 70B model's weights would take minutes to generate and upload from the host).
#include <algorithm>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
// splitmix64 of (seed, index): a stateless hash, so any thread layout gives the same values.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__global__ void fill_uniform_kernel(bf16* p, size_t n, uint64_t seed, float lo, float span) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = mix64(seed * 0xD1B54A32D192ED03ull + i);
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 bits -> [0, 1)
    p[i] = __float2bfloat16_rn(lo + span * u);
  }
}
}  // namespace

Status fill_uniform(bf16* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(p, "fill_uniform: null pointer");
  LOWBIT_CHECK_ARG(n > 0, "fill_uniform: n=0");
  LOWBIT_CHECK_ARG(hi >= lo, "fill_uniform: hi=%g < lo=%g", hi, lo);
  const int threads = 256;
  const size_t blocks = std::min<size_t>((n + threads - 1) / threads, 132 * 64);
  fill_uniform_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(p, n, seed, lo, hi - lo);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
