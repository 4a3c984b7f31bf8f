// vLLM's Marlin MoE GEMM (csrc/moe/marlin_moe_wna16) on raw pointers, and the two elementwise
// steps of vLLM's fused_marlin_moe around it (see bench/baselines/vllm_marlin.h). vLLM's
// PyTorch entry, moe_wna16_marlin_gemm(), checks its tensors, sizes the fp32 reduction buffer
// and calls marlin_moe_wna16::marlin_mm(); moe_gemm() does the same on pointers with
// fused_marlin_moe's arguments (fp32 reduce on, atomics off, vLLM's own tile choice).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <type_traits>

#include "bench/baselines/vllm_marlin.h"
#include "lowbit/detail/cuda_check.h"
#include "moe/marlin_moe_wna16/kernel.h"  // vLLM: vllm::ScalarType, namespace marlin_moe_wna16

namespace marlin_moe_wna16 {
// In moe_host.cu (vLLM's ops.cu up to its PyTorch entry).
void marlin_mm(const void* A, const void* B, void* C, void* C_tmp, void* b_bias, void* b_s, void* g_s, void* zp,
               void* sorted_token_ids, void* expert_ids, void* num_tokens_past_padded, void* topk_weights,
               int moe_block_size, int num_experts, int top_k, bool mul_topk_weights, int prob_m, int prob_n,
               int prob_k, void* workspace, vllm::ScalarType const& a_type, vllm::ScalarType const& b_type,
               vllm::ScalarType const& c_type, vllm::ScalarType const& s_type, bool has_bias, bool has_zp,
               int group_size, int dev, cudaStream_t stream, int thread_k, int thread_n, int sms, int blocks_per_sm,
               bool use_atomic_add, bool use_fp32_reduce, bool is_zp_float);
}  // namespace marlin_moe_wna16

namespace lowbit::bench::vllm_marlin {
namespace {

// bf16 / fp16 <-> fp32 (round to nearest even).
template <typename T>
__device__ __forceinline__ float to_f(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

// vLLM's silu_and_mul: x / (1 + exp(-x)) * y in fp32, one rounding.
template <typename T>
__global__ void silu_and_mul_kernel(const T* __restrict__ h, T* __restrict__ out, int rows, int inter) {
  const size_t total = static_cast<size_t>(rows) * inter;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / inter, c = i % inter;
    const float g = to_f(h[r * 2 * inter + c]), u = to_f(h[r * 2 * inter + inter + c]);
    out[i] = from_f<T>(g / (1.f + expf(-g)) * u);
  }
}

// torch.sum(c.view(tokens, topk, hidden), dim=1): fp32 sum in slot order, one rounding.
template <typename T>
__global__ void topk_sum_kernel(const T* __restrict__ c, T* __restrict__ y, int tokens, int topk, int hidden) {
  const size_t total = static_cast<size_t>(tokens) * hidden;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t t = i / hidden, h = i % hidden;
    float s = 0.f;
    for (int k = 0; k < topk; ++k) s += to_f(c[(t * topk + k) * hidden + h]);
    y[i] = from_f<T>(s);
  }
}

int grid_for(size_t total) { return static_cast<int>(std::min<size_t>((total + 255) / 256, 4096)); }

}  // namespace

int moe_block_size(int m, int topk, int experts) {
  int bm = 8;
  for (int b : {8, 16, 32, 48, 64}) {
    bm = b;
    if (static_cast<double>(m) * topk / experts / b < 0.9) break;
  }
  return bm;
}

Status Workspace::ensure_moe(long long max_padded, int block, int max_n, cudaStream_t stream) {
  LOWBIT_RETURN_IF_ERROR(reserve(0, stream));  // sms
  // vLLM's moe_wna16_marlin_gemm: min(N * sorted slots, sms * 4 * block * max_thread_n) floats,
  // doubled for blocks of 8.
  long long need = std::min(static_cast<long long>(max_n) * max_padded, static_cast<long long>(sms) *
                                                                            kMaxBlocksPerSm * block *
                                                                            marlin_moe_wna16::max_thread_n);
  if (block == 8) need *= 2;
  return reserve(static_cast<size_t>(need), stream);
}

Status moe_gemm(const Weights& w, const void* a, void* c, const int32_t* sorted_ids, const int32_t* expert_ids,
                const int32_t* num_post_padded, const float* topk_weights, int block, int top_k, bool mul_topk_weights,
                int m, long long max_padded, Workspace& ws, cudaStream_t stream) {
  if (!w.q || !w.s || !a || !c || !sorted_ids || !expert_ids || !num_post_padded || (mul_topk_weights && !topk_weights))
    return make_status(StatusCode::kInvalidArgument, "vLLM Marlin MoE baseline: null pointer");
  if (m <= 0 || top_k <= 0 || max_padded <= 0)
    return make_status(StatusCode::kInvalidArgument, "vLLM Marlin MoE baseline: m = %d, top_k = %d", m, top_k);
  if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(c)) % 16 != 0)
    return make_status(StatusCode::kMisaligned, "vLLM Marlin MoE baseline: a and c must be 16 B aligned");
  if (!ws.locks || !ws.c_tmp)
    return make_status(StatusCode::kInvalidArgument, "vLLM Marlin MoE baseline: Workspace::ensure_moe() first");
  int dev = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  const vllm::ScalarType& t = w.act == DType::kBF16 ? vllm::kBFloat16 : vllm::kFloat16;
  try {
    marlin_moe_wna16::marlin_mm(a, w.q, c, ws.c_tmp, /*b_bias=*/nullptr, w.s, /*g_s=*/nullptr, /*zp=*/nullptr,
                                const_cast<int32_t*>(sorted_ids), const_cast<int32_t*>(expert_ids),
                                const_cast<int32_t*>(num_post_padded), const_cast<float*>(topk_weights), block,
                                w.experts, top_k, mul_topk_weights, m, w.n, w.k, ws.locks, t, vllm::kU4B8, t, t,
                                /*has_bias=*/false, /*has_zp=*/false, w.group, dev, stream, /*thread_k=*/-1,
                                /*thread_n=*/-1, ws.sms, /*blocks_per_sm=*/-1, /*use_atomic_add=*/false,
                                /*use_fp32_reduce=*/true, /*is_zp_float=*/false);
  } catch (const std::exception& ex) {
    return make_status(StatusCode::kInvalidArgument, "%s", ex.what());
  }
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

Status silu_and_mul(DType act, const void* h, void* out, int rows, int inter, cudaStream_t stream) {
  if (!h || !out || rows <= 0 || inter <= 0)
    return make_status(StatusCode::kInvalidArgument, "silu_and_mul: null pointer or rows = %d, inter = %d", rows, inter);
  const int grid = grid_for(static_cast<size_t>(rows) * inter);
  if (act == DType::kBF16)
    silu_and_mul_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(h), static_cast<__nv_bfloat16*>(out),
                                                  rows, inter);
  else
    silu_and_mul_kernel<<<grid, 256, 0, stream>>>(static_cast<const __half*>(h), static_cast<__half*>(out), rows, inter);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

Status topk_sum(DType act, const void* c, void* y, int tokens, int topk, int hidden, cudaStream_t stream) {
  if (!c || !y || tokens <= 0 || topk <= 0 || hidden <= 0)
    return make_status(StatusCode::kInvalidArgument, "topk_sum: null pointer or tokens = %d, topk = %d", tokens, topk);
  const int grid = grid_for(static_cast<size_t>(tokens) * hidden);
  if (act == DType::kBF16)
    topk_sum_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(c), static_cast<__nv_bfloat16*>(y),
                                              tokens, topk, hidden);
  else
    topk_sum_kernel<<<grid, 256, 0, stream>>>(static_cast<const __half*>(c), static_cast<__half*>(y), tokens, topk,
                                              hidden);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::bench::vllm_marlin
