// Act-order (GPTQ desc_act) weights through int4::gemm: the view carries k_perm and gemm()
// gathers x[:, k_perm] itself. The outputs must be bit-identical to the same kernel on the
// activations gathered on the host (the gather moves 16-bit values, no arithmetic), and agree
// with the fp64 reference that applies the permutation (gemm_ref) within the dense tolerance;
// every layout and the decode / pipelined / dequant + cuBLAS paths; entry points that take no
// permutation refuse such a weight by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "lowbit/int4/kernels.h"
#include "lowbit/int4/moe_ref.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/gpu_buffers.h"

namespace lowbit::int4 {
namespace {

using testing::DevBuf;
using testing::DevWeights;
using testing::download;
using testing::random_kpacked;
using testing::upload;

std::vector<uint16_t> random_act(size_t n, DType t, uint32_t seed) { return testing::random_activations(n, t, seed); }

// A random permutation per expert (the kernels accept any; GPTQ's are sorted-by-group ones).
std::vector<int32_t> random_perm(int experts, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(experts) * k);
  for (int e = 0; e < experts; ++e) {
    auto first = p.begin() + static_cast<std::ptrdiff_t>(e) * k;
    std::iota(first, first + k, 0);
    std::shuffle(first, first + k, rng);
  }
  return p;
}

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
  kp.k_perm = random_perm(c.experts, c.k, 77u + c.k);
  KernelWeights kw;
  Status st = repack_for_kernels(kp, &kw, c.layout);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(kw.k_perm, kp.k_perm);  // the permutation travels with the layout
  DevWeights dw(kw);
  ASSERT_TRUE(dw.status.ok()) << dw.status.to_string();
  ASSERT_NE(dw.view.k_perm, nullptr);

  const auto x = random_act(static_cast<size_t>(c.m) * c.k, c.act, 19u * c.m + c.k);
  // x' = x[:, k_perm of the expert], gathered on the host.
  std::vector<uint16_t> xg(x.size());
  const int32_t* perm = kp.k_perm.data() + static_cast<size_t>(c.expert) * c.k;
  for (int r = 0; r < c.m; ++r)
    for (int j = 0; j < c.k; ++j)
      xg[static_cast<size_t>(r) * c.k + j] = x[static_cast<size_t>(r) * c.k + perm[j]];
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
  const double rel_out = c.act == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
  double err2 = 0, ref2 = 0, scale = 0;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double got = half_bits_to_float(c.act, y[i]);
    // Output rounding plus fp32 accumulation over K (loose per element; the tight check is the
    // bit identity above, the rel-L2 below catches a wrong gather).
    const double tol = rel_out * std::fabs(ref[i]) + 1e-2 * scale;
    if (!(std::fabs(got - ref[i]) <= tol) && bad++ < 5) ADD_FAILURE() << "i=" << i << " got " << got << " ref " << ref[i];
    err2 += (got - ref[i]) * (got - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  EXPECT_EQ(bad, 0);
  ASSERT_GT(ref2, 0.0);
  EXPECT_LT(std::sqrt(err2 / ref2), c.act == DType::kBF16 ? 5e-3 : 1e-3);
}

std::vector<ActCase> act_cases() {
  const int tiled = static_cast<int>(KernelLayoutKind::kMmaTiled);
  const int npacked = static_cast<int>(KernelLayoutKind::kNPackedInterleaved);
  const int kpacked = static_cast<int>(KernelLayoutKind::kKPacked);
  std::vector<ActCase> v;
  // MMA-tiled (the dense default): decode at M = 1 / 8 / 16, the pipelined kernel, dequant + cuBLAS.
  for (int m : {1, 8, 16, 64, 300})
    v.push_back({1, 0, m, 512, 1024, 128, true, DType::kBF16, GemmPath::kAuto, tiled});
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
  kp.k_perm = random_perm(1, s.k, 4);
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
  const Status moe = fused_moe(MoeArgs{}, dw.view, dw.view, nullptr, 0, nullptr);  // weights are checked first
  EXPECT_EQ(moe.code(), StatusCode::kNotSupported);
  EXPECT_NE(moe.message().find("fused_moe"), std::string::npos) << moe.message();
  KernelWeightsView odd = dw.view;
  odd.k_perm = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(odd.k_perm) + 2);
  EXPECT_EQ(gemm(a, odd, ws.p, need, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_TRUE(gemm(a, dw.view, ws.p, need, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace lowbit::int4
