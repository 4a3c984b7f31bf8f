// Act-order (GPTQ desc_act) weights through int4::gemm: the view carries k_perm and gemm()
// gathers x[:, k_perm] itself. The outputs must be bit-identical to the same kernel on the
// activations gathered on the host (the gather moves 16-bit values, no arithmetic), and agree
// with the fp64 reference that applies the permutation (gemm_ref) within the dense tolerance;
// every layout and the decode / pipelined / dequant + cuBLAS paths; entry points that take no
// permutation refuse such a weight by name; the weight's columns reordered (permute_n) give
// the same columns, bit for bit, at their new places. The fused MoE layer on act-order experts
// (each its own permutation, of x for w13 and of the intermediate for w2) against the fp64
// layer reference, and bit-identical to the plain layer when every permutation is the
// identity; w2's permutation folded into w13's columns (act_order_fold.h) gives the act-order
// layer's bits without its gather.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <utility>

#include "lowbit/int4/act_order_fold.h"
#include "lowbit/int4/kernels.h"
#include "lowbit/int4/moe_ref.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/gpu_buffers.h"
#include "tests/gpu/int4/moe_cpu_ref.h"
#include "tests/gpu/int4/moe_layer_ref.h"

namespace lowbit::int4 {
namespace {

using testing::DevBuf;
using testing::DevWeights;
using testing::download;
using testing::random_k_perm;
using testing::random_kpacked;
using testing::upload;

std::vector<uint16_t> random_act(size_t n, DType t, uint32_t seed) { return testing::random_activations(n, t, seed); }


struct ActCase {
  int experts, expert, m, n, k, g;
  bool sym;
  DType act;
  GemmPath path;
  int layout;  // forced KernelLayoutKind, -1: the shape's default
};

std::string act_name(const ::testing::TestParamInfo<ActCase>& i) {
  const ActCase& c = i.param;
  std::ostringstream os;
  os << "E" << c.experts << "e" << c.expert << "_M" << c.m << "_N" << c.n << "_K" << c.k << "_G"
     << (c.g < 0 ? std::string("pc") : std::to_string(c.g)) << (c.sym ? "_sym_" : "_asym_") << dtype_name(c.act) << "_"
     << gemm_path_name(c.path) << "_L" << c.layout;
  return os.str();
}

class Int4GemmActOrder : public ::testing::TestWithParam<ActCase> {};

TEST_P(Int4GemmActOrder, GathersXAndMatchesReference) {
  const ActCase c = GetParam();
  const WeightShape s{c.experts, c.n, c.k, c.g, c.sym, c.act};
  KPackedWeights kp = random_kpacked(s, 401u + c.n + c.k + c.m);
  kp.k_perm = random_k_perm(c.experts, c.k, 77u + c.k);
  KernelWeights kw;
  Status st = repack_for_kernels(kp, &kw, c.layout);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(kw.k_perm, kp.k_perm);  // the permutation travels with the layout
  DevWeights dw(kw);
  ASSERT_TRUE(dw.status.ok()) << dw.status.to_string();
  ASSERT_NE(dw.view.k_perm, nullptr);

  const auto x = random_act(static_cast<size_t>(c.m) * c.k, c.act, 19u * c.m + c.k);
  // x' = x[:, k_perm of the expert], gathered on the host.
  const auto xg = testing::gather_columns(x, c.m, c.k, kp.k_perm.data() + static_cast<size_t>(c.expert) * c.k);
  DevBuf dx = upload(x), dxg = upload(xg);
  const size_t ybytes = static_cast<size_t>(c.m) * c.n * 2;
  DevBuf dy(ybytes), dy_plain(ybytes);
  ASSERT_EQ(cudaMemset(dy.p, 0xFF, ybytes), cudaSuccess);  // NaN poison
  ASSERT_EQ(cudaMemset(dy_plain.p, 0xFF, ybytes), cudaSuccess);

  size_t ws_shape = 0, ws_view = 0;
  ASSERT_TRUE(gemm_workspace_size(s, c.m, &ws_shape, c.path).ok());
  ASSERT_TRUE(gemm_workspace_size(dw.view, c.m, &ws_view, c.path).ok());
  EXPECT_EQ(ws_view, ws_shape + (static_cast<size_t>(c.m) * c.k * 2 + 255) / 256 * 256);
  DevBuf ws(ws_view);
  ASSERT_EQ(cudaMemset(ws.p, 0xFF, ws_view), cudaSuccess);
  GemmArgs a;
  a.x = dx.p;
  a.y = dy.p;
  a.m = c.m;
  a.expert = c.expert;
  a.path = c.path;
  st = gemm(a, dw.view, ws.p, ws_view, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // The same weight without its permutation on the host-gathered x: the same kernel.
  KernelWeightsView plain = dw.view;
  plain.k_perm = nullptr;
  GemmArgs b = a;
  b.x = dxg.p;
  b.y = dy_plain.p;
  DevBuf ws2(ws_shape);
  st = gemm(b, plain, ws2.p, ws_shape, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = download<uint16_t>(dy.p, static_cast<size_t>(c.m) * c.n);
  const auto yp = download<uint16_t>(dy_plain.p, static_cast<size_t>(c.m) * c.n);
  size_t differ = 0;
  for (size_t i = 0; i < y.size(); ++i) differ += y[i] != yp[i];
  EXPECT_EQ(differ, 0u) << "act-order output differs from the host-gathered run in " << differ << " of " << y.size();

  // fp64 reference with the permutation applied by the CPU reference (weights.h contract).
  std::vector<double> ref;
  ASSERT_TRUE(gemm_ref(kp, c.expert, x.data(), c.m, &ref, nullptr).ok());
  double scale = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  // out's column j against the reference's column col[j] (col null: j).
  auto expect_near_ref = [&](const std::vector<uint16_t>& out, const int32_t* col, const char* what) {
    const double rel_out = c.act == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
    double err2 = 0, ref2 = 0;
    int bad = 0;
    for (int r = 0; r < c.m; ++r)
      for (int j = 0; j < c.n; ++j) {
        const double want = ref[static_cast<size_t>(r) * c.n + (col != nullptr ? col[j] : j)];
        const double got = half_bits_to_float(c.act, out[static_cast<size_t>(r) * c.n + j]);
        // Output rounding plus fp32 accumulation over K (loose per element; the tight checks are
        // the bit identities, the rel-L2 below catches a wrong gather).
        const double tol = rel_out * std::fabs(want) + 1e-2 * scale;
        if (!(std::fabs(got - want) <= tol) && bad++ < 5)
          ADD_FAILURE() << what << ": row " << r << " column " << j << " got " << got << " ref " << want;
        err2 += (got - want) * (got - want);
        ref2 += want * want;
      }
    EXPECT_EQ(bad, 0) << what;
    ASSERT_GT(ref2, 0.0);
    EXPECT_LT(std::sqrt(err2 / ref2), c.act == DType::kBF16 ? 5e-3 : 1e-3) << what;
  };
  expect_near_ref(y, nullptr, "act-order run");

  // The weight's columns reordered (permute_n: what fold_act_order does to a gate / up weight):
  // column j of the output is column perm[j] of the unpermuted run at its new place. bf16: bit
  // for bit on every path and layout (a column's sum does not depend on where it sits). fp16:
  // the MMA-tiled decode tile sums columns 8..15 of every 16 as (1024 + 16 q) x and the others as
  // (1024 + q) x (decode_tile.cuh, kHiX16: two shifts per word less), the same values in another
  // fp32 rounding, so a column that moves between the two halves may differ in its last bits;
  // every column that stays in its half is bit for bit, and all are checked against fp64. Other
  // layouts and paths have no such halves: bit for bit in both dtypes.
  {
    const std::vector<int32_t> perm = random_k_perm(c.experts, c.n, 91u + c.n);
    KPackedWeights kf;
    ASSERT_TRUE(permute_n(kp, perm, 1, &kf).ok());
    KernelWeights kwf;
    ASSERT_TRUE(repack_for_kernels(kf, &kwf, c.layout).ok());
    DevWeights dwf(kwf);
    ASSERT_TRUE(dwf.status.ok()) << dwf.status.to_string();
    ASSERT_EQ(cudaMemset(dy_plain.p, 0xFF, ybytes), cudaSuccess);
    GemmArgs f = a;
    f.y = dy_plain.p;
    st = gemm(f, dwf.view, ws.p, ws_view, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto yf = download<uint16_t>(dy_plain.p, static_cast<size_t>(c.m) * c.n);
    const int32_t* pe = perm.data() + static_cast<size_t>(c.expert) * c.n;
    const bool hi_x16 = c.act == DType::kF16 && kw.kind == KernelLayoutKind::kMmaTiled &&
                        gemm_resolved_path(s, kw.kind, c.m, c.path) == GemmPath::kSkinny;  // the decode tile
    size_t moved = 0, changed_half = 0;
    for (int r = 0; r < c.m; ++r)
      for (int j = 0; j < c.n; ++j) {
        const bool differs = yf[static_cast<size_t>(r) * c.n + j] != y[static_cast<size_t>(r) * c.n + pe[j]];
        const bool same_half = (j % 16 >= 8) == (pe[j] % 16 >= 8);
        if (hi_x16 && !same_half)
          changed_half += differs;
        else
          moved += differs;
      }
    EXPECT_EQ(moved, 0u) << "permuted columns differ from the unpermuted run's in " << moved << " of " << yf.size()
                         << (hi_x16 ? " (fp16, the MMA-tiled decode tile: of the columns that keep their half of 16)" : "");
    if (changed_half > 0)
      std::printf("[ info     ] fp16: %zu of %zu outputs in columns moved between halves of 16 differ in their rounding\n",
                  changed_half, yf.size());
    expect_near_ref(yf, pe, "permuted columns");
  }
}

std::vector<ActCase> act_cases() {
  const int tiled = static_cast<int>(KernelLayoutKind::kMmaTiled);
  const int npacked = static_cast<int>(KernelLayoutKind::kNPackedInterleaved);
  const int kpacked = static_cast<int>(KernelLayoutKind::kKPacked);
  std::vector<ActCase> v;
  // MMA-tiled (the dense default): decode at M = 1 / 8 / 16, the pipelined kernel, dequant + cuBLAS.
  for (int m : {1, 8, 16, 64, 300})
    v.push_back({1, 0, m, 512, 1024, 128, true, DType::kBF16, GemmPath::kAuto, tiled});
  // A gather of >= 0.5 Mi elements: the row-staged gather kernel (act_order_gather.cu).
  v.push_back({1, 0, 600, 256, 1024, 64, false, DType::kF16, GemmPath::kAuto, tiled});
  v.push_back({1, 0, 24, 256, 512, 32, false, DType::kF16, GemmPath::kPipelined, tiled});
  v.push_back({1, 0, 5, 256, 512, kPerChannel, true, DType::kF16, GemmPath::kSkinny, tiled});
  v.push_back({1, 0, 40, 256, 512, 64, false, DType::kBF16, GemmPath::kDequantCublas, tiled});
  // N-packed: an expert stack (expert 1: its own permutation), skinny and forced paths.
  v.push_back({2, 1, 3, 64, 256, 64, false, DType::kBF16, GemmPath::kAuto, npacked});
  v.push_back({2, 1, 130, 64, 256, 32, true, DType::kF16, GemmPath::kAuto, npacked});
  v.push_back({1, 0, 12, 128, 256, 128, true, DType::kBF16, GemmPath::kTiled, npacked});
  // K-packed (N % 8 != 0) and a K that is not a multiple of 8 for the scalar gather.
  v.push_back({1, 0, 5, 20, 128, 32, false, DType::kBF16, GemmPath::kAuto, kpacked});
  v.push_back({1, 0, 3, 12, 70, kPerChannel, true, DType::kF16, GemmPath::kAuto, kpacked});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Paths, Int4GemmActOrder, ::testing::ValuesIn(act_cases()), act_name);

// What refuses an act-order weight, and why: too small a workspace (before anything is
// launched), the fused MoE layer and dequantize (they take activations in stored order).
TEST(Int4GemmActOrder, RefusalsNameTheProblem) {
  const WeightShape s{1, 256, 512, 128, true, DType::kBF16};
  KPackedWeights kp = random_kpacked(s, 3);
  kp.k_perm = random_k_perm(1, s.k, 4);
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(kp, &kw).ok());
  DevWeights dw(kw);
  ASSERT_TRUE(dw.status.ok()) << dw.status.to_string();
  DevBuf x(4 * 512 * 2), y(4 * 256 * 2), out(static_cast<size_t>(256) * 512 * 2);
  size_t need = 0;
  ASSERT_TRUE(gemm_workspace_size(dw.view, 4, &need).ok());
  DevBuf ws(need);
  GemmArgs a;
  a.x = x.p;
  a.y = y.p;
  a.m = 4;
  const Status small = gemm(a, dw.view, ws.p, 4 * 512 * 2 - 2, nullptr);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.message().find("act-order"), std::string::npos) << small.message();
  const Status dq = dequantize(dw.view, out.as<uint16_t>(), nullptr);
  EXPECT_EQ(dq.code(), StatusCode::kNotSupported);
  EXPECT_NE(dq.message().find("k_perm"), std::string::npos) << dq.message();
  KernelWeightsView odd = dw.view;
  odd.k_perm = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(odd.k_perm) + 2);
  EXPECT_EQ(gemm(a, odd, ws.p, need, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_TRUE(gemm(a, dw.view, ws.p, need, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- fused MoE on act-order experts ----------------------------------------------------------
struct MoeActCase {
  int m, E, H, I, topk, g;
  bool sym;
  DType act;
  bool perm13, perm2;  // which of the two stacks carries k_perm
  bool routed;         // caller ids (with foreign ones) instead of the logits
  int layout;          // forced KernelLayoutKind, -1: the shape's default
};

std::string moe_act_name(const ::testing::TestParamInfo<MoeActCase>& i) {
  const MoeActCase& c = i.param;
  std::ostringstream os;
  os << "M" << c.m << "_E" << c.E << "_H" << c.H << "_I" << c.I << "_top" << c.topk << "_G"
     << (c.g < 0 ? std::string("pc") : std::to_string(c.g)) << (c.sym ? "_sym_" : "_asym_") << dtype_name(c.act)
     << (c.perm13 ? "_p13" : "") << (c.perm2 ? "_p2" : "") << (c.routed ? "_routed" : "_logits")
     << (c.layout < 0 ? std::string("_Ldefault") : "_L" + std::to_string(c.layout));
  return os.str();
}

class Int4MoeActOrder : public ::testing::TestWithParam<MoeActCase> {};

// (1) random permutations: the layer against the fp64 reference that applies them; (2) the same
// stored weights with identity permutations passed as k_perm: bit-identical to the layer without
// any (the gathers only move values, and GEMM1 on the gathered rows as a top-1 routing of M * topk
// rows runs the same tiles on the same align blocks); (3) the workspace: the views' size counts
// the copies, one byte less (for a given block_m) is refused before anything runs.
TEST_P(Int4MoeActOrder, MatchesReferenceAndPlainLayer) {
  const MoeActCase c = GetParam();
  const WeightShape s13{c.E, 2 * c.I, c.H, c.g, c.sym, c.act}, s2{c.E, c.H, c.I, c.g, c.sym, c.act};
  KPackedWeights k13 = random_kpacked(s13, 511u + c.I, 0.05f), k2 = random_kpacked(s2, 622u + c.H, 0.05f);
  KPackedWeights k13p = k13, k2p = k2;  // the permutations set below stay off these
  if (c.perm13) k13p.k_perm = random_k_perm(c.E, c.H, 31u + c.m);
  if (c.perm2) k2p.k_perm = random_k_perm(c.E, c.I, 37u + c.m);
  KernelWeights w13, w2, w13p, w2p;
  for (auto [in, out] : {std::pair{&k13, &w13}, std::pair{&k2, &w2}, std::pair{&k13p, &w13p}, std::pair{&k2p, &w2p}}) {
    const Status st = repack_for_kernels(*in, out, c.layout);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  DevWeights d13(w13), d2(w2), d13p(w13p), d2p(w2p);
  for (const DevWeights* d : {&d13, &d2, &d13p, &d2p}) ASSERT_TRUE(d->status.ok()) << d->status.to_string();
  ASSERT_EQ(d13p.view.k_perm != nullptr, c.perm13);
  ASSERT_EQ(d2p.view.k_perm != nullptr, c.perm2);

  const auto x = random_act(static_cast<size_t>(c.m) * c.H, c.act, 23u * c.m + c.H);
  std::mt19937 rng(41u + c.m);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(c.m) * c.E);
  for (auto& v : logits) v = nd(rng);
  const size_t P = static_cast<size_t>(c.m) * c.topk;
  std::vector<int32_t> ids;
  std::vector<float> rw;
  testing::cpu_topk(logits, c.m, c.E, c.topk, true, &ids, &rw);
  if (c.routed)  // experts of other ranks: no rows, nothing gathered for them
    for (size_t p = 0; p < P; ++p)
      if (p % 5 == 2) ids[p] = p % 2 ? -1 : c.E + 1;
  DevBuf dx = upload(x), dl = upload(logits), dids = upload(ids), dw = upload(rw);
  const size_t ybytes = x.size() * 2;
  DevBuf dy(ybytes), dy_plain(ybytes), dy_id(ybytes);
  MoeArgs a;
  a.x = dx.p;
  a.m = c.m;
  a.topk = c.topk;
  a.renormalize = true;
  if (c.routed) {
    a.topk_ids = dids.as<int32_t>();
    a.topk_weights = dw.as<float>();
  } else {
    a.router_logits = dl.as<float>();
  }

  // (3) workspace: the shape's size for the plain layer; the views' adds the gathered copies.
  size_t ws_plain = 0, ws_act = 0;
  ASSERT_TRUE(moe_workspace_size(c.m, c.topk, c.E, c.H, c.I, c.act, 0, &ws_plain, MoePath::kFused).ok());
  ASSERT_TRUE(moe_workspace_size(d13p.view, d2p.view, c.m, c.topk, 0, &ws_act).ok());
  size_t ws_same = 0;
  ASSERT_TRUE(moe_workspace_size(d13.view, d2.view, c.m, c.topk, 0, &ws_same, MoePath::kFused).ok());
  EXPECT_EQ(ws_same, ws_plain) << "no k_perm: the views' size is the shape's";
  // At block_m = 0 the size covers every align block the layer may choose at this M (an upper
  // bound); with block_m given it is what the layer needs for that block, exactly.
  size_t ws_bm16 = 0;
  ASSERT_TRUE(moe_workspace_size(d13p.view, d2p.view, c.m, c.topk, 16, &ws_bm16).ok());
  const size_t ws_bytes = std::max({ws_plain, ws_act, ws_bm16});
  DevBuf ws(ws_bytes);
  for (DevBuf* b : {&dy, &dy_plain, &dy_id, &ws}) ASSERT_EQ(cudaMemset(b->p, 0xFF, b->bytes), cudaSuccess);  // NaN poison

  // (1) random permutations.
  a.y = dy.p;
  Status st = fused_moe(a, d13p.view, d2p.view, ws.p, ws_act, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = download<uint16_t>(dy.p, x.size());
  // The act-order layer's fp64 reference: checks (1) and (4) and the routed cases' premise.
  const auto ref_perm = testing::moe_reference_routed(x, ids, rw, c.m, c.E, c.H, c.I, c.topk, c.act, k13p, k2p);
  auto as_double = [&](const std::vector<uint16_t>& out) {
    std::vector<double> v(out.size());
    for (size_t i = 0; i < out.size(); ++i) v[i] = half_bits_to_float(c.act, out[i]);
    return v;
  };
  testing::expect_layer_close(as_double(y), ref_perm, c.act);
  if (c.routed) {  // the plain weights' reference differs (the gathers are not the identity)
    const auto ref_plain = testing::moe_reference_routed(x, ids, rw, c.m, c.E, c.H, c.I, c.topk, c.act, k13, k2);
    double diff = 0, mag = 0;
    for (size_t i = 0; i < ref_plain.size(); ++i) {
      diff = std::max(diff, std::fabs(ref_plain[i] - ref_perm[i]));
      mag = std::max(mag, std::fabs(ref_perm[i]));
    }
    EXPECT_GT(diff, 0.1 * mag) << "the test's permutations must change the layer";
  }

  // (2) identity permutations through the act-order stages vs the plain layer.
  std::vector<int32_t> id13, id2;
  for (int e = 0; e < c.E; ++e) {
    for (int k = 0; k < c.H; ++k) id13.push_back(k);
    for (int k = 0; k < c.I; ++k) id2.push_back(k);
  }
  DevBuf dp13 = upload(id13), dp2 = upload(id2);
  KernelWeightsView v13 = d13.view, v2 = d2.view;
  if (c.perm13) v13.k_perm = dp13.as<int32_t>();
  if (c.perm2) v2.k_perm = dp2.as<int32_t>();
  MoeArgs plain = a;
  plain.y = dy_plain.p;
  plain.path = MoePath::kFused;
  st = fused_moe(plain, d13.view, d2.view, ws.p, ws_bytes, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  MoeArgs ident = a;
  ident.y = dy_id.p;
  st = fused_moe(ident, v13, v2, ws.p, ws_bytes, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto yp = download<uint16_t>(dy_plain.p, x.size()), yi = download<uint16_t>(dy_id.p, x.size());
  size_t differ = 0;
  for (size_t i = 0; i < yp.size(); ++i) differ += yp[i] != yi[i];
  EXPECT_EQ(differ, 0u) << "identity k_perm differs from the plain layer in " << differ << " of " << yp.size();

  // (4) w2's permutation folded into w13's columns (act_order_fold.h): the layer without w2's
  // gather gives the bits of (1): GEMM1's columns are the same sums wherever they sit, and GEMM2
  // reads in stored order what (1) gathered. Except in fp16 where either layer's GEMM1 runs the
  // decode tile (moe_resolved): its columns 8..15 of every 16 are another fp32 rounding of the
  // same sums (kHiX16, see Int4GemmActOrder), so an intermediate feature moved between the halves
  // may change in its last bits, and with it the token's outputs: checked against the fp64 layer
  // reference as (1).
  if (c.perm2) {
    KPackedWeights k13f = k13p, k2f = k2p;
    st = fold_act_order({&k13f}, &k2f);
    ASSERT_TRUE(st.ok()) << st.to_string();
    KernelWeights w13f, w2f;
    ASSERT_TRUE(repack_for_kernels(k13f, &w13f, c.layout).ok());
    ASSERT_TRUE(repack_for_kernels(k2f, &w2f, c.layout).ok());
    DevWeights d13f(w13f), d2f(w2f);
    ASSERT_TRUE(d13f.status.ok() && d2f.status.ok());
    ASSERT_EQ(d2f.view.k_perm, nullptr);
    size_t ws_fold = 0;
    ASSERT_TRUE(moe_workspace_size(d13f.view, d2f.view, c.m, c.topk, 0, &ws_fold).ok());
    ASSERT_LE(ws_fold, ws_bytes);
    ASSERT_EQ(cudaMemset(dy_id.p, 0xFF, dy_id.bytes), cudaSuccess);
    MoeArgs folded = a;
    folded.y = dy_id.p;
    st = fused_moe(folded, d13f.view, d2f.view, ws.p, ws_bytes, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto yf = download<uint16_t>(dy_id.p, x.size());
    size_t fdiffer = 0;
    for (size_t i = 0; i < yf.size(); ++i) fdiffer += yf[i] != y[i];
    MoeResolved r_act, r_fold;
    ASSERT_TRUE(moe_resolved(a, d13p.view, d2p.view, ws_act, nullptr, &r_act).ok());
    ASSERT_TRUE(moe_resolved(folded, d13f.view, d2f.view, ws_bytes, nullptr, &r_fold).ok());
    const bool hi_x16 = c.act == DType::kF16 && (r_act.gemm1 == MoeTile::kDecode || r_fold.gemm1 == MoeTile::kDecode);
    std::printf("[ info     ] GEMM1 tiles: act-order layer %s, folded layer %s%s\n", moe_tile_name(r_act.gemm1),
                moe_tile_name(r_fold.gemm1), hi_x16 ? " (fp16 on the decode tile: against fp64)" : " (bit for bit)");
    if (hi_x16) {
      if (fdiffer > 0)
        std::printf("[ info     ] fp16: the folded layer's rounding differs from the act-order layer's in %zu of %zu outputs\n",
                    fdiffer, yf.size());
      testing::expect_layer_close(as_double(yf), ref_perm, c.act);
    } else {
      EXPECT_EQ(fdiffer, 0u) << "the folded layer differs from the act-order layer in " << fdiffer << " of " << yf.size();
    }
  }

  // (3) one byte short of the views' size for 16-row align blocks: refused by name, before any
  // launch.
  MoeArgs short_ws = a;
  short_ws.y = dy.p;
  short_ws.block_m = 16;
  st = fused_moe(short_ws, d13p.view, d2p.view, ws.p, ws_bm16 - 1, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("act-order"), std::string::npos) << st.message();
}

std::vector<MoeActCase> moe_act_cases() {
  const int npacked = static_cast<int>(KernelLayoutKind::kNPackedInterleaved);
  return {
      // M = 1: the logits' single-token path for plain experts (bit-identical to four launches).
      {1, 16, 512, 384, 8, 128, true, DType::kBF16, true, true, false, -1},
      // Caller ids with foreign experts; only one of the stacks permuted.
      {4, 8, 256, 128, 2, 64, false, DType::kF16, true, false, true, -1},
      {9, 16, 512, 192, 4, 32, false, DType::kF16, false, true, false, -1},
      // The pipelined tile (align blocks of 16..64 rows), per-channel scales.
      {64, 8, 256, 128, 2, 128, true, DType::kBF16, true, true, true, -1},
      {40, 8, 256, 128, 2, kPerChannel, true, DType::kF16, true, true, false, -1},
      // 128-row align blocks (plain: the warp-specialized layer).
      {300, 4, 256, 512, 2, 64, true, DType::kBF16, true, true, false, -1},
      // N-packed experts (the skinny tile).
      {5, 8, 256, 96, 2, 32, false, DType::kF16, true, true, false, npacked},
      // GEMM1's gather of 0.5 Mi elements (M x topk x H): the row-staged kernel, a token's two pairs
      // written from one staged row.
      {256, 8, 1024, 256, 2, 128, true, DType::kBF16, true, true, false, -1},
  };
}

INSTANTIATE_TEST_SUITE_P(Paths, Int4MoeActOrder, ::testing::ValuesIn(moe_act_cases()), moe_act_name);

// The grouped path is refused for act-order experts (fused_moe and the workspace size), whatever
// the stream; an act-order view with a misaligned k_perm is refused by fused_moe too.
TEST(Int4MoeActOrder, GroupedRefusedByName) {
  const int E = 4, H = 256, I = 128;
  const WeightShape s13{E, 2 * I, H, 64, true, DType::kBF16}, s2{E, H, I, 64, true, DType::kBF16};
  KPackedWeights k13 = random_kpacked(s13, 5), k2 = random_kpacked(s2, 6);
  k13.k_perm = random_k_perm(E, H, 7);
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(k13, &w13).ok());
  ASSERT_TRUE(repack_for_kernels(k2, &w2).ok());
  DevWeights d13(w13), d2(w2);
  size_t bytes = 0;
  Status st = moe_workspace_size(d13.view, d2.view, 8, 2, 0, &bytes, MoePath::kGrouped);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("act-order"), std::string::npos) << st.message();
  ASSERT_TRUE(moe_workspace_size(d13.view, d2.view, 8, 2, 0, &bytes).ok());
  const auto xh = random_act(8 * H, DType::kBF16, 9);
  std::vector<float> lh(8 * E, 0.25f);
  DevBuf x = upload(xh), l = upload(lh), y(8 * H * 2), ws(bytes);
  MoeArgs a = testing::layer_args(x, l, y, 8, 2, 0, MoePath::kGrouped);
  st = fused_moe(a, d13.view, d2.view, ws.p, bytes, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("act-order"), std::string::npos) << st.message();
  a.path = MoePath::kAuto;
  KernelWeightsView odd = d13.view;
  odd.k_perm = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(odd.k_perm) + 2);
  EXPECT_EQ(fused_moe(a, odd, d2.view, ws.p, bytes, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_TRUE(fused_moe(a, d13.view, d2.view, ws.p, bytes, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace lowbit::int4
