// Launch plan of the pipelined W4A16 GEMM (pipelined_tile.cuh): host-only arithmetic, kept in
// a header so that the CPU tests check it without a device.
#pragma once

#include <cmath>
#include <cstdint>

#include "lowbit/detail/hd.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4::kern {

constexpr int kPipeWarps = 4;         // warps per block, one 64-column group each
constexpr int kPipeCols = 64 * kPipeWarps;
constexpr int kPipeStages = 4;        // shared-memory stages (3 in flight while one is computed)
constexpr int kPipeStageSteps = 4;    // K steps of 16 per stage
constexpr int kPipeMaxSplits = 8;     // split-K ranks form one portable thread-block cluster
constexpr int kPipeMinRankSteps = 16; // K steps a split-K rank streams at least (4 stages)

struct PipePlan {
  int bm = 0;          // activation rows per block tile: 16, 32, 64 or 128
  int row_tiles = 0;   // ceil(M / bm)
  int col_tiles = 0;   // ceil(N / 256)
  int splits = 1;      // split-K ranks (cluster size along grid.x)
  int split_steps = 0; // K steps per rank, a multiple of kPipeStageSteps
  // Split tail (pipe_split_tail): tail_splits > 1 when the tiles past the last whole wave run in
  // a second launch as split-K clusters of tail_splits ranks of tail_steps K steps each, after
  // head_units tiles of one rank (splits == 1).
  int head_units = 0;
  int tail_splits = 1;
  int tail_steps = 0;
};

// Rows per block tile. With wgmma (sm_90a): 16 (mma.sync) up to 16 rows, 32 up to 32 (wgmma
// m64n32k16 since session 25; mma.sync before), 64 up to 64,
// then 128 (measured on H200, docs/int4-kernels-sessions.md "Session 11": 128-row wgmma tiles faster
// than 64-row ones at M = 128 on all eight Llama-3 projections, slower at 64). mma.sync only:
// tiles of 64 unless the last one would be at most half full (M % 64 in 1..32), then 32.
inline int pipelined_rows(int m, bool wgmma) {
  if (m <= 16) return 16;
  if (m <= 32) return 32;
  if (m <= 64) return 64;
  if (wgmma) return 128;
  const int tail = m % 64;
  return tail != 0 && tail <= 32 ? 32 : 64;
}

// K steps a split-K rank streams at least: kPipeMinRankSteps in every tile. Until session 34
// the 64-row tiles kept 64 (session 18, round HD: on K = 4096 at M = 48 / 64, 4 ranks of 64
// steps 17.5 / 18.1 us on llama3-8b.o against 19.3 / 22.9 with 8 ranks of 32); with the
// coalesced split reduction (pipe_store_split) 8 ranks of 32 steps are as fast or faster there
// (session 34, round C, 1x H200, bf16 G = 128, forced ranks, two passes: 8b.o M = 48 / 64 15.0 /
// 15.8 vs 15.7 / 16.2, 8b.qkv 15.6 / 16.7 vs 15.9 / 16.4), and 6 ranks of 44 steps faster still
// (below, kPipeTwoPerSmCost).

// K steps per rank when `ranks` ranks cover `ksteps`: whole stages, the last rank possibly shorter.
constexpr int pipe_rank_steps(int ksteps, int ranks) {
  return ((ksteps + ranks - 1) / ranks + kPipeStageSteps - 1) / kPipeStageSteps * kPipeStageSteps;
}

// The two-blocks-per-SM tiles (32 / 48 / 64 rows) split K over the most ranks that fill one
// wave of two blocks per SM, or over the most that leave one block per SM on at most 3/4 of the
// SMs where that plan's ranks are shorter than kPipeTwoPerSmCost x the former's: a rank that
// shares its SM streams its K steps ~1.6x slower. Measured (session 34, round C, 1x H200, bf16
// G = 128, --path pipelined with 1..8 ranks forced on the eight Llama-3 projections at M =
// 17..64, two passes): 16 column tiles (8b.o, 8b.down) run fastest in 6 ranks (96 blocks), 8b.o
// 9.7 / 12.3 us at M = 17 / 48 against 11.0 / 15.0 in 8 ranks (128 blocks, two on some SMs: the
// clusters of 8 do not spread over the GPCs one block per SM) and 12.8 / 15.7 in 4; 24 column
// tiles (8b.qkv) in 8 ranks (192 blocks: 11.3 us at M = 17 against 12.9 for 4 ranks alone). The
// factor sits in the window where the rule picks the measured best at all 40 points (1.4 to 2.0;
// 0.96x the previous plans' time on geometric mean, 0.78-0.89x on 8b.o and 8b.down). The 3/4
// keeps 5-rank plans of 16 tiles (80 blocks, 1.03-1.1x the 4-rank time) out.
constexpr double kPipeTwoPerSmCost = 1.6;
constexpr int kPipeSpreadNum = 3, kPipeSpreadDen = 4;

// 64-column groups per block tile: 4 (256 columns), except the 256-row tile's 2 (its
// m64n256k16 accumulators leave room for one group per consumer warpgroup; session 31).
constexpr int kPipeRows256Groups = 2;
LOWBIT_HD constexpr int pipe_tile_groups(int bm) { return bm == 256 ? kPipeRows256Groups : kPipeWarps; }

// Tiles of bm rows (16 / 32 / 64 / 96 / 128 / 256). Split-K only while the blocks fit one wave
// (blocks_per_sm resident per SM: the kernel's occupancy), each rank streaming at least
// kPipeMinRankSteps, and at most max_splits (the cluster size the device can
// co-schedule); 32- to 64-row tiles at two blocks per SM may take fewer ranks, one block per SM
// (kPipeTwoPerSmCost, measured with their wgmma tiles); forced_splits > 0 (a measurement knob)
// takes that many ranks instead, within max_splits and one step per rank. Rank ranges are whole
// stages, so no rank is left empty.
inline void pipe_split_tail(PipePlan& p, int k, long long wave, int max_splits);
inline PipePlan pipelined_plan(int m, int n, int k, int bm, int sms, int blocks_per_sm,
                               int max_splits = kPipeMaxSplits, int forced_splits = 0, bool split_tail = false) {
  PipePlan p;
  p.bm = bm;
  p.row_tiles = (m + bm - 1) / bm;
  const int groups = pipe_tile_groups(bm);
  p.col_tiles = (n / 64 + groups - 1) / groups;
  const int ksteps = k / 16;
  const int cap = max_splits < kPipeMaxSplits ? (max_splits < 1 ? 1 : max_splits) : kPipeMaxSplits;
  int splits = 1;
  if (forced_splits > 0) {
    splits = forced_splits < cap ? forced_splits : cap;
  } else {
    const long long units = static_cast<long long>(p.row_tiles) * p.col_tiles;
    const long long wave = static_cast<long long>(blocks_per_sm > 0 ? blocks_per_sm : 1) * (sms > 0 ? sms : 1);
    auto most = [&](long long blocks) {
      int s = 1;
      while (s < cap && units * (s + 1) <= blocks && ksteps / (s + 1) >= kPipeMinRankSteps) ++s;
      return s;
    };
    splits = most(wave);
    const long long spread = static_cast<long long>(sms > 0 ? sms : 1) * kPipeSpreadNum / kPipeSpreadDen;
    if (bm >= 32 && bm <= 64 && blocks_per_sm == 2 && units <= spread) {
      const int alone = most(spread);
      if (pipe_rank_steps(ksteps, alone) < kPipeTwoPerSmCost * pipe_rank_steps(ksteps, splits)) splits = alone;
    }
  }
  p.split_steps = pipe_rank_steps(ksteps, splits);
  p.splits = (ksteps + p.split_steps - 1) / p.split_steps;
  if (split_tail && forced_splits == 0)
    pipe_split_tail(p, k, static_cast<long long>(blocks_per_sm > 0 ? blocks_per_sm : 1) * (sms > 0 ? sms : 1), cap);
  return p;
}

// Split tail of the warp-specialized tiles (96 / 128 / 256 rows; session 33). A plan past one
// wave whose tiles run one rank each leaves its last, partial wave with the same K loop as a full
// one: 70b.qkv at M = 512 has 160 128-row tiles on 132 SMs, 2 waves of time for 1.2 of work. Its
// tiles past the last whole wave (`rest`) run instead in a second launch as split-K clusters (the
// same kernel, a unit offset), as many ranks as keep every cluster in one wave (rest x ranks <=
// wave, at most max_splits, each rank >= kPipeMinRankSteps): 512 + 128 K steps per SM instead of
// 2 x 512 there (the "data-parallel + split-K" hybrid of the Stream-K paper, with the split part
// as clusters that reduce through distributed shared memory as the one-wave plans already do).
// Left as is (tail_splits 1) when the plan is one wave or less, already split, has no partial wave,
// or the tail cannot take 2 ranks (rest > wave / 2).
// The tail launch's own cost, in K steps of one wave: what a tail took beyond its K steps on H200
// (session 33, round A, bf16 G = 128, 32 tail plans of the eight Llama-3 projections at M =
// 384..1536: median ~19 us, 6-27 us on one-wave heads; the second launch, each rank's pipeline fill
// and the cluster reduction, as in the one-wave split plans of short K: 8b.o at M = 128, 8 ranks of
// 32 K steps, 22.5 us). A tail is planned only where it saves more than that, and the models add it.
constexpr int kPipeTailSteps = 96;
inline void pipe_split_tail(PipePlan& p, int k, long long wave, int max_splits) {
  p.head_units = 0;
  p.tail_splits = 1;
  p.tail_steps = 0;
  const long long units = static_cast<long long>(p.row_tiles) * p.col_tiles;
  if (p.splits != 1 || wave < 1 || units <= wave || units % wave == 0) return;
  const long long rest = units % wave;
  const int ksteps = k / 16;
  const int cap = max_splits < kPipeMaxSplits ? max_splits : kPipeMaxSplits;
  int t = 1;
  while (t < cap && rest * (t + 1) <= wave && ksteps / (t + 1) >= kPipeMinRankSteps) ++t;
  if (t < 2) return;
  const int steps = pipe_rank_steps(ksteps, t);
  t = (ksteps + steps - 1) / steps;
  if (t < 2 || steps + kPipeTailSteps >= p.split_steps) return;
  p.head_units = static_cast<int>(units - rest);
  p.tail_splits = t;
  p.tail_steps = steps;
}

// Stream-K for the one-wave 32- and 48-row wgmma tiles (dense; session 39; the 64-row kernel
// would spill at the 128 registers of two blocks per SM). Where a plan of one
// rank per tile holds more tiles than SMs but no more than the wave of two blocks per SM (split-K
// needs tiles x 2 <= the wave), some SMs run two tiles and the rest one: 70b.gate_up at M = 17..64
// is 224 tiles on 132 SMs, 92 SMs streaming 2 MB while 40 stream 1 MB, so the GEMM takes the time
// of 2 tiles per SM for 1.7 tiles of work. Stream-K (Osama et al., 2023) gives every resident block
// the same run of (tile, stage) units instead, tile-major: a block's run starts inside one tile
// and ends inside a later one, so a tile is shared by 2-3 blocks. The block that holds a tile's
// first stage (the "head", which runs that part last: its run ends there) waits for the partial
// sums the others published (their runs start with them), adds them in block order
// (deterministic) and stores the tile. Every block is resident at once (blocks <= the wave), so
// a wait ends; it is bounded anyway (kPipeSkWaitNs).
// Taken when 2 x SMs / tiles >= kPipeSkMinGain (the imbalance it removes; the partial sums, one
// flag reset and the runs' second pipeline fill cost a few percent) and each block streams at
// least kPipeSkMinStages stages.
constexpr double kPipeSkMinGain = 1.08;
constexpr int kPipeSkMinStages = 32;
constexpr unsigned long long kPipeSkWaitNs = 2000000000ull;  // 2 s: a block never arrived
struct PipeSkPlan {
  int blocks = 0;        // 0: no stream-K
  int stages = 0;        // stages per tile (ceil(K / 64))
  long long units = 0;   // tiles x stages
};
// forced_blocks > 0 (tests, measurements): that many blocks (at most the wave, at least one
// unit each) whatever the gain; < 0: never.
inline PipeSkPlan pipe_sk_plan(const PipePlan& pl, int k, int sms, int blocks_per_sm, int forced_blocks = 0) {
  PipeSkPlan s;
  const long long tiles = static_cast<long long>(pl.row_tiles) * pl.col_tiles;
  const int stages = (k / 16 + kPipeStageSteps - 1) / kPipeStageSteps;
  const long long wave = static_cast<long long>(blocks_per_sm > 0 ? blocks_per_sm : 1) * (sms > 0 ? sms : 1);
  const long long units = tiles * stages;
  long long blocks = 0;
  if (forced_blocks < 0 || tiles < 1 || stages < 1) return s;
  if (forced_blocks > 0) {
    blocks = forced_blocks < wave ? forced_blocks : wave;
  } else {
    if (pl.splits != 1 || blocks_per_sm != 2 || tiles <= sms || tiles > wave) return s;
    if (2.0 * sms / static_cast<double>(tiles) < kPipeSkMinGain) return s;
    blocks = wave;
    if (units / blocks < kPipeSkMinStages) return s;
  }
  if (blocks > units) blocks = units;
  s.blocks = static_cast<int>(blocks);
  s.stages = stages;
  s.units = units;
  return s;
}
// Workspace of a stream-K launch: one fp32 partial tile (bm x 256) per block, then a flag per
// block (zeroed before each launch), each region 256 B aligned.
inline size_t pipe_sk_partials_bytes(int bm, int blocks) {
  return (static_cast<size_t>(blocks) * bm * kPipeCols * 4 + 255) / 256 * 256;
}
inline size_t pipe_sk_workspace_bytes(int bm, int blocks) {
  return pipe_sk_partials_bytes(bm, blocks) + (static_cast<size_t>(blocks) * 4 + 255) / 256 * 256;
}
// The block that holds unit u of a run of `units` over `blocks` blocks (block b: units
// [b * units / blocks, (b + 1) * units / blocks)).
LOWBIT_HD long long pipe_sk_block_of(long long u, long long units, long long blocks) {
  return ((u + 1) * blocks - 1) / units;
}

// Rows per block tile for one GEMM: pipelined_rows(), except where the 128-row wgmma tiles
// would leave much of the GPU idle. Their plan (one resident block per SM) cannot split K
// once twice its units pass the SM count (70b.qkv at M = 129..256: 80 units, 52 of 132 SMs
// idle); 64-row tiles (two resident blocks per SM, the wgmma kernels' launch bounds) take over
// when the 128-row plan fills less than 2/3 of one wave and theirs at least 85% of one. On H200
// (session 18, round HF, bf16 G = 128): llama3-70b.qkv at M = 192, 128-row tiles 122.0 us
// (80 blocks), 64-row tiles in 2 ranks 85.3 us (240 blocks); where both plans fill a similar
// share (70b.qkv M = 256, 70b.o and 8b.qkv M = 192) the 128-row tiles are as fast or faster.
constexpr int kPipeWgBlocksPerSm32 = 2, kPipeWgBlocksPerSm64 = 2, kPipeWgBlocksPerSm128 = 1;
// The wgmma kernels' launch bounds: resident blocks per SM by tile rows. 32-row tiles (m64n32k16,
// 32 accumulators per thread; session 25): two. Three fit in shared memory (5 stages of 14 KB),
// but at 85 registers the kernel spilled 12 B and ran 4-30% slower than with two (round PA,
// 1x H200, bf16, M = 17..32: 70b.down 96.4 vs 74.1 us, 70b.gate_up 146.1 vs 137.8, 8b.qkv 19.8
// vs 16.9).
// 48-row tiles take the 64-row tiles' two, 96-row tiles the 128-row tiles' one.
LOWBIT_HD constexpr int pipe_wg_blocks_per_sm(int bm) {
  return bm == 32 ? kPipeWgBlocksPerSm32 : bm <= 64 ? kPipeWgBlocksPerSm64 : kPipeWgBlocksPerSm128;
}
// 48-row wgmma tiles (m64n48k16, two blocks per SM) at M = 33..48 on weights of >= 48 Mi
// elements instead of 64-row ones (session 25, round PB, 1x H200, bf16 G = 128, min of two,
// us at M = 33 / 48): 70b.gate_up 156.6 / 156.8 vs 169.6 / 166.0, 70b.down 86.1 / 89.0 vs 90.4 /
// 93.4, 70b.qkv 38.6 / 41.4 vs 40.7 / 43.1, 8b.gate_up 42.8 / 43.0 vs 49.0 / 46.2, 8b.down 40.4 /
// 42.1 vs 42.7 / 44.2; the smaller 8B qkv / o lost (8b.qkv 18.7 / 21.5 vs 17.4 / 18.1).
constexpr int64_t kPipeRows48Weight = int64_t{48} << 20;
constexpr double kPipeRows96Cost = 0.91;  // a 96-row tile's time per K step over a 128-row tile's (below)
constexpr double kPipeRows256Cost = 0.91;  // a 256-row tile's (128 columns) likewise
// Blocks of a plan's grid (row tiles x column tiles x split-K ranks).
inline long long pipe_plan_blocks(const PipePlan& p) {
  return static_cast<long long>(p.row_tiles) * p.col_tiles * p.splits;
}
// A plan's time in units of one K step of one wave: its waves (blocks over `wave` resident
// blocks) x the K steps of one split-K rank. The cost models below scale it.
// With a split tail: the head's whole waves, then one wave of tail_steps and the tail's own cost.
inline double pipe_plan_step_waves(const PipePlan& p, long long wave) {
  if (p.tail_splits > 1) return static_cast<double>(p.head_units / wave) * p.split_steps + p.tail_steps + kPipeTailSteps;
  return static_cast<double>((pipe_plan_blocks(p) + wave - 1) / wave) * p.split_steps;
}
// split_tail: whether the warp-specialized launches split their last partial wave (pipe_split_tail;
// LOWBIT_INT4_PIPE_TAIL=0 turns it off), which the 96 / 128 / 256-row costs then count.
inline int pipelined_rows_for(int m, int n, int k, bool wgmma, int sms, bool split_tail = true) {
  const int bm = pipelined_rows(m, wgmma);
  if (bm == 64 && wgmma && m <= 48 && static_cast<int64_t>(n) * k >= kPipeRows48Weight) return 48;  // 64: m > 32
  if (bm != 128 || sms < 1) return bm;
  const PipePlan p128 = pipelined_plan(m, n, k, 128, sms, kPipeWgBlocksPerSm128, kPipeMaxSplits, 0, split_tail);
  const PipePlan p64 = pipelined_plan(m, n, k, 64, sms, kPipeWgBlocksPerSm64);
  const long long b128 = pipe_plan_blocks(p128), b64 = pipe_plan_blocks(p64);
  const long long w128 = static_cast<long long>(kPipeWgBlocksPerSm128) * sms;
  const long long w64 = static_cast<long long>(kPipeWgBlocksPerSm64) * sms;
  if (3 * b128 < 2 * w128 && b64 <= w64 && 100 * b64 >= 85 * w64) return 64;
  // A single row tile of 65..96 rows: 96-row tiles (m64n96k16, one block per SM like the 128-row
  // ones, the same grid). Session 25, round PE (1x H200, bf16, kAuto, min of two, us at M = 65 /
  // 96): 70b.gate_up 226.2 / 219.9 vs 264.4 / 248.6, 70b.down 129.6 / 131.1 vs 150.2 / 146.2,
  // 8b.gate_up 58.6 / 57.5 vs 81.8 / 64.9, 8b.o 18.6 / 19.6 vs 19.8 / 20.8: 0.72-0.94x everywhere.
  if (m <= 96) return 96;
  // Past 128 rows, 96- or 128-row tiles by a cost model fitted to forced-row measurements: each
  // plan's time ~ its waves (blocks over one per SM) x the K steps a split-K rank streams x the
  // tile's cost per step, a 96-row tile's being kPipeRows96Cost of a 128-row tile's (it does a
  // quarter less work but pays the same stage traffic for the weights). Measured (session 29,
  // round TA, 1x H200, bf16 G = 128, --path pipelined, rows forced in one call, twice): where both
  // plans have the same waves and rank lengths (M = 129..192 and 288 on all eight projections)
  // 96 rows took 0.86-0.93x the time; where 96 rows add a wave (M = 320 / 384: 70b.qkv 1.8x,
  // 8b.gate_up 1.19x, 70b.gate_up 1.05x) or the 128-row plan splits K twice as far (8b.o,
  // 8b.qkv, 8b.down, 70b.o at M = 256 / 512: 1.04-1.79x, round SG) they lost; the model picks
  // the faster one at all 78 measured (shape, M) points of rounds SG and TA (TA twice). Up to
  // 128 rows one 128-row tile (measured faster than two 96-row ones in session 25).
  if (m <= 128) return 128;
  const PipePlan p96 = pipelined_plan(m, n, k, 96, sms, kPipeWgBlocksPerSm128, kPipeMaxSplits, 0,
                                      split_tail);  // 96 rows: 128's occupancy
  const double c96 = kPipeRows96Cost * pipe_plan_step_waves(p96, w128), c128 = pipe_plan_step_waves(p128, w128);
  // 256-row tiles of 128 columns (warp-specialized, m64n256k16: each word unpacked for twice the
  // rows of the 128-row tile) by the same model, kPipeRows256Cost per K step and wave. Measured
  // (session 31, round H, 1x H200, bf16 G = 128, --path pipelined, rows forced, two passes) on six
  // projections at M = 256..1024: per K step and wave 0.86-1.03x the 128-row tile's, median 0.91
  // (the unpack is ~15% of the 128-row tile's time: round D); at M = 256 / 512 / 768 / 1024 0.87-
  // 0.97x the plan's time (70b.gate_up M = 1024 1372 vs 1556 us), at M = 384 / 640 (a half-empty
  // last row tile) up to 1.84x (70b.qkv M = 384), which the model's waves and steps tell apart.
  const PipePlan p256 = pipelined_plan(m, n, k, 256, sms, kPipeWgBlocksPerSm128, kPipeMaxSplits, 0, split_tail);
  const double c256 = kPipeRows256Cost * pipe_plan_step_waves(p256, w128);
  if (c256 < c96 && c256 < c128) return 256;
  return c96 < c128 ? 96 : 128;
}

// The warp-specialized 96 / 128-row tiles (pipelined_ws_tile.cuh): kPipeWsStages stages, and
// taken by default where each split-K rank of their plan (one block per SM) streams more stages
// than that ring holds. Measured on H200 (session 27, round RF, bf16 G = 128, min of two, us,
// against gemm_pipelined_kernel): 0.83-0.88x the time on the 70B projections and 8b.gate_up at
// M = 96..512, 0.86-0.97x on 8b.qkv / down; only 8b.o at M = 96 / 128 (8 ranks of 8 stages: the
// ring never turns) lost, 20.8 / 23.9 vs 19.2 / 22.3.
constexpr int kPipeWsStages = 8;
inline bool pipe_ws_rule(const PipePlan& pl, int stages = kPipeWsStages) {
  return pl.split_steps / kPipeStageSteps > stages;
}

// kAuto on the MMA-tiled layout (gemm.cu), from forced-path measurements on H200 of the eight
// Llama-3 projections at M = 9..1024 (docs/int4-kernels-sessions.md, "Session 11"): the decode kernel
// up to 16 rows (8 for G = 32 / 64, below), and up to 32 on the other weights; the pipelined
// kernel at 33..256 rows (with its wgmma tiles; 129..256 on every weight since session 28), at
// 17..32 on weights of >= 64 Mi elements (and 16..64 Mi at K <= 4096 since session 34, K <= 8192
// since session 36), and at
// 257..512 on >= 48 Mi unless its 128-row tiles leave a short last wave (below); dequant +
// cuBLAS otherwise. Without wgmma (not sm_90a, or LOWBIT_INT4_PIPE_WGMMA=0) the mma.sync tiles'
// measured crossovers apply: 65..128 rows on >= 24 Mi elements, 129..192 on >= 64 Mi.
constexpr int64_t kPipeBigWeight = int64_t{64} << 20;
constexpr int64_t kPipeMidWeight = int64_t{24} << 20;
constexpr int64_t kPipeWgWeight = int64_t{48} << 20;
constexpr int64_t kPipeShortKWeight = int64_t{16} << 20;  // M = 17..32 at K <= kPipeShortK (below)
// Since session 36 K <= 8192 (round 7, 1x H200, bf16 G = 128, both paths forced at M = 17 / 24 /
// 32 on one TP rank's share of Llama-3-70B: the pipelined kernel 0.54-0.87x the decode kernel's
// time on 20-56 Mi elements at K = 7168 / 8192 (tp8.gate_up 7168 x 8192 20.0-20.6 vs 36.9-38.1
// us, tp4.down 8192 x 7168 21.5-21.8 vs 33.1-34.5, tp2.qkv 5120 x 8192 19.5-19.9 vs 23.6-23.9,
// tp4.qkv 2560 x 8192 13.2-13.7 vs 15.3-15.8); below 16 Mi it lost or tied (tp8.qkv 1280 x 8192
// 1.27x, tp8.o 8192 x 1024 0.99-1.01x), and at K = 14336 on 56 Mi (8b.down) it loses.
constexpr int kPipeShortK = 8192;

// M = 257..kPipeModelMaxM (wgmma, G >= 128 or per-channel; up to 512 rows where the wave rule of
// tiled_auto_path does not already take it): the pipelined kernel where a time model of both
// paths says it is faster. Fitted on H200 (session 30, rounds UA / UB, bf16
// G = 128, both paths forced on the eight Llama-3 projections at M = 512..3072):
// - pipelined: its waves (blocks over the resident blocks of all SMs) x the K steps of one
//   split-K rank x kPipeStepWaveUs, x kPipeRows96Cost for 96-row tiles; measured 0.193-0.219
//   us per K step and wave on every shape up to M = 1536, more (0.20-0.24) from 1152 rows on
//   some shapes and from 2048 on all, where the clocks drop under the long compute-bound runs;
// - dequant + cuBLAS: 2MNK at kDequantCublasTflops plus the slab pass per Mi weight elements
//   (written and read back once more than cuBLAS bf16 reads it): medians 0.70-0.91 us on
//   K <= 8192, 0.92-1.00 on K >= 14336, where the 64 MiB slab chunks are narrow (1170 columns
//   at K = 28672), so kDequantUsPerMiElem / kDequantUsPerMiElemLongK.
// Up to M = 1024 the model's pipelined picks were faster or even (within 1%) at every forced
// point of both rounds (0.80-0.99x the dequant path's time); past it, with the 128-row tiles, its
// picks lost 2-8% (8b.gate_up M = 1152, 8b.qkv / 70b.gate_up M = 1408), so session 30 capped it at
// 1024. With the 256-row tiles (session 31, round K: both paths forced at M = 1152..1792 on the
// eight projections, two passes) its picks there took 0.958x the time of dequant + cuBLAS alone
// and 1.008x the faster path's (70b.down M = 1408 / 1536 950 / 1010 us against 1090 / 1178,
// 70b.gate_up M = 1792 2404 vs 2711; worst picks 1.10-1.11x: 70b.o M = 1280, 70b.qkv M = 1792,
// 8b.gate_up M = 1408), so the cap is now M = 2047. From M = 2048 the overlapped slab plan
// (dequant_plan.h), which the model leaves out, wins on most shapes (round K at M = 2048: the
// pipelined kernel 1.02-1.12x on 6 of 8, 0.96-0.97x on 70b.down / 8b.down).
// kDequantCublasTflops is cuBLAS's rate on the slab chunks at M = 257..1024, not on whole
// weights: there the chunk GEMMs (64 MiB of columns, 1024-2048 wide on K >= 8192) run at a median
// of 696 TFLOP/s (quartiles 641 / 753) with outliers where cuBLAS's choice for a chunk shape is
// poor (70b.down M = 832: 1182 us against 712 for the pipelined kernel and ~700 for dequant +
// cuBLAS at M = 768 / 864; 8b.gate_up M = 704 419 vs 332; session 31, round A), while the
// pipelined kernel follows its model within a few %. Refitted over all 116 forced (shape, M)
// points of M = 264..1024 (session 30 rounds UA / UB / UE, session 31 round A; min of each
// path's runs): kAuto's picks cost 1.0012x the faster path's summed time at 680 (worst point
// 1.06x: 70b.qkv M = 448) against 1.024x at the 780 fitted on M = 512..3072 in session 30
// (worst 1.66x at 70b.down M = 832; 1.26-1.30x at 8b.down / 8b.gate_up M = 704).
constexpr int kPipeModelMaxM = 2047;
constexpr double kPipeStepWaveUs = 0.205;
constexpr double kDequantCublasTflops = 680.0;
constexpr double kDequantUsPerMiElem = 0.72, kDequantUsPerMiElemLongK = 0.95;  // K <= 8192 / above
inline double pipe_model_us(int m, int n, int k, int sms, bool split_tail = true) {
  const int bm = pipelined_rows_for(m, n, k, true, sms, split_tail);
  const int per_sm = pipe_wg_blocks_per_sm(bm);
  const PipePlan p = pipelined_plan(m, n, k, bm, sms, per_sm, kPipeMaxSplits, 0, split_tail && bm >= 96);
  return pipe_plan_step_waves(p, static_cast<long long>(per_sm) * sms) * kPipeStepWaveUs *
         (bm == 96 ? kPipeRows96Cost : bm == 256 ? kPipeRows256Cost : 1.0);
}
inline double dequant_cublas_model_us(int m, int n, int k) {
  const double elems = static_cast<double>(n) * k;
  const double slab_us = k > 8192 ? kDequantUsPerMiElemLongK : kDequantUsPerMiElem;
  return 2.0 * m * elems / (kDequantCublasTflops * 1e6) + slab_us * elems / double(1 << 20);
}
inline GemmPath tiled_auto_path_measured(int m, int n, int k, int group_len, bool wgmma, int sms,
                                         bool split_tail = true) {
  const int64_t elems = static_cast<int64_t>(n) * k;
  if (m <= 8) return GemmPath::kSkinny;
  // G = 32 / 64: the decode kernel keeps 8-row tiles (its 16-row tiles spill there), and the
  // pipelined kernel wins from M = 9 (rounds W / X / AB: G = 32 everywhere, 1.04-2.7x, N = 4096
  // at M <= 16 by 4-13% since round AA; G = 64 where N >= 10240 at M = 9..16 and N > 4096 at
  // 17..32).
  if (m <= 32 && group_len == 32) return GemmPath::kPipelined;
  if (m <= 32 && group_len == 64)
    return (m <= 16 ? n >= 10240 : n > 4096) ? GemmPath::kPipelined : GemmPath::kSkinny;
  if (m <= 16) return GemmPath::kSkinny;
  // 17..32 rows: the pipelined kernel on weights of >= 64 Mi elements, and since session 34 with
  // wgmma on K <= kPipeShortK (4096 until session 36, now 8192) from 16 Mi up (rounds C / D, 1x H200, bf16 G = 128, us at M = 17 / 24 /
  // 32, with the coalesced split reduction and its split rule: 8b.qkv 11.3 / 11.6 / 12.1 against the
  // decode kernel's 14.4 / 15.0 / 15.7, 8b.o 9.7 / 9.8 / 10.4 against 10.1 / 10.5 / 11.0); the
  // decode kernel keeps long K (8b.down, K = 14336: 26.3-26.5 against 28.3-29.0).
  if (m <= 32)
    return elems >= kPipeBigWeight || (wgmma && k <= kPipeShortK && elems >= kPipeShortKWeight) ? GemmPath::kPipelined
                                                                                                : GemmPath::kSkinny;
  if (m <= 64) return GemmPath::kPipelined;
  if (wgmma) {
    if (m <= 128) return GemmPath::kPipelined;
    // 129..256 rows on every weight since the warp-specialized tiles (session 28, round SA,
    // forced paths, bf16 G = 128, us: 8b.o (16 Mi elements) M = 160 / 192 / 224 / 256 26.3 /
    // 26.2 / 26.4 / 27.0 against dequant + cuBLAS 31.2 / 32.5 / 33.4 / 27.0; from 24 Mi up the
    // pipelined kernel was already taken).
    if (m <= 256) return GemmPath::kPipelined;
    if (m <= 512) {
      // 128-row tiles, one block per SM: a partial last wave costs the pipelined kernel a whole
      // wave of time (70b.qkv M = 512: 160 tiles on 132 SMs, 252 vs 186 us); within one wave or
      // with the last one mostly full it wins (70b.gate_up M = 384, 5.1 waves: 753 vs 954 us).
      const double tiles = static_cast<double>((n + 255) / 256) * ((m + 127) / 128), waves = tiles / (sms > 0 ? sms : 1);
      const bool waves_ok = waves <= 1.0 || static_cast<double>(static_cast<int64_t>(waves + 0.999999)) <= 1.3 * waves;
      if (elems >= kPipeWgWeight && waves_ok) return GemmPath::kPipelined;
      // Otherwise the time model below decides too: it takes the smaller weights where their
      // one wave is short (session 30, round UE, forced, us: 8b.o M = 384 / 448 / 512 29.3 / 32.7
      // / 32.9 against dequant + cuBLAS 37.5 / 35.4 / 35.9, 8b.qkv M = 320 44.5 vs 49.1; it keeps
      // dequant + cuBLAS for 70b.qkv at M = 448 / 512, 0.93-0.99x either way).
    }
    // Up to kPipeModelMaxM rows by the time model above (fitted on G = 128; smaller groups keep
    // dequant + cuBLAS, not measured there).
    if (m <= kPipeModelMaxM && (group_len >= 128 || group_len >= k) && sms > 0 &&
        pipe_model_us(m, n, k, sms, split_tail) < dequant_cublas_model_us(m, n, k))
      return GemmPath::kPipelined;
    return GemmPath::kDequantCublas;
  }
  if (m <= 128) return elems >= kPipeMidWeight ? GemmPath::kPipelined : GemmPath::kDequantCublas;
  if (m <= 192) return elems >= kPipeBigWeight ? GemmPath::kPipelined : GemmPath::kDequantCublas;
  return GemmPath::kDequantCublas;
}
// The pipelined kernel addresses x with 32-bit element offsets (gemm() refuses M * K >= 2^32 on
// that path), so kAuto takes dequant + cuBLAS there instead.
inline GemmPath tiled_auto_path(int m, int n, int k, int group_len, bool wgmma, int sms = 132,
                                bool split_tail = true) {
  const GemmPath p = tiled_auto_path_measured(m, n, k, group_len, wgmma, sms, split_tail);
  const bool x32 = static_cast<int64_t>(m) * k < (int64_t{1} << 32);
  return p == GemmPath::kPipelined && !x32 ? GemmPath::kDequantCublas : p;
}

// fused_moe's align block on MMA-tiled experts with the pipelined tile (avg: rows per expert
// on average, M * topk / E), measured on H200 (docs/int4-kernels-sessions.md, session 12, round BB: block_m 16 / 32 /
// 64 / 128 and the decode tile on the four MoE shapes at M = 64..8192): up to 8 the decode
// tile (8-row blocks); 9..16: 16 (on the decode tile for dense-sized experts, below); 17..24: 32; 25..128:
// 64, its wgmma tiles beating 32-row mma.sync tiles despite the padding (Qwen3 M = 512, 32
// rows: 276 vs 300 us; Mixtral M = 128: 623 vs 676); above 128: 128 with wgmma (Mixtral M =
// 1024, 256 rows: 1896 vs 2056 us).
// With wgmma since session 25 (32-row wgmma tiles; round PB, 1x H200, bf16, one run each,
// every block size forced): 32 from 13 to 32 rows, except 13..16 on dense-sized experts (the
// decode tile's 16-row blocks, below). At 16 rows (M = 256) Qwen3-30B-A3B TP1 187.0 vs 219.3 us
// for 16-row blocks, TP2 112.2 vs 142.2; at 12 (M = 192) TP2 110.4 vs 116.3 but TP1 185.0 vs
// 177.5 and DeepSeek-V2-Lite (M = 128) 172.5 vs 160.4, so 16 stays up to 12; at 32 (M = 512 /
// 128) Mixtral 569.0 vs 618.2, Qwen3 TP2 172.9 vs 180.9, TP1 276.1 vs 270.5; at 36 (DeepSeek M =
// 384) 64-row blocks 233.1 vs 284.3; Mixtral at 16 (M = 64) 475.0 on the decode tile vs 502.3.
// expert_elems: one expert's w13 (2I x H); 0 gives the largest choice (workspace sizing).
constexpr int64_t kMoeDecodeTileExpert = int64_t{16} << 20;
inline int moe_pipelined_block_m(int64_t avg, bool wgmma, int64_t expert_elems = 0) {
  if (avg <= 8) return 8;
  if (!wgmma) return avg <= 16 ? 16 : avg <= 24 ? 32 : 64;
  if (avg <= 12) return 16;
  if (avg <= 16) return expert_elems >= kMoeDecodeTileExpert ? 16 : 32;
  return avg <= 32 ? 32 : avg <= 128 ? 64 : 128;
}
// Past 64 rows per expert on average (wgmma), 64- or 128-row align blocks by a wave model of
// both GEMMs: each expert's rows n ~ Binomial(M, topk / E) (the normal approximation, over a
// fixed grid: moe_expected_row_tiles), so a GEMM's blocks are E x E[ceil(n / bm)] row tiles x
// its column tiles; its time ~ waves (blocks over bm's resident blocks per SM x SMs) x (its K
// steps + kMoeBlockFillSteps, the pipeline fill every block pays), x kMoeRows64Cost for 64-row
// blocks (two per SM; each streams the expert's weights for half the rows). Fitted on H200
// (session 30, rounds UC-UE, bf16 G = 128, bench moe with block_m forced to 64 and 128 at 44
// points of 64..288 rows per expert on the four MoE models, two passes each): the model's choice
// is the faster size or within 2% at 39 of them, 0.4% above the faster size on average; the
// previous rule (128 past 128 rows) 4.8%, always 64 3.0%, always 128 4.7%. Up to 64 rows per
// expert 64 stays (at exactly 64, Qwen3 TP2 M = 1024, 128-row blocks took 1.14x the time).
constexpr int kMoeRowsModelMinAvg = 64;  // the model decides above this many rows per expert
// ... and above 32 where the 128-row blocks run on the warp-specialized tile (fused_moe's layer,
// moe_pipelined.cu; session 32, round A, min of two passes): Mixtral-8x7B M = 256 (64 rows per
// expert) took 578 us in 128-row blocks against 731 in 64-row ones, which the model picks; at 33..64
// rows on the other shapes it keeps 64 (DeepSeek-V2-Lite M = 512: 230 vs 312 us).
constexpr int kMoeRowsModelMinAvgWs = 32;
constexpr double kMoeRows64Cost = 1.15;
// The 128-row blocks' cost on the warp-specialized layer (session 32, rounds A and D: block_m 64
// and 128 forced at 30 points of 36..2048 rows per expert on Mixtral-8x7B, DeepSeek-V2-Lite and
// Qwen3-30B-A3B TP1, min of two passes): with 0.8 the model's picks cost 1.0006x the faster size
// (one miss: Qwen3 TP1 M = 1024, 386 vs 401 us); 1.0 misses Mixtral at 36..56 rows per expert
// (M = 192: 613 vs 573 us), 0.75 DeepSeek at 60..64 (M = 640: 280 vs 323). A narrow window
// (~0.76-0.81), fitted on these points; out of them (round E, 10 points at 40..288 rows per expert)
// the picks cost 1.0052x the faster size summed (the previous rule 1.0199x; one miss, Qwen3 TP1
// M = 2560: 829 vs 789 us).
constexpr double kMoeRows128WsCost = 0.8;
constexpr int kMoeBlockFillSteps = kPipeStages * kPipeStageSteps;
// Column tiles of the pipelined tile's MoE grid for a GEMM of n output columns: GEMM1 pairs a
// gate and an up 64-column group per warp (n = 2 I), GEMM2 gives each of a block's warps one.
inline int moe_pipe_col_tiles(bool gate_up, int n) {
  return gate_up ? (n / 2 / 64 + 1) / 2 : (n / 64 + kPipeWarps - 1) / kPipeWarps;
}
inline double moe_expected_row_tiles(int64_t m, int topk, int experts, int bm) {
  if (experts < 1 || bm < 1) return 0.0;
  const double p = static_cast<double>(topk) / experts, mu = static_cast<double>(m) * p;
  const double sd = std::sqrt(mu * (1.0 - p > 0.0 ? 1.0 - p : 0.0));
  double tiles = 0.0, wsum = 0.0;
  for (int i = -40; i <= 40; ++i) {
    const double z = i / 10.0, w = std::exp(-z * z / 2), n = mu + z * sd;
    wsum += w;
    if (n > 0.0) tiles += w * std::ceil(n / bm);
  }
  return experts * tiles / wsum;
}
inline double moe_rows_model(int64_t m, int topk, int experts, int hidden, int inter, int bm, int sms,
                             bool ws128 = false) {
  const double tiles = moe_expected_row_tiles(m, topk, experts, bm);
  const double wave = static_cast<double>(pipe_wg_blocks_per_sm(bm)) * (sms > 0 ? sms : 1);
  const int ct1 = moe_pipe_col_tiles(true, 2 * inter), ct2 = moe_pipe_col_tiles(false, hidden);
  const double w1 = std::ceil(tiles * ct1 / wave), w2 = std::ceil(tiles * ct2 / wave);
  return (w1 * (hidden / 16 + kMoeBlockFillSteps) + w2 * (inter / 16 + kMoeBlockFillSteps)) *
         (bm == 64 ? kMoeRows64Cost : ws128 ? kMoeRows128WsCost : 1.0);
}
// The align block for the pipelined tile with these expert shapes (hidden = GEMM1's K, inter =
// GEMM2's K; w13 = 2 inter x hidden): moe_pipelined_block_m(), the model above past 64 rows
// (past 32 with ws128: 128-row blocks on the warp-specialized tile).
inline int moe_pipelined_block_m_for(int64_t m, int topk, int experts, int hidden, int inter, bool wgmma, int sms,
                                     bool ws128 = false) {
  const int64_t avg = m * topk / (experts > 0 ? experts : 1);
  const int bm = moe_pipelined_block_m(avg, wgmma, static_cast<int64_t>(2) * inter * hidden);
  if (!wgmma || avg <= (ws128 ? kMoeRowsModelMinAvgWs : kMoeRowsModelMinAvg) || sms < 1) return bm;
  return moe_rows_model(m, topk, experts, hidden, inter, 128, sms, ws128) <
                 moe_rows_model(m, topk, experts, hidden, inter, 64, sms)
             ? 128
             : 64;
}

// MoE block order of the pipelined tile: block bid of row_tiles x col_tiles runs row tile rt
// and column tile ct in raster groups of raster_rows row tiles (all column tiles of a group
// before the next group, row tiles fastest within it; the last group may be shorter). A
// bijection onto the tiles for raster_rows >= 1 (CPU-tested).
struct PipeTile {
  int rt, ct;
};
LOWBIT_HD PipeTile moe_raster_tile(int bid, int row_tiles, int col_tiles, int raster_rows) {
  const int per_group = raster_rows * col_tiles;
  const int grp = bid / per_group, rem = bid % per_group;
  const int left = row_tiles - grp * raster_rows;
  const int rows_here = raster_rows < left ? raster_rows : left;
  return {grp * raster_rows + rem % rows_here, rem / rows_here};
}

// Whether an align block of block_m rows runs on the pipelined tile rather than the decode
// tile's MoE modes, for experts of expert_elems weights (N x K of one expert of this GEMM):
// from 16 rows, except 16-row blocks of dense-sized experts (>= 16 Mi weights), where the
// decode tile wins as on dense weights at M <= 16 (round BB: Mixtral-8x7B M = 64, 16 rows per
// expert: 500 vs 540 us; DeepSeek-V2-Lite M = 128 at 5.8 Mi: 162 vs 195 on the pipelined tile).
inline bool moe_pipelined_block(int block_m, int64_t expert_elems) {
  if (block_m < 16) return false;
  return block_m > 16 || expert_elems < kMoeDecodeTileExpert;
}

}  // namespace lowbit::int4::kern
