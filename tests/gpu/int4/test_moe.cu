// Fused MoE: routing and align match the CPU reference exactly; the whole layer matches an
// fp64 reference (with the act-dtype rounding of the silu*up intermediate) within a stated
// tolerance; bad arguments are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "kernels/int4/internal.h"
#include "kernels/int4/pipelined_plan.h"
#include "lowbit/int4/kernels.h"
#include "lowbit/int4/shard.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/expect_bits.h"
#include "tests/gpu/int4/gpu_buffers.h"
#include "tests/gpu/int4/moe_cpu_ref.h"
#include "tests/gpu/int4/moe_layer_ref.h"

namespace lowbit::int4 {
namespace {

using namespace lowbit::int4::testing;

std::vector<float> random_logits(int M, int E, uint32_t seed, bool with_ties) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> l(static_cast<size_t>(M) * E);
  for (auto& v : l) v = nd(rng);
  if (with_ties)  // quantized logits: many exact ties, which must go to the lower index
    for (auto& v : l) v = std::round(v);
  return l;
}

TEST(Int4MoeRouting, TopkAndAlignExact) {
  // E: the register top-k variants (E <= 32, 64, 128, 256) at and past their bounds, and the
  // loop (E > 256). M: moe_route's one-launch block sizes (256 threads to M = 8, 512 to 16,
  // 1024 to 64) and the two kernels past 64.
  for (int E : {8, 32, 33, 64, 65, 128, 129, 256, 300})
    for (int topk : {1, 2, 6, 8})
      for (int M : {1, 5, 12, 64, 1000})
        for (bool ties : {false, true}) {
          if (topk > E) continue;
          const bool renorm = (M + topk) % 2 == 0;
          auto logits = random_logits(M, E, 17u * M + E + topk, ties);
          DevBuf dl = upload(logits), dids(M * topk * 4), dw(M * topk * 4);
          ASSERT_EQ(cudaMemset(dids.p, 0xFF, dids.bytes), cudaSuccess);
          ASSERT_TRUE(moe_topk(dl.as<float>(), M, E, topk, renorm, dids.as<int32_t>(), dw.as<float>(), nullptr).ok());
          std::vector<int32_t> rid;
          std::vector<float> rw;
          cpu_topk(logits, M, E, topk, renorm, &rid, &rw);
          auto gid = download<int32_t>(dids.p, M * topk);
          auto gw = download<float>(dw.p, M * topk);
          ASSERT_EQ(gid, rid) << "E=" << E << " topk=" << topk << " M=" << M << " ties=" << ties;
          for (size_t i = 0; i < gw.size(); ++i) ASSERT_NEAR(gw[i], rw[i], 1e-5f * std::max(1.f, rw[i])) << i;
          for (int BM : {8, 16, 64}) {
            const int64_t maxp = moe_max_padded(M, topk, E, BM);
            DevBuf ds(maxp * 4), de(maxp / BM * 4), dn(4);
            ASSERT_EQ(cudaMemset(ds.p, 0x7F, ds.bytes), cudaSuccess);
            ASSERT_EQ(cudaMemset(de.p, 0x7F, de.bytes), cudaSuccess);
            ASSERT_TRUE(
                moe_align(dids.as<int32_t>(), M, topk, E, BM, ds.as<int32_t>(), de.as<int32_t>(), dn.as<int32_t>(), nullptr)
                    .ok());
            std::vector<int32_t> rs, re;
            int32_t rn = 0;
            cpu_align(rid, M * topk, E, BM, maxp, &rs, &re, &rn);
            EXPECT_EQ(download<int32_t>(dn.p, 1)[0], rn);
            ASSERT_EQ(download<int32_t>(ds.p, maxp), rs) << "E=" << E << " M=" << M << " BM=" << BM;
            ASSERT_EQ(download<int32_t>(de.p, maxp / BM), re);
            // moe_route: both stages in one launch (M <= 64) or the two kernels; same outputs.
            DevBuf ri(M * topk * 4), rwt(M * topk * 4), rs2(maxp * 4), re2(maxp / BM * 4), rn2(4);
            for (DevBuf* b : {&ri, &rwt, &rs2, &re2, &rn2}) ASSERT_EQ(cudaMemset(b->p, 0x7F, b->bytes), cudaSuccess);
            ASSERT_TRUE(moe_route(dl.as<float>(), M, E, topk, renorm, BM, ri.as<int32_t>(), rwt.as<float>(),
                                  rs2.as<int32_t>(), re2.as<int32_t>(), rn2.as<int32_t>(), nullptr)
                            .ok());
            ASSERT_EQ(download<int32_t>(ri.p, M * topk), rid) << "route ids E=" << E << " M=" << M;
            ASSERT_EQ(download<float>(rwt.p, M * topk), gw) << "route weights equal moe_topk's";
            EXPECT_EQ(download<int32_t>(rn2.p, 1)[0], rn);
            ASSERT_EQ(download<int32_t>(rs2.p, maxp), rs) << "route E=" << E << " M=" << M << " BM=" << BM;
            ASSERT_EQ(download<int32_t>(re2.p, maxp / BM), re);
          }
        }
}

// Non-finite router logits (moe_topk in kernels.h): NaN and -inf are never picked; a token with
// fewer than topk other logits gets expert 0 at weight exactly 0 for the missing picks; a NaN
// logit makes all of its token's weights NaN. Every register variant (E = 16 / 200) and the loop
// (E = 300), with and without renormalization; moe_route gives the same ids and aligns them.
TEST(Int4MoeRouting, NonFiniteLogitsPickRealExperts) {
  const float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (int E : {16, 200, 300})
    for (bool renorm : {true, false}) {
      SCOPED_TRACE("E=" + std::to_string(E) + " renorm=" + std::to_string(renorm));
      const int M = 5, topk = 8, finite_n = 3;
      auto logits = random_logits(M, E, 91u + E, false);
      float* r = logits.data();
      // Row 1: three finite logits (experts 2, 5, E - 1), the rest -inf: a masked router.
      for (int e = 0; e < E; ++e)
        if (e != 2 && e != 5 && e != E - 1) r[E + e] = -kInf;
      // Row 2: one NaN logit; row 3: all NaN; row 4: all -inf. Row 0: finite (the control).
      r[2 * E + 7] = kNaN;
      for (int e = 0; e < E; ++e) r[3 * E + e] = kNaN, r[4 * E + e] = -kInf;
      DevBuf dl = upload(logits), dids(M * topk * 4), dw(M * topk * 4);
      ASSERT_EQ(cudaMemset(dids.p, 0x7F, dids.bytes), cudaSuccess);
      ASSERT_TRUE(moe_topk(dl.as<float>(), M, E, topk, renorm, dids.as<int32_t>(), dw.as<float>(), nullptr).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto id = download<int32_t>(dids.p, M * topk);
      const auto w = download<float>(dw.p, M * topk);
      std::vector<int32_t> rid;
      std::vector<float> rw;
      cpu_topk(std::vector<float>(r, r + E), 1, E, topk, renorm, &rid, &rw);
      for (int s = 0; s < topk; ++s) {
        EXPECT_EQ(id[s], rid[s]) << "row 0 slot " << s;
        EXPECT_NEAR(w[s], rw[s], 1e-5f) << "row 0 slot " << s;
      }
      // Row 1: the three finite experts in logit order, their softmax over the three, then expert 0 at 0.
      const float* r1 = r + E;
      std::vector<int> fin = {2, 5, E - 1};
      std::sort(fin.begin(), fin.end(), [&](int a, int b) { return r1[a] > r1[b] || (r1[a] == r1[b] && a < b); });
      double z = 0;
      for (int e : fin) z += std::exp(static_cast<double>(r1[e]) - r1[fin[0]]);
      for (int s = 0; s < topk; ++s) {
        if (s < finite_n) {
          EXPECT_EQ(id[topk + s], fin[s]) << "row 1 slot " << s;
          EXPECT_NEAR(w[topk + s], std::exp(static_cast<double>(r1[fin[s]]) - r1[fin[0]]) / z, 1e-5) << "row 1 slot " << s;
        } else {
          EXPECT_EQ(id[topk + s], 0) << "row 1 slot " << s << ": a missing pick names expert 0";
          EXPECT_EQ(w[topk + s], 0.f) << "row 1 slot " << s << ": at weight exactly 0";
        }
      }
      // Row 2: the picks of the row without its NaN expert; every weight NaN.
      std::vector<float> r2(r + 2 * E, r + 3 * E);
      r2[7] = -1e30f;  // below every other logit: never among the top 8 of E - 1 >= 15
      cpu_topk(r2, 1, E, topk, renorm, &rid, &rw);
      for (int s = 0; s < topk; ++s) {
        EXPECT_EQ(id[2 * topk + s], rid[s]) << "row 2 slot " << s;
        EXPECT_TRUE(std::isnan(w[2 * topk + s])) << "row 2 slot " << s << ": a NaN logit makes the weights NaN";
      }
      // Rows 3 / 4: nothing pickable: expert 0 everywhere, non-finite weights.
      for (int row : {3, 4})
        for (int s = 0; s < topk; ++s) {
          EXPECT_EQ(id[row * topk + s], 0) << "row " << row << " slot " << s;
          EXPECT_FALSE(std::isfinite(w[row * topk + s])) << "row " << row << " slot " << s;
        }
      // moe_route: the same ids and weights, aligned like the CPU reference aligns them.
      const int BM = 8;
      const int64_t maxp = moe_max_padded(M, topk, E, BM);
      DevBuf ri(M * topk * 4), rwt(M * topk * 4), rs(maxp * 4), re(maxp / BM * 4), rn(4);
      for (DevBuf* b : {&ri, &rwt, &rs, &re, &rn}) ASSERT_EQ(cudaMemset(b->p, 0x7F, b->bytes), cudaSuccess);
      ASSERT_TRUE(moe_route(dl.as<float>(), M, E, topk, renorm, BM, ri.as<int32_t>(), rwt.as<float>(), rs.as<int32_t>(),
                            re.as<int32_t>(), rn.as<int32_t>(), nullptr)
                      .ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(download<int32_t>(ri.p, M * topk), id);
      const auto w2 = download<float>(rwt.p, M * topk);
      for (size_t i = 0; i < w.size(); ++i)
        EXPECT_TRUE(std::memcmp(&w2[i], &w[i], 4) == 0 || (std::isnan(w2[i]) && std::isnan(w[i]))) << i;
      std::vector<int32_t> as, ae;
      int32_t an = 0;
      cpu_align(id, M * topk, E, BM, maxp, &as, &ae, &an);
      EXPECT_EQ(download<int32_t>(rn.p, 1)[0], an);
      EXPECT_EQ(download<int32_t>(rs.p, maxp), as);
      EXPECT_EQ(download<int32_t>(re.p, maxp / BM), ae);
    }
}

// The whole layer on those rows, on every path that routes logits (the single-token path, the
// four launches, the grouped path): nothing crashes or reads past the experts; the masked token
// gives the fp64 reference of its three real picks; the token with a NaN logit comes out NaN and
// leaves the other tokens as they were; the masked token's output is the caller routing's with
// the missing picks foreign (-1) and the same weights (bit for bit on the fused paths).
TEST(Int4MoeRouting, NonFiniteLogitsLayer) {
  const int E = 16, H = 512, I = 384, topk = 8, M = 4;
  const DType act = DType::kBF16;
  WeightShape s13{E, 2 * I, H, 128, false, act}, s2{E, H, I, 128, false, act};
  KPackedWeights k13 = random_kpacked(s13, 515u, 0.05f), k2 = random_kpacked(s2, 616u, 0.05f);
  KernelWeights w13, w2;
  const int tiled = static_cast<int>(KernelLayoutKind::kMmaTiled);
  ASSERT_TRUE(repack_for_kernels(k13, &w13, tiled).ok());
  ASSERT_TRUE(repack_for_kernels(k2, &w2, tiled).ok());
  DevWeights d13(w13), d2(w2);
  struct Restore {
    ~Restore() { detail::set_moe_single_max_m(0); }
  } restore;
  std::mt19937 rng(23u);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(M) * H);
  for (auto& v : x) v = float_to_half_bits(act, (rng() & 1) ? u(rng) : -u(rng));
  auto finite = random_logits(M, E, 57u, false);
  auto logits = finite;
  for (int e = 0; e < E; ++e)
    if (e != 3 && e != 9 && e != 12) logits[E + e] = -std::numeric_limits<float>::infinity();  // token 1: masked
  logits[2 * E + 4] = std::numeric_limits<float>::quiet_NaN();                                    // token 2: a NaN
  const size_t P = static_cast<size_t>(M) * topk;
  DevBuf dx = upload(x), dl = upload(logits), dlf = upload(finite), dids(P * 4), dw(P * 4);
  ASSERT_TRUE(moe_topk(dl.as<float>(), M, E, topk, true, dids.as<int32_t>(), dw.as<float>(), nullptr).ok());
  auto ids = download<int32_t>(dids.p, P);
  const auto wts = download<float>(dw.p, P);
  for (int s = 3; s < topk; ++s) ids[topk + s] = -1;  // token 1's missing picks, foreign for the caller run
  ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), P * 4, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<int32_t> ref_ids = ids;
  for (int s = 0; s < topk; ++s) ref_ids[2 * topk + s] = -1;  // the NaN token: compared apart
  const auto ref = moe_reference_routed(x, ref_ids, wts, M, E, H, I, topk, act, k13, k2);
  struct PathCase {
    const char* name;
    MoePath path;
    int single_max_m;  // set_moe_single_max_m: 0 = the rule (single-token at M = 4 on these small experts)
    bool bits;         // bit-identical to the caller-routed call
  };
  for (const PathCase& pc : {PathCase{"single-token", MoePath::kFused, 0, true},
                             PathCase{"four launches", MoePath::kFused, 1, true},
                             PathCase{"grouped", MoePath::kGrouped, 0, false}}) {
    SCOPED_TRACE(pc.name);
    detail::set_moe_single_max_m(pc.single_max_m);
    size_t wsb = 0;
    ASSERT_TRUE(moe_workspace_size(M, topk, E, H, I, act, 0, &wsb, pc.path).ok());
    DevBuf ws(wsb), dy(x.size() * 2), dyf(x.size() * 2), dyc(x.size() * 2);
    for (DevBuf* b : {&ws, &dy, &dyf, &dyc}) ASSERT_EQ(cudaMemset(b->p, 0xFF, b->bytes), cudaSuccess);
    MoeArgs a = layer_args(dx, dl, dy, M, topk, 0, pc.path);
    MoeResolved res;
    ASSERT_TRUE(moe_resolved(a, d13.view, d2.view, wsb, nullptr, &res).ok());
    if (pc.path == MoePath::kFused) EXPECT_EQ(res.single_token, pc.single_max_m == 0);
    Status st = fused_moe(a, d13.view, d2.view, ws.p, wsb, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the layer on non-finite logits";
    MoeArgs af = layer_args(dx, dlf, dyf, M, topk, 0, pc.path);
    ASSERT_TRUE(fused_moe(af, d13.view, d2.view, ws.p, wsb, nullptr).ok());
    MoeArgs ac = a;
    ac.router_logits = nullptr;
    ac.topk_ids = dids.as<int32_t>();
    ac.topk_weights = dw.as<float>();
    ac.y = dyc.p;
    ASSERT_TRUE(fused_moe(ac, d13.view, d2.view, ws.p, wsb, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = download<uint16_t>(dy.p, x.size()), yf = download<uint16_t>(dyf.p, x.size()),
               yc = download<uint16_t>(dyc.p, x.size());
    std::vector<double> got(y.size());
    for (size_t i = 0; i < y.size(); ++i) got[i] = half_bits_to_float(act, y[i]);
    for (int h = 0; h < H; ++h) {
      ASSERT_TRUE(std::isnan(got[2 * H + h])) << "the NaN token's output " << h;
      got[2 * H + h] = 0;  // its reference row (all picks left out) is zero
      for (int t : {0, 3})  // the other tokens, as with finite logits (the rows are computed alone on the fused paths)
        if (pc.bits) ASSERT_EQ(y[t * H + h], yf[t * H + h]) << "token " << t << " column " << h;
      if (pc.bits) ASSERT_EQ(y[H + h], yc[H + h]) << "the masked token against the caller's foreign picks, column " << h;
    }
    expect_layer_close(got, ref, act);
  }
}

struct MoeCase {
  int m, E, H, I, topk, g;
  bool sym;
  DType act;
  int block_m;  // 0 = default
  MoePath path = MoePath::kAuto;
  int layout = -1;  // expert layout forced (KernelLayoutKind), -1: the shape's default
};

class Int4FusedMoe : public ::testing::TestWithParam<MoeCase> {};

TEST_P(Int4FusedMoe, MatchesReference) {
  const MoeCase c = GetParam();
  WeightShape s13{c.E, 2 * c.I, c.H, c.g, c.sym, c.act}, s2{c.E, c.H, c.I, c.g, c.sym, c.act};
  KPackedWeights k13 = random_kpacked(s13, 101u + c.I, 0.05f), k2 = random_kpacked(s2, 202u + c.H, 0.05f);
  KernelWeights w13, w2;
  Status rs = repack_for_kernels(k13, &w13, c.layout);
  ASSERT_TRUE(rs.ok()) << rs.to_string();
  rs = repack_for_kernels(k2, &w2, c.layout);
  ASSERT_TRUE(rs.ok()) << rs.to_string();
  DevWeights d13(w13), d2(w2);
  std::mt19937 rng(5u + c.m);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(c.m) * c.H);
  for (auto& v : x) v = float_to_half_bits(c.act, (rng() & 1) ? u(rng) : -u(rng));
  auto logits = random_logits(c.m, c.E, 9u + c.m, false);
  DevBuf dx = upload(x), dl = upload(logits), dy(x.size() * 2);
  ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);
  size_t wsb = 0;
  ASSERT_TRUE(moe_workspace_size(c.m, c.topk, c.E, c.H, c.I, c.act, c.block_m, &wsb, c.path).ok());
  DevBuf ws(wsb);
  ASSERT_EQ(cudaMemset(ws.p, 0xFF, wsb), cudaSuccess);
  const MoeArgs a = layer_args(dx, dl, dy, c.m, c.topk, c.block_m, c.path);
  Status st = fused_moe(a, d13.view, d2.view, ws.p, wsb, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto y = download<uint16_t>(dy.p, x.size());

  std::vector<double> got(y.size());
  for (size_t i = 0; i < y.size(); ++i) got[i] = half_bits_to_float(c.act, y[i]);
  expect_layer_close(got, moe_reference(x, logits, c.m, c.E, c.H, c.I, c.topk, c.act, k13, k2), c.act);
}

// Caller routing (MoeArgs::topk_ids / topk_weights): (1) the ids and weights moe_topk computes,
// passed back in, give the same bits as router_logits (at small M both take the single-token
// path, whose blocks then read their picks instead of routing); (2) ids outside [0, E) (-1 and E + 2:
// experts of other ranks) and weights that are no softmax (a sigmoid-like score times 2.5, as a
// routed scaling factor) match the fp64 reference that leaves those slots out; a token whose
// slots are all foreign comes out zero; (3) both routings, or ids without weights, are refused.
struct RoutedCase {
  int m, E, H, I, topk, g;
  DType act;
  MoePath path;
  int layout = -1;
};
class Int4MoeCallerRouted : public ::testing::TestWithParam<RoutedCase> {};

TEST_P(Int4MoeCallerRouted, SameBitsAsLogitsAndForeignIdsDropOut) {
  const RoutedCase c = GetParam();
  WeightShape s13{c.E, 2 * c.I, c.H, c.g, false, c.act}, s2{c.E, c.H, c.I, c.g, false, c.act};
  KPackedWeights k13 = random_kpacked(s13, 303u + c.I, 0.05f), k2 = random_kpacked(s2, 404u + c.H, 0.05f);
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(k13, &w13, c.layout).ok());
  ASSERT_TRUE(repack_for_kernels(k2, &w2, c.layout).ok());
  DevWeights d13(w13), d2(w2);
  std::mt19937 rng(17u + c.m);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(c.m) * c.H);
  for (auto& v : x) v = float_to_half_bits(c.act, (rng() & 1) ? u(rng) : -u(rng));
  const auto logits = random_logits(c.m, c.E, 29u + c.m, false);
  const size_t P = static_cast<size_t>(c.m) * c.topk;
  DevBuf dx = upload(x), dl = upload(logits), dy(x.size() * 2), dy2(x.size() * 2), dids(P * 4), dw(P * 4);
  size_t wsb = 0;
  ASSERT_TRUE(moe_workspace_size(c.m, c.topk, c.E, c.H, c.I, c.act, 0, &wsb, c.path).ok());
  DevBuf ws(wsb);
  for (DevBuf* b : {&dy, &dy2, &ws}) ASSERT_EQ(cudaMemset(b->p, 0xFF, b->bytes), cudaSuccess);
  MoeArgs a = layer_args(dx, dl, dy, c.m, c.topk, 0, c.path);
  Status st = fused_moe(a, d13.view, d2.view, ws.p, wsb, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // (1) moe_topk's own ids and weights, routed by the caller.
  ASSERT_TRUE(moe_topk(dl.as<float>(), c.m, c.E, c.topk, true, dids.as<int32_t>(), dw.as<float>(), nullptr).ok());
  MoeArgs r = a;
  r.router_logits = nullptr;
  r.topk_ids = dids.as<int32_t>();
  r.topk_weights = dw.as<float>();
  r.y = dy2.p;
  st = fused_moe(r, d13.view, d2.view, ws.p, wsb, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(download<uint16_t>(dy2.p, x.size()), download<uint16_t>(dy.p, x.size()))
      << "caller routing with moe_topk's ids and weights must give router_logits' bits";
  // (2) foreign ids and non-softmax weights.
  std::vector<int32_t> ids = download<int32_t>(dids.p, P);
  std::vector<float> wts(P);
  for (size_t p = 0; p < P; ++p) {
    wts[p] = 2.5f / (1.f + std::exp(-0.37f * static_cast<float>(p % 7) + 1.f));
    if (p % 5 == 1) ids[p] = -1;
    if (p % 7 == 3) ids[p] = c.E + 2;
  }
  for (int s = 0; s < c.topk; ++s) ids[static_cast<size_t>(c.m - 1) * c.topk + s] = -1;  // the last token: none here
  ASSERT_EQ(cudaMemcpy(dids.p, ids.data(), P * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dw.p, wts.data(), P * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dy2.p, 0xFF, dy2.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws.p, 0xFF, wsb), cudaSuccess);
  st = fused_moe(r, d13.view, d2.view, ws.p, wsb, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = download<uint16_t>(dy2.p, x.size());
  std::vector<double> got(y.size());
  for (size_t i = 0; i < y.size(); ++i) got[i] = half_bits_to_float(c.act, y[i]);
  for (int h = 0; h < c.H; ++h)
    ASSERT_EQ(got[static_cast<size_t>(c.m - 1) * c.H + h], 0.0) << "a token with no expert here sums to zero";
  if (c.m > 1) expect_layer_close(got, moe_reference_routed(x, ids, wts, c.m, c.E, c.H, c.I, c.topk, c.act, k13, k2), c.act);
  // (3) refusals.
  MoeArgs both = r;
  both.router_logits = dl.as<float>();
  st = fused_moe(both, d13.view, d2.view, ws.p, wsb, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("both given"), std::string::npos) << st.message();
  MoeArgs half = r;
  half.topk_weights = nullptr;
  st = fused_moe(half, d13.view, d2.view, ws.p, wsb, nullptr);
  EXPECT_NE(st.message().find("come together"), std::string::npos) << st.message();
  MoeArgs none = r;
  none.topk_ids = nullptr;
  none.topk_weights = nullptr;
  st = fused_moe(none, d13.view, d2.view, ws.p, wsb, nullptr);
  EXPECT_NE(st.message().find("no routing"), std::string::npos) << st.message();
}

// M = 1 / 2 / 4 (the logits' single-token path), 9 (the decode tile's four launches), 64 and 300
// (the pipelined tile; 300 with I = 512: the warp-specialized layer), the grouped path, and the
// N-packed experts (skinny tile).
INSTANTIATE_TEST_SUITE_P(
    Paths, Int4MoeCallerRouted,
    ::testing::Values(RoutedCase{1, 16, 512, 384, 8, 128, DType::kBF16, MoePath::kAuto},
                      RoutedCase{2, 8, 256, 128, 2, 64, DType::kF16, MoePath::kAuto},
                      RoutedCase{4, 16, 256, 128, 4, 128, DType::kBF16, MoePath::kAuto},
                      RoutedCase{9, 16, 512, 192, 4, 32, DType::kF16, MoePath::kFused},
                      RoutedCase{64, 8, 256, 128, 2, 128, DType::kBF16, MoePath::kFused},
                      RoutedCase{300, 4, 256, 512, 2, 64, DType::kBF16, MoePath::kFused},
                      RoutedCase{40, 8, 256, 128, 2, kPerChannel, DType::kF16, MoePath::kGrouped},
                      RoutedCase{5, 8, 256, 128, 2, 64, DType::kBF16, MoePath::kFused,
                                 static_cast<int>(KernelLayoutKind::kNPackedInterleaved)}));

// One MoE layer over TP ranks (shard.h): w13 split by its [gate; up] halves, w2 by rows, whose
// per-rank K range cuts a scale group as DeepSeek-V2-Lite's does at TP 2 (I = 384 = 3 groups of
// 128 here: 192 rows per rank at TP 2 -> G' = 64, 96 at TP 4 -> G' = 32; the TP 4 w13 shards of
// 192 columns take the N-packed expert layout). Each rank runs fused_moe on its shards; their
// outputs add up (the all-reduce) to the whole layer's fp64 reference.
struct TpMoeCase {
  int m, ranks;
  bool sym;
  DType act;
};
class Int4MoeTpShards : public ::testing::TestWithParam<TpMoeCase> {};

TEST_P(Int4MoeTpShards, RanksSumToTheWholeLayer) {
  const TpMoeCase c = GetParam();
  constexpr int E = 8, H = 256, I = 384, topk = 2;
  const WeightShape s13{E, 2 * I, H, 128, c.sym, c.act}, s2{E, H, I, 128, c.sym, c.act};
  const KPackedWeights k13 = random_kpacked(s13, 303u + c.ranks, 0.05f), k2 = random_kpacked(s2, 404u + c.m, 0.05f);
  std::mt19937 rng(7u + c.m);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(c.m) * H);
  for (auto& v : x) v = float_to_half_bits(c.act, (rng() & 1) ? u(rng) : -u(rng));
  const auto logits = random_logits(c.m, E, 11u + c.m, false);
  DevBuf dx = upload(x), dl = upload(logits), dy(x.size() * 2);
  std::vector<double> sum(x.size(), 0.0);
  for (int r = 0; r < c.ranks; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r << " of " << c.ranks);
    KPackedWeights r13, r2;
    Status st = tp_shard(k13, TpSplit::kGateUp, r, c.ranks, &r13);
    ASSERT_TRUE(st.ok()) << st.to_string();
    st = tp_shard(k2, TpSplit::kRows, r, c.ranks, &r2);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(r2.shape.group_size, c.ranks == 2 ? 64 : 32);
    KernelWeights w13, w2;
    st = repack_for_kernels(r13, &w13);
    ASSERT_TRUE(st.ok()) << st.to_string();
    st = repack_for_kernels(r2, &w2);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(w13.kind, c.ranks == 2 ? KernelLayoutKind::kMmaTiled : KernelLayoutKind::kNPackedInterleaved);
    DevWeights d13(w13), d2(w2);
    ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // NaN poison
    size_t wsb = 0;
    st = moe_workspace_size(c.m, topk, E, H, I / c.ranks, c.act, 0, &wsb);
    ASSERT_TRUE(st.ok()) << st.to_string();
    DevBuf ws(wsb);
    ASSERT_EQ(cudaMemset(ws.p, 0xFF, wsb), cudaSuccess);
    st = fused_moe(layer_args(dx, dl, dy, c.m, topk, 0, MoePath::kAuto), d13.view, d2.view, ws.p, wsb, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = download<uint16_t>(dy.p, x.size());
    for (size_t i = 0; i < y.size(); ++i) sum[i] += half_bits_to_float(c.act, y[i]);
  }
  expect_layer_close(sum, moe_reference(x, logits, c.m, E, H, I, topk, c.act, k13, k2), c.act);
}

INSTANTIATE_TEST_SUITE_P(DeepSeekLike, Int4MoeTpShards,
                         ::testing::Values(TpMoeCase{1, 2, true, DType::kBF16}, TpMoeCase{5, 2, false, DType::kBF16},
                                           TpMoeCase{64, 2, true, DType::kF16}, TpMoeCase{3, 4, false, DType::kBF16},
                                           TpMoeCase{40, 4, true, DType::kF16}));

INSTANTIATE_TEST_SUITE_P(Small, Int4FusedMoe,
                         ::testing::Values(MoeCase{1, 8, 256, 128, 2, 128, true, DType::kBF16, 0},
                                           MoeCase{5, 8, 256, 128, 2, 128, false, DType::kBF16, 0},
                                           MoeCase{64, 8, 256, 128, 2, 128, true, DType::kF16, 0},
                                           MoeCase{64, 8, 256, 128, 2, 32, false, DType::kBF16, 16},
                                           MoeCase{5, 8, 256, 128, 2, kPerChannel, false, DType::kF16, 8},
                                           MoeCase{3, 16, 128, 96, 4, 32, false, DType::kBF16, 64}));  // I % 64 != 0

// The grouped prefill path (dequantized experts + cuBLAS) forced at small sizes, and the
// fused path forced explicitly. Shapes make several experts
// share one slab fill, leave experts without tokens (E=16, topk=1, M=5), and use every
// G / sym / dtype.
INSTANTIATE_TEST_SUITE_P(
    Paths, Int4FusedMoe,
    ::testing::Values(MoeCase{1, 8, 256, 128, 2, 128, true, DType::kBF16, 0, MoePath::kGrouped},
                      MoeCase{5, 16, 256, 128, 1, 128, false, DType::kBF16, 0, MoePath::kGrouped},
                      MoeCase{64, 8, 256, 128, 2, 128, true, DType::kF16, 0, MoePath::kGrouped},
                      MoeCase{64, 8, 256, 128, 2, 32, false, DType::kBF16, 16, MoePath::kGrouped},
                      MoeCase{40, 8, 256, 128, 2, kPerChannel, false, DType::kF16, 0, MoePath::kGrouped},
                      MoeCase{33, 16, 128, 96, 4, 32, false, DType::kBF16, 0, MoePath::kGrouped},
                      MoeCase{48, 4, 256, 64, 2, 64, true, DType::kF16, 1, MoePath::kGrouped},
                      MoeCase{64, 8, 256, 128, 2, 128, true, DType::kBF16, 0, MoePath::kFused}));

// The same layer on each expert layout: N-packed forced (skinny_tile.cuh), and the default
// (MMA-tiled for these shapes: the decode kernel's MoE modes; grouped reads it too).
constexpr int kNPacked = static_cast<int>(KernelLayoutKind::kNPackedInterleaved);
INSTANTIATE_TEST_SUITE_P(
    Layouts, Int4FusedMoe,
    ::testing::Values(MoeCase{1, 8, 256, 128, 2, 128, true, DType::kBF16, 0, MoePath::kFused, kNPacked},
                      MoeCase{5, 8, 256, 128, 2, 64, false, DType::kF16, 0, MoePath::kFused, kNPacked},
                      MoeCase{1, 16, 512, 384, 8, 128, false, DType::kBF16, 0, MoePath::kFused},
                      MoeCase{9, 16, 512, 192, 4, 32, true, DType::kF16, 0, MoePath::kFused},
                      MoeCase{20, 4, 256, 128, 2, kPerChannel, false, DType::kBF16, 12, MoePath::kFused},
                      MoeCase{6, 16, 512, 192, 4, 64, false, DType::kBF16, 0, MoePath::kGrouped}));

// The pipelined tile's MoE modes (moe_pipelined.cu: align blocks of 16 / 32 / 64 rows, 128 with
// wgmma, else the decode tile; 32-row blocks on wgmma where it runs): I / 64 odd (the last
// gate/up tile holds one group of each), H = 192 (a column tile of 3 groups), G = 32 (stages
// span two groups), per-channel,
// both dtypes, sym and asym, and kAuto's block size (128 rows once experts average > 128).
constexpr int kTiled = static_cast<int>(KernelLayoutKind::kMmaTiled);
INSTANTIATE_TEST_SUITE_P(
    Pipelined, Int4FusedMoe,
    ::testing::Values(MoeCase{64, 16, 256, 192, 4, 64, true, DType::kBF16, 16, MoePath::kFused},
                      MoeCase{100, 8, 512, 128, 2, 64, false, DType::kF16, 32, MoePath::kFused},
                      MoeCase{200, 8, 256, 256, 2, 32, false, DType::kBF16, 64, MoePath::kFused},
                      MoeCase{300, 8, 256, 128, 2, kPerChannel, true, DType::kF16, 128, MoePath::kFused},
                      MoeCase{160, 4, 192, 192, 2, 32, false, DType::kBF16, 0, MoePath::kFused, kTiled},
                      MoeCase{96, 6, 192, 64, 3, 64, true, DType::kF16, 32, MoePath::kFused, kTiled},
                      MoeCase{520, 8, 256, 128, 2, 128, false, DType::kBF16, 0, MoePath::kFused},
                      // I >= 512 with 128-row blocks: the warp-specialized layer by default.
                      MoeCase{300, 4, 256, 512, 2, 64, false, DType::kBF16, 128, MoePath::kFused},
                      // 16 rows per expert on average: kAuto's 32-row blocks with wgmma (session 25).
                      MoeCase{64, 8, 256, 128, 2, 128, true, DType::kF16, 0, MoePath::kFused}));

// fused_moe's 128-row align blocks on the warp-specialized tile (moe_pipelined.cu: x gathered
// into the align order, GEMM1 storing inter in that order, both GEMMs reading x by tensor copies)
// run the pipelined tile's warpgroup math and epilogue expressions, so the layer's outputs are
// bit-identical with the path on and off. Cases: GEMM1 streams 32 stages (H = 2048: the ring of 8
// turns), symmetric bf16; per-channel asymmetric bf16 with experts left without tokens (E = 16,
// topk 1) and padding rows; I / 64 odd (the last gate/up tile holds one group of each) in fp16
// with topk 3; G = 32 (stages of two scale rows), asymmetric fp16, GEMM2 K = 192 (3 stages). The
// path must have run where on (the launch counter) and not where off. Skipped without wgmma.
TEST(Int4MoePipelinedWs, BitIdenticalToPipelinedTile) {
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "wgmma tiles not available (sm_90a build and device)";
  struct Case {
    int m, E, H, I, topk, g;
    bool sym;
    DType act;
  };
  const Case cases[] = {{300, 8, 2048, 1024, 2, 128, true, DType::kBF16},
                        {180, 16, 1536, 256, 1, kPerChannel, false, DType::kBF16},
                        {260, 4, 640, 320, 3, 64, true, DType::kF16},
                        {200, 8, 1024, 192, 2, 32, false, DType::kF16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << dtype_name(c.act) << " M=" << c.m << " E=" << c.E << " H=" << c.H
                                      << " I=" << c.I << " topk=" << c.topk << " G=" << c.g
                                      << (c.sym ? " sym" : " asym"));
    WeightShape s13{c.E, 2 * c.I, c.H, c.g, c.sym, c.act}, s2{c.E, c.H, c.I, c.g, c.sym, c.act};
    KernelWeights w13, w2;
    ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 31u + c.I, 0.05f), &w13, kTiled).ok());
    ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 47u + c.H, 0.05f), &w2, kTiled).ok());
    DevWeights d13(w13), d2(w2);
    std::mt19937 rng(11u + c.m);
    std::uniform_real_distribution<float> u(0.1f, 1.f);
    std::vector<uint16_t> x(static_cast<size_t>(c.m) * c.H);
    for (auto& v : x) v = float_to_half_bits(c.act, (rng() & 1) ? u(rng) : -u(rng));
    const auto logits = random_logits(c.m, c.E, 3u + c.m, false);
    DevBuf dx = upload(x), dl = upload(logits);
    size_t wsb = 0;
    ASSERT_TRUE(moe_workspace_size(c.m, c.topk, c.E, c.H, c.I, c.act, 128, &wsb, MoePath::kFused).ok());
    DevBuf ws(wsb);
    std::vector<uint16_t> out[2];
    for (int mode : {1, 2}) {  // off, on
      DevBuf dy(x.size() * 2);
      ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // NaN poison
      ASSERT_EQ(cudaMemset(ws.p, 0xFF, wsb), cudaSuccess);
      const MoeArgs a = layer_args(dx, dl, dy, c.m, c.topk, 128, MoePath::kFused);
      const long long before = detail::moe_ws_launches();
      detail::set_moe_ws(mode);
      MoeResolved r;
      ASSERT_TRUE(moe_resolved(a, d13.view, d2.view, wsb, nullptr, &r).ok());
      const Status st = fused_moe(a, d13.view, d2.view, ws.p, wsb, nullptr);
      detail::set_moe_ws(0);
      EXPECT_EQ(r.gemm1, mode == 2 ? MoeTile::kWarpSpecialized : MoeTile::kPipelined) << moe_tile_name(r.gemm1);
      EXPECT_EQ(r.gemm2, r.gemm1) << moe_tile_name(r.gemm2);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(detail::moe_ws_launches() - before, mode == 2 ? 1 : 0);
      out[mode - 1] = download<uint16_t>(dy.p, x.size());
    }
    expect_same_bits_all_written(c.act, out[0], out[1]);
  }
}

// The warp-specialized layer (taken by default here: 128-row blocks, I = 1024) captured in a CUDA
// graph: the tensor maps are encoded at capture, with the graph's buffers. Two replays, the output
// poisoned before each, are bit-identical to the eager call on the same workspace.
TEST(Int4MoePipelinedWs, GraphReplayBitIdentical) {
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "wgmma tiles not available (sm_90a build and device)";
  const int m = 300, E = 8, H = 2048, I = 1024, topk = 2;
  WeightShape s13{E, 2 * I, H, 128, true, DType::kBF16}, s2{E, H, I, 128, true, DType::kBF16};
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 71u, 0.05f), &w13, kTiled).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 73u, 0.05f), &w2, kTiled).ok());
  DevWeights d13(w13), d2(w2);
  std::mt19937 rng(17u);
  std::uniform_real_distribution<float> u(0.1f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(m) * H);
  for (auto& v : x) v = float_to_half_bits(DType::kBF16, (rng() & 1) ? u(rng) : -u(rng));
  DevBuf dx = upload(x), dl = upload(random_logits(m, E, 19u, false)), y1(x.size() * 2), y2(x.size() * 2);
  size_t wsb = 0;
  ASSERT_TRUE(moe_workspace_size(m, topk, E, H, I, DType::kBF16, 128, &wsb, MoePath::kFused).ok());
  DevBuf ws(wsb);
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  // Poison on the layer's stream (a non-blocking stream does not wait for the legacy one).
  ASSERT_EQ(cudaMemsetAsync(ws.p, 0xFF, wsb, st), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(y1.p, 0xFF, y1.bytes, st), cudaSuccess);
  MoeArgs a = layer_args(dx, dl, y1, m, topk, 128, MoePath::kAuto);
  const long long before = detail::moe_ws_launches();
  ASSERT_TRUE(fused_moe(a, d13.view, d2.view, ws.p, wsb, st).ok());
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(detail::moe_ws_launches() - before, 1);  // the default rule took the layer
  const auto ref = download<uint16_t>(y1.p, x.size());
  a.y = y2.p;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status captured = fused_moe(a, d13.view, d2.view, ws.p, wsb, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured.to_string();
  EXPECT_EQ(detail::moe_ws_launches() - before, 2);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaMemsetAsync(y2.p, 0xFF, y2.bytes, st), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    expect_same_bits_all_written(DType::kBF16, ref, download<uint16_t>(y2.p, x.size()));
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
}

// The single-token path (fused_moe at small M on MMA-tiled experts: a block per pick, routing
// inside both GEMMs, the slot sum inside GEMM2) against the four launches of the same stages
// (moe_route, moe_gemm1, moe_gemm2, moe_sum) on the same weights: bit-identical outputs, at M =
// 1 and, with the path's bound raised to kMoeSingleMaxM, at M = 2, 3 and 8 (tokens that pick
// the same expert, per-token counters and slot rows). Each case runs the layer twice with
// different logits on one workspace (the sum counters must start from zero again) and replays
// it from a CUDA graph; outputs and workspace are poisoned first.
struct SingleCase {
  int E, H, I, topk, g;
  bool sym, renorm, ties;
  DType act;
};
class Int4MoeSingleToken : public ::testing::TestWithParam<SingleCase> {};

TEST_P(Int4MoeSingleToken, BitIdenticalToFourLaunches) {
  const SingleCase c = GetParam();
  WeightShape s13{c.E, 2 * c.I, c.H, c.g, c.sym, c.act}, s2{c.E, c.H, c.I, c.g, c.sym, c.act};
  KPackedWeights k13 = random_kpacked(s13, 31u + c.E, 0.05f), k2 = random_kpacked(s2, 47u + c.H, 0.05f);
  KernelWeights w13, w2;
  const int tiled = static_cast<int>(KernelLayoutKind::kMmaTiled);
  ASSERT_TRUE(repack_for_kernels(k13, &w13, tiled).ok());
  ASSERT_TRUE(repack_for_kernels(k2, &w2, tiled).ok());
  DevWeights d13(w13), d2(w2);
  struct Restore {  // the path's bound back to its rule, also when an assertion returns early
    ~Restore() { detail::set_moe_single_max_m(0); }
  } restore;
  for (int M : {1, 2, 3, detail::kMoeSingleMaxM}) {
    SCOPED_TRACE("M=" + std::to_string(M));
    detail::set_moe_single_max_m(M == 1 ? 0 : detail::kMoeSingleMaxM);  // M = 1: the default rule's path
    std::mt19937 rng(77u + c.E + M);
    std::uniform_real_distribution<float> u(0.1f, 1.f);
    std::vector<uint16_t> x(static_cast<size_t>(M) * c.H);
    for (auto& v : x) v = float_to_half_bits(c.act, (rng() & 1) ? u(rng) : -u(rng));
    DevBuf dx = upload(x);
    size_t wsb = 0;
    ASSERT_TRUE(moe_workspace_size(M, c.topk, c.E, c.H, c.I, c.act, 0, &wsb, MoePath::kFused).ok());
    const int P = M * c.topk;
    DevBuf ws(wsb), dy(static_cast<size_t>(M) * c.H * 2);
    ASSERT_EQ(cudaMemset(ws.p, 0xFF, wsb), cudaSuccess);
    // The four launches, block_m 8 as fused_moe picks at these M.
    const int bm = 8;
    const int64_t maxp = moe_max_padded(M, c.topk, c.E, bm);
    DevBuf ri(P * 4), rw(P * 4), rs(maxp * 4), re(maxp / bm * 4), rn(4), rinter(static_cast<size_t>(P) * c.I * 2),
        rslots(static_cast<size_t>(P) * c.H * 4), ry(static_cast<size_t>(M) * c.H * 2);
    for (int call = 0; call < 2; ++call) {
      auto logits = random_logits(M, c.E, 1000u * call + c.E + c.topk + 7u * M, c.ties);
      DevBuf dl = upload(logits);
      ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);
      ASSERT_EQ(cudaMemset(ry.p, 0xEE, ry.bytes), cudaSuccess);
      MoeArgs a;
      a.x = dx.p;
      a.router_logits = dl.as<float>();
      a.y = dy.p;
      a.m = M;
      a.topk = c.topk;
      a.renormalize = c.renorm;
      a.path = MoePath::kFused;
      Status st = fused_moe(a, d13.view, d2.view, ws.p, wsb, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_TRUE(moe_route(dl.as<float>(), M, c.E, c.topk, c.renorm, bm, ri.as<int32_t>(), rw.as<float>(),
                            rs.as<int32_t>(), re.as<int32_t>(), rn.as<int32_t>(), nullptr)
                      .ok());
      ASSERT_TRUE(moe_gemm1(dx.p, d13.view, rs.as<int32_t>(), re.as<int32_t>(), rn.as<int32_t>(), M, c.topk, bm,
                            rinter.p, nullptr)
                      .ok());
      ASSERT_TRUE(moe_gemm2(rinter.p, d2.view, rs.as<int32_t>(), re.as<int32_t>(), rn.as<int32_t>(), rw.as<float>(), M,
                            c.topk, bm, rslots.as<float>(), nullptr)
                      .ok());
      ASSERT_TRUE(moe_sum(rslots.as<float>(), M, c.topk, c.H, c.act, ry.p, nullptr).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto y = download<uint16_t>(dy.p, static_cast<size_t>(M) * c.H),
                 ref = download<uint16_t>(ry.p, static_cast<size_t>(M) * c.H);
      ASSERT_EQ(y, ref) << "call " << call << ": single-token path differs from the four launches";
      int nonzero = 0;
      for (uint16_t v : y) nonzero += (v & 0x7FFF) != 0;
      ASSERT_GT(nonzero, M * c.H / 2) << "outputs are mostly zero: the test would not see a wrong sum";

      if (call == 1) {  // captured once, replayed: same bits every time
        cudaStream_t s = nullptr;
        ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        st = fused_moe(a, d13.view, d2.view, ws.p, wsb, reinterpret_cast<Stream>(s));
        ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
        ASSERT_TRUE(st.ok()) << st.to_string();
        ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
        for (int r = 0; r < 3; ++r) {
          ASSERT_EQ(cudaMemsetAsync(dy.p, 0xFF, dy.bytes, s), cudaSuccess);
          ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
          ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
          ASSERT_EQ(download<uint16_t>(dy.p, static_cast<size_t>(M) * c.H), ref) << "graph replay " << r;
        }
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        cudaStreamDestroy(s);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, Int4MoeSingleToken,
    ::testing::Values(SingleCase{128, 512, 384, 8, 128, true, true, false, DType::kBF16},    // Qwen3-like, many column groups
                      SingleCase{64, 256, 128, 6, 64, false, false, false, DType::kF16},     // DeepSeek-like, G=64
                      SingleCase{200, 256, 192, 8, 32, false, true, true, DType::kBF16},     // E not a power of 2, ties
                      SingleCase{8, 512, 128, 2, kPerChannel, true, false, false, DType::kF16},
                      SingleCase{16, 256, 128, 1, 128, false, true, false, DType::kBF16},    // topk 1
                      SingleCase{256, 256, 128, 32, 128, true, true, false, DType::kF16},    // E, topk at their limits
                      // The benchmark models' K (the decode plans: GEMM1 in clusters of 2, GEMM2 split over 8
                      // warps or wide), fewer experts: Qwen3-30B-A3B TP1 / TP2, DeepSeek-V2-Lite.
                      SingleCase{16, 2048, 768, 8, 128, true, true, false, DType::kBF16},
                      SingleCase{16, 2048, 384, 8, 128, false, true, true, DType::kF16},
                      SingleCase{12, 2048, 1408, 6, 128, true, false, false, DType::kBF16},
                      // Experts large enough for kern::moe_large_expert_shape (w13 2 x 2560 x 2048 = 10 Mi
                      // elements): at M = 2, 3 and 8 the plan counts min(M x topk, E) = 16 experts, and 16
                      // experts x 40 column groups = 640 GEMM1 units, past 4 x 132 SMs, so both paths run
                      // GEMM1 in 8-warp blocks (GEMM2's 5 Mi-element experts keep the plain plan).
                      // Few experts keep the host-side weight generation short.
                      SingleCase{16, 2048, 2560, 8, 128, true, true, false, DType::kBF16},
                      SingleCase{16, 2048, 2560, 8, 64, false, false, false, DType::kF16}));

// The kAuto workspace (block_m = 0) holds the align output of every block size fused_moe may
// take at that M and at any smaller M: the default rule, the pipelined tile's rule with and
// without wgmma (they differ: 32-row blocks with wgmma where mma.sync takes 64, session 25) and
// on dense-sized experts. Host-only arithmetic; it runs in the GPU binary because the library's
// kernels (and moe_workspace_size with them) are not built without CUDA.
TEST(Int4MoeWorkspace, CoversEveryBlockChoice) {
  struct Shape {
    int E, topk;
  };
  const int H = 256, I = 128;
  for (const Shape& s : {Shape{8, 2}, Shape{16, 4}, Shape{64, 6}, Shape{128, 8}}) {
    size_t prev = 0;
    for (int m = 1; m <= 1200; m += m < 96 ? 1 : 5) {
      size_t w0 = 0;
      ASSERT_TRUE(moe_workspace_size(m, s.topk, s.E, H, I, DType::kBF16, 0, &w0, MoePath::kFused).ok());
      EXPECT_GE(w0, prev) << "E " << s.E << " m " << m;
      prev = w0;
      const int64_t avg = static_cast<int64_t>(m) * s.topk / s.E;
      for (int bm : {moe_default_block_m(m, s.topk, s.E), kern::moe_pipelined_block_m(avg, true),
                     kern::moe_pipelined_block_m(avg, false), kern::moe_pipelined_block_m(avg, true, int64_t{1} << 30)}) {
        size_t wb = 0;
        ASSERT_TRUE(moe_workspace_size(m, s.topk, s.E, H, I, DType::kBF16, bm, &wb, MoePath::kFused).ok());
        EXPECT_GE(w0, wb) << "E " << s.E << " topk " << s.topk << " m " << m << " block_m " << bm;
      }
    }
  }
}

// moe_resolved names what fused_moe runs without running it: the single-token decode tile at
// M = 1 on MMA-tiled experts (not on N-packed ones), the pipelined tile past 8 rows per expert,
// the grouped path where asked but never under capture, and the refusals of fused_moe for sizes,
// path and workspace. (Int4MoePipelinedWs checks it against the warp-specialized layer's launch
// counter.)
TEST(Int4MoeResolved, NamesTheKernelsThatRun) {
  const int E = 8, H = 256, I = 128, topk = 2;
  const WeightShape s13{E, 2 * I, H, 64, true, DType::kBF16}, s2{E, H, I, 64, true, DType::kBF16};
  KernelWeights t13, t2, n13, n2;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 5u), &t13, kTiled).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 6u), &t2, kTiled).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 5u), &n13, kNPacked).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 6u), &n2, kNPacked).ok());
  DevWeights dt13(t13), dt2(t2), dn13(n13), dn2(n2);
  size_t wsb = 0;
  ASSERT_TRUE(moe_workspace_size(64, topk, E, H, I, DType::kBF16, 0, &wsb, MoePath::kFused).ok());
  MoeArgs a;  // moe_resolved reads no pointer
  a.m = 1;
  a.topk = topk;
  MoeResolved r;
  ASSERT_TRUE(moe_resolved(a, dt13.view, dt2.view, wsb, nullptr, &r).ok());
  EXPECT_EQ(r.path, MoePath::kFused);
  EXPECT_TRUE(r.single_token);
  EXPECT_EQ(r.block_m, 8);
  EXPECT_EQ(r.gemm1, MoeTile::kDecode) << moe_tile_name(r.gemm1);
  EXPECT_EQ(r.gemm2, MoeTile::kDecode) << moe_tile_name(r.gemm2);
  ASSERT_TRUE(moe_resolved(a, dn13.view, dn2.view, wsb, nullptr, &r).ok());
  EXPECT_FALSE(r.single_token);
  EXPECT_EQ(r.gemm1, MoeTile::kNPacked) << moe_tile_name(r.gemm1);
  EXPECT_EQ(r.gemm2, MoeTile::kNPacked) << moe_tile_name(r.gemm2);
  a.m = 64;  // 16 rows per expert on average
  ASSERT_TRUE(moe_resolved(a, dt13.view, dt2.view, wsb, nullptr, &r).ok());
  EXPECT_FALSE(r.single_token);
  const int bm64 = r.block_m;
  if (detail::moe_pipelined_enabled()) {
    EXPECT_GE(r.block_m, 16);
    EXPECT_EQ(r.gemm1, MoeTile::kPipelined) << moe_tile_name(r.gemm1);
    EXPECT_EQ(r.gemm2, MoeTile::kPipelined) << moe_tile_name(r.gemm2);
  }
  a.path = MoePath::kGrouped;
  size_t gws = 0;
  ASSERT_TRUE(moe_workspace_size(64, topk, E, H, I, DType::kBF16, 0, &gws, MoePath::kGrouped).ok());
  ASSERT_TRUE(moe_resolved(a, dt13.view, dt2.view, gws, nullptr, &r).ok());
  EXPECT_EQ(r.path, MoePath::kGrouped);
  EXPECT_EQ(r.gemm1, MoeTile::kDequantCublas) << moe_tile_name(r.gemm1);
  const Status grouped_short = moe_resolved(a, dt13.view, dt2.view, 16, nullptr, &r);
  EXPECT_EQ(grouped_short.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(grouped_short.message().find("grouped path"), std::string::npos) << grouped_short.message();
  // Under capture: kAuto is the fused path (whatever it takes uncaptured), a forced kGrouped is
  // refused.
  MoeArgs autop = a;
  autop.path = MoePath::kAuto;
  autop.m = 8192;  // where kAuto may take the grouped path uncaptured
  MoeResolved rc, ru;
  ASSERT_TRUE(moe_resolved(autop, dt13.view, dt2.view, ~size_t{0}, nullptr, &ru).ok());
  EXPECT_EQ(ru.path, moe_auto_path(autop.m, topk, E, H, I));
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status grouped_captured = moe_resolved(a, dt13.view, dt2.view, wsb, st, &r);
  const Status auto_captured = moe_resolved(autop, dt13.view, dt2.view, ~size_t{0}, st, &rc);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  if (g) ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(st), cudaSuccess);
  EXPECT_EQ(grouped_captured.code(), StatusCode::kInvalidArgument) << grouped_captured.to_string();
  ASSERT_TRUE(auto_captured.ok()) << auto_captured.to_string();
  EXPECT_EQ(rc.path, MoePath::kFused);
  // fused_moe's refusals: workspace one byte short, topk above E, no out.
  a.path = MoePath::kFused;
  size_t need = 0;
  ASSERT_TRUE(moe_workspace_size(64, topk, E, H, I, DType::kBF16, bm64, &need, MoePath::kFused).ok());
  a.block_m = bm64;
  EXPECT_TRUE(moe_resolved(a, dt13.view, dt2.view, need, nullptr, &r).ok());
  const Status short_ws = moe_resolved(a, dt13.view, dt2.view, need - 1, nullptr, &r);
  EXPECT_EQ(short_ws.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_ws.message().find("workspace"), std::string::npos) << short_ws.message();
  a.topk = E + 1;
  EXPECT_EQ(moe_resolved(a, dt13.view, dt2.view, wsb, nullptr, &r).code(), StatusCode::kInvalidArgument);
  a.topk = topk;
  EXPECT_EQ(moe_resolved(a, dt13.view, dt2.view, wsb, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(Int4MoeArgs, Refused) {
  WeightShape s13{4, 64, 64, 32, true, DType::kBF16}, s2{4, 64, 32, 32, true, DType::kBF16};
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 1), &w13).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 2), &w2).ok());
  DevWeights d13(w13), d2(w2);
  DevBuf x(4 * 64 * 2), l(4 * 4 * 4), y(4 * 64 * 2), ws(1 << 20);
  ASSERT_EQ(cudaMemset(x.p, 0, x.bytes), cudaSuccess);  // defined inputs (this test checks Status only)
  ASSERT_EQ(cudaMemset(l.p, 0, l.bytes), cudaSuccess);
  MoeArgs a;
  a.x = x.p;
  a.router_logits = l.as<float>();
  a.y = y.p;
  a.m = 4;
  a.topk = 2;
  EXPECT_TRUE(fused_moe(a, d13.view, d2.view, ws.p, ws.bytes, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  MoeArgs b = a;
  b.topk = 5;  // > E
  EXPECT_EQ(fused_moe(b, d13.view, d2.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  b = a;
  b.router_logits = nullptr;
  EXPECT_EQ(fused_moe(b, d13.view, d2.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fused_moe(a, d13.view, d13.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fused_moe(a, d13.view, d2.view, ws.p, 16, nullptr).code(), StatusCode::kInvalidArgument);
  b = a;
  b.y = static_cast<char*>(y.p) + 2;
  EXPECT_EQ(fused_moe(b, d13.view, d2.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_EQ(moe_topk(l.as<float>(), 4, 2000, 2, true, ws.as<int32_t>(), ws.as<float>(), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(moe_align(ws.as<int32_t>(), 4, 2, 4, 0, ws.as<int32_t>(), ws.as<int32_t>(), ws.as<int32_t>(), nullptr).code(),
            StatusCode::kInvalidArgument);
  int32_t* ib = ws.as<int32_t>();
  EXPECT_EQ(moe_route(l.as<float>(), 4, 4, 5, true, 8, ib, ws.as<float>(), ib, ib, ib, nullptr).code(),
            StatusCode::kInvalidArgument);  // topk > E
  EXPECT_EQ(moe_route(l.as<float>(), 4, 4, 2, true, 0, ib, ws.as<float>(), ib, ib, ib, nullptr).code(),
            StatusCode::kInvalidArgument);  // block_m 0
  // MMA-tiled experts: a gate/up stack's halves must be whole 64-column groups (N % 128), and
  // the activations 16 B aligned.
  KernelWeights t64, t128;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 1), &t64, static_cast<int>(KernelLayoutKind::kMmaTiled)).ok());
  WeightShape s13w{4, 128, 64, 32, true, DType::kBF16};
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13w, 3), &t128).ok());
  ASSERT_EQ(t128.kind, KernelLayoutKind::kMmaTiled);
  DevWeights dt64(t64), dt128(t128);
  EXPECT_EQ(moe_gemm1(x.p, dt64.view, ib, ib, ib, 4, 2, 8, y.p, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(moe_gemm1(static_cast<char*>(x.p) + 2, dt128.view, ib, ib, ib, 4, 2, 8, y.p, nullptr).code(),
            StatusCode::kMisaligned);
  // fused_moe refuses such a stack before its first launch: the four-launch path checks both
  // GEMMs' inputs before the routing, so a poisoned workspace is left as it was.
  ASSERT_EQ(cudaMemset(ws.p, 0xA5, ws.bytes), cudaSuccess);
  MoeArgs fused = a;
  fused.path = MoePath::kFused;  // (d2 is N-packed: the four launches, not the single-token path)
  EXPECT_EQ(fused_moe(fused, dt64.view, d2.view, ws.p, ws.bytes, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto wsb = download<uint8_t>(ws.p, ws.bytes);
  EXPECT_EQ(static_cast<size_t>(std::count(wsb.begin(), wsb.end(), uint8_t{0xA5})), ws.bytes)
      << "a refused fused_moe wrote its workspace";
}

}  // namespace
}  // namespace lowbit::int4
