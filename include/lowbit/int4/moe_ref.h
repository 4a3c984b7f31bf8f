// CPU references for the W4A16 GEMM and the fused MoE layer (vLLM's Triton fused_moe
// semantics). The GPU kernels (kernels/int4/) must reproduce moe_align_ref() exactly and
// match the GEMM/MoE outputs within a stated tolerance (accumulation order differs).
//
// Activations and outputs are 16-bit bits of the activation dtype (w.shape.act). Weights
// are canonical K-packed (weights.h); k_perm (act-order) is applied to the activations here,
// i.e. callers pass x in checkpoint column order.
#pragma once

#include <cstdint>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

// y[m, n] = sum_k x[m, k] * dequant(W[expert])[n, k], accumulated in fp64 over the exactly
// dequantized weights (weights.h contract). x: [M, K]. y64: [M, N] fp64 (optional, may be
// null); y_act: [M, N] rounded once to the activation dtype (optional).
Status gemm_ref(const KPackedWeights& w, int expert, const uint16_t* x, int m, std::vector<double>* y64,
                std::vector<uint16_t>* y_act);

// Router: logits fp32 [M, E] -> top-k expert ids and weights [M, topk].
// Selection is on the logits (softmax is monotonic), largest first; ties: the LOWER expert
// index wins and comes first. Weights: softmax over all E experts computed in fp64
// (max-subtracted), then, if renormalize, divided by the sum of the k selected; stored fp32.
Status topk_softmax_ref(const float* logits, int m, int e, int topk, bool renormalize, std::vector<int32_t>* ids,
                        std::vector<float>* weights);

// Align (vLLM moe_align_block_size): the M*topk flat pairs i = token*topk + slot are grouped
// by expert (expert 0 first), in increasing i within an expert; each expert's run is padded
// to a multiple of block_m with the sentinel M*topk; experts with no pairs get no block.
//   sorted_token_ids: [num_tokens_post_pad]
//   expert_ids:       [num_tokens_post_pad / block_m], the expert of each block
// A GPU buffer needs at most M*topk + E*(block_m-1) entries (rounded up to block_m); entries
// beyond num_tokens_post_pad are unspecified. An id outside [0, num_experts) is an error, or,
// with skip_foreign_ids (caller routing under expert parallelism: -1 = held by another rank;
// what the GPU align does), a pair that is left out.
struct MoeAlignment {
  std::vector<int32_t> sorted_token_ids;
  std::vector<int32_t> expert_ids;
  int32_t num_tokens_post_pad = 0;
  int32_t sentinel = 0;  // M*topk
};
Status moe_align_ref(const int32_t* topk_ids, int m, int topk, int num_experts, int block_m, MoeAlignment* out,
                     bool skip_foreign_ids = false);
// Upper bound of num_tokens_post_pad, for sizing device buffers.
inline int64_t moe_align_max_padded(int m, int topk, int num_experts, int block_m) {
  int64_t n = static_cast<int64_t>(m) * topk + static_cast<int64_t>(num_experts) * (block_m - 1);
  return (n + block_m - 1) / block_m * block_m;
}

// Fused MoE: for every (token t, slot j) with expert e = topk_ids[t, j], weight r:
//   h   = GEMM(x[t], w13[e])            w13 [E, 2I, H]: rows [0, I) gate, [I, 2I) up
//   a   = silu(h[:I]) * h[I:]           silu(g) = g / (1 + exp(-g))
//   o_j = r * GEMM(a, w2[e])            w2  [E, H, I]
//   out[t] = sum_j o_j
// Everything in fp64. With round_intermediates (what the GPU does), h and a are rounded to
// the activation dtype before use, like vLLM's intermediate caches. out64 [M, H] fp64
// (optional), out_act [M, H] rounded once (optional). The pairs are visited through
// moe_align_ref(block_m), so the reference exercises the same grouping as the kernels.
struct FusedMoeArgs {
  const uint16_t* x = nullptr;  // [M, H] activation dtype
  int m = 0;
  int topk = 0;
  const int32_t* topk_ids = nullptr;   // [M, topk]
  const float* topk_weights = nullptr;  // [M, topk]
  int block_m = 16;
  bool round_intermediates = true;
  // Pairs whose id is outside [0, E) contribute nothing (MoeArgs::topk_ids); else an error.
  bool skip_foreign_ids = false;
};
Status fused_moe_ref(const KPackedWeights& w13, const KPackedWeights& w2, const FusedMoeArgs& args,
                     std::vector<double>* out64, std::vector<uint16_t>* out_act);

}  // namespace lowbit::int4
