// safetensors reader/writer: round trip, every class of corruption returns a named error,
// and a deterministic mutation fuzz loop never crashes (run under ASan/UBSan in CI).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include "lowbit/io/safetensors.h"

using namespace lowbit;
using namespace lowbit::io;

namespace {

std::string tmp_path(const std::string& tag) {
  return ::testing::TempDir() + "lowbit_st_" + tag + "_" + std::to_string(::getpid()) + ".safetensors";
}

std::vector<uint8_t> read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Builds a file image from a raw JSON header and a data section (for hand-made corruptions).
std::vector<uint8_t> image(const std::string& header, size_t data_bytes, uint64_t hlen_override = ~0ull) {
  uint64_t hl = hlen_override == ~0ull ? header.size() : hlen_override;
  std::vector<uint8_t> b(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(hl >> (8 * i));
  for (size_t i = 0; i < header.size(); ++i) b[8 + i] = static_cast<uint8_t>(header[i]);
  for (size_t i = 0; i < data_bytes; ++i) b[8 + header.size() + i] = static_cast<uint8_t>(i * 7 + 1);
  return b;
}

Status parse_header(const std::string& header, size_t data_bytes) {
  SafetensorsFile f;
  return SafetensorsFile::parse(image(header, data_bytes), &f);
}

// A valid file with several dtypes, an empty tensor and metadata.
struct Sample {
  std::vector<float> a{1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  std::vector<uint16_t> b{0x3C00, 0xC000, 0x7BFF};
  std::vector<int32_t> c{-1, 0x12345678, 7, 8};
  std::vector<uint8_t> d{};
  std::vector<int64_t> e{-5};
  std::vector<TensorToWrite> list() const {
    return {{"layer.a", TensorDType::kF32, {2, 3}, a.data()},
            {"layer.b", TensorDType::kF16, {3}, b.data()},
            {"layer.c", TensorDType::kI32, {2, 2}, c.data()},
            {"layer.empty", TensorDType::kU8, {0, 4}, d.data()},
            {"scalar", TensorDType::kI64, {}, e.data()}};
  }
};

std::vector<uint8_t> valid_image() {
  Sample s;
  std::string p = tmp_path("valid");
  EXPECT_TRUE(write_safetensors(p, s.list(), {{"format", "pt"}, {"note", "x"}}).ok());
  auto b = read_all(p);
  std::remove(p.c_str());
  return b;
}

void expect_corrupt(const Status& st, const char* needle) {
  EXPECT_EQ(st.code(), StatusCode::kCorruptData) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message() << " lacks: " << needle;
}

}  // namespace

TEST(Safetensors, RoundTrip) {
  Sample s;
  std::string p = tmp_path("rt");
  ASSERT_TRUE(write_safetensors(p, s.list(), {{"format", "pt"}}).ok());
  auto bytes = read_all(p);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= uint64_t(bytes[i]) << (8 * i);
  EXPECT_EQ((8 + hl) % 8, 0u) << "data section must start 8-byte aligned";
  SafetensorsFile f;
  Status st = SafetensorsFile::open(p, &f);
  std::remove(p.c_str());
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorInfo* t = nullptr;
  ASSERT_TRUE(f.find("layer.a", &t).ok());
  EXPECT_EQ(t->dtype, TensorDType::kF32);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->numel(), 6);
  EXPECT_EQ(std::memcmp(f.data(*t), s.a.data(), 24), 0);
  ASSERT_TRUE(f.find("layer.b", &t).ok());
  EXPECT_EQ(std::memcmp(f.data(*t), s.b.data(), 6), 0);
  ASSERT_TRUE(f.find("layer.c", &t).ok());
  EXPECT_EQ(std::memcmp(f.data(*t), s.c.data(), 16), 0);
  ASSERT_TRUE(f.find("layer.empty", &t).ok());
  EXPECT_EQ(t->numel(), 0);
  ASSERT_TRUE(f.find("scalar", &t).ok());
  EXPECT_EQ(t->numel(), 1);
  int64_t e;
  std::memcpy(&e, f.data(*t), 8);
  EXPECT_EQ(e, -5);
  EXPECT_EQ(f.find("nope", &t).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SafetensorsFile::open("/nonexistent/x.safetensors", &f).code(), StatusCode::kIoError);
}

TEST(Safetensors, AllDTypesRoundTrip) {
  const TensorDType all[] = {TensorDType::kF64, TensorDType::kF32, TensorDType::kF16, TensorDType::kBF16,
                             TensorDType::kI64, TensorDType::kI32, TensorDType::kI16, TensorDType::kI8,
                             TensorDType::kU8,  TensorDType::kBool, TensorDType::kU16, TensorDType::kU32,
                             TensorDType::kU64, TensorDType::kF8E4M3, TensorDType::kF8E5M2, TensorDType::kF8E8M0,
                             TensorDType::kC64};
  std::vector<uint8_t> buf(64);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 3 + 1);
  std::vector<TensorToWrite> list;
  for (auto d : all) list.push_back({std::string("t_") + tensor_dtype_name(d), d, {3}, buf.data()});
  std::string p = tmp_path("dt");
  ASSERT_TRUE(write_safetensors(p, list).ok());
  SafetensorsFile f;
  ASSERT_TRUE(SafetensorsFile::open(p, &f).ok());
  std::remove(p.c_str());
  for (auto d : all) {
    const TensorInfo* t;
    ASSERT_TRUE(f.find(std::string("t_") + tensor_dtype_name(d), &t).ok());
    EXPECT_EQ(t->dtype, d);
    EXPECT_EQ(t->nbytes, 3 * tensor_dtype_size(d));
    EXPECT_EQ(std::memcmp(f.data(*t), buf.data(), t->nbytes), 0);
  }
}

TEST(Safetensors, WriterRejectsBadInput) {
  int32_t x = 1;
  std::string p = tmp_path("w");
  EXPECT_FALSE(write_safetensors(p, {{"a", TensorDType::kI32, {1}, &x}, {"a", TensorDType::kI32, {1}, &x}}).ok());
  EXPECT_FALSE(write_safetensors(p, {{"a", TensorDType::kI32, {-1}, &x}}).ok());
  EXPECT_FALSE(write_safetensors(p, {{"a", TensorDType::kI32, {2}, nullptr}}).ok());
  EXPECT_FALSE(write_safetensors(p, {{"__metadata__", TensorDType::kI32, {1}, &x}}).ok());
  std::remove(p.c_str());
}

TEST(Safetensors, TruncationAtEveryCutPointIsAnError) {
  auto full = valid_image();
  SafetensorsFile f;
  ASSERT_TRUE(SafetensorsFile::parse(full, &f).ok());
  for (size_t cut = 0; cut < full.size(); ++cut) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<long>(cut));
    Status st = SafetensorsFile::parse(b, &f);
    EXPECT_EQ(st.code(), StatusCode::kCorruptData) << "cut at " << cut;
  }
  // Trailing garbage is also an error: the tensors must cover the data section exactly.
  auto longer = full;
  longer.push_back(0);
  expect_corrupt(SafetensorsFile::parse(longer, &f), "cover");
}

TEST(Safetensors, BadHeaderLength) {
  SafetensorsFile f;
  expect_corrupt(SafetensorsFile::parse({1, 2, 3}, &f), "shorter than");
  expect_corrupt(SafetensorsFile::parse(image("{}", 0, 1000), &f), "exceeds");
  expect_corrupt(SafetensorsFile::parse(image("{}", 0, ~0ull - 1), &f), "limit");
  expect_corrupt(SafetensorsFile::parse(image("{}", 0, 0), &f), "too small");
  expect_corrupt(SafetensorsFile::parse(image("{}", 0, 1ull << 40), &f), "limit");
  EXPECT_TRUE(SafetensorsFile::parse(image("{}", 0), &f).ok()) << "an empty file with no tensors is valid";
  EXPECT_TRUE(SafetensorsFile::parse(image("{}      ", 0), &f).ok()) << "space padding is valid";
}

TEST(Safetensors, BadJson) {
  expect_corrupt(parse_header("{\"a\": ", 0), "JSON");
  expect_corrupt(parse_header("[1,2,3]", 0), "start with");
  expect_corrupt(parse_header("{} {}", 0), "JSON");
  expect_corrupt(parse_header("{\"a\": 3}", 0), "not a JSON object");
  expect_corrupt(parse_header("{\"__metadata__\": {\"k\": 1}}", 0), "not a string");
  expect_corrupt(parse_header("{\"__metadata__\": [1]}", 0), "__metadata__");
  const std::string t = R"({"dtype":"U8","shape":[2],"data_offsets":[0,2]})";
  expect_corrupt(parse_header("{\"x\":" + t + ",\"x\":" + t + "}", 2), "repeats");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"extra":1}})", 2),
                 "unknown field");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[2]}})", 2), "needs dtype");
}

TEST(Safetensors, WrongDtype) {
  expect_corrupt(parse_header(R"({"x":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2), "unsupported dtype");
  expect_corrupt(parse_header(R"({"x":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8), "unsupported dtype");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}})", 2), "unsupported dtype");
  expect_corrupt(parse_header(R"({"x":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2), "not a string");
}

TEST(Safetensors, ShapeAndOffsetMismatch) {
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), "non-negative");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8), "not an array");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "begin");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8), "[begin, end]");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", 8), "non-negative");
}

TEST(Safetensors, OverlapGapAndOutOfRange) {
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                              R"("y":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6), "overlaps");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                              R"("y":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 4), "overlaps");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                              R"("y":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", 6), "gap");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 3), "beyond");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[18446744073709551612,18446744073709551616]}})", 4),
                 "data_offsets");
}

TEST(Safetensors, HugeDims) {
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
                 "overflows");
  expect_corrupt(parse_header(R"({"x":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0),
                 "overflows");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[1e30],"data_offsets":[0,0]}})", 0), "non-negative");
  expect_corrupt(parse_header(R"({"x":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1),
                 "rank");
  // A zero dimension makes an otherwise huge shape empty: valid.
  EXPECT_TRUE(parse_header(R"({"x":{"dtype":"U8","shape":[0,9223372036854775807],"data_offsets":[0,0]}})", 0).ok());
}

// Deterministic mutation fuzz: byte flips, random bytes, insertions, deletions and
// truncations of a valid image. Every outcome must be a clean Status; a parse that succeeds
// must describe tensors that lie inside the buffer.
TEST(Safetensors, MutationFuzzNeverCrashes) {
  const auto full = valid_image();
  std::mt19937_64 rng(12345);
  int ok = 0, bad = 0;
  for (int it = 0; it < 20000; ++it) {
    std::vector<uint8_t> b = full;
    int nmut = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < nmut && !b.empty(); ++m) {
      size_t i = rng() % b.size();
      switch (rng() % 6) {
        case 0: b[i] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: b[i] = static_cast<uint8_t>(rng()); break;
        case 2: b.resize(rng() % (b.size() + 1)); break;
        case 3: b.insert(b.begin() + static_cast<long>(i), static_cast<uint8_t>(rng())); break;
        case 4: b.erase(b.begin() + static_cast<long>(i)); break;
        case 5: {  // digits and JSON punctuation hit the parser's interesting paths
          const char cs[] = "0123456789{}[],:\"-e.";
          if (i >= 8) b[i] = static_cast<uint8_t>(cs[rng() % (sizeof(cs) - 1)]);
          break;
        }
      }
    }
    const size_t n = b.size();
    SafetensorsFile f;
    Status st = SafetensorsFile::parse(std::move(b), &f);
    if (st.ok()) {
      ++ok;
      for (const auto& [name, t] : f.tensors()) {
        volatile uint8_t sink = 0;
        if (t.nbytes) sink = f.data(t)[t.nbytes - 1];  // touch the last byte: ASan checks bounds
        (void)sink;
        EXPECT_LE(t.offset + t.nbytes, n);
      }
    } else {
      ++bad;
      EXPECT_FALSE(st.message().empty());
    }
  }
  EXPECT_GT(bad, 10000);
  EXPECT_GT(ok, 0) << "some mutations (e.g. in tensor data) must stay valid";
}
