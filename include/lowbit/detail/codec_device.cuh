// Device-side building blocks of the Flash All-Reduce codec, shared by the standalone codec
// kernels (kernels/codec/) and the all-reduce kernels. Every function here produces exactly
// the bits of the matching lowbit/detail/codec_math.h function (the CPU reference calls
// those); the faster formulations used here are argued equal in the comments and checked
// bit-for-bit against the CPU reference by tests/gpu/codec/.
//
// Unit of work: a "chunk" of 8 consecutive 16-bit elements held by one thread as a uint4
// (little-endian pairs: .x holds elements 0 (low half) and 1 (high half), ...). A group of G
// elements is held by G/8 consecutive lanes starting at a lane that is a multiple of G/8
// (G=32: 4 lanes, 64: 8 lanes, 128: 16 lanes). Group encode of register-held values:
//
//   uint32_t mm = dev::minmax8<T>(x, valid);            // per-thread packed min/max keys
//   mm = dev::group_reduce_minmax<G / 8>(mm);           // whole warp calls (full mask)
//   GroupMeta m = dev::group_meta<T>(spec, mm);          // == make_group_meta(...)
//   dev::QuantCtx qc = dev::make_quant_ctx(spec, m);
//   float r[8]; dev::quantize8<T>(qc, x, r);              // == quantize_value(...) each
//   uint32_t word = dev::int4_pack8(r);  or  uint2 b = dev::int8_pack8(r);
//   meta word (scale_bits | min_bits << 16) written by the group's first lane.
//
// Decode of one chunk: dev::int4_unpack8(word, qf) / dev::int8_unpack8(b, qf) give q as
// floats, dev::dequantize8<T>(m, qf, v) the fp32 values (== dequantize_value), and
// dev::pack_out8<T>(v) the output dtype bits (NaN -> positive canonical NaN, as decode_ref).
#pragma once

#if !defined(__CUDACC__)
#error "codec_device.cuh is CUDA-only; include it from .cu files"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "lowbit/detail/codec_math.h"

namespace lowbit::codec::dev {

// ---- 16-bit float <-> fp32 (exact conversions; hardware paths) ------------------------
template <DType T>
LOWBIT_DEVICE float2 to_f32x2(uint32_t w) {  // elements (low half, high half)
  if constexpr (T == DType::kBF16) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
  } else {
    __half2 h = *reinterpret_cast<__half2*>(&w);
    return __half22float2(h);  // exact; NaN payloads differ but NaN groups never use values
  }
}

// Two fp32 -> two 16-bit values (RNE), low half = a. Equal to float_to_half_bits for every
// non-NaN input (cvt.rn is correctly rounded; fp16 overflow cannot happen because decode
// clamps to 65504 first). NaN inputs are handled by callers (see pack_out8).
template <DType T>
LOWBIT_DEVICE uint32_t from_f32x2(float a, float b) {
  if constexpr (T == DType::kBF16) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// ---- group min / max over ordered keys ------------------------------------------------
// key(h): unsigned 16-bit, monotone in float order for all non-NaN values with -0 < +0 (the
// CPU reference's tie rule), so an integer min/max equals the float min/max. +-Inf/NaN
// keys lie beyond every finite key, which makes non-finite detection free (group_meta).
// Two keys per 32-bit word: key = h ^ (sign ? 0xFFFF : 0x8000).
LOWBIT_DEVICE uint32_t order_keys2(uint32_t w) {
  uint32_t sign = (w >> 15) & 0x00010001u;
  return w ^ ((sign * 0xFFFFu) | 0x80008000u);
}
LOWBIT_DEVICE uint16_t key_to_bits(uint32_t k) {
  return static_cast<uint16_t>((k & 0x8000u) ? (k & 0x7FFFu) : (~k & 0xFFFFu));
}

// Packed min/max: low half = min key, high half = 0xFFFF - max key, so one __vminu2
// reduces both. 0xFFFFFFFF is the identity (used for padding of a partial last group).
constexpr uint32_t kMinMaxIdentity = 0xFFFFFFFFu;

// Packed min/max of the chunk's first `valid` elements (valid in 0..8; pass 8 for full).
LOWBIT_DEVICE uint32_t minmax8(const uint4& x, int valid = 8) {
  uint32_t w[4] = {x.x, x.y, x.z, x.w};
  uint32_t mn = 0xFFFFFFFFu, mx = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t k = order_keys2(w[i]);
    if (valid < 8) {  // blank out missing elements with identities (min: 0xFFFF, max: 0)
      uint32_t lo_ok = (2 * i < valid) ? 0x0000FFFFu : 0u, hi_ok = (2 * i + 1 < valid) ? 0xFFFF0000u : 0u;
      uint32_t ok = lo_ok | hi_ok;
      mn = __vminu2(mn, k | ~ok);
      mx = __vmaxu2(mx, k & ok);
    } else {
      mn = __vminu2(mn, k);
      mx = __vmaxu2(mx, k);
    }
  }
  uint32_t mn1 = min(mn & 0xFFFFu, mn >> 16);
  uint32_t mx1 = max(mx & 0xFFFFu, mx >> 16);
  return mn1 | ((0xFFFFu - mx1) << 16);
}

// Reduce a packed min/max across kLanes aligned consecutive lanes (butterfly). Every lane
// of the warp must call it (full mask); lanes without data pass kMinMaxIdentity.
template <int kLanes>
LOWBIT_DEVICE uint32_t group_reduce_minmax(uint32_t mm) {
#pragma unroll
  for (int off = kLanes / 2; off > 0; off /= 2) mm = __vminu2(mm, __shfl_xor_sync(0xFFFFFFFFu, mm, off));
  return mm;
}

// GroupMeta of a reduced packed min/max: identical to make_group_meta on the group's
// min/max bit patterns and finiteness. Non-finite: some key at or beyond the key of +Inf
// (max side) or at or below the key of -Inf (min side); NaNs of either sign lie there too.
template <DType T>
LOWBIT_DEVICE GroupMeta group_meta(CodecSpec c, uint32_t mm) {
  uint32_t kmin = mm & 0xFFFFu, kmax = 0xFFFFu - (mm >> 16);
  constexpr uint32_t kPosInf = T == DType::kF16 ? 0xFC00u : 0xFF80u;  // key(+Inf)
  constexpr uint32_t kNegInf = T == DType::kF16 ? 0x03FFu : 0x007Fu;  // key(-Inf)
  bool finite = kmax < kPosInf && kmin > kNegInf;
  return make_group_meta(c, T, key_to_bits(kmin), key_to_bits(kmax), finite);
}

// Meta word as stored: uint16 scale (low) then uint16 min (high), little-endian.
LOWBIT_DEVICE uint32_t meta_word(const GroupMeta& m) {
  return static_cast<uint32_t>(m.scale_bits) | (static_cast<uint32_t>(m.min_bits) << 16);
}
template <DType T>
LOWBIT_DEVICE GroupMeta load_meta(uint32_t word) {
  return load_group_meta(T, static_cast<uint16_t>(word & 0xFFFFu), static_cast<uint16_t>(word >> 16));
}

// ---- quantize --------------------------------------------------------------------------
// quantize_value computes q = clamp(rint(d / hs)) with d = x/2 - min/2, hs = scale/2 and an
// IEEE division. Here: t' = d * RN(1/hs). For hs >= 2^-100, |t' - RN(d/hs)| <= 3 * 2^-24 *
// d/hs <= 2^-14 (d/hs <= L*(1+2^-24) <= 256), so whenever t' is farther than 2^-12 from a
// half-integer, rint(t') == rint(RN(d/hs)). Otherwise (about 0.05% of elements) and for
// tiny scales, the exact codec_math quantize_value is used. Result: identical q.
struct QuantCtx {
  GroupMeta m;
  float half_min;   // min * 0.5
  float half_scale; // scale * 0.5
  float inv;        // RN(1 / half_scale)
  float levels;
  int mode;         // 0: all q = 0 (constant or NaN group), 1: fast path, 2: exact division
};

LOWBIT_DEVICE QuantCtx make_quant_ctx(CodecSpec c, const GroupMeta& m) {
  QuantCtx q;
  q.m = m;
  q.half_min = __fmul_rn(m.min, 0.5f);
  q.half_scale = __fmul_rn(m.scale, 0.5f);
  q.levels = static_cast<float>(codec_levels(c));
  q.inv = 0.0f;
  if (!(m.scale > 0.0f)) {
    q.mode = 0;
  } else if (q.half_scale >= 7.88860905e-31f /* 2^-100 */) {
    q.mode = 1;
    q.inv = __frcp_rn(q.half_scale);
  } else {
    q.mode = 2;
  }
  return q;
}

// q (as an integral float in [0, L]) of one finite-group element x.
LOWBIT_DEVICE float quantize1(const QuantCtx& qc, CodecSpec c, float x) {
  float d = __fsub_rn(__fmul_rn(x, 0.5f), qc.half_min);
  float r;
  if (qc.mode == 1) {
    float t = __fmul_rn(d, qc.inv);
    r = rintf(t);
    if (fabsf(__fsub_rn(t, r)) >= 0.499755859375f /* 0.5 - 2^-12 */) r = rintf(__fdiv_rn(d, qc.half_scale));
  } else {
    r = rintf(__fdiv_rn(d, qc.half_scale));
  }
  return fminf(fmaxf(r, 0.0f), qc.levels);
}

// q of the 8 elements of a chunk as integral floats. Padding elements of a partial group
// may hold anything: callers zero them (pass valid < 8).
template <DType T>
LOWBIT_DEVICE void quantize8(const QuantCtx& qc, CodecSpec c, const uint4& x, float r[8], int valid = 8) {
  if (qc.mode == 0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = 0.0f;
    return;
  }
  uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = to_f32x2<T>(w[i]);
    r[2 * i] = quantize1(qc, c, f.x);
    r[2 * i + 1] = quantize1(qc, c, f.y);
  }
  if (valid < 8) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i >= valid) r[i] = 0.0f;
  }
}

// Integral float in [0, 255] -> its integer in the low byte of the returned bits (magic
// number 2^23: adding it places the integer in the low mantissa bits exactly).
LOWBIT_DEVICE uint32_t q_bits(float r) { return __float_as_uint(__fadd_rn(r, 8388608.0f)); }

// INT4 word of 8 q's: element e in nibble slot kInt4Slot[e] (order 0,2,4,6,1,3,5,7), so
// word = q0 | q2<<4 | q4<<8 | q6<<12 | q1<<16 | q3<<20 | q5<<24 | q7<<28.
LOWBIT_DEVICE uint32_t int4_pack8(const float r[8]) {
  uint32_t p[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) p[j] = __byte_perm(q_bits(r[2 * j]), q_bits(r[2 * j + 1]), 0x5410u) & 0x000F000Fu;
  return p[0] | (p[1] << 4) | (p[2] << 8) | (p[3] << 12);
}
// Integer version (same order), for callers holding integer q's.
LOWBIT_DEVICE uint32_t int4_pack8(const uint32_t q[8]) {
  uint32_t w = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) w |= (q[e] & 0xFu) << (4 * ((e >> 1) + 4 * (e & 1)));  // 4 * kInt4Slot[e]
  // (kInt4Slot itself is a host constexpr array, not usable in device code)
  return w;
}
// INT8: byte e = q of element e.
LOWBIT_DEVICE uint2 int8_pack8(const float r[8]) {
  uint32_t b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = q_bits(r[i]);
  uint32_t lo = __byte_perm(__byte_perm(b[0], b[1], 0x0040u), __byte_perm(b[2], b[3], 0x0040u), 0x5410u);
  uint32_t hi = __byte_perm(__byte_perm(b[4], b[5], 0x0040u), __byte_perm(b[6], b[7], 0x0040u), 0x5410u);
  return make_uint2(lo, hi);
}

// ---- unpack + dequantize ------------------------------------------------------------
// q as floats via the magic number 2^23 (0x4B000000 | q reads as 2^23 + q; one exact
// subtraction leaves q), avoiding integer-to-float conversions.
LOWBIT_DEVICE float magic_q(uint32_t bits_low) { return __fsub_rn(__uint_as_float(0x4B000000u | bits_low), 8388608.0f); }

LOWBIT_DEVICE void int4_unpack8(uint32_t w, float qf[8]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t pair = (w >> (4 * j)) & 0x000F000Fu;  // elements 2j (low half), 2j+1 (high half)
    qf[2 * j] = magic_q(pair & 0xFFFFu);
    qf[2 * j + 1] = magic_q(pair >> 16);
  }
}
LOWBIT_DEVICE void int8_unpack8(uint2 b, float qf[8]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    qf[k] = __fsub_rn(__uint_as_float(__byte_perm(b.x, 0x4B000000u, 0x7440u | k)), 8388608.0f);
    qf[4 + k] = __fsub_rn(__uint_as_float(__byte_perm(b.y, 0x4B000000u, 0x7440u | k)), 8388608.0f);
  }
}

// fp32 decoded values, each equal to dequantize_value(T, m, q): fma(q, scale, min) then
// clamp to the dtype's max finite. With finite metadata v is never NaN, so fminf equals
// the reference's `v > mx ? mx : v`; non-finite metadata takes the reference formula.
template <DType T>
LOWBIT_DEVICE void dequantize8(const GroupMeta& m, const float qf[8], float v[8]) {
  const float mx = dtype_max_finite(T);
  if (isfinite(m.scale) && isfinite(m.min)) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = fminf(__fmaf_rn(qf[i], m.scale, m.min), mx);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = dequantize_value(T, m, static_cast<uint32_t>(qf[i]));
  }
}

// 8 fp32 -> 8 output values (uint4), NaN -> positive canonical NaN (decode_ref's rule).
template <DType T>
LOWBIT_DEVICE uint4 pack_out8(const float v[8]) {
  uint32_t o[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] = from_f32x2<T>(v[2 * j], v[2 * j + 1]);
  constexpr uint32_t kNaN = T == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (isnan(v[2 * j])) o[j] = (o[j] & 0xFFFF0000u) | kNaN;
    if (isnan(v[2 * j + 1])) o[j] = (o[j] & 0x0000FFFFu) | (kNaN << 16);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}


// ---- faster encode path (used by kernels/codec/encode.cu; all additive) -----------------
// Same result as minmax8(x) (full chunk) with a shorter instruction sequence: min / max
// trees over the packed keys, then the two halves of each merged with one __vminu2.
// (Note: CUDA's __byte_perm uses only the low 3 bits of each selector nibble, so prmt's
// sign-replicate mode is not reachable through it.)
LOWBIT_DEVICE uint32_t minmax8_full(const uint4& x) {
  uint32_t k0 = order_keys2(x.x), k1 = order_keys2(x.y), k2 = order_keys2(x.z), k3 = order_keys2(x.w);
  uint32_t mn = __vminu2(__vminu2(k0, k1), __vminu2(k2, k3));
  uint32_t mx = ~__vmaxu2(__vmaxu2(k0, k1), __vmaxu2(k2, k3));  // 0xFFFF - max per half
  return __vminu2(__byte_perm(mn, mx, 0x5410u), __byte_perm(mn, mx, 0x7632u));
}

// Fast quantization, identical to quantize_value (argument):
//   d = fma(x, 0.5, -min/2) equals RN(RN(x*0.5) - min/2) because x*0.5 is exact for 16-bit
//   inputs. s = RN(d * inv + M) with inv = RN(1/hs), hs = scale/2 in [2^-100, 2^100], and M
//   = B + 0.5 + 2u, where the binade [B, 2B) has ulp u: B = 128, u = 2^-16 for INT4 (t < 16);
//   B = 256, u = 2^-15 for INT8 (t < 256). The mantissa of s is then (tau + 0.5)/u + 2 with
//   tau = s - M; its bits above the fraction field are floor(tau + 0.5), its fraction field
//   fr (16 / 15 bits) is ((tau + 0.5)/u mod 1/u) + 2. If fr >= 5, tau + 0.5 is >= 3u away
//   from every integer. With T = d/hs <= L(1 + 2^-22) and rho = RN(T) (the reference's
//   quotient): |tau - rho| <= u/2 (rounding of s) + T*2^-24 (inv) + ulp(T)/2 < 1.25u, so
//   rho lies on the same side of the same half-integer: rint(rho) = floor(tau + 0.5), which
//   is <= L (no clamp needed; rho < L + 0.5) and >= 0 (d >= 0 as x >= min). When fr < 5
//   the caller recomputes that element with quantize_value (about 5 in 2^15 elements).
//   A constant group (scale 0) uses inv = 0 and M + 6u: s = M + 6u exactly, q = 0, fr >= 5.
template <int kBits>
struct FastQuant {
  static constexpr float kBase = kBits == 4 ? 128.0f : 256.0f;
  static constexpr float kUlp = kBits == 4 ? 1.52587890625e-05f /* 2^-16 */ : 3.0517578125e-05f /* 2^-15 */;
  static constexpr float kMagic = kBase + 0.5f + 2.0f * kUlp;
  static constexpr float kMagicConst = kMagic + 6.0f * kUlp;
  static constexpr uint32_t kFracMask = kBits == 4 ? 0xFFFFu : 0x7FFFu;
};

// inv as sent to the lanes of a group: RN(1/hs) on the fast path, 0 for a constant group,
// -1 when the group must use quantize_value for every element (NaN/Inf, extreme scales).
LOWBIT_DEVICE float fast_quant_inv(const GroupMeta& m) {
  if (!isfinite(m.scale) || !isfinite(m.min)) return -1.0f;
  if (m.scale == 0.0f) return 0.0f;
  float hs = __fmul_rn(m.scale, 0.5f);
  if (hs >= 7.88860905e-31f /* 2^-100 */ && hs <= 1.26765060e30f /* 2^100 */) return __frcp_rn(hs);
  return -1.0f;
}

}  // namespace lowbit::codec::dev
