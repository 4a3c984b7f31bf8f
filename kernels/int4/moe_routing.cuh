// MoE routing building blocks shared by moe_topk.cu, moe_align.cu and moe_route.cu (topk
// and align in one launch for decode-sized batches).
//
// Top-k: softmax over E logits and top-k, one warp per token. Selection walks the strict
// order (logit descending, expert index ascending): the s-th pick is the largest element
// strictly after the (s-1)-th in that order, so ties go to the lower expert index and no
// per-token "taken" mask is needed. Selecting on logits (softmax is monotone) keeps ids
// identical to any reference regardless of exp() rounding.
//
// Align: group the M*topk (token, slot) pairs by expert, in pair order within an expert (a
// stable counting sort), pad each expert's run to a multiple of BM with the sentinel M*topk,
// and give every block its expert (-1 past the end). One block of 256 threads: counts per
// expert, a warp-scan prefix over E (E <= 1024), then a tiled stable scatter where a warp
// finds equal experts with __match_any_sync and earlier warps' counts come from shared
// memory. Output identical to the CPU reference (no order depends on scheduling).
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

namespace lowbit::int4::kern {

constexpr int kRouteThreads = 256, kRouteWarps = kRouteThreads / 32;

// Shared memory of align_block, in ints.
__host__ __device__ constexpr int align_smem_ints(int E) { return E * (2 + kRouteWarps); }

__device__ __forceinline__ bool route_before(float v, int i, float bv, int bi) {  // (v,i) ranks ahead of (bv,bi)
  return v > bv || (v == bv && i < bi);
}

// Orderable key of a float for unsigned comparisons (larger float, larger key); -0 is
// folded into +0 first, as the float compare treats them as equal.
__device__ __forceinline__ unsigned route_key(float v) {
  const unsigned u = __float_as_uint(v + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The warp's best candidate in the strict order: each lane holds its own best (bv, bi) (or
// (-FLT_MAX, INT_MAX) for none); the largest value key wins, then the lowest index among the
// lanes holding it (route_before's order). Lane l only ever holds indices l + 32 j, so the
// winner's lane is its index mod 32. Two warp reductions and one shuffle.
__device__ __forceinline__ void warp_pick(float& bv, int& bi) {
  const unsigned kmax = __reduce_max_sync(0xffffffffu, route_key(bv));
  const int imin = __reduce_min_sync(0xffffffffu, route_key(bv) == kmax ? bi : INT_MAX);
  bv = __shfl_sync(0xffffffffu, bv, imin < INT_MAX ? imin % 32 : 0);
  bi = imin;
}

// Token m's top-k by one warp (lane = lane id): ids / weights rows m (either may be nullptr:
// not written); ids_copy (may be nullptr, e.g. shared memory) gets the ids too. Lane l holds
// experts l + 32 j: kPerLane > 0 (E <= 32 * kPerLane) keeps them in registers, kPerLane = 0
// (any E) re-reads them per pick. Each pick is the lanes' best candidates and warp_pick: the
// first in the strict order after the previous pick (ties to the lower index; NaN and values
// below -FLT_MAX are never picked), the same picks whatever kPerLane.
template <int kPerLane>
__device__ __forceinline__ void topk_token_t(const float* __restrict__ logits, int m, int E, int topk, bool renorm,
                                             int32_t* __restrict__ ids, float* __restrict__ weights, int32_t* ids_copy,
                                             int lane) {
  const float* l = logits + static_cast<size_t>(m) * E;
  // Lane's logits: experts lane + 32 j, j < per (kPerLane > 0: all in registers, a constant
  // trip count the compiler unrolls; 0: re-read from memory on each pass).
  constexpr int kRegs = kPerLane > 0 ? kPerLane : 1;
  const int per = kPerLane > 0 ? kPerLane : (E + 31) / 32;
  float v[kRegs];
  if constexpr (kPerLane > 0) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) v[j] = lane + 32 * j < E ? l[lane + 32 * j] : -FLT_MAX;
  }
  auto logit = [&](int j) {
    if constexpr (kPerLane > 0) return v[j];
    else return l[lane + 32 * j];
  };
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < per; ++j)
    if (lane + 32 * j < E) mx = fmaxf(mx, logit(j));
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < per; ++j)
    if (lane + 32 * j < E) sum += expf(logit(j) - mx);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  float pv = FLT_MAX;  // previous pick (value, index); start before everything
  int pi = -1;
  float chosen_sum = 0.f, my_w = 0.f;
  int my_id = 0;
  for (int s = 0; s < topk; ++s) {
    float bv = -FLT_MAX;
    int bi = INT_MAX;
#pragma unroll
    for (int j = 0; j < per; ++j) {
      const int e = lane + 32 * j;
      if (e >= E) continue;
      const float x = logit(j);
      if (route_before(pv, pi, x, e) && route_before(x, e, bv, bi)) {
        bv = x;
        bi = e;
      }
    }
    warp_pick(bv, bi);
    if (lane == s) {
      my_w = bv;  // the logit; its weight below
      my_id = bi;
    }
    pv = bv;
    pi = bi;
  }
  // Weights in pick order (the renormalization sum in the same order as before: picks 0..k-1).
  const float w = lane < topk ? expf(my_w - mx) / sum : 0.f;
  for (int s = 0; s < topk; ++s) chosen_sum += __shfl_sync(0xffffffffu, w, s);
  my_w = w;
  if (lane < topk) {
    if (ids != nullptr) ids[static_cast<size_t>(m) * topk + lane] = my_id;
    if (weights != nullptr) weights[static_cast<size_t>(m) * topk + lane] = renorm ? my_w / chosen_sum : my_w;
    if (ids_copy != nullptr) ids_copy[static_cast<size_t>(m) * topk + lane] = my_id;
  }
}

__device__ __forceinline__ void topk_token(const float* __restrict__ logits, int m, int E, int topk, bool renorm,
                                           int32_t* __restrict__ ids, float* __restrict__ weights, int32_t* ids_copy,
                                           int lane) {
  if (E <= 64)
    topk_token_t<2>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
  else if (E <= 256)
    topk_token_t<8>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
  else
    topk_token_t<0>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
}

// The align of P = M*topk pairs by one block of kRouteThreads threads; smem holds
// align_smem_ints(E) ints. topk_ids may point to global or shared memory.
__device__ __forceinline__ void align_block(const int32_t* topk_ids, int P, int E, int BM, int max_padded,
                                            int32_t* __restrict__ sorted_ids, int32_t* __restrict__ expert_ids,
                                            int32_t* __restrict__ num_post_padded, int* smem) {
  int* counts = smem;          // [E]
  int* cursor = counts + E;    // [E]
  int* wcnt = cursor + E;      // [kRouteWarps][E]
  __shared__ int s_total;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < E * (2 + kRouteWarps); i += kRouteThreads) smem[i] = 0;
  __syncthreads();
  for (int p = tid; p < P; p += kRouteThreads) {
    const int e = topk_ids[p];
    if (e >= 0 && e < E) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (warp == 0) {
    // Exclusive prefix over E of the padded counts: lane l sums its run of ceil(E/32)
    // experts, a warp scan adds the runs before it (same values as a serial loop).
    const int per = (E + 31) / 32, e0 = lane * per, e1 = min(E, e0 + per);
    int local = 0;
    for (int e = e0; e < e1; ++e) local += (counts[e] + BM - 1) / BM * BM;
    int incl = local;
    for (int o = 1; o < 32; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    int off = incl - local;
    for (int e = e0; e < e1; ++e) {
      cursor[e] = off;
      off += (counts[e] + BM - 1) / BM * BM;
    }
    if (lane == 31) {
      s_total = incl;
      *num_post_padded = incl;
    }
  }
  __syncthreads();
  const int total = s_total;
  for (int i = tid; i < max_padded; i += kRouteThreads) sorted_ids[i] = P;
  for (int b = total / BM + tid; b < max_padded / BM; b += kRouteThreads) expert_ids[b] = -1;
  for (int e = tid; e < E; e += kRouteThreads) {
    const int b0 = cursor[e] / BM, nb = (counts[e] + BM - 1) / BM;
    for (int b = 0; b < nb; ++b) expert_ids[b0 + b] = e;
  }
  __syncthreads();  // sentinel fill before the scatter overwrites it
  const unsigned lt = (1u << lane) - 1u;
  for (int base = 0; base < P; base += kRouteThreads) {
    const int p = base + tid;
    int e = p < P ? topk_ids[p] : -1;
    if (e >= E) e = -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & lt);
    if (e >= 0 && rank == 0) wcnt[warp * E + e] = __popc(same);
    __syncthreads();
    if (e >= 0) {
      int off = cursor[e] + rank;
      for (int w = 0; w < warp; ++w) off += wcnt[w * E + e];
      sorted_ids[off] = p;
    }
    __syncthreads();
    if (e >= 0 && rank == 0) {
      atomicAdd(&cursor[e], __popc(same));
      wcnt[warp * E + e] = 0;
    }
    __syncthreads();
  }
}

}  // namespace lowbit::int4::kern
