// validate(KernelWeights) (device_weights.h): every layout repack_for_kernels() produces passes,
// and each way an array can disagree with its shape is refused with a message naming it,
// before DeviceWeights::upload() touches a device (these tests need none).
#include <gtest/gtest.h>

#include <string>

#include "lowbit/int4/device_weights.h"
#include "tests/cpu/int4/random_weights.h"

namespace lowbit::int4 {
namespace {

using testing::random_kpacked;

KernelWeights repacked(const WeightShape& s, int kind = -1) {
  KernelWeights kw;
  EXPECT_TRUE(repack_for_kernels(random_kpacked(s, 77u + s.n), &kw, kind).ok());
  return kw;
}

// The status is kInvalidArgument and its message contains `what`.
void expect_refused(const KernelWeights& w, const std::string& what) {
  const Status st = validate(w);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find(what), std::string::npos) << st.to_string();
  DeviceWeights d;
  const Status up = DeviceWeights::upload(w, &d);  // refused before any CUDA call
  EXPECT_EQ(up.code(), StatusCode::kInvalidArgument) << up.to_string();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.view().qweight, nullptr);
}

TEST(Int4DeviceWeights, ValidateAcceptsEveryRepackedLayout) {
  for (bool sym : {true, false}) {
    for (int g : {32, 128, kPerChannel}) {
      const WeightShape tiled{2, 128, 256, g, sym, DType::kBF16};
      const WeightShape npacked{1, 72, 64, g == 128 ? 64 : g, sym, DType::kF16};  // N % 64 != 0
      const WeightShape kpacked{1, 13, 64, g == 128 ? 64 : g, sym, DType::kBF16};  // N % 8 != 0
      const KernelWeights a = repacked(tiled), b = repacked(npacked), c = repacked(kpacked);
      EXPECT_EQ(a.kind, KernelLayoutKind::kMmaTiled);
      EXPECT_EQ(b.kind, KernelLayoutKind::kNPackedInterleaved);
      EXPECT_EQ(c.kind, KernelLayoutKind::kKPacked);
      for (const KernelWeights* w : {&a, &b, &c}) EXPECT_TRUE(validate(*w).ok()) << validate(*w).to_string();
    }
  }
}

TEST(Int4DeviceWeights, ValidateNamesTheWrongArray) {
  const WeightShape s{1, 128, 256, 128, false, DType::kBF16};
  const KernelWeights good = repacked(s);
  ASSERT_EQ(good.kind, KernelLayoutKind::kMmaTiled);
  KernelWeights w = good;
  w.qweight_n.pop_back();
  expect_refused(w, "qweight_n has");
  w = good;
  w.qweight_k.resize(16);
  expect_refused(w, "qweight_k must be empty");
  w = good;
  w.scales.push_back(0);
  expect_refused(w, "scales has");
  w = good;
  w.zeros.clear();
  expect_refused(w, "asymmetric, zeros has 0");
  w = good;
  w.shape.symmetric = true;
  expect_refused(w, "symmetric, but zeros has");
  w = good;
  w.shape.group_size = 48;
  expect_refused(w, "group_size=48");
  w = good;
  w.shape.n = 96;  // not a whole number of 64-column groups
  expect_refused(w, "mma-tiled layout needs");
  w = good;
  w.kind = static_cast<KernelLayoutKind>(7);
  expect_refused(w, "unknown layout kind 7");
  w = good;
  w.shape.k = 0;
  expect_refused(w, "shape E=1 N=128 K=0");
}

TEST(Int4DeviceWeights, UploadRefusesNullOutput) {
  const Status st = DeviceWeights::upload(KernelWeights{}, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out is null"), std::string::npos);
}

TEST(Int4DeviceWeights, EmptyObjectHasNullView) {
  DeviceWeights d;
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.device_bytes(), 0u);
  EXPECT_EQ(d.device(), -1);
  EXPECT_EQ(d.view().scales, nullptr);
  DeviceWeights moved(std::move(d));
  EXPECT_TRUE(moved.empty());
}

}  // namespace
}  // namespace lowbit::int4
