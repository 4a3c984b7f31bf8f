// Routing of a small batch inside a block of the MoE decode GEMMs (the inline-routing path of
// fused_moe, internal.h: MoeInlineRoute). Every block computes the whole batch's top-k and
// the align of its own align block from shared memory, so no routing kernel runs before
// GEMM1 and no ids travel through global memory. The picks, weights and the rows of every
// align block are those of moe_route (moe_routing.cuh: the same top-k code; the align's
// order: experts ascending, pairs in pair order within an expert, runs padded to BM rows).
#pragma once

#include <cstdint>

#include "kernels/int4/moe_routing.cuh"

namespace lowbit::int4::kern {

// Largest batch (tokens) and pair count the inline path takes (internal.h's host check uses
// the same bounds), and the scratch it needs: the batch's logits, its picks and weights, the
// expert counts and the block's rows.
constexpr int kInlineRouteMaxTokens = 16, kInlineRouteMaxExperts = 256, kInlineRouteMaxRows = 8;
__host__ __device__ constexpr int inline_route_scratch_bytes(int m, int experts, int topk) {
  return 4 * (m * experts + 2 * m * topk + experts + kInlineRouteMaxRows + 4);
}

// The block's routing: expert e of align block b (-1 when b lies past the padded pairs), the
// pair ids of its BM (<= 8) rows (P = m * topk for padding), the padded pair count, and, with
// wrow != nullptr, the routing weight of each row. scratch: inline_route_scratch_bytes() of
// shared memory that nothing else uses until the block's __syncthreads() after this call (the
// caller's). Called by every thread of the block; nthreads = blockDim.x (a multiple of 32).
struct InlineRoute {
  int expert, npp;
};
__device__ __forceinline__ InlineRoute inline_route_block(const float* __restrict__ logits, int m, int E, int topk,
                                                          bool renorm, int BM, int b, float* scratch, int* rows,
                                                          float* wrow) {
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32, warps = nthreads / 32;
  const int P = m * topk;
  float* s_logits = scratch;                                 // [m * E]
  int* s_pick = reinterpret_cast<int*>(s_logits + m * E);    // [P]
  float* s_w = reinterpret_cast<float*>(s_pick + P);         // [P]
  int* s_cnt = reinterpret_cast<int*>(s_w + P);              // [E]
  int* s_rows = s_cnt + E;                                   // [kInlineRouteMaxRows]
  int* s_misc = s_rows + kInlineRouteMaxRows;                // expert, first block, total blocks
  // All logits at once (one memory latency for the batch, not one per token and warp).
  for (int i = tid; i < m * E; i += nthreads) s_logits[i] = __ldg(logits + i);
  for (int e = tid; e < E; e += nthreads) s_cnt[e] = 0;
  __syncthreads();
  for (int t = warp; t < m; t += warps) {
    if (E <= 64)
      topk_token_t<2>(s_logits, t, E, topk, renorm, nullptr, s_w, s_pick, lane);
    else
      topk_token_t<8>(s_logits, t, E, topk, renorm, nullptr, s_w, s_pick, lane);
  }
  __syncthreads();
  if (m == 1) {
    // One token: every pick is its own expert's only row, so align block b is pick b (the
    // align kernel orders these blocks by expert instead, which changes no output row).
    if (tid < BM) rows[tid] = tid == 0 && b < P ? b : P;
    if (wrow != nullptr && tid < BM) wrow[tid] = tid == 0 && b < P ? s_w[b] : 0.f;
    return {b < P ? s_pick[b] : -1, P * BM};
  }
  for (int p = tid; p < P; p += nthreads) atomicAdd(&s_cnt[s_pick[p]], 1);
  __syncthreads();
  if (warp == 0) {
    // Blocks per expert, exclusive prefix over E (lane l: experts [l * per, (l + 1) * per)).
    const int per = (E + 31) / 32, e0 = lane * per, e1 = min(E, e0 + per);
    int local = 0;
    for (int e = e0; e < e1; ++e) local += (s_cnt[e] + BM - 1) / BM;
    int incl = local;
    for (int o = 1; o < 32; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    int first = incl - local;
    if (lane == 31) s_misc[2] = incl;
    if (lane == 0) s_misc[0] = -1;
    __syncwarp();
    if (b >= first && b < incl) {  // block b is one of this lane's experts'
      for (int e = e0; e < e1; ++e) {
        const int nb = (s_cnt[e] + BM - 1) / BM;
        if (b < first + nb) {
          s_misc[0] = e;
          s_misc[1] = first;
          break;
        }
        first += nb;
      }
    }
    if (lane < BM) s_rows[lane] = P;
    __syncwarp();
    const int e = s_misc[0];
    if (e >= 0) {
      // The rows of block b: ranks [(b - first) * BM, + BM) of expert e's pairs in pair order.
      const int r0 = (b - s_misc[1]) * BM;
      const unsigned lt = (1u << lane) - 1u;
      int base = 0;
      for (int c = 0; c < P; c += 32) {
        const int p = c + lane;
        const bool hit = p < P && s_pick[p] == e;
        const unsigned mask = __ballot_sync(0xffffffffu, hit);
        const int r = base + __popc(mask & lt) - r0;
        if (hit && r >= 0 && r < BM) s_rows[r] = p;
        base += __popc(mask);
      }
    }
    __syncwarp();
  }
  __syncthreads();
  if (tid < BM) {
    const int id = s_rows[tid];
    rows[tid] = id;
    if (wrow != nullptr) wrow[tid] = id < P ? s_w[id] : 0.f;
  }
  return {s_misc[0], s_misc[2] * BM};
}

}  // namespace lowbit::int4::kern
