// GGUF reader: synthetic files from a tiny writer (valid, then corrupted every way the
// reader must reject), hand-built quantized blocks with known values, and the real model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lowbit/detail/float_bits.h"
#include "lowbit/model/gguf.h"
#include "tests/cpu/model/model_test_util.h"

namespace lowbit::model {
namespace {

using gguf::File;
using testutil::GgufWriter;

// A valid file: 3 metadata entries and two tensors (F32 [4, 2], Q8_0 [32]).
GgufWriter valid_writer() {
  GgufWriter w;
  w.kv_string("general.architecture", "llama");
  w.kv_u32("llama.block_count", 7);
  w.kv_f32("llama.rope.freq_base", 100000.0f);
  w.kv_string_array("tokenizer.ggml.tokens", {"a", "b", "<s>"});
  std::vector<float> f(8);
  for (int i = 0; i < 8; ++i) f[i] = 0.5f * i - 1.0f;
  w.tensor_f32("t.f32", {4, 2}, f);
  std::vector<uint8_t> q8(34);
  uint16_t d = float_to_f16_bits(0.25f);
  std::memcpy(q8.data(), &d, 2);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  w.tensor_raw("t.q8", {32}, static_cast<uint32_t>(gguf::TensorType::kQ8_0), q8);
  return w;
}

TEST(Gguf, ParsesValidFile) {
  File f;
  Status st = File::parse(valid_writer().build(), &f);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(f.version(), 3u);
  std::string s;
  ASSERT_TRUE(f.get_string("general.architecture", &s).ok());
  EXPECT_EQ(s, "llama");
  int64_t i = 0;
  ASSERT_TRUE(f.get_int("llama.block_count", &i).ok());
  EXPECT_EQ(i, 7);
  double d = 0;
  ASSERT_TRUE(f.get_float("llama.rope.freq_base", &d).ok());
  EXPECT_EQ(d, 100000.0);
  const std::vector<std::string>* toks = nullptr;
  ASSERT_TRUE(f.get_string_array("tokenizer.ggml.tokens", &toks).ok());
  ASSERT_EQ(toks->size(), 3u);
  EXPECT_EQ((*toks)[2], "<s>");
  EXPECT_FALSE(f.get_int("general.architecture", &i).ok());  // wrong type
  EXPECT_FALSE(f.get_int("missing.key", &i).ok());
  const gguf::TensorInfo* t = f.find_tensor("t.f32");
  ASSERT_NE(t, nullptr);
  std::vector<float> v;
  ASSERT_TRUE(f.dequantize(*t, &v).ok());
  ASSERT_EQ(v.size(), 8u);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(v[k], 0.5f * k - 1.0f);
  t = f.find_tensor("t.q8");
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(f.dequantize(*t, &v).ok());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(v[j], 0.25f * (j - 16));
}

TEST(Gguf, AcceptsVersion2) {
  GgufWriter w = valid_writer();
  w.version = 2;
  File f;
  EXPECT_TRUE(File::parse(w.build(), &f).ok());
}

void expect_rejected(std::vector<uint8_t> bytes, const std::string& needle) {
  File f;
  Status st = File::parse(std::move(bytes), &f);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

TEST(Gguf, RejectsBadMagicAndVersion) {
  auto b = valid_writer().build();
  b[0] = 'X';
  expect_rejected(b, "bad magic");
  GgufWriter w = valid_writer();
  w.version = 4;
  expect_rejected(w.build(), "unsupported version 4");
  w.version = 1;
  expect_rejected(w.build(), "unsupported version 1");
}

TEST(Gguf, RejectsTruncationAtEveryByte) {
  auto b = valid_writer().build();
  // Every prefix shorter than the end of the last tensor's data (the Q8_0 block: 34 bytes,
  // then 30 bytes of padding the reader does not need) fails with a clear message and never
  // crashes (ASan checks the reads).
  const size_t data_end = b.size() - 30;
  for (size_t n = 0; n < data_end; ++n) {
    std::vector<uint8_t> p(b.begin(), b.begin() + static_cast<long>(n));
    File f;
    Status st = File::parse(std::move(p), &f);
    ASSERT_FALSE(st.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_TRUE(st.code() == StatusCode::kCorruptData) << st.to_string();
  }
}

TEST(Gguf, RejectsAbsurdCounts) {
  auto b = valid_writer().build();
  // tensor count at byte 8, kv count at byte 16.
  auto big = b;
  uint64_t huge = uint64_t{1} << 60;
  std::memcpy(big.data() + 8, &huge, 8);
  expect_rejected(big, "absurd tensor count");
  big = b;
  std::memcpy(big.data() + 16, &huge, 8);
  expect_rejected(big, "absurd metadata count");
  // First key's string length (byte 24) made huge.
  big = b;
  std::memcpy(big.data() + 24, &huge, 8);
  expect_rejected(big, "string length");
}

TEST(Gguf, RejectsAbsurdArrayLength) {
  GgufWriter w;
  w.kv_string_array("k", {"x"});
  auto b = w.build();
  // Layout: 24 header + (8 + 1) key + 4 type + 4 elem type, then the u64 length.
  uint64_t huge = uint64_t{1} << 40;
  std::memcpy(b.data() + 24 + 9 + 8, &huge, 8);
  expect_rejected(b, "array of");
}

TEST(Gguf, RejectsUnknownTypes) {
  GgufWriter w = valid_writer();
  w.tensor_raw("bad", {32}, 99, std::vector<uint8_t>(64));
  expect_rejected(w.build(), "unknown ggml type 99");
  GgufWriter w2;
  w2.kv_raw("k", 13, {0, 0, 0, 0});
  expect_rejected(w2.build(), "unknown value type 13");
}

TEST(Gguf, RejectsOutOfBoundsAndMisalignedData) {
  GgufWriter w = valid_writer();
  w.offset_override = {{"t.q8", 1 << 20}};
  expect_rejected(w.build(), "out of bounds");
  GgufWriter w2 = valid_writer();
  w2.offset_override = {{"t.q8", 36}};  // 36 is not a multiple of 32
  File f;
  Status st = File::parse(w2.build(), &f);
  EXPECT_EQ(st.code(), StatusCode::kMisaligned) << st.to_string();
  GgufWriter w3 = valid_writer();
  w3.kv_u32("general.alignment", 48);
  expect_rejected(w3.build(), "general.alignment");
}

TEST(Gguf, RejectsBadShapes) {
  GgufWriter w;
  w.tensor_raw("q", {48}, static_cast<uint32_t>(gguf::TensorType::kQ4_1), std::vector<uint8_t>(40));
  expect_rejected(w.build(), "not a multiple");
  GgufWriter w2;
  w2.tensor_raw("z", {0}, 0, {});
  expect_rejected(w2.build(), "absurd dimension");
}

TEST(Gguf, UnsupportedTypeDequantIsAnError) {
  GgufWriter w;
  w.tensor_raw("k6", {256}, static_cast<uint32_t>(gguf::TensorType::kQ6_K), std::vector<uint8_t>(210));
  File f;
  ASSERT_TRUE(File::parse(w.build(), &f).ok());
  std::vector<float> v;
  Status st = f.dequantize(*f.find_tensor("k6"), &v);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("Q6_K"), std::string::npos);
}

TEST(GgufDequant, Q4_1KnownValues) {
  // d = 0.5, m = -3: nibble q decodes to 0.5 q - 3. Low nibbles hold j, high nibbles 15 - j.
  uint8_t blk[20];
  uint16_t d = float_to_f16_bits(0.5f), m = float_to_f16_bits(-3.0f);
  std::memcpy(blk, &d, 2);
  std::memcpy(blk + 2, &m, 2);
  for (int j = 0; j < 16; ++j) blk[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  ASSERT_TRUE(gguf::dequantize_raw(3, blk, 32, out).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * j - 3.0f);
    EXPECT_EQ(out[j + 16], 0.5f * (15 - j) - 3.0f);
  }
}

TEST(GgufDequant, Q4_0AndF16AndBF16) {
  uint8_t blk[18];
  uint16_t d = float_to_f16_bits(2.0f);
  std::memcpy(blk, &d, 2);
  for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>((j) | ((j ^ 5) << 4));
  float out[32];
  ASSERT_TRUE(gguf::dequantize_raw(2, blk, 32, out).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8));
    EXPECT_EQ(out[j + 16], 2.0f * ((j ^ 5) - 8));
  }
  uint16_t h[3] = {float_to_f16_bits(1.5f), float_to_f16_bits(-0.125f), 0x7C00};
  ASSERT_TRUE(gguf::dequantize_raw(1, reinterpret_cast<uint8_t*>(h), 3, out).ok());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -0.125f);
  EXPECT_TRUE(std::isinf(out[2]));
  uint16_t b[2] = {float_to_bf16_bits(3.0f), float_to_bf16_bits(-7.0f)};
  ASSERT_TRUE(gguf::dequantize_raw(30, reinterpret_cast<uint8_t*>(b), 2, out).ok());
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], -7.0f);
  EXPECT_FALSE(gguf::dequantize_raw(3, blk, 31, out).ok());  // not a whole block
}

TEST(GgufModel, LoadsSmolLM2WhenPresent) {
  std::string path = testutil::model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model file absent: " << path << " (scripts/fetch_model.sh)";
  LlamaConfig c;
  LlamaWeights w;
  Status st = load_llama(path, &c, &w);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.hidden, 576);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.rope_theta, 100000.0f);
  ASSERT_EQ(w.layers.size(), 30u);
  EXPECT_EQ(w.tok_embd.size(), size_t{49152} * 576);
  EXPECT_EQ(w.layers[29].w_down.size(), size_t{576} * 1536);
  // Sanity of the dequantized values: finite, not all zero, RMSNorm weights near O(1).
  double s = 0;
  for (float x : w.layers[0].wq) {
    ASSERT_TRUE(std::isfinite(x));
    s += double(x) * x;
  }
  EXPECT_GT(s, 1.0);
}

}  // namespace
}  // namespace lowbit::model
