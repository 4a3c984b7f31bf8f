// fp64 reference of the whole fused MoE layer for the GPU tests (test_moe.cu, test_act_order.cu),
// with the GPU's rounding of the silu(gate) * up intermediate to the activation dtype, and the
// tolerance the layer's outputs are held to.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lowbit/int4/weights.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/moe_cpu_ref.h"

namespace lowbit::int4::testing {

// [M, H] for given ids and weights (ids outside [0, E) contribute nothing, as MoeArgs::topk_ids
// says). Act-order weights (k_perm set, weights.h): stored row j of expert e multiplies input
// k_perm[e * K + j], of x for w13 and of the intermediate for w2.
inline std::vector<double> moe_reference_routed(const std::vector<uint16_t>& x, const std::vector<int32_t>& ids,
                                                const std::vector<float>& rw, int M, int E, int H, int I, int topk,
                                                DType act, const KPackedWeights& k13, const KPackedWeights& k2) {
  auto deq = [&](const KPackedWeights& w, int e, int n, int k) {
    return static_cast<double>(half_bits_to_float(act, canon_dequant_bits(w, e, n, k)));
  };
  auto input = [](const KPackedWeights& w, int e, int j, int K) {
    return w.k_perm.empty() ? j : w.k_perm[static_cast<size_t>(e) * K + j];
  };
  std::vector<double> ref(static_cast<size_t>(M) * H, 0.0), inter(I);
  for (int m = 0; m < M; ++m)
    for (int s = 0; s < topk; ++s) {
      const int e = ids[m * topk + s];
      if (e < 0 || e >= E) continue;
      for (int n = 0; n < I; ++n) {
        double g = 0, up = 0;
        for (int k = 0; k < H; ++k) {
          const double xv = half_bits_to_float(act, x[static_cast<size_t>(m) * H + input(k13, e, k, H)]);
          g += xv * deq(k13, e, n, k);
          up += xv * deq(k13, e, I + n, k);
        }
        const double a_exact = g / (1.0 + std::exp(-g)) * up;
        inter[n] = half_bits_to_float(act, float_to_half_bits(act, static_cast<float>(a_exact)));  // GPU stores act dtype
      }
      for (int h = 0; h < H; ++h) {
        double o = 0;
        for (int n = 0; n < I; ++n) o += inter[input(k2, e, n, I)] * deq(k2, e, h, n);
        ref[static_cast<size_t>(m) * H + h] += rw[m * topk + s] * o;
      }
    }
  return ref;
}

// The same with the softmax top-k (renormalized) of the logits.
inline std::vector<double> moe_reference(const std::vector<uint16_t>& x, const std::vector<float>& logits, int M, int E,
                                         int H, int I, int topk, DType act, const KPackedWeights& k13,
                                         const KPackedWeights& k2) {
  std::vector<int32_t> ids;
  std::vector<float> rw;
  cpu_topk(logits, M, E, topk, true, &ids, &rw);
  return moe_reference_routed(x, ids, rw, M, E, H, I, topk, act, k13, k2);
}

// The layer's outputs against moe_reference: finite, relative RMS error within the tolerance.
inline void expect_layer_close(const std::vector<double>& got, const std::vector<double>& ref, DType act) {
  ASSERT_EQ(got.size(), ref.size());
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "output " << i;
    err2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  ASSERT_GT(ref2, 0.0);
  // bf16: the intermediate and output roundings (2^-9 relative each) plus rare
  // intermediate rounding flips; fp16 is 8x finer.
  EXPECT_LT(std::sqrt(err2 / ref2), act == DType::kBF16 ? 1e-2 : 2e-3);
}

}  // namespace lowbit::int4::testing
