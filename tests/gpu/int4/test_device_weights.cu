// DeviceWeights (device_weights.h) on a GPU: the device arrays hold the host arrays bit for
// bit in every layout, the view points at them, moves hand them over, a failed upload leaves
// the object empty, and a GEMM through the uploaded view matches the CPU reference.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "lowbit/int4/device_weights.h"
#include "lowbit/int4/kernels.h"
#include "lowbit/int4/moe_ref.h"
#include "tests/cpu/int4/random_weights.h"
#include "tests/gpu/int4/gpu_buffers.h"

namespace lowbit::int4 {
namespace {

using testing::DevBuf;
using testing::download;
using testing::random_kpacked;
using testing::upload;

TEST(Int4DeviceWeightsGpu, ArraysBitIdenticalInEveryLayout) {
  struct Case {
    WeightShape s;
    KernelLayoutKind kind;
  };
  const Case cases[] = {
      {{2, 128, 256, 128, false, DType::kBF16}, KernelLayoutKind::kMmaTiled},
      {{1, 72, 64, 32, true, DType::kF16}, KernelLayoutKind::kNPackedInterleaved},
      {{1, 13, 64, kPerChannel, false, DType::kBF16}, KernelLayoutKind::kKPacked},
  };
  for (const Case& c : cases) {
    KernelWeights kw;
    ASSERT_TRUE(repack_for_kernels(random_kpacked(c.s, 5u + c.s.n), &kw).ok());
    ASSERT_EQ(kw.kind, c.kind);
    DeviceWeights dw;
    const Status st = DeviceWeights::upload(kw, &dw);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const KernelWeightsView& v = dw.view();
    EXPECT_EQ(v.kind, kw.kind);
    EXPECT_EQ(v.shape.n, c.s.n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.qweight) % 16, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.scales) % 16, 0u);
    int dev = -1;
    ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
    EXPECT_EQ(dw.device(), dev);
    if (c.kind == KernelLayoutKind::kKPacked)
      EXPECT_EQ(download<uint8_t>(v.qweight, kw.qweight_k.size()), kw.qweight_k);
    else
      EXPECT_EQ(download<uint32_t>(v.qweight, kw.qweight_n.size()), kw.qweight_n);
    EXPECT_EQ(download<uint16_t>(v.scales, kw.scales.size()), kw.scales);
    if (c.s.symmetric) {
      EXPECT_EQ(v.zeros, nullptr);
    } else {
      ASSERT_NE(v.zeros, nullptr);
      EXPECT_EQ(download<uint16_t>(v.zeros, kw.zeros.size()), kw.zeros);
    }
    const size_t want = kernel_qweight_bytes(c.s, kw.kind) + kw.scales.size() * 2 + kw.zeros.size() * 2;
    EXPECT_EQ(dw.device_bytes(), want);
  }
}

TEST(Int4DeviceWeightsGpu, MoveHandsOverAndFailedUploadEmpties) {
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(random_kpacked({1, 64, 128, 64, true, DType::kBF16}, 9u), &kw).ok());
  DeviceWeights a;
  ASSERT_TRUE(DeviceWeights::upload(kw, &a).ok());
  const void* q = a.view().qweight;
  DeviceWeights b(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.view().qweight, q);
  EXPECT_EQ(download<uint32_t>(b.view().qweight, kw.qweight_n.size()), kw.qweight_n);
  DeviceWeights c;
  c = std::move(b);
  EXPECT_EQ(c.view().qweight, q);
  // A refused upload into a non-empty object frees what it held and leaves it empty.
  KernelWeights bad = kw;
  bad.scales.pop_back();
  EXPECT_EQ(DeviceWeights::upload(bad, &c).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.view().qweight, nullptr);
}

// The README's path end to end: quantize, repack, upload, gemm, against the fp64 reference.
TEST(Int4DeviceWeightsGpu, GemmThroughUploadedViewMatchesReference) {
  const WeightShape s{1, 256, 512, 128, false, DType::kBF16};
  const KPackedWeights kp = random_kpacked(s, 31u, 0.05f);
  KernelWeights kw;
  ASSERT_TRUE(repack_for_kernels(kp, &kw).ok());
  DeviceWeights dw;
  ASSERT_TRUE(DeviceWeights::upload(kw, &dw).ok());
  const int m = 3;
  std::vector<uint16_t> x(static_cast<size_t>(m) * s.k);
  for (size_t i = 0; i < x.size(); ++i)  // small exact values, never all zero
    x[i] = float_to_half_bits(s.act, static_cast<float>(static_cast<int>(i * 37 % 17) - 8) / 8.0f);
  size_t ws_bytes = 0;
  ASSERT_TRUE(gemm_workspace_size(s, m, &ws_bytes).ok());
  const DevBuf dx = upload(x), dy(static_cast<size_t>(m) * s.n * 2), ws(ws_bytes);
  ASSERT_NE(dy.p, nullptr);
  ASSERT_TRUE(ws_bytes == 0 || ws.p != nullptr);
  ASSERT_EQ(cudaMemset(dy.p, 0xFF, dy.bytes), cudaSuccess);  // poison: NaN
  GemmArgs g;
  g.x = dx.p;
  g.y = dy.p;
  g.m = m;
  const Status st = gemm(g, dw.view(), ws.p, ws_bytes, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> y = download<uint16_t>(dy.p, static_cast<size_t>(m) * s.n);
  std::vector<double> ref;
  ASSERT_TRUE(gemm_ref(kp, 0, x.data(), m, &ref, nullptr).ok());
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = half_bits_to_float(s.act, y[i]);
    ASSERT_TRUE(std::isfinite(v)) << "element " << i;
    max_err = std::max(max_err, std::fabs(v - ref[i]));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  ASSERT_GT(max_ref, 0.0);
  // bf16 output rounding (2^-8 relative) plus fp32 accumulation over K = 512.
  EXPECT_LE(max_err, max_ref * 1.0 / 128) << "max |y - ref| " << max_err << " of max |ref| " << max_ref;
}

}  // namespace
}  // namespace lowbit::int4
