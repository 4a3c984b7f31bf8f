// GEMM / top-k / align / fused-MoE references: exact answers on small-integer data,
// independent brute-force checks, tie-breaking, and padding rules.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "lowbit/int4/moe_ref.h"

using namespace lowbit;
using namespace lowbit::int4;

namespace {
KPackedWeights rand_w(int e, int n, int k, int g, bool sym, DType act, uint32_t seed) {
  std::mt19937 rng(seed);
  const WeightShape s{e, n, k, g, sym, act};
  KPackedWeights w;
  kpacked_allocate(s, &w);
  for (auto& b : w.qweight) b = static_cast<uint8_t>(rng());
  // Power-of-two scales: every product and (small) sum below is exact.
  for (auto& v : w.scales) v = float_to_half_bits(act, std::ldexp(1.0f, -static_cast<int>(rng() % 4) - 3));
  for (auto& z : w.zeros) z = static_cast<uint8_t>(rng());
  return w;
}
std::vector<uint16_t> rand_x(int m, int k, DType act, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> x(static_cast<size_t>(m) * k);
  for (auto& v : x) v = float_to_half_bits(act, static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.25f);
  return x;
}
// The reference's arguments for M tokens with top-k ids and weights.
FusedMoeArgs moe_args(const std::vector<uint16_t>& x, int m, int topk, const std::vector<int32_t>& ids,
                      const std::vector<float>& wts, int block_m) {
  FusedMoeArgs a;
  a.x = x.data();
  a.m = m;
  a.topk = topk;
  a.topk_ids = ids.data();
  a.topk_weights = wts.data();
  a.block_m = block_m;
  return a;
}
}  // namespace

TEST(GemmRef, ExactOnSmallIntegersAndAppliesPerm) {
  const int M = 5, N = 8, K = 32;
  for (DType act : {DType::kF16, DType::kBF16}) {
    auto w = rand_w(2, N, K, 16, false, act, 3);
    auto x = rand_x(M, K, act, 4);
    std::vector<double> y;
    std::vector<uint16_t> yb;
    ASSERT_TRUE(gemm_ref(w, 1, x.data(), M, &y, &yb).ok());
    std::vector<uint16_t> d;
    ASSERT_TRUE(dequantize(w, &d).ok());
    for (int i = 0; i < M; ++i)
      for (int n = 0; n < N; ++n) {
        double ref = 0;
        for (int k = 0; k < K; ++k)
          ref += half_bits_to_float(act, x[i * K + k]) * half_bits_to_float(act, d[(N + n) * K + k]);
        ASSERT_EQ(y[i * N + n], ref);
        ASSERT_EQ(yb[i * N + n], float_to_half_bits(act, static_cast<float>(ref)));
      }
    // A k_perm reverses the activation columns: y must equal the unpermuted GEMM on reversed x.
    auto wp = w;
    wp.k_perm.resize(2 * K);
    for (int e = 0; e < 2; ++e)
      for (int j = 0; j < K; ++j) wp.k_perm[e * K + j] = K - 1 - j;
    auto xr = x;
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k) xr[i * K + k] = x[i * K + K - 1 - k];
    std::vector<double> yp;
    ASSERT_TRUE(gemm_ref(wp, 1, xr.data(), M, &yp, nullptr).ok());
    EXPECT_EQ(yp, y);
  }
  auto w = rand_w(1, 8, 16, 16, true, DType::kF16, 1);
  EXPECT_FALSE(gemm_ref(w, 1, nullptr, 1, nullptr, nullptr).ok());
}

TEST(TopK, OrderTiesAndRenormalization) {
  // Token 0: ties between experts 1, 2, 3 (value 2) -> lower index first.
  const float logits[2 * 5] = {0.f, 2.f, 2.f, 2.f, 1.f, /*t1*/ -1.f, 5.f, 3.f, 5.f, 0.f};
  std::vector<int32_t> ids;
  std::vector<float> wts;
  ASSERT_TRUE(topk_softmax_ref(logits, 2, 5, 2, false, &ids, &wts).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 1, 3}));
  double z0 = std::exp(-2.0) + 3 + std::exp(-1.0);
  EXPECT_FLOAT_EQ(wts[0], static_cast<float>(1.0 / z0));
  ASSERT_TRUE(topk_softmax_ref(logits, 2, 5, 3, true, &ids, &wts).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 1, 3, 2}));
  EXPECT_NEAR(wts[0] + wts[1] + wts[2], 1.0, 1e-6);
  EXPECT_FLOAT_EQ(wts[0], 1.0f / 3);
  EXPECT_FALSE(topk_softmax_ref(logits, 2, 5, 6, true, &ids, &wts).ok());
}

TEST(MoeAlign, GroupsPadsAndCovers) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    const int M = 1 + static_cast<int>(rng() % 40), topk = 1 + static_cast<int>(rng() % 4), E = 8,
              BM = 1 << (rng() % 5);
    std::vector<int32_t> ids(M * topk);
    for (auto& v : ids) v = static_cast<int32_t>(rng() % E);
    MoeAlignment al;
    ASSERT_TRUE(moe_align_ref(ids.data(), M, topk, E, BM, &al).ok());
    EXPECT_EQ(al.sentinel, M * topk);
    EXPECT_EQ(al.num_tokens_post_pad % BM, 0);
    EXPECT_LE(al.num_tokens_post_pad, moe_align_max_padded(M, topk, E, BM));
    ASSERT_EQ(al.expert_ids.size() * BM, al.sorted_token_ids.size());
    std::map<int, int> seen;
    int prev_e = -1, prev_pair = -1;
    bool pad_seen = false;
    for (size_t b = 0; b < al.expert_ids.size(); ++b) {
      int e = al.expert_ids[b];
      EXPECT_GE(e, prev_e) << "blocks ordered by expert";
      if (e != prev_e) prev_pair = -1;
      int real = 0;
      if (e != prev_e) pad_seen = false;
      for (int j = 0; j < BM; ++j) {
        int p = al.sorted_token_ids[b * BM + j];
        if (p == al.sentinel) {
          pad_seen = true;
          continue;
        }
        EXPECT_FALSE(pad_seen) << "padding only at the end of an expert's run";
        ++real;
        EXPECT_EQ(ids[p], e);
        EXPECT_GT(p, prev_pair) << "increasing pair index within an expert";
        prev_pair = p;
        ++seen[p];
      }
      EXPECT_GT(real, 0) << "no all-padding block";
      prev_e = e;
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(M * topk)) << "every pair exactly once";
  }
  // Known small case: M=3, topk=2, BM=4.
  const int32_t ids[6] = {2, 0, 0, 2, 2, 1};
  MoeAlignment al;
  ASSERT_TRUE(moe_align_ref(ids, 3, 2, 4, 4, &al).ok());
  EXPECT_EQ(al.sorted_token_ids, (std::vector<int32_t>{1, 2, 6, 6, 5, 6, 6, 6, 0, 3, 4, 6}));
  EXPECT_EQ(al.expert_ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(al.num_tokens_post_pad, 12);
  const int32_t bad[2] = {0, 9};
  EXPECT_FALSE(moe_align_ref(bad, 1, 2, 4, 4, &al).ok());
}

// Brute-force fused MoE written independently (no align, direct loops) vs the reference.
TEST(FusedMoeRef, MatchesBruteForce) {
  const int E = 4, H = 32, I = 16, M = 7, topk = 2;
  for (DType act : {DType::kF16, DType::kBF16})
    for (bool round_mid : {false, true}) {
      auto w13 = rand_w(E, 2 * I, H, 16, false, act, 31);
      auto w2 = rand_w(E, H, I, kPerChannel, true, act, 32);
      auto x = rand_x(M, H, act, 33);
      std::vector<float> logits(M * E);
      std::mt19937 rng(34);
      for (auto& l : logits) l = static_cast<float>(rng() % 100) / 10.f;
      std::vector<int32_t> ids;
      std::vector<float> wts;
      ASSERT_TRUE(topk_softmax_ref(logits.data(), M, E, topk, true, &ids, &wts).ok());
      FusedMoeArgs a = moe_args(x, M, topk, ids, wts, 4);
      a.round_intermediates = round_mid;
      std::vector<double> out;
      std::vector<uint16_t> outb;
      ASSERT_TRUE(fused_moe_ref(w13, w2, a, &out, &outb).ok());
      std::vector<uint16_t> d13, d2;
      ASSERT_TRUE(dequantize(w13, &d13).ok());
      ASSERT_TRUE(dequantize(w2, &d2).ok());
      auto f = [&](uint16_t b) { return static_cast<double>(half_bits_to_float(act, b)); };
      auto rnd = [&](double v) { return round_mid ? f(float_to_half_bits(act, static_cast<float>(v))) : v; };
      double maxabs = 0;
      for (int t = 0; t < M; ++t) {
        std::vector<double> o(H, 0.0);
        for (int j = 0; j < topk; ++j) {
          int e = ids[t * topk + j];
          std::vector<double> act_v(I);
          for (int i = 0; i < I; ++i) {
            double g = 0, u = 0;
            for (int k = 0; k < H; ++k) {
              g += f(x[t * H + k]) * f(d13[(static_cast<size_t>(e) * 2 * I + i) * H + k]);
              u += f(x[t * H + k]) * f(d13[(static_cast<size_t>(e) * 2 * I + I + i) * H + k]);
            }
            g = rnd(g);
            u = rnd(u);
            act_v[i] = rnd(g / (1 + std::exp(-g)) * u);
          }
          for (int n = 0; n < H; ++n) {
            double s = 0;
            for (int i = 0; i < I; ++i) s += act_v[i] * f(d2[(static_cast<size_t>(e) * H + n) * I + i]);
            o[n] += static_cast<double>(wts[t * topk + j]) * s;
          }
        }
        for (int n = 0; n < H; ++n) {
          EXPECT_NEAR(out[t * H + n], o[n], 1e-9 * (1 + std::fabs(o[n])));
          maxabs = std::max(maxabs, std::fabs(o[n]));
        }
      }
      EXPECT_GT(maxabs, 0.1) << "test data must produce non-trivial outputs";
    }
}

// Caller routing under expert parallelism: ids outside [0, E) (-1: another rank's expert) are
// left out of the alignment with skip_foreign_ids (the GPU align's rule) and refused without.
TEST(MoeAlign, ForeignIdsSkippedWhenAsked) {
  const int32_t ids[8] = {2, -1, 0, 7, 2, 1, -5, 0};  // E = 4: pairs 1, 3, 6 are foreign
  MoeAlignment al;
  const Status st = moe_align_ref(ids, 4, 2, 4, 4, &al);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("topk_ids[1]=-1"), std::string::npos) << st.message();
  ASSERT_TRUE(moe_align_ref(ids, 4, 2, 4, 4, &al, /*skip_foreign_ids=*/true).ok());
  EXPECT_EQ(al.sentinel, 8);
  EXPECT_EQ(al.sorted_token_ids, (std::vector<int32_t>{2, 7, 8, 8, 5, 8, 8, 8, 0, 4, 8, 8}));
  EXPECT_EQ(al.expert_ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(al.num_tokens_post_pad, 12);
}

// A foreign slot contributes exactly nothing: the layer with ids -1 / E equals, bit for bit in
// fp64, the layer with those slots sent to a real expert at weight 0. Caller weights need not
// be a softmax (here a sigmoid-like score times a routed scaling factor of 2.5).
TEST(FusedMoeRef, ForeignIdsContributeNothing) {
  const int E = 4, H = 32, I = 16, M = 5, topk = 3;
  const DType act = DType::kBF16;
  auto w13 = rand_w(E, 2 * I, H, 16, false, act, 41);
  auto w2 = rand_w(E, H, I, 16, true, act, 42);
  auto x = rand_x(M, H, act, 43);
  std::vector<int32_t> ids = {0, 1, 2, -1, 3, 1, 2, 4, 0, 3, -1, -1, 1, 0, 2};
  std::vector<float> wts(ids.size());
  for (size_t i = 0; i < wts.size(); ++i) wts[i] = 2.5f / (1.f + std::exp(-0.3f * static_cast<float>(i)));
  std::vector<int32_t> ids0 = ids;
  std::vector<float> wts0 = wts;
  int foreign = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= E) {
      ids0[i] = static_cast<int32_t>(i % E);
      wts0[i] = 0.f;
      ++foreign;
    }
  ASSERT_EQ(foreign, 4);
  FusedMoeArgs a = moe_args(x, M, topk, ids, wts, 2);
  std::vector<double> out, out0;
  EXPECT_FALSE(fused_moe_ref(w13, w2, a, &out, nullptr).ok()) << "foreign ids refused unless skipped";
  a.skip_foreign_ids = true;
  ASSERT_TRUE(fused_moe_ref(w13, w2, a, &out, nullptr).ok());
  a.topk_ids = ids0.data();
  a.topk_weights = wts0.data();
  ASSERT_TRUE(fused_moe_ref(w13, w2, a, &out0, nullptr).ok());
  ASSERT_EQ(out.size(), out0.size());
  double maxabs = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i], out0[i]) << i;
    maxabs = std::max(maxabs, std::fabs(out[i]));
  }
  EXPECT_GT(maxabs, 0.1) << "test data must produce non-trivial outputs";
  // Token 3 has a single real slot (expert 3, slot 0): its output is that expert's alone.
  const std::vector<int32_t> ids1 = {3};
  const std::vector<float> w1 = {wts[9]};
  const std::vector<uint16_t> x3(x.begin() + 3 * H, x.begin() + 4 * H);
  FusedMoeArgs b = moe_args(x3, 1, 1, ids1, w1, 2);
  b.skip_foreign_ids = true;
  std::vector<double> one;
  ASSERT_TRUE(fused_moe_ref(w13, w2, b, &one, nullptr).ok());
  for (int n = 0; n < H; ++n) EXPECT_EQ(out[3 * H + n], one[n]) << n;
}
