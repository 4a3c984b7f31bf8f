// GPU codec vs the CPU reference, bit for bit: encoded bytes, decoded values and
// decode-accumulate results, on random data for all 6 specs x {fp16, bf16} and on every
// adversarial case. Outputs are poisoned with 0xFF before each run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lowbit/codec_cuda.h"
#include "tests/cpu/codec/codec_test_data.h"

using namespace lowbit;
using namespace lowbit::codec;
using lowbit::codec::testing::adversarial_cases;
using lowbit::codec::testing::all_specs;
using lowbit::codec::testing::gaussian;

namespace {

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&p, (count ? count : 1) * sizeof(T) + 16), cudaSuccess);
  }
  ~DevBuf() { cudaFree(p); }
  void poison() { EXPECT_EQ(cudaMemset(p, 0xFF, n * sizeof(T)), cudaSuccess); }
};

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

void check_case(CodecSpec s, DType t, const std::vector<uint16_t>& x, const std::string& name) {
  const size_t n = x.size(), eb = codec_encoded_bytes(s, n);
  SCOPED_TRACE(name + " bits=" + std::to_string(s.bits) + " G=" + std::to_string(s.group_size) + " " +
               dtype_name(t) + " n=" + std::to_string(n));
  std::vector<uint8_t> enc_ref(eb);
  ASSERT_TRUE(encode_ref(s, t, x.data(), n, enc_ref.data()).ok());
  DevBuf<uint16_t> din(n), dout(n);
  DevBuf<uint8_t> denc(eb);
  DevBuf<float> dacc(n);
  CUDA_OK(cudaMemcpy(din.p, x.data(), n * 2, cudaMemcpyHostToDevice));
  denc.poison();
  Status st = encode_cuda(s, t, din.p, n, denc.p, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> enc_gpu(eb);
  CUDA_OK(cudaMemcpy(enc_gpu.data(), denc.p, eb, cudaMemcpyDeviceToHost));
  size_t first_bad = eb;
  for (size_t i = 0; i < eb; ++i)
    if (enc_gpu[i] != enc_ref[i]) {
      first_bad = i;
      break;
    }
  ASSERT_EQ(first_bad, eb) << "encoded byte " << first_bad << " differs (gpu " << int(enc_gpu[first_bad]) << " ref "
                           << int(enc_ref[first_bad]) << "), data bytes " << codec_data_bytes(s, n);

  // Decode (from the reference bytes, so a decode bug is not masked by an encode bug).
  std::vector<uint16_t> out_ref(n), out_gpu(n);
  ASSERT_TRUE(decode_ref(s, t, enc_ref.data(), n, out_ref.data()).ok());
  dout.poison();
  st = decode_cuda(s, t, denc.p, n, dout.p, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(out_gpu.data(), dout.p, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out_gpu[i], out_ref[i]) << "decoded element " << i;

  // Decode-accumulate onto random non-zero fp32 values.
  std::vector<float> acc(n);
  std::mt19937 rng(static_cast<uint32_t>(n));
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (auto& a : acc) a = d(rng);
  std::vector<float> acc_ref = acc, acc_gpu(n);
  ASSERT_TRUE(decode_accumulate_ref(s, t, enc_ref.data(), n, acc_ref.data()).ok());
  CUDA_OK(cudaMemcpy(dacc.p, acc.data(), n * 4, cudaMemcpyHostToDevice));
  st = decode_accumulate_cuda(s, t, denc.p, n, dacc.p, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(acc_gpu.data(), dacc.p, n * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same_float(acc_gpu[i], acc_ref[i])) << "accumulated element " << i << " gpu " << acc_gpu[i] << " ref "
                                                    << acc_ref[i];
}

}  // namespace

TEST(CodecCuda, RandomAllSpecsBitExact) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (CodecSpec s : all_specs()) {
      check_case(s, t, gaussian(t, (1 << 20) + 8 * 7 + 3, 17, 1.5f, 0.25f), "gaussian");
      check_case(s, t, gaussian(t, 1000003, 23, 1e3f, -5.0f), "gaussian_n1000003");
    }
}

TEST(CodecCuda, AdversarialBitExact) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (const auto& c : adversarial_cases(t))
      for (CodecSpec s : all_specs()) check_case(s, t, c.x, c.name);
}

TEST(CodecCuda, EveryLengthUpTo300) {
  auto x = gaussian(DType::kBF16, 300, 5);
  for (CodecSpec s : all_specs())
    for (size_t n = 1; n <= 300; n += (n < 140 ? 1 : 7))
      check_case(s, DType::kBF16, std::vector<uint16_t>(x.begin(), x.begin() + n), "prefix");
}

TEST(CodecCuda, ZeroLengthIsNoOp) {
  EXPECT_TRUE(encode_cuda({4, 128}, DType::kBF16, nullptr, 0, nullptr, nullptr).ok());
  EXPECT_TRUE(decode_cuda({4, 128}, DType::kBF16, nullptr, 0, nullptr, nullptr).ok());
}

TEST(CodecCuda, RejectsBadArguments) {
  DevBuf<uint16_t> in(1024);
  DevBuf<uint8_t> enc(4096);
  DevBuf<float> acc(1024);
  Status st = encode_cuda({4, 128}, DType::kBF16, in.p + 1, 256, enc.p, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned) << st.to_string();
  EXPECT_NE(st.message().find("16-byte"), std::string::npos) << st.message();
  EXPECT_EQ(encode_cuda({4, 128}, DType::kBF16, in.p, 256, enc.p + 4, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_EQ(decode_cuda({8, 64}, DType::kF16, enc.p + 8, 256, in.p, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_EQ(decode_cuda({8, 64}, DType::kF16, enc.p, 256, in.p + 2, nullptr).code(), StatusCode::kMisaligned);
  EXPECT_EQ(decode_accumulate_cuda({8, 64}, DType::kF16, enc.p, 256, acc.p + 1, nullptr).code(),
            StatusCode::kMisaligned);
  EXPECT_EQ(encode_cuda({5, 128}, DType::kBF16, in.p, 256, enc.p, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_cuda({4, 96}, DType::kBF16, in.p, 256, enc.p, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_cuda({4, 128}, DType::kBF16, nullptr, 256, in.p, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_accumulate_cuda({4, 128}, DType::kBF16, enc.p, 256, nullptr, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
