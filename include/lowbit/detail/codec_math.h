// The Flash All-Reduce codec: asymmetric group quantization of fp16/bf16 to INT8/INT4.
// This header is the single definition of the byte layout and of every rounding step; the
// CPU reference (reference/codec/) and the CUDA kernels (kernels/codec/, the all-reduce)
// both call these functions, so they cannot drift apart.
//
// ---- Byte layout of one encoded segment of n elements ----------------------------------
// G = group size (32, 64 or 128), b = bits (4 or 8), L = 2^b - 1, ngroups = ceil(n / G).
//
//   [ data : ngroups * G * b / 8 bytes ][ meta : ngroups * 4 bytes ]
//
// data: group g occupies bytes [g*G*b/8, (g+1)*G*b/8).
//   INT8: byte i of the group is q of element i.
//   INT4: 32-bit little-endian words, 8 elements each; word w holds elements 8w..8w+7 with
//         element kInt4Order[s] in nibble slot s (bits 4s..4s+3), kInt4Order = 0,2,4,6,1,3,5,7.
//         So (word >> 4j) & 0x000F000F yields elements (2j, 2j+1) in the two 16-bit halves:
//         one LOP3 with 0x64006400 (fp16 1024) or 0x43004300 (bf16 128) gives a half2.
//   A partial last group (n % G != 0) is padded with q = 0; its metadata covers only the
//   valid elements. Decoders write exactly n outputs.
// meta: group g at byte offset 4g: uint16 scale, uint16 min (little-endian).
//   scale: bf16 bits, >= (max - min) / L (rounded UP, so every q stays in range and
//          bf16 never overflows, even for bf16 inputs near 3.4e38); 0 for a constant group.
//   min:   the group's minimum in the input dtype (exact: it is one of the inputs), so a
//          constant group decodes exactly.
//   A group holding NaN or Inf stores scale = bf16 NaN and min = NaN: all its elements
//   decode to NaN, no other group is affected.
//
// Bits per element (data + metadata): b + 32/G
//   INT4: G=128 4.25, G=64 4.5, G=32 5.0      INT8: G=128 8.25, G=64 8.5, G=32 9.0
//
// ---- Arithmetic (all fp32 round-to-nearest-even, no FMA contraction except where stated) --
//   encode: t = (x/2 - min/2) / (scale/2)      [halving is exact for 16-bit inputs and keeps
//                                               x - min finite for bf16 near +-3.4e38]
//           q = clamp(rint(t), 0, L)           [rint: round half to even]
//   decode: v = fma(q, scale, min)             [one rounding]; v = min(v, dtype max finite)
//           output = round_to_dtype(v), or acc += v for decode-and-accumulate (fp32).
//   Error bound: |x - v| <= scale/2 + ulp_fp32(v), and scale <= (max-min)/L * (1 + 2^-7).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lowbit/detail/float_bits.h"
#include "lowbit/detail/hd.h"

namespace lowbit::codec {

// Nibble slot s of an INT4 word holds element kInt4Order[s] of its 8-element run.
constexpr int kInt4Order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
// Element e of the run lives in nibble slot kInt4Slot[e] (the inverse permutation).
constexpr int kInt4Slot[8] = {0, 4, 1, 5, 2, 6, 3, 7};

constexpr int kMetaBytesPerGroup = 4;

struct CodecSpec {
  int bits = 8;         // 4 or 8
  int group_size = 128;  // 32, 64 or 128
};

LOWBIT_HD bool codec_spec_valid(CodecSpec c) {
  return (c.bits == 4 || c.bits == 8) && (c.group_size == 32 || c.group_size == 64 || c.group_size == 128);
}
LOWBIT_HD int codec_levels(CodecSpec c) { return (1 << c.bits) - 1; }
LOWBIT_HD size_t codec_num_groups(CodecSpec c, size_t n) {
  return (n + static_cast<size_t>(c.group_size) - 1) / static_cast<size_t>(c.group_size);
}
LOWBIT_HD size_t codec_group_data_bytes(CodecSpec c) {
  return static_cast<size_t>(c.group_size) * static_cast<size_t>(c.bits) / 8;
}
LOWBIT_HD size_t codec_data_bytes(CodecSpec c, size_t n) { return codec_num_groups(c, n) * codec_group_data_bytes(c); }
LOWBIT_HD size_t codec_meta_bytes(CodecSpec c, size_t n) { return codec_num_groups(c, n) * kMetaBytesPerGroup; }
LOWBIT_HD size_t codec_encoded_bytes(CodecSpec c, size_t n) { return codec_data_bytes(c, n) + codec_meta_bytes(c, n); }
// Storage cost per element, metadata included (e.g. 4.25 for INT4, G=128).
LOWBIT_HD double codec_bits_per_element(CodecSpec c) { return c.bits + 8.0 * kMetaBytesPerGroup / c.group_size; }

// Per-group metadata as stored (bit patterns) and as used in arithmetic (fp32).
struct GroupMeta {
  uint16_t scale_bits;  // bf16
  uint16_t min_bits;    // input dtype
  float scale;
  float min;
};

// Smallest bf16 >= v, for finite v > 0 (v given in double so the range (max-min)/L of any
// bf16 inputs is representable). Returns bf16 bits.
LOWBIT_HD uint16_t bf16_bits_round_up(double v) {
#if LOWBIT_ON_DEVICE
  float f = __double2float_rn(v);
#else
  float f = static_cast<float>(v);
#endif
  uint32_t u = float_as_bits(f);
  if (static_cast<double>(f) < v) ++u;  // next float up (f > 0, finite)
  if (u & 0xFFFFu) u = (u & 0xFFFF0000u) + 0x10000u;
  return static_cast<uint16_t>(u >> 16);
}

// Metadata of a group from its min/max (16-bit bit patterns of the extreme inputs) and
// whether every element was finite.
LOWBIT_HD GroupMeta make_group_meta(CodecSpec c, DType t, uint16_t min_bits, uint16_t max_bits, bool all_finite) {
  GroupMeta m;
  if (!all_finite) {
    m.scale_bits = kBF16CanonicalNaN;
    m.min_bits = t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
  } else {
    m.min_bits = min_bits;
    float mn = half_bits_to_float(t, min_bits);
    float mx = half_bits_to_float(t, max_bits);
    if (mx == mn) {
      m.scale_bits = 0;
    } else {
      double range = static_cast<double>(mx) - static_cast<double>(mn);
      m.scale_bits = bf16_bits_round_up(range / static_cast<double>(codec_levels(c)));
    }
  }
  m.scale = bf16_bits_to_float(m.scale_bits);
  m.min = half_bits_to_float(t, m.min_bits);
  return m;
}

// Rebuild GroupMeta from the two stored uint16 values.
LOWBIT_HD GroupMeta load_group_meta(DType t, uint16_t scale_bits, uint16_t min_bits) {
  GroupMeta m;
  m.scale_bits = scale_bits;
  m.min_bits = min_bits;
  m.scale = bf16_bits_to_float(scale_bits);
  m.min = half_bits_to_float(t, min_bits);
  return m;
}

// q for one input value x (fp32, converted exactly from the 16-bit input).
LOWBIT_HD uint32_t quantize_value(CodecSpec c, const GroupMeta& m, float x) {
  if (!(m.scale > 0.0f)) return 0;  // constant group, or NaN group (scale NaN)
#if LOWBIT_ON_DEVICE
  float d = __fsub_rn(__fmul_rn(x, 0.5f), __fmul_rn(m.min, 0.5f));
  float t = __fdiv_rn(d, __fmul_rn(m.scale, 0.5f));
  float r = rintf(t);
#else
  float d = x * 0.5f - m.min * 0.5f;
  float t = d / (m.scale * 0.5f);
  float r = std::nearbyint(t);
#endif
  float lv = static_cast<float>(codec_levels(c));
  r = r < 0.0f ? 0.0f : (r > lv ? lv : r);
  return static_cast<uint32_t>(r);
}

// Decoded fp32 value of q (before rounding to the output dtype).
LOWBIT_HD float dequantize_value(DType t, const GroupMeta& m, uint32_t q) {
#if LOWBIT_ON_DEVICE
  float v = __fmaf_rn(static_cast<float>(q), m.scale, m.min);
#else
  float v = std::fma(static_cast<float>(q), m.scale, m.min);
#endif
  float mx = dtype_max_finite(t);
  return v > mx ? mx : v;  // NaN compares false and stays NaN
}

}  // namespace lowbit::codec
