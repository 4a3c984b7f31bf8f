// CPU reference of the Flash All-Reduce codec (lowbit/codec.h). Every rounding step is a
// call into lowbit/detail/codec_math.h, the single definition shared with the CUDA
// kernels, so the bytes produced here are the contract the GPU must match bit-for-bit.
#include "lowbit/codec.h"

#include <cmath>
#include <cstring>

namespace lowbit::codec {

Status validate(CodecSpec spec, size_t n) {
  if (!codec_spec_valid(spec)) {
    return make_status(StatusCode::kInvalidArgument,
                       "codec: unsupported spec bits=%d group_size=%d (bits must be 4 or 8, group_size 32, 64 or 128)",
                       spec.bits, spec.group_size);
  }
  // Keep every byte offset representable (ngroups * 4 and n * 2 must not overflow size_t).
  if (n > (static_cast<size_t>(1) << 60)) {
    return make_status(StatusCode::kInvalidArgument, "codec: n=%zu elements is too large", n);
  }
  return Status::Ok();
}

namespace {

Status check_args(const char* op, CodecSpec spec, size_t n, const void* a, const void* b) {
  LOWBIT_RETURN_IF_ERROR(validate(spec, n));
  if (n > 0 && (a == nullptr || b == nullptr)) {
    return make_status(StatusCode::kInvalidArgument, "%s: null pointer (input %p, output %p) with n=%zu", op, a, b, n);
  }
  return Status::Ok();
}

// Min/max of one group, compared as floats. The only pair of distinct bit patterns that
// compare equal is (-0, +0): the tie rule is -0 < +0, so min picks -0 and max picks +0
// regardless of element order (the GPU reduces in a different order and must agree).
// Non-finite elements are excluded from min/max and reported through all_finite.
struct GroupExtremes {
  uint16_t min_bits;
  uint16_t max_bits;
  bool all_finite;
};

bool less_than(DType t, uint16_t a, uint16_t b) {
  float fa = half_bits_to_float(t, a), fb = half_bits_to_float(t, b);
  if (fa != fb) return fa < fb;
  return (a & 0x8000u) != 0 && (b & 0x8000u) == 0;  // -0 < +0
}

GroupExtremes group_extremes(DType t, const uint16_t* x, size_t count) {
  GroupExtremes e{0, 0, true};
  bool have = false;
  for (size_t i = 0; i < count; ++i) {
    if (half_bits_nonfinite(t, x[i])) {
      e.all_finite = false;
      continue;
    }
    if (!have) {
      e.min_bits = e.max_bits = x[i];
      have = true;
      continue;
    }
    if (less_than(t, x[i], e.min_bits)) e.min_bits = x[i];
    if (less_than(t, e.max_bits, x[i])) e.max_bits = x[i];
  }
  return e;
}

void store_meta(uint8_t* meta, size_t g, const GroupMeta& m) {
  uint8_t* p = meta + g * kMetaBytesPerGroup;
  p[0] = static_cast<uint8_t>(m.scale_bits & 0xFF);
  p[1] = static_cast<uint8_t>(m.scale_bits >> 8);
  p[2] = static_cast<uint8_t>(m.min_bits & 0xFF);
  p[3] = static_cast<uint8_t>(m.min_bits >> 8);
}

GroupMeta read_meta(DType t, const uint8_t* meta, size_t g) {
  const uint8_t* p = meta + g * kMetaBytesPerGroup;
  uint16_t s = static_cast<uint16_t>(p[0] | (p[1] << 8));
  uint16_t m = static_cast<uint16_t>(p[2] | (p[3] << 8));
  return load_group_meta(t, s, m);
}

// q of element i (within its group) from the group's data bytes.
uint32_t read_q(CodecSpec spec, const uint8_t* gdata, size_t i) {
  if (spec.bits == 8) return gdata[i];
  size_t word = i / 8;
  int slot = kInt4Slot[i % 8];
  const uint8_t* w = gdata + word * 4;
  uint32_t v = static_cast<uint32_t>(w[0]) | (static_cast<uint32_t>(w[1]) << 8) | (static_cast<uint32_t>(w[2]) << 16) |
               (static_cast<uint32_t>(w[3]) << 24);
  return (v >> (4 * slot)) & 0xFu;
}

// Decoded value of element i of the segment, as fp32 (codec_math's dequantize_value).
template <typename Fn>
void for_each_decoded(CodecSpec spec, DType t, const uint8_t* enc, size_t n, Fn&& fn) {
  const size_t ng = codec_num_groups(spec, n);
  const size_t G = static_cast<size_t>(spec.group_size);
  const uint8_t* meta = enc + codec_data_bytes(spec, n);
  for (size_t g = 0; g < ng; ++g) {
    GroupMeta m = read_meta(t, meta, g);
    const uint8_t* gdata = enc + g * codec_group_data_bytes(spec);
    size_t count = (g + 1) * G <= n ? G : n - g * G;
    for (size_t i = 0; i < count; ++i) fn(g * G + i, dequantize_value(t, m, read_q(spec, gdata, i)));
  }
}

}  // namespace

Status encode_ref(CodecSpec spec, DType t, const uint16_t* in, size_t n, uint8_t* out) {
  LOWBIT_RETURN_IF_ERROR(check_args("encode_ref", spec, n, in, out));
  const size_t ng = codec_num_groups(spec, n);
  const size_t G = static_cast<size_t>(spec.group_size);
  const size_t gbytes = codec_group_data_bytes(spec);
  uint8_t* meta = out + codec_data_bytes(spec, n);
  for (size_t g = 0; g < ng; ++g) {
    const uint16_t* x = in + g * G;
    size_t count = (g + 1) * G <= n ? G : n - g * G;
    GroupExtremes e = group_extremes(t, x, count);
    GroupMeta m = make_group_meta(spec, t, e.min_bits, e.max_bits, e.all_finite);
    store_meta(meta, g, m);
    uint8_t* gdata = out + g * gbytes;
    std::memset(gdata, 0, gbytes);  // padding of a partial group is q = 0
    for (size_t i = 0; i < count; ++i) {
      uint32_t q = quantize_value(spec, m, half_bits_to_float(t, x[i]));
      if (spec.bits == 8) {
        gdata[i] = static_cast<uint8_t>(q);
      } else {
        // INT4: element i of its 8-element run goes to nibble slot kInt4Slot[i % 8] of a
        // little-endian word; slot s covers bits 4s..4s+3, i.e. byte s/2, high nibble if s odd.
        int slot = kInt4Slot[i % 8];
        uint8_t* w = gdata + (i / 8) * 4;
        w[slot / 2] = static_cast<uint8_t>(w[slot / 2] | (q << (4 * (slot % 2))));
      }
    }
  }
  return Status::Ok();
}

Status decode_ref(CodecSpec spec, DType t, const uint8_t* enc, size_t n, uint16_t* out) {
  LOWBIT_RETURN_IF_ERROR(check_args("decode_ref", spec, n, enc, out));
  for_each_decoded(spec, t, enc, n, [&](size_t i, float v) {
    // A NaN decodes to the positive canonical NaN whatever the NaN's sign bit: host and
    // device fma propagate NaN payload/sign differently, the canonical form does not.
    out[i] = std::isnan(v) ? (t == DType::kF16 ? kF16CanonicalNaN : kBF16CanonicalNaN) : float_to_half_bits(t, v);
  });
  return Status::Ok();
}

Status decode_accumulate_ref(CodecSpec spec, DType t, const uint8_t* enc, size_t n, float* acc) {
  LOWBIT_RETURN_IF_ERROR(check_args("decode_accumulate_ref", spec, n, enc, acc));
  for_each_decoded(spec, t, enc, n, [&](size_t i, float v) { acc[i] = acc[i] + v; });
  return Status::Ok();
}

}  // namespace lowbit::codec
