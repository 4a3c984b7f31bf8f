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
// and give every block its expert (-1 past the end). One block (256 threads; moe_route up to
// 1024): counts per
// expert, a warp-scan prefix over E (E <= 1024), then a tiled stable scatter where a warp
// finds equal experts with __match_any_sync and earlier warps' counts come from shared
// memory. Output identical to the CPU reference (no order depends on scheduling).
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>

namespace lowbit::int4::kern {

constexpr int kRouteThreads = 256;

// Shared memory of align_block<threads>, in ints.
__host__ __device__ constexpr int align_smem_ints(int E, int threads = kRouteThreads) { return E * (2 + threads / 32); }

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
// experts l + 32 j. Each pick is the first in the strict order after the previous pick (ties
// to the lower index; NaN and values below -FLT_MAX are never picked; once none is left the
// pick is (-FLT_MAX, INT_MAX), written as expert 0, see the end), the same picks whatever kPerLane:
// - kPerLane > 0 (E <= 32 * kPerLane): the lane sorts its own experts in the strict order once
//   (a compare-exchange network in registers), so a pick is one warp_pick of the lanes' heads
//   and the winner lane pops its head: one warp reduction per pick instead of a scan of the
//   lane's experts first (as kPerLane = 0 below still does). The top-k is on the critical path
//   of every decode-sized MoE layer: no expert weight can be read before it ends (session 14,
//   docs/int4-kernels-sessions.md: the layer 0.2-23% faster at M = 1..64).
// - kPerLane = 0 (any E): re-reads the logits and scans them on every pick.
// The softmax max is the first pick's value (the largest pickable logit, or -FLT_MAX where
// none is: fmaxf over the row's logits gives the same up to the sign of a zero maximum, which
// changes no x - max); the exp sum runs in a fixed order (lane's experts ascending, then a
// butterfly), so both variants give bit-identical weights.
template <int kPerLane>
__device__ __forceinline__ void topk_token_t(const float* __restrict__ logits, int m, int E, int topk, bool renorm,
                                             int32_t* __restrict__ ids, float* __restrict__ weights, int32_t* ids_copy,
                                             int lane) {
  const float* l = logits + static_cast<size_t>(m) * E;
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
  float my_w = 0.f, mx = -FLT_MAX;
  int my_id = 0;
  if constexpr (kPerLane > 0) {
    // The lane's pickable experts sorted in the strict order, the rest as (-FLT_MAX, INT_MAX)
    // at the end (bubble network: kPerLane <= 8, all indices compile-time).
    float sv[kPerLane];
    int si[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      const bool ok = e < E && route_before(v[j], e, -FLT_MAX, INT_MAX);
      sv[j] = ok ? v[j] : -FLT_MAX;
      si[j] = ok ? e : INT_MAX;
    }
#pragma unroll
    for (int i = 0; i < kPerLane - 1; ++i) {
#pragma unroll
      for (int j = 0; j < kPerLane - 1 - i; ++j) {
        if (route_before(sv[j + 1], si[j + 1], sv[j], si[j])) {
          const float tv = sv[j];
          const int ti = si[j];
          sv[j] = sv[j + 1];
          si[j] = si[j + 1];
          sv[j + 1] = tv;
          si[j + 1] = ti;
        }
      }
    }
    for (int s = 0; s < topk; ++s) {
      float bv = sv[0];
      int bi = si[0];
      warp_pick(bv, bi);
      if (s == 0) mx = bv;
      if (lane == s) {
        my_w = bv;  // the logit; its weight below
        my_id = bi;
      }
      if (si[0] == bi) {  // this lane held the pick (or, past the last candidate, pops a sentinel)
#pragma unroll
        for (int j = 0; j < kPerLane - 1; ++j) {
          sv[j] = sv[j + 1];
          si[j] = si[j + 1];
        }
        sv[kPerLane - 1] = -FLT_MAX;
        si[kPerLane - 1] = INT_MAX;
      }
    }
  } else {
    for (int j = 0; j < per; ++j)
      if (lane + 32 * j < E) mx = fmaxf(mx, logit(j));
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float pv = FLT_MAX;  // previous pick (value, index); start before everything
    int pi = -1;
    for (int s = 0; s < topk; ++s) {
      float bv = -FLT_MAX;
      int bi = INT_MAX;
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
        my_w = bv;
        my_id = bi;
      }
      pv = bv;
      pi = bi;
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < per; ++j)
    if (lane + 32 * j < E) sum += expf(logit(j) - mx);
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  // Weights in pick order (the renormalization sum in the same order: picks 0..k-1).
  const float w = lane < topk ? expf(my_w - mx) / sum : 0.f;
  float chosen_sum = 0.f;
  for (int s = 0; s < topk; ++s) chosen_sum += __shfl_sync(0xffffffffu, w, s);
  my_w = w;
  if (lane < topk) {
    // A pick past the token's pickable experts (fewer than topk of its logits are neither NaN
    // nor -inf: a masked or broken router) names expert 0, so that every consumer reads a real
    // expert (the single-token GEMMs index the weights by it; the slot sum reads every slot). Its
    // weight expf(-FLT_MAX - mx) / sum is 0 while the token has a pickable expert and no NaN
    // logit: it adds nothing. A NaN logit makes the exp sum, and so every weight of the token,
    // NaN (its output is NaN on every path); with no pickable expert the weights are inf / NaN.
    const int id = my_id == INT_MAX ? 0 : my_id;
    if (ids != nullptr) ids[static_cast<size_t>(m) * topk + lane] = id;
    if (weights != nullptr) weights[static_cast<size_t>(m) * topk + lane] = renorm ? my_w / chosen_sum : my_w;
    if (ids_copy != nullptr) ids_copy[static_cast<size_t>(m) * topk + lane] = id;
  }
}

// The smallest register set of topk_token_t that holds E experts (0: the loop).
__host__ __device__ constexpr int topk_per_lane(int E) { return E <= 32 ? 1 : E <= 64 ? 2 : E <= 128 ? 4 : E <= 256 ? 8 : 0; }
// Its bounds are written out again where a kernel picks the set at run time (topk_token below,
// and the single-token path's `experts <= 128` in decode_tile.cuh), as plain compares: written
// through topk_per_lane they compiled to more instructions in those kernels. Held equal here.
static_assert(topk_per_lane(32) == 1 && topk_per_lane(33) == 2 && topk_per_lane(64) == 2 && topk_per_lane(65) == 4 &&
                  topk_per_lane(128) == 4 && topk_per_lane(129) == 8 && topk_per_lane(256) == 8 &&
                  topk_per_lane(257) == 0,
              "topk_token's and decode_tile.cuh's bounds (32 / 64 / 128 / 256) are topk_per_lane's");

// topk_token_t with that register set, chosen at run time (moe_topk; moe_route picks it on the
// host instead, so that its kernel holds only the variant it runs).
__device__ __forceinline__ void topk_token(const float* __restrict__ logits, int m, int E, int topk, bool renorm,
                                           int32_t* __restrict__ ids, float* __restrict__ weights, int32_t* ids_copy,
                                           int lane) {
  if (E <= 32)
    topk_token_t<1>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
  else if (E <= 64)
    topk_token_t<2>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
  else if (E <= 128)
    topk_token_t<4>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
  else if (E <= 256)
    topk_token_t<8>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
  else
    topk_token_t<0>(logits, m, E, topk, renorm, ids, weights, ids_copy, lane);
}

// The align of P = M*topk pairs by one block of kThreads threads; smem holds
// align_smem_ints(E, kThreads) ints. topk_ids may point to global or shared memory.
template <int kThreads = kRouteThreads>
__device__ __forceinline__ void align_block(const int32_t* topk_ids, int P, int E, int BM, int max_padded,
                                            int32_t* __restrict__ sorted_ids, int32_t* __restrict__ expert_ids,
                                            int32_t* __restrict__ num_post_padded, int* smem) {
  int* counts = smem;          // [E]
  int* cursor = counts + E;    // [E]
  int* wcnt = cursor + E;      // [kThreads / 32][E]
  __shared__ int s_total;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < E * (2 + kThreads / 32); i += kThreads) smem[i] = 0;
  __syncthreads();
  for (int p = tid; p < P; p += kThreads) {
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
  for (int i = tid; i < max_padded; i += kThreads) sorted_ids[i] = P;
  for (int b = total / BM + tid; b < max_padded / BM; b += kThreads) expert_ids[b] = -1;
  for (int e = tid; e < E; e += kThreads) {
    const int b0 = cursor[e] / BM, nb = (counts[e] + BM - 1) / BM;
    for (int b = 0; b < nb; ++b) expert_ids[b0 + b] = e;
  }
  __syncthreads();  // sentinel fill before the scatter overwrites it
  const unsigned lt = (1u << lane) - 1u;
  for (int base = 0; base < P; base += kThreads) {
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
