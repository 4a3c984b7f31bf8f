// The fold of a down projection's act-order permutation into its producers
// (include/lowbit/int4/act_order_fold.h): permute_n moves whole columns bit for bit, a folded
// layer (MoE through fused_moe_ref, a dense MLP through gemm_ref) gives the same bits as the
// act-order layer with its gather, the folded down weight shards over TP ranks where the
// act-order one is refused, and bad producers are refused by name with nothing modified.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lowbit/int4/act_order_fold.h"
#include "lowbit/int4/moe_ref.h"
#include "lowbit/int4/shard.h"
#include "random_weights.h"

using namespace lowbit;
using namespace lowbit::int4;
using lowbit::int4::testing::random_k_perm;
using lowbit::int4::testing::random_activations;
using lowbit::int4::testing::random_kpacked;

namespace {

bool same_weights(const KPackedWeights& a, const KPackedWeights& b) {
  const WeightShape &s = a.shape, &t = b.shape;
  return s.experts == t.experts && s.n == t.n && s.k == t.k && s.group_size == t.group_size &&
         s.symmetric == t.symmetric && s.act == t.act && a.qweight == b.qweight && a.scales == b.scales &&
         a.zeros == b.zeros && a.k_perm == b.k_perm;
}

bool refused(const Status& st, const std::string& needle) {
  return !st.ok() && st.message().find(needle) != std::string::npos;
}

std::vector<int32_t> inverse(const std::vector<int32_t>& perm, int experts, int p) {
  std::vector<int32_t> inv(perm.size());
  for (int e = 0; e < experts; ++e)
    for (int j = 0; j < p; ++j) inv[static_cast<size_t>(e) * p + perm[static_cast<size_t>(e) * p + j]] = j;
  return inv;
}

// A small MoE routing of M tokens over E experts (every expert picked, weights never zero).
struct Routing {
  int m, topk;
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
Routing routing(int m, int topk, int experts) {
  Routing r{m, topk, {}, {}};
  for (int t = 0; t < m; ++t)
    for (int j = 0; j < topk; ++j) {
      r.ids.push_back((t * 5 + j * 3) % experts);
      r.weights.push_back(0.15f + 0.1f * static_cast<float>((t + 2 * j) % 7));
    }
  return r;
}

// y of the fused MoE layer (fp64 and rounded), with or without the rounded intermediates.
void moe_outputs(const KPackedWeights& w13, const KPackedWeights& w2, const std::vector<uint16_t>& x, const Routing& r,
                 bool round_intermediates, std::vector<double>* y64, std::vector<uint16_t>* y) {
  FusedMoeArgs a;
  a.x = x.data();
  a.m = r.m;
  a.topk = r.topk;
  a.topk_ids = r.ids.data();
  a.topk_weights = r.weights.data();
  a.block_m = 4;
  a.round_intermediates = round_intermediates;
  const Status st = fused_moe_ref(w13, w2, a, y64, y);
  ASSERT_TRUE(st.ok()) << st.to_string();
}

}  // namespace

// Column j of each part of the output is column perm[j] of that part of the input, for the
// packed words, the scales and the row-pair packed zero points (odd N: the last pair's high
// nibble stays 0); the inverse permutation gives back the very bytes.
TEST(Int4ActOrderFold, PermuteNMovesWholeColumns) {
  struct Case {
    int E, N, K, G, parts;
    bool sym;
  };
  for (const Case c : {Case{2, 13, 64, 32, 1, false}, Case{3, 14, 96, 32, 2, false}, Case{1, 24, 128, kPerChannel, 2, true},
                       Case{2, 10, 64, 64, 1, true}}) {
    SCOPED_TRACE("E=" + std::to_string(c.E) + " N=" + std::to_string(c.N) + " parts=" + std::to_string(c.parts));
    KPackedWeights w = random_kpacked(WeightShape{c.E, c.N, c.K, c.G, c.sym, DType::kBF16}, 11u + c.N, 0.05f);
    w.k_perm = random_k_perm(c.E, c.K, 5u);  // travels unchanged (K is not touched)
    const int P = c.N / c.parts;
    const std::vector<int32_t> perm = random_k_perm(c.E, P, 17u + c.N);
    KPackedWeights out;
    const Status st = permute_n(w, perm, c.parts, &out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(validate(out).ok());
    EXPECT_EQ(out.k_perm, w.k_perm);
    std::vector<uint16_t> din, dout;
    ASSERT_TRUE(dequantize(w, &din).ok());
    ASSERT_TRUE(dequantize(out, &dout).ok());
    int differ = 0;
    for (int e = 0; e < c.E; ++e)
      for (int p = 0; p < c.parts; ++p)
        for (int j = 0; j < P; ++j) {
          const int sn = p * P + perm[static_cast<size_t>(e) * P + j], dn = p * P + j;
          differ += sn != dn;
          for (int g = 0; g < w.shape.num_groups(); ++g) {
            ASSERT_EQ(kpacked_s(out, e, dn, g), kpacked_s(w, e, sn, g));
            ASSERT_EQ(kpacked_z(out, e, dn, g), kpacked_z(w, e, sn, g));
          }
          for (int k = 0; k < c.K; ++k)
            ASSERT_EQ(dout[(static_cast<size_t>(e) * c.N + dn) * c.K + k], din[(static_cast<size_t>(e) * c.N + sn) * c.K + k])
                << "e=" << e << " column " << dn << " k=" << k;
        }
    EXPECT_GT(differ, 0);  // the permutation moved columns
    KPackedWeights back;
    ASSERT_TRUE(permute_n(out, inverse(perm, c.E, P), c.parts, &back).ok());
    EXPECT_TRUE(same_weights(back, w));
  }
}

// A MoE layer whose w2 (and w13) are act-order: folding w2's permutation into w13's columns
// gives the same bits through the CPU reference, with and without the rounded intermediates
// (the reference gathers inter by w2's k_perm; the folded w13 makes inter in that order).
TEST(Int4ActOrderFold, FoldedMoeLayerIsBitIdentical) {
  constexpr int E = 3, H = 64, I = 96, M = 6, topk = 2;
  for (const bool sym : {true, false})
    for (const DType act : {DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(std::string(sym ? "sym " : "asym ") + dtype_name(act));
      KPackedWeights w13 = random_kpacked(WeightShape{E, 2 * I, H, 32, sym, act}, 21u, 0.05f);
      KPackedWeights w2 = random_kpacked(WeightShape{E, H, I, 32, !sym, act}, 22u, 0.05f);
      w13.k_perm = random_k_perm(E, H, 23u);  // GEMM1's own act-order stays
      w2.k_perm = random_k_perm(E, I, 24u);
      const std::vector<uint16_t> x = random_activations(static_cast<size_t>(M) * H, act, 25u);
      const Routing r = routing(M, topk, E);
      std::vector<double> y64[2], f64[2];
      std::vector<uint16_t> y[2], f[2];
      for (int ri = 0; ri < 2; ++ri) moe_outputs(w13, w2, x, r, ri == 1, &y64[ri], &y[ri]);
      const std::vector<int32_t> k_perm13 = w13.k_perm;
      const Status st = fold_act_order({&w13}, &w2);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_TRUE(w2.k_perm.empty());
      EXPECT_EQ(w13.k_perm, k_perm13);
      for (int ri = 0; ri < 2; ++ri) {
        moe_outputs(w13, w2, x, r, ri == 1, &f64[ri], &f[ri]);
        EXPECT_EQ(f64[ri], y64[ri]) << "round_intermediates=" << ri;
        EXPECT_EQ(f[ri], y[ri]) << "round_intermediates=" << ri;
      }
      double norm = 0;
      for (double v : y64[1]) norm += v * v;
      EXPECT_GT(norm, 0.0);
    }
}

// A dense MLP with separate gate and up (Llama's gate_proj / up_proj / down_proj, each with its
// own act-order): y = down(silu(gate x) * up x), the intermediates rounded as the GPU does.
TEST(Int4ActOrderFold, FoldedDenseMlpIsBitIdentical) {
  constexpr int H = 128, I = 192, M = 5;
  const DType act = DType::kBF16;
  KPackedWeights gate = random_kpacked(WeightShape{1, I, H, 64, true, act}, 31u, 0.05f);
  KPackedWeights up = random_kpacked(WeightShape{1, I, H, 64, false, act}, 32u, 0.05f);
  KPackedWeights down = random_kpacked(WeightShape{1, H, I, 64, true, act}, 33u, 0.05f);
  gate.k_perm = up.k_perm = random_k_perm(1, H, 34u);
  down.k_perm = random_k_perm(1, I, 35u);
  const std::vector<uint16_t> x = random_activations(static_cast<size_t>(M) * H, act, 36u);
  auto mlp = [&](std::vector<double>* y64, std::vector<uint16_t>* y) {
    std::vector<uint16_t> g, u;
    ASSERT_TRUE(gemm_ref(gate, 0, x.data(), M, nullptr, &g).ok());
    ASSERT_TRUE(gemm_ref(up, 0, x.data(), M, nullptr, &u).ok());
    std::vector<uint16_t> inter(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const double gv = half_bits_to_float(act, g[i]), uv = half_bits_to_float(act, u[i]);
      inter[i] = float_to_half_bits(act, static_cast<float>(gv / (1.0 + std::exp(-gv)) * uv));
    }
    ASSERT_TRUE(gemm_ref(down, 0, inter.data(), M, y64, y).ok());
  };
  std::vector<double> y64, f64;
  std::vector<uint16_t> y, f;
  mlp(&y64, &y);
  const Status st = fold_act_order({&gate, &up}, &down);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(down.k_perm.empty());
  mlp(&f64, &f);
  EXPECT_EQ(f64, y64);
  EXPECT_EQ(f, y);
}

// What the fold buys under tensor parallelism: the act-order w2 cannot be cut into K shards
// (refused, naming act-order); folded, it shards like any weight (here through group
// boundaries: I = 192 rows of G = 64, 96 rows per rank at TP 2 -> G' = 32, 48 at TP 4 -> 16),
// w13 by [gate; up] halves, and the ranks' outputs add up to the unfolded act-order layer's
// (fp64 reference without intermediate rounding; the sums differ only in their order).
TEST(Int4ActOrderFold, FoldedDownShardsOverTpRanks) {
  constexpr int E = 4, H = 64, I = 192, M = 5, topk = 2;
  KPackedWeights w13 = random_kpacked(WeightShape{E, 2 * I, H, 64, false, DType::kBF16}, 41u, 0.05f);
  KPackedWeights w2 = random_kpacked(WeightShape{E, H, I, 64, true, DType::kBF16}, 42u, 0.05f);
  w13.k_perm = random_k_perm(E, H, 43u);
  w2.k_perm = random_k_perm(E, I, 44u);
  const std::vector<uint16_t> x = random_activations(static_cast<size_t>(M) * H, DType::kBF16, 45u);
  const Routing r = routing(M, topk, E);
  std::vector<double> whole;
  moe_outputs(w13, w2, x, r, false, &whole, nullptr);
  KPackedWeights refused_shard;
  EXPECT_TRUE(refused(tp_shard(w2, TpSplit::kRows, 0, 2, &refused_shard), "act-order"));
  ASSERT_TRUE(fold_act_order({&w13}, &w2).ok());
  for (int ranks : {2, 4}) {
    std::vector<double> sum(whole.size(), 0.0);
    for (int rk = 0; rk < ranks; ++rk) {
      KPackedWeights r13, r2;
      ASSERT_TRUE(tp_shard(w13, TpSplit::kGateUp, rk, ranks, &r13).ok());
      const Status st = tp_shard(w2, TpSplit::kRows, rk, ranks, &r2);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(r2.shape.group_size, ranks == 2 ? 32 : 16);
      std::vector<double> part;
      moe_outputs(r13, r2, x, r, false, &part, nullptr);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    }
    double norm = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_NEAR(sum[i], whole[i], 1e-9 * (1.0 + std::abs(whole[i]))) << "ranks=" << ranks << " i=" << i;
      norm += whole[i] * whole[i];
    }
    EXPECT_GT(norm, 0.0);
  }
}

// Bad producers and permutations are refused by name, and a refused fold leaves every weight
// as it was (the checks come before any change). A down weight without k_perm folds to nothing.
TEST(Int4ActOrderFold, RefusesMismatchesAndLeavesWeightsUnchanged) {
  constexpr int E = 2, H = 32, I = 64;
  KPackedWeights w13 = random_kpacked(WeightShape{E, 2 * I, H, 32, true, DType::kBF16}, 51u);
  KPackedWeights gate = random_kpacked(WeightShape{E, I, H, 32, false, DType::kBF16}, 52u);
  KPackedWeights w2 = random_kpacked(WeightShape{E, H, I, 32, true, DType::kBF16}, 53u);
  w2.k_perm = random_k_perm(E, I, 54u);
  const KPackedWeights w13_0 = w13, gate_0 = gate, w2_0 = w2;
  auto unchanged = [&] { return same_weights(w13, w13_0) && same_weights(gate, gate_0) && same_weights(w2, w2_0); };

  KPackedWeights wide = random_kpacked(WeightShape{E, 3 * I, H, 32, true, DType::kBF16}, 55u);
  EXPECT_TRUE(refused(fold_act_order({&gate, &wide}, &w2), "producer 1 has N=192"));
  KPackedWeights one_expert = random_kpacked(WeightShape{1, I, H, 32, true, DType::kBF16}, 56u);
  EXPECT_TRUE(refused(fold_act_order({&w13, &one_expert}, &w2), "producer 1 has E=1"));
  KPackedWeights fp16 = random_kpacked(WeightShape{E, I, H, 32, true, DType::kF16}, 57u);
  EXPECT_TRUE(refused(fold_act_order({&fp16}, &w2), "activation dtype"));
  EXPECT_TRUE(refused(fold_act_order({&w13, nullptr}, &w2), "producer 1 is null"));
  EXPECT_TRUE(refused(fold_act_order({&gate, &gate}, &w2), "same weight"));
  EXPECT_TRUE(refused(fold_act_order({&w2}, &w2), "down itself"));
  EXPECT_TRUE(refused(fold_act_order({}, &w2), "no producers"));
  EXPECT_TRUE(refused(fold_act_order({&w13}, nullptr), "down is null"));
  KPackedWeights corrupt = gate;
  corrupt.scales.pop_back();
  EXPECT_TRUE(refused(fold_act_order({&w13, &corrupt}, &w2), "scales"));
  KPackedWeights bad_perm = w2;
  bad_perm.k_perm[1] = bad_perm.k_perm[0];
  EXPECT_TRUE(refused(fold_act_order({&w13}, &bad_perm), "not a permutation"));
  EXPECT_TRUE(unchanged());

  // No act-order on down: nothing to fold, nothing changes.
  KPackedWeights plain = w2;
  plain.k_perm.clear();
  ASSERT_TRUE(fold_act_order({&w13, &gate}, &plain).ok());
  EXPECT_TRUE(same_weights(w13, w13_0) && same_weights(gate, gate_0));

  KPackedWeights out;
  const std::vector<int32_t> perm = random_k_perm(E, I, 58u);
  EXPECT_TRUE(refused(permute_n(w13, perm, 3, &out), "N=128 does not split into 3"));
  EXPECT_TRUE(refused(permute_n(w13, perm, 1, &out), "expected E x N / parts = 2 x 128"));
  std::vector<int32_t> dup = perm;
  dup[I + 3] = dup[I + 4];
  EXPECT_TRUE(refused(permute_n(w13, dup, 2, &out), "perm of expert 1 is not a permutation"));
  EXPECT_TRUE(refused(permute_n(w13, perm, 2, nullptr), "out is null"));
  ASSERT_TRUE(permute_n(w13, perm, 2, &out).ok());
}
