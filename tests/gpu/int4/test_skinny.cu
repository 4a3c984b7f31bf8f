// The decode tensor-core tile (kernels/int4/skinny_tile.cuh) on the shapes that exercise its
// variants: 16-byte and 4-byte weight copies (N/8 % 4), partial column tiles, partial last
// K stages, 8/16/32-row tiles, both column-warp widths, split-K clusters of 1..8 blocks; the
// dense GEMM vs fp64, run-to-run bit-identical results (fixed reduction order), and the MoE
// GEMM1 (silu * up) / GEMM2 (routing weight) stages called one by one on poisoned buffers vs
// fp64. The dense cases run both gemm() (M <= 64: its default skinny kernel) and the tile's
// dense entry (detail::launch_gemm_skinny_tile, gemm()'s path under LOWBIT_INT4_SKINNY_TILE=1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "kernels/int4/skinny_dense.h"
#include "lowbit/int4/kernels.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/gpu_buffers.h"
#include "tests/gpu/int4/moe_cpu_ref.h"

namespace lowbit::int4 {
namespace {

using namespace lowbit::int4::testing;

std::vector<uint16_t> rand_act(size_t n, DType t, uint32_t seed) { return random_activations(n, t, seed); }

struct SkCase {
  int m, n, k, g;
  bool sym;
  DType act;
};

std::string sk_name(const ::testing::TestParamInfo<SkCase>& i) {
  const SkCase& c = i.param;
  std::ostringstream os;
  os << "M" << c.m << "_N" << c.n << "_K" << c.k << "_G" << (c.g < 0 ? std::string("pc") : std::to_string(c.g))
     << (c.sym ? "_sym_" : "_asym_") << dtype_name(c.act);
  return os.str();
}

struct DenseRun {
  std::vector<uint16_t> x, y;
  KPackedWeights kp;
};

// Runs gemm() (tile: the decode tile's dense entry) on poisoned y and workspace; returns x,
// y and the canonical weights.
void run_dense(const SkCase& c, uint8_t poison, bool tile, DenseRun* r) {
  WeightShape s{1, c.n, c.k, c.g, c.sym, c.act};
  r->kp = random_kpacked(s, 3u * c.n + 5u * c.k + static_cast<uint32_t>(c.g + 7));
  KernelWeights kw;
  // The N-packed decode kernels (the dense default is MMA-tiled, gemm_decode.cu).
  ASSERT_TRUE(repack_for_kernels(r->kp, &kw, static_cast<int>(KernelLayoutKind::kNPackedInterleaved)).ok());
  DevWeights dw(kw);
  r->x = rand_act(static_cast<size_t>(c.m) * c.k, c.act, 11u * c.m + c.n);
  DevBuf dx = upload(r->x), dy(static_cast<size_t>(c.m) * c.n * 2);
  ASSERT_EQ(cudaMemset(dy.p, poison, dy.bytes), cudaSuccess);
  size_t wsb = 0;
  ASSERT_TRUE(gemm_workspace_size(s, c.m, &wsb).ok());
  DevBuf ws(wsb);
  if (wsb) ASSERT_EQ(cudaMemset(ws.p, poison, wsb), cudaSuccess);
  GemmArgs a;
  a.x = dx.p;
  a.y = dy.p;
  a.m = c.m;
  if (tile) {
    ASSERT_EQ(detail::launch_gemm_skinny_tile(dx.p, dy.p, c.m, dw.view, 0, nullptr), cudaSuccess);
  } else {
    Status st = gemm(a, dw.view, ws.p, wsb, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  r->y = download<uint16_t>(dy.p, static_cast<size_t>(c.m) * c.n);
}

class Int4Skinny : public ::testing::TestWithParam<SkCase> {};

// Same tolerance as test_gemm.cu: per element 2^-8 |ref| (bf16; fp16 2^-11) plus
// 8 sqrt(K) 2^-24 sum|x w| (fp32 accumulation in another order), rel-L2 < 5e-3 / 1e-3.
TEST_P(Int4Skinny, MatchesFp64Reference) {
  const SkCase c = GetParam();
  for (bool tile : {false, true}) {
    SCOPED_TRACE(tile ? "decode tile" : "gemm()");
    DenseRun r;
    ASSERT_NO_FATAL_FAILURE(run_dense(c, 0xFF, tile, &r));
    std::vector<int> cols;
    for (int n = 0; n < c.n; n += (c.n > 512 ? 29 : 1)) cols.push_back(n);
    cols.push_back(c.n - 1);
    const double rel_out = c.act == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
    double err2 = 0, ref2 = 0;
    int bad = 0;
    std::vector<double> wcol(c.k);
    for (int n : cols) {
      for (int k = 0; k < c.k; ++k) wcol[k] = half_bits_to_float(c.act, canon_dequant_bits(r.kp, 0, n, k));
      for (int m = 0; m < c.m; ++m) {
        double ref = 0, mag = 0;
        for (int k = 0; k < c.k; ++k) {
          const double t = static_cast<double>(half_bits_to_float(c.act, r.x[static_cast<size_t>(m) * c.k + k])) * wcol[k];
          ref += t;
          mag += std::fabs(t);
        }
        const double got = half_bits_to_float(c.act, r.y[static_cast<size_t>(m) * c.n + n]);
        const double tol = rel_out * std::fabs(ref) + 8.0 * std::sqrt(static_cast<double>(c.k)) * std::ldexp(1.0, -24) * mag;
        if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
          ADD_FAILURE() << "m=" << m << " n=" << n << " got " << got << " ref " << ref << " tol " << tol;
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
      }
    }
    EXPECT_EQ(bad, 0);
    ASSERT_GT(ref2, 0.0);  // never pass on zeros
    EXPECT_LT(std::sqrt(err2 / ref2), c.act == DType::kBF16 ? 5e-3 : 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiles, Int4Skinny,
    ::testing::Values(SkCase{1, 4160, 1024, 128, true, DType::kBF16},   // partial column tile, 16 B copies
                      SkCase{8, 4160, 1024, 32, false, DType::kF16},    // full 8-row tile
                      SkCase{9, 4160, 1024, 64, true, DType::kBF16},    // 16-row tile, 9 rows
                      SkCase{33, 4160, 1024, 128, false, DType::kF16},  // two 32-row tiles, the second 1 row
                      SkCase{5, 264, 96, 32, false, DType::kBF16},      // N/8 = 33: 4 B copies; 3 chunks
                      SkCase{16, 264, 96, kPerChannel, true, DType::kF16},
                      SkCase{2, 28672, 512, 128, true, DType::kBF16},   // wide rows, uneven split of 16 chunks
                      SkCase{64, 4096, 2048, 128, false, DType::kF16},
                      SkCase{1, 57344, 256, 128, false, DType::kBF16}),  // many tiles, few chunks
    sk_name);

// The split-K partials are summed in a fixed order: two runs give identical bits.
TEST(Int4SkinnyDeterminism, BitIdenticalAcrossRuns) {
  for (const SkCase& c : {SkCase{1, 4096, 4096, 128, true, DType::kBF16}, SkCase{12, 4096, 8192, 64, false, DType::kF16}}) {
    for (bool tile : {false, true}) {
      DenseRun a, b;
      ASSERT_NO_FATAL_FAILURE(run_dense(c, 0xFF, tile, &a));
      ASSERT_NO_FATAL_FAILURE(run_dense(c, 0x7F, tile, &b));
      size_t nonzero = 0;
      for (uint16_t v : a.y) nonzero += (v & 0x7FFF) != 0;
      EXPECT_GT(nonzero, a.y.size() / 2);
      EXPECT_EQ(a.y, b.y) << "M=" << c.m << " tile=" << tile;
    }
  }
}

// ---- MoE GEMM stages -------------------------------------------------------------------

struct MoeStageCase {
  int m, E, H, I, topk, g;
  bool sym;
  DType act;
  int bm;
  bool misaligned = false;  // GEMM1's output 2 B and GEMM2's 4 B past 16 B alignment
};

class Int4SkinnyMoe : public ::testing::TestWithParam<MoeStageCase> {};

// topk -> align -> moe_gemm1 -> moe_gemm2 -> moe_sum, every buffer poisoned. Checks the
// silu*up intermediate of every valid (token, slot) row (finite, rel-L2 vs fp64 of the
// exact dot products) and the layer output vs fp64 (with the act-dtype rounding of the
// intermediate, as the GPU stores it): rel-L2 < 1e-2 bf16, 2e-3 fp16 (as test_moe.cu).
// Run on both expert layouts: N-packed (skinny_tile.cuh) and MMA-tiled (the decode kernel's
// MoE modes; needs I % 64 == 0 and H % 64 == 0).
void run_moe_stages(const MoeStageCase& c, KernelLayoutKind kind) {
  WeightShape s13{c.E, 2 * c.I, c.H, c.g, c.sym, c.act}, s2{c.E, c.H, c.I, c.g, c.sym, c.act};
  KPackedWeights k13 = random_kpacked(s13, 71u + c.I, 0.05f), k2 = random_kpacked(s2, 83u + c.H, 0.05f);
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(k13, &w13, static_cast<int>(kind)).ok());
  ASSERT_TRUE(repack_for_kernels(k2, &w2, static_cast<int>(kind)).ok());
  DevWeights d13(w13), d2(w2);
  const int P = c.m * c.topk;
  auto x = rand_act(static_cast<size_t>(c.m) * c.H, c.act, 19u + c.m);
  std::mt19937 rng(23u + c.m);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(c.m) * c.E);
  for (auto& v : logits) v = nd(rng);
  const int64_t maxp = moe_max_padded(c.m, c.topk, c.E, c.bm);
  const size_t inter_bytes = static_cast<size_t>(P) * c.I * 2;
  DevBuf dx = upload(x), dl = upload(logits), ids(P * 4), tw(P * 4), sorted(maxp * 4), eids(maxp / c.bm * 4), npp(4),
      inter(inter_bytes + 16), slots(static_cast<size_t>(P) * c.H * 4 + 16), dy(static_cast<size_t>(c.m) * c.H * 2),
      inter2(inter_bytes);
  for (DevBuf* b : {&ids, &tw, &sorted, &eids, &npp, &inter, &slots, &dy, &inter2})
    ASSERT_EQ(cudaMemset(b->p, 0xFF, b->bytes), cudaSuccess);
  // Misaligned outputs: the stages must still run (the pipelined tile's 16 B stores give way
  // to the decode tile); GEMM2 reads an aligned copy of the intermediate (activations must be
  // 16 B aligned).
  void* inter_out = inter.as<char>() + (c.misaligned ? 2 : 0);
  float* slots_out = reinterpret_cast<float*>(slots.as<char>() + (c.misaligned ? 4 : 0));
  ASSERT_TRUE(moe_topk(dl.as<float>(), c.m, c.E, c.topk, true, ids.as<int32_t>(), tw.as<float>(), nullptr).ok());
  ASSERT_TRUE(moe_align(ids.as<int32_t>(), c.m, c.topk, c.E, c.bm, sorted.as<int32_t>(), eids.as<int32_t>(),
                        npp.as<int32_t>(), nullptr)
                  .ok());
  Status st = moe_gemm1(dx.p, d13.view, sorted.as<int32_t>(), eids.as<int32_t>(), npp.as<int32_t>(), c.m, c.topk, c.bm,
                        inter_out, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  void* inter_in = inter_out;
  if (c.misaligned) {
    ASSERT_EQ(cudaMemcpy(inter2.p, inter_out, inter_bytes, cudaMemcpyDeviceToDevice), cudaSuccess);
    inter_in = inter2.p;
  }
  st = moe_gemm2(inter_in, d2.view, sorted.as<int32_t>(), eids.as<int32_t>(), npp.as<int32_t>(), tw.as<float>(), c.m,
                 c.topk, c.bm, slots_out, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_TRUE(moe_sum(slots_out, c.m, c.topk, c.H, c.act, dy.p, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto gi = download<uint16_t>(inter_in, static_cast<size_t>(P) * c.I);
  auto gy = download<uint16_t>(dy.p, static_cast<size_t>(c.m) * c.H);

  std::vector<int32_t> rid;
  std::vector<float> rw;
  cpu_topk(logits, c.m, c.E, c.topk, true, &rid, &rw);
  auto deq = [&](const KPackedWeights& w, int e, int n, int k) {
    return static_cast<double>(half_bits_to_float(c.act, canon_dequant_bits(w, e, n, k)));
  };
  double ie2 = 0, ir2 = 0, ye2 = 0, yr2 = 0;
  std::vector<double> act(c.I);
  for (int m = 0; m < c.m; ++m) {
    std::vector<double> ref(c.H, 0.0);
    for (int s = 0; s < c.topk; ++s) {
      const int p = m * c.topk + s, e = rid[p];
      for (int n = 0; n < c.I; ++n) {
        double g = 0, up = 0;
        for (int k = 0; k < c.H; ++k) {
          const double xv = half_bits_to_float(c.act, x[static_cast<size_t>(m) * c.H + k]);
          g += xv * deq(k13, e, n, k);
          up += xv * deq(k13, e, c.I + n, k);
        }
        const double a_exact = g / (1.0 + std::exp(-g)) * up;
        const double got = half_bits_to_float(c.act, gi[static_cast<size_t>(p) * c.I + n]);
        ASSERT_TRUE(std::isfinite(got)) << "inter p=" << p << " n=" << n;
        ie2 += (got - a_exact) * (got - a_exact);
        ir2 += a_exact * a_exact;
        act[n] = half_bits_to_float(c.act, float_to_half_bits(c.act, static_cast<float>(a_exact)));
      }
      for (int h = 0; h < c.H; ++h) {
        double o = 0;
        for (int n = 0; n < c.I; ++n) o += act[n] * deq(k2, e, h, n);
        ref[h] += rw[p] * o;
      }
    }
    for (int h = 0; h < c.H; ++h) {
      const double got = half_bits_to_float(c.act, gy[static_cast<size_t>(m) * c.H + h]);
      ASSERT_TRUE(std::isfinite(got)) << "y m=" << m << " h=" << h;
      ye2 += (got - ref[h]) * (got - ref[h]);
      yr2 += ref[h] * ref[h];
    }
  }
  ASSERT_GT(ir2, 0.0);
  ASSERT_GT(yr2, 0.0);
  EXPECT_LT(std::sqrt(ie2 / ir2), c.act == DType::kBF16 ? 5e-3 : 1e-3);  // one act rounding of silu*up
  EXPECT_LT(std::sqrt(ye2 / yr2), c.act == DType::kBF16 ? 1e-2 : 2e-3);
}

TEST_P(Int4SkinnyMoe, StagesMatchFp64) {
  const MoeStageCase c = GetParam();
  for (KernelLayoutKind kind : {KernelLayoutKind::kNPackedInterleaved, KernelLayoutKind::kMmaTiled}) {
    if (kind == KernelLayoutKind::kMmaTiled && (c.I % 64 != 0 || c.H % 64 != 0)) continue;
    SCOPED_TRACE(kernel_layout_name(kind));
    run_moe_stages(c, kind);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Int4SkinnyMoe,
    ::testing::Values(MoeStageCase{1, 16, 1024, 384, 4, 128, true, DType::kBF16, 8},   // decode, split-K clusters
                      MoeStageCase{3, 16, 512, 160, 4, 32, false, DType::kF16, 8},     // partial gate/up tile
                      MoeStageCase{16, 16, 512, 384, 8, 64, true, DType::kBF16, 8},    // many experts busy
                      MoeStageCase{7, 8, 256, 128, 2, 128, false, DType::kF16, 16},    // 16-row tiles
                      MoeStageCase{40, 8, 256, 128, 2, 128, false, DType::kBF16, 32},  // 32-row tiles
                      MoeStageCase{12, 4, 256, 96, 2, kPerChannel, true, DType::kF16, 128},   // 4 row passes
                      MoeStageCase{40, 8, 256, 128, 2, 64, true, DType::kBF16, 32, true},       // misaligned outputs
                      MoeStageCase{64, 8, 256, 192, 4, 64, false, DType::kF16, 64}));           // pipelined, I / 64 odd

}  // namespace
}  // namespace lowbit::int4
