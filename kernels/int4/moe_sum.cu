// MoE top-k sum: y[m, h] = act(sum_{s = 0..topk-1} slot_out[m*topk + s, h]), always in slot
// order, so the result does not depend on scheduling (no atomics in GEMM2).
#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/common.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

// Launched as a programmatic dependent of GEMM2: its launch overlaps GEMM2's tail, and it
// waits for GEMM2's completion (and memory) before reading the slots.
// ids (caller routing): slots whose expert is outside [0, E) are skipped (never written).
template <typename T>
__global__ void moe_sum_kernel(const float* __restrict__ slot_out, int M, int topk, int H, T* __restrict__ y,
                               const int32_t* __restrict__ ids, int E) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const size_t total = static_cast<size_t>(M) * H;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t m = i / H, h = i % H;
    float s = 0.f;
    for (int t = 0; t < topk; ++t) {
      if (ids != nullptr && static_cast<unsigned>(__ldg(ids + m * topk + t)) >= static_cast<unsigned>(E)) continue;
      s += slot_out[(m * topk + t) * H + h];
    }
    y[i] = Act<T>::from_float(s);
  }
}

}  // namespace
}  // namespace kern

Status moe_sum(const float* slot_out, int m, int topk, int hidden, DType act, void* y, Stream stream,
               const int32_t* topk_ids, int experts) {
  LOWBIT_CHECK_ARG(slot_out && y, "int4::moe_sum: null pointer");
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1 && hidden >= 1, "int4::moe_sum: m=%d topk=%d hidden=%d", m, topk, hidden);
  LOWBIT_CHECK_ARG(topk_ids == nullptr || experts >= 1, "int4::moe_sum: experts=%d with topk_ids", experts);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  const size_t total = static_cast<size_t>(m) * hidden;
  const int blocks = static_cast<int>(total / 256 + 1 < 2048 ? total / 256 + 1 : 2048);
  const cudaError_t e =
      act == DType::kF16
          ? kern::launch_programmatic(kern::moe_sum_kernel<__half>, dim3(blocks), dim3(256), 0, st, slot_out, m, topk,
                                      hidden, static_cast<__half*>(y), topk_ids, experts)
          : kern::launch_programmatic(kern::moe_sum_kernel<__nv_bfloat16>, dim3(blocks), dim3(256), 0, st, slot_out,
                                      m, topk, hidden, static_cast<__nv_bfloat16*>(y), topk_ids, experts);
  LOWBIT_CUDA_RETURN(e);
  return Status::Ok();
}

}  // namespace lowbit::int4
