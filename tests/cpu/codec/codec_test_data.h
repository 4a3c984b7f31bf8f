// Test inputs shared by the CPU and GPU codec suites: random Gaussian data and the
// adversarial cases the spec lists (values far beyond fp16 range, constant groups, tiny
// amplitudes, subnormals, mixed signs, NaN/Inf, lengths that are not multiples of G).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "lowbit/detail/codec_math.h"

namespace lowbit::codec::testing {

struct Case {
  std::string name;
  std::vector<uint16_t> x;
};

inline std::vector<uint16_t> gaussian(DType t, size_t n, uint32_t seed, float sigma = 1.0f, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, sigma);
  std::vector<uint16_t> v(n);
  for (auto& e : v) e = float_to_half_bits(t, d(rng));
  return v;
}

inline std::vector<CodecSpec> all_specs() {
  std::vector<CodecSpec> s;
  for (int b : {4, 8})
    for (int g : {32, 64, 128}) s.push_back({b, g});
  return s;
}

// Adversarial inputs for dtype t (each a whole array; lengths chosen to hit partial groups).
inline std::vector<Case> adversarial_cases(DType t) {
  std::vector<Case> cs;
  std::mt19937 rng(1234);
  auto h = [&](float f) { return float_to_half_bits(t, f); };
  const float big = t == DType::kBF16 ? 3.38e38f : 65504.0f;
  {  // extremes of the dtype, mixed signs
    Case c{"extremes", {}};
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < 1000; ++i) c.x.push_back(h(u(rng) * big));
    for (int i = 0; i < 128; ++i) c.x.push_back(i % 2 ? h(big) : h(-big));  // max range groups
    cs.push_back(c);
  }
  if (t == DType::kBF16) {  // bf16 values far beyond fp16's range
    Case c{"beyond_fp16", {}};
    std::uniform_real_distribution<float> e(16.0f, 127.0f);
    for (int i = 0; i < 777; ++i) c.x.push_back(h((i % 3 ? 1.0f : -1.0f) * std::exp2(e(rng))));
    cs.push_back(c);
  }
  {  // constant groups, including zeros of both signs and the extremes
    Case c{"constant", {}};
    for (float v : {1.5f, -3.25f, 0.0f, -0.0f, big, -big, 1e-3f})
      for (int i = 0; i < 128; ++i) c.x.push_back(h(v));
    for (int i = 0; i < 128; ++i) c.x.push_back(i % 2 ? 0x0000 : 0x8000);  // +0 / -0 mix
    cs.push_back(c);
  }
  {  // tiny amplitude: 1 + tiny noise, and values of order 1e-30 (bf16) / 1e-6 (fp16)
    Case c{"tiny_amplitude", {}};
    std::normal_distribution<float> d(0.0f, 1.0f);
    float tiny = t == DType::kBF16 ? 1e-30f : 1e-6f;
    for (int i = 0; i < 640; ++i) c.x.push_back(h(tiny * d(rng)));
    for (int i = 0; i < 256; ++i) c.x.push_back(h(5.0f + tiny * 1e3f * d(rng)));
    cs.push_back(c);
  }
  {  // subnormals of the dtype (all bit patterns with exponent 0)
    Case c{"subnormals", {}};
    std::uniform_int_distribution<int> m(0, t == DType::kBF16 ? 0x7F : 0x3FF);
    for (int i = 0; i < 1024; ++i) c.x.push_back(static_cast<uint16_t>(m(rng) | (i % 2 ? 0x8000 : 0)));
    cs.push_back(c);
  }
  {  // NaN and Inf scattered in some groups; other groups Gaussian
    Case c{"nan_inf", gaussian(t, 4096 + 77, 99)};
    uint16_t pinf = t == DType::kBF16 ? 0x7F80 : 0x7C00;
    uint16_t nan = t == DType::kBF16 ? 0x7FC1 : 0x7E01;  // non-canonical payload
    c.x[5] = nan;
    c.x[300] = pinf;
    c.x[700] = static_cast<uint16_t>(pinf | 0x8000);
    c.x[1500] = static_cast<uint16_t>(nan | 0x8000);
    c.x[4096 + 70] = nan;  // in the partial last group
    cs.push_back(c);
  }
  {  // wide dynamic range inside a group (outliers)
    Case c{"outliers", gaussian(t, 3000, 7, 0.1f)};
    for (size_t i = 17; i < c.x.size(); i += 129) c.x[i] = h(i % 2 ? 4000.0f : -2500.0f);
    cs.push_back(c);
  }
  for (size_t n : {size_t{1}, size_t{7}, size_t{31}, size_t{33}, size_t{63}, size_t{65}, size_t{127}, size_t{129}}) {
    cs.push_back({"len" + std::to_string(n), gaussian(t, n, static_cast<uint32_t>(n), 3.0f, 1.0f)});
  }
  return cs;
}

}  // namespace lowbit::codec::testing
