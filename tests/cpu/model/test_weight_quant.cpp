// quantize_linear_weights_int4: the block linears become INT4 round trips (within their
// row's quantization step, bf16-exact values), everything else is untouched, and a group
// that does not divide a K is refused naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/model/cpu_engine.h"
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

namespace lowbit::model {
namespace {

// The plain engine shows every block linear's input to an observer: 4 sites per layer with
// the config's widths, n rows per forward; observing changes nothing; TP engines refuse one.
class CountingObserver : public LinearInputObserver {
 public:
  void observe(int layer, int site, const float* x, int n, int k) override {
    calls.push_back({layer, site, n, k});
    double s = 0;
    for (int i = 0; i < n * k; ++i) s += std::fabs(x[i]);
    nonzero = nonzero && s > 0;
  }
  std::vector<std::array<int, 4>> calls;
  bool nonzero = true;
};

TEST(WeightQuant, ObserverSeesEveryBlockLinearInput) {
  const LlamaConfig c = testutil::tiny_config(2);
  const LlamaWeights w = testutil::tiny_weights(c, 8);
  const std::vector<int32_t> ids = testutil::tiny_tokens(c, 13, 2);
  CountingObserver obs;
  CpuEngineOptions o;
  o.max_ctx = 64;
  CpuLlama plain, seen;
  ASSERT_TRUE(plain.init(c, &w, o).ok());
  o.observer = &obs;
  ASSERT_TRUE(seen.init(c, &w, o).ok());
  std::vector<float> h0, h1;
  ASSERT_TRUE(plain.forward(ids.data(), 13, &h0).ok());
  ASSERT_TRUE(seen.forward(ids.data(), 13, &h1).ok());
  EXPECT_EQ(h0, h1);
  const int widths[4] = {c.hidden, c.n_heads * c.head_dim, c.hidden, c.intermediate};
  ASSERT_EQ(obs.calls.size(), static_cast<size_t>(c.n_layers) * 4);
  for (size_t i = 0; i < obs.calls.size(); ++i) {
    EXPECT_EQ(obs.calls[i][0], static_cast<int>(i / 4));
    EXPECT_EQ(obs.calls[i][1], static_cast<int>(i % 4));
    EXPECT_EQ(obs.calls[i][2], 13);
    EXPECT_EQ(obs.calls[i][3], widths[i % 4]);
  }
  EXPECT_TRUE(obs.nonzero);
  o.tp = 2;
  CpuLlama tp;
  const Status st = tp.init(c, &w, o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("observer"), std::string::npos) << st.message();
}

// Hidden-state error of a quantized copy against the unquantized model on held-out tokens.
double hidden_error(const LlamaConfig& c, const LlamaWeights& ref, const LlamaWeights& q,
                    const std::vector<int32_t>& ids) {
  CpuEngineOptions o;
  o.max_ctx = 256;
  CpuLlama a, b;
  EXPECT_TRUE(a.init(c, &ref, o).ok());
  EXPECT_TRUE(b.init(c, &q, o).ok());
  std::vector<float> ha, hb;
  EXPECT_TRUE(a.forward(ids.data(), static_cast<int>(ids.size()), &ha).ok());
  EXPECT_TRUE(b.forward(ids.data(), static_cast<int>(ids.size()), &hb).ok());
  double e = 0, r = 0;
  for (size_t i = 0; i < ha.size(); ++i) e += (ha[i] - hb[i]) * (ha[i] - hb[i]), r += ha[i] * ha[i];
  return std::sqrt(e / r);
}

// GPTQ through the model: linears replaced by bf16-exact INT4 round trips, the rest untouched,
// and the model's output on held-out tokens closer to the unquantized one than with RTN.
TEST(WeightQuant, GptqRoundTripsTheLinearsAndBeatsRtn) {
  const LlamaConfig c = testutil::tiny_config(2);
  const LlamaWeights orig = testutil::tiny_weights(c, 21);
  const std::vector<int32_t> calib = testutil::tiny_tokens(c, 4 * 64, 5);
  const std::vector<int32_t> held = testutil::tiny_tokens(c, 96, 6);
  for (bool act_order : {false, true}) {
    LlamaWeights g = orig, r = orig;
    GptqCalibration cal;
    cal.tokens = calib.data();
    cal.count = static_cast<int64_t>(calib.size());
    cal.ctx = 64;
    cal.act_order = act_order;
    ASSERT_TRUE(quantize_linear_weights_int4_gptq(c, cal, 8, false, DType::kBF16, &g).ok());
    ASSERT_TRUE(quantize_linear_weights_int4(c, 8, false, DType::kBF16, &r).ok());
    EXPECT_EQ(g.tok_embd, orig.tok_embd);
    for (int l = 0; l < c.n_layers; ++l) {
      EXPECT_EQ(g.layers[l].attn_norm, orig.layers[l].attn_norm);
      for (const std::vector<float>* m : {&g.layers[l].wq, &g.layers[l].wv, &g.layers[l].wo, &g.layers[l].w_down}) {
        for (float a : *m) ASSERT_EQ(a, half_bits_to_float(DType::kBF16, float_to_half_bits(DType::kBF16, a)));
      }
      EXPECT_NE(g.layers[l].w_up, orig.layers[l].w_up);
    }
    const double eg = hidden_error(c, orig, g, held), er = hidden_error(c, orig, r, held);
    EXPECT_GT(eg, 0.0);
    EXPECT_LT(eg, er) << "act_order=" << act_order << ": GPTQ " << eg << " RTN " << er;
  }
  LlamaWeights g = orig;
  GptqCalibration shortcal;
  shortcal.tokens = calib.data();
  shortcal.count = 10;
  shortcal.ctx = 64;
  const Status st = quantize_linear_weights_int4_gptq(c, shortcal, 8, false, DType::kBF16, &g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("fewer than one window"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace lowbit::model
