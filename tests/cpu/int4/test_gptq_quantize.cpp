// GPTQ (gptq_quantize.h): with an identity Hessian it is round-to-nearest, bit for bit; on
// correlated inputs it lowers the layer's reconstruction error against RTN on the same grid;
// act-order gives a desc_act layout (k_perm by decreasing diag H, uniform groups) that the
// GPTQ writer and converter round-trip; bad Hessians and shapes are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lowbit/int4/formats.h"
#include "lowbit/int4/gptq_quantize.h"
#include "lowbit/int4/weights.h"

namespace lowbit::int4 {
namespace {

std::vector<float> random_weights(int n, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = d(rng);
  return w;
}

// Calibration rows with correlated features and per-feature scales spread over 100x (so that
// act-order changes the order), plus the Gram matrix sum x x^T.
void correlated_inputs(int rows, int k, uint32_t seed, std::vector<double>* x, std::vector<double>* h) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> feat_scale(k);
  for (int i = 0; i < k; ++i) feat_scale[i] = std::pow(10.0, 2.0 * ((i * 7919) % k) / k - 1.0);
  x->assign(static_cast<size_t>(rows) * k, 0.0);
  for (int r = 0; r < rows; ++r) {
    const double common = d(rng);
    for (int i = 0; i < k; ++i)
      (*x)[static_cast<size_t>(r) * k + i] = feat_scale[i] * (0.7 * common + 0.3 * d(rng) + 0.2 * std::sin(0.1 * i * r));
  }
  h->assign(static_cast<size_t>(k) * k, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b)
        (*h)[static_cast<size_t>(a) * k + b] += (*x)[static_cast<size_t>(r) * k + a] * (*x)[static_cast<size_t>(r) * k + b];
}

// The dequantized weight [N, K] in input-row order (k_perm undone).
std::vector<double> dequantized(const KPackedWeights& q) {
  std::vector<uint16_t> bits;
  EXPECT_TRUE(dequantize(q, &bits).ok());
  const int N = q.shape.n, K = q.shape.k;
  std::vector<double> w(static_cast<size_t>(N) * K);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < K; ++j) {
      const int k = q.k_perm.empty() ? j : q.k_perm[j];
      w[static_cast<size_t>(n) * K + k] = half_bits_to_float(q.shape.act, bits[static_cast<size_t>(n) * K + j]);
    }
  return w;
}

// ||X (W - Wq)^T||_F^2: the loss GPTQ minimizes.
double output_error(const std::vector<double>& x, int rows, const std::vector<float>& w, const std::vector<double>& wq,
                    int n, int k) {
  double e = 0;
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < n; ++o) {
      double s = 0;
      for (int i = 0; i < k; ++i)
        s += x[static_cast<size_t>(r) * k + i] * (w[static_cast<size_t>(o) * k + i] - wq[static_cast<size_t>(o) * k + i]);
      e += s * s;
    }
  return e;
}

TEST(GptqQuantize, IdentityHessianIsRoundToNearest) {
  for (bool sym : {true, false})
    for (int g : {32, kPerChannel}) {
      const WeightShape s{1, 24, 128, g, sym, DType::kBF16};
      const auto w = random_weights(s.n, s.k, 11);
      std::vector<double> h(static_cast<size_t>(s.k) * s.k, 0.0);
      for (int i = 0; i < s.k; ++i) h[static_cast<size_t>(i) * s.k + i] = 1.0;
      GptqPrepared p;
      ASSERT_TRUE(gptq_prepare(h.data(), s.k, GptqOptions{}, &p).ok());
      KPackedWeights a, b;
      ASSERT_TRUE(quantize_gptq(w.data(), s, p, &a).ok());
      ASSERT_TRUE(quantize_rtn(w.data(), s, &b).ok());
      EXPECT_EQ(a.qweight, b.qweight) << "sym=" << sym << " g=" << g;
      EXPECT_EQ(a.scales, b.scales);
      EXPECT_EQ(a.zeros, b.zeros);
      EXPECT_TRUE(a.k_perm.empty());
    }
}

TEST(GptqQuantize, LowersTheLayerErrorAgainstRtn) {
  const int rows = 512, n = 32, k = 128;
  std::vector<double> x, h;
  correlated_inputs(rows, k, 5, &x, &h);
  const auto w = random_weights(n, k, 6);
  for (bool act_order : {false, true})
    for (bool sym : {true, false})
      for (int g : {32, 64}) {
        const WeightShape s{1, n, k, g, sym, DType::kBF16};
        GptqOptions o;
        o.act_order = act_order;
        GptqPrepared p;
        ASSERT_TRUE(gptq_prepare(h.data(), k, o, &p).ok());
        KPackedWeights gq, rq;
        ASSERT_TRUE(quantize_gptq(w.data(), s, p, &gq).ok());
        ASSERT_TRUE(validate(gq).ok());
        ASSERT_TRUE(quantize_rtn(w.data(), s, &rq).ok());
        const double eg = output_error(x, rows, w, dequantized(gq), n, k);
        const double er = output_error(x, rows, w, dequantized(rq), n, k);
        EXPECT_GT(eg, 0.0);
        // GPTQ's greedy error feedback is not optimal, but on correlated inputs it beats RTN by a margin.
        EXPECT_LT(eg, 0.8 * er) << "act_order=" << act_order << " sym=" << sym << " g=" << g << " gptq " << eg
                                << " rtn " << er;
      }
}

TEST(GptqQuantize, ActOrderGivesADescActLayoutThatRoundTrips) {
  const int rows = 256, n = 16, k = 128, g = 32;
  std::vector<double> x, h;
  correlated_inputs(rows, k, 8, &x, &h);
  const auto w = random_weights(n, k, 9);
  GptqOptions o;
  o.act_order = true;
  GptqPrepared p;
  ASSERT_TRUE(gptq_prepare(h.data(), k, o, &p).ok());
  for (int j = 1; j < k; ++j)  // decreasing Hessian diagonal
    EXPECT_GE(h[static_cast<size_t>(p.perm[j - 1]) * k + p.perm[j - 1]], h[static_cast<size_t>(p.perm[j]) * k + p.perm[j]]);
  const WeightShape s{1, n, k, g, false, DType::kF16};
  KPackedWeights q;
  ASSERT_TRUE(quantize_gptq(w.data(), s, p, &q).ok());
  ASSERT_EQ(q.k_perm, p.perm);
  ASSERT_TRUE(validate(q).ok());
  // Written as a GPTQ v2 layer (g_idx: the group of each input row) and converted back: the
  // same dequantized weight in input order, and the checkpoint's groups of exactly G rows.
  GptqLinear layer;
  ASSERT_TRUE(kpacked_to_gptq(q, 0, GptqVersion::kV2, &layer).ok());
  ASSERT_EQ(layer.g_idx.size(), static_cast<size_t>(k));
  std::vector<int> per_group(k / g, 0);
  for (int i = 0; i < k; ++i) ++per_group[layer.g_idx[i]];
  for (int c : per_group) EXPECT_EQ(c, g);
  KPackedWeights back;
  ConvertReport rep;
  ASSERT_TRUE(gptq_to_kpacked(layer, DType::kF16, ScalePolicy::kExact, &back, &rep).ok());
  EXPECT_TRUE(rep.act_order);
  EXPECT_EQ(dequantized(back), dequantized(q));
}

TEST(GptqQuantize, DeadInputsQuantizeToZero) {
  const int n = 8, k = 64;
  std::vector<double> x, h;
  correlated_inputs(64, k, 3, &x, &h);
  for (int i = 0; i < k; ++i) h[static_cast<size_t>(5) * k + i] = h[static_cast<size_t>(i) * k + 5] = 0.0;  // input 5 never seen
  const auto w = random_weights(n, k, 4);
  GptqPrepared p;
  ASSERT_TRUE(gptq_prepare(h.data(), k, GptqOptions{}, &p).ok());
  EXPECT_EQ(p.dead[5], 1);
  KPackedWeights q;
  ASSERT_TRUE(quantize_gptq(w.data(), WeightShape{1, n, k, 32, false, DType::kBF16}, p, &q).ok());
  const auto dq = dequantized(q);
  for (int o = 0; o < n; ++o) EXPECT_EQ(dq[static_cast<size_t>(o) * k + 5], 0.0) << o;
}

TEST(GptqQuantize, RefusalsNameTheProblem) {
  const int k = 32;
  std::vector<double> h(static_cast<size_t>(k) * k, 0.0);
  for (int i = 0; i < k; ++i) h[static_cast<size_t>(i) * k + i] = 1.0;
  GptqPrepared p;
  auto refused = [](const Status& st, const char* what) {
    return st.code() == StatusCode::kInvalidArgument && st.message().find(what) != std::string::npos;
  };
  std::vector<double> bad = h;
  bad[3 * k + 4] = NAN;
  EXPECT_TRUE(refused(gptq_prepare(bad.data(), k, GptqOptions{}, &p), "(3, 4)"));
  bad = h;
  bad[7 * k + 7] = -1.0;
  EXPECT_TRUE(refused(gptq_prepare(bad.data(), k, GptqOptions{}, &p), "negative"));
  bad = h;
  bad[0 * k + 1] = bad[1 * k + 0] = 5.0;  // |h01| > sqrt(h00 h11): not positive definite
  GptqOptions nodamp;
  nodamp.damp = 0.0;
  EXPECT_TRUE(refused(gptq_prepare(bad.data(), k, nodamp, &p), "not positive definite"));
  ASSERT_TRUE(gptq_prepare(h.data(), k, GptqOptions{}, &p).ok());
  const auto w = random_weights(4, 64, 1);
  KPackedWeights q;
  EXPECT_TRUE(refused(quantize_gptq(w.data(), WeightShape{1, 4, 64, 32, true, DType::kBF16}, p, &q), "K=64"));
  auto w2 = random_weights(4, k, 2);
  w2[9] = INFINITY;
  EXPECT_TRUE(refused(quantize_gptq(w2.data(), WeightShape{1, 4, k, 32, true, DType::kBF16}, p, &q), "row 0"));
}

}  // namespace
}  // namespace lowbit::int4
