// Folding a down projection's act-order permutation into the layers that produce its input
// (host code, exact).
//
// An act-order weight (GPTQ desc_act; weights.h) stores its K rows in group order and carries
// k_perm: the kernels read x' = x[:, k_perm], one gather launch before each GEMM (kernels.h),
// and such a weight cannot be cut into K shards for tensor parallelism (shard.h: a rank's
// checkpoint rows fall into groups of uneven length). For an MLP's down projection (and a MoE
// expert's w2) the input is made inside the layer: inter = silu(gate x) * up x, one column per
// intermediate feature, elementwise. Reordering the output columns of gate and up by down's
// k_perm makes them produce inter[:, k_perm] directly: down then reads its input in stored row
// order and needs no permutation, no gather and, under TP, shards like any other weight
// (shard_k / tp_shard kRows on down, kGateUp or kColumns on the producers). With bf16
// activations the values are the same bits as the gathered ones: each output column of a GEMM is
// the same sum wherever it sits. With fp16 activations on MMA-tiled weights, the decode tile
// sums columns 8..15 of every 16 as (1024 + 16 q) x and the others as (1024 + q) x (two shifts
// per word less; decode_tile.cuh), the same values rounded differently in fp32: a feature moved
// between the two halves may change in its last bits (as accurate against fp64; measured on an
// H100 in the GPU tests, 2026-12-05). Every other layout and path is bit for bit in both dtypes.
//
// Attention's o projection cannot be folded this way (its input columns belong to heads, which
// a free permutation would mix), nor can a layer's own input K order (x comes from the residual
// stream that other layers read too).
#pragma once

#include <cstdint>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

// The columns of every expert reordered within `parts` equal parts of N: column p * (N / parts)
// + j of `out` is column p * (N / parts) + perm[e * (N / parts) + j] of `w` (qweight rows,
// scales and zero points move with their column; K, groups and k_perm unchanged). perm: E x
// (N / parts) entries, a permutation of 0 .. N / parts - 1 per expert. parts = 2 reorders both
// halves of a [gate; up] weight by the same permutation.
Status permute_n(const KPackedWeights& w, const std::vector<int32_t>& perm, int parts, KPackedWeights* out);

// Folds down's act-order permutation (down.k_perm, [E, K]) into `producers`: each is a weight
// whose output columns are down's input features, either one part (N = down's K: a separate
// gate or up projection) or a fused [gate; up] (N = 2 x down's K, both halves reordered). Every
// producer must have down's expert count and activation dtype. On success the producers' columns
// are reordered (permute_n) and down's k_perm is cleared; the layer computes the same outputs
// with one gather less (bit-identical through the CPU reference and the GPU kernels, but for
// fp16 on the MMA-tiled decode tile: see above). A down
// weight without k_perm is left as it is (nothing to fold). On error nothing is modified.
Status fold_act_order(const std::vector<KPackedWeights*>& producers, KPackedWeights* down);

}  // namespace lowbit::int4
