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
};

// Checks shape fields and that every vector has exactly the size the shape implies.
Status validate(const KPackedWeights& w);

}  // namespace lowbit::int4
