// Tensor-parallel shards (include/lowbit/int4/shard.h): every shard dequantizes bit for bit to
// the matching slice of the whole weight, K shards that cut a scale group get the group size
// gcd(G, k0, k), and bad ranges, act-order weights and uneven splits are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lowbit/int4/moe_ref.h"
#include "lowbit/int4/shard.h"
#include "random_weights.h"

using namespace lowbit;
using namespace lowbit::int4;
using lowbit::int4::testing::random_kpacked;

namespace {

std::vector<uint16_t> dequant(const KPackedWeights& w) {
  std::vector<uint16_t> d;
  EXPECT_TRUE(dequantize(w, &d).ok());
  return d;
}

// Element (e, n, k) of a [E, N, K] dequantized weight.
uint16_t at(const std::vector<uint16_t>& d, const WeightShape& s, int e, int n, int k) {
  return d[(static_cast<size_t>(e) * s.n + n) * s.k + k];
}

struct KCase {
  int K, G, k0, k, expect_g;
};

}  // namespace

// The K shards of real TP splits: DeepSeek-V2-Lite's w2 at TP 2 (1408 / 2 = 704 rows, 5.5
// groups of 128), Qwen3-30B-A3B's at TP 4 / 8 (192 / 96 rows), aligned splits, per-channel.
TEST(Int4Shard, KShardsDequantizeToTheSliceBitForBit) {
  const KCase cases[] = {{1408, 128, 0, 704, 64},   {1408, 128, 704, 704, 64}, {768, 128, 192, 192, 64},
                         {768, 128, 576, 192, 64},  {768, 128, 96, 96, 32},    {768, 128, 256, 256, 128},
                         {512, 32, 64, 160, 32},    {256, 64, 2, 254, 2},      {768, kPerChannel, 384, 384, kPerChannel}};
  for (const KCase& c : cases)
    for (bool sym : {true, false})
      for (DType act : {DType::kBF16, DType::kF16}) {
        SCOPED_TRACE(::testing::Message() << "K=" << c.K << " G=" << c.G << " rows [" << c.k0 << ", +" << c.k
                                          << ") sym=" << sym << " " << dtype_name(act));
        const WeightShape s{3, 7, c.K, c.G, sym, act};  // odd N: the last zero byte's spare nibble
        const KPackedWeights w = random_kpacked(s, 17u + c.K + c.k0, 0.05f);
        KPackedWeights sh;
        const Status st = shard_k(w, c.k0, c.k, &sh);
        ASSERT_TRUE(st.ok()) << st.to_string();
        ASSERT_TRUE(validate(sh).ok());
        EXPECT_EQ(sh.shape.group_size, c.expect_g);
        EXPECT_EQ(sh.shape.k, c.k);
        EXPECT_EQ(sh.shape.n, s.n);
        const auto full = dequant(w), part = dequant(sh);
        int diff = 0;
        for (int e = 0; e < s.experts; ++e)
          for (int n = 0; n < s.n; ++n)
            for (int k = 0; k < c.k; ++k) diff += at(part, sh.shape, e, n, k) != at(full, s, e, n, c.k0 + k);
        EXPECT_EQ(diff, 0);
      }
}

// Reassembled K shards are the whole weight: each rank's partial product adds up to the whole
// product (the all-reduce of a row-parallel layer), in fp64 on the dequantized values.
TEST(Int4Shard, RowShardsSumToTheWholeProduct) {
  const WeightShape s{1, 16, 1408, 128, false, DType::kBF16};
  const KPackedWeights w = random_kpacked(s, 5u, 0.05f);
  std::vector<double> x(s.k);
  for (int k = 0; k < s.k; ++k) x[k] = 0.25 + 0.001 * ((k * 37) % 101);
  const auto full = dequant(w);
  for (int ranks : {2, 4, 11}) {
    std::vector<double> y(s.n, 0.0), ref(s.n, 0.0);
    for (int r = 0; r < ranks; ++r) {
      KPackedWeights sh;
      const Status st = tp_shard(w, TpSplit::kRows, r, ranks, &sh);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const auto part = dequant(sh);
      for (int n = 0; n < s.n; ++n)
        for (int k = 0; k < sh.shape.k; ++k)
          y[n] += x[r * sh.shape.k + k] * half_bits_to_float(s.act, at(part, sh.shape, 0, n, k));
    }
    for (int n = 0; n < s.n; ++n)
      for (int k = 0; k < s.k; ++k) ref[n] += x[k] * half_bits_to_float(s.act, at(full, s, 0, n, k));
    for (int n = 0; n < s.n; ++n) EXPECT_NEAR(y[n], ref[n], 1e-9 * (1.0 + std::abs(ref[n]))) << "ranks=" << ranks;
  }
}

// The fused MoE layer over TP ranks, in the fp64 CPU reference (no intermediate rounding): w13
// split by [gate; up] halves, w2 by rows whose ranges cut its groups of 64 (I = 192: 96 rows per
// rank at TP 2 -> G' = 32, 48 at TP 4 -> 16); the ranks' outputs add up to the whole layer's.
TEST(Int4Shard, MoeLayerOverTpRanksSumsToTheWhole) {
  constexpr int E = 4, H = 64, I = 192, M = 5, topk = 2;
  const KPackedWeights w13 = random_kpacked(WeightShape{E, 2 * I, H, 64, false, DType::kBF16}, 7u, 0.05f);
  const KPackedWeights w2 = random_kpacked(WeightShape{E, H, I, 64, true, DType::kBF16}, 8u, 0.05f);
  std::vector<uint16_t> x(static_cast<size_t>(M) * H);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float_to_half_bits(DType::kBF16, 0.125f * static_cast<float>(i % 13) - 0.75f);
  const std::vector<int32_t> ids = {0, 1, 2, 3, 1, 0, 3, 2, 2, 0};
  const std::vector<float> rw = {0.6f, 0.4f, 0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.8f, 0.2f};
  FusedMoeArgs a;
  a.x = x.data();
  a.m = M;
  a.topk = topk;
  a.topk_ids = ids.data();
  a.topk_weights = rw.data();
  a.round_intermediates = false;
  std::vector<double> whole;
  ASSERT_TRUE(fused_moe_ref(w13, w2, a, &whole, nullptr).ok());
  for (int ranks : {2, 4}) {
    std::vector<double> sum(whole.size(), 0.0);
    for (int r = 0; r < ranks; ++r) {
      KPackedWeights r13, r2;
      ASSERT_TRUE(tp_shard(w13, TpSplit::kGateUp, r, ranks, &r13).ok());
      ASSERT_TRUE(tp_shard(w2, TpSplit::kRows, r, ranks, &r2).ok());
      EXPECT_EQ(r2.shape.group_size, ranks == 2 ? 32 : 16);
      std::vector<double> part;
      const Status st = fused_moe_ref(r13, r2, a, &part, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    double ref2 = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_NEAR(sum[i], whole[i], 1e-9 * (1.0 + std::abs(whole[i]))) << "ranks=" << ranks << " i=" << i;
      ref2 += whole[i] * whole[i];
    }
    EXPECT_GT(ref2, 0.0);
  }
}

TEST(Int4Shard, ColumnAndGateUpShardsAreTheirSlices) {
  for (bool sym : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "sym=" << sym);
    const WeightShape s{2, 24, 256, 64, sym, DType::kF16};
    const KPackedWeights w = random_kpacked(s, 29u + sym, 0.05f);
    const auto full = dequant(w);
    // An odd first column and an odd count: the zero points' row pairs are re-paired.
    KPackedWeights sh;
    ASSERT_TRUE(shard_n(w, 5, 9, &sh).ok());
    ASSERT_TRUE(validate(sh).ok());
    auto part = dequant(sh);
    int diff = 0;
    for (int e = 0; e < s.experts; ++e)
      for (int n = 0; n < 9; ++n)
        for (int k = 0; k < s.k; ++k) diff += at(part, sh.shape, e, n, k) != at(full, s, e, 5 + n, k);
    EXPECT_EQ(diff, 0);
    // [gate; up] of I = 12 over 3 ranks: rank 1 holds gate columns 4..7 and up columns 16..19.
    ASSERT_TRUE(tp_shard(w, TpSplit::kGateUp, 1, 3, &sh).ok());
    ASSERT_EQ(sh.shape.n, 8);
    part = dequant(sh);
    diff = 0;
    for (int e = 0; e < s.experts; ++e)
      for (int n = 0; n < 8; ++n)
        for (int k = 0; k < s.k; ++k) diff += at(part, sh.shape, e, n, k) != at(full, s, e, n < 4 ? 4 + n : 12 + n, k);
    EXPECT_EQ(diff, 0);
    ASSERT_TRUE(tp_shard(w, TpSplit::kColumns, 2, 4, &sh).ok());
    part = dequant(sh);
    diff = 0;
    for (int e = 0; e < s.experts; ++e)
      for (int n = 0; n < 6; ++n)
        for (int k = 0; k < s.k; ++k) diff += at(part, sh.shape, e, n, k) != at(full, s, e, 12 + n, k);
    EXPECT_EQ(diff, 0);
  }
}

TEST(Int4Shard, RefusesBadRangesActOrderAndUnevenSplits) {
  const WeightShape s{1, 8, 256, 128, true, DType::kBF16};
  KPackedWeights w = random_kpacked(s, 3u), out;
  auto refused = [](const Status& st, const char* words) {
    return !st.ok() && st.to_string().find(words) != std::string::npos;
  };
  EXPECT_TRUE(refused(shard_k(w, 3, 64, &out), "even"));
  EXPECT_TRUE(refused(shard_k(w, 0, 63, &out), "even"));
  EXPECT_TRUE(refused(shard_k(w, 200, 64, &out), "outside K=256"));
  EXPECT_TRUE(refused(shard_k(w, -2, 64, &out), "outside K=256"));
  EXPECT_TRUE(refused(shard_n(w, 4, 5, &out), "outside N=8"));
  EXPECT_TRUE(refused(shard_n(w, 0, 0, &out), "outside N=8"));
  EXPECT_TRUE(refused(tp_shard(w, TpSplit::kColumns, 0, 3, &out), "N=8"));
  EXPECT_TRUE(refused(tp_shard(w, TpSplit::kRows, 0, 3, &out), "K=256"));
  EXPECT_TRUE(refused(tp_shard(w, TpSplit::kGateUp, 0, 3, &out), "gate_up"));
  EXPECT_TRUE(refused(tp_shard(w, TpSplit::kRows, 2, 2, &out), "rank=2"));
  EXPECT_TRUE(refused(tp_shard(w, static_cast<TpSplit>(7), 0, 1, &out), "unknown split"));
  EXPECT_TRUE(refused(shard_k(w, 0, 64, nullptr), "null"));
  w.k_perm.resize(256);
  for (int k = 0; k < 256; ++k) w.k_perm[k] = 255 - k;
  EXPECT_TRUE(refused(shard_k(w, 0, 128, &out), "act-order"));
  ASSERT_TRUE(shard_n(w, 0, 4, &out).ok());  // N shards keep the permutation
  EXPECT_EQ(out.k_perm, w.k_perm);
  KPackedWeights corrupt = random_kpacked(s, 4u);
  corrupt.scales.pop_back();
  EXPECT_TRUE(refused(shard_k(corrupt, 0, 128, &out), "scales"));
}

// concat_n joins gate and up into one [gate; up] weight: bit for bit the parts' columns (odd N:
// the zero points' row pairs re-paired), so that tp_shard(kGateUp) of the join equals the join
// of the parts' column shards; mismatched parts and differing act-order permutations refused.
TEST(Int4Shard, ConcatNJoinsGateAndUp) {
  for (bool sym : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "sym=" << sym);
    const WeightShape sg{3, 7, 128, 32, sym, DType::kBF16}, su{3, 5, 128, 32, sym, DType::kBF16};
    const KPackedWeights gate = random_kpacked(sg, 61u + sym, 0.05f), up = random_kpacked(su, 71u + sym, 0.05f);
    KPackedWeights j;
    ASSERT_TRUE(concat_n({gate, up}, &j).ok());
    ASSERT_TRUE(validate(j).ok());
    ASSERT_EQ(j.shape.n, 12);
    const auto dj = dequant(j), dg = dequant(gate), du = dequant(up);
    int diff = 0;
    for (int e = 0; e < 3; ++e)
      for (int n = 0; n < 12; ++n)
        for (int k = 0; k < 128; ++k)
          diff += at(dj, j.shape, e, n, k) != (n < 7 ? at(dg, sg, e, n, k) : at(du, su, e, n - 7, k));
    EXPECT_EQ(diff, 0);
    KPackedWeights back;
    ASSERT_TRUE(shard_n(j, 7, 5, &back).ok());
    EXPECT_TRUE(back.qweight == up.qweight && back.scales == up.scales && back.zeros == up.zeros);
  }
  // TP: rank r of the joined [gate; up] = the join of rank r's gate and up column shards.
  const WeightShape s{2, 16, 64, 32, false, DType::kF16};
  const KPackedWeights gate = random_kpacked(s, 81u, 0.05f), up = random_kpacked(s, 82u, 0.05f);
  KPackedWeights j, rank1, g1, u1, j1;
  ASSERT_TRUE(concat_n({gate, up}, &j).ok());
  ASSERT_TRUE(tp_shard(j, TpSplit::kGateUp, 1, 4, &rank1).ok());
  ASSERT_TRUE(tp_shard(gate, TpSplit::kColumns, 1, 4, &g1).ok());
  ASSERT_TRUE(tp_shard(up, TpSplit::kColumns, 1, 4, &u1).ok());
  ASSERT_TRUE(concat_n({g1, u1}, &j1).ok());
  EXPECT_TRUE(rank1.qweight == j1.qweight && rank1.scales == j1.scales && rank1.zeros == j1.zeros);
  // Refusals.
  auto refused = [](const Status& st, const char* words) {
    return !st.ok() && st.to_string().find(words) != std::string::npos;
  };
  KPackedWeights out;
  EXPECT_TRUE(refused(concat_n({}, &out), "no parts"));
  EXPECT_TRUE(refused(concat_n({gate, random_kpacked({2, 16, 64, 64, false, DType::kF16}, 83u)}, &out), "G=64"));
  EXPECT_TRUE(refused(concat_n({gate, random_kpacked({2, 16, 64, 32, true, DType::kF16}, 84u)}, &out), "sym=1"));
  EXPECT_TRUE(refused(concat_n({gate, random_kpacked({1, 16, 64, 32, false, DType::kF16}, 85u)}, &out), "E=1"));
  KPackedWeights pg = gate, pu = up;
  pg.k_perm.resize(2 * 64);
  pu.k_perm.resize(2 * 64);
  for (int i = 0; i < 128; ++i) pg.k_perm[i] = pu.k_perm[i] = 63 - i % 64;
  ASSERT_TRUE(concat_n({pg, pu}, &out).ok()) << "one shared permutation joins";
  EXPECT_EQ(out.k_perm, pg.k_perm);
  pu.k_perm[3] = 59;  // entries 3 and 4 swapped
  pu.k_perm[4] = 60;
  EXPECT_TRUE(refused(concat_n({pg, pu}, &out), "permutation differs"));
}
