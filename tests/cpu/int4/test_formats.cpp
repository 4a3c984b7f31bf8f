// Checkpoint formats <-> canonical K-packed: known-value unpacking computed independently
// from each format's definition, bit-exact round trips, and every refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "lowbit/int4/formats.h"

using namespace lowbit;
using namespace lowbit::int4;

namespace {

// Random K-packed weight whose zeros lie in [zlo, 15] and whose scales are fp16-exact
// powers-of-two multiples (exact in fp16 and bf16 when `bf16_exact`).
KPackedWeights make_weight(int n, int k, int g, bool sym, DType act, uint32_t seed, int zlo = 0,
                           bool bf16_exact = false) {
  std::mt19937 rng(seed);
  const WeightShape s{1, n, k, g, sym, act};
  KPackedWeights w;
  kpacked_allocate(s, &w);
  for (int nn = 0; nn < n; ++nn)
    for (int kk = 0; kk < k; ++kk) kpacked_set_q(&w, 0, nn, kk, static_cast<int>(rng() % 16));
  for (int nn = 0; nn < n; ++nn)
    for (int gg = 0; gg < s.num_groups(); ++gg) {
      // mantissa of 11 bits (fp16) or 8 bits (bf16-exact), exponent around 2^-7
      int m = bf16_exact ? 128 + static_cast<int>(rng() % 128) : 1024 + static_cast<int>(rng() % 1024);
      float v = std::ldexp(static_cast<float>(m), -(bf16_exact ? 14 : 17)) * ((rng() & 1) ? 1.f : -1.f);
      kpacked_set_s(&w, 0, nn, gg, float_to_half_bits(act, v));
      if (!sym) kpacked_set_z(&w, 0, nn, gg, zlo + static_cast<int>(rng() % (16 - zlo)));
    }
  return w;
}

void expect_same(const KPackedWeights& a, const KPackedWeights& b) {
  EXPECT_EQ(a.shape.n, b.shape.n);
  EXPECT_EQ(a.shape.k, b.shape.k);
  EXPECT_EQ(a.shape.group_size, b.shape.group_size);
  EXPECT_EQ(a.shape.symmetric, b.shape.symmetric);
  EXPECT_TRUE(a.qweight == b.qweight) << "qweight differs";
  EXPECT_TRUE(a.scales == b.scales) << "scales differ";
  EXPECT_TRUE(a.zeros == b.zeros) << "zeros differ";
  EXPECT_TRUE(a.k_perm == b.k_perm) << "k_perm differs";
}

// Dequantized [N, K] straight from the GPTQ definition (checkpoint row order).
std::vector<uint16_t> gptq_dequant_direct(const GptqLinear& g, DType act) {
  const int G = g.group_size == kPerChannel ? g.k : g.group_size, NW = (g.n + 7) / 8;
  std::vector<uint16_t> out(static_cast<size_t>(g.n) * g.k);
  for (int n = 0; n < g.n; ++n)
    for (int k = 0; k < g.k; ++k) {
      int grp = g.g_idx.empty() ? k / G : g.g_idx[k];
      int q = (static_cast<uint32_t>(g.qweight[(k / 8) * g.n + n]) >> (4 * (k % 8))) & 15;
      int z = 8;
      if (!g.symmetric)
        z = ((static_cast<uint32_t>(g.qzeros[grp * NW + n / 8]) >> (4 * (n % 8))) & 15) +
            (g.version == GptqVersion::kV1 ? 1 : 0);
      float s = f16_bits_to_float(g.scales[grp * g.n + n]);
      out[static_cast<size_t>(n) * g.k + k] = float_to_half_bits(act, static_cast<float>(q - z) * s);
    }
  return out;
}

// Canonical dequant mapped back to checkpoint row order via k_perm.
std::vector<uint16_t> kpacked_dequant_checkpoint_order(const KPackedWeights& w) {
  std::vector<uint16_t> d;
  EXPECT_TRUE(dequantize(w, &d).ok());
  if (w.k_perm.empty()) return d;
  std::vector<uint16_t> out(d.size());
  for (int n = 0; n < w.shape.n; ++n)
    for (int j = 0; j < w.shape.k; ++j) out[static_cast<size_t>(n) * w.shape.k + w.k_perm[j]] = d[static_cast<size_t>(n) * w.shape.k + j];
  return out;
}

}  // namespace

TEST(Gptq, KnownValuesUnpack) {
  // Element (k, n) = (3k + n) % 16 at bits 4*(k%8) of word [k/8, n]; scales 2^-(n%3); v2 zeros z=(n+g)%16.
  const int K = 32, N = 12, G = 16, NG = 2, NW = 2;
  GptqLinear g;
  g.k = K;
  g.n = N;
  g.group_size = G;
  g.symmetric = false;
  g.version = GptqVersion::kV2;
  g.qweight.assign((K / 8) * N, 0);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n)
      g.qweight[(k / 8) * N + n] |= static_cast<int32_t>(static_cast<uint32_t>((3 * k + n) % 16) << (4 * (k % 8)));
  g.qzeros.assign(NG * NW, 0);
  for (int gg = 0; gg < NG; ++gg)
    for (int n = 0; n < N; ++n)
      g.qzeros[gg * NW + n / 8] |= static_cast<int32_t>(static_cast<uint32_t>((n + gg) % 16) << (4 * (n % 8)));
  for (int gg = 0; gg < NG; ++gg)
    for (int n = 0; n < N; ++n) g.scales.push_back(float_to_f16_bits(std::ldexp(1.0f, -(n % 3))));
  KPackedWeights w;
  ASSERT_TRUE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &w).ok());
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) ASSERT_EQ(kpacked_q(w, 0, n, k), (3 * k + n) % 16) << n << "," << k;
    for (int gg = 0; gg < NG; ++gg) ASSERT_EQ(kpacked_z(w, 0, n, gg), (n + gg) % 16);
  }
  std::vector<uint16_t> d;
  ASSERT_TRUE(dequantize(w, &d).ok());
  // w = (q - z) * 2^-(n%3), exact.
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      ASSERT_EQ(f16_bits_to_float(d[n * K + k]),
                static_cast<float>((3 * k + n) % 16 - (n + k / G) % 16) * std::ldexp(1.0f, -(n % 3)));
  // v1 of the same bits means z + 1.
  g.version = GptqVersion::kV1;
  for (auto& z : g.qzeros) z &= 0x0EEEEEEE;  // keep stored values < 15 (15 + 1 = 16 overflows)
  ASSERT_TRUE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &w).ok());
  EXPECT_EQ(d.size(), gptq_dequant_direct(g, DType::kF16).size());
  EXPECT_TRUE(kpacked_dequant_checkpoint_order(w) == gptq_dequant_direct(g, DType::kF16));
}

TEST(Gptq, RoundTripV1V2AsymSymPerChannel) {
  for (int version = 1; version <= 2; ++version)
    for (bool sym : {false, true})
      for (int G : {16, 32, kPerChannel})
        for (int N : {8, 13, 24}) {
          SCOPED_TRACE(testing::Message() << "v" << version << " sym=" << sym << " G=" << G << " N=" << N);
          auto w = make_weight(N, 64, G, sym, DType::kF16, 100 + N + G, version == 1 ? 1 : 0);
          GptqLinear g;
          ASSERT_TRUE(kpacked_to_gptq(w, 0, static_cast<GptqVersion>(version), &g).ok());
          if (sym) {  // real symmetric checkpoints carry 0x77777777 (v1) / 0x88888888 (v2)
            EXPECT_EQ(static_cast<uint32_t>(g.qzeros[0]) & 0xF, version == 1 ? 7u : 8u);
          }
          EXPECT_TRUE(gptq_dequant_direct(g, DType::kF16) == kpacked_dequant_checkpoint_order(w));
          KPackedWeights back;
          Status st = gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &back);
          ASSERT_TRUE(st.ok()) << st.to_string();
          expect_same(w, back);
        }
}

TEST(Gptq, V1OverflowAndZeroAreRefused) {
  auto w = make_weight(8, 16, 16, false, DType::kF16, 7, 1);
  GptqLinear g;
  ASSERT_TRUE(kpacked_to_gptq(w, 0, GptqVersion::kV1, &g).ok());
  g.qzeros[0] |= 0xF;  // stored 15 -> z = 16
  KPackedWeights back;
  Status st = gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &back);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("z = 16"), std::string::npos) << st.message();
  kpacked_set_z(&w, 0, 3, 0, 0);
  st = kpacked_to_gptq(w, 0, GptqVersion::kV1, &g);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("z=0"), std::string::npos) << st.message();
  EXPECT_TRUE(kpacked_to_gptq(w, 0, GptqVersion::kV2, &g).ok()) << "v2 holds z = 0";
}

TEST(Gptq, SymmetricZerosAreVerified) {
  auto w = make_weight(16, 32, 16, true, DType::kF16, 9);
  for (int version = 1; version <= 2; ++version) {
    GptqLinear g;
    ASSERT_TRUE(kpacked_to_gptq(w, 0, static_cast<GptqVersion>(version), &g).ok());
    KPackedWeights back;
    ASSERT_TRUE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &back).ok());
    g.qzeros[1] ^= 0x30;  // one zero nibble != 7/8
    Status st = gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &back);
    EXPECT_EQ(st.code(), StatusCode::kCorruptData);
    EXPECT_NE(st.message().find("expected z=8"), std::string::npos) << st.message();
    g.qzeros.clear();  // symmetric without qzeros is fine
    EXPECT_TRUE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &back).ok());
  }
}

TEST(Gptq, ActOrderFoldsIntoPermutation) {
  const int K = 64, N = 16, G = 16;
  auto base = make_weight(N, K, G, false, DType::kF16, 21);
  GptqLinear g;
  ASSERT_TRUE(kpacked_to_gptq(base, 0, GptqVersion::kV2, &g).ok());
  EXPECT_TRUE(g.g_idx.empty());
  // Scramble: act-order checkpoint where row k belongs to group g_idx[k] (random, G rows each).
  std::vector<int32_t> gi(K);
  for (int k = 0; k < K; ++k) gi[k] = k / G;
  std::mt19937 rng(5);
  std::shuffle(gi.begin(), gi.end(), rng);
  g.g_idx = gi;
  KPackedWeights w;
  ConvertReport rep;
  ASSERT_TRUE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &w, &rep).ok());
  EXPECT_TRUE(rep.act_order);
  ASSERT_EQ(w.k_perm.size(), static_cast<size_t>(K));
  ASSERT_TRUE(validate(w).ok());
  for (int j = 0; j < K; ++j) EXPECT_EQ(gi[w.k_perm[j]], j / G) << "stored row j must lie in group j/G";
  EXPECT_TRUE(kpacked_dequant_checkpoint_order(w) == gptq_dequant_direct(g, DType::kF16));
  GptqLinear back;
  ASSERT_TRUE(kpacked_to_gptq(w, 0, GptqVersion::kV2, &back).ok());
  EXPECT_TRUE(back.g_idx == g.g_idx);
  EXPECT_TRUE(back.qweight == g.qweight);
  EXPECT_TRUE(back.qzeros == g.qzeros);
  // Unbalanced groups and out-of-range entries are refused.
  g.g_idx[0] = (g.g_idx[0] + 1) % (K / G);
  EXPECT_NE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &w).message().find("rows in group"), std::string::npos);
  g.g_idx[0] = 99;
  EXPECT_FALSE(gptq_to_kpacked(g, DType::kF16, ScalePolicy::kExact, &w).ok());
}

TEST(Gptq, ShapeErrorsAreNamed) {
  auto w = make_weight(8, 32, 16, false, DType::kF16, 3, 1);
  GptqLinear g;
  ASSERT_TRUE(kpacked_to_gptq(w, 0, GptqVersion::kV2, &g).ok());
  KPackedWeights out;
  auto bad = g;
  bad.qweight.pop_back();
  EXPECT_NE(gptq_to_kpacked(bad, DType::kF16, ScalePolicy::kExact, &out).message().find("qweight"), std::string::npos);
  bad = g;
  bad.scales.pop_back();
  EXPECT_NE(gptq_to_kpacked(bad, DType::kF16, ScalePolicy::kExact, &out).message().find("scales"), std::string::npos);
  bad = g;
  bad.group_size = 12;
  EXPECT_NE(gptq_to_kpacked(bad, DType::kF16, ScalePolicy::kExact, &out).message().find("group_size"), std::string::npos);
  bad = g;
  bad.scales[3] = 0x7C00;  // +inf
  EXPECT_EQ(gptq_to_kpacked(bad, DType::kF16, ScalePolicy::kExact, &out).code(), StatusCode::kCorruptData);
}

TEST(Awq, KnownInterleave) {
  // Word c of row k: slot i holds column 8c + ORDER[i]; put value (col + k) % 16 there.
  const int K = 4, N = 16, NW = 2;
  AwqLinear a;
  a.k = K;
  a.n = N;
  a.group_size = kPerChannel;
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  a.qweight.assign(K * NW, 0);
  a.qzeros.assign(NW, 0);
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < NW; ++c)
      for (int i = 0; i < 8; ++i) {
        int col = 8 * c + order[i];
        a.qweight[k * NW + c] |= static_cast<int32_t>(static_cast<uint32_t>((col + k) % 16) << (4 * i));
        if (k == 0) a.qzeros[c] |= static_cast<int32_t>(static_cast<uint32_t>(15 - col % 16) << (4 * i));
      }
  a.scales.assign(N, float_to_f16_bits(0.5f));
  KPackedWeights w;
  ASSERT_TRUE(awq_to_kpacked(a, DType::kF16, ScalePolicy::kExact, &w).ok());
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) EXPECT_EQ(kpacked_q(w, 0, n, k), (n + k) % 16);
    EXPECT_EQ(kpacked_z(w, 0, n, 0), 15 - n % 16);
  }
  AwqLinear back;
  ASSERT_TRUE(kpacked_to_awq(w, 0, &back).ok());
  EXPECT_TRUE(back.qweight == a.qweight && back.qzeros == a.qzeros && back.scales == a.scales);
}

TEST(Awq, RoundTrip) {
  for (bool sym : {false, true})
    for (int G : {32, kPerChannel}) {
      auto w = make_weight(32, 64, G, sym, DType::kF16, 40 + G);
      AwqLinear a;
      ASSERT_TRUE(kpacked_to_awq(w, 0, &a).ok());
      KPackedWeights back;
      ASSERT_TRUE(awq_to_kpacked(a, DType::kF16, ScalePolicy::kExact, &back).ok());
      expect_same(w, back);
    }
  AwqLinear a;
  a.k = 16;
  a.n = 12;
  KPackedWeights out;
  EXPECT_NE(awq_to_kpacked(a, DType::kF16, ScalePolicy::kExact, &out).message().find("multiple of 8"), std::string::npos);
}

TEST(CompressedTensors, KnownValuesAndPadding) {
  // K = 12 is padded to 16 in weight_packed; signed value v stored as v + 8.
  const int N = 9, K = 12, KW = 2, NG = 1;
  CtLinear c;
  c.n = N;
  c.k = K;
  c.group_size = kPerChannel;
  c.scale_source = ScaleSource::kF32;
  c.weight_packed.assign(N * KW, 0);
  c.weight_zero_point.assign(2 * NG, 0);
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) {
      int v = (n * 5 + k) % 16 - 8;  // signed -8..7
      c.weight_packed[n * KW + k / 8] |= static_cast<int32_t>(static_cast<uint32_t>(v + 8) << (4 * (k % 8)));
    }
    int zp = n % 5 - 2;
    c.weight_zero_point[(n / 8) * NG] |= static_cast<int32_t>(static_cast<uint32_t>(zp + 8) << (4 * (n % 8)));
    c.weight_scale_f32.push_back(0.25f * static_cast<float>(n + 1));
  }
  KPackedWeights w;
  Status st = ct_to_kpacked(c, DType::kBF16, ScalePolicy::kExact, &w);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::vector<uint16_t> d;
  ASSERT_TRUE(dequantize(w, &d).ok());
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      float expect = static_cast<float>(((n * 5 + k) % 16 - 8) - (n % 5 - 2)) * 0.25f * static_cast<float>(n + 1);
      ASSERT_EQ(bf16_bits_to_float(d[n * K + k]), expect) << n << "," << k;
    }
  CtLinear back;
  ASSERT_TRUE(kpacked_to_ct(w, 0, &back).ok());
  EXPECT_TRUE(back.weight_packed == c.weight_packed);
  EXPECT_TRUE(back.weight_zero_point == c.weight_zero_point);
}

TEST(CompressedTensors, RoundTrip) {
  for (DType act : {DType::kF16, DType::kBF16})
    for (bool sym : {false, true})
      for (int G : {16, kPerChannel})
        for (int N : {8, 11}) {
          auto w = make_weight(N, 48, G, sym, act, 60 + N + G);
          CtLinear c;
          ASSERT_TRUE(kpacked_to_ct(w, 0, &c).ok());
          KPackedWeights back;
          ASSERT_TRUE(ct_to_kpacked(c, act, ScalePolicy::kExact, &back).ok());
          expect_same(w, back);
        }
}

// compressed-tensors actorder "group": weight_g_idx folds into k_perm as GPTQ's g_idx does;
// every element dequantizes (in checkpoint order) exactly as the checkpoint's own rule, (q -
// z[g_idx[k]]) * s[g_idx[k]]; the way back restores the checkpoint tensors; bad g_idx refused.
TEST(CompressedTensors, ActOrderGroupIdxFoldsIntoPermutation) {
  const int K = 64, N = 12, G = 16;
  for (bool sym : {true, false}) {
    SCOPED_TRACE(sym ? "sym" : "asym");
    CtLinear c;
    ASSERT_TRUE(kpacked_to_ct(make_weight(N, K, G, sym, DType::kF16, 31 + sym), 0, &c).ok());
    EXPECT_TRUE(c.weight_g_idx.empty());
    std::vector<int32_t> gi(K);
    for (int k = 0; k < K; ++k) gi[k] = k / G;
    std::mt19937 rng(7);
    std::shuffle(gi.begin(), gi.end(), rng);
    c.weight_g_idx = gi;
    KPackedWeights w;
    ConvertReport rep;
    ASSERT_TRUE(ct_to_kpacked(c, DType::kF16, ScalePolicy::kExact, &w, &rep).ok());
    EXPECT_TRUE(rep.act_order);
    ASSERT_TRUE(validate(w).ok());
    ASSERT_EQ(w.k_perm.size(), static_cast<size_t>(K));
    const int KW = (K + 7) / 8, NG = K / G;
    std::vector<uint16_t> direct(static_cast<size_t>(N) * K);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) {
        const int q = static_cast<int>((static_cast<uint32_t>(c.weight_packed[static_cast<size_t>(n) * KW + k / 8]) >>
                                        (4 * (k % 8))) & 0xF);
        const int g = gi[k];
        const int z = sym ? 8
                          : static_cast<int>((static_cast<uint32_t>(c.weight_zero_point[static_cast<size_t>(n / 8) * NG + g]) >>
                                              (4 * (n % 8))) & 0xF);
        direct[static_cast<size_t>(n) * K + k] = dequant_bits(q, z, c.weight_scale[static_cast<size_t>(n) * NG + g], DType::kF16);
      }
    EXPECT_TRUE(kpacked_dequant_checkpoint_order(w) == direct);
    CtLinear back;
    ASSERT_TRUE(kpacked_to_ct(w, 0, &back).ok());
    EXPECT_TRUE(back.weight_g_idx == c.weight_g_idx);
    EXPECT_TRUE(back.weight_packed == c.weight_packed);
    EXPECT_TRUE(back.weight_scale == c.weight_scale);
    EXPECT_TRUE(back.weight_zero_point == c.weight_zero_point);
    c.weight_g_idx[0] = (c.weight_g_idx[0] + 1) % NG;
    EXPECT_NE(ct_to_kpacked(c, DType::kF16, ScalePolicy::kExact, &w).message().find("rows in group"), std::string::npos);
    c.weight_g_idx.resize(K - 1);
    EXPECT_NE(ct_to_kpacked(c, DType::kF16, ScalePolicy::kExact, &w).message().find("g_idx has 63 entries"),
              std::string::npos);
  }
}

TEST(Scales, Fp16ToBf16ExactOrRounded) {
  // fp16 scales with 11 significant bits do not fit bf16 (8 bits).
  auto w = make_weight(16, 32, 16, false, DType::kF16, 77);
  GptqLinear g;
  ASSERT_TRUE(kpacked_to_gptq(w, 0, GptqVersion::kV2, &g).ok());
  KPackedWeights out;
  Status st = gptq_to_kpacked(g, DType::kBF16, ScalePolicy::kExact, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not exactly representable in bf16"), std::string::npos) << st.message();
  ConvertReport rep;
  ASSERT_TRUE(gptq_to_kpacked(g, DType::kBF16, ScalePolicy::kRound, &out, &rep).ok());
  EXPECT_GT(rep.scales_rounded, 0u);
  EXPECT_GT(rep.max_rel_scale_change, 0.0);
  EXPECT_LE(rep.max_rel_scale_change, std::ldexp(1.0, -8));  // half an ulp of an 8-bit significand
  // Scales with <= 8 significant bits convert exactly.
  auto e = make_weight(16, 32, 16, false, DType::kF16, 78, 0, /*bf16_exact=*/true);
  ASSERT_TRUE(kpacked_to_gptq(e, 0, GptqVersion::kV2, &g).ok());
  rep = {};
  ASSERT_TRUE(gptq_to_kpacked(g, DType::kBF16, ScalePolicy::kExact, &out, &rep).ok());
  EXPECT_EQ(rep.scales_rounded, 0u);
  for (int n = 0; n < 16; ++n)
    EXPECT_EQ(bf16_bits_to_float(kpacked_s(out, 0, n, 0)), f16_bits_to_float(kpacked_s(e, 0, n, 0)));
  // fp32 scale that overflows fp16 is refused.
  uint16_t h;
  EXPECT_FALSE(convert_scale(ScaleSource::kF32, float_as_bits(1e6f), DType::kF16, ScalePolicy::kRound, "x", 0, &h, nullptr).ok());
}
