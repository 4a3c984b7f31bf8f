// Kernel layout (kernel_layout.h): repack from the canonical K-packed layout and back is
// bit-exact, every nibble lands in its documented slot, and bad inputs are refused.
#include <gtest/gtest.h>

#include "lowbit/int4/device_weights.h"
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
  // Every layout the shape allows must round-trip too (forced), element by element.
  const bool npacked = s.n % 8 == 0 && s.k % kKernelKChunk == 0;
  const bool tiled = s.n % kMmaTileCols == 0 && s.k % kKernelKChunk == 0;
  for (KernelLayoutKind kind :
       {KernelLayoutKind::kKPacked, KernelLayoutKind::kNPackedInterleaved, KernelLayoutKind::kMmaTiled}) {
    KernelWeights kk;
    const Status st = repack_for_kernels(in, &kk, static_cast<int>(kind));
    const bool allowed = kind == KernelLayoutKind::kKPacked ||
                         (kind == KernelLayoutKind::kNPackedInterleaved ? npacked : tiled);
    ASSERT_EQ(st.ok(), allowed) << kernel_layout_name(kind) << ": " << st.to_string();
    if (!allowed) continue;
    for (int e = 0; e < s.experts; ++e)
      for (int n = 0; n < s.n; ++n)
        for (int k = 0; k < s.k; ++k)
          ASSERT_EQ(kernel_nibble(kk, e, n, k), canon_q(in, e, n, k))
              << kernel_layout_name(kind) << " e=" << e << " n=" << n << " k=" << k;
    KPackedWeights back2;
    ASSERT_TRUE(unpack_from_kernels(kk, &back2).ok());
    EXPECT_EQ(back2.qweight, in.qweight) << kernel_layout_name(kind);
    EXPECT_EQ(back2.scales, in.scales);
    EXPECT_EQ(back2.zeros, in.zeros);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, KernelLayoutRoundTrip,
                         ::testing::Values(Case{1, 8, 32, 32, true, DType::kBF16}, Case{2, 24, 128, 64, false, DType::kF16},
                                           Case{3, 64, 256, 128, false, DType::kBF16},   // experts: N-packed
                                           Case{1, 128, 256, 128, false, DType::kBF16},  // dense: MMA-tiled
                                           Case{1, 192, 64, 32, true, DType::kF16},
                                           Case{1, 64, 96, kPerChannel, true, DType::kBF16},
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

// kMmaTiled: (word >> 4p) & 0x000F000F of lane l = 4g + t, word j holds the A fragment
// register p of mma.m16n8k16 for the 16-column tile j: column 16j + g (+8 for odd p), k pair
// 2t, 2t+1 (+8 for p >= 2), k even in the low half. Nibbles are a known function of (n, k).
TEST(KernelLayout, MmaTiledFragmentSlots) {
  WeightShape s{1, 128, 64, 32, true, DType::kBF16};
  KPackedWeights in = random_kpacked(s, 5);
  auto q_of = [](int n, int k) { return (n * 5 + k * 3 + (n >> 4)) & 0xF; };
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; k += 2)
      in.qweight[static_cast<size_t>(n) * (s.k / 2) + k / 2] = static_cast<uint8_t>(q_of(n, k) | (q_of(n, k + 1) << 4));
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(in, &kw).ok());
  ASSERT_EQ(kw.kind, KernelLayoutKind::kMmaTiled);
  const int steps = s.k / kMmaTileK;
  for (int c = 0; c < s.n / kMmaTileCols; ++c)
    for (int st = 0; st < steps; ++st)
      for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 4; ++j) {
          const uint32_t w = kw.qweight_n[(static_cast<size_t>(c) * steps + st) * kMmaTileWords + 4 * lane + j];
          const int g = lane / 4, t = lane % 4;
          for (int p = 0; p < 4; ++p) {
            const uint32_t pair = (w >> (4 * p)) & 0x000F000Fu;
            const int n = 64 * c + 16 * j + g + 8 * (p % 2), k = 16 * st + 2 * t + 8 * (p / 2);
            ASSERT_EQ(pair & 0xF, static_cast<uint32_t>(q_of(n, k))) << "c=" << c << " s=" << st << " lane=" << lane;
            ASSERT_EQ(pair >> 16, static_cast<uint32_t>(q_of(n, k + 1)));
            int n2 = -1, k2 = -1;
            mma_tiled_coords((static_cast<size_t>(c) * steps + st) * kMmaTileWords + 4 * lane + j, p, s.k, &n2, &k2);
            ASSERT_EQ(n2, n);
            ASSERT_EQ(k2, k);
          }
        }
  // Forcing the tiled layout on a shape it cannot hold is refused with a message naming it.
  WeightShape s2{1, 72, 64, 32, true, DType::kBF16};
  KernelWeights k2;
  const Status st = repack_for_kernels(random_kpacked(s2, 1), &k2, static_cast<int>(KernelLayoutKind::kMmaTiled));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("MMA-tiled"), std::string::npos) << st.message();
}

// kMmaTiled scales and zeros: entries 8g .. 8g + 7 of a group's 64-column block are the
// columns 16j + g + 8h (j = 0..3, h = 0..1) that lane 4g + t multiplies, in that order (the
// decode tile's one 16 B load per group); the N-packed layout keeps column order. Scales and
// zeros are a known function of (group, column).
TEST(KernelLayout, MmaTiledScaleOrder) {
  for (const bool sym : {true, false}) {
    WeightShape s{2, 128, 256, 64, sym, DType::kF16};
    KPackedWeights in = random_kpacked(s, 9);
    const int NG = s.num_groups();
    auto sc_of = [](int e, int grp, int n) { return static_cast<uint16_t>(0x3000 + 512 * e + 128 * grp + n); };
    auto z_of = [](int e, int grp, int n) { return (3 * n + grp + e) & 0xF; };
    for (int e = 0; e < s.experts; ++e)
      for (int n = 0; n < s.n; ++n)
        for (int grp = 0; grp < NG; ++grp) {
          in.scales[(static_cast<size_t>(e) * s.n + n) * NG + grp] = sc_of(e, grp, n);
          if (!sym) {
            uint8_t& b = in.zeros[(static_cast<size_t>(e) * (s.n / 2) + n / 2) * NG + grp];
            b = static_cast<uint8_t>((b & (0xF0 >> (4 * (n & 1)))) | (z_of(e, grp, n) << (4 * (n & 1))));
          }
        }
    for (KernelLayoutKind kind : {KernelLayoutKind::kMmaTiled, KernelLayoutKind::kNPackedInterleaved}) {
      KernelWeights kw;
      ASSERT_TRUE(repack_for_kernels(in, &kw, static_cast<int>(kind)).ok());
      for (int e = 0; e < s.experts; ++e)
        for (int grp = 0; grp < NG; ++grp)
          for (int c = 0; c < s.n / kMmaTileCols; ++c)
            for (int g = 0; g < 8; ++g)
              for (int j = 0; j < 4; ++j)
                for (int h = 0; h < 2; ++h) {
                  const int n = 64 * c + 16 * j + g + 8 * h;
                  const size_t want = (static_cast<size_t>(e) * NG + grp) * s.n +
                                      (kind == KernelLayoutKind::kMmaTiled ? 64 * c + 8 * g + 2 * j + h : n);
                  ASSERT_EQ(kernel_scale_index(kind, s.n, NG, e, grp, n), want);
                  ASSERT_EQ(kw.scales[want], sc_of(e, grp, n)) << kernel_layout_name(kind) << " n=" << n;
                  if (!sym) {
                    ASSERT_EQ(kw.zeros[want], float_to_half_bits(s.act, static_cast<float>(z_of(e, grp, n))));
                  }
                }
      KPackedWeights back;
      ASSERT_TRUE(unpack_from_kernels(kw, &back).ok());
      EXPECT_EQ(back.scales, in.scales);
      EXPECT_EQ(back.zeros, in.zeros);
    }
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

// Act-order weights: the permutation travels with the kernel layout (int4::gemm gathers
// x[:, k_perm] to match); an identity one is dropped; the round trip restores it; a k_perm that
// is not a permutation, or of the wrong size, is refused.
TEST(KernelLayout, ActOrderPermutationTravelsWithTheLayout) {
  WeightShape s{2, 64, 64, 32, true, DType::kBF16};
  KPackedWeights in = random_kpacked(s, 9);
  KernelWeights kw;
  in.k_perm.resize(2 * 64);
  for (int e = 0; e < 2; ++e)
    for (int j = 0; j < 64; ++j) in.k_perm[e * 64 + j] = j;
  ASSERT_TRUE(repack_for_kernels(in, &kw).ok());
  EXPECT_TRUE(kw.k_perm.empty());  // the identity: nothing to gather
  std::swap(in.k_perm[64 + 3], in.k_perm[64 + 40]);  // expert 1 reordered
  for (int kind : {0, 1, 2}) {
    ASSERT_TRUE(repack_for_kernels(in, &kw, kind).ok()) << kind;
    EXPECT_EQ(kw.k_perm, in.k_perm) << kind;
    EXPECT_TRUE(validate(kw).ok()) << kind;
    KPackedWeights back;
    ASSERT_TRUE(unpack_from_kernels(kw, &back).ok()) << kind;
    EXPECT_EQ(back.k_perm, in.k_perm) << kind;
    EXPECT_EQ(back.qweight, in.qweight) << kind;  // rows stay in stored order
  }
  KernelWeights bad = kw;
  bad.k_perm[5] = bad.k_perm[6];  // a repeated row
  const Status st = validate(bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("expert 0"), std::string::npos) << st.message();
  KPackedWeights back;
  EXPECT_EQ(unpack_from_kernels(bad, &back).code(), StatusCode::kInvalidArgument);
  in.k_perm[64 + 3] = 64;  // out of range
  EXPECT_EQ(repack_for_kernels(in, &kw).code(), StatusCode::kInvalidArgument);
  in.k_perm.resize(10);  // wrong size
  EXPECT_EQ(repack_for_kernels(in, &kw).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lowbit::int4
