// CPU tests of the codec reference: layout, float_bits conversions, error bound on random
// and adversarial data, NaN/Inf isolation, INT4 nibble order, decode-accumulate, exact
// known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "lowbit/codec.h"
#include "tests/cpu/codec/codec_test_data.h"

using namespace lowbit;
using namespace lowbit::codec;
using lowbit::codec::testing::adversarial_cases;
using lowbit::codec::testing::all_specs;
using lowbit::codec::testing::gaussian;

namespace {

uint16_t meta_u16(const std::vector<uint8_t>& enc, CodecSpec s, size_t n, size_t g, int which) {
  size_t off = codec_data_bytes(s, n) + 4 * g + 2 * which;
  return static_cast<uint16_t>(enc[off] | (enc[off + 1] << 8));
}

double ulp32(float v) {
  float a = std::fabs(v);
  if (!std::isfinite(a)) return 0;
  return std::nextafter(a, std::numeric_limits<float>::infinity()) - a;
}

// Encodes, decodes, checks the error bound per element; returns the encoded bytes.
std::vector<uint8_t> check_roundtrip(CodecSpec s, DType t, const std::vector<uint16_t>& x, const char* name) {
  const size_t n = x.size();
  std::vector<uint8_t> enc(codec_encoded_bytes(s, n), 0xAB);
  EXPECT_TRUE(encode_ref(s, t, x.data(), n, enc.data()).ok());
  std::vector<uint16_t> out(n, 0xFFFF);
  EXPECT_TRUE(decode_ref(s, t, enc.data(), n, out.data()).ok());
  std::vector<float> acc(n, 0.0f);
  EXPECT_TRUE(decode_accumulate_ref(s, t, enc.data(), n, acc.data()).ok());
  const size_t G = s.group_size;
  int failures = 0;
  for (size_t g = 0; g * G < n; ++g) {
    size_t end = std::min(n, (g + 1) * G);
    bool finite = true;
    for (size_t i = g * G; i < end; ++i) finite &= !half_bits_nonfinite(t, x[i]);
    float scale = bf16_bits_to_float(meta_u16(enc, s, n, g, 0));
    for (size_t i = g * G; i < end && failures < 5; ++i) {
      float v = acc[i];
      if (!finite) {
        if (!std::isnan(v) || !std::isnan(half_bits_to_float(t, out[i]))) {
          ++failures;
          ADD_FAILURE() << name << " " << s.bits << "/" << s.group_size << ": non-finite group " << g
                        << " decoded element " << i << " to a number " << v;
        }
        continue;
      }
      double xv = half_bits_to_float(t, x[i]);
      double bound = scale / 2.0 * (1 + std::ldexp(1.0, -20)) + ulp32(v);
      // decode clamps to the dtype's max finite: the input is never beyond it.
      if (!(std::fabs(xv - v) <= bound)) {
        ++failures;
        ADD_FAILURE() << name << " " << s.bits << "/" << s.group_size << " " << dtype_name(t) << ": element " << i
                      << " x=" << xv << " decoded " << v << " scale " << scale << " err " << std::fabs(xv - v);
      }
      // decode_ref output is exactly the accumulated fp32 value rounded to the dtype.
      if (out[i] != float_to_half_bits(t, v)) {
        ++failures;
        ADD_FAILURE() << name << ": decode_ref != round(decode_accumulate) at " << i;
      }
    }
  }
  return enc;
}

}  // namespace

TEST(CodecLayout, SizesAndBitsPerElement) {
  struct Row {
    int bits, g;
    double bpe;
  } rows[] = {{4, 128, 4.25}, {4, 64, 4.5}, {4, 32, 5.0}, {8, 128, 8.25}, {8, 64, 8.5}, {8, 32, 9.0}};
  for (auto r : rows) {
    CodecSpec s{r.bits, r.g};
    EXPECT_DOUBLE_EQ(codec_bits_per_element(s), r.bpe);
    for (size_t n : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{129}, size_t{1000003}}) {
      size_t ng = (n + r.g - 1) / r.g;
      EXPECT_EQ(codec_num_groups(s, n), ng);
      EXPECT_EQ(codec_encoded_bytes(s, n), ng * (r.g * r.bits / 8 + 4));
    }
    // Whole groups: bytes * 8 / n is exactly the table value.
    EXPECT_DOUBLE_EQ(codec_encoded_bytes(s, 1280) * 8.0 / 1280, r.bpe);
  }
}

TEST(CodecLayout, ValidateRejectsBadSpecsAndNulls) {
  EXPECT_EQ(validate({3, 128}, 10).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate({4, 100}, 10).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(validate({4, 32}, 0).ok());
  uint16_t x[4] = {1, 2, 3, 4};
  uint8_t e[64];
  EXPECT_EQ(encode_ref({8, 32}, DType::kBF16, nullptr, 4, e).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(encode_ref({8, 32}, DType::kBF16, x, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_ref({8, 16}, DType::kBF16, e, 4, x).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(encode_ref({8, 32}, DType::kBF16, nullptr, 0, nullptr).ok());
}

TEST(FloatBits, AllSixteenBitPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t b = static_cast<uint16_t>(h);
    for (DType t : {DType::kF16, DType::kBF16}) {
      float f = half_bits_to_float(t, b);
      if (half_bits_nonfinite(t, b) && std::isnan(f)) {
        uint16_t canon = t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
        EXPECT_EQ(float_to_half_bits(t, f), canon | (b & 0x8000));
        continue;
      }
      ASSERT_EQ(float_to_half_bits(t, f), b) << dtype_name(t) << " pattern " << h;
    }
    // fp16 -> float against the exact formula.
    int e = (h >> 10) & 31, m = h & 1023;
    if (e != 31) {
      double ref = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
      if (h & 0x8000) ref = -ref;
      ASSERT_EQ(static_cast<double>(f16_bits_to_float(b)), ref) << h;
    }
  }
}

namespace {
// Round a double to the 16-bit format by brute force: nearest of the neighbouring
// representable values, ties to even mantissa; beyond max+half-ulp -> inf.
uint16_t ref_round(DType t, double v) {
  if (std::isnan(v)) return t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  uint16_t inf = t == DType::kF16 ? 0x7C00 : 0x7F80;
  // Binary search over positive patterns (monotone), then compare neighbours.
  uint32_t lo = 0, hi = inf;  // value(lo) <= a < value(hi) invariant-ish
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    if (static_cast<double>(half_bits_to_float(t, static_cast<uint16_t>(mid))) <= a)
      lo = mid;
    else
      hi = mid;
  }
  double vl = half_bits_to_float(t, static_cast<uint16_t>(lo));
  double vh = hi == inf ? (t == DType::kF16 ? 65536.0 : std::ldexp(1.0, 128)) : half_bits_to_float(t, static_cast<uint16_t>(hi));
  uint32_t r;
  if (a - vl < vh - a) {
    r = lo;
  } else if (a - vl > vh - a) {
    r = hi;
  } else {
    r = (lo & 1) ? hi : lo;
  }
  return static_cast<uint16_t>(sign | r);
}
}  // namespace

TEST(FloatBits, FloatToHalfRoundingMatchesReference) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> vals;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) vals.push_back(f);
  }
  // Ties, near-ties, subnormals and overflow boundaries for both formats.
  for (uint32_t h = 0; h < 0x7C00; h += 7) {
    double a = f16_bits_to_float(static_cast<uint16_t>(h)), b = f16_bits_to_float(static_cast<uint16_t>(h + 1));
    float mid = static_cast<float>((a + b) / 2);
    vals.insert(vals.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), -mid});
  }
  for (uint32_t h = 0; h < 0x7F80; h += 5) {
    double a = bf16_bits_to_float(static_cast<uint16_t>(h)), b = bf16_bits_to_float(static_cast<uint16_t>(h + 1));
    float mid = static_cast<float>((a + b) / 2);
    vals.insert(vals.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), -mid});
  }
  vals.insert(vals.end(), {65504.0f, 65519.99f, 65520.0f, 1e30f, 3.4028235e38f, 3.3895314e38f, 3.3961776e38f,
                           5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-45f, 0.0f, -0.0f});
  for (float f : vals) {
    ASSERT_EQ(float_to_f16_bits(f), ref_round(DType::kF16, f)) << f;
    ASSERT_EQ(float_to_bf16_bits(f), ref_round(DType::kBF16, f)) << f;
  }
}

TEST(CodecRef, GaussianErrorBoundAllSpecs) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (CodecSpec s : all_specs()) {
      auto x = gaussian(t, 100003, 5, 2.0f, 0.5f);
      check_roundtrip(s, t, x, "gaussian");
    }
}

TEST(CodecRef, AdversarialErrorBoundAllSpecs) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (const auto& c : adversarial_cases(t))
      for (CodecSpec s : all_specs()) check_roundtrip(s, t, c.x, c.name.c_str());
}

TEST(CodecRef, LongOddLength) {
  auto x = gaussian(DType::kBF16, 1000003, 11);
  check_roundtrip({4, 128}, DType::kBF16, x, "n=1000003");
}

TEST(CodecRef, ConstantGroupsDecodeExactly) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (CodecSpec s : all_specs())
      for (float v : {1.5f, -3.25f, 65504.0f, -7e-5f, 1e-7f}) {
        std::vector<uint16_t> x(s.group_size * 2 + 3, float_to_half_bits(t, v));
        std::vector<uint8_t> enc(codec_encoded_bytes(s, x.size()));
        ASSERT_TRUE(encode_ref(s, t, x.data(), x.size(), enc.data()).ok());
        EXPECT_EQ(meta_u16(enc, s, x.size(), 0, 0), 0) << "scale of a constant group";
        std::vector<uint16_t> out(x.size());
        ASSERT_TRUE(decode_ref(s, t, enc.data(), x.size(), out.data()).ok());
        EXPECT_EQ(out, x) << v;
      }
}

TEST(CodecRef, HugeBf16RangeDoesNotOverflow) {
  // The full bf16 range in one group: scale must stay finite, decoded values finite.
  CodecSpec s{4, 32};
  std::vector<uint16_t> x(32);
  for (int i = 0; i < 32; ++i) x[i] = float_to_bf16_bits((i % 2 ? 1.0f : -1.0f) * 3.3895314e38f * (i / 31.0f));
  x[0] = 0xFF7F;  // -max
  x[1] = 0x7F7F;  // +max
  std::vector<uint8_t> enc(codec_encoded_bytes(s, 32));
  ASSERT_TRUE(encode_ref(s, DType::kBF16, x.data(), 32, enc.data()).ok());
  EXPECT_TRUE(std::isfinite(bf16_bits_to_float(meta_u16(enc, s, 32, 0, 0))));
  std::vector<uint16_t> out(32);
  ASSERT_TRUE(decode_ref(s, DType::kBF16, enc.data(), 32, out.data()).ok());
  EXPECT_EQ(out[0], 0xFF7F);
  EXPECT_EQ(out[1], 0x7F7F);
  for (auto o : out) EXPECT_FALSE(half_bits_nonfinite(DType::kBF16, o));
}

TEST(CodecRef, NanInfConfinedToTheirGroup) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (CodecSpec s : all_specs()) {
      const size_t G = s.group_size, n = 5 * G;
      auto x = gaussian(t, n, 3);
      uint16_t inf = t == DType::kBF16 ? 0x7F80 : 0x7C00;
      x[G + 3] = inf;                                     // group 1: +Inf
      x[3 * G + G - 1] = static_cast<uint16_t>(inf | 0x201);  // group 3: NaN
      std::vector<uint8_t> enc(codec_encoded_bytes(s, n));
      ASSERT_TRUE(encode_ref(s, t, x.data(), n, enc.data()).ok());
      auto clean = x;
      clean[G + 3] = clean[G + 2];
      clean[3 * G + G - 1] = clean[3 * G];
      std::vector<uint8_t> enc_clean(codec_encoded_bytes(s, n));
      ASSERT_TRUE(encode_ref(s, t, clean.data(), n, enc_clean.data()).ok());
      std::vector<uint16_t> out(n);
      ASSERT_TRUE(decode_ref(s, t, enc.data(), n, out.data()).ok());
      uint16_t canon = t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
      for (size_t g = 0; g < 5; ++g) {
        bool bad = g == 1 || g == 3;
        for (size_t i = g * G; i < (g + 1) * G; ++i) {
          if (bad) {
            ASSERT_EQ(out[i], canon) << "element " << i;
          }
        }
        if (!bad) {  // untouched groups encode exactly as without the bad values
          EXPECT_EQ(std::memcmp(&enc[g * G * s.bits / 8], &enc_clean[g * G * s.bits / 8], G * s.bits / 8), 0);
          EXPECT_EQ(meta_u16(enc, s, n, g, 0), meta_u16(enc_clean, s, n, g, 0));
          EXPECT_EQ(meta_u16(enc, s, n, g, 1), meta_u16(enc_clean, s, n, g, 1));
        }
      }
    }
}

TEST(CodecRef, Int4NibbleOrderHandComputed) {
  // Group of 32 with values min + q*scale, scale = 1 (bf16 exact), min = 0: q = i % 16.
  CodecSpec s{4, 32};
  std::vector<uint16_t> x(32);
  for (int i = 0; i < 32; ++i) x[i] = float_to_bf16_bits(static_cast<float>(i % 16));
  std::vector<uint8_t> enc(codec_encoded_bytes(s, 32));
  ASSERT_TRUE(encode_ref(s, DType::kBF16, x.data(), 32, enc.data()).ok());
  EXPECT_EQ(meta_u16(enc, s, 32, 0, 0), 0x3F80);  // scale 1.0
  EXPECT_EQ(meta_u16(enc, s, 32, 0, 1), 0x0000);  // min +0
  auto word = [&](int w) {
    return static_cast<uint32_t>(enc[4 * w]) | (enc[4 * w + 1] << 8) | (enc[4 * w + 2] << 16) |
           (static_cast<uint32_t>(enc[4 * w + 3]) << 24);
  };
  // word = q0 | q2<<4 | q4<<8 | q6<<12 | q1<<16 | q3<<20 | q5<<24 | q7<<28
  EXPECT_EQ(word(0), 0x75316420u);  // elements 0..7
  EXPECT_EQ(word(1), 0xFDB9ECA8u);  // elements 8..15
  EXPECT_EQ(word(2), 0x75316420u);
  EXPECT_EQ(word(3), 0xFDB9ECA8u);
  // (word >> 4j) & 0x000F000F yields elements (2j, 2j+1).
  for (int j = 0; j < 4; ++j) EXPECT_EQ((word(0) >> (4 * j)) & 0x000F000Fu, (2u * j) | ((2u * j + 1) << 16));
}

TEST(CodecRef, Int8ByteOrderAndPadding) {
  CodecSpec s{8, 32};
  std::vector<uint16_t> x(35);
  for (int i = 0; i < 35; ++i) x[i] = float_to_f16_bits(static_cast<float>((i * 37) % 256) * 0.5f - 10.0f);
  x[0] = float_to_f16_bits(-10.0f);
  x[1] = float_to_f16_bits(117.5f);  // range 127.5 = 255 * 0.5
  std::vector<uint8_t> enc(codec_encoded_bytes(s, 35), 0xCD);
  ASSERT_TRUE(encode_ref(s, DType::kF16, x.data(), 35, enc.data()).ok());
  for (int i = 0; i < 32; ++i) {  // group 0 (elements 32..34 form group 1 with its own min)
    int q = static_cast<int>(std::lround((half_bits_to_float(DType::kF16, x[i]) + 10.0f) / 0.5f));
    ASSERT_EQ(enc[i], q) << i;
  }
  for (int i = 35; i < 64; ++i) EXPECT_EQ(enc[i], 0) << "padding byte " << i;
}

TEST(CodecRef, KnownAnswerExactGrid) {
  // Values exactly min + q*scale with scale a power of two times a short mantissa: the
  // codec's scale equals it (range / L is exactly representable), so decode is exact.
  std::mt19937 rng(8);
  for (DType t : {DType::kBF16, DType::kF16})
    for (CodecSpec s : all_specs()) {
      int L = codec_levels(s);
      // bf16 holds 8 significant bits: keep |q - 128| * scale on an 8-bit grid.
      float scale = t == DType::kF16 ? 0.125f : 0.25f, mn = t == DType::kF16 ? -3.0f : -32.0f;
      std::uniform_int_distribution<int> qd(0, L);
      std::vector<uint16_t> x(s.group_size * 4);
      std::vector<int> q(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        q[i] = (i % s.group_size == 0) ? 0 : (i % s.group_size == 1 ? L : qd(rng));
        x[i] = float_to_half_bits(t, mn + q[i] * scale);
        ASSERT_EQ(half_bits_to_float(t, x[i]), mn + q[i] * scale) << "test value not representable";
      }
      std::vector<uint8_t> enc(codec_encoded_bytes(s, x.size()));
      ASSERT_TRUE(encode_ref(s, t, x.data(), x.size(), enc.data()).ok());
      std::vector<uint16_t> out(x.size());
      ASSERT_TRUE(decode_ref(s, t, enc.data(), x.size(), out.data()).ok());
      EXPECT_EQ(out, x) << s.bits << "/" << s.group_size << " " << dtype_name(t);
    }
}

TEST(CodecRef, DecodeAccumulateAddsExactlyTheDecodedValues) {
  for (CodecSpec s : all_specs()) {
    const size_t n = 1001;
    auto x = gaussian(DType::kBF16, n, 21);
    std::vector<uint8_t> enc(codec_encoded_bytes(s, n));
    ASSERT_TRUE(encode_ref(s, DType::kBF16, x.data(), n, enc.data()).ok());
    std::vector<float> zero(n, 0.0f), acc(n);
    ASSERT_TRUE(decode_accumulate_ref(s, DType::kBF16, enc.data(), n, zero.data()).ok());
    std::mt19937 rng(3);
    std::normal_distribution<float> d;
    for (auto& a : acc) a = d(rng);
    auto before = acc;
    ASSERT_TRUE(decode_accumulate_ref(s, DType::kBF16, enc.data(), n, acc.data()).ok());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], before[i] + zero[i]) << i;
  }
}

TEST(CodecRef, SignedZeroTieIsDeterministic) {
  // min picks -0, max +0 whatever the order: a {+0,-0} group is constant with min -0.
  CodecSpec s{8, 32};
  for (int order = 0; order < 2; ++order) {
    std::vector<uint16_t> x(32, 0x0000);
    x[order ? 31 : 0] = 0x8000;
    std::vector<uint8_t> enc(codec_encoded_bytes(s, 32));
    ASSERT_TRUE(encode_ref(s, DType::kBF16, x.data(), 32, enc.data()).ok());
    EXPECT_EQ(meta_u16(enc, s, 32, 0, 1), 0x8000);
    EXPECT_EQ(meta_u16(enc, s, 32, 0, 0), 0);
  }
}
