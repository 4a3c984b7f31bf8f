// Launch planning of the decode GEMM on the MMA-tiled layout (decode_tile.cuh): block shape,
// split-K cluster size and row tiles from the problem size and the SM count. Host-only and
// free of CUDA so that the CPU tests check the measured choices (tests/cpu/int4/
// test_decode_plan.cpp); the measurements behind the thresholds are in
// docs/benchmarks/logs/int4_decode_experiments.md.
#pragma once

namespace lowbit::int4::kern {

constexpr int plan_ceil_div(int a, int b) { return (a + b - 1) / b; }

// Block shape and split-K cluster size per launch, from measurements on H200 (M = 1 and 16,
// the eight Llama-3 projections, every warps x splits pair; docs/int4-kernels-sessions.md). Warps
// stream best when the grid holds about one wave of them (4 blocks x 4 warps or 2 x 8 per
// SM): few units (column group x row tile) take 8-warp blocks in clusters of 2, a
// medium count 8-warp blocks alone, many units 4-warp blocks; 8-warp blocks in clusters of
// 4 or 8 were slower than in pairs on every shape at M = 1. `sms` scales the measured
// thresholds (132 SMs).
struct DecodeShape {
  int warps;   // 4 or 8
  int splits;  // cluster size along grid.x
};
inline DecodeShape decode_shape(int units, int nt, int sms) {
  const int few = (nt == 1 ? 132 : 96) * sms / 132, medium = 264 * sms / 132;
  if (units <= few) return {8, 2};
  if (units <= medium) return {8, 1};
  return {4, 1};
}

// K steps per fold window: 2 / 4 for G = 32 / 64, else the batch (G = 128, or one group:
// per-channel, the last window may be short).
constexpr int decode_window(int gsteps, int D) { return gsteps == 2 ? 2 : gsteps == 4 ? 4 : D; }

// Dense 8-row tiles at M <= 8: decode_shape(), except that in bf16 a unit count past its
// "few" that one wave of 4-warp blocks (4 per SM) holds three times over takes 4-warp blocks
// in split-K clusters of 3, whose ranks push their sums (decode_tile.cuh; session 17) instead
// of 8-warp blocks alone, which leave part of the SMs with two blocks and the rest with one;
// not with windows of 2 K steps (G = 32). Measured (session 17, rounds GA-GD, 1x H200,
// 70b.qkv: 160 groups, the one Llama-3 projection in that range): bf16 G = 128 M = 1 / 8 16.7
// / 18.5 us vs 19.6 / 21.3 for 8 warps alone (with remote-load sums 18.2 / 20.0; 8 warps in
// pairs 18.9 / 21.7, 4 in pairs 19.8 / 21.5, 4 in fours 20.7 / 23.6); G = 64 21.1 / 22.8 vs
// 23.0 / 25.3, per-channel 16.8 / 18.5 vs 19.6 / 21.2, asymmetric 17.2 / 19.0 vs 20.5 / 22.3;
// G = 32 35.9 / 38.1 vs 30.1 / 32.8. fp16, whose 8-warp blocks alone are faster than bf16's
// (17.6 us at M = 1: it unpacks with fewer instructions), lost: M = 1 / 2 / 4 / 8 17.6-18.2 /
// 18.6-19.0 / 19.9-20.3 / 22.9 vs 17.6 / 17.9 / 18.1 / 19.3 (rounds GB, GC, twice each).
//
// Few groups on a long K: 8-warp blocks in split-K clusters of 3 instead of pairs, where the
// clusters of 3 still hold at most one block per SM (3 units < sms) and each rank keeps a long
// K range: K >= 4096 (steps >= 256) for units <= sms / 6, K >= 8192 (steps >= 512) up to sms /
// 3. The pairs put 2 x units blocks on the SMs, each streaming 16 K bytes of its column group
// (K = 8192: 128 KB through one SM), so on few groups the grid's share of the SMs, not the
// copy bandwidth, sets the stream; a third rank puts the bytes on 1.5x the SMs, its clusters
// push their sums like the pairs (decode_tile.cuh), and the next launch starts after the first
// batches (dense_pdl_trigger: one block per SM). Measured (session 62, 1x H100, HEAD's CLI,
// LOWBIT_INT4_DECODE_WARPS=8 _SPLITS=3 _TRIGGER=1 against the plan, min of 3 alternated passes,
// bf16 G = 128, M = 1 / 4 / 8; docs/benchmarks/logs/session62_raw/): 70b.tp8.qkv (1280 x 8192,
// 20 groups) 0.78-0.81x (5.6 / 6.2 / 6.6 us), 70b.tp4.qkv (2560 x 8192, 40) 0.94-0.98x,
// 1024 x 8192 / 14336 / 28672 0.70-0.83x, 2048 x 8192 0.82-0.87x, 2048 x 14336 0.95-0.96x,
// 256 / 512 x 8192 0.77-0.78x, 1024 x 6144 0.75-0.79x, 512 / 1024 x 4096 0.91-0.97x; fp16
// alike. Not taken, slower: shorter K past sms / 6 groups (2048 x 4096 1.07-1.12x, 2304 x
// 3584 1.07x, 2048 x 2048 1.14-1.17x; 2048 x 6144 0.87-1.02x mixed), 44 groups (3 units = sms:
// 2816 x 14336 1.06x, 2816 x 4096 1.14-1.22x), and the pairs' shapes with more groups (8b.o,
// 64 groups, 1.01-1.09x; 70b.o / tp2.o / tp4.o / tp8.o / tp8.down 1.14-1.67x). As the plan (76b2a2c)
// against the pairs forced: 0.73-0.98x bf16 / fp16 G = 128, 0.74-0.95x G = 32 / 64, 0.75-0.99x
// per-channel / asymmetric
// (docs/benchmarks/gemm_few_groups_h100.md, gemm_few_groups_g_h100.md).
// units: 8-row units (8-row tiles x column groups).
constexpr bool few_units_long_k(int units, int steps, int sms) {
  return 3 * units < sms && steps >= (6 * units <= sms ? 256 : 512);
}
// Few groups on K >= 8192: 8-warp blocks in split-K clusters of 4 (since session 68, when the
// 8-warp 8-row blocks got a third push slot: decode_tile.cuh, decode_push_peers; before it rank 0
// of a cluster of 4 loaded the other ranks' sums, and the clusters lost to 3 on every shape),
// up to 7/16 x sms units (4 x units blocks: at most 7/4 blocks per SM, two fit), taking the
// shapes of the clusters of 3 above on K >= 8192 and the pairs' up to that bound. Their next
// launch starts after the first batches (dense_pdl_trigger). Measured (session 68, 1x H100, the
// binaries of exp/push4 with LOWBIT_INT4_DECODE_WARPS=8 _SPLITS=4 _TRIGGER=1 against the plan,
// min of 2 alternated passes, bf16 G = 128, M = 1 / 8 (and 4 on the first eight shapes);
// docs/benchmarks/logs/session68_raw/): 512 x 8192 0.77 / 0.79x, 1024 x 8192 0.82 / 0.79 / 0.76x,
// 1280 x 8192 (70b.tp8.qkv) 0.84 / 0.79 / 0.80x, 1024 x 14336 0.85 / 0.90x, 1536 x 8192 0.94 /
// 0.84x, 2048 x 8192 0.99 / 0.95 / 0.94x, 2048 x 14336 0.91 / 0.96x, 2560 x 8192 (70b.tp4.qkv)
// 0.88 / 0.87 / 0.85x, 2816 x 8192 0.86 / 0.86 / 0.88x, 2816 x 14336 0.87 / 0.86x, 3072 x 8192
// 0.87 / 0.90x, 3584 x 8192 0.93 / 0.94x, 3584 x 14336 0.99 / 0.95x. Not taken: a shorter K
// (1024 x 6144 1.04 / 1.00x, 2048 x 4096 1.07 / 1.04x, 2560 x 4096 / 6144 0.96-1.02x, 2048 x 6144
// 0.98 / 0.84x; 1024 x 4096 0.84x, one shape, the one clear win there) and 64 groups (8b.o
// 1.00-1.07x, 4096 x 6144 1.05 / 1.17x, 4096 x 8192 1.01x; 8b.down 0.97-1.03x, with the trigger at
// the start 0.94-0.99x), where two blocks stand on nearly every SM.
// clusters4: false for LOWBIT_INT4_DECODE_C4=0 (measurements: the plan before session 68).
constexpr bool few_units_k8192(int units, int steps, int sms) { return 16 * units <= 7 * sms && steps >= 512; }
inline DecodeShape dense_rows8_shape(int units, int gsteps, int steps, int sms, bool bf16, bool clusters4 = true) {
  const DecodeShape s = decode_shape(units, 1, sms);
  if (clusters4 && s.warps == 8 && s.splits == 2 && few_units_k8192(units, steps, sms)) return {8, 4};
  if (bf16 && s.warps == 8 && s.splits == 1 && 3 * units <= 4 * sms && decode_window(gsteps, 8) != 2) return {4, 3};
  if (s.warps == 8 && s.splits == 2 && few_units_long_k(units, steps, sms)) return {8, 3};
  // (Session 44 ran bf16 8b.qkv's 96 groups in 8-warp blocks alone, measured 0.98x / 0.95x the
  // pairs' time at M = 1 / 8 on an H200 when the pairs' 192 blocks let the next launch start at
  // once. Since x is requested two batches ahead (x_early, session 61) and with the pairs' trigger
  // after their first batches (dense_pdl_trigger), the pairs won on an H100: M = 1 / 2 / 4 / 8 7.6
  // / 7.9 / 8.3 / 9.0 vs 8.6 / 9.3 / 9.5 / 10.5 us alone, min of 3 alternated passes,
  // docs/benchmarks/logs/session61_raw/results_h100_qkv.tgz; not yet measured on an H200.)
  return s;
}

// Where the dense decode GEMM lets the next launch start (DecodeParams::pdl_trigger): 1 once
// its warps' first batches have landed, 0 at its start. A grid of at most one block per SM
// takes 1: the next launch's blocks would otherwise take each SM's second slot at once and
// stream their first batches against ours (session 9, round E, 1x H200, bf16: 8b.down M = 1 / 8
// 13.8 / 15.0 vs 16.1 / 18.2 us, 8b.o 6.7 / 7.1 vs 7.3 / 8.3); larger grids 0 (8b.qkv pairs,
// 192 blocks, M = 8 9.4 vs 9.8 then; 70b.qkv's 480 4-warp blocks: 21.7 vs 23.0 us at M = 1 on
// an H100 in session 61). Except bf16 8-warp 8-row pairs under 15/8 blocks per SM (8b.qkv's
// 192), which take 1 since session 61 (1x H100, min of 3 alternated passes, x_early on: M = 1
// / 2 / 4 / 8 7.6 / 7.9 / 8.3 / 9.0 vs 8.0 / 8.4 / 8.6 / 9.1 us; fp16's pairs lost 0.2 us at
// M = 1 / 2, 70b.o's and 70b.down's 256 pair blocks were within 1%), and the 8-warp 8-row
// clusters of 4 (few_units_k8192: up to 7/4 blocks per SM), which take 1 (session 68, 1x H100:
// at 40-56 groups, 160-224 blocks, 0.85-0.99x the plan with it, 0.86-1.02x with the trigger at
// the start, which was ahead on 4 of the 14 rows, by at most 0.015x).
// blocks: splits x row tiles x column groups; rows8: the 8-row tiles.
inline int dense_pdl_trigger(long long blocks, int sms, int warps, int splits, bool rows8, bool bf16) {
  if (blocks <= sms) return 1;
  if (rows8 && warps == 8 && splits == 4) return 1;  // few_units_k8192's clusters of 4 past one block per SM
  if (bf16 && rows8 && warps == 8 && splits == 2 && 8 * blocks < 15LL * sms) return 1;
  return 0;
}

// M = 9..16 with windows of 8 (where the plan would run 16-row tiles) on few column groups:
// two 8-row tiles per group in 8-warp blocks, {8, 3} or {8, 2}; {0, 0} where the 16-row tiles
// stay. units: 8-row units (2 x groups); steps: K / 16. The 16-row tiles have one push slot
// (decode_push_peers), so their clusters stop at 2, and on few groups the grid's share of the
// SMs sets the stream; the 8-row tiles re-read each word for the second row tile (from L2)
// and, in clusters of 3, push into two slots. On a short K the 16-row plan (staged x, 8-warp
// pairs) took 4.1-4.5 us at every K = 512..2048 measured up to 64 units, the 8-row pairs 3.1-4.1.
//  - Clusters of 3 up to sms / 4 units on K >= 4096 (steps >= 256) up to sms / 6 units and on
//    K >= 6144 past that (session 63's rule on K >= 8192, extended in session 64);
//  - pairs up to 3/8 x sms units on K >= 512, and up to sms / 2 units on K = 512..3072
//    (session 64): faster than clusters of 3 where 3 x units blocks would stand on most of the
//    SMs. On a short K the two are mixed (clusters of 3 ahead on 1024 x 3072 and 768 x 1024,
//    behind on 1024 / 1280 / 1536 / 2048 x 2048); the pairs beat the 16-row tiles on every
//    such row measured, so the rule takes them there (a finer rule wants more measurements).
// Measured on 1x H100 (132 SMs), bf16 G = 128, M = 9 / 12 / 16, x the 16-row plan's time.
// Session 63 (binaries of 83e6009, the 8-row tiles forced with LOWBIT_INT4_DECODE_ROWS16=0 (pairs)
// and with _WARPS=8 _SPLITS=3 _TRIGGER=1 (clusters of 3), min of 2-3 alternated passes;
// docs/benchmarks/gemm_rows8_m16_h100.md, logs/session63_raw/table_m16_bf16.md, table_m16b.md)
// and session 64 (binaries of 3cb0535, the same knobs, min of 2 passes; logs/session64_raw/):
//   units  weight                 clusters of 3   pairs
//   8-24   256-768 x 8192         0.64-0.76       0.82-0.94
//   32     1024 x 8192            0.79-0.82       0.93-0.99
//   32     1024 x 14336 / 28672   0.71-0.79       0.81-0.94
//   32     1024 x 6144            0.79-0.80       0.89-0.97
//   32     1024 x 4096            0.86-0.87       0.80-0.89   (pairs: K < 6144)
//   32     1024 x 3072            0.69-0.70       0.78-0.84   (pairs: K < 4096)
//   32     1024 x 2048 / 1024     0.74-0.92       0.73-0.85
//   16-24  512 x 2048, 768 x 1024 0.69-0.82       0.73-0.84
//   40     70b.tp8.qkv            0.93-0.99       0.875-0.93
//   40     1280 x 2048            0.99-1.02       0.83-0.87
//   48     1536 x 8192            0.99-1.06       0.93-0.97
//   48     1536 x 14336           -               1.00-1.01   (taken: within 1%)
//   48     1536 x 3072 / 2048     0.81-1.06       0.81-0.91
//   48     1536 x 1024 / 512      0.87-0.91       0.75-0.81
//   64     2048 x 1024-3072       1.07-1.10 (2048) 0.79-0.92  (pairs: K <= 3072)
//   64     2048 x 4096            -               0.96-1.03   (16-row tiles stay)
//   64     2048 x 8192 / 14336    0.96-1.12       0.93-1.05   (16-row tiles stay)
//   80     2560 x 2048            -               1.05-1.11   (16-row tiles stay)
//   80     70b.tp4.qkv            1.25-1.36       1.25-1.36
//   128    8b.o                   1.58-1.62       1.16-1.24
// As the plan against LOWBIT_INT4_DECODE_FEW8=0 (session 64, binaries of 3cb0535 with the rule
// before its short-K pairs, min of 3 passes bf16 / 2 fp16, per-channel, asymmetric;
// docs/benchmarks/gemm_rows8_few_groups_h100.md): 0.65-0.98x bf16 (1536 x 8192 0.92-0.97),
// fp16 alike but 1536 x 8192 at M = 12 (1.00-1.02x); 2048 x 8192 and 8b.o 0.995-1.009x. The
// short-K pairs as the plan (session 65, binaries of c358dcd, the same A/B, min of 3 passes bf16 /
// 2 fp16, per-channel, asymmetric; docs/benchmarks/gemm_rows8_shortk_h100.md): 0.72-0.90x on
// 768 / 1024 x 1024, 1024 x 2048 / 3584, 768 x 4096, 1536 x 512, 2048 x 1024 / 3072 in all four;
// 2048 x 4096 and 2560 x 2048 (16-row tiles stay) 0.996-1.004x.
// Not yet measured: K < 512, pairs on K = 3073..4095 past 32 units (1024 x 3584), and any of it
// on an H200 (132 SMs as the H100's).
constexpr DecodeShape rows16_few_groups_shape(int units, int steps, int sms) {
  if (steps < 32) return {0, 0};
  if (steps >= 256 && 4 * units <= sms && (6 * units <= sms || steps >= 384)) return {8, 3};
  if (8 * units <= 3 * sms || (2 * units <= sms && steps <= 192)) return {8, 2};
  return {0, 0};
}
// The rule where it applies: M = 9..16 on 16-row windows (m <= rows16_max, windows of 8), unless
// LOWBIT_INT4_DECODE_FEW8=0 (few_rows8 false); {0, 0} elsewhere. unshared_decode_plan takes
// its tiles, and dense_decode_plan keeps them from its block-shared x replacement.
constexpr DecodeShape few_groups_rows8_plan(int m, int groups, int gsteps, int steps, int sms, int rows16_max,
                                            bool few_rows8) {
  if (!few_rows8 || m <= 8 || m > 16 || m > rows16_max || decode_window(gsteps, 8) != 8) return {0, 0};
  return rows16_few_groups_shape(plan_ceil_div(m, 8) * groups, steps, sms);
}

// Row tiles of the dense decode GEMM. Up to M = 8: one 8-row tile. M = 9..32 with windows
// of 8 K steps (G = 128 or one group): 16-row tiles (one or two per column group) that
// unpack each weight word once for both 8-row halves (kRows16Deep: batches of 8 K steps, 3
// stages, 168 registers with 4 warps = 3 blocks/SM, ~194 with 8 warps = 1 block/SM) where
// dense_decode_plan() finds them faster, else 8-row tiles; G = 32 / 64 (whose 16-row tiles
// spill) always 8-row tiles, one block each, adjacent in launch order so that tiles of one
// column group share the weight through L2. M > 32 (forced paths only): kRows16 (batches
// of 4, 6 stages). rows16_max: the largest M on 16-row tiles (decode_tile.cuh passes 32, or
// what LOWBIT_INT4_DECODE_ROWS16_MAX says; LOWBIT_INT4_DECODE_ROWS16=0 passes 8: none).
// kRows16Shared: kRows16Deep's tile with block-shared x (DecodeCfg::XS): the block's warps
// stream adjacent column groups over one K range and read x from shared memory that cp.async
// fills once for all of them.
// kRows16Lean: kRows16Deep's 8-warp tile held to 128 registers (words read per K step, x half a
// batch ahead in one rolling register set; decode_tile.cuh), so that two blocks fit per SM.
// kRows16Staged: kRows16Deep's 8-warp tile with each batch's x rows bulk-copied into the warp's
// stage and read by ldmatrix (DecodeCfg::XW; 139-145 registers, one block per SM).
enum class DecodeTiles : int {
  kRows8 = 0,
  kRows16Deep = 1,
  kRows16 = 2,
  kRows16Shared = 3,
  kRows16Lean = 4,
  kRows16Staged = 5
};
struct DensePlan {
  DecodeTiles tiles;
  DecodeShape shape;
};
// Measured on H200 at M = 12 and 16 (the eight Llama-3 projections, 16-row tiles under
// every warps x splits pair, docs/benchmarks/logs/int4_decode_experiments.md): the grid
// wants to fill one wave of resident blocks without going over it. 16-row tiles: 8-warp
// blocks in clusters of 2 if that still fits one block per SM, else alone; then 4-warp
// blocks (3 per SM) in clusters of 2 or alone. Past one wave of 4-warp blocks, a 16-row
// block costs ~1.25x an 8-row block (70b.gate_up, 8b.gate_up) and whole waves decide:
// 16-row tiles only if 1.25 x their waves < the waves of the 8-row blocks (4 per SM). The
// same rule holds at M = 17..32 (two 16-row tiles per column group; measured at M = 24, 32).
// bf16: the activations' type (dense_rows8_shape); steps: K / 16.
// Lean 16-row tiles (two 8-warp blocks per SM, session 21, round KA, 1x H200, bf16, us at M =
// 12 / 16 against the deep tile's plan): past one wave at M = 12..16, 70b.gate_up 98.9 / 114.1
// vs 117.1 / 118.7; where one deep block per unit fits one wave but not two (u <= sms < 2u),
// lean blocks in clusters of 2 fill the SMs twice: faster where that puts blocks on more SMs
// (8b.qkv, 96 groups: 9.6 / 10.6 vs 10.5 / 10.9) or where each warp keeps a long K (70b.down,
// 14 batches per warp: 47.3 / 50.1 vs 52.2 / 53.5), slower otherwise (70b.o, 4 batches per
// warp: 18.9 / 19.5 vs 18.2 / 18.5). Alone (one lean block per SM) they lose to the deep tile
// everywhere (70b.down 64.8 / 67.5): the register bound costs without buying warps.
// few_rows8: the M = 9..16 rule below (LOWBIT_INT4_DECODE_FEW8=0 turns it off: measurements).
inline DensePlan unshared_decode_plan(int m, int groups, int gsteps, int steps, int sms, int rows16_max,
                                      bool bf16 = true, bool few_rows8 = true, bool clusters4 = true) {
  const bool rows16 = m > 8 && m <= rows16_max && decode_window(gsteps, 8) == 8;
  if (!rows16) {
    if (m <= 8) return {DecodeTiles::kRows8, dense_rows8_shape(groups, gsteps, steps, sms, bf16, clusters4)};
    const int nt = m <= 32 ? 1 : 2;
    return {nt == 1 ? DecodeTiles::kRows8 : DecodeTiles::kRows16,
            decode_shape(plan_ceil_div(m, 8 * nt) * groups, nt, sms)};
  }
  // M = 9..16 on few groups: two 8-row tiles per group (rows16_few_groups_shape) instead of
  // 16-row tiles.
  const DecodeShape few = few_groups_rows8_plan(m, groups, gsteps, steps, sms, rows16_max, few_rows8);
  if (few.warps != 0) return {DecodeTiles::kRows8, few};
  const int u = plan_ceil_div(m, 16) * groups;  // (16-row tile, column group) units
  // 8-warp deep blocks: x staged (kRows16Staged) at every M = 9..32 since session 61. Session 22
  // (round LC, 1x H200, us at M = 9 / 12 / 16, staged vs x from L2) took staged x only where a
  // warp streams <= 4 batches of 8 K steps: 8b.o (pairs, 2 batches per warp) bf16 6.8 / 7.0 /
  // 7.2 vs 7.4 / 7.8 / 8.1, fp16 6.7 / 6.9 / 7.1 vs 7.4 / 7.7 / 8.1; 8b.down (pairs, 7) 16.0 /
  // 16.8 / 17.8 vs 16.4 / 17.0 / 17.3; 70b.o (alone, 8) 17.4 / 18.3 / 19.4 vs 17.8 / 18.1 /
  // 18.3. At session 61's kernels (x two batches ahead) staged x won on every such shape on an
  // H100 (bf16, min of 3 alternated passes, LOWBIT_INT4_DECODE_XW=2 vs that plan, us at M = 9 /
  // 12 / 16): 8b.down 16.9 / 17.7 / 18.7 vs 21.3 / 20.8 / 20.5, 70b.o 18.0 / 19.1 / 20.3 vs
  // 22.1 / 22.5 / 22.8, 70b.tp4.down 0.82-0.87x, 70b.tp8.gate_up 0.81-0.89x, 70b.tp2.down
  // 0.89-0.94x (docs/benchmarks/gemm_staged_h100.md); at M = 17..32 (two 16-row tiles per column
  // group, min of 2 passes) 8b.down M = 17 / 24 / 32 28.9 / 29.0 / 29.9 vs 33.4 / 33.7 / 34.0
  // (gemm_staged_m32_h100.md). Not yet measured again on an H200. The lean shapes' tiles stay:
  // run deep with staged x they were 15-34% slower in session 22 and 1.04-1.24x in session 61
  // (70b.down, 70b.gate_up, 8b.qkv, 70b.tp2.qkv at M = 9..16).
  auto deep8 = [&](int splits) { return DensePlan{DecodeTiles::kRows16Staged, {8, splits}}; };
  if (2 * u <= sms) return deep8(2);
  if (u <= sms) {
    const int lean_warp_batches = steps / 8 / (2 * 8);  // batches of 8 K steps per warp, clusters of 2
    if (4 * u <= 3 * sms || lean_warp_batches >= 8) return {DecodeTiles::kRows16Lean, {8, 2}};
    return deep8(1);
  }
  if (2 * u <= 3 * sms) return {DecodeTiles::kRows16Deep, {4, 2}};
  const int u8 = plan_ceil_div(m, 8) * groups;
  // 4-warp 16-row blocks alone, under one wave: slower than 8-row blocks that also fit one
  // wave (M = 24 / 32: 70b.o 43 vs 39-40 us, 70b.down 128 vs 124 us), faster when those do not.
  if (u <= 3 * sms) {
    if (u8 <= 4 * sms) return {DecodeTiles::kRows8, decode_shape(u8, 1, sms)};
    return {DecodeTiles::kRows16Deep, {4, 1}};
  }
  const int waves16 = plan_ceil_div(u, 3 * sms), waves8 = plan_ceil_div(u8, 4 * sms);
  // Past one wave, 16-row tiles alone: lean 8-warp blocks (two per SM) at M = 9..16, 4-warp
  // deep blocks (three per SM) at M = 17..32. Lean since session 21 (70b.gate_up, bf16, us,
  // rounds KB / KB2-3: M = 9 / 10 / 11 98.5 / 95.8 / 99.7 vs 111.6 / 114.0 / 117.5 for the
  // 4-warp deep blocks; M = 12 / 16 above). The deep tiles before that, with the staged scales
  // (session 9, 70b.gate_up, 8 vs 4 warps, bf16 / fp16): M = 12 120.8 / 115.9 vs
  // 123.6 / 121.0 us, M = 16 121.3 / 117.6 vs 132.8 / 128.9; M = 9 (rows 10-16 re-read row 0:
  // cheap x) 119.3 vs 111.0 and M = 32 (two tiles per group) 230 vs 192.5 (8b.gate_up 72.7 vs 65.0).
  if (5 * waves16 < 4 * waves8)
    return m <= 16 ? DensePlan{DecodeTiles::kRows16Lean, {8, 1}} : DensePlan{DecodeTiles::kRows16Deep, {4, 1}};
  return {DecodeTiles::kRows8, decode_shape(u8, 1, sms)};
}

// Block-shared x, one 16-row tile (M = 9..16): 4-warp blocks (3 per SM) in split-K clusters
// that fill one wave of them, each rank at least 2 batches of 8 K steps. steps: K / 16.
inline DensePlan shared_x_plan(int groups, int steps, int sms) {
  const int units = plan_ceil_div(groups, 4);
  int splits = 3 * sms / units;
  splits = splits < 1 ? 1 : splits > 8 ? 8 : splits;
  while (splits > 1 && steps / 8 / splits < 2) --splits;
  return {DecodeTiles::kRows16Shared, {4, splits}};
}
// The plan: unshared_decode_plan(), except at M = 9..16 with windows of 8 where that takes
// 8-row tiles or 4-warp 16-row blocks in clusters of 2, which block-shared x tiles beat
// (session 10, 1x H200, bf16, M = 16, round D: 8b.gate_up 31.6 vs 36.1 us, 70b.qkv 22.9 vs
// 26.5; M = 12 in round C, same sign). Where it takes 8-warp 16-row blocks (x a whole batch
// ahead in registers) the shared tiles lost: 70b.gate_up 134.5 vs 120.1, 70b.down 66.8 vs 55.3,
// 8b.down 26.6 vs 18.8, 70b.o 21.8 vs 18.6, 8b.qkv 12.9 vs 10.9 (8b.o 9.4 vs 9.4).
// xshared: 1 as above; 0 unshared_decode_plan() alone, 2 shared tiles wherever they can run
// (LOWBIT_INT4_DECODE_XSHARED=0 / 2: measurements and tests).
inline DensePlan dense_decode_plan(int m, int groups, int gsteps, int steps, int sms, int rows16_max,
                                   int xshared = 1, bool bf16 = true, bool few_rows8 = true,
                                   bool clusters4 = true) {
  const DensePlan base = unshared_decode_plan(m, groups, gsteps, steps, sms, rows16_max, bf16, few_rows8, clusters4);
  const bool rows16 = m > 8 && m <= 16 && m <= rows16_max && decode_window(gsteps, 8) == 8;
  const bool four_warp_pairs =
      base.tiles == DecodeTiles::kRows16Deep && base.shape.warps == 4 && base.shape.splits == 2;
  // (Not the 8-row tiles on few groups: unshared_decode_plan's rule, rows16_few_groups_shape,
  // measured against the 16-row tiles it replaces.)
  const bool rows8_few_groups = few_groups_rows8_plan(m, groups, gsteps, steps, sms, rows16_max, few_rows8).warps != 0;
  if (rows16 && (xshared == 2 ||
                 (xshared == 1 && ((base.tiles == DecodeTiles::kRows8 && !rows8_few_groups) || four_warp_pairs))))
    return shared_x_plan(groups, steps, sms);
  return base;
}

// Row tiles of the dense decode grid (grid.y): 8-row tiles, else 16-row ones.
inline int decode_row_tiles(DecodeTiles tiles, int m) { return plan_ceil_div(m, tiles == DecodeTiles::kRows8 ? 8 : 16); }

// The copy of x that the dense 16-row tiles read (DecodeParams::x_steps, DecodeCfg::XP;
// decode_x_steps.cu): 16-row tiles one after another, within a tile K step by K step, within a
// step the 16 rows' 16 elements: element (r, k) at ((r / 16 * K / 16 + k / 16) * 16 + r % 16) *
// 16 + k % 16. The 8 rows of a row tile in one K step are then 256 contiguous bytes (2 cache
// lines for one load instruction of the tile instead of 8). Rows past M up to the tile's end
// are zeros: ceil(M / 16) * 16 * K elements.
constexpr long long decode_x_steps_index(int r, int k, int K) {
  return ((static_cast<long long>(r / 16) * (K / 16) + k / 16) * 16 + r % 16) * 16 + k % 16;
}
constexpr long long decode_x_steps_bytes(int m, int k) { return static_cast<long long>(plan_ceil_div(m, 16)) * 16 * k * 2; }
// The largest M the plan copies x for (its 16-row tiles end there), and the weight size (N x
// K elements) from which the copy pays: one more launch of ~1-1.5 us on the critical path
// against loads of 2 lines instead of 8 (session 23, round MA, 1x H200, bf16, us, copy vs none
// in the same binaries: 70b.gate_up (470 Mi elements) M = 12 / 16 / 32 92.3 / 92.6 / 180.8 vs
// 103.1 / 113.7 / 201.0, 70b.down M = 16 46.0 vs 50.1, 8b.gate_up M = 32 52.1 vs 64.1, 70b.qkv
// (80 Mi) M = 32 41.8 vs 48.7; smaller weights lost: 70b.o (64 Mi) M = 12 19.6 vs 18.7, 8b.down
// (56 Mi) 18.1 vs 17.4, 8b.qkv (24 Mi) 11.0 vs 9.6).
constexpr int kDecodeXStepsMinM = 9, kDecodeXStepsMaxM = 32;
constexpr long long kDecodeXStepsMinWeight = 80LL << 20;
// Whether the dense decode GEMM copies x first: for the 16-row tiles that read x from L2 (deep
// and lean; not the block-shared or staged x tiles, which copy x into shared memory, nor the
// 8-row tiles, measured slower at M = 2..8 with the copy). mode: LOWBIT_INT4_DECODE_XSTEPS, 0
// never, 2 for every such tile, 1 the plan: weights of >= kDecodeXStepsMinWeight elements,
// and not lean tiles in a grid of at most one block per SM (splits x row tiles x column
// groups). Those let the next kernel launch once their first batches have landed
// (DecodeParams::pdl_trigger) and leave each SM a second slot; with the copy launched in
// between they ran ~5 us slower (round MC, 1x H200, bf16, M = 9..16, forced: 70b.o lean alone
// 25.9 vs 20.1 us, 8b.down lean pairs 23.4 vs 18.5; so did 8-row tiles in pairs at M = 2..8 in
// round MA, 8b.down 18.9 vs 13.5), while deep tiles (one block per SM) paid ~1 us. Our reading,
// not verified: the next launch's blocks take those second slots and stream their first
// batches while this one still runs.
inline bool decode_x_steps_planned(const DensePlan& plan, int m, int groups, long long n_times_k, int sms, int mode) {
  if (mode == 0 || m < kDecodeXStepsMinM || m > kDecodeXStepsMaxM) return false;
  if (plan.tiles != DecodeTiles::kRows16Deep && plan.tiles != DecodeTiles::kRows16Lean) return false;
  if (mode == 2) return true;
  const long long blocks = static_cast<long long>(plan.shape.splits) * decode_row_tiles(plan.tiles, m) * groups;
  return n_times_k >= kDecodeXStepsMinWeight && !(plan.tiles == DecodeTiles::kRows16Lean && blocks <= sms);
}

// MoE GEMM2 (down, K = the intermediate size) in the wide mode (decode_tile.cuh,
// DecodeParams::wide: one warp per 64-column group over the whole K, 4 groups per 4-warp
// block) instead of a block's 4 warps splitting one group's K. moe_down_wide_blocks is that wide
// grid: `blocks` is the align blocks that can hold rows (min(max_padded / BM, M * topk)), `parts`
// their 8/16-row parts, `groups` = H / 64; moe_down_wide takes it as `down_blocks`. Measured on
// H200 (session 8, docs/int4-kernels-sessions.md): wide wins once its blocks fill two per SM with
// I <= 1536 (Qwen3-30B-A3B TP1 M = 8..128, DeepSeek-V2-Lite M >= 8), and at I <= 512 even below
// that (split warps would get less than one batch: Qwen3 TP2 M = 1); with few blocks it starves
// the memory system (Qwen3 TP1 M = 1: 29.8 vs 21.7 us) and with a long K it loses everywhere
// (Mixtral).
inline int moe_down_wide_blocks(int blocks, int experts, int parts, int groups) {
  return (blocks < experts ? blocks : experts) * parts * plan_ceil_div(groups, 4);
}
inline bool moe_down_wide(int k, int down_blocks, int sms) {
  return k <= 1536 && (k <= 512 || down_blocks >= 2 * sms);
}

// MoE GEMM1 (gate / up) on 8-row parts: decode_shape(), except that 8-warp pairs that would take
// nearly both block slots of every SM (2 x units > 7/4 x SMs) run as 8-warp blocks alone, one per
// SM, when GEMM2 runs wide in a grid of at most one block per SM (`down_wide`, moe_down_wide or its
// knob; `down_blocks`, moe_down_wide_blocks): GEMM2 launches early (PDL) and those few wide blocks
// (one warp per 64-column group over the whole K, no second wave behind them) then find no slot to
// request their weights from until GEMM1's blocks retire. Measured (session 47, 1x H200, min of 3
// alternated passes, GEMM1 forced to 8-warp blocks alone against the pairs): Qwen3.5-35B-A3B M = 2
// (128 units, GEMM2 wide in 128 blocks) 0.858x (25.4 us in pairs); GEMM2's wide mode off instead
// 0.860x, both GEMMs alone 0.848x (H100, session 46: 0.857x / 0.838x). Pairs that leave room stay:
// Qwen3-30B-A3B TP2 M = 2 (96 units, wide) alone 1.143x, TP1 M = 1 (96, not wide) 1.107x,
// DeepSeek-V2-Lite TP2 M = 1 (66) 1.093x; and so do full pairs before a GEMM2 that is not wide:
// DeepSeek-V2-Lite M = 1 (132 units) 0.990x, its TP2 share at M = 2 (132) 1.018x. Session 48 (1x
// H100, min of 5 alternated passes, the rule without the grid bound against no rule): Qwen3.5 M = 2
// 0.840x, but the Qwen3-235B-A22B TP8 share (128x4096x192x8) at M = 5 (120 units, GEMM2 wide in 640
// blocks) 1.107x and DeepSeek-V3 TP8 (256x7168x256x8) at M = 4 (128 units, 896 wide blocks) 1.034x:
// a GEMM2 of several waves hides its first wave behind GEMM1's tail either way, and GEMM1's longer
// K (4096 / 7168 against 2048) wants the pairs; hence the bound on GEMM2's grid.
inline DecodeShape moe_gate_up_shape(int units, bool down_wide, int down_blocks, int sms) {
  const DecodeShape s = decode_shape(units, 1, sms);
  if (down_wide && down_blocks <= sms && s.warps == 8 && s.splits == 2 && 8 * units > 7 * sms) return {8, 1};
  return s;
}

// MoE GEMMs of large experts on 8-row parts: where decode_shape() takes 4-warp blocks past one wave
// of them (units > 4 x SMs), 8-warp blocks alone, when the GEMM's expert weight (N x K) has at least
// kMoeLargeExpertElems elements: half the K range per warp, two blocks per SM instead of four (our
// reading of why it pays only on long, many-unit streams, not verified by a profile). Measured
// (session 52, 1x H100, bf16, min of 3 alternated passes, GEMM1 alone in 8-warp blocks / both GEMMs,
// time over the plan's, M = 4 / 8 / 12 / 16): 128x4096x1408x8 (w13 11 Mi) 0.915 / 0.970 / 1.004 /
// 0.996, 128x4096x1536x8 0.926 / 0.957 / 0.984 / 0.981, Mixtral-8x7B 0.975 / 0.969 / 0.975 / 0.978
// (GEMM2's 512 units stay 4-warp: both 0.961-0.984), 8x6144x16384x2 GEMM1 0.994-0.997 and both 0.924
// / 0.927 / 0.959 / 0.964 (its GEMM2's 768 units); small experts lose: 128x4096x384x8 (3 Mi) 1.137 /
// 1.027 / 1.027 at M = 8 / 12 / 16, Qwen3-30B-A3B (3 Mi) 1.069 at M = 4, 1.026 at 16,
// DeepSeek-V2-Lite (5.5 Mi) 1.021 / 1.026 at M = 4 / 12 (session 14 on an H200: Mixtral 4-5% faster
// with both GEMMs in 8-warp blocks, the small experts 0-17% slower). The rule against
// LOWBIT_INT4_MOE_LARGE_WARPS=0 in the same binary (session 52, 1x H100, min of 3 alternated passes,
// M = 2..16, logs/session52_raw/moe_large_h100.md): bf16 0.880-1.008x, fp16 0.905-1.007x (the most
// at M = 3..8, e.g. 128x4096x1536x8 M = 3 104.2 vs 118.4 us; M = 2 0.986-1.007x).
// Only to M = 16, the measured range: the session 52 tables at M = 32 / 128 (8-row parts, another H100
// than the plan's baseline, so ~2% apart everywhere) had 128x4096x1408x8 1.032 / 1.079x and
// 128x4096x1536x8 1.021 / 1.053x the time before the rule, Mixtral-8x7B 1.087x at M = 32.
constexpr long long kMoeLargeExpertElems = 8LL << 20;
constexpr int kMoeLargeExpertMaxM = 16;
inline DecodeShape moe_large_expert_shape(DecodeShape s, int m, int units, long long expert_elems, int sms) {
  if (m <= kMoeLargeExpertMaxM && expert_elems >= kMoeLargeExpertElems && s.warps == 4 && s.splits == 1 &&
      units > 4 * sms)
    return {8, 1};
  return s;
}

}  // namespace lowbit::int4::kern
