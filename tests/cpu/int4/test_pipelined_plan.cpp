// The pipelined GEMM's launch plan (kernels/int4/pipelined_plan.h): row tiles, split-K ranks
// that fit one wave and cover K in whole stages with no empty rank, and the cluster cap.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/int4/dequant_plan.h"
#include "kernels/int4/pipelined_plan.h"

namespace lowbit::int4::kern {
namespace {

constexpr int kH200Sms = 132;

TEST(Int4PipelinedPlan, RowTilesAndRankRanges) {
  for (bool wg : {false, true})
  for (int m : {1, 16, 17, 32, 33, 64, 65, 128, 200, 512, 8192})
    for (int n : {64, 192, 4096, 4160, 6144, 28672, 57344})
      for (int k : {96, 1072, 4096, 14336})
        for (int sms : {1, 78, kH200Sms})
          for (int per_sm : {1, 2, 3})
          for (int cap : {1, 2, 8}) {
            const PipePlan p = pipelined_plan(m, n, k, pipelined_rows(m, wg), sms, per_sm, cap);
            SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " sms=" << sms << " per_sm=" << per_sm
                                              << " cap=" << cap);
            EXPECT_EQ(p.bm, m <= 16   ? 16
                            : m <= 32 ? 32
                            : m <= 64 ? 64
                            : wg      ? 128
                            : m % 64 != 0 && m % 64 <= 32 ? 32
                                                          : 64);
            EXPECT_EQ(p.row_tiles, (m + p.bm - 1) / p.bm);  // bm: the rows rule above
            EXPECT_EQ(p.col_tiles, (n / 64 + 3) / 4);
            EXPECT_GE(p.splits, 1);
            EXPECT_LE(p.splits, cap);
            EXPECT_LE(p.splits, kPipeMaxSplits);
            EXPECT_EQ(p.split_steps % kPipeStageSteps, 0);
            const int ksteps = k / 16;
            EXPECT_GE(p.splits * p.split_steps, ksteps);        // K covered
            EXPECT_LT((p.splits - 1) * p.split_steps, ksteps);  // the last rank has steps
            if (p.splits > 1) {
              EXPECT_LE(pipe_plan_blocks(p), static_cast<long long>(per_sm) * sms);
              EXPECT_GE(p.split_steps, kPipeMinRankSteps);
            }
          }
}

// Stream-K (pipe_sk_plan): taken where one-rank tiles outnumber the SMs within the wave of two
// blocks per SM (70b.gate_up at M = 17..64: 224 tiles of 128 stages -> 264 blocks of 108-109
// stages), not where the plan splits K or fills the wave evenly; the runs cover every unit once,
// each block holding a contiguous run that pipe_sk_block_of inverts.
TEST(Int4PipelinedPlan, StreamK) {
  for (int m : {17, 32, 48, 64}) {
    const PipePlan p = pipelined_plan(m, 57344, 8192, pipelined_rows(m, true), kH200Sms, 2);
    ASSERT_EQ(p.splits, 1) << m;
    const PipeSkPlan sk = pipe_sk_plan(p, 8192, kH200Sms, 2);
    EXPECT_EQ(sk.blocks, 2 * kH200Sms) << m;
    EXPECT_EQ(sk.stages, 128);
    EXPECT_EQ(sk.units, 224LL * 128);
    EXPECT_EQ(pipe_sk_plan(p, 8192, kH200Sms, 1).blocks, 0) << "one block per SM: no even wave of two";
    EXPECT_EQ(pipe_sk_plan(p, 8192, kH200Sms, 2, -1).blocks, 0) << "forced off";
  }
  // Split-K plans (8b.gate_up: 112 tiles in 2 ranks), few tiles (70b.qkv), a whole wave (264 tiles)
  // and short K per block take no stream-K.
  EXPECT_EQ(pipe_sk_plan(pipelined_plan(32, 28672, 4096, 32, kH200Sms, 2), 4096, kH200Sms, 2).blocks, 0);
  EXPECT_EQ(pipe_sk_plan(pipelined_plan(32, 10240, 8192, 32, kH200Sms, 2), 8192, kH200Sms, 2).blocks, 0);
  EXPECT_EQ(pipe_sk_plan(pipelined_plan(32, 67584, 8192, 32, kH200Sms, 2), 8192, kH200Sms, 2).blocks, 0);
  EXPECT_EQ(pipe_sk_plan(pipelined_plan(32, 57344, 1024, 32, kH200Sms, 2), 1024, kH200Sms, 2).blocks, 0);
  // Forced: capped by the wave and by the units (every block at least one stage).
  const PipePlan small = pipelined_plan(20, 1024, 4128, 32, kH200Sms, 2);
  EXPECT_EQ(pipe_sk_plan(small, 4128, kH200Sms, 2, 10).blocks, 10);
  EXPECT_EQ(pipe_sk_plan(small, 4128, kH200Sms, 2, 10).stages, 65);  // the last stage holds 2 K steps
  EXPECT_EQ(pipe_sk_plan(small, 4128, 2, 2, 10).blocks, 4);
  const PipePlan tiny = pipelined_plan(20, 256, 64, 32, kH200Sms, 2);
  EXPECT_EQ(pipe_sk_plan(tiny, 64, kH200Sms, 2, 10).blocks, 1);
  for (long long units : {7LL, 256LL, 260LL, 28672LL})
    for (long long blocks : {1LL, 3LL, 7LL, 10LL, 264LL}) {
      if (blocks > units) continue;
      long long prev_end = 0;
      for (long long b = 0; b < blocks; ++b) {
        const long long u0 = b * units / blocks, u1 = (b + 1) * units / blocks;
        EXPECT_EQ(u0, prev_end);
        EXPECT_LT(u0, u1) << "an empty run: units " << units << " blocks " << blocks;
        for (long long u = u0; u < u1; u += (u1 - u0 > 4 ? (u1 - u0) / 4 : 1)) EXPECT_EQ(pipe_sk_block_of(u, units, blocks), b);
        EXPECT_EQ(pipe_sk_block_of(u1 - 1, units, blocks), b);
        prev_end = u1;
      }
      EXPECT_EQ(prev_end, units);
    }
  EXPECT_EQ(pipe_sk_workspace_bytes(32, 264), 264u * 32 * 256 * 4 + 1280);
}

TEST(Int4PipelinedPlan, LlamaShapesOnH200) {
  // The plan's split-K ranks and K steps per rank (bm-row tiles, per_sm resident blocks per SM).
  auto expect_ranks = [](int m, int n, int k, int bm, int per_sm, int splits, int steps) {
    const PipePlan p = pipelined_plan(m, n, k, bm, kH200Sms, per_sm);
    EXPECT_EQ(p.splits, splits) << "m=" << m << " n=" << n << " k=" << k << " bm=" << bm;
    EXPECT_EQ(p.split_steps, steps) << "m=" << m << " n=" << n << " k=" << k << " bm=" << bm;
  };
  // Two resident blocks per SM (the wgmma 32- to 64-row tiles).
  // llama3-8b.o at M = 64: 16 blocks of 256 columns -> 6 ranks of 44 K steps, one block per SM
  // (96 blocks; 8 ranks of 32 steps would fit the wave of 264 but share SMs: 15.8 us against
  // 12.9, and 4 ranks of 64 16.2; session 34, round C, kPipeTwoPerSmCost).
  expect_ranks(64, 4096, 4096, 64, 2, 6, 44);
  // The same at M = 17..32 and on llama3-8b.down (K = 14336: 6 ranks of 152 steps, 28.3 us at
  // M = 17 against 31.5 in 8 ranks).
  expect_ranks(32, 4096, 4096, 32, 2, 6, 44);
  expect_ranks(17, 4096, 14336, 32, 2, 6, 152);
  // llama3-8b.qkv (24 blocks): 8 ranks of 32 steps, 192 blocks (one block per SM would leave 4
  // ranks of 64: 12.9 us at M = 17 against 11.3).
  expect_ranks(17, 6144, 4096, 32, 2, 8, 32);
  // One block per SM is for the two-per-SM tiles only: a 128-row tile keeps its wave rule.
  expect_ranks(64, 4096, 4096, 64, 1, 8, 32);
  // llama3-70b.o (K = 8192) at M = 64: 8 ranks of 64 steps.
  expect_ranks(64, 8192, 8192, 64, 2, 8, 64);
  // 128-row tiles keep ranks of 32 steps: llama3-8b.o at M = 128 -> 8 ranks.
  expect_ranks(128, 4096, 4096, 128, 1, 8, 32);
  // llama3-8b.gate_up at M = 64: 112 blocks -> 2 ranks (224 blocks in one wave of 264).
  expect_ranks(64, 28672, 4096, 64, 2, 2, 128);
  // llama3-70b.gate_up: 224 blocks already fill the wave; M = 512: 8 row tiles, no split.
  expect_ranks(64, 57344, 8192, 64, 2, 1, 512);
  const PipePlan p = pipelined_plan(512, 28672, 4096, 64, kH200Sms, 2);  // mma.sync 64-row tiles
  EXPECT_EQ(p.row_tiles, 8);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.split_steps, 256);
}

TEST(Int4PipelinedPlan, RowsByWaveFill) {
  // llama3-70b.qkv (N = 10240, K = 8192) at M = 129..192: 2 x 40 = 80 blocks of 128 rows (one
  // per SM, no split: 160 > 132) -> 64-row tiles, 3 x 40 x 2 ranks = 240 of 264 slots.
  for (int m : {129, 160, 192}) EXPECT_EQ(pipelined_rows_for(m, 10240, 8192, true, kH200Sms), 64) << m;
  // M = 256: 64-row tiles would fill no more of their wave (160 of 264) -> not 64 (96 by the
  // cost model since session 29, Rows96).
  EXPECT_EQ(pipelined_rows_for(256, 10240, 8192, true, kH200Sms), 96);
  // llama3-70b.o at M = 192: 64 blocks of 128 rows split in 2 ranks fill 128 of 132 -> not 64
  // (96, Rows96); llama3-8b.qkv at M = 192: 96 of 132 (73%) -> not 64 (96); llama3-70b.gate_up:
  // several waves -> not 64 (96: the same waves either way).
  EXPECT_EQ(pipelined_rows_for(192, 8192, 8192, true, kH200Sms), 96);
  EXPECT_EQ(pipelined_rows_for(192, 6144, 4096, true, kH200Sms), 96);
  EXPECT_EQ(pipelined_rows_for(192, 57344, 8192, true, kH200Sms), 96);
  // Other tile sizes and mma.sync are pipelined_rows() unchanged.
  for (int m : {1, 17, 33, 64, 65, 96, 200, 512})
    EXPECT_EQ(pipelined_rows_for(m, 10240, 8192, false, kH200Sms), pipelined_rows(m, false)) << m;
  EXPECT_EQ(pipelined_rows_for(64, 10240, 8192, true, kH200Sms), 64);
}

// 96-row wgmma tiles for one row tile of 65..96 rows where 128-row tiles would be taken (session 25),
// and past 128 rows where the cost model (waves x K steps per rank, 0.91 per step for 96 rows)
// finds them faster (session 29, rounds SG and TA: it picked the faster tile at every measured point).
TEST(Int4PipelinedPlan, Rows96) {
  for (int m : {65, 80, 96}) {
    EXPECT_EQ(pipelined_rows_for(m, 57344, 8192, true, kH200Sms), 96) << m;
    EXPECT_EQ(pipelined_rows_for(m, 4096, 4096, true, kH200Sms), 96) << m;
    EXPECT_EQ(pipelined_rows_for(m, 57344, 8192, false, kH200Sms), pipelined_rows(m, false)) << m;  // mma.sync
  }
  EXPECT_EQ(pipelined_rows_for(97, 57344, 8192, true, kH200Sms), 128);
  EXPECT_EQ(pipelined_rows_for(128, 4096, 4096, true, kH200Sms), 128);
  EXPECT_EQ(pipelined_rows_for(64, 57344, 8192, true, kH200Sms), 64);
  // Same row tiles either way (M = 129..192: two; 288: three): 96 on every projection but 70b.qkv
  // at 129..192 and 8b.qkv at 288 (64-row tiles by the wave-fill rule, RowsByWaveFill; kAuto
  // takes dequant + cuBLAS for 8b.qkv there).
  const int shapes[][2] = {{4096, 4096}, {6144, 4096}, {28672, 4096}, {4096, 14336},
                           {8192, 8192}, {57344, 8192}, {8192, 28672}};
  for (const auto& nk : shapes)
    for (int m : {129, 160, 192, 288}) {
      if (m == 288 && nk[0] == 6144) {
        EXPECT_EQ(pipelined_rows_for(m, nk[0], nk[1], true, kH200Sms), 64);
        continue;
      }
      EXPECT_EQ(pipelined_rows_for(m, nk[0], nk[1], true, kH200Sms), 96) << m << " " << nk[0] << " " << nk[1];
      EXPECT_EQ(pipelined_rows_for(m, nk[0], nk[1], false, kH200Sms), pipelined_rows(m, false)) << m;  // mma.sync
    }
  // Four 96-row tiles against three: 96 where both fit one wave (8b.o, 8b.qkv, 8b.down, 70b.o,
  // 70b.down at M = 320 / 384: 0.91-0.93x), 128 where the fourth tile adds a wave (70b.qkv 1.8x,
  // 8b.gate_up 1.19x, 70b.gate_up 1.05x).
  for (int m : {320, 384}) {
    EXPECT_EQ(pipelined_rows_for(m, 4096, 4096, true, kH200Sms), 96) << m;
    EXPECT_EQ(pipelined_rows_for(m, 8192, 28672, true, kH200Sms), 96) << m;
    EXPECT_EQ(pipelined_rows_for(m, 10240, 8192, true, kH200Sms), 128) << m;
    EXPECT_EQ(pipelined_rows_for(m, 28672, 4096, true, kH200Sms), 128) << m;
    EXPECT_EQ(pipelined_rows_for(m, 57344, 8192, true, kH200Sms), 128) << m;
  }
  // Three 96-row tiles against two 128-row ones that split K twice as far: not 96 (8b.o M = 256:
  // 27.9 vs 26.9 us, round SG); since session 31 one 256-row tile of 128 columns, as many blocks
  // and K steps as the two 128-row ones at 0.91 of their step cost. 70b.qkv at 256 (no split
  // either way): 96 (92.4 vs 101.2).
  EXPECT_EQ(pipelined_rows_for(256, 4096, 4096, true, kH200Sms), 256);
  EXPECT_EQ(pipelined_rows_for(193, 4096, 4096, true, kH200Sms), 256);
  EXPECT_EQ(pipelined_rows_for(256, 10240, 8192, true, kH200Sms), 96);
  EXPECT_EQ(pipelined_rows_for(512, 10240, 8192, true, kH200Sms, false), 96);
  // With the split tail (session 33) 70b.qkv at M = 512 takes 256-row tiles: 160 of them, one wave
  // and 28 tiles in clusters of 4 ranks (round A: 136.2 us against 190.9 for the 96-row tiles).
  EXPECT_EQ(pipelined_rows_for(512, 10240, 8192, true, kH200Sms), 256);
}

// 256-row tiles (session 31, round H, --path pipelined, rows forced, us): where M fills them
// (M = 512: 70b.gate_up 677 vs 730, 70b.down 323 vs 349, 70b.o 103 vs 107, 8b.gate_up 202 vs 227;
// M = 1024: 70b.gate_up 1372 vs 1556) the model takes them; where the last one would be half
// empty (M = 384 / 640: 8b.gate_up 1.06-1.20x, 70b.gate_up 1.10-1.12x; 70b.qkv M = 384 1.84x) it
// does not; 70b.qkv at M = 640 (three 256-row tiles against five 128-row ones) it does.
TEST(Int4PipelinedPlan, Rows256) {
  const int filled[][2] = {{57344, 8192}, {8192, 28672}, {8192, 8192}, {28672, 4096}};
  for (const auto& nk : filled)
    for (int m : {512, 1024}) EXPECT_EQ(pipelined_rows_for(m, nk[0], nk[1], true, kH200Sms), 256) << m << " " << nk[0];
  for (int m : {384, 640}) {
    EXPECT_NE(pipelined_rows_for(m, 28672, 4096, true, kH200Sms), 256) << m;
    EXPECT_NE(pipelined_rows_for(m, 57344, 8192, true, kH200Sms), 256) << m;
  }
  EXPECT_NE(pipelined_rows_for(384, 10240, 8192, true, kH200Sms), 256);
  EXPECT_EQ(pipelined_rows_for(640, 10240, 8192, true, kH200Sms), 256);  // 70b.qkv: 187 vs 209 us
  EXPECT_EQ(pipelined_rows_for(512, 57344, 8192, false, kH200Sms), pipelined_rows(512, false));  // mma.sync: none
  // Their plan tiles 128 columns: 70b.gate_up at M = 512 is 2 x 448 tiles (7 waves of 512 K steps).
  const PipePlan p = pipelined_plan(512, 57344, 8192, 256, kH200Sms, 1);
  EXPECT_EQ(p.row_tiles, 2);
  EXPECT_EQ(p.col_tiles, 448);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(pipe_tile_groups(256), 2);
  EXPECT_EQ(pipe_tile_groups(128), kPipeWarps);
}

// The warp-specialized 96 / 128-row tiles by default only where each split-K rank streams more
// than kPipeWsStages stages (session 27, round RF): on H200 llama3-8b.o at M = 96 / 128 runs 8
// ranks of 32 K steps (8 stages: the ring never turns) and keeps gemm_pipelined_kernel; at M = 256
// 4 ranks of 16 stages, and the other projections at M = 96..512, take the warp-specialized tiles.
TEST(Int4PipelinedPlan, WarpSpecializedWhereTheRingTurns) {
  auto ws = [](int m, int n, int k) {
    const int bm = pipelined_rows_for(m, n, k, true, kH200Sms);
    EXPECT_TRUE(bm == 96 || bm == 128 || bm == 256) << m << " " << n << " " << k;
    return bm == 256 || pipe_ws_rule(pipelined_plan(m, n, k, bm, kH200Sms, 1));  // 256 rows: warp-specialized only
  };
  EXPECT_FALSE(ws(96, 4096, 4096));   // 8b.o: 16 tiles x 8 ranks of 8 stages
  EXPECT_FALSE(ws(128, 4096, 4096));
  EXPECT_TRUE(ws(256, 4096, 4096));   // 32 tiles x 4 ranks of 16 stages
  EXPECT_TRUE(ws(512, 4096, 4096));
  const int shapes[][2] = {{6144, 4096}, {28672, 4096}, {4096, 14336}, {10240, 8192},
                           {8192, 8192}, {57344, 8192}, {8192, 28672}};
  for (const auto& nk : shapes)
    for (int m : {96, 128, 256, 512}) {
      if (pipelined_rows_for(m, nk[0], nk[1], true, kH200Sms) < 96) continue;  // 64-row tiles (70b.qkv at 129..192)
      EXPECT_TRUE(ws(m, nk[0], nk[1])) << m << " " << nk[0] << " " << nk[1];
    }
  // The boundary: a rank of exactly kPipeWsStages stages keeps the pipelined tile.
  PipePlan p;
  p.split_steps = kPipeWsStages * kPipeStageSteps;
  EXPECT_FALSE(pipe_ws_rule(p));
  p.split_steps += kPipeStageSteps;
  EXPECT_TRUE(pipe_ws_rule(p));
}

// 48-row wgmma tiles at M = 33..48 on weights of >= 48 Mi elements (session 25, round PB).
TEST(Int4PipelinedPlan, Rows48OnLargeWeights) {
  for (int m : {33, 40, 48}) {
    EXPECT_EQ(pipelined_rows_for(m, 57344, 8192, true, kH200Sms), 48) << m;  // 70b.gate_up
    EXPECT_EQ(pipelined_rows_for(m, 4096, 14336, true, kH200Sms), 48) << m;  // 8b.down, 56 Mi
    EXPECT_EQ(pipelined_rows_for(m, 6144, 4096, true, kH200Sms), 64) << m;   // 8b.qkv, 24 Mi
    EXPECT_EQ(pipelined_rows_for(m, 4096, 4096, true, kH200Sms), 64) << m;   // 8b.o, 16 Mi
    EXPECT_EQ(pipelined_rows_for(m, 57344, 8192, false, kH200Sms), 64) << m; // mma.sync
  }
  EXPECT_EQ(pipelined_rows_for(32, 57344, 8192, true, kH200Sms), 32);
  EXPECT_EQ(pipelined_rows_for(49, 57344, 8192, true, kH200Sms), 64);
  EXPECT_EQ(pipelined_rows_for(48, 3 << 20, 16, true, kH200Sms), 48);       // exactly 48 Mi
  EXPECT_EQ(pipelined_rows_for(48, (3 << 20) - 64, 16, true, kH200Sms), 64);
}

TEST(Int4PipelinedPlan, RowsPerTile) {
  for (bool wg : {false, true}) {
    EXPECT_EQ(pipelined_rows(1, wg), 16);
    EXPECT_EQ(pipelined_rows(17, wg), 32);
    EXPECT_EQ(pipelined_rows(33, wg), 64);
    EXPECT_EQ(pipelined_rows(64, wg), 64);
  }
  EXPECT_EQ(pipelined_rows(65, true), 128);  // wgmma: 128-row tiles past 64 rows
  EXPECT_EQ(pipelined_rows(8192, true), 128);
  EXPECT_EQ(pipelined_rows(65, false), 32);  // mma.sync: the last 64-row tile would hold one row
  EXPECT_EQ(pipelined_rows(96, false), 32);  // ... half its rows: 3 x 32 measured faster than 2 x 64
  EXPECT_EQ(pipelined_rows(97, false), 64);
  EXPECT_EQ(pipelined_rows(128, false), 64);
  EXPECT_EQ(pipelined_rows(8192, false), 64);
}

// kAuto on MMA-tiled weights: the measured crossovers of the eight Llama-3 projections, with
// and without the wgmma tiles (G = 128; per-channel takes the same paths).
GemmPath tiled_auto_path_g128(int m, int n, int k, bool wgmma) {
  const GemmPath p = tiled_auto_path(m, n, k, 128, wgmma);
  EXPECT_EQ(p, tiled_auto_path(m, n, k, k, wgmma)) << "per-channel m=" << m << " n=" << n << " k=" << k;
  return p;
}
// One TP rank's share of Llama-3-70B at M = 17..32 (session 36, round 7): the pipelined kernel
// from 16 Mi elements at K <= 8192, the decode kernel below 16 Mi and at long K under 64 Mi.
TEST(Int4PipelinedPlan, TiledAutoPathTpShards) {
  struct Case {
    int n, k;
    GemmPath want;
  };
  for (const Case& c : {Case{7168, 8192, GemmPath::kPipelined},  // tp8.gate_up
                        Case{8192, 7168, GemmPath::kPipelined},  // tp4.down
                        Case{5120, 8192, GemmPath::kPipelined},  // tp2.qkv
                        Case{2560, 8192, GemmPath::kPipelined},  // tp4.qkv
                        Case{8192, 3584, GemmPath::kPipelined},  // tp8.down
                        Case{1280, 8192, GemmPath::kSkinny},     // tp8.qkv
                        Case{8192, 1024, GemmPath::kSkinny},     // tp8.o
                        Case{4096, 14336, GemmPath::kSkinny}})   // 8b.down
    for (int m : {17, 24, 32}) EXPECT_EQ(tiled_auto_path_g128(m, c.n, c.k, true), c.want) << c.n << "x" << c.k << " m=" << m;
}

TEST(Int4PipelinedPlan, TiledAutoPath) {
  struct Case {
    int n, k;
  };
  const Case o8{4096, 4096}, qkv8{6144, 4096}, down8{4096, 14336}, gate_up8{28672, 4096}, o70{8192, 8192},
      gate_up70{57344, 8192};
  for (const Case& c : {o8, qkv8, down8, gate_up8, o70, gate_up70}) {
    const int64_t elems = static_cast<int64_t>(c.n) * c.k;
    const bool big = elems >= kPipeBigWeight, mid = elems >= kPipeMidWeight;
    for (bool wg : {false, true}) {
      EXPECT_EQ(tiled_auto_path_g128(1, c.n, c.k, wg), GemmPath::kSkinny);
      EXPECT_EQ(tiled_auto_path_g128(16, c.n, c.k, wg), GemmPath::kSkinny);
      // M = 17..32: >= 64 Mi elements, or with wgmma 16..64 Mi at K <= 8192 (8b.o, 8b.qkv; session
      // 34 at K <= 4096, session 36 K <= 8192).
      const bool short_k = wg && c.k <= kPipeShortK && elems >= kPipeShortKWeight;
      EXPECT_EQ(tiled_auto_path_g128(24, c.n, c.k, wg), big || short_k ? GemmPath::kPipelined : GemmPath::kSkinny);
      EXPECT_EQ(tiled_auto_path_g128(64, c.n, c.k, wg), GemmPath::kPipelined);
      EXPECT_EQ(tiled_auto_path_g128(2048, c.n, c.k, wg), GemmPath::kDequantCublas);
    }
    EXPECT_EQ(tiled_auto_path_g128(128, c.n, c.k, true), GemmPath::kPipelined);
    EXPECT_EQ(tiled_auto_path_g128(160, c.n, c.k, true), GemmPath::kPipelined);
    EXPECT_EQ(tiled_auto_path_g128(256, c.n, c.k, true), GemmPath::kPipelined);

    EXPECT_EQ(tiled_auto_path_g128(128, c.n, c.k, false), mid ? GemmPath::kPipelined : GemmPath::kDequantCublas);
    EXPECT_EQ(tiled_auto_path_g128(192, c.n, c.k, false), big ? GemmPath::kPipelined : GemmPath::kDequantCublas);
    EXPECT_EQ(tiled_auto_path_g128(256, c.n, c.k, false), GemmPath::kDequantCublas);
  }
  // M = 1536, by the time model since session 31 (round K, forced, us: pipelined / dequant):
  // 70b.o 294 / 316, 70b.gate_up 2098 / 2189, 8b.gate_up 570 / 591; 8b.o 99 / 79, 8b.qkv 147 /
  // 116, 8b.down 330 / 270. With the split tail (session 33, round A, min of two): 8b.down 272 /
  // 279 and 8b.qkv 125 / 116 take the pipelined kernel (8b.qkv a miss of 8%: the dequant model
  // reads 131 us there), 8b.o (81 / 80) keeps dequant + cuBLAS.
  EXPECT_EQ(tiled_auto_path_g128(1536, o70.n, o70.k, true), GemmPath::kPipelined);
  EXPECT_EQ(tiled_auto_path_g128(1536, gate_up70.n, gate_up70.k, true), GemmPath::kPipelined);
  EXPECT_EQ(tiled_auto_path_g128(1536, gate_up8.n, gate_up8.k, true), GemmPath::kPipelined);
  EXPECT_EQ(tiled_auto_path_g128(1536, o8.n, o8.k, true), GemmPath::kDequantCublas);
  EXPECT_EQ(tiled_auto_path_g128(1536, qkv8.n, qkv8.k, true), GemmPath::kPipelined);
  EXPECT_EQ(tiled_auto_path_g128(1536, down8.n, down8.k, true), GemmPath::kPipelined);
  EXPECT_EQ(tiled_auto_path(1536, qkv8.n, qkv8.k, 128, true, kH200Sms, false), GemmPath::kDequantCublas);
  EXPECT_EQ(tiled_auto_path(1536, down8.n, down8.k, 128, true, kH200Sms, false), GemmPath::kDequantCublas);
  EXPECT_EQ(tiled_auto_path_g128(128, o8.n, o8.k, false), GemmPath::kDequantCublas);   // 16 Mi
  EXPECT_EQ(tiled_auto_path_g128(128, down8.n, down8.k, false), GemmPath::kPipelined);  // 56 Mi
  EXPECT_EQ(tiled_auto_path_g128(256, down8.n, down8.k, true), GemmPath::kPipelined);
  EXPECT_EQ(tiled_auto_path_g128(256, qkv8.n, qkv8.k, true), GemmPath::kPipelined);       // 24 Mi
  EXPECT_EQ(tiled_auto_path_g128(256, o8.n, o8.k, true), GemmPath::kPipelined);           // 16 Mi
  // 16 Mi past 256 rows: the time model (8b.o M = 264, session 30 round UE: 1.09x slower on
  // dequant + cuBLAS, which the refit of session 31 no longer takes).
  EXPECT_EQ(tiled_auto_path_g128(257, o8.n, o8.k, true), GemmPath::kPipelined);
  // M = 257..512: >= 48 Mi elements unless the 128-row tiles leave a short last wave (132 SMs).
  EXPECT_EQ(tiled_auto_path_g128(512, down8.n, down8.k, true), GemmPath::kPipelined);      // 64 tiles
  EXPECT_EQ(tiled_auto_path_g128(384, gate_up70.n, gate_up70.k, true), GemmPath::kPipelined);  // 672: 5.1 waves
  EXPECT_EQ(tiled_auto_path_g128(512, gate_up70.n, gate_up70.k, true), GemmPath::kPipelined);  // 896: 6.8 waves
  EXPECT_EQ(tiled_auto_path_g128(384, 10240, 8192, true), GemmPath::kPipelined);          // 70b.qkv: 120 tiles
  // 70b.qkv at M = 512, 160 tiles (1.2 waves): dequant + cuBLAS without the split tail, the
  // pipelined kernel with it (session 33, round A: 136.2 vs 196.1 us).
  EXPECT_EQ(tiled_auto_path(512, 10240, 8192, 128, true, kH200Sms, false), GemmPath::kDequantCublas);
  EXPECT_EQ(tiled_auto_path_g128(512, 10240, 8192, true), GemmPath::kPipelined);
  // 24 Mi: the time model, pipelined since the refit (55 us against dequant + cuBLAS's 52: the
  // model's one whole-weight slab is faster than its chunk rate; a 4% loss the refit accepts).
  EXPECT_EQ(tiled_auto_path_g128(512, qkv8.n, qkv8.k, true), GemmPath::kPipelined);
  // ... and below 48 Mi elements the time model (session 30, round UE).
  EXPECT_EQ(tiled_auto_path_g128(384, o8.n, o8.k, true), GemmPath::kPipelined);      // 29.3 vs 37.5 us
  EXPECT_EQ(tiled_auto_path_g128(320, qkv8.n, qkv8.k, true), GemmPath::kPipelined);  // 44.5 vs 49.1 us
  EXPECT_EQ(tiled_auto_path(448, 10240, 8192, 128, true, kH200Sms, false), GemmPath::kDequantCublas);  // 70b.qkv: 2 waves
  EXPECT_EQ(tiled_auto_path_g128(448, 10240, 8192, true), GemmPath::kPipelined);  // ... a split tail
  EXPECT_EQ(tiled_auto_path(512, 10240, 8192, 128, true, 160), GemmPath::kPipelined);     // one wave on 160 SMs
  EXPECT_EQ(tiled_auto_path_g128(24, o70.n, o70.k, false), GemmPath::kPipelined);        // 64 Mi: big
  // M = 17..32 (session 34, round C): 8b.qkv / 8b.o on the pipelined kernel, 8b.down (K = 14336)
  // on the decode kernel; a weight under 16 Mi elements stays there too.
  for (int m : {17, 32}) {
    EXPECT_EQ(tiled_auto_path_g128(m, qkv8.n, qkv8.k, true), GemmPath::kPipelined) << m;
    EXPECT_EQ(tiled_auto_path_g128(m, o8.n, o8.k, true), GemmPath::kPipelined) << m;
    EXPECT_EQ(tiled_auto_path_g128(m, down8.n, down8.k, true), GemmPath::kSkinny) << m;
    EXPECT_EQ(tiled_auto_path_g128(m, 2048, 4096, true), GemmPath::kSkinny) << m;
  }
}

// M = 513..1024 by the time model of both paths (session 30, rounds UA / UB; cuBLAS's rate on
// the slab chunks refitted in session 31, round A): the choices at measured points where it
// picks the pipelined kernel, and where it keeps dequant + cuBLAS (us: pipelined / dequant).
TEST(Int4PipelinedPlan, TiledAutoPathModel) {
  struct Case {
    const char* name;
    int n, k, m;
    GemmPath want;
  };
  const GemmPath P = GemmPath::kPipelined, D = GemmPath::kDequantCublas;
  const Case cases[] = {
      {"70b.gate_up", 57344, 8192, 768, P},  {"70b.gate_up", 57344, 8192, 1024, P},
      {"70b.gate_up", 57344, 8192, 640, P},  {"70b.down", 8192, 28672, 1024, P},
      {"70b.down", 8192, 28672, 896, P},     {"70b.down", 8192, 28672, 704, P},  // 616 / 694
      {"70b.down", 8192, 28672, 832, P},     // 712 / 1182
      {"70b.o", 8192, 8192, 1024, P},        {"70b.qkv", 10240, 8192, 768, P},
      {"70b.qkv", 10240, 8192, 576, P},      // 192 / 239
      {"70b.qkv", 10240, 8192, 1024, P},     // 256-row tiles: 285 / 305 (session 31, rounds H / E)
      {"8b.gate_up", 28672, 4096, 704, P},   // 332 / 419
      {"8b.down", 4096, 14336, 704, P},      // 157 / 204
      {"8b.down", 4096, 14336, 640, D},      // 158 / 148
      {"8b.down", 4096, 14336, 768, P},
      {"8b.gate_up", 28672, 4096, 1024, P},  {"8b.down", 4096, 14336, 1024, P},
      {"8b.qkv", 6144, 4096, 640, P},        {"8b.o", 4096, 4096, 1024, P},
      // Since the split tail (session 33, round A: tail / dequant, us): 8b.qkv M = 768 72.5 / 67.7
      // (a 7% miss: the dequant model reads 74.1 there), M = 1024 80.7 / 84.3 (before it 98 / 69
      // and 98.6 / 84.3 without the tail).
      {"8b.qkv", 6144, 4096, 768, P},
      {"8b.qkv", 6144, 4096, 1024, P},
      {"8b.o", 4096, 4096, 1152, D},         // 78.3 / 62.7
  };
  for (const Case& c : cases) {
    EXPECT_EQ(tiled_auto_path_g128(c.m, c.n, c.k, true), c.want) << c.name << " m=" << c.m;
    // The model's own comparison agrees with the choice.
    EXPECT_EQ(pipe_model_us(c.m, c.n, c.k, 132) < dequant_cublas_model_us(c.m, c.n, c.k), c.want == P)
        << c.name << " m=" << c.m;
    // Past kPipeModelMaxM rows (M = 2048 on: the overlapped slab plan), smaller groups and
    // without wgmma: dequant + cuBLAS.
    EXPECT_EQ(tiled_auto_path_g128(kPipeModelMaxM + 128, c.n, c.k, true), D) << c.name;
    EXPECT_EQ(tiled_auto_path(c.m, c.n, c.k, 64, true), D) << c.name << " G=64 m=" << c.m;
    EXPECT_EQ(tiled_auto_path_g128(c.m, c.n, c.k, false), D) << c.name << " mma.sync m=" << c.m;
  }
  // The pipelined model follows the plan's waves: 70b.down at M = 1024 (4 x 64 tiles of 256
  // rows and 128 columns, 1792 K steps, two waves on 132 SMs, at 0.91 of the 128-row tile's step
  // cost) against one wave more at M = 1025.
  EXPECT_NEAR(pipe_model_us(1024, 8192, 28672, 132), 2 * 1792 * kPipeStepWaveUs * kPipeRows256Cost, 1e-6);
  EXPECT_GT(pipe_model_us(1100, 8192, 28672, 132), pipe_model_us(1024, 8192, 28672, 132));
  EXPECT_LT(pipe_model_us(1152, 57344, 8192, 132), dequant_cublas_model_us(1152, 57344, 8192));
  // Never a path gemm() refuses: the pipelined kernel needs M * K < 2^32.
  EXPECT_EQ(tiled_auto_path(64, 4096, 1 << 26, 128, true), GemmPath::kDequantCublas);
  EXPECT_EQ(tiled_auto_path(63, 4096, 1 << 26, 128, true), GemmPath::kPipelined);
}

// G = 32 / 64 (the decode kernel's 8-row tiles): the pipelined kernel from M = 9 (round W).
TEST(Int4PipelinedPlan, TiledAutoPathSmallGroups) {
  for (bool wg : {false, true}) {
    for (int g : {32, 64}) {
      EXPECT_EQ(tiled_auto_path(1, 57344, 8192, g, wg), GemmPath::kSkinny);
      EXPECT_EQ(tiled_auto_path(8, 57344, 8192, g, wg), GemmPath::kSkinny);
      EXPECT_EQ(tiled_auto_path(9, 57344, 8192, g, wg), GemmPath::kPipelined);   // 70b.gate_up
      EXPECT_EQ(tiled_auto_path(16, 10240, 8192, g, wg), GemmPath::kPipelined);  // 70b.qkv
      EXPECT_EQ(tiled_auto_path(64, 4096, 4096, g, wg), GemmPath::kPipelined);
    }
    EXPECT_EQ(tiled_auto_path(12, 4096, 14336, 32, wg), GemmPath::kPipelined);  // 8b.down, G = 32 (round AB)
    EXPECT_EQ(tiled_auto_path(12, 6144, 4096, 32, wg), GemmPath::kPipelined);   // 8b.qkv, G = 32
    EXPECT_EQ(tiled_auto_path(24, 4096, 14336, 32, wg), GemmPath::kPipelined);
    EXPECT_EQ(tiled_auto_path(12, 4096, 14336, 64, wg), GemmPath::kSkinny);     // ... G = 64
    EXPECT_EQ(tiled_auto_path(12, 8192, 8192, 64, wg), GemmPath::kSkinny);      // 70b.o, G = 64
    EXPECT_EQ(tiled_auto_path(24, 8192, 8192, 64, wg), GemmPath::kPipelined);
    EXPECT_EQ(tiled_auto_path(24, 4096, 4096, 64, wg), GemmPath::kSkinny);      // 8b.o, G = 64
    EXPECT_EQ(tiled_auto_path(24, 4096, 4096, 32, wg), GemmPath::kPipelined);
  }
}

TEST(Int4PipelinedPlan, ForcedSplitsWithinTheCap) {
  // The knob's ranks, capped by the cluster size and by one stage per rank.
  PipePlan p = pipelined_plan(64, 57344, 8192, 64, kH200Sms, 2, kPipeMaxSplits, 4);
  EXPECT_EQ(p.splits, 4);
  EXPECT_EQ(p.split_steps, 128);
  EXPECT_EQ(pipelined_plan(64, 4096, 4096, 64, kH200Sms, 2, 2, 8).splits, 2);
  p = pipelined_plan(64, 64, 96, 64, kH200Sms, 2, kPipeMaxSplits, 8);  // 6 K steps: 2 ranks of 4 + 2
  EXPECT_EQ(p.splits, 2);
  EXPECT_EQ(p.split_steps, 4);
}


// fused_moe's align block on MMA-tiled experts (rows per expert on average -> block_m): the
// decode tile's 8-row blocks up to 8, then the pipelined tile's 16 / 32 / 64 and, with
// wgmma only, 128 past 128 rows (round BB of session 12). With wgmma since session 25 (round
// PB): 32-row blocks from 13 rows, but 16 up to 16 rows on dense-sized experts.
TEST(Int4PipelinedPlan, MoeBlockRows) {
  const int avg[] = {0, 1, 8, 9, 12, 13, 16, 17, 24, 25, 32, 33, 64, 128, 129, 512, 100000};
  const int with_wg[] = {8, 8, 8, 16, 16, 32, 32, 32, 32, 32, 32, 64, 64, 64, 128, 128, 128};
  const int dense_wg[] = {8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 32, 64, 64, 64, 128, 128, 128};
  const int mma_only[] = {8, 8, 8, 16, 16, 16, 16, 32, 32, 64, 64, 64, 64, 64, 64, 64, 64};
  const int64_t qwen3_w13 = int64_t{1536} * 2048, mixtral_w13 = int64_t{28672} * 4096;
  for (size_t i = 0; i < sizeof(avg) / sizeof(avg[0]); ++i) {
    EXPECT_EQ(moe_pipelined_block_m(avg[i], true), with_wg[i]) << "avg " << avg[i];
    EXPECT_EQ(moe_pipelined_block_m(avg[i], true, qwen3_w13), with_wg[i]) << "avg " << avg[i];
    EXPECT_EQ(moe_pipelined_block_m(avg[i], true, mixtral_w13), dense_wg[i]) << "avg " << avg[i];
    EXPECT_EQ(moe_pipelined_block_m(avg[i], false), mma_only[i]) << "avg " << avg[i];
    EXPECT_EQ(moe_pipelined_block_m(avg[i], false, mixtral_w13), mma_only[i]) << "avg " << avg[i];
  }
}


// Past 64 rows per expert (wgmma) 64- or 128-row align blocks by the wave model (session 30,
// rounds UC / UE: the faster size, measured with block_m forced, at these points).
TEST(Int4PipelinedPlan, MoeBlockRowsModel) {
  struct Case {
    const char* name;
    int m, topk, E, H, I, want;
  };
  const Case cases[] = {
      {"mixtral", 256, 2, 8, 4096, 14336, 64},      // 64 rows on average: 64 (the old rule)
      {"mixtral", 384, 2, 8, 4096, 14336, 128},     // 704 vs 902 us
      {"mixtral", 512, 2, 8, 4096, 14336, 128},     // 1171 vs 1206
      {"mixtral", 1152, 2, 8, 4096, 14336, 128},    // 2052 vs 2209
      {"qwen3.tp1", 1056, 8, 128, 2048, 768, 64},   // 421 vs 466
      {"qwen3.tp1", 1536, 8, 128, 2048, 768, 128},  // 469 vs 520
      {"qwen3.tp1", 2048, 8, 128, 2048, 768, 64},   // 649 vs 678
      {"qwen3.tp1", 2560, 8, 128, 2048, 768, 64},   // 790 vs 896
      {"qwen3.tp2", 1024, 8, 128, 2048, 384, 64},   // 257 vs 294
      {"qwen3.tp2", 1536, 8, 128, 2048, 384, 128},  // 314 vs 330
      {"qwen3.tp2", 2560, 8, 128, 2048, 384, 64},   // 508 vs 618
      {"qwen3.tp2", 3008, 8, 128, 2048, 384, 64},   // 571 vs 612
      {"deepseek", 1024, 6, 64, 2048, 1408, 128},   // 386 vs 428
      {"deepseek", 1365, 6, 64, 2048, 1408, 64},    // 519 vs 534
      {"deepseek", 1707, 6, 64, 2048, 1408, 64},    // 631 vs 705
      {"deepseek", 2048, 6, 64, 2048, 1408, 128},   // 717 vs 742
  };
  for (const Case& c : cases) {
    EXPECT_EQ(moe_pipelined_block_m_for(c.m, c.topk, c.E, c.H, c.I, true, 132), c.want) << c.name << " m=" << c.m;
    // Without wgmma, and up to 64 rows per expert, the rule of MoeBlockRows.
    const int64_t avg = static_cast<int64_t>(c.m) * c.topk / c.E;
    EXPECT_EQ(moe_pipelined_block_m_for(c.m, c.topk, c.E, c.H, c.I, false, 132), moe_pipelined_block_m(avg, false));
  }
  for (int m : {1, 8, 64, 200, 256})
    EXPECT_EQ(moe_pipelined_block_m_for(m, 2, 8, 4096, 14336, true, 132),
              moe_pipelined_block_m(int64_t{m} * 2 / 8, true, int64_t{28672} * 4096));
  // 128-row blocks on the warp-specialized tile (ws128): the model from 33 rows per expert, 128-row
  // blocks at kMoeRows128WsCost (session 32, rounds A, D and E, bench moe with block_m forced, min
  // of two passes, us, 64 vs 128): Mixtral M = 160 / 256 / 1152 606 / 731 / 2193 vs 567 / 578 / 1737;
  // DeepSeek-V2-Lite M = 512 / 640 230 / 280 vs 312 / 323 (64 kept), M = 1365 524 vs 479; Qwen3 TP1
  // M = 896 312 vs 390 (64 kept), M = 1056 / 2048 420 / 648 vs 405 / 640. The model's two misses in
  // those rounds: Qwen3 TP1 M = 1024 (386 vs 401) and M = 2560 (789 vs 829) take 128.
  struct WsCase {
    int m, topk, E, H, I, want;
  };
  const WsCase ws_cases[] = {
      {160, 2, 8, 4096, 14336, 128},   {256, 2, 8, 4096, 14336, 128},  {1152, 2, 8, 4096, 14336, 128},
      {512, 6, 64, 2048, 1408, 64},    {640, 6, 64, 2048, 1408, 64},   {1365, 6, 64, 2048, 1408, 128},
      {896, 8, 128, 2048, 768, 64},    {1056, 8, 128, 2048, 768, 128}, {2048, 8, 128, 2048, 768, 128},
      {1024, 8, 128, 2048, 768, 128},  {2560, 8, 128, 2048, 768, 128},
      {128, 2, 8, 4096, 14336, 32},  // 32 rows per expert: no model
  };
  for (const WsCase& c : ws_cases)
    EXPECT_EQ(moe_pipelined_block_m_for(c.m, c.topk, c.E, c.H, c.I, true, 132, true), c.want) << "m=" << c.m;
  // The grid's column tiles (moe_pipelined.cu launches with them): GEMM1 pairs 64-column gate /
  // up groups, GEMM2 takes 4 groups per block; partial tiles round up.
  EXPECT_EQ(moe_pipe_col_tiles(true, 28672), 112);
  EXPECT_EQ(moe_pipe_col_tiles(true, 2 * 192), 2);
  EXPECT_EQ(moe_pipe_col_tiles(false, 4096), 16);
  EXPECT_EQ(moe_pipe_col_tiles(false, 320), 2);
  // The expected row tiles: one expert per token (E = topk = 1) is exactly ceil(M / bm).
  EXPECT_NEAR(moe_expected_row_tiles(1000, 1, 1, 128), 8.0, 1e-9);
  // Many rows per expert: close to the average's tiles, never fewer.
  EXPECT_GE(moe_expected_row_tiles(8192, 2, 8, 128), 8.0 * 16);
  EXPECT_LE(moe_expected_row_tiles(8192, 2, 8, 128), 8.0 * 17 + 1e-9);
}

// Which align blocks the pipelined tile takes (moe_pipelined_fits adds the layout checks).
TEST(Int4PipelinedPlan, MoePipelinedBlock) {
  const int64_t mixtral_w13 = int64_t{28672} * 4096, mixtral_w2 = int64_t{4096} * 14336;
  const int64_t deepseek_w13 = int64_t{2816} * 2048, qwen3_w13 = int64_t{1536} * 2048;
  for (int64_t e : {mixtral_w13, mixtral_w2, deepseek_w13, qwen3_w13}) {
    EXPECT_FALSE(moe_pipelined_block(8, e));
    for (int bm : {32, 64, 128}) EXPECT_TRUE(moe_pipelined_block(bm, e));
  }
  EXPECT_FALSE(moe_pipelined_block(16, mixtral_w13));  // the decode tile at 16 rows (round BB)
  EXPECT_FALSE(moe_pipelined_block(16, mixtral_w2));
  EXPECT_TRUE(moe_pipelined_block(16, deepseek_w13));
  EXPECT_TRUE(moe_pipelined_block(16, qwen3_w13));
}


// The MoE block order visits every (row tile, column tile) exactly once, in raster groups.
TEST(Int4PipelinedPlan, MoeRasterTileIsABijection) {
  for (int rows : {1, 2, 7, 8, 9, 64, 131})
    for (int cols : {1, 3, 6, 16})
      for (int raster : {1, 3, 8, 16, 4096}) {
        std::vector<int> seen(static_cast<size_t>(rows) * cols, 0);
        for (int bid = 0; bid < rows * cols; ++bid) {
          const PipeTile t = moe_raster_tile(bid, rows, cols, raster);
          ASSERT_TRUE(t.rt >= 0 && t.rt < rows && t.ct >= 0 && t.ct < cols)
              << "bid " << bid << " rows " << rows << " cols " << cols << " raster " << raster;
          ++seen[static_cast<size_t>(t.rt) * cols + t.ct];
          // Within a group, row tiles fastest; a group's column tiles all before the next group.
          const int group = bid / (raster * cols);
          EXPECT_EQ(t.rt / raster, group);
        }
        for (int v : seen) ASSERT_EQ(v, 1) << "rows " << rows << " cols " << cols << " raster " << raster;
      }
  // Raster groups at least the row tiles: the dense order (row tiles fastest, then columns).
  const PipeTile t = moe_raster_tile(13, 5, 4, 4096);
  EXPECT_EQ(t.rt, 3);
  EXPECT_EQ(t.ct, 2);
}

// The dequant + cuBLAS slab plan (session 29, rounds TG / TH): 32 MiB chunks, overlapped, at M =
// 2048..4095 on K <= 8192; the default (64 MiB, sequential) elsewhere; the knobs, when set, as given.
TEST(Int4DequantSlabPlan, MidPrefillOnShortK) {
  constexpr size_t kMiB = size_t{1} << 20;
  for (int m : {2048, 3000, 4095})
    for (int k : {4096, 8192}) {
      const SlabPlan p = dequant_slab_plan(m, k, 0, -1);
      EXPECT_EQ(p.budget, 32 * kMiB) << m << " " << k;
      EXPECT_TRUE(p.overlap) << m << " " << k;
    }
  for (int m : {1, 512, 1024, 2047, 4096, 8192}) {
    const SlabPlan p = dequant_slab_plan(m, 8192, 0, -1);
    EXPECT_EQ(p.budget, kSlabDefaultBytes) << m;
    EXPECT_FALSE(p.overlap) << m;
  }
  for (int k : {14336, 28672}) {
    const SlabPlan p = dequant_slab_plan(2048, k, 0, -1);
    EXPECT_EQ(p.budget, kSlabDefaultBytes) << k;
    EXPECT_FALSE(p.overlap) << k;
  }
  // Knobs: a budget alone keeps the schedule sequential; overlap alone keeps 64 MiB.
  SlabPlan p = dequant_slab_plan(2048, 4096, 16 * kMiB, -1);
  EXPECT_EQ(p.budget, 16 * kMiB);
  EXPECT_FALSE(p.overlap);
  p = dequant_slab_plan(512, 4096, 0, 1);
  EXPECT_EQ(p.budget, kSlabDefaultBytes);
  EXPECT_TRUE(p.overlap);
  p = dequant_slab_plan(2048, 4096, 0, 0);
  EXPECT_EQ(p.budget, kSlabDefaultBytes);
  EXPECT_FALSE(p.overlap);
}

// The split tail (session 33): 70b.qkv at M = 512 in 128-row tiles is 160 tiles on 132 SMs; the
// 28 past the first wave take 4 ranks of 128 K steps (28 x 5 > 132), and the model counts one
// wave of 512 steps, 128 and the tail's own kPipeTailSteps. No tail within one wave, on whole
// waves, with forced ranks, without the flag, or where K is too short to pay for it.
TEST(Int4PipelinedPlan, SplitTail) {
  const PipePlan p = pipelined_plan(512, 10240, 8192, 128, kH200Sms, 1, kPipeMaxSplits, 0, true);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.head_units, 132);
  EXPECT_EQ(p.tail_splits, 4);
  EXPECT_EQ(p.tail_steps, 128);
  EXPECT_DOUBLE_EQ(pipe_plan_step_waves(p, kH200Sms), 512 + 128 + kPipeTailSteps);
  // Ranks are whole stages: 12 tiles past the wave (8b.o at M = 1152, 144 tiles) take 8 ranks of
  // 32 steps; a cap of 5 gives 5 ranks of 52.
  PipePlan q = pipelined_plan(1152, 4096, 4096, 128, kH200Sms, 1, kPipeMaxSplits, 0, true);
  EXPECT_EQ(q.head_units, 132);
  EXPECT_EQ(q.tail_splits, 8);
  EXPECT_EQ(q.tail_steps, 32);
  pipe_split_tail(q, 4096, kH200Sms, 5);
  EXPECT_EQ(q.tail_splits, 5);
  EXPECT_EQ(q.tail_steps, 52);
  EXPECT_EQ(q.head_units, 132);
  // Rank counts that would leave the tail past one wave are not taken: 108 tiles past the wave
  // (240 96-row tiles) cannot take 2 ranks.
  EXPECT_EQ(pipelined_plan(512, 10240, 8192, 96, kH200Sms, 1, kPipeMaxSplits, 0, true).tail_splits, 1);
  EXPECT_EQ(pipelined_plan(512, 10240, 8192, 128, kH200Sms, 1).tail_splits, 1);                      // flag off
  EXPECT_EQ(pipelined_plan(512, 10240, 8192, 128, kH200Sms, 1, kPipeMaxSplits, 2, true).tail_splits, 1);  // forced
  EXPECT_EQ(pipelined_plan(384, 10240, 8192, 128, kH200Sms, 1, kPipeMaxSplits, 0, true).tail_splits, 1);  // 120 tiles
  EXPECT_EQ(pipelined_plan(512, 8448, 8192, 128, kH200Sms, 1, kPipeMaxSplits, 0, true).tail_splits, 1);  // 132 x 1
  EXPECT_EQ(pipelined_plan(528, 8448, 8192, 128, kH200Sms, 1, kPipeMaxSplits, 0, true).tail_splits, 4);  // 5 x 33: 33 x 4 = 132
  // K = 4096 (256 steps): 4 ranks of 64 steps + kPipeTailSteps pay; K = 2048 (128) 4 ranks of 32
  // do not (32 + 96 = 128).
  EXPECT_EQ(pipelined_plan(512, 10240, 4096, 128, kH200Sms, 1, kPipeMaxSplits, 0, true).tail_splits, 4);
  EXPECT_EQ(pipelined_plan(512, 10240, 2048, 128, kH200Sms, 1, kPipeMaxSplits, 0, true).tail_splits, 1);
}

}  // namespace
}  // namespace lowbit::int4::kern
