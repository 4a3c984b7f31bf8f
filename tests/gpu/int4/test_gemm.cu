// INT4 dequantization (bit-exact vs the CPU contract) and dense W4A16 GEMM (vs an fp64
// reference with stated tolerances), every layout, group size, sym/asym, fp16/bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <tuple>

#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/decode_plan.h"
#include "kernels/int4/internal.h"
#include "lowbit/int4/kernels.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/expect_bits.h"
#include "tests/gpu/int4/gpu_buffers.h"

namespace lowbit::int4 {
namespace {

using testing::canon_dequant_bits;
using testing::DevBuf;
using testing::DevWeights;
using testing::download;
using testing::expect_same_bits_all_written;
using testing::random_kpacked;
using testing::upload;

std::vector<uint16_t> random_act(size_t n, DType t, uint32_t seed) { return testing::random_activations(n, t, seed); }

struct DqCase {
  int e, n, k, g;
  bool sym;
  DType act;
  float scale_mag;
};

class Int4Dequant : public ::testing::TestWithParam<DqCase> {};

TEST_P(Int4Dequant, BitExactVsCpuContract) {
  const DqCase c = GetParam();
  WeightShape s{c.e, c.n, c.k, c.g, c.sym, c.act};
  KPackedWeights kp = random_kpacked(s, 99u + c.n + c.k, c.scale_mag);
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(kp, &kw).ok());
  DevWeights dw(kw);
  const size_t total = static_cast<size_t>(c.e) * c.n * c.k;
  DevBuf out(total * 2);
  ASSERT_EQ(cudaMemset(out.p, 0xFF, total * 2), cudaSuccess);  // poison
  Status st = dequantize(dw.view, out.as<uint16_t>(), nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto got = download<uint16_t>(out.p, total);
  size_t bad = 0;
  for (int e = 0; e < c.e; ++e)
    for (int n = 0; n < c.n; ++n)
      for (int k = 0; k < c.k; ++k) {
        const uint16_t want = canon_dequant_bits(kp, e, n, k);
        const uint16_t g = got[(static_cast<size_t>(e) * c.n + n) * c.k + k];
        if (g != want && bad++ < 5)
          ADD_FAILURE() << "e=" << e << " n=" << n << " k=" << k << " got 0x" << std::hex << g << " want 0x" << want;
      }
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Int4Dequant,
    ::testing::Values(DqCase{2, 24, 128, 32, false, DType::kBF16, 0.02f}, DqCase{1, 64, 256, 128, true, DType::kF16, 0.02f},
                      DqCase{2, 16, 96, kPerChannel, false, DType::kBF16, 0.02f},
                      DqCase{1, 20, 64, 64, false, DType::kF16, 0.02f},       // K-packed fallback
                      DqCase{1, 128, 96, 32, false, DType::kBF16, 0.02f},     // MMA-tiled, asym
                      DqCase{1, 192, 64, kPerChannel, true, DType::kF16, 0.02f},
                      DqCase{1, 32, 64, 32, false, DType::kF16, 3e-6f},        // fp16 subnormal products
                      DqCase{1, 32, 64, 32, false, DType::kF16, 6000.f},       // fp16 overflow to inf
                      DqCase{1, 32, 64, 32, true, DType::kBF16, 1e-38f}));     // bf16 subnormals

// ---- GEMM -------------------------------------------------------------------------------

struct GemmCase {
  int m, n, k, g;
  bool sym;
  DType act;
  GemmPath path = GemmPath::kAuto;  // forced paths: Forced* instantiations below
  int layout = -1;                   // forced kernel layout (KernelLayoutKind); -1: the shape's default
};

// The dense decode plan gemm() takes for this MMA-tiled weight at M rows on this device, without
// the LOWBIT_INT4_DECODE_* knobs (tests that check which tiles their cases reach).
kern::DensePlan default_decode_plan(const WeightShape& s, int m) {
  const int gsteps = (s.group_len() < s.k ? s.group_len() : s.k) / 16;
  return kern::dense_decode_plan(m, s.n / 64, gsteps, s.k / 16, kern::current_sm_count(), 32, 1, s.act == DType::kBF16);
}

std::string case_name(const ::testing::TestParamInfo<GemmCase>& i) {
  const GemmCase& c = i.param;
  std::ostringstream os;
  os << "M" << c.m << "_N" << c.n << "_K" << c.k << "_G";
  if (c.g < 0)
    os << "pc";
  else
    os << c.g;
  os << (c.sym ? "_sym_" : "_asym_") << dtype_name(c.act);
  if (c.path != GemmPath::kAuto) os << "_" << gemm_path_name(c.path);
  if (c.layout >= 0) os << "_" << (c.layout == 0 ? "npacked" : c.layout == 1 ? "kpacked" : "tiled");
  return os.str();
}

// Weights are costly to build for the large shapes; share them across M.
struct HostWeights {
  KPackedWeights kp;
  KernelWeights kw;
  std::vector<float> wf;  // dequantized [N, K] as float (exact values of the act dtype)
};
const HostWeights& weights_for(const WeightShape& s, int layout) {
  static std::map<std::tuple<int, int, int, bool, int, int>, std::unique_ptr<HostWeights>> cache;
  auto key = std::make_tuple(s.n, s.k, s.group_size, s.symmetric, static_cast<int>(s.act), layout);
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<HostWeights>();
    slot->kp = random_kpacked(s, 7u * s.n + 13u * s.k + static_cast<uint32_t>(s.group_size + 1));
    const Status st = repack_for_kernels(slot->kp, &slot->kw, layout);
    EXPECT_TRUE(st.ok()) << st.to_string();
    slot->wf.resize(static_cast<size_t>(s.n) * s.k);
    for (int n = 0; n < s.n; ++n)
      for (int k = 0; k < s.k; ++k)
        slot->wf[static_cast<size_t>(n) * s.k + k] = half_bits_to_float(s.act, canon_dequant_bits(slot->kp, 0, n, k));
  }
  return *slot;
}

class Int4Gemm : public ::testing::TestWithParam<GemmCase> {};

// Tolerances (why): the GPU accumulates in fp32 in a different order than the fp64
// reference and rounds the output once to the act dtype. Per element we allow half an
// output ulp-ish (2^-8 bf16, 2^-11 fp16 relative) plus 8 * sqrt(K) * 2^-24 * sum|x w|
// (fp32 accumulation, random-walk growth). The reference multiplies by the contract's
// dequantized weights (rounded to the act dtype); the MMA-tiled decode kernel applies the
// group scale to fp32 sums of the exact integers (q - z), i.e. the unrounded weight, so we
// also allow the weight rounding: u_w * min(6 sqrt(sum (x w)^2), sum |x w|) with u_w = 2^-8
// (bf16) / 2^-11 (fp16) (random rounding errors: ~10 sigma; never more than the worst case).
// Globally rel-L2 < 5e-3 (bf16) / 1e-3 (fp16).
TEST_P(Int4Gemm, MatchesFp64Reference) {
  const GemmCase c = GetParam();
  WeightShape s{1, c.n, c.k, c.g, c.sym, c.act};
  const HostWeights& hw = weights_for(s, c.layout);
  if (c.layout >= 0) ASSERT_EQ(static_cast<int>(hw.kw.kind), c.layout);
  DevWeights dw(hw.kw);
  auto x = random_act(static_cast<size_t>(c.m) * c.k, c.act, 31u * c.m + c.k);
  DevBuf dx = upload(x);
  DevBuf dy(static_cast<size_t>(c.m) * c.n * 2);
  ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // NaN poison
  size_t ws_bytes = 0;
  ASSERT_TRUE(gemm_workspace_size(s, c.m, &ws_bytes, c.path).ok());
  DevBuf ws(ws_bytes);
  if (ws_bytes) ASSERT_EQ(cudaMemset(ws.p, 0xFF, ws_bytes), cudaSuccess);
  GemmArgs a;
  a.x = dx.p;
  a.y = dy.p;
  a.m = c.m;
  a.path = c.path;
  Status st = gemm(a, dw.view, ws.p, ws_bytes, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto y = download<uint16_t>(dy.p, static_cast<size_t>(c.m) * c.n);

  // Reference on a sample of rows and columns for the large shapes (all of them when small; at
  // most 256 columns in full, so that a case of one or a few rows still sums its rel-L2 over
  // enough outputs: N = 192 at M = 1 sampled every 61st column had 5, and one output near a
  // cancellation set the whole statistic).
  std::vector<int> rows, cols;
  for (int m = 0; m < c.m; m += (c.m > 64 ? 17 : 1)) rows.push_back(m);
  if (c.m > 64) rows.push_back(c.m - 1);
  for (int n = 0; n < c.n; n += (c.n > 256 ? 61 : 1)) cols.push_back(n);
  if (c.n > 256) cols.push_back(c.n - 1);
  const double rel_out = c.act == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
  const double rel_l2_max = c.act == DType::kBF16 ? 5e-3 : 1e-3;
  double err2 = 0, ref2 = 0;
  int bad = 0;
  for (int m : rows)
    for (int n : cols) {
      double ref = 0, mag = 0, sq = 0;
      for (int k = 0; k < c.k; ++k) {
        const double t = static_cast<double>(half_bits_to_float(c.act, x[static_cast<size_t>(m) * c.k + k])) *
                         hw.wf[static_cast<size_t>(n) * c.k + k];
        ref += t;
        mag += std::fabs(t);
        sq += t * t;
      }
      const double got = half_bits_to_float(c.act, y[static_cast<size_t>(m) * c.n + n]);
      const double u_w = c.act == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      const double tol = rel_out * std::fabs(ref) + 8.0 * std::sqrt(static_cast<double>(c.k)) * std::ldexp(1.0, -24) * mag +
                         u_w * std::min(6.0 * std::sqrt(sq), mag);
      if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "m=" << m << " n=" << n << " got " << got << " ref " << ref << " tol " << tol;
      err2 += (got - ref) * (got - ref);
      ref2 += ref * ref;
    }
  EXPECT_EQ(bad, 0);
  ASSERT_GT(ref2, 0.0);  // the test must not pass on zeros
  EXPECT_LT(std::sqrt(err2 / ref2), rel_l2_max);
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> v;
  for (int n : {8, 24, 20, 4096})
    for (int k : {128, 4096})
      for (int g : {32, 64, 128, kPerChannel})
        for (bool sym : {true, false})
          for (DType t : {DType::kF16, DType::kBF16}) {
            // Big weights: cover every G/sym/dtype at a few M; the rest at all M.
            const bool big = n == 4096 && k == 4096;
            if (big && (sym == (t == DType::kF16)) && g != 128) continue;
            for (int m : {1, 3, 16, 64, 128, 1000}) v.push_back({m, n, k, g, sym, t});
          }
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, Int4Gemm, ::testing::ValuesIn(gemm_cases()), case_name);

// Each N-packed path forced at moderate M (kAuto reaches the cuBLAS path only from
// kDequantMinM, the tiled kernel never): every G, sym/asym, both dtypes.
std::vector<GemmCase> forced_cases() {
  std::vector<GemmCase> v;
  for (int g : {32, 64, 128, kPerChannel})
    for (bool sym : {true, false})
      for (DType t : {DType::kF16, DType::kBF16}) {
        for (int m : {1, 7, 64}) v.push_back({m, 24, 128, g, sym, t, GemmPath::kDequantCublas});
        v.push_back({96, 4096, 4096, g, sym, t, GemmPath::kDequantCublas});
        if (g == 32 || g == kPerChannel) v.push_back({130, 24, 96, g, sym, t, GemmPath::kDequantCublas});  // K % 64 == 32
        v.push_back({200, 24, 128, g, sym, t, GemmPath::kTiled});
        v.push_back({256, 4096, 4096, g, sym, t, GemmPath::kSkinny});
        // The same dense weight in the N-packed layout (the previous decode kernel) and in
        // the MMA-tiled layout at the M where the decode kernels switch row tiles.
        for (int m : {1, 9, 33})
          v.push_back({m, 4096, 4096, g, sym, t, GemmPath::kAuto, static_cast<int>(KernelLayoutKind::kNPackedInterleaved)});
        for (int m : {8, 16, 17}) v.push_back({m, 192, 4096, g, sym, t, GemmPath::kSkinny});
        // Few column groups on a long K (dense_rows8_shape): 3 groups of 520 K steps at M = 1 / 6
        // in 8-warp 8-row blocks, split-K clusters of 4 whose ranks push their sums (session 68);
        // 65 batches of 8 K steps, so the ranks stream 16 / 16 / 16 / 17 of them and the warps
        // unequal shares. On 392 K steps (K = 6272, 49 batches) clusters of 3 (session 62; ranks
        // of 16 / 16 / 17). At M = 12 / 16 two 8-row tiles per group in clusters of 3 (session 63;
        // at M = 9..16 G = 64 takes the 8-row plan of decode_shape and G = 32 the pipelined
        // kernel: tiled_auto_path_measured).
        for (int m : {1, 6, 12, 16}) v.push_back({m, 192, 8320, g, sym, t});
        for (int m : {1, 6}) v.push_back({m, 192, 6272, g, sym, t});
        // ... and in 8-warp pairs for 20 / 24 groups at M = 12 / 16 (rows16_few_groups_shape,
        // session 64; K = 4224: 33 batches, ranks of 16 / 17) and for 32 groups on a short K
        // at M = 11 (K = 2176: 17 batches, ranks of 8 / 9).
        v.push_back({12, 1280, 4224, g, sym, t});
        v.push_back({16, 1536, 4224, g, sym, t});
        v.push_back({11, 2048, 2176, g, sym, t});
      }
  // Dense decode at M = 9..16 (dense_decode_plan; block-shared x unless
  // LOWBIT_INT4_DECODE_XSHARED=0): 16-row tiles under each block shape of the unshared
  // plan (100 / 160 / 300 column groups: 8 warps alone, 4 warps in pairs, 4 alone; 896: lean
  // 8-warp blocks past one wave at M = 16, 4 warps at M = 24 below) and the 8-row fallback (448
  // groups); tail batches (per-channel, K = 1120 / 1056: 70 / 66 K steps, batches of 8 and a
  // tail of 6 / 2; the layout is forced so that a K the MMA-tiled layout cannot hold fails
  // the test instead of silently taking the K-packed kernel); G = 64 keeps 8-row tiles.
  constexpr int kTiled = static_cast<int>(KernelLayoutKind::kMmaTiled);
  for (DType t : {DType::kF16, DType::kBF16}) {
    const bool sym = t == DType::kF16;
    for (int n : {6400, 10240, 19200, 28672, 57344}) v.push_back({16, n, 1024, 128, sym, t});
    v.push_back({12, 6400, 1120, kPerChannel, !sym, t, GemmPath::kAuto, kTiled});
    v.push_back({13, 10240, 1056, kPerChannel, sym, t, GemmPath::kAuto, kTiled});
    v.push_back({9, 4096, 4096, 64, !sym, t});
    // Lean 16-row tiles in split-K pairs (kRows16Lean; the plan takes them for 96 groups on
    // 132 SMs, LOWBIT_INT4_DECODE_LEAN=2 for every 8-warp 16-row case above): x rolled half a
    // batch ahead across tail batches of 6 / 2 K steps, and warps without a batch.
    v.push_back({12, 6144, 1120, kPerChannel, !sym, t, GemmPath::kAuto, kTiled});
    v.push_back({13, 6144, 1056, kPerChannel, sym, t, GemmPath::kAuto, kTiled});
    // Staged x (kRows16Staged; the plan takes it for every 8-warp deep tile, M = 9..32, since
    // session 61; LOWBIT_INT4_DECODE_XW=0 runs them from L2): x rows bulk-copied with the
    // weight batches, rows past M never copied (M = 12 / 13 / 9), tail batches of 6 / 2 K
    // steps and warps without a batch, G = 64 windows refused (8-row tiles instead).
    v.push_back({12, 4096, 1120, kPerChannel, !sym, t, GemmPath::kAuto, kTiled});
    v.push_back({13, 4096, 1056, kPerChannel, sym, t, GemmPath::kAuto, kTiled});
    v.push_back({16, 4096, 2048, 128, !sym, t});
    // Block-shared x tiles (kRows16Shared, 4 column groups per block; the plan takes them for
    // 160 and 448 groups above, LOWBIT_INT4_DECODE_XSHARED=2 for every M = 9..16 case): 65
    // groups leave the last block one group and three spare warps; a tail batch of 2 K steps.
    v.push_back({11, 4160, 2048, 128, sym, t});
    v.push_back({15, 4160, 1056, kPerChannel, !sym, t, GemmPath::kAuto, kTiled});
    // M = 17..32: two 16-row tiles per column group (the last one partial).
    for (int n : {4096, 10240, 57344}) v.push_back({n == 4096 ? 32 : 24, n, 1024, 128, sym, t});
    v.push_back({17, 6400, 1120, kPerChannel, !sym, t, GemmPath::kAuto, kTiled});
  }
  // The pipelined kernel (MMA-tiled layout): row tiles of 16 / 32 / 64 and several of them
  // (M = 65, 200: partial last tiles), one column group (three idle warps per block), 65
  // groups (the last block one group), K % 64 == 32 (70 K steps, per-channel; K = 96 with
  // G = 32: partial last stages; G = 32 stages span two scale groups), split-K clusters (small
  // N, long K) and none (large N), every G, sym / asym, both dtypes.
  for (int g : {32, 64, 128, kPerChannel})
    for (bool sym : {true, false})
      for (DType t : {DType::kF16, DType::kBF16}) {
        for (int m : {1, 17, 64, 200}) v.push_back({m, 4160, g == kPerChannel ? 1120 : 2048, g, sym, t, GemmPath::kPipelined});
        for (int m : {5, 33}) v.push_back({m, 64, g == 32 || g == kPerChannel ? 96 : 2 * g, g, sym, t, GemmPath::kPipelined});
      }
  // 48-row wgmma tiles (pipelined_rows_for: M = 33..48 on >= 48 Mi elements), one partial.
  v.push_back({40, 4096, 12288, 128, false, DType::kBF16, GemmPath::kPipelined});
  // 96-row wgmma tiles (one row tile of 65..96 rows): 65 groups, the last column tile one group.
  v.push_back({80, 4160, 2048, 64, true, DType::kF16, GemmPath::kPipelined});
  // kAuto takes the pipelined kernel on a weight of 64 Mi elements at M = 100 (tiled_auto_path).
  v.push_back({100, 8192, 8192, 128, true, DType::kBF16});
  for (DType t : {DType::kF16, DType::kBF16}) {
    v.push_back({24, 192, 14336, 128, true, t, GemmPath::kPipelined});
    v.push_back({65, 4096, 4096, 64, false, t, GemmPath::kPipelined});
    v.push_back({128, 28672, 1024, 128, true, t, GemmPath::kPipelined});
  }
  // Split plans of one block per SM (pipelined_plan, kPipeTwoPerSmCost; session 34): 16 column
  // tiles in 6 ranks of 44 K steps (the last 36) under kAuto at M = 17..64 with wgmma, and 8
  // ranks of 32 for 24 column tiles.
  v.push_back({48, 4096, 4096, 128, true, DType::kBF16});
  v.push_back({20, 4096, 4096, 128, false, DType::kF16});
  v.push_back({24, 6144, 4096, 128, true, DType::kBF16});
  // With wgmma, 64-row tiles past M = 64 where the 128-row plan fills under 2/3 of the SMs
  // (pipelined_rows_for): 2 x 40 blocks of 128 rows -> 3 x 40 x 2 ranks of 64 rows.
  v.push_back({160, 10240, 2048, 128, true, DType::kBF16, GemmPath::kPipelined});
  v.push_back({160, 10240, 2048, 64, false, DType::kF16, GemmPath::kPipelined});
  // Expert stacks may be forced into the MMA-tiled layout: expert 0 and a split K range.
  v.push_back({5, 128, 96, 32, false, DType::kBF16, GemmPath::kAuto, static_cast<int>(KernelLayoutKind::kMmaTiled)});
  // Two column chunks of the 64 MiB slab (8328 x 4096 x 2 B > 64 MiB), the last one not a
  // multiple of 64 columns.
  v.push_back({80, 8328, 4096, 128, false, DType::kBF16, GemmPath::kDequantCublas});
  v.push_back({80, 8328, 4096, 128, true, DType::kF16, GemmPath::kDequantCublas});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Forced, Int4Gemm, ::testing::ValuesIn(forced_cases()), case_name);

// Split-K clusters in the decode kernel: ranks 1.. pushing their block sums into rank 0 (the
// default) and rank 0 loading them add the same values in the same order, so the outputs are
// bit-identical. The decode kernel is forced (kAuto takes the pipelined kernel for G = 32 at
// M = 16). On an H200 (132 SMs) its plan takes clusters of 2 for 64 column groups (N = 4096):
// 8-row tiles at M = 1 / 8 (and G = 32 at M = 16), 16-row tiles with staged x at M = 16 (G = 128,
// per-channel), lean 16-row tiles for 96 groups (N = 6144) at M = 16 (G = 128, per-channel);
// and clusters of 3 of 4-warp 8-row blocks for 160 (N = 10240) at M = 1 / 8
// with G = 128 and per-channel in bf16 (dense_rows8_shape; K = 2176: 17 batches of 8 K steps,
// so the ranks' K ranges differ; G = 32 and fp16 run 8-warp blocks alone there); clusters of 4
// of 8-warp 8-row blocks (three pushing ranks) for 20 and 3 groups on K = 8320 (65 batches:
// ranks of 16 / 16 / 16 / 17) at M = 1 / 8, clusters of 3 of them for 16 groups on K = 6272 (49
// batches: ranks of 16 / 16 / 17) at M = 1 and, with two 8-row tiles per group, for 3 groups on
// K = 8320 at M = 16 (G = 128, per-channel); 20 groups at M = 12 take two 8-row tiles per group
// in 8-warp pairs (rows16_few_groups_shape).
TEST(Int4GemmDecodePush, BitIdenticalToRemoteLoads) {
  struct Case {
    int n, k, m;
  };
  const Case cases[] = {{4096, 4096, 1},  {4096, 4096, 8},  {4096, 4096, 16}, {6144, 4096, 16},
                        {10240, 2176, 1}, {10240, 2176, 8}, {1280, 8320, 1},  {192, 8320, 8},
                        {1024, 6272, 1},  {1280, 8320, 12}, {192, 8320, 16}};
  // The cases that the plan puts in clusters of 3 of 8-warp / 4-warp 8-row blocks (the ones
  // that push into two slots) and in clusters of 4 of 8-warp 8-row blocks (three slots): a
  // later change of the plan's thresholds must not leave the push of a third or fourth rank
  // untested. (The launch may still run fewer ranks where the device cannot schedule a
  // cluster of 3 or 4: schedulable_splits; not on H100 / H200.)
  int clusters3_w8 = 0, clusters3_w4 = 0, clusters4_w8 = 0;
  for (DType t : {DType::kBF16, DType::kF16})
    for (int g : {128, 32, kPerChannel})
      for (const Case& c : cases) {
        const int m = c.m;
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " G=" << g << " N=" << c.n << " K=" << c.k
                                          << " M=" << m);
        WeightShape s{1, c.n, c.k, g, g != 32, t};
        const kern::DensePlan plan = default_decode_plan(s, m);
        if (plan.tiles == kern::DecodeTiles::kRows8 && plan.shape.splits == 3)
          ++(plan.shape.warps == 8 ? clusters3_w8 : clusters3_w4);
        if (plan.tiles == kern::DecodeTiles::kRows8 && plan.shape.splits == 4 && plan.shape.warps == 8) ++clusters4_w8;
        KernelWeights kw;  // (not weights_for: no fp64 reference here, so no dequantized copy)
        ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 91u + static_cast<uint32_t>(g)), &kw,
                                       static_cast<int>(KernelLayoutKind::kMmaTiled))
                        .ok());
        ASSERT_EQ(kw.kind, KernelLayoutKind::kMmaTiled);
        DevWeights dw(kw);
        DevBuf dx = upload(random_act(static_cast<size_t>(m) * s.k, t, 77u * m + g));
        size_t ws_bytes = 0;
        ASSERT_TRUE(gemm_workspace_size(s, m, &ws_bytes, GemmPath::kSkinny).ok());
        DevBuf ws(ws_bytes);
        std::vector<uint16_t> out[2];
        for (int mode : {1, 2}) {
          DevBuf dy(static_cast<size_t>(m) * s.n * 2);
          ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // NaN poison
          detail::set_decode_push(mode);
          GemmArgs a;
          a.x = dx.p;
          a.y = dy.p;
          a.m = m;
          a.path = GemmPath::kSkinny;
          const Status st = gemm(a, dw.view, ws.p, ws_bytes, nullptr);
          detail::set_decode_push(0);
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          out[mode - 1] = download<uint16_t>(dy.p, static_cast<size_t>(m) * s.n);
        }
        expect_same_bits_all_written(t, out[1], out[0]);
      }
  // (The knobs that override the plan's block shape may move the cases elsewhere.)
  if (std::getenv("LOWBIT_INT4_DECODE_SPLITS") == nullptr && std::getenv("LOWBIT_INT4_DECODE_WARPS") == nullptr) {
    EXPECT_GT(clusters3_w8, 0) << "no case ran 8-warp 8-row blocks in clusters of 3";
    EXPECT_GT(clusters4_w8, 0) << "no case ran 8-warp 8-row blocks in clusters of 4";
    // (N = 10240 was chosen for 132 SMs: H100 SXM, H200; a card with fewer SMs runs 4-warp
    // blocks alone there, e.g. 114 SMs.)
    if (kern::current_sm_count() == 132) EXPECT_GT(clusters3_w4, 0) << "no case ran 4-warp 8-row blocks in clusters of 3";
  }
}

// The warp-specialized 96- / 128-row wgmma tiles (pipelined_ws_tile.cuh) run the same
// warpgroup math and epilogue as the pipelined tile, so their outputs are bit-identical to it.
// Cases: one 96-row tile with 65 column groups (the last column tile one group) and G = 64;
// a 128-row tile with rows past M (M = 100) and K % 64 == 32 (a last stage of 2 K steps,
// per-channel); stages spanning two scale groups (G = 32, asymmetric); a 96-row tile whose
// ranks stream 16 stages (M = 72, N = 8192: the ring of 8 stages turns); 4 split-K ranks
// (M = 256, N = K = 4096: 32 tiles on 132 SMs); two row tiles past one wave (M = 512); two
// 96-row tiles at M = 129..192 on a small weight (session 28's plan: M = 176, N = 6144, K =
// 4096, G = 64 asymmetric, the second tile 80 rows); both dtypes. Skipped where the wgmma tiles
// do not run (not sm_90a).
TEST(Int4GemmPipelinedWs, BitIdenticalToPipelinedTile) {
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "wgmma tiles not available (sm_90a build and device)";
  struct Case {
    int m, n, k, g;
    bool sym;
  };
  const Case cases[] = {{80, 4160, 2048, 64, true},    {100, 4160, 1120, kPerChannel, false},
                        {96, 4096, 2048, 32, false},   {72, 8192, 4096, 128, false},
                        {128, 28672, 1024, 128, true}, {256, 4096, 4096, 128, false},
                        {512, 8192, 1024, 128, true},  {176, 6144, 4096, 64, false}};
  for (DType t : {DType::kBF16, DType::kF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " M=" << c.m << " N=" << c.n << " K=" << c.k
                                        << " G=" << c.g << (c.sym ? " sym" : " asym"));
      WeightShape s{1, c.n, c.k, c.g, c.sym, t};
      KernelWeights kw;
      ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 17u + static_cast<uint32_t>(c.m)), &kw,
                                     static_cast<int>(KernelLayoutKind::kMmaTiled))
                      .ok());
      ASSERT_EQ(kw.kind, KernelLayoutKind::kMmaTiled);
      DevWeights dw(kw);
      DevBuf dx = upload(random_act(static_cast<size_t>(c.m) * s.k, t, 5u * c.m + c.g));
      std::vector<uint16_t> out[2];
      for (int mode : {1, 2}) {
        DevBuf dy(static_cast<size_t>(c.m) * s.n * 2);
        ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // NaN poison
        const long long before = detail::pipe_ws_launches();
        detail::set_pipe_ws(mode);
        GemmArgs a;
        a.x = dx.p;
        a.y = dy.p;
        a.m = c.m;
        a.path = GemmPath::kPipelined;
        const Status st = gemm(a, dw.view, nullptr, 0, nullptr);
        detail::set_pipe_ws(0);
        ASSERT_TRUE(st.ok()) << st.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(detail::pipe_ws_launches() - before, mode == 2 ? 1 : 0);  // the kernel the case names ran
        out[mode - 1] = download<uint16_t>(dy.p, static_cast<size_t>(c.m) * s.n);
      }
      expect_same_bits_all_written(t, out[0], out[1]);
    }
}

// The decode tiles' copy of x (decode_x_steps.cu): every element where decode_x_steps_index
// puts it and zeros for the rows past M up to the 16-row tile's end, on a poisoned buffer, for
// M = 2..32 and a short and a long K.
TEST(Int4GemmDecodeXSteps, CopyPutsEveryElementAtItsIndex) {
  for (int k : {96, 4128})
    for (int m : {2, 9, 13, 16, 17, 32}) {
      SCOPED_TRACE(::testing::Message() << "M=" << m << " K=" << k);
      auto x = random_act(static_cast<size_t>(m) * k, DType::kBF16, 5u * m + k);
      DevBuf dx = upload(x);
      const int rows = (m + 15) / 16 * 16;
      DevBuf dxs(static_cast<size_t>(kern::decode_x_steps_bytes(m, k)));
      ASSERT_EQ(dxs.bytes, static_cast<size_t>(rows) * k * 2);
      ASSERT_EQ(cudaMemset(dxs.p, 0xFF, dxs.bytes), cudaSuccess);  // poison
      ASSERT_EQ(detail::launch_decode_x_steps(dx.p, m, k, dxs.p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto got = download<uint16_t>(dxs.p, static_cast<size_t>(rows) * k);
      size_t bad = 0;
      for (int r = 0; r < rows; ++r)
        for (int kk = 0; kk < k; ++kk)
          bad += got[static_cast<size_t>(kern::decode_x_steps_index(r, kk, k))] !=
                 (r < m ? x[static_cast<size_t>(r) * k + kk] : uint16_t{0});
      EXPECT_EQ(bad, 0u);
    }
}

// The decode GEMM reading the copy of x (a workspace of gemm_workspace_size) and reading x
// itself (no workspace) loads the same fragments into the same registers: bit-identical
// outputs. The copy is planned for deep and lean 16-row tiles on weights of >= 80 Mi
// elements; LOWBIT_INT4_DECODE_XSTEPS=2 takes it for every such tile (the 132-SM plans of
// these shapes: lean pairs for 96 groups at M = 12 / 16, lean alone for 896 groups, 4-warp deep
// at M = 24 / 32 and for 160 groups, 8-warp deep pairs for 64 groups with many batches (K =
// 14336), tail batches with K = 1056 per-channel), the others read x either way (8-row tiles at
// M = 8, G = 32 / 64 at M = 13). The 896-group case (57344 x 1536: 88 Mi elements) is planned.
TEST(Int4GemmDecodeXSteps, BitIdenticalToReadingX) {
  struct Case {
    int n, k, m, g;
  };
  const Case cases[] = {{6144, 4096, 12, 128},   {6144, 1056, 16, kPerChannel}, {57344, 1536, 16, 128},
                        {57344, 1536, 11, 128},   {10240, 1024, 24, 128},        {4096, 1024, 32, 128},
                        {10240, 1024, 16, 128},   {4096, 14336, 12, 128},        {4096, 4096, 8, 32},
                        {4096, 2048, 13, 64},     {4096, 2048, 13, 32}};
  int copied = 0;
  for (DType t : {DType::kBF16, DType::kF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " N=" << c.n << " K=" << c.k << " M=" << c.m << " G="
                                        << c.g);
      WeightShape s{1, c.n, c.k, c.g, c.g != 64, t};
      KernelWeights kw;
      ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 17u + static_cast<uint32_t>(c.n)), &kw,
                                     static_cast<int>(KernelLayoutKind::kMmaTiled))
                      .ok());
      DevWeights dw(kw);
      DevBuf dx = upload(random_act(static_cast<size_t>(c.m) * s.k, t, 3u * c.m + c.k));
      size_t ws_bytes = 0;
      ASSERT_TRUE(gemm_workspace_size(s, c.m, &ws_bytes, GemmPath::kSkinny).ok());
      ASSERT_GE(ws_bytes, static_cast<size_t>(kern::decode_x_steps_bytes(c.m, c.k)));
      DevBuf ws(ws_bytes);
      ASSERT_EQ(cudaMemset(ws.p, 0xFF, ws_bytes), cudaSuccess);
      // (The default plan; the LOWBIT_INT4_DECODE_* knobs may move some cases to other tiles.)
      const kern::DensePlan plan = default_decode_plan(s, c.m);
      copied += kern::decode_x_steps_planned(plan, c.m, c.n / 64, static_cast<long long>(c.n) * c.k,
                                             kern::current_sm_count(), detail::decode_x_steps_mode());
      std::vector<uint16_t> out[2];
      for (int with_copy : {0, 1}) {
        DevBuf dy(static_cast<size_t>(c.m) * s.n * 2);
        ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // NaN poison
        GemmArgs a;
        a.x = dx.p;
        a.y = dy.p;
        a.m = c.m;
        a.path = GemmPath::kSkinny;
        const Status st = gemm(a, dw.view, with_copy ? ws.p : nullptr, with_copy ? ws_bytes : 0, nullptr);
        ASSERT_TRUE(st.ok()) << st.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        out[with_copy] = download<uint16_t>(dy.p, static_cast<size_t>(c.m) * s.n);
      }
      expect_same_bits_all_written(t, out[0], out[1]);
    }
  // The copy must have been taken somewhere, unless LOWBIT_INT4_DECODE_XSTEPS=0 turns it off.
  if (detail::decode_x_steps_mode() != 0) EXPECT_GT(copied, 0);
}

// ---- argument validation ------------------------------------------------------------------

TEST(Int4GemmArgs, RefusedBeforeLaunch) {
  WeightShape s{2, 64, 128, 32, false, DType::kBF16};
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 5), &kw).ok());
  DevWeights dw(kw);
  DevBuf x(4 * 128 * 2 + 16), y(4 * 64 * 2 + 16), ws(1 << 20);
  GemmArgs a;
  a.x = x.p;
  a.y = y.p;
  a.m = 4;
  EXPECT_TRUE(gemm(a, dw.view, ws.p, ws.bytes, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  GemmArgs b = a;
  b.x = nullptr;
  EXPECT_EQ(gemm(b, dw.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  b = a;
  b.m = 0;
  EXPECT_EQ(gemm(b, dw.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  b = a;
  b.expert = 2;
  EXPECT_EQ(gemm(b, dw.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  b = a;
  b.x = static_cast<char*>(x.p) + 2;
  EXPECT_EQ(gemm(b, dw.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kMisaligned);
  b = a;
  b.path = GemmPath::kPipelined;  // this stack of two experts with N = 64 is N-packed
  ASSERT_EQ(dw.view.kind, KernelLayoutKind::kNPackedInterleaved);
  const Status rp = gemm(b, dw.view, ws.p, ws.bytes, nullptr);
  EXPECT_EQ(rp.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rp.message().find("MMA-tiled"), std::string::npos) << rp.message();
  KernelWeightsView v = dw.view;
  v.zeros = nullptr;  // asymmetric without zeros
  EXPECT_EQ(gemm(a, v, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  v = dw.view;
  v.shape.group_size = 96;
  EXPECT_EQ(gemm(a, v, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  v = dw.view;
  v.shape.n = 20;  // N-packed claimed for N % 8 != 0
  EXPECT_EQ(gemm(a, v, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  // MMA-tiled weights: the N-packed-only tiled WMMA path is refused, and so are a
  // misaligned qweight or scales and a shape the layout cannot hold.
  {
    WeightShape st{1, 128, 128, 32, true, DType::kBF16};
    KernelWeights kt;
    ASSERT_TRUE(repack_for_kernels(random_kpacked(st, 6), &kt).ok());
    ASSERT_EQ(kt.kind, KernelLayoutKind::kMmaTiled);
    DevWeights dt(kt);
    GemmArgs c = a;
    EXPECT_TRUE(gemm(c, dt.view, ws.p, ws.bytes, nullptr).ok());
    c.path = GemmPath::kPipelined;
    EXPECT_TRUE(gemm(c, dt.view, ws.p, ws.bytes, nullptr).ok());
    c.path = GemmPath::kTiled;
    const Status r = gemm(c, dt.view, ws.p, ws.bytes, nullptr);
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.message().find("mma-tiled"), std::string::npos) << r.message();
    KernelWeightsView vt = dt.view;
    vt.qweight = static_cast<const char*>(vt.qweight) + 4;
    EXPECT_EQ(gemm(a, vt, ws.p, ws.bytes, nullptr).code(), StatusCode::kMisaligned);
    vt = dt.view;
    vt.scales += 1;  // 2 B aligned: the decode tile loads a lane's 8 scales as one 16 B vector
    const Status rs = gemm(a, vt, ws.p, ws.bytes, nullptr);
    EXPECT_EQ(rs.code(), StatusCode::kMisaligned);
    EXPECT_NE(rs.message().find("scales"), std::string::npos) << rs.message();
    vt = dt.view;
    vt.shape.n = 96;
    EXPECT_EQ(gemm(a, vt, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // Workspace too small when split-K is used.
  WeightShape big{1, 256, 4096, 128, true, DType::kBF16};
  size_t need = 0;
  ASSERT_TRUE(gemm_workspace_size(big, 1, &need).ok());
  EXPECT_GT(need, 0u);
  KernelWeightsView vb;
  vb.shape = big;
  vb.qweight = ws.p;
  vb.scales = ws.as<uint16_t>();
  EXPECT_EQ(gemm(a, vb, ws.p, need - 4, nullptr).code(), StatusCode::kInvalidArgument);
}

// A workspace sized once for the largest M serves every smaller M (split-K is not monotone).
TEST(Int4GemmWorkspace, SizedForLargestMServesSmallerM) {
  for (const WeightShape& s : {WeightShape{1, 4096, 4096, 128, true, DType::kBF16},
                               WeightShape{1, 28672, 4096, 128, false, DType::kF16},
                               WeightShape{1, 256, 14336, 64, true, DType::kBF16}}) {
    size_t top = 0;
    ASSERT_TRUE(gemm_workspace_size(s, 2048, &top).ok());
    for (int m = 1; m <= 600; ++m) {
      size_t b = 0;
      ASSERT_TRUE(gemm_workspace_size(s, m, &b).ok());
      EXPECT_LE(b, top) << "N=" << s.n << " K=" << s.k << " m=" << m;
    }
  }
}

}  // namespace
}  // namespace lowbit::int4
