// Deterministic random 32-bit words on the device: synthetic packed INT4 expert weights
// (every bit pattern is a valid set of eight nibbles) for the MoE TTFT benchmark.
#include <algorithm>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {
__device__ __forceinline__ uint64_t mix64_bits(uint64_t z) {  // splitmix64, as fill_uniform
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__global__ void fill_bits_kernel(uint32_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint32_t>(mix64_bits(seed * 0xD1B54A32D192ED03ull + i) >> 32);
}
}  // namespace

Status fill_bits(uint32_t* p, size_t n, uint64_t seed, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(p, "fill_bits: null pointer");
  LOWBIT_CHECK_ARG(n > 0, "fill_bits: n=0");
  const int threads = 256;
  const size_t blocks = std::min<size_t>((n + threads - 1) / threads, 132 * 64);
  fill_bits_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(p, n, seed);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}
}  // namespace lowbit::model::gpu
