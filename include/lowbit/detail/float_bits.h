// Bit-exact conversions between fp32 and the 16-bit float formats (IEEE fp16, bf16), in
// integer arithmetic, identical on the host and the device. All conversions to 16 bits
// round to nearest even; NaN becomes the canonical quiet NaN (0x7E00 / 0x7FC0) so that the
// CPU reference and the GPU produce identical bytes even for NaN payloads.
//
// Device code may use CUDA's correctly rounded intrinsics (__float2bfloat16_rn,
// __float2half_rn, ...) for speed: they agree with these functions on every non-NaN input;
// NaN outputs must still be canonicalized.
#pragma once

#include <cstdint>
#include <cstring>

#include "lowbit/detail/hd.h"

namespace lowbit {

enum class DType : uint8_t { kF16 = 0, kBF16 = 1 };

constexpr const char* dtype_name(DType t) { return t == DType::kF16 ? "fp16" : "bf16"; }

constexpr uint16_t kF16CanonicalNaN = 0x7E00;
constexpr uint16_t kBF16CanonicalNaN = 0x7FC0;
constexpr float kF16MaxFinite = 65504.0f;
constexpr float kBF16MaxFinite = 3.38953139e38f;  // 0x7F7F

LOWBIT_HD uint32_t float_as_bits(float f) {
#if LOWBIT_ON_DEVICE
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

LOWBIT_HD float bits_as_float(uint32_t u) {
#if LOWBIT_ON_DEVICE
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

LOWBIT_HD float bf16_bits_to_float(uint16_t h) { return bits_as_float(static_cast<uint32_t>(h) << 16); }

LOWBIT_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_as_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return kBF16CanonicalNaN | static_cast<uint16_t>((u >> 16) & 0x8000u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

LOWBIT_HD float f16_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu;
  uint32_t m = h & 0x3FFu;
  if (e == 0) {
    // Subnormal (or zero): m * 2^-24, exact in fp32.
    float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return bits_as_float(float_as_bits(v) | sign);
  }
  if (e == 31) return bits_as_float(sign | 0x7F800000u | (m << 13));
  return bits_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

LOWBIT_HD uint16_t float_to_f16_bits(float f) {
  uint32_t x = float_as_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x > 0x7F800000u) return kF16CanonicalNaN | sign;
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to inf (ties to even)
  if (x < 0x38800000u) {                        // below 2^-14: fp16 subnormal or zero
    int e = static_cast<int>(x >> 23);
    int shift = 126 - e;
    if (shift > 24) return sign;
    uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = (x - 0x38000000u) >> 13;
  uint32_t rem = x & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

LOWBIT_HD float half_bits_to_float(DType t, uint16_t h) {
  return t == DType::kF16 ? f16_bits_to_float(h) : bf16_bits_to_float(h);
}
LOWBIT_HD uint16_t float_to_half_bits(DType t, float f) {
  return t == DType::kF16 ? float_to_f16_bits(f) : float_to_bf16_bits(f);
}
// True when the 16-bit value is NaN or +-Inf.
LOWBIT_HD bool half_bits_nonfinite(DType t, uint16_t h) {
  return t == DType::kF16 ? (h & 0x7C00u) == 0x7C00u : (h & 0x7F80u) == 0x7F80u;
}
LOWBIT_HD float dtype_max_finite(DType t) { return t == DType::kF16 ? kF16MaxFinite : kBF16MaxFinite; }

}  // namespace lowbit
