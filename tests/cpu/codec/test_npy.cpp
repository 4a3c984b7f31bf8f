// .npy reader: round trip of f2/f4/f8 arrays written byte by byte, and every malformed
// input (bad magic, truncated header/data, unsupported dtype, Fortran order) rejected.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lowbit/io/npy.h"

using lowbit::StatusCode;
using lowbit::io::NpyArray;
using lowbit::io::parse_npy;

namespace {
std::vector<uint8_t> make_npy(const std::string& descr, const std::string& shape, const void* data, size_t nbytes,
                              const std::string& fortran = "False") {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::vector<uint8_t> b(10 + h.size() + nbytes);
  const uint8_t head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(h.size() & 0xFF),
                            static_cast<uint8_t>(h.size() >> 8)};
  std::memcpy(b.data(), head, 10);
  std::memcpy(b.data() + 10, h.data(), h.size());
  if (nbytes) std::memcpy(b.data() + 10 + h.size(), data, nbytes);
  return b;
}
}  // namespace

TEST(Npy, ReadsF4F8F2) {
  float f[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  NpyArray a;
  ASSERT_TRUE(parse_npy(make_npy("<f4", "(2, 3)", f, sizeof f), &a).ok());
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.values[i], static_cast<double>(f[i]));
  double d[3] = {1e300, -0.5, 2.0};
  ASSERT_TRUE(parse_npy(make_npy("<f8", "(3,)", d, sizeof d), &a).ok());
  EXPECT_EQ(a.values[0], 1e300);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  uint16_t h[2] = {0x3C00, 0xC000};  // 1.0, -2.0
  ASSERT_TRUE(parse_npy(make_npy("<f2", "(2,)", h, sizeof h), &a).ok());
  EXPECT_EQ(a.values[0], 1.0);
  EXPECT_EQ(a.values[1], -2.0);
}

TEST(Npy, RejectsMalformed) {
  float f[4] = {1, 2, 3, 4};
  NpyArray a;
  auto good = make_npy("<f4", "(4,)", f, sizeof f);
  auto bad = good;
  bad[1] = 'X';
  EXPECT_EQ(parse_npy(bad, &a).code(), StatusCode::kCorruptData);
  EXPECT_EQ(parse_npy(std::vector<uint8_t>(good.begin(), good.begin() + 40), &a).code(), StatusCode::kCorruptData);
  EXPECT_EQ(parse_npy(std::vector<uint8_t>(good.begin(), good.end() - 1), &a).code(), StatusCode::kCorruptData);
  EXPECT_EQ(parse_npy(make_npy("<i4", "(4,)", f, sizeof f), &a).code(), StatusCode::kNotSupported);
  EXPECT_EQ(parse_npy(make_npy(">f4", "(4,)", f, sizeof f), &a).code(), StatusCode::kNotSupported);
  EXPECT_EQ(parse_npy(make_npy("<f4", "(4,)", f, sizeof f, "True"), &a).code(), StatusCode::kNotSupported);
  EXPECT_EQ(parse_npy(make_npy("<f4", "(2, x)", f, sizeof f), &a).code(), StatusCode::kCorruptData);
  EXPECT_EQ(lowbit::io::read_npy("/nonexistent/file.npy", &a).code(), StatusCode::kIoError);
}
