// Kernel layout (kernel_layout.h): repack from the canonical K-packed layout and back is
// bit-exact, every nibble lands in its documented slot, and bad inputs are refused.
#include <gtest/gtest.h>

#include "lowbit/int4/kernel_layout.h"
#include "tests/cpu/int4/random_weights.h"

namespace lowbit::int4 {
namespace {

using testing::canon_dequant_bits;
using testing::canon_q;
using testing::random_kpacked;

struct Case {
  int e, n, k, g;
  bool sym;
  DType act;
};

class KernelLayoutRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(KernelLayoutRoundTrip, BitExactBothWays) {
  const Case c = GetParam();
  WeightShape s{c.e, c.n, c.k, c.g, c.sym, c.act};
  KPackedWeights in = random_kpacked(s, 1234u + c.n * 7u + c.k);
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(in, &kw).ok());
  EXPECT_EQ(kw.kind, kernel_layout_for(s));
  // Every element reads back the same nibble and dequantizes to the same bits.
  for (int e = 0; e < s.experts; ++e)
    for (int n = 0; n < s.n; ++n)
      for (int k = 0; k < s.k; ++k) {
        ASSERT_EQ(kernel_nibble(kw, e, n, k), canon_q(in, e, n, k)) << "e=" << e << " n=" << n << " k=" << k;
        ASSERT_EQ(kernel_dequant_bits(kw, e, n, k), canon_dequant_bits(in, e, n, k));
      }
  KPackedWeights back;
  ASSERT_TRUE(unpack_from_kernels(kw, &back).ok());
  EXPECT_EQ(back.qweight, in.qweight);
  EXPECT_EQ(back.scales, in.scales);
  EXPECT_EQ(back.zeros, in.zeros);
  // The K-packed fallback must round-trip too, for every shape.
  KernelWeights kk;
  ASSERT_TRUE(repack_for_kernels(in, &kk, static_cast<int>(KernelLayoutKind::kKPacked)).ok());
  KPackedWeights back2;
  ASSERT_TRUE(unpack_from_kernels(kk, &back2).ok());
  EXPECT_EQ(back2.qweight, in.qweight);
  EXPECT_EQ(back2.zeros, in.zeros);
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelLayoutRoundTrip,
                         ::testing::Values(Case{1, 8, 32, 32, true, DType::kBF16}, Case{2, 24, 128, 64, false, DType::kF16},
                                           Case{3, 64, 256, 128, false, DType::kBF16},
                                           Case{1, 16, 96, kPerChannel, false, DType::kF16},
                                           Case{2, 20, 64, 32, false, DType::kBF16},  // N % 8 != 0: K-packed
                                           Case{1, 7, 30, kPerChannel, false, DType::kF16},
                                           Case{1, 16, 48, kPerChannel, true, DType::kBF16}));  // K % 32 != 0

TEST(KernelLayout, InterleaveSlots) {
  // One word with column j holding nibble j: slot i must hold kNibbleOrder[i].
  WeightShape s{1, 8, 32, 32, true, DType::kF16};
  KPackedWeights in = random_kpacked(s, 7);
  for (int n = 0; n < 8; ++n)
    for (int b = 0; b < 16; ++b) in.qweight[n * 16 + b] = static_cast<uint8_t>(n | (n << 4));
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(in, &kw).ok());
  // slots (low to high): columns 0,2,4,6,1,3,5,7
  EXPECT_EQ(kw.qweight_n[0], 0x75316420u);
  // (word >> 4j) & 0x000F000F holds columns 2j and 2j+1.
  for (int j = 0; j < 4; ++j) {
    uint32_t p = (kw.qweight_n[0] >> (4 * j)) & 0x000F000Fu;
    EXPECT_EQ(p & 0xF, static_cast<uint32_t>(2 * j));
    EXPECT_EQ(p >> 16, static_cast<uint32_t>(2 * j + 1));
  }
}

TEST(KernelLayout, RejectsBadInput) {
  WeightShape s{1, 20, 64, 32, true, DType::kBF16};
  KPackedWeights in = random_kpacked(s, 3);
  KernelWeights kw;
  EXPECT_EQ(repack_for_kernels(in, &kw, static_cast<int>(KernelLayoutKind::kNPackedInterleaved)).code(),
            StatusCode::kInvalidArgument);  // N % 8 != 0
  in.qweight.pop_back();
  EXPECT_EQ(repack_for_kernels(in, &kw).code(), StatusCode::kInvalidArgument);
  WeightShape bad{1, 16, 96, 64, true, DType::kBF16};  // G does not divide K
  KPackedWeights in2 = random_kpacked(WeightShape{1, 16, 96, 32, true, DType::kBF16}, 3);
  in2.shape = bad;
  EXPECT_EQ(repack_for_kernels(in2, &kw).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repack_for_kernels(in2, nullptr).code(), StatusCode::kInvalidArgument);
}

// Act-order weights: the kernels apply no k permutation, so a non-identity k_perm is refused
// (naming the expert and row); the identity and an empty k_perm are accepted.
TEST(KernelLayout, ActOrderPermutationRefused) {
  WeightShape s{2, 16, 64, 32, true, DType::kBF16};
  KPackedWeights in = random_kpacked(s, 9);
  KernelWeights kw;
  in.k_perm.resize(2 * 64);
  for (int e = 0; e < 2; ++e)
    for (int j = 0; j < 64; ++j) in.k_perm[e * 64 + j] = j;
  EXPECT_TRUE(repack_for_kernels(in, &kw).ok());
  std::swap(in.k_perm[64 + 3], in.k_perm[64 + 40]);  // expert 1 reordered
  const Status st = repack_for_kernels(in, &kw);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("expert 1"), std::string::npos) << st.message();
  in.k_perm.resize(10);  // wrong size
  EXPECT_EQ(repack_for_kernels(in, &kw).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lowbit::int4
