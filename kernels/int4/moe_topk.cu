// MoE routing: softmax over E logits and top-k, one warp per token. Selection walks the
// strict order (logit descending, expert index ascending): the s-th pick is the largest
// element strictly after the (s-1)-th in that order, so ties go to the lower expert index
// and no per-token "taken" mask is needed. Selecting on logits (softmax is monotone) keeps
// ids identical to any reference regardless of exp() rounding.
#include <cfloat>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

__device__ __forceinline__ bool before(float v, int i, float bv, int bi) {  // (v,i) ranks ahead of (bv,bi)
  return v > bv || (v == bv && i < bi);
}

__global__ void moe_topk_kernel(const float* __restrict__ logits, int M, int E, int topk, bool renorm,
                                int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int lane = threadIdx.x % 32;
  const int m = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (m >= M) return;
  const float* l = logits + static_cast<size_t>(m) * E;
  float mx = -FLT_MAX;
  for (int e = lane; e < E; e += 32) mx = fmaxf(mx, l[e]);
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += expf(l[e] - mx);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  float pv = FLT_MAX;  // previous pick (value, index); start before everything
  int pi = -1;
  float chosen_sum = 0.f, my_w = 0.f;
  int my_id = 0;
  for (int s = 0; s < topk; ++s) {
    float bv = -FLT_MAX;
    int bi = INT_MAX;
    for (int e = lane; e < E; e += 32) {
      const float v = l[e];
      const bool after_prev = before(pv, pi, v, e);
      if (after_prev && before(v, e, bv, bi)) {
        bv = v;
        bi = e;
      }
    }
    for (int o = 16; o > 0; o /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (before(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    const float w = expf(bv - mx) / sum;
    chosen_sum += w;
    if (lane == s) {
      my_w = w;
      my_id = bi;
    }
    pv = bv;
    pi = bi;
  }
  if (lane < topk) {
    ids[static_cast<size_t>(m) * topk + lane] = my_id;
    weights[static_cast<size_t>(m) * topk + lane] = renorm ? my_w / chosen_sum : my_w;
  }
}

}  // namespace
}  // namespace kern

Status moe_topk(const float* logits, int m, int experts, int topk, bool renormalize, int32_t* topk_ids,
                float* topk_weights, Stream stream) {
  LOWBIT_CHECK_ARG(logits && topk_ids && topk_weights, "int4::moe_topk: null pointer");
  LOWBIT_CHECK_ARG(m >= 1, "int4::moe_topk: m=%d must be >= 1", m);
  LOWBIT_CHECK_ARG(experts >= 1 && experts <= 1024, "int4::moe_topk: experts=%d outside [1, 1024]", experts);
  LOWBIT_CHECK_ARG(topk >= 1 && topk <= 32 && topk <= experts, "int4::moe_topk: topk=%d outside [1, min(32, E=%d)]",
                   topk, experts);
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  constexpr int kWarps = 8;
  kern::moe_topk_kernel<<<(m + kWarps - 1) / kWarps, 32 * kWarps, 0, st>>>(logits, m, experts, topk, renormalize,
                                                                           topk_ids, topk_weights);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::int4
