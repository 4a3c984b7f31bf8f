// quantize_rtn: weights already on an asymmetric grid come back bit-exactly; every weight of
// random data is reproduced within its group's scale (s / 2 unless clipped, s at the clip);
// all-zero groups, per-channel groups and both dtypes; bad input is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "lowbit/int4/weights.h"

namespace lowbit::int4 {
namespace {

float dequant(const KPackedWeights& q, int e, int n, int k) {
  const int g = k / q.shape.group_len();
  return half_bits_to_float(q.shape.act,
                            dequant_bits(kpacked_q(q, e, n, k), kpacked_z(q, e, n, g), kpacked_s(q, e, n, g), q.shape.act));
}

TEST(QuantizeRtn, AsymmetricGridRoundTripsExactly) {
  // Every group spans q = 0..15 around z = 3 with s = 0.5: min = -1.5, max = 6 -> RTN finds
  // s = 7.5 / 15 = 0.5 and z = 3 again, and every weight lands on its grid point.
  WeightShape s{2, 3, 64, 32, false, DType::kBF16};
  std::mt19937 rng(1);
  std::vector<float> w(static_cast<size_t>(s.experts) * s.n * s.k);
  for (size_t i = 0; i < w.size(); ++i) {
    const int pos = static_cast<int>(i % 32);
    const int q = pos == 0 ? 0 : pos == 1 ? 15 : static_cast<int>(rng() % 16);
    w[i] = (q - 3) * 0.5f;
  }
  KPackedWeights out;
  ASSERT_TRUE(quantize_rtn(w.data(), s, &out).ok());
  ASSERT_TRUE(validate(out).ok());
  for (int e = 0; e < s.experts; ++e)
    for (int n = 0; n < s.n; ++n)
      for (int k = 0; k < s.k; ++k) {
        ASSERT_EQ(kpacked_z(out, e, n, k / 32), 3);
        ASSERT_EQ(dequant(out, e, n, k), w[(static_cast<size_t>(e) * s.n + n) * s.k + k]) << e << " " << n << " " << k;
      }
}

TEST(QuantizeRtn, RandomWeightsWithinScale) {
  for (DType act : {DType::kBF16, DType::kF16})
    for (bool sym : {true, false})
      for (int G : {32, 128, kPerChannel}) {
        WeightShape s{1, 7, 256, G, sym, act};
        std::mt19937 rng(7u + G + (sym ? 100u : 0u));
        std::normal_distribution<float> nd(0.01f, 0.05f);
        std::vector<float> w(static_cast<size_t>(s.n) * s.k);
        for (auto& v : w) v = nd(rng);
        for (int k = 0; k < 32; ++k) w[k] = 0.f;  // row 0, first 32 columns: an all-zero group when G = 32
        KPackedWeights out;
        ASSERT_TRUE(quantize_rtn(w.data(), s, &out).ok());
        ASSERT_TRUE(validate(out).ok());
        double err2 = 0, ref2 = 0;
        for (int n = 0; n < s.n; ++n)
          for (int k = 0; k < s.k; ++k) {
            const float x = w[static_cast<size_t>(n) * s.k + k], y = dequant(out, 0, n, k);
            const float sc = half_bits_to_float(act, kpacked_s(out, 0, n, k / s.group_len()));
            // One rounding of the product to the activation dtype on top of the grid error.
            const float slack = std::ldexp(std::fabs(y), act == DType::kBF16 ? -8 : -11);
            const int q = kpacked_q(out, 0, n, k);
            const bool clipped = q == 0 || q == 15;
            ASSERT_LE(std::fabs(x - y), (clipped ? sc : 0.5f * sc) + slack)
                << dtype_name(act) << " sym=" << sym << " G=" << G << " n=" << n << " k=" << k;
            err2 += static_cast<double>(x - y) * (x - y);
            ref2 += static_cast<double>(x) * x;
          }
        if (G == 32) {
          for (int k = 0; k < 32; ++k) ASSERT_EQ(dequant(out, 0, 0, k), 0.f);
        }
        // 4 bits on Gaussian weights: relative L2 error a few percent (measured ~5-10%).
        EXPECT_LT(std::sqrt(err2 / ref2), 0.2) << dtype_name(act) << " sym=" << sym << " G=" << G;
      }
}

TEST(QuantizeRtn, RefusesBadInput) {
  WeightShape s{1, 2, 64, 32, true, DType::kBF16};
  std::vector<float> w(128, 0.25f);
  KPackedWeights out;
  w[70] = std::numeric_limits<float>::quiet_NaN();
  Status st = quantize_rtn(w.data(), s, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("row 1, k 6"), std::string::npos) << st.message();
  w[70] = 0.25f;
  w[3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(quantize_rtn(w.data(), s, &out).code(), StatusCode::kInvalidArgument);
  w[3] = 0.25f;
  WeightShape bad = s;
  bad.group_size = 48;  // does not divide K = 64
  EXPECT_EQ(quantize_rtn(w.data(), bad, &out).code(), StatusCode::kInvalidArgument);
  WeightShape f16 = s;
  f16.act = DType::kF16;
  w[0] = 1e6f;  // 2 * 1e6 / 15 overflows fp16's 65504
  st = quantize_rtn(w.data(), f16, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("overflows fp16"), std::string::npos) << st.message();
  EXPECT_EQ(quantize_rtn(nullptr, s, &out).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lowbit::int4
