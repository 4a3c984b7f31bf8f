// Prefill paths: the dequantize-to-slab kernels are bit-exact with the CPU contract (both slab
// layouts, column chunks, several experts per fill); the dequant + cuBLAS GEMM is
// deterministic and works inside a CUDA graph; the grouped MoE path is refused under
// capture when forced, and kAuto falls back to the fused path there; workspace refusals.
// (GEMM/MoE accuracy of the forced paths: test_gemm.cu Forced*, test_moe.cu Paths*.)
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "kernels/int4/dequant_plan.h"
#include "kernels/int4/internal.h"
#include "kernels/int4/pipelined_plan.h"
#include "lowbit/int4/kernels.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/gpu_buffers.h"

namespace lowbit::int4 {
namespace {

using namespace lowbit::int4::testing;

struct SlabCase {
  int E, N, K, g;
  bool sym;
  DType act;
  int e0, ne, n0, nc;
};

class Int4Slab : public ::testing::TestWithParam<SlabCase> {};

TEST_P(Int4Slab, BitExactBothLayouts) {
  const SlabCase c = GetParam();
  WeightShape s{c.E, c.N, c.K, c.g, c.sym, c.act};
  KPackedWeights kp = random_kpacked(s, 11u + c.N + c.K, 0.03f);
  for (KernelLayoutKind kind : {KernelLayoutKind::kNPackedInterleaved, KernelLayoutKind::kMmaTiled}) {
    SCOPED_TRACE(kernel_layout_name(kind));
    // The tiled layout holds whole 64-column groups; its slab chunks start on one.
    if (kind == KernelLayoutKind::kMmaTiled && (c.N % 64 != 0 || c.n0 % 64 != 0 || c.nc % 64 != 0)) continue;
    KernelWeights kw;
    ASSERT_TRUE(repack_for_kernels(kp, &kw, static_cast<int>(kind)).ok());
    DevWeights dw(kw);
    const size_t stride = static_cast<size_t>(c.nc) * c.K + 64;  // a gap between experts must stay untouched
    const size_t total = stride * c.ne;
    for (detail::SlabLayout lay : {detail::SlabLayout::kNK, detail::SlabLayout::kKN}) {
      DevBuf slab(total * 2);
      ASSERT_EQ(cudaMemset(slab.p, 0xFF, total * 2), cudaSuccess);  // poison
      ASSERT_EQ(detail::launch_dequant_slab(dw.view, c.e0, c.ne, c.n0, c.nc, lay, c.nc, stride, slab.p, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto got = download<uint16_t>(slab.p, total);
      size_t bad = 0;
      for (int el = 0; el < c.ne; ++el) {
        for (int j = 0; j < c.nc; ++j)
          for (int k = 0; k < c.K; ++k) {
            const size_t at = el * stride + (lay == detail::SlabLayout::kNK ? static_cast<size_t>(j) * c.K + k
                                                                            : static_cast<size_t>(k) * c.nc + j);
            const uint16_t want = canon_dequant_bits(kp, c.e0 + el, c.n0 + j, k);
            if (got[at] != want && bad++ < 5)
              ADD_FAILURE() << "layout " << static_cast<int>(lay) << " e=" << c.e0 + el << " n=" << c.n0 + j
                            << " k=" << k << " got 0x" << std::hex << got[at] << " want 0x" << want;
          }
        for (size_t i = static_cast<size_t>(c.nc) * c.K; i < stride; ++i)
          if (got[el * stride + i] != 0xFFFF && bad++ < 5) ADD_FAILURE() << "wrote past the expert's slab at " << i;
      }
      EXPECT_EQ(bad, 0u);
    }
  }  // kinds
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int4Slab,
                         ::testing::Values(SlabCase{1, 64, 128, 32, false, DType::kBF16, 0, 1, 0, 64},
                                           SlabCase{3, 136, 96, 32, true, DType::kF16, 1, 2, 0, 136},  // partial tiles
                                           SlabCase{2, 256, 256, 128, false, DType::kF16, 1, 1, 128, 128},
                                           SlabCase{4, 200, 64, kPerChannel, false, DType::kBF16, 0, 4, 72, 128},
                                           SlabCase{1, 48, 128, 64, true, DType::kBF16, 0, 1, 40, 8},
                                           SlabCase{2, 192, 96, 32, false, DType::kBF16, 0, 2, 64, 128}));  // K % 64 == 32

std::vector<uint16_t> random_x(size_t n, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = float_to_half_bits(t, (rng() & 1) ? u(rng) : -u(rng));
  return v;
}

// One gemm call on `st`, waited for; both must succeed.
void gemm_and_sync(const GemmArgs& a, const KernelWeightsView& w, const DevBuf& ws, size_t wsb, cudaStream_t st) {
  const Status r = gemm(a, w, ws.p, wsb, st);
  ASSERT_TRUE(r.ok()) << r.to_string();
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
}

// One gemm call captured into a CUDA graph (the overlapped schedule's fork/join included),
// replayed once on `st` and waited for; the graph is destroyed afterwards.
void gemm_in_graph(const GemmArgs& a, const KernelWeightsView& w, const DevBuf& ws, size_t wsb, cudaStream_t st) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status cs = gemm(a, w, ws.p, wsb, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_TRUE(cs.ok()) << cs.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}

// The cuBLAS path replayed from a CUDA graph gives the eager result bit for bit (the
// handle is created by the eager call; the workspace is the caller's).
TEST(Int4PrefillGemm, GraphCaptureMatchesEager) {
  WeightShape s{1, 512, 256, 64, false, DType::kBF16};
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 3), &kw).ok());
  DevWeights dw(kw);
  const int m = 300;
  DevBuf x = upload(random_x(static_cast<size_t>(m) * s.k, s.act, 9)), y1(m * s.n * 2), y2(m * s.n * 2);
  size_t wsb = 0;
  ASSERT_TRUE(gemm_workspace_size(s, m, &wsb, GemmPath::kDequantCublas).ok());
  DevBuf ws(wsb);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  GemmArgs a;
  a.x = x.p;
  a.y = y1.p;
  a.m = m;
  a.path = GemmPath::kDequantCublas;
  ASSERT_TRUE(gemm(a, dw.view, ws.p, wsb, st).ok());
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  ASSERT_EQ(cudaMemset(y2.p, 0xFF, y2.bytes), cudaSuccess);
  a.y = y2.p;
  ASSERT_NO_FATAL_FAILURE(gemm_in_graph(a, dw.view, ws, wsb, st));
  auto r1 = download<uint16_t>(y1.p, static_cast<size_t>(m) * s.n);
  auto r2 = download<uint16_t>(y2.p, static_cast<size_t>(m) * s.n);
  EXPECT_EQ(r1, r2);
  size_t nonzero = 0;
  for (uint16_t v : r1) nonzero += (v & 0x7FFF) != 0;
  EXPECT_GT(nonzero, r1.size() / 2);
  cudaStreamDestroy(st);
}

// A weight spanning two slab chunks (8328 x 4096 x 2 B > 64 MiB): the overlapped schedule
// (side-stream dequantization, double slab) gives the sequential result bit for bit, eagerly
// and replayed from a CUDA graph (fork/join capture).
TEST(Int4PrefillGemm, OverlappedChunksMatchSequential) {
  WeightShape s{1, 8328, 4096, 128, false, DType::kBF16};
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 6), &kw).ok());
  DevWeights dw(kw);
  const int m = 100;
  DevBuf x = upload(random_x(static_cast<size_t>(m) * s.k, s.act, 10));
  DevBuf y0(static_cast<size_t>(m) * s.n * 2), y1(y0.bytes), y2(y0.bytes);
  size_t wsb = 0;
  ASSERT_TRUE(gemm_workspace_size(s, m, &wsb, GemmPath::kDequantCublas).ok());
  EXPECT_GE(wsb, detail::kCublasWorkspaceBytes + 2 * static_cast<size_t>(4224) * s.k * 2);  // two slabs
  DevBuf ws(wsb);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  GemmArgs a;
  a.x = x.p;
  a.m = m;
  a.path = GemmPath::kDequantCublas;
  detail::set_dequant_overlap(0);
  a.y = y0.p;
  Status r = gemm(a, dw.view, ws.p, wsb, st);
  detail::set_dequant_overlap(1);
  ASSERT_TRUE(r.ok()) << r.to_string();
  ASSERT_EQ(cudaMemset(y1.p, 0xFF, y1.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(y2.p, 0xFF, y2.bytes), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  a.y = y1.p;
  ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, wsb, st));
  a.y = y2.p;
  ASSERT_NO_FATAL_FAILURE(gemm_in_graph(a, dw.view, ws, wsb, st));
  detail::set_dequant_overlap(-1);
  const size_t n = static_cast<size_t>(m) * s.n;
  auto r0 = download<uint16_t>(y0.p, n);
  EXPECT_EQ(r0, download<uint16_t>(y1.p, n));
  EXPECT_EQ(r0, download<uint16_t>(y2.p, n));
  size_t nonzero = 0;
  for (uint16_t v : r0) nonzero += (v & 0x7FFF) != 0;
  EXPECT_GT(nonzero, n / 2);
  cudaStreamDestroy(st);
}

TEST(Int4PrefillGemm, WorkspaceAndPathRefusals) {
  WeightShape s{1, 256, 128, 32, true, DType::kF16};
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 4), &kw).ok());
  DevWeights dw(kw);
  size_t need = 0, autob = 0;
  ASSERT_TRUE(gemm_workspace_size(s, 4, &need, GemmPath::kDequantCublas).ok());
  EXPECT_GE(need, detail::kCublasWorkspaceBytes + static_cast<size_t>(s.n) * s.k * 2);
  ASSERT_TRUE(gemm_workspace_size(s, 4096, &autob).ok());  // kAuto at large M includes the slab
  EXPECT_GE(autob, need);
  DevBuf x(4096 * 128 * 2), y(4096 * 256 * 2), ws(need);
  GemmArgs a;
  a.x = x.p;
  a.y = y.p;
  a.m = 4;
  a.path = GemmPath::kDequantCublas;
  EXPECT_EQ(gemm(a, dw.view, ws.p, need - 1024, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gemm(a, dw.view, nullptr, 0, nullptr).code(), StatusCode::kInvalidArgument);
  a.path = GemmPath::kSkinny;
  a.m = 600;  // beyond the skinny kernel
  EXPECT_EQ(gemm(a, dw.view, ws.p, need, nullptr).code(), StatusCode::kInvalidArgument);
  a.path = static_cast<GemmPath>(9);
  a.m = 4;
  EXPECT_EQ(gemm(a, dw.view, ws.p, need, nullptr).code(), StatusCode::kInvalidArgument);
  // A forced path on the K-packed layout is refused (it only has one kernel).
  WeightShape sk{1, 20, 64, 32, true, DType::kF16};
  KernelWeights kk;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(sk, 5), &kk).ok());
  ASSERT_EQ(kk.kind, KernelLayoutKind::kKPacked);
  DevWeights dk(kk);
  a.path = GemmPath::kDequantCublas;
  EXPECT_EQ(gemm(a, dk.view, ws.p, need, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Element-wise agreement of two fp16 results up to accumulation-order effects.
bool close_f16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  if (a.size() != b.size()) return false;
  double r2 = 0;
  for (uint16_t v : b) r2 += std::pow(half_bits_to_float(DType::kF16, v), 2);
  const double rms = std::sqrt(r2 / (b.empty() ? 1 : b.size()));
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = half_bits_to_float(DType::kF16, a[i]), y = half_bits_to_float(DType::kF16, b[i]);
    if (!(std::fabs(x - y) <= std::ldexp(std::fabs(y), -9) + 1e-3 * rms) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": " << x << " vs " << y;
  }
  return bad == 0 && rms > 0;
}

// The grouped path's schedule does not change the result: 1 stream vs 4 worker streams,
// and a small slab budget (several fills, double slab, column chunks) vs the default.
TEST(Int4PrefillMoe, GroupedScheduleInvariant) {
  const int E = 32, H = 256, I = 128, topk = 4, m = 200;
  WeightShape s13{E, 2 * I, H, 64, false, DType::kF16}, s2{E, H, I, 64, false, DType::kF16};
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 31, 0.05f), &w13).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 32, 0.05f), &w2).ok());
  DevWeights d13(w13), d2(w2);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(m) * E);
  for (auto& v : logits) v = nd(rng);
  DevBuf x = upload(random_x(static_cast<size_t>(m) * H, DType::kF16, 4)), dl = upload(logits);
  size_t wsb = 0;
  ASSERT_TRUE(moe_workspace_size(m, topk, E, H, I, DType::kF16, 0, &wsb, MoePath::kGrouped).ok());
  DevBuf ws(wsb);
  std::vector<std::vector<uint16_t>> outs;
  // (streams, slab budget): 256 KiB holds 2 experts' w13 -> many fills; 48 KiB splits a w13
  // into column chunks (128 columns x 256 rows x 2 B = 64 KiB > 48 KiB -> 128-column minimum).
  const std::pair<int, size_t> cfgs[] = {{1, 0}, {4, 0}, {4, 256 << 10}, {2, 48 << 10}, {1, 256 << 10}};
  for (const auto& [streams, budget] : cfgs) {
    detail::set_moe_grouped_streams(streams);
    detail::set_slab_budget(budget);
    DevBuf y(static_cast<size_t>(m) * H * 2);
    ASSERT_EQ(cudaMemset(y.p, 0xFF, y.bytes), cudaSuccess);
    const MoeArgs a = layer_args(x, dl, y, m, topk, 0, MoePath::kGrouped);
    const Status st = fused_moe(a, d13.view, d2.view, ws.p, wsb, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outs.push_back(download<uint16_t>(y.p, static_cast<size_t>(m) * H));
  }
  detail::set_moe_grouped_streams(0);
  detail::set_slab_budget(0);
  size_t finite = 0;
  for (uint16_t v : outs[0]) finite += (v & 0x7C00) != 0x7C00 && (v & 0x7FFF) != 0;
  EXPECT_GT(finite, outs[0].size() / 2);
  // Same GEMM shapes (streams, fills): bit for bit. Column chunks change the GEMM shapes and
  // so maybe cuBLAS's algorithm: fp16 rounding-level differences only.
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
  EXPECT_EQ(outs[0], outs[4]);
  EXPECT_TRUE(close_f16(outs[0], outs[3]));
}

// Dense path with a small slab budget: many chunks (5 and 9, the last 8 columns wide) through
// the overlapped schedule agree with one chunk (up to cuBLAS algorithm choice per shape).
TEST(Int4PrefillGemm, SmallSlabBudgetSameResult) {
  WeightShape s{1, 1032, 512, 32, true, DType::kF16};
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 8), &kw).ok());
  DevWeights dw(kw);
  const int m = 70;
  DevBuf x = upload(random_x(static_cast<size_t>(m) * s.k, s.act, 12));
  size_t wsb = 0;
  ASSERT_TRUE(gemm_workspace_size(s, m, &wsb, GemmPath::kDequantCublas).ok());
  // One chunk under the default budget: room for a second slab of the small chunks below.
  DevBuf ws(wsb + (size_t{1} << 20));
  std::vector<std::vector<uint16_t>> outs;
  detail::set_dequant_overlap(1);  // several chunks: the overlapped schedule (double slab fits)
  for (size_t budget : {size_t{0}, size_t{300} << 10, size_t{140} << 10}) {
    detail::set_slab_budget(budget);
    DevBuf y(static_cast<size_t>(m) * s.n * 2);
    ASSERT_EQ(cudaMemset(y.p, 0xFF, y.bytes), cudaSuccess);
    GemmArgs a;
    a.x = x.p;
    a.y = y.p;
    a.m = m;
    a.path = GemmPath::kDequantCublas;
    const Status st = gemm(a, dw.view, ws.p, ws.bytes, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outs.push_back(download<uint16_t>(y.p, static_cast<size_t>(m) * s.n));
  }
  detail::set_slab_budget(0);
  detail::set_dequant_overlap(-1);
  EXPECT_TRUE(close_f16(outs[0], outs[1]));
  EXPECT_TRUE(close_f16(outs[0], outs[2]));
}

// The default slab plan at M = 2048..4095 on K <= 8192 (kern::dequant_slab_plan, session 29):
// a 48 MiB weight in two 32 MiB-budget chunks, overlapped, inside the one-slab workspace that
// gemm_workspace_size reports. Eager and graph-replayed runs agree bit for bit, and both agree
// with the sequential 64 MiB schedule (one chunk) up to cuBLAS's choice per chunk width.
TEST(Int4PrefillGemm, MidPrefillPlanMatchesOneChunk) {
  WeightShape s{1, 6144, 4096, 128, true, DType::kF16};
  const kern::SlabPlan plan = kern::dequant_slab_plan(2048, s.k, 0, -1);
  ASSERT_TRUE(plan.overlap);
  ASSERT_EQ(detail::slab_chunk_cols_for(s.n, s.k, plan.budget), 3072);  // two chunks
  ASSERT_EQ(detail::slab_chunk_cols(s.n, s.k), s.n);                    // the workspace: one slab
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 13), &kw).ok());
  DevWeights dw(kw);
  const int m = 2048;
  DevBuf x = upload(random_x(static_cast<size_t>(m) * s.k, s.act, 14));
  size_t wsb = 0;
  ASSERT_TRUE(gemm_workspace_size(s, m, &wsb, GemmPath::kDequantCublas).ok());
  DevBuf ws(wsb);
  const size_t n = static_cast<size_t>(m) * s.n;
  DevBuf y_plan(n * 2), y_graph(n * 2), y_seq(n * 2);
  for (DevBuf* y : {&y_plan, &y_graph, &y_seq}) ASSERT_EQ(cudaMemset(y->p, 0xFF, y->bytes), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  GemmArgs a;
  a.x = x.p;
  a.m = m;
  a.path = GemmPath::kDequantCublas;
  a.y = y_plan.p;
  ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, wsb, st));
  a.y = y_graph.p;
  ASSERT_NO_FATAL_FAILURE(gemm_in_graph(a, dw.view, ws, wsb, st));
  detail::set_dequant_overlap(0);  // a knob set: the default budget (one chunk), in sequence
  a.y = y_seq.p;
  const Status r = gemm(a, dw.view, ws.p, wsb, st);
  detail::set_dequant_overlap(-1);
  ASSERT_TRUE(r.ok()) << r.to_string();
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  const auto rp = download<uint16_t>(y_plan.p, n);
  EXPECT_EQ(rp, download<uint16_t>(y_graph.p, n));
  EXPECT_TRUE(close_f16(rp, download<uint16_t>(y_seq.p, n)));
  cudaStreamDestroy(st);
}

// One prefill comparison's operands: the weight (repacked, on the device), x of m rows, and one
// workspace sized for both the pipelined path and dequant + cuBLAS.
struct PipeVsDequant {
  KernelWeights kw;
  std::unique_ptr<DevWeights> dw;
  DevBuf x, ws;
  size_t n = 0;  // outputs (m x N)
  PipeVsDequant(const WeightShape& s, int m, uint32_t seed) : n(static_cast<size_t>(m) * s.n) {
    EXPECT_TRUE(repack_for_kernels(random_kpacked(s, seed), &kw).ok());
    dw = std::make_unique<DevWeights>(kw);
    x = upload(random_x(static_cast<size_t>(m) * s.k, s.act, seed + 1));
    size_t wsb = 0, wsd = 0;
    EXPECT_TRUE(gemm_workspace_size(s, m, &wsb, GemmPath::kPipelined).ok());
    EXPECT_TRUE(gemm_workspace_size(s, m, &wsd, GemmPath::kDequantCublas).ok());
    ws = DevBuf(wsb > wsd ? wsb : wsd);
  }
};

// The 256-row tiles (128 columns, warp-specialized only; pipelined_rows_for takes them where the
// model says so, e.g. 8192 x 8192 at M = 512): the forced pipelined path runs them, a CUDA graph
// replay gives the eager output bit for bit, and the output agrees with dequant + cuBLAS to fp16
// rounding, symmetric G = 128 and asymmetric G = 64 (zero points staged with the scales).
TEST(Int4PrefillGemm, Rows256Tile) {
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "the 256-row tile is a wgmma tile (sm_90a)";
  const int m = 512, sms = detail::device_sm_count();
  if (kern::pipelined_rows_for(m, 8192, 8192, true, sms) != 256) GTEST_SKIP() << "no 256-row plan on " << sms << " SMs";
  for (const WeightShape& s : {WeightShape{1, 8192, 8192, 128, true, DType::kF16},
                               WeightShape{1, 8192, 8192, 64, false, DType::kF16}}) {
    SCOPED_TRACE(s.group_len());
    PipeVsDequant c(s, m, 31);
    ASSERT_FALSE(::testing::Test::HasFailure());
    const DevWeights& dw = *c.dw;
    const DevBuf &x = c.x, &ws = c.ws;
    const size_t n = c.n;
    DevBuf y_pipe(n * 2), y_graph(n * 2), y_ref(n * 2);
    for (DevBuf* y : {&y_pipe, &y_graph, &y_ref}) ASSERT_EQ(cudaMemset(y->p, 0xFF, y->bytes), cudaSuccess);
    cudaStream_t st;
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    GemmArgs a;
    a.x = x.p;
    a.m = m;
    a.path = GemmPath::kPipelined;
    a.y = y_pipe.p;
    const long long ws_before = detail::pipe_ws_launches();
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, ws.bytes, st));
    EXPECT_EQ(detail::pipe_ws_launches(), ws_before + 1);
    a.y = y_graph.p;
    ASSERT_NO_FATAL_FAILURE(gemm_in_graph(a, dw.view, ws, ws.bytes, st));
    a.path = GemmPath::kDequantCublas;
    a.y = y_ref.p;
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, ws.bytes, st));
    const auto rp = download<uint16_t>(y_pipe.p, n);
    EXPECT_EQ(rp, download<uint16_t>(y_graph.p, n));
    EXPECT_TRUE(close_f16(rp, download<uint16_t>(y_ref.p, n)));
    cudaStreamDestroy(st);
  }
}

// The split tail (pipe_split_tail): where the warp-specialized plan leaves a partial last wave, its
// tiles past the last whole wave run in a second launch as split-K clusters. The forced pipelined
// path on such a plan launches twice, writes every output (poisoned first), agrees with dequant +
// cuBLAS to fp16 rounding, and a CUDA graph replays it bit for bit; symmetric G = 128 and
// asymmetric G = 64. With the split tail off the same GEMM launches once and also agrees.
TEST(Int4PrefillGemm, SplitTail) {
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "the split tail runs on the warp-specialized wgmma tiles (sm_90a)";
  const int sms = detail::device_sm_count(), n_cols = 8192, k = 4096;
  int m = 0;
  for (int c = 256; c <= 4096 && m == 0; c += 64) {
    const int bm = kern::pipelined_rows_for(c, n_cols, k, true, sms, true);
    if (bm >= 96 && kern::pipelined_plan(c, n_cols, k, bm, sms, 1, kern::kPipeMaxSplits, 0, true).tail_splits > 1) m = c;
  }
  if (m == 0) GTEST_SKIP() << "no split-tail plan for " << n_cols << " x " << k << " on " << sms << " SMs";
  SCOPED_TRACE(m);
  struct TailDefault {  // the override back to the environment's setting however the test ends
    ~TailDefault() { detail::set_pipe_tail(0); }
  } tail_default;
  for (const WeightShape& s : {WeightShape{1, n_cols, k, 128, true, DType::kF16},
                               WeightShape{1, n_cols, k, 64, false, DType::kF16}}) {
    SCOPED_TRACE(s.group_len());
    PipeVsDequant c(s, m, 41);
    ASSERT_FALSE(::testing::Test::HasFailure());
    const DevWeights& dw = *c.dw;
    const DevBuf &x = c.x, &ws = c.ws;
    const size_t n = c.n;
    DevBuf y_tail(n * 2), y_graph(n * 2), y_off(n * 2), y_ref(n * 2);
    for (DevBuf* y : {&y_tail, &y_graph, &y_off, &y_ref}) ASSERT_EQ(cudaMemset(y->p, 0xFF, y->bytes), cudaSuccess);
    cudaStream_t st;
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    GemmArgs a;
    a.x = x.p;
    a.m = m;
    a.path = GemmPath::kPipelined;
    a.y = y_tail.p;
    detail::set_pipe_tail(2);
    long long before = detail::pipe_ws_launches();
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, ws.bytes, st));
    EXPECT_EQ(detail::pipe_ws_launches(), before + 2);
    a.y = y_graph.p;
    ASSERT_NO_FATAL_FAILURE(gemm_in_graph(a, dw.view, ws, ws.bytes, st));
    detail::set_pipe_tail(1);  // (back to the environment's setting on the way out: tail_default)
    a.y = y_off.p;
    before = detail::pipe_ws_launches();
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, ws.bytes, st));
    detail::set_pipe_tail(0);
    EXPECT_LE(detail::pipe_ws_launches(), before + 1);
    a.path = GemmPath::kDequantCublas;
    a.y = y_ref.p;
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, dw.view, ws, ws.bytes, st));
    const auto rt = download<uint16_t>(y_tail.p, n), rr = download<uint16_t>(y_ref.p, n);
    EXPECT_EQ(rt, download<uint16_t>(y_graph.p, n));
    EXPECT_TRUE(close_f16(rt, rr));
    EXPECT_TRUE(close_f16(download<uint16_t>(y_off.p, n), rr));
    cudaStreamDestroy(st);
  }
}

// Stream-K (pipe_sk_plan): forced onto small weights with a few blocks, so that tiles are
// shared by 2-3 blocks (heads that collect one or two partial sums, runs that start and end inside
// tiles, a last stage of 2 K steps at K = 4128, G = 32 / 64 / 128 / per-channel, sym and asym):
// the output agrees with dequant + cuBLAS and with the plan without stream-K to fp16 rounding,
// a CUDA graph replays it bit for bit, and the flags the workspace held (poisoned: 0xFF) do not
// matter (zeroed by each launch).
TEST(Int4PipelinedStreamK, SharedTilesMatchTheReference) {
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "stream-K runs the 32- and 48-row wgmma tiles (sm_90a)";
  struct SkDefault {  // back to the environment's setting however the test ends
    ~SkDefault() { detail::set_pipe_sk(0); }
  } sk_default;
  struct Case {
    int m, n, k, g;
    bool sym;
    int blocks;
  };
  // (48-row tiles run at M = 33..48 on weights of >= 48 Mi elements: the last case.)
  for (const Case c : {Case{20, 1024, 4096, 128, true, 10}, Case{24, 1024, 4128, 32, false, 7},
                       Case{32, 768, 2048, kPerChannel, true, 9}, Case{32, 1280, 1024, 64, false, 5},
                       Case{17, 256, 8192, 128, true, 5}, Case{40, 1536, 32768, 128, false, 11}}) {
    const WeightShape s{1, c.n, c.k, c.g, c.sym, DType::kF16};
    SCOPED_TRACE(::testing::Message() << "M=" << c.m << " N=" << c.n << " K=" << c.k << " G=" << c.g << " blocks=" << c.blocks);
    PipeVsDequant t(s, c.m, 53u + c.m);
    ASSERT_FALSE(::testing::Test::HasFailure());
    const size_t n = t.n;
    DevBuf ws(std::max(t.ws.bytes, kern::pipe_sk_workspace_bytes(48, c.blocks)));
    DevBuf y_sk(n * 2), y_graph(n * 2), y_plain(n * 2), y_ref(n * 2);
    for (DevBuf* y : {&y_sk, &y_graph, &y_plain, &y_ref, &ws}) ASSERT_EQ(cudaMemset(y->p, 0xFF, y->bytes), cudaSuccess);
    cudaStream_t st;
    ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    GemmArgs a;
    a.x = t.x.p;
    a.m = c.m;
    a.path = GemmPath::kPipelined;
    detail::set_pipe_sk(c.blocks);
    // gemm_workspace_size counts the partial sums of the launch it will make (here: forced).
    size_t need = 0;
    ASSERT_TRUE(gemm_workspace_size(s, c.m, &need, GemmPath::kPipelined).ok());
    EXPECT_GE(need, kern::pipe_sk_workspace_bytes(c.m <= 32 ? 32 : 48, c.blocks));
    const long long before = detail::pipe_sk_launches();
    a.y = y_sk.p;
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, t.dw->view, ws, ws.bytes, st));
    EXPECT_EQ(detail::pipe_sk_launches(), before + 1) << "the forced stream-K launch did not run";
    a.y = y_graph.p;
    ASSERT_NO_FATAL_FAILURE(gemm_in_graph(a, t.dw->view, ws, ws.bytes, st));
    detail::set_pipe_sk(-1);
    a.y = y_plain.p;
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, t.dw->view, ws, ws.bytes, st));
    EXPECT_EQ(detail::pipe_sk_launches(), before + 2) << "stream-K off still launched it";
    a.path = GemmPath::kDequantCublas;
    a.y = y_ref.p;
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, t.dw->view, ws, ws.bytes, st));
    const auto rs = download<uint16_t>(y_sk.p, n), rr = download<uint16_t>(y_ref.p, n);
    EXPECT_EQ(rs, download<uint16_t>(y_graph.p, n)) << "stream-K sums must be deterministic";
    EXPECT_TRUE(close_f16(rs, rr));
    EXPECT_TRUE(close_f16(rs, download<uint16_t>(y_plain.p, n)));
    // Too small a workspace: the plan without stream-K runs instead (no launch of it).
    detail::set_pipe_sk(c.blocks);
    a.path = GemmPath::kPipelined;
    a.y = y_plain.p;
    ASSERT_NO_FATAL_FAILURE(gemm_and_sync(a, t.dw->view, ws, kern::pipe_sk_partials_bytes(32, c.blocks) - 1, st));
    EXPECT_EQ(detail::pipe_sk_launches(), before + 2);
    EXPECT_TRUE(close_f16(download<uint16_t>(y_plain.p, n), rr));
    cudaStreamDestroy(st);
  }
}

// kAuto at M = 513..2047 (MMA-tiled, G = 128) follows the time model of pipelined_plan.h: on a
// 4096 x 4096 weight (llama3-8b.o) it takes the pipelined kernel at M = 1024 (one wave of 128
// 128-row tiles) and dequant + cuBLAS at M = 1100 (a second, nearly empty wave). Its output is
// the forced path's bit for bit at each M, and one workspace sized for M = 1100 serves both;
// gemm_resolved_path() names the path kAuto takes.
TEST(Int4PrefillGemm, AutoPathFollowsTheModel) {
  WeightShape s{1, 4096, 4096, 128, true, DType::kBF16};
  if (!detail::pipelined_uses_wgmma()) GTEST_SKIP() << "the model applies to the wgmma tiles (sm_90a) only";
  const int sms = detail::device_sm_count();
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s, 15), &kw).ok());
  DevWeights dw(kw);
  size_t wsb = 0, deq = 0;
  ASSERT_TRUE(gemm_workspace_size(s, 1100, &wsb).ok());
  ASSERT_TRUE(gemm_workspace_size(s, 1100, &deq, GemmPath::kDequantCublas).ok());
  EXPECT_GE(wsb, deq);
  DevBuf ws(wsb);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  for (const int m : {1024, 1100}) {
    SCOPED_TRACE(m);
    const GemmPath want = gemm_resolved_path(s, KernelLayoutKind::kMmaTiled, m);
    EXPECT_EQ(want, kern::tiled_auto_path(m, s.n, s.k, s.group_len(), true, sms));
    EXPECT_EQ(gemm_resolved_path(s, KernelLayoutKind::kMmaTiled, m, GemmPath::kDequantCublas), GemmPath::kDequantCublas);
    if (sms == 132) EXPECT_EQ(want, m == 1024 ? GemmPath::kPipelined : GemmPath::kDequantCublas);
    DevBuf x = upload(random_x(static_cast<size_t>(m) * s.k, s.act, 16u + m));
    const size_t n = static_cast<size_t>(m) * s.n;
    DevBuf y_auto(n * 2), y_forced(n * 2);
    ASSERT_EQ(cudaMemset(y_auto.p, 0xFF, y_auto.bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(y_forced.p, 0xFF, y_forced.bytes), cudaSuccess);
    GemmArgs a;
    a.x = x.p;
    a.m = m;
    a.y = y_auto.p;
    Status r = gemm(a, dw.view, ws.p, wsb, st);
    ASSERT_TRUE(r.ok()) << r.to_string();
    a.y = y_forced.p;
    a.path = want;
    r = gemm(a, dw.view, ws.p, wsb, st);
    ASSERT_TRUE(r.ok()) << r.to_string();
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    const auto ra = download<uint16_t>(y_auto.p, n);
    EXPECT_EQ(ra, download<uint16_t>(y_forced.p, n));
    size_t finite = 0;
    for (uint16_t v : ra) finite += (v & 0x7F80) != 0x7F80 && (v & 0x7FFF) != 0;
    EXPECT_GT(finite, n / 2);
  }
  cudaStreamDestroy(st);
}

// Under graph capture: forced kGrouped is refused before anything is enqueued; kAuto
// captures the fused path, and the replay matches an eager fused run bit for bit.
TEST(Int4PrefillMoe, CaptureUsesFusedPath) {
  const int E = 8, H = 256, I = 128, topk = 2, m = 128;
  WeightShape s13{E, 2 * I, H, 128, true, DType::kBF16}, s2{E, H, I, 128, true, DType::kBF16};
  KernelWeights w13, w2;
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s13, 21, 0.05f), &w13).ok());
  ASSERT_TRUE(repack_for_kernels(random_kpacked(s2, 22, 0.05f), &w2).ok());
  DevWeights d13(w13), d2(w2);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(m) * E);
  for (auto& v : logits) v = nd(rng);
  DevBuf x = upload(random_x(static_cast<size_t>(m) * H, DType::kBF16, 2)), dl = upload(logits), y1(m * H * 2),
         y2(m * H * 2);
  size_t wsb = 0;
  ASSERT_TRUE(moe_workspace_size(m, topk, E, H, I, DType::kBF16, 0, &wsb).ok());
  DevBuf ws(wsb);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  MoeArgs a = layer_args(x, dl, y1, m, topk, 0, MoePath::kFused);
  ASSERT_TRUE(fused_moe(a, d13.view, d2.view, ws.p, wsb, st).ok());
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  ASSERT_EQ(cudaMemset(y2.p, 0xFF, y2.bytes), cudaSuccess);
  a.y = y2.p;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  a.path = MoePath::kGrouped;
  const Status refused = fused_moe(a, d13.view, d2.view, ws.p, wsb, st);
  a.path = MoePath::kAuto;
  const Status captured = fused_moe(a, d13.view, d2.view, ws.p, wsb, st);
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.to_string();
  ASSERT_TRUE(captured.ok()) << captured.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(download<uint16_t>(y1.p, static_cast<size_t>(m) * H), download<uint16_t>(y2.p, static_cast<size_t>(m) * H));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
}

}  // namespace
}  // namespace lowbit::int4
