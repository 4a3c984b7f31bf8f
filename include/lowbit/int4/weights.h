// INT4 weights (W4A16): the library's canonical in-memory layouts. Converters from
// checkpoint formats (GPTQ, AWQ, compressed-tensors) produce KPackedWeights; load-time
// repacking produces the layouts the kernels read. See ../shared/specs/int4-weights.md.
//
// Notation: one expert's linear layer maps K inputs to N outputs (y = x W^T, W is [N, K]);
// E experts; group size G (32, 64, 128, or kPerChannel: one group spanning all of K).
// Dequantization contract (bit-exact on CPU and GPU):
//   w[n, k] = round_to_act_dtype( float(q[n, k] - z[k/G, n]) * float(s[k/G, n]) )
// d = q - z is a small integer, d * s is exact in fp32, rounded once to the activation
// dtype. Symmetric weights have no zero tensor: z = 8.
//
// Scale dtype decision: scales are stored as bits of the ACTIVATION dtype, so the kernels
// compute h * s in one dtype. GPTQ/AWQ checkpoints carry fp16 scales: for fp16 activations
// they are copied bit for bit; for bf16 activations fp16 -> bf16 is NOT always exact (fp16
// has 11 significant bits, bf16 8), so the converters take a ScalePolicy: kExact (default)
// refuses the weight naming the first scale that does not fit; kRound rounds to nearest even
// and reports how many scales changed and the largest relative change (the checkpoint is then
// dequantized with the rounded scales; the contract above still holds for what is stored).
// Non-finite scales (and scales that overflow the activation dtype) are always refused.
//
// Act-order (GPTQ desc_act): a converter may reorder the K rows of a weight into group order.
// It then records k_perm [E, K]: stored row j is checkpoint row k_perm[e*K + j], and the
// kernel input must be the permuted activations x'[:, j] = x[:, k_perm[e*K + j]]. Empty
// k_perm means the identity (the usual case).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lowbit/detail/float_bits.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

constexpr int kPerChannel = -1;

struct WeightShape {
  int experts = 1;  // E
  int n = 0;        // output features N
  int k = 0;        // input features K
  int group_size = 128;  // G, or kPerChannel
  bool symmetric = true;
  DType act = DType::kBF16;  // activation dtype; scales are stored in this dtype

  int group_len() const { return group_size == kPerChannel ? k : group_size; }
  int num_groups() const { return (k + group_len() - 1) / group_len(); }
};

// Canonical K-packed layout (the kernel input layout before vLLM PR #43389):
//   qweight uint8  [E, N, K/2]   byte b of row n: k = 2b in the low nibble, k = 2b+1 high
//   scales  uint16 [E, N, K/G]   bits of the activation dtype
//   zeros   uint8  [E, N/2, K/G] asymmetric only: row-pair packed, low nibble = even n
//                                (N odd: the last byte's high nibble is 0)
// K must be even and a multiple of G (when G != per-channel).
struct KPackedWeights {
  WeightShape shape;
  std::vector<uint8_t> qweight;
  std::vector<uint16_t> scales;
  std::vector<uint8_t> zeros;  // empty when symmetric
  std::vector<int32_t> k_perm;  // empty (identity), or [E, K] act-order permutation (above)
};

// Checks shape fields and that every vector has exactly the size the shape implies (and that
// k_perm, when present, holds a permutation of 0..K-1 per expert).
Status validate(const KPackedWeights& w);
// The k_perm check of validate(): empty, or E*K entries that are a permutation of 0..K-1 per
// expert; `who` names the caller in the error.
Status validate_k_perm(const std::vector<int32_t>& k_perm, const WeightShape& s, const char* who);

// Element access on the canonical layout (no bounds checks; validate() first).
inline int kpacked_q(const KPackedWeights& w, int e, int n, int k) {
  size_t row = (static_cast<size_t>(e) * w.shape.n + n) * (w.shape.k / 2);
  uint8_t b = w.qweight[row + k / 2];
  return (k & 1) ? (b >> 4) : (b & 0xF);
}
inline int kpacked_z(const KPackedWeights& w, int e, int n, int g) {
  if (w.shape.symmetric) return 8;
  size_t idx = (static_cast<size_t>(e) * ((w.shape.n + 1) / 2) + n / 2) * w.shape.num_groups() + g;
  uint8_t b = w.zeros[idx];
  return (n & 1) ? (b >> 4) : (b & 0xF);
}
inline uint16_t kpacked_s(const KPackedWeights& w, int e, int n, int g) {
  return w.scales[(static_cast<size_t>(e) * w.shape.n + n) * w.shape.num_groups() + g];
}
// Allocates all vectors for `shape` (zero-filled) so that setters below can be used.
void kpacked_allocate(const WeightShape& shape, KPackedWeights* w);
void kpacked_set_q(KPackedWeights* w, int e, int n, int k, int q);
void kpacked_set_z(KPackedWeights* w, int e, int n, int g, int z);
inline void kpacked_set_s(KPackedWeights* w, int e, int n, int g, uint16_t bits) {
  w->scales[(static_cast<size_t>(e) * w->shape.n + n) * w->shape.num_groups() + g] = bits;
}

// The contract above for one element: dequantized weight as activation-dtype bits.
inline uint16_t dequant_bits(int q, int z, uint16_t scale_bits, DType act) {
  float s = half_bits_to_float(act, scale_bits);
  return float_to_half_bits(act, static_cast<float>(q - z) * s);
}

// Round-to-nearest quantization of fp32 weights [E, N, K] into this layout with GPTQ's grid
// (asymmetric: s = (max - min) / 15 over a range that includes 0, z = round(-min / s);
// symmetric: s = 2 absmax / 15, z = 8), the scale rounded to shape.act before q is chosen.
// For measuring what the format costs a model; checkpoints come through the converters.
// Non-finite weights and scales that overflow the dtype are refused.
Status quantize_rtn(const float* w, const WeightShape& shape, KPackedWeights* out);
// Concatenates single-expert (or multi-expert) weights of one shape along E.
Status stack_experts(const std::vector<KPackedWeights>& parts, KPackedWeights* out);

// ---- Load-time repack (vLLM PR #43389): N-packed int32 -------------------------------
// N-packed layout (the PR's target):
//   qweight int32  [E, K, N/8]  word c of row k holds column 8c+i at bits 4i (natural order)
//   scales  uint16 [E, K/G, N]  activation dtype bits (transposed from K-packed [E, N, K/G])
//   zeros   uint16 [E, K/G, N]  asymmetric only: z as an activation-dtype value (0..15 exact)
//   k_perm  as in KPackedWeights
// Used when N % 8 == 0; other shapes keep the K-packed layout (layout_for says which).
// (The CUDA kernels may use their own, interleaved variant: include/lowbit/int4/kernel_layout.h.)
struct NPackedWeights {
  WeightShape shape;
  std::vector<int32_t> qweight;
  std::vector<uint16_t> scales;
  std::vector<uint16_t> zeros;
  std::vector<int32_t> k_perm;
};

enum class WeightLayout : uint8_t { kKPacked = 0, kNPacked = 1 };
constexpr const char* weight_layout_name(WeightLayout l) { return l == WeightLayout::kNPacked ? "npacked" : "kpacked"; }
// kNPacked when N % 8 == 0, else kKPacked (the PR's rule).
WeightLayout layout_for(const WeightShape& s);

Status validate(const NPackedWeights& w);
// K-packed -> N-packed; refuses N % 8 != 0 (use layout_for first).
Status repack_to_npacked(const KPackedWeights& in, NPackedWeights* out);
// Exact inverse. Refuses zeros that are not integers 0..15 in the activation dtype.
Status unpack_from_npacked(const NPackedWeights& in, KPackedWeights* out);

// Dequantize to [E, N, K] activation-dtype bits (K in stored order, i.e. after k_perm).
// The two layouts must agree bit-for-bit.
Status dequantize(const KPackedWeights& w, std::vector<uint16_t>* out);
Status dequantize(const NPackedWeights& w, std::vector<uint16_t>* out);

}  // namespace lowbit::int4
