// The decode GEMM's launch plan (kernels/int4/decode_plan.h) against the choices measured on
// H200 (132 SMs; docs/benchmarks/logs/int4_decode_experiments.md): the fastest row tiles and
// block shape of each Llama-3 projection at M = 1, 16, 24, 32 (the best forced warps x splits
// pair where the plan had a choice), the fallbacks, and the SM-count scaling.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/int4/decode_plan.h"

namespace lowbit::int4::kern {
namespace {

constexpr int kH200Sms = 132;
constexpr int kG128Steps = 8;  // K steps of one 128-row group: windows of 8

struct Expect {
  const char* shape;
  int groups;  // 64-column groups (N / 64)
  int m;
  DecodeTiles tiles;
  int warps, splits;
  int k = 4096;  // the plan reads K at M = 9..16 (lean tiles: batches per warp)
};

std::string tiles_name(DecodeTiles t) {
  return t == DecodeTiles::kRows8        ? "rows8"
         : t == DecodeTiles::kRows16Deep ? "rows16deep"
         : t == DecodeTiles::kRows16     ? "rows16"
         : t == DecodeTiles::kRows16Lean   ? "rows16lean"
         : t == DecodeTiles::kRows16Staged ? "rows16staged"
                                           : "rows16shared";
}

// The plan without block-shared x tiles (LOWBIT_INT4_DECODE_XSHARED=0); K = 4096 unless told.
DensePlan plan_unshared(int m, int groups, int gsteps, int sms, int rows16_max, int steps = 4096 / 16) {
  const DensePlan p = unshared_decode_plan(m, groups, gsteps, steps, sms, rows16_max);
  const DensePlan q = dense_decode_plan(m, groups, gsteps, steps, sms, rows16_max, 0);
  EXPECT_TRUE(p.tiles == q.tiles && p.shape.warps == q.shape.warps && p.shape.splits == q.shape.splits);
  return p;
}

TEST(Int4DecodePlan, UnsharedMatchesMeasuredChoicesOnH200) {
  const Expect cases[] = {
      // M = 1 / 8: 8-row tiles, decode_shape() by column groups, except 70b.qkv's 160 groups:
      // 4-warp blocks in clusters of 3 (dense_rows8_shape; session 17, bf16: 16.7 vs 19.6 us for
      // 8 warps alone at M = 1, 18.5 vs 21.3 at M = 8).
      // 8b.qkv: 8-warp pairs (192 blocks) whose next launch starts after their first batches
      // (dense_pdl_trigger; session 61, H100: 7.6 / 9.0 vs 8.6 / 10.5 us alone at M = 1 / 8).
      {"8b.qkv", 96, 1, DecodeTiles::kRows8, 8, 2},
      {"8b.qkv", 96, 8, DecodeTiles::kRows8, 8, 2},
      // 8b.o stays in 8-warp pairs at every M <= 8: its 4-warp pairs were faster at M = 1..4 in
      // bf16 (session 45: 0.93-0.96x on the H200, 0.85x on the H100) but the same rule lost on the
      // neighbouring weights (N x K 2048x4096, 3072x4096, 4096x2048, 4096x3072: 1.02-1.22x the
      // time on the H100), and so did 8b.down, 70b.tp2.o and 70b.tp4.qkv (1.08-1.34x, H200).
      {"8b.o", 64, 1, DecodeTiles::kRows8, 8, 2},
      {"8b.o", 64, 4, DecodeTiles::kRows8, 8, 2},
      {"8b.down", 64, 1, DecodeTiles::kRows8, 8, 2, 14336},
      {"70b.tp2.o", 128, 1, DecodeTiles::kRows8, 8, 2},
      // Few groups on a long K: 8-warp blocks in clusters of 3 (session 62, H100: 70b.tp4.qkv
      // 0.94-0.98x the pairs' time, 70b.tp8.qkv 0.78-0.81x), and in clusters of 4 from K = 8192
      // since session 68 (H100: 70b.tp4.qkv 0.85-0.88x those clusters of 3, 70b.tp8.qkv 0.79-0.84x).
      {"70b.tp4.qkv", 40, 1, DecodeTiles::kRows8, 8, 4, 8192},
      {"70b.tp8.qkv", 20, 8, DecodeTiles::kRows8, 8, 4, 8192},
      {"70b.tp2.qkv", 80, 1, DecodeTiles::kRows8, 8, 2, 8192},
      {"8b.gate_up", 448, 1, DecodeTiles::kRows8, 4, 1},
      {"70b.qkv", 160, 1, DecodeTiles::kRows8, 4, 3},
      {"70b.qkv", 160, 8, DecodeTiles::kRows8, 4, 3},
      {"70b.o", 128, 8, DecodeTiles::kRows8, 8, 2},
      {"70b.gate_up", 896, 1, DecodeTiles::kRows8, 4, 1},
      // M = 16, the measured best (time_us in the experiments log): 8b.o / 8b.down 8 warps in
      // pairs 9.3 / 20.1; 70b.o 8 warps alone 20.8; 70b.qkv 4 warps in pairs 28.7; 70b.gate_up
      // 8 warps alone at M = 12 / 16 (121 / 121 us vs 124 / 133 with 4 warps, session 9), 4
      // warps at M = 9 (111 vs 119); 8b.gate_up 8-row tiles 38.3 (16-row at best 45.5). Since
      // session 21 (round KA, M = 12 / 16): lean tiles in pairs for 8b.qkv (9.6 / 10.6 vs 8 deep
      // warps alone 10.5 / 10.9) and 70b.down (47.3 / 50.1 vs 52.2 / 53.5), lean tiles alone
      // for 70b.gate_up (98.9 / 114.1 vs 117.1 / 118.7; at M = 9 98.5 vs 111.6 for the 4-warp
      // deep blocks).
      {"8b.qkv", 96, 16, DecodeTiles::kRows16Lean, 8, 2},
      // Since session 22 (round LC): staged x in the 8-warp deep tile where each warp streams
      // <= 4 batches (8b.o in pairs: 2; 7.2 vs 8.1 us at M = 16); until session 61 not for
      // 8b.down (7) or 70b.o (8).
      {"8b.o", 64, 9, DecodeTiles::kRows16Staged, 8, 2},
      {"8b.o", 64, 12, DecodeTiles::kRows16Staged, 8, 2},
      {"8b.o", 64, 16, DecodeTiles::kRows16Staged, 8, 2},
      // Since session 61 every 8-warp deep tile at M <= 16 stages its x (H100: 0.79-0.91x the
      // time of x from L2 on 8b.down, 0.81-0.89x on 70b.o).
      {"8b.down", 64, 12, DecodeTiles::kRows16Staged, 8, 2, 14336},
      {"70b.o", 128, 12, DecodeTiles::kRows16Staged, 8, 1, 8192},
      {"8b.down", 64, 16, DecodeTiles::kRows16Staged, 8, 2, 14336},
      {"70b.o", 128, 16, DecodeTiles::kRows16Staged, 8, 1, 8192},
      {"70b.down", 128, 16, DecodeTiles::kRows16Lean, 8, 2, 28672},
      {"70b.down", 128, 12, DecodeTiles::kRows16Lean, 8, 2, 28672},
      {"70b.qkv", 160, 16, DecodeTiles::kRows16Deep, 4, 2},
      {"70b.gate_up", 896, 16, DecodeTiles::kRows16Lean, 8, 1},
      {"70b.gate_up", 896, 12, DecodeTiles::kRows16Lean, 8, 1},
      {"70b.gate_up", 896, 9, DecodeTiles::kRows16Lean, 8, 1},
      {"8b.gate_up", 448, 16, DecodeTiles::kRows8, 4, 1},
      {"8b.gate_up", 448, 12, DecodeTiles::kRows8, 4, 1},
      // M = 24 / 32: 70b.o and 70b.down keep 8-row tiles (one wave of them fits), 70b.qkv
      // takes 16-row tiles at 32 only, 70b.gate_up and 8b.gate_up at 32 only, 8b.qkv at both.
      {"70b.o", 128, 24, DecodeTiles::kRows8, 4, 1},
      {"70b.o", 128, 32, DecodeTiles::kRows8, 4, 1},
      {"70b.qkv", 160, 24, DecodeTiles::kRows8, 4, 1},
      {"70b.qkv", 160, 32, DecodeTiles::kRows16Deep, 4, 1},
      {"70b.gate_up", 896, 24, DecodeTiles::kRows8, 4, 1},
      {"70b.gate_up", 896, 32, DecodeTiles::kRows16Deep, 4, 1},
      {"8b.gate_up", 448, 32, DecodeTiles::kRows16Deep, 4, 1},
      {"8b.qkv", 96, 24, DecodeTiles::kRows16Deep, 4, 2},
      {"8b.down", 64, 32, DecodeTiles::kRows16Staged, 8, 1},  // staged x since session 61
  };
  for (const Expect& c : cases) {
    const DensePlan p = plan_unshared(c.m, c.groups, kG128Steps, kH200Sms, 32, c.k / 16);
    EXPECT_EQ(tiles_name(p.tiles), tiles_name(c.tiles)) << c.shape << " M=" << c.m;
    EXPECT_EQ(p.shape.warps, c.warps) << c.shape << " M=" << c.m;
    EXPECT_EQ(p.shape.splits, c.splits) << c.shape << " M=" << c.m;
  }
}

// Block-shared x tiles (session 10, round D, M = 16): where the unshared plan takes 8-row
// tiles (8b.gate_up) or 4-warp 16-row blocks in pairs (70b.qkv); never where it takes 8-warp
// blocks, past M = 16, with windows shorter than 8 or with 16-row tiles off.
TEST(Int4DecodePlan, SharedXWhereMeasuredFaster) {
  constexpr int k4096 = 4096 / 16, k8192 = 8192 / 16, k1024 = 1024 / 16;
  for (int m : {9, 12, 16}) {
    DensePlan p = dense_decode_plan(m, 448, kG128Steps, k4096, kH200Sms, 32);  // 8b.gate_up
    EXPECT_EQ(tiles_name(p.tiles), "rows16shared") << m;
    EXPECT_EQ(p.shape.warps, 4);
    EXPECT_EQ(p.shape.splits, 3);  // 112 blocks of 4 groups, 3 per SM on 132 SMs
    p = dense_decode_plan(m, 160, kG128Steps, k8192, kH200Sms, 32);  // 70b.qkv
    EXPECT_EQ(tiles_name(p.tiles), "rows16shared") << m;
    EXPECT_EQ(p.shape.splits, 8);  // 40 blocks: the largest cluster
  }
  // A short K caps the splits at 2 batches of 8 K steps per rank (8 batches: 4).
  EXPECT_EQ(dense_decode_plan(16, 160, kG128Steps, k1024, kH200Sms, 32).shape.splits, 4);
  EXPECT_EQ(dense_decode_plan(16, 160, 67, 67, kH200Sms, 32).shape.splits, 4);  // per-channel, K = 1072
  // 8-warp 16-row blocks stay: lean ones for 70b.gate_up at M = 12 / 16, 70b.down and 8b.qkv,
  // deep ones with staged x for 70b.o and 8b.down.
  for (int m : {12, 16}) EXPECT_EQ(tiles_name(dense_decode_plan(m, 896, kG128Steps, k8192, kH200Sms, 32).tiles), "rows16lean");
  EXPECT_EQ(tiles_name(dense_decode_plan(16, 128, kG128Steps, 28672 / 16, kH200Sms, 32).tiles), "rows16lean");
  EXPECT_EQ(tiles_name(dense_decode_plan(16, 128, kG128Steps, k8192, kH200Sms, 32).tiles), "rows16staged");
  EXPECT_EQ(tiles_name(dense_decode_plan(16, 64, kG128Steps, 14336 / 16, kH200Sms, 32).tiles), "rows16staged");
  EXPECT_EQ(tiles_name(dense_decode_plan(16, 96, kG128Steps, k4096, kH200Sms, 32).tiles), "rows16lean");
  // Lean blocks alone (70b.gate_up at M = 9) stay unshared.
  EXPECT_EQ(dense_decode_plan(9, 896, kG128Steps, k8192, kH200Sms, 32).shape.warps, 8);
  EXPECT_EQ(tiles_name(dense_decode_plan(9, 896, kG128Steps, k8192, kH200Sms, 32).tiles), "rows16lean");
  // Bounds: M <= 8 or > 16, windows of 2 / 4, rows16_max = 8, xshared off.
  for (int m : {1, 8, 17, 24, 32})
    EXPECT_NE(tiles_name(dense_decode_plan(m, 448, kG128Steps, k4096, kH200Sms, 32).tiles), "rows16shared") << m;
  for (int gsteps : {2, 4})
    EXPECT_EQ(tiles_name(dense_decode_plan(16, 448, gsteps, k4096, kH200Sms, 32).tiles), "rows8");
  EXPECT_EQ(tiles_name(dense_decode_plan(16, 448, kG128Steps, k4096, kH200Sms, 8).tiles), "rows8");
  EXPECT_EQ(tiles_name(dense_decode_plan(16, 448, kG128Steps, k4096, kH200Sms, 32, 0).tiles), "rows8");
  // xshared = 2: wherever a 16-row tile can run (M = 9..16, windows of 8), any grid.
  for (int groups : {1, 65, 96, 896}) {
    const DensePlan p = dense_decode_plan(12, groups, kG128Steps, k1024, kH200Sms, 32, 2);
    EXPECT_EQ(tiles_name(p.tiles), "rows16shared") << groups;
    EXPECT_TRUE(p.shape.splits >= 1 && p.shape.splits <= 8) << groups;
  }
  EXPECT_EQ(tiles_name(dense_decode_plan(12, 448, 4, k1024, kH200Sms, 32, 2).tiles), "rows8");
}

TEST(Int4DecodePlan, FallbacksAndBounds) {
  // G = 32 / 64 (windows of 2 / 4) keep 8-row tiles at every M up to 32.
  for (int gsteps : {2, 4})
    for (int m : {9, 16, 32}) EXPECT_EQ(plan_unshared(m, 160, gsteps, kH200Sms, 32).tiles, DecodeTiles::kRows8);
  // Per-channel (one group of any number of steps) counts as windows of 8.
  EXPECT_EQ(plan_unshared(16, 160, 67, kH200Sms, 32).tiles, DecodeTiles::kRows16Deep);
  // rows16_max = 8 (LOWBIT_INT4_DECODE_ROWS16=0) and = 16 move the bound.
  EXPECT_EQ(plan_unshared(16, 160, kG128Steps, kH200Sms, 8).tiles, DecodeTiles::kRows8);
  EXPECT_EQ(plan_unshared(24, 96, kG128Steps, kH200Sms, 16).tiles, DecodeTiles::kRows8);
  EXPECT_EQ(plan_unshared(16, 96, kG128Steps, kH200Sms, 16).tiles, DecodeTiles::kRows16Lean);
  // M <= 8 and M > 32 never take the deep 16-row tile.
  EXPECT_EQ(plan_unshared(8, 160, kG128Steps, kH200Sms, 32).tiles, DecodeTiles::kRows8);
  EXPECT_EQ(plan_unshared(33, 160, kG128Steps, kH200Sms, 32).tiles, DecodeTiles::kRows16);
  // Every plan is a shape the kernels are built for.
  for (int m = 1; m <= 64; ++m)
    for (int groups : {1, 3, 64, 96, 128, 160, 300, 448, 896, 2000}) {
      const DensePlan p = plan_unshared(m, groups, kG128Steps, kH200Sms, 32);
      EXPECT_TRUE(p.shape.warps == 4 || p.shape.warps == 8) << m << " " << groups;
      // (staged x: the 8-warp 16-row tile only, M = 9..32)
      if (p.tiles == DecodeTiles::kRows16Staged) {
        EXPECT_TRUE(p.shape.warps == 8 && m >= 9 && m <= 32) << m << " " << groups;
      }
      // (clusters of 3 only for 8-row blocks, at M <= 16: the kernel's receive buffer holds two
      // pushing ranks there, one for the 16-row tiles)
      const bool three = p.shape.splits == 3 && m <= 16 && p.tiles == DecodeTiles::kRows8;
      EXPECT_TRUE(p.shape.splits == 1 || p.shape.splits == 2 || three) << m << " " << groups;
    }
}

TEST(Int4DecodePlan, ScalesWithSmCount) {
  // Half the SMs: the thresholds halve (a 66-SM part sees 70b.o at M = 16 as a full wave of
  // 8-warp blocks and 96 groups at M = 1 as a medium count).
  EXPECT_EQ(plan_unshared(16, 64, kG128Steps, 66, 32).shape.splits, 1);
  EXPECT_EQ(plan_unshared(16, 64, kG128Steps, 66, 32).shape.warps, 8);
  EXPECT_EQ(plan_unshared(16, 128, kG128Steps, 66, 32).shape.warps, 4);
  const DecodeShape s = decode_shape(96, 1, 66);
  EXPECT_EQ(s.warps, 8);
  EXPECT_EQ(s.splits, 1);
  EXPECT_EQ(decode_shape(96, 1, 132).splits, 2);
  // Clusters of 3 where one wave of 4-warp blocks holds 3 per unit: 133..176 groups on 132
  // SMs, 67..88 on 66.
  EXPECT_EQ(plan_unshared(1, 176, kG128Steps, 132, 32).shape.splits, 3);
  EXPECT_EQ(plan_unshared(1, 177, kG128Steps, 132, 32).shape.splits, 1);
  EXPECT_EQ(plan_unshared(1, 132, kG128Steps, 132, 32).shape.splits, 2);
  EXPECT_EQ(plan_unshared(8, 80, kG128Steps, 66, 32).shape.splits, 3);
  EXPECT_EQ(plan_unshared(8, 80, kG128Steps, 66, 32).shape.warps, 4);
  // Not with windows of 2 K steps (G = 32: 8-warp blocks alone were faster on 70b.qkv).
  EXPECT_EQ(plan_unshared(1, 160, 2, 132, 32).shape.splits, 1);
  EXPECT_EQ(plan_unshared(1, 160, 2, 132, 32).shape.warps, 8);
  EXPECT_EQ(plan_unshared(1, 160, 4, 132, 32).shape.splits, 3);  // G = 64
  // 8b.qkv's 96 groups in pairs, fp16 and bf16 (bf16 alone since session 44, pairs again since
  // session 61 with the trigger after the first batches: Int4DecodePlan.PdlTrigger).
  EXPECT_EQ(unshared_decode_plan(1, 96, kG128Steps, 256, 132, 32, false).shape.splits, 2);
  for (int units : {66, 67, 96, 123, 124}) EXPECT_EQ(dense_rows8_shape(units, kG128Steps, 256, 132, true).splits, 2) << units;
  // Not in fp16 (its 8-warp blocks alone were faster on 70b.qkv).
  for (int m : {1, 8}) {
    const DensePlan f = unshared_decode_plan(m, 160, kG128Steps, 512, 132, 32, false);
    EXPECT_EQ(f.shape.warps, 8);
    EXPECT_EQ(f.shape.splits, 1);
    EXPECT_EQ(dense_decode_plan(m, 160, kG128Steps, 512, 132, 32, 1, false).shape.splits, 1);
  }
}

// The decode tiles' copy of x: element (r, k) at ((r / 16 * K / 16 + k / 16) * 16 + r % 16) * 16
// + k % 16, a bijection of the 16-row tiles' elements onto [0, ceil(M / 16) * 16 * K); the 8
// rows of a row tile in one K step are 256 contiguous bytes. Taken for deep and lean 16-row
// tiles (M = 9..32) on weights of >= 80 Mi elements.
TEST(Int4DecodePlan, XStepsIndexAndChoice) {
  for (int m : {9, 16, 17, 32}) {
    const int k = 96, rows = (m + 15) / 16 * 16;
    EXPECT_EQ(decode_x_steps_bytes(m, k), 2LL * rows * k);
    std::vector<int> seen(static_cast<size_t>(rows) * k, 0);
    for (int r = 0; r < rows; ++r)
      for (int kk = 0; kk < k; ++kk) {
        const long long i = decode_x_steps_index(r, kk, k);
        ASSERT_GE(i, 0);
        ASSERT_LT(i, static_cast<long long>(rows) * k);
        ++seen[static_cast<size_t>(i)];
      }
    for (int v : seen) EXPECT_EQ(v, 1);
    // Rows 8..15 of a tile's K step 3: 8 rows x 16 elements, one run.
    EXPECT_EQ(decode_x_steps_index(15, 16 * 3 + 15, k) - decode_x_steps_index(8, 16 * 3, k), 8 * 16 - 1);
  }
  const long long big = 57344LL * 8192, small = 8192LL * 8192;  // 70b.gate_up, 70b.o
  // Plans by hand: tiles, {warps, splits}; 896 column groups past one wave, 128 or 66 within it.
  auto plan = [](DecodeTiles t, int splits) { return DensePlan{t, {8, splits}}; };
  for (int mode : {1, 2}) {
    EXPECT_FALSE(decode_x_steps_planned(plan(DecodeTiles::kRows8, 1), 8, 896, big, 132, mode));  // 8-row tiles: measured slower
    EXPECT_FALSE(decode_x_steps_planned(plan(DecodeTiles::kRows8, 1), 32, 896, big, 132, mode));
    EXPECT_FALSE(decode_x_steps_planned(plan(DecodeTiles::kRows16Shared, 1), 12, 896, big, 132, mode));
    EXPECT_FALSE(decode_x_steps_planned(plan(DecodeTiles::kRows16Staged, 1), 16, 896, big, 132, mode));
    EXPECT_FALSE(decode_x_steps_planned(plan(DecodeTiles::kRows16, 1), 33, 896, big, 132, mode));
    EXPECT_TRUE(decode_x_steps_planned(plan(DecodeTiles::kRows16Lean, 1), 16, 896, big, 132, mode));
    EXPECT_TRUE(decode_x_steps_planned(plan(DecodeTiles::kRows16Deep, 1), 32, 896, big, 132, mode));
    EXPECT_EQ(decode_x_steps_planned(plan(DecodeTiles::kRows16Deep, 1), 12, 128, small, 132, mode), mode == 2);
    // Lean tiles in a grid of one block per SM at most: ~5 us slower with the copy (round MC).
    EXPECT_EQ(decode_x_steps_planned(plan(DecodeTiles::kRows16Lean, 2), 16, 66, big, 132, mode), mode == 2);
    EXPECT_TRUE(decode_x_steps_planned(plan(DecodeTiles::kRows16Lean, 2), 16, 67, big, 132, mode));
    EXPECT_TRUE(decode_x_steps_planned(plan(DecodeTiles::kRows16Deep, 1), 16, 128, big, 132, mode));
  }
  EXPECT_FALSE(decode_x_steps_planned(plan(DecodeTiles::kRows16Lean, 1), 16, 896, big, 132, 0));
  // The plan's tiles on the measured shapes (132 SMs, bf16, G = 128): 70b.gate_up M = 12 / 16
  // lean, M = 32 4-warp deep; 70b.down M = 16 lean pairs; 8b.gate_up M = 32 deep; 70b.o M = 12
  // deep 8 warps but a small weight.
  auto planned = [](int m, int n, int k) {
    const DensePlan p = dense_decode_plan(m, n / 64, 8, k / 16, 132, 32, 1, true);
    return decode_x_steps_planned(p, m, n / 64, static_cast<long long>(n) * k, 132, 1);
  };
  EXPECT_TRUE(planned(12, 57344, 8192));
  EXPECT_TRUE(planned(16, 57344, 8192));
  EXPECT_TRUE(planned(32, 57344, 8192));
  EXPECT_TRUE(planned(16, 8192, 28672));
  EXPECT_TRUE(planned(32, 28672, 4096));
  EXPECT_FALSE(planned(12, 8192, 8192));
  EXPECT_FALSE(planned(8, 57344, 8192));
}

// MoE GEMM2's wide mode against the session-8 measurements (docs/int4-kernels-sessions.md): blocks =
// min(max_padded / 8, M * topk) as launch_moe_decode computes it, parts 1 (block_m 8).
TEST(Int4DecodePlan, MoeDownWideMatchesMeasuredChoices) {
  auto blocks = [](int m, int topk, int E) {  // moe_max_padded(m, topk, E, 8) / 8 vs pairs
    const int maxp = (m * topk + E * 7 + 7) / 8 * 8;
    return maxp / 8 < m * topk ? maxp / 8 : m * topk;
  };
  struct Case {
    const char* shape;
    int k, E, topk, groups, m;
    bool wide;
  };
  const Case cases[] = {
      {"qwen3.tp1", 768, 128, 8, 32, 1, false},    // 29.8 (wide) vs 21.7 us
      {"qwen3.tp1", 768, 128, 8, 32, 8, true},     // 66.1 vs 69.1
      {"qwen3.tp1", 768, 128, 8, 32, 16, true},    // 94.4 vs 100.1
      {"qwen3.tp1", 768, 128, 8, 32, 128, true},   // 166.4 vs 188.2
      {"qwen3.tp2", 384, 128, 8, 32, 1, true},     // 17.4 vs 19.4
      {"qwen3.tp2", 384, 128, 8, 32, 16, true},    // 61.0 vs 67.8
      {"deepseek", 1408, 64, 6, 32, 1, false},     // 45.0 vs 23.1
      {"deepseek", 1408, 64, 6, 32, 8, true},      // 82.5 vs 81.3: the rule's one loss (1.5%)
      {"deepseek", 1408, 64, 6, 32, 16, true},     // 99.8 vs 102.0
      {"deepseek", 1408, 64, 6, 32, 32, true},     // 114.2 vs 122.3
      {"mixtral", 14336, 8, 2, 64, 16, false},     // long K: 381 vs 235
  };
  for (const Case& c : cases) {
    const int down_blocks = moe_down_wide_blocks(blocks(c.m, c.topk, c.E), c.E, 1, c.groups);
    EXPECT_EQ(moe_down_wide(c.k, down_blocks, kH200Sms), c.wide) << c.shape << " M=" << c.m;
  }
}

// MoE GEMM1's block shape against sessions 47-48's measurements (1x H200 / 1x H100, GEMM1 forced
// to 8-warp blocks alone against the plan's pairs; units = picks x I / 64): full pairs give way
// only before a wide GEMM2 of at most one block per SM.
TEST(Int4DecodePlan, MoeGateUpShapeMatchesMeasuredChoices) {
  struct Case {
    const char* shape;
    int units;
    bool down_wide;
    int down_blocks;  // GEMM2's wide grid (moe_down_wide_blocks)
    DecodeShape want;
  };
  const Case cases[] = {
      {"qwen3.5 M=2", 128, true, 128, {8, 1}},       // alone 0.858x (H200), 0.840x (H100)
      {"qwen3.5 M=2, wide off", 128, false, 128, {8, 2}},
      {"qwen3.tp2 M=2", 96, true, 128, {8, 2}},      // alone 1.143x
      {"qwen3.tp1 M=1", 96, false, 64, {8, 2}},      // alone 1.107x
      {"deepseek.tp2 M=1", 66, false, 48, {8, 2}},   // alone 1.093x
      {"deepseek M=1", 132, false, 48, {8, 2}},      // alone 0.990x
      {"deepseek.tp2 M=2", 132, false, 96, {8, 2}},  // alone 1.018x
      {"128x4096x192x8 M=5", 120, true, 640, {8, 2}},  // alone 1.107x (H100)
      {"256x7168x256x8 M=4", 128, true, 896, {8, 2}},  // alone 1.034x (H100)
      {"qwen3.5 M=3", 192, true, 192, {8, 1}},       // past "few": decode_shape's own
      {"qwen3.tp1 M=8", 768, true, 512, {4, 1}},
  };
  // GEMM2's wide grid at decode sizes: one align block per pick, H / 64 groups 4 to a block.
  EXPECT_EQ(moe_down_wide_blocks(16, 256, 1, 2048 / 64), 128);   // qwen3.5 M=2
  EXPECT_EQ(moe_down_wide_blocks(40, 128, 1, 4096 / 64), 640);   // 128x4096x192x8 M=5
  EXPECT_EQ(moe_down_wide_blocks(32, 256, 1, 7168 / 64), 896);   // 256x7168x256x8 M=4
  EXPECT_EQ(moe_down_wide_blocks(300, 64, 2, 2048 / 64), 1024);  // more blocks than experts: one per expert
  for (const Case& c : cases) {
    const DecodeShape s = moe_gate_up_shape(c.units, c.down_wide, c.down_blocks, kH200Sms);
    EXPECT_EQ(s.warps, c.want.warps) << c.shape;
    EXPECT_EQ(s.splits, c.want.splits) << c.shape;
  }
}

// Large experts' 8-row MoE GEMMs against session 52's measurements (1x H100, 8-warp blocks alone
// against the plan's 4-warp blocks; units = busy experts x column groups): 8 warps where the 4-warp
// grid passes one wave and the GEMM's expert weight has >= 8 Mi elements.
TEST(Int4DecodePlan, MoeLargeExpertShapeMatchesMeasuredChoices) {
  struct Case {
    const char* shape;
    int units;
    long long elems;  // the GEMM's N x K per expert
    DecodeShape want;
  };
  const long long w13_1536 = 2LL * 1536 * 4096, w13_1408 = 2LL * 1408 * 4096, w13_384 = 2LL * 384 * 4096,
                  w13_qwen3 = 2LL * 768 * 2048, w13_deepseek = 2LL * 1408 * 2048, mixtral = 2LL * 14336 * 4096;
  const Case cases[] = {
      {"128x4096x1536x8 GEMM1 M=4", 32 * 24, w13_1536, {8, 1}},      // 0.926x
      {"128x4096x1536x8 GEMM1 M=16", 128 * 24, w13_1536, {8, 1}},    // 0.981x
      {"128x4096x1408x8 GEMM1 M=4", 32 * 22, w13_1408, {8, 1}},      // 0.915x
      {"mixtral GEMM1 M=4..16", 8 * 224, mixtral, {8, 1}},           // 0.969-0.978x
      {"mixtral GEMM2", 8 * 64, mixtral / 2, {4, 1}},                // one wave of 4-warp blocks
      {"8x6144x16384x2 GEMM2", 8 * 96, 16384LL * 6144, {8, 1}},      // 0.924-0.964x with GEMM1's
      {"128x4096x384x8 GEMM1 M=12", 96 * 6, w13_384, {4, 1}},        // 1.027x
      {"qwen3.tp1 GEMM1 M=16", 128 * 12, w13_qwen3, {4, 1}},         // 1.026x
      {"deepseek GEMM1 M=12", 64 * 22, w13_deepseek, {4, 1}},        // 1.026x
  };
  for (const Case& c : cases) {
    const DecodeShape s = moe_large_expert_shape(decode_shape(c.units, 1, kH200Sms), 16, c.units, c.elems, kH200Sms);
    EXPECT_EQ(s.warps, c.want.warps) << c.shape;
    EXPECT_EQ(s.splits, c.want.splits) << c.shape;
  }
  // Shapes other than 4-warp blocks alone are decode_shape()'s few / medium choices: kept.
  const DecodeShape pairs = moe_large_expert_shape({8, 2}, 8, 1000, mixtral, kH200Sms);
  EXPECT_EQ(pairs.warps, 8);
  EXPECT_EQ(pairs.splits, 2);
  // Past M = 16 (8-row parts to M = 128 on small align blocks): 4-warp blocks, as before the rule
  // (128x4096x1408x8 M = 32 / 128 1.032 / 1.079x with it).
  for (int m : {17, 32, 128}) {
    const DecodeShape s = moe_large_expert_shape({4, 1}, m, 128 * 22, w13_1408, kH200Sms);
    EXPECT_EQ(s.warps, 4) << "M=" << m;
  }
}

// Few column groups on a long K (session 62): 8-warp 8-row blocks in clusters of 3 instead of
// pairs while 3 x groups < SMs, from K = 4096 (256 K steps) up to SMs / 6 groups and from K = 8192
// (512 steps) past that; in both dtypes; only where decode_shape() takes pairs. Their one block
// per SM lets the next launch start after the first batches.
// (With the clusters of 4 on K >= 8192 off, as LOWBIT_INT4_DECODE_C4=0 runs the plan: they take
// part of these shapes, FewGroupsK8192ClustersOf4.)
TEST(Int4DecodePlan, FewGroupsLongKClustersOf3) {
  for (bool bf16 : {true, false}) {
    auto shape = [&](int units, int steps, int sms = kH200Sms) {
      return dense_rows8_shape(units, kG128Steps, steps, sms, bf16, false);
    };
    for (int units : {1, 3, 16, 20, 22}) {
      EXPECT_EQ(shape(units, 256).splits, 3) << units;
      EXPECT_EQ(shape(units, 256).warps, 8) << units;
      EXPECT_EQ(shape(units, 255).splits, 2) << units;  // K < 4096
    }
    for (int units : {23, 32, 40, 43}) {
      EXPECT_EQ(shape(units, 511).splits, 2) << units;  // 2048 x 4096 / 6144: pairs
      EXPECT_EQ(shape(units, 512).splits, 3) << units;  // 2048 / 2560 x 8192
      EXPECT_EQ(shape(units, 1792).splits, 3) << units;
    }
    for (int units : {44, 64, 128}) EXPECT_EQ(shape(units, 1792).splits, 2) << units;  // 3 x units >= SMs
    // Half the SMs: the bounds halve.
    EXPECT_EQ(shape(11, 256, 66).splits, 3);
    EXPECT_EQ(shape(12, 256, 66).splits, 2);
    EXPECT_EQ(shape(21, 512, 66).splits, 3);
    EXPECT_EQ(shape(22, 512, 66).splits, 2);
    // Through the plan at M = 1..8 (and at M = 9..16 on the 8-row units: FewGroupsRows8AtM9To16),
    // K = 4096 (the clusters of 4 start at K = 8192), and on K = 8192 with those off.
    for (int m : {1, 8}) {
      EXPECT_EQ(unshared_decode_plan(m, 20, kG128Steps, 256, kH200Sms, 32, bf16).shape.splits, 3) << m;
      EXPECT_EQ(unshared_decode_plan(m, 20, kG128Steps, 512, kH200Sms, 32, bf16, true, false).shape.splits, 3) << m;
    }
    EXPECT_NE(unshared_decode_plan(17, 20, kG128Steps, 256, kH200Sms, 32, bf16).shape.splits, 3);
    EXPECT_EQ(dense_pdl_trigger(60, kH200Sms, 8, 3, true, bf16), 1);
    // Every group size (the rule has no window test, unlike the 4-warp clusters of 3 above;
    // measured at G = 32 / 64 / per-channel: gemm_few_groups_g_h100.md).
    for (int gsteps : {2, 4, 256}) EXPECT_EQ(dense_rows8_shape(20, gsteps, 256, kH200Sms, bf16).splits, 3) << gsteps;
  }
}

// Few column groups on K >= 8192 (session 68): 8-warp 8-row blocks in split-K clusters of 4 (all
// four ranks push their sums: three receive slots) up to 7/16 x SMs groups, where decode_shape()
// takes pairs, at M = 1..8 only, in both dtypes and every group size; K < 8192 keeps the clusters
// of 3 or the pairs, 64 groups (8b.o / 8b.down) the pairs. The next launch starts after the first
// batches, also past one block per SM.
TEST(Int4DecodePlan, FewGroupsK8192ClustersOf4) {
  for (bool bf16 : {true, false}) {
    auto shape = [&](int units, int steps, int sms = kH200Sms) { return dense_rows8_shape(units, kG128Steps, steps, sms, bf16); };
    for (int units : {1, 8, 16, 20, 22, 23, 32, 40, 44, 48, 56, 57}) {
      EXPECT_EQ(shape(units, 512).splits, 4) << units;  // 70b.tp8.qkv (20), 70b.tp4.qkv (40) at K = 8192
      EXPECT_EQ(shape(units, 512).warps, 8) << units;
      EXPECT_EQ(shape(units, 896).splits, 4) << units;  // K = 14336
      EXPECT_NE(shape(units, 511).splits, 4) << units;
    }
    EXPECT_EQ(shape(16, 384).splits, 3);   // 1024 x 6144: clusters of 3
    EXPECT_EQ(shape(32, 256).splits, 2);   // 2048 x 4096: pairs
    EXPECT_EQ(shape(58, 512).splits, 2);   // 16 x 58 > 7 x 132
    EXPECT_EQ(shape(64, 256).splits, 2);   // 8b.o
    EXPECT_EQ(shape(64, 896).splits, 2);   // 8b.down
    EXPECT_EQ(shape(128, 512).splits, 2);  // 70b.o
    // Half the SMs: the bound halves (16 x 28 <= 7 x 66 < 16 x 29).
    EXPECT_EQ(shape(28, 512, 66).splits, 4);
    EXPECT_EQ(shape(29, 512, 66).splits, 2);
    for (int gsteps : {2, 4, 512}) EXPECT_EQ(dense_rows8_shape(20, gsteps, 512, kH200Sms, bf16).splits, 4) << gsteps;
    for (int m : {1, 8}) EXPECT_EQ(unshared_decode_plan(m, 20, kG128Steps, 512, kH200Sms, 32, bf16).shape.splits, 4) << m;
    // Off (LOWBIT_INT4_DECODE_C4=0): the plan before, clusters of 3 or pairs.
    EXPECT_EQ(dense_rows8_shape(20, kG128Steps, 512, kH200Sms, bf16, false).splits, 3);
    EXPECT_EQ(dense_rows8_shape(44, kG128Steps, 512, kH200Sms, bf16, false).splits, 2);
    EXPECT_EQ(dense_decode_plan(1, 40, kG128Steps, 512, kH200Sms, 32, 1, bf16, true, false).shape.splits, 3);
    EXPECT_EQ(dense_decode_plan(1, 40, kG128Steps, 512, kH200Sms, 32, 1, bf16).shape.splits, 4);
    // The trigger after the first batches, one block per SM or not.
    EXPECT_EQ(dense_pdl_trigger(4 * 20, kH200Sms, 8, 4, true, bf16), 1);
    EXPECT_EQ(dense_pdl_trigger(4 * 56, kH200Sms, 8, 4, true, bf16), 1);
  }
}

// M = 9..16 with windows of 8 on few groups (rows16_few_groups_shape): two 8-row tiles per
// group in 8-warp clusters of 3 up to sms / 4 units (K >= 4096 up to sms / 6 units, K >= 6144
// past that), in 8-warp pairs up to 3/8 x sms units (K >= 512) and up to sms / 2 units on K =
// 512..3072, through dense_decode_plan (not replaced by block-shared x tiles); the 16-row tiles
// elsewhere, and never past M = 16, with windows shorter than a batch or on K < 512.
TEST(Int4DecodePlan, FewGroupsRows8AtM9To16) {
  for (bool bf16 : {true, false}) {
    auto plan = [&](int m, int groups, int steps, int gsteps = kG128Steps, int rows16_max = 32, bool few = true) {
      return dense_decode_plan(m, groups, gsteps, steps, kH200Sms, rows16_max, 1, bf16, few);
    };
    auto expect_rows8 = [&](int m, int groups, int steps, int splits) {
      const DensePlan p = plan(m, groups, steps);
      EXPECT_EQ(p.tiles, DecodeTiles::kRows8) << m << " " << groups << " " << steps;
      EXPECT_EQ(p.shape.warps, 8) << m << " " << groups << " " << steps;
      EXPECT_EQ(p.shape.splits, splits) << m << " " << groups << " " << steps;
      EXPECT_EQ(decode_row_tiles(p.tiles, m), 2);
    };
    for (int m : {9, 12, 16}) {
      // Clusters of 3: 256 / 1024 x 8192 (8 / 32 units), 1024 x 6144 (32 units, K >= 6144),
      // 512 x 4096 (16 units <= sms / 6 on K = 4096), 1024 x 28672.
      for (int groups : {4, 16}) expect_rows8(m, groups, 512, 3);
      expect_rows8(m, 16, 384, 3);
      expect_rows8(m, 8, 256, 3);
      expect_rows8(m, 16, 1792, 3);
      // Pairs: 1024 x 4096 (32 units on K < 6144), 70b.tp8.qkv (1280 x 8192, 40 units), 1536 x
      // 8192 (48 units; the bound 3/8 x 132 = 49.5: 49 still, 50 not).
      expect_rows8(m, 16, 256, 2);
      expect_rows8(m, 20, 512, 2);
      expect_rows8(m, 24, 512, 2);
      // Pairs on a short K: 512 / 1280 x 3584, 1024 x 1024, 2048 x 3072 / 1024 (64 units = sms / 2
      // on K <= 3072), 1536 x 512.
      for (int groups : {8, 20}) expect_rows8(m, groups, 224, 2);
      expect_rows8(m, 16, 64, 2);
      expect_rows8(m, 32, 192, 2);
      expect_rows8(m, 32, 64, 2);
      expect_rows8(m, 24, 32, 2);
      // The 16-row tiles: 2048 x 8192 / 4096 (64 units on K > 3072), 70b.tp4.qkv (80), 8b.o
      // (128), 2560 x 2048 (80 on a short K), K < 512.
      for (int groups : {32, 40, 64}) EXPECT_NE(plan(m, groups, 512).tiles, DecodeTiles::kRows8) << m << " " << groups;
      EXPECT_NE(plan(m, 32, 256).tiles, DecodeTiles::kRows8) << m;
      EXPECT_NE(plan(m, 40, 128).tiles, DecodeTiles::kRows8) << m;
      for (int groups : {8, 20}) EXPECT_NE(plan(m, groups, 16).tiles, DecodeTiles::kRows8) << m << " " << groups;
    }
    // Each bound on 132 SMs: {units, steps, splits (0: the 16-row tiles)}.
    const int bounds[][3] = {{49, 512, 2},  {50, 512, 0}, {33, 384, 3}, {34, 8192, 2}, {23, 256, 2}, {22, 256, 3},
                             {22, 255, 2},  {66, 192, 2}, {67, 192, 0}, {50, 193, 0},  {8, 31, 0},   {8, 32, 2}};
    for (const auto& b : bounds) {
      const DecodeShape few = rows16_few_groups_shape(b[0], b[1], kH200Sms);
      EXPECT_EQ(few.splits, b[2]) << b[0] << " units, " << b[1] << " steps";
      EXPECT_EQ(few.warps, b[2] == 0 ? 0 : 8) << b[0] << " units, " << b[1] << " steps";
    }
    // Per-channel (one window per batch) alike.
    EXPECT_EQ(plan(16, 16, 512, 512).shape.splits, 3);
    EXPECT_EQ(plan(16, 20, 512, 512).shape.splits, 2);
    // M = 17, windows of 4 (G = 64): not this rule (G = 64 at M = 12: the 8-row plan of
    // decode_shape, whatever the groups).
    EXPECT_NE(plan(17, 16, 512).tiles, DecodeTiles::kRows8);
    EXPECT_NE(plan(12, 16, 512, 4).shape.splits, 3);
    // LOWBIT_INT4_DECODE_ROWS16=0 (rows16_max 8) keeps the 8-row plan of before (pairs), and
    // LOWBIT_INT4_DECODE_FEW8=0 (few_rows8 false) the 16-row plan of before (staged 8-warp
    // pairs), also where this rule takes pairs.
    EXPECT_EQ(plan(12, 16, 512, kG128Steps, 8).shape.splits, 2);
    for (int groups : {16, 20}) {
      const DensePlan before = plan(12, groups, 512, kG128Steps, 32, false);
      EXPECT_EQ(before.tiles, DecodeTiles::kRows16Staged) << groups;
      EXPECT_EQ(before.shape.splits, 2) << groups;
    }
  }
}

// Where the dense decode GEMM lets the next launch start: after the first batches for grids of
// at most one block per SM and for bf16 8-warp 8-row pairs under 15/8 blocks per SM (8b.qkv's
// 192 on 132 SMs); at the start otherwise (70b.o's 256 pair blocks, 70b.qkv's 480 4-warp
// blocks, fp16 pairs, 16-row tiles).
TEST(Int4DecodePlan, PdlTrigger) {
  EXPECT_EQ(dense_pdl_trigger(128, 132, 8, 2, true, true), 1);   // 8b.o
  EXPECT_EQ(dense_pdl_trigger(132, 132, 4, 1, true, false), 1);  // one wave of single blocks
  EXPECT_EQ(dense_pdl_trigger(192, 132, 8, 2, true, true), 1);   // 8b.qkv pairs, bf16
  EXPECT_EQ(dense_pdl_trigger(192, 132, 8, 2, true, false), 0);  // fp16
  EXPECT_EQ(dense_pdl_trigger(192, 132, 8, 2, false, true), 0);  // 16-row tiles
  EXPECT_EQ(dense_pdl_trigger(192, 132, 4, 2, true, true), 0);   // 4-warp pairs
  EXPECT_EQ(dense_pdl_trigger(247, 132, 8, 2, true, true), 1);   // 8 x 247 < 15 x 132
  EXPECT_EQ(dense_pdl_trigger(248, 132, 8, 2, true, true), 0);
  EXPECT_EQ(dense_pdl_trigger(256, 132, 8, 2, true, true), 0);   // 70b.o / 70b.down pairs
  EXPECT_EQ(dense_pdl_trigger(480, 132, 4, 3, true, true), 0);   // 70b.qkv
}

}  // namespace
}  // namespace lowbit::int4::kern
