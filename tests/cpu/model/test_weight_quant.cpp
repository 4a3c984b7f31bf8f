// quantize_linear_weights_int4: the block linears become INT4 round trips (within their
// row's quantization step, bf16-exact values), everything else is untouched, and a group
// that does not divide a K is refused naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lowbit/int4/weights.h"
#include "lowbit/model/llama.h"
#include "tests/cpu/model/tiny_llama.h"

namespace lowbit::model {
namespace {

TEST(WeightQuant, LinearsRoundTripOthersUntouched) {
  const LlamaConfig c = testutil::tiny_config(2);
  const LlamaWeights orig = testutil::tiny_weights(c, 3);
  LlamaWeights w = orig;
  ASSERT_TRUE(quantize_linear_weights_int4(c, int4::kPerChannel, false, DType::kBF16, &w).ok());
  EXPECT_EQ(w.tok_embd, orig.tok_embd);
  EXPECT_EQ(w.output, orig.output);
  EXPECT_EQ(w.output_norm, orig.output_norm);
  for (int l = 0; l < c.n_layers; ++l) {
    EXPECT_EQ(w.layers[l].attn_norm, orig.layers[l].attn_norm);
    EXPECT_EQ(w.layers[l].ffn_norm, orig.layers[l].ffn_norm);
    const std::vector<float>* got[] = {&w.layers[l].wq, &w.layers[l].wo, &w.layers[l].w_down};
    const std::vector<float>* ref[] = {&orig.layers[l].wq, &orig.layers[l].wo, &orig.layers[l].w_down};
    const int ks[] = {c.hidden, c.n_heads * c.head_dim, c.intermediate};
    for (int i = 0; i < 3; ++i) {
      const int K = ks[i], N = static_cast<int>(ref[i]->size() / K);
      bool changed = false;
      for (int n = 0; n < N; ++n) {
        // Asymmetric per-channel step: (max - min) / 15 over the row's range widened to 0;
        // error <= one step (clipping at the ends) plus the bf16 rounding of the product.
        float lo = 0.f, hi = 0.f;
        for (int k = 0; k < K; ++k) lo = std::min(lo, (*ref[i])[n * K + k]), hi = std::max(hi, (*ref[i])[n * K + k]);
        const float step = (hi - lo) / 15.f * 1.01f;
        for (int k = 0; k < K; ++k) {
          const float a = (*got[i])[n * K + k], b = (*ref[i])[n * K + k];
          ASSERT_LE(std::fabs(a - b), step + std::ldexp(std::fabs(a), -8)) << "layer " << l << " mat " << i;
          ASSERT_EQ(a, half_bits_to_float(DType::kBF16, float_to_half_bits(DType::kBF16, a)));  // bf16-exact
          changed = changed || a != b;
        }
      }
      EXPECT_TRUE(changed) << "layer " << l << " mat " << i;
    }
  }
}

TEST(WeightQuant, GroupMustDivideEveryK) {
  const LlamaConfig c = testutil::tiny_config(1);
  LlamaWeights w = testutil::tiny_weights(c, 4);
  const Status st = quantize_linear_weights_int4(c, 32, true, DType::kBF16, &w);  // hidden = 48
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("blk.0.attn_q"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("divide K=48"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace lowbit::model
