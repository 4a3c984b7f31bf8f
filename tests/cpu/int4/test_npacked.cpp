// K-packed <-> N-packed repack (vLLM PR #43389 layout): bit-exact round trips, dequantization
// of both layouts agrees bit-for-bit, layout selection, and validation.
#include <gtest/gtest.h>

#include <random>

#include "lowbit/int4/weights.h"

using namespace lowbit;
using namespace lowbit::int4;

namespace {
KPackedWeights random_weight(const WeightShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  KPackedWeights w;
  kpacked_allocate(s, &w);
  for (auto& b : w.qweight) b = static_cast<uint8_t>(rng());
  for (auto& v : w.scales) v = float_to_half_bits(s.act, (static_cast<float>(rng() % 2000) - 1000.f) / 4096.f + 0.001f);
  for (int e = 0; e < s.experts; ++e)
    for (int n = 0; n < (s.symmetric ? 0 : s.n); ++n)
      for (int g = 0; g < s.num_groups(); ++g) kpacked_set_z(&w, e, n, g, static_cast<int>(rng() % 16));
  return w;
}
}  // namespace

TEST(NPacked, RoundTripAndDequantAgree) {
  for (DType act : {DType::kF16, DType::kBF16})
    for (bool sym : {false, true})
      for (int G : {32, kPerChannel}) {
        WeightShape s;
        s.experts = 3;
        s.n = 24;
        s.k = 64;
        s.group_size = G;
        s.symmetric = sym;
        s.act = act;
        SCOPED_TRACE(testing::Message() << dtype_name(act) << " sym=" << sym << " G=" << G);
        auto w = random_weight(s, 11 + G + sym);
        ASSERT_EQ(layout_for(s), WeightLayout::kNPacked);
        NPackedWeights np;
        ASSERT_TRUE(repack_to_npacked(w, &np).ok());
        ASSERT_TRUE(validate(np).ok());
        // Spot-check the documented bit position: column 8c+i at bits 4i of word [e, k, c].
        for (int e = 0; e < s.experts; ++e)
          for (int n = 0; n < s.n; n += 5)
            for (int k = 0; k < s.k; k += 7)
              ASSERT_EQ((static_cast<uint32_t>(np.qweight[(e * s.k + k) * (s.n / 8) + n / 8]) >> (4 * (n % 8))) & 15,
                        static_cast<uint32_t>(kpacked_q(w, e, n, k)));
        KPackedWeights back;
        ASSERT_TRUE(unpack_from_npacked(np, &back).ok());
        EXPECT_TRUE(back.qweight == w.qweight && back.scales == w.scales && back.zeros == w.zeros);
        std::vector<uint16_t> dk, dn;
        ASSERT_TRUE(dequantize(w, &dk).ok());
        ASSERT_TRUE(dequantize(np, &dn).ok());
        EXPECT_TRUE(dk == dn);
        size_t nonzero = 0;
        for (uint16_t v : dk) nonzero += (v & 0x7FFF) != 0;
        EXPECT_GT(nonzero, dk.size() / 2) << "test data must not be mostly zeros";
      }
}

TEST(NPacked, LayoutSelectionAndRefusals) {
  WeightShape s;
  s.n = 12;
  s.k = 32;
  s.group_size = 16;
  s.symmetric = false;
  EXPECT_EQ(layout_for(s), WeightLayout::kKPacked);
  auto w = random_weight(s, 3);
  NPackedWeights np;
  Status st = repack_to_npacked(w, &np);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("multiple of 8"), std::string::npos);
  s.n = 16;
  w = random_weight(s, 4);
  ASSERT_TRUE(repack_to_npacked(w, &np).ok());
  np.zeros[5] = float_to_half_bits(s.act, 2.5f);
  KPackedWeights back;
  EXPECT_NE(unpack_from_npacked(np, &back).message().find("not an integer"), std::string::npos);
  np.zeros.pop_back();
  EXPECT_FALSE(validate(np).ok());
}

TEST(KPacked, ValidateNamesTheProblem) {
  WeightShape s;
  s.n = 8;
  s.k = 32;
  s.group_size = 16;
  s.symmetric = false;
  auto w = random_weight(s, 1);
  ASSERT_TRUE(validate(w).ok());
  auto b = w;
  b.qweight.pop_back();
  EXPECT_NE(validate(b).message().find("qweight"), std::string::npos);
  b = w;
  b.shape.group_size = 12;
  EXPECT_NE(validate(b).message().find("group_size"), std::string::npos);
  b = w;
  b.k_perm.assign(32, 0);
  EXPECT_NE(validate(b).message().find("permutation"), std::string::npos);
  b = w;
  b.zeros.clear();
  EXPECT_NE(validate(b).message().find("zeros"), std::string::npos);
}

TEST(KPacked, StackExperts) {
  WeightShape s;
  s.n = 8;
  s.k = 16;
  s.group_size = kPerChannel;
  s.symmetric = false;
  auto a = random_weight(s, 1), b = random_weight(s, 2);
  KPackedWeights st;
  ASSERT_TRUE(stack_experts({a, b}, &st).ok());
  EXPECT_EQ(st.shape.experts, 2);
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 16; ++k) {
      EXPECT_EQ(kpacked_q(st, 0, n, k), kpacked_q(a, 0, n, k));
      EXPECT_EQ(kpacked_q(st, 1, n, k), kpacked_q(b, 0, n, k));
      EXPECT_EQ(kpacked_z(st, 1, n, 0), kpacked_z(b, 0, n, 0));
    }
  b.shape.k = 32;
  EXPECT_FALSE(stack_experts({a, b}, &st).ok());
}
