// Tensor-parallel shards of canonical INT4 weights, and column joins (host code, exact).
//
// Engines split a checkpoint over TP ranks: column-parallel layers (attention qkv, MLP gate /
// up, MoE w13) by output features N, row-parallel layers (attention o, MLP down, MoE w2) by
// input features K. Real models put a K shard's bounds inside a scale group:
// DeepSeek-V2-Lite's w2 at TP 2 has K = 1408 / 2 = 704 = 5.5 groups of 128, Qwen3-30B-A3B's at
// TP 4 has 768 / 4 = 192 = 1.5 groups. vLLM crashes or refuses such shards (the spec's
// ../shared/specs/int4-weights.md, "I/TP not a multiple of G"). shard_k expresses them
// exactly at a finer group size G' = gcd(G, k0, k): each checkpoint group that the shard
// covers becomes G / G' groups of the shard, all carrying that group's scale (and zero point),
// so every element dequantizes to the same bits as in the whole weight (weights.h's contract).
// 704 rows of G = 128 give G' = 64; the GPU kernels take G' in {32, 64, 128} (repack_for_kernels
// names any other). The cost is the scale bytes: G / G' times as many for that weight.
#pragma once

#include <cstdint>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

// Rows [k0, k0 + k) of K of every expert (row-parallel). k0 and k even (whole bytes), within
// K. The shard's group size is gcd(G, k0, k); per-channel weights stay per-channel (their one
// group spans K, so each column keeps its scale). Act-order weights (k_perm) are refused: a K
// range of the checkpoint's rows falls into groups of uneven length, which one group size
// cannot hold. A down projection's (MoE w2's) permutation can be folded into its gate / up
// columns first (act_order_fold.h); the folded weight shards like any other.
Status shard_k(const KPackedWeights& w, int k0, int k, KPackedWeights* out);
// The group size shard_k gives rows [k0, k0 + k) of a weight of group size G: gcd(G, k0, k)
// (per-channel stays per-channel).
int shard_group_size(int group_size, int k0, int k);

// Columns [n0, n0 + n) of N of every expert (column-parallel). Groups and k_perm unchanged.
Status shard_n(const KPackedWeights& w, int n0, int n, KPackedWeights* out);

// The parts side by side along N (the inverse of shard_n): MoE / MLP gate and up into one
// [gate; up] weight (w13: one GEMM1 of 2I rows). Same E, K, group size, symmetry, activation
// dtype and k_perm (act-order parts whose permutations differ cannot share one K order:
// refused, naming the part).
Status concat_n(const std::vector<KPackedWeights>& parts, KPackedWeights* out);

// How a layer is split over TP ranks (tp_shard).
enum class TpSplit : uint8_t {
  kColumns = 0,  // N in equal parts
  kRows = 1,     // K in equal parts (shard_k: groups refined where a bound cuts one)
  kGateUp = 2,   // a fused [gate; up] weight ([E, 2I, H], MoE w13 / fused MLP gate_up):
                 // columns [r I/R, (r+1) I/R) of each half, kept as [gate; up] of the shard
};
constexpr const char* tp_split_name(TpSplit s) {
  return s == TpSplit::kColumns ? "columns" : s == TpSplit::kRows ? "rows" : "gate_up";
}

// Rank `rank` of `ranks` equal parts of the split dimension (N, K, or I = N / 2 for kGateUp),
// which `ranks` must divide.
Status tp_shard(const KPackedWeights& w, TpSplit split, int rank, int ranks, KPackedWeights* out);

}  // namespace lowbit::int4
