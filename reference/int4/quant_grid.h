// GPTQ's quantization grid for one group of weights, shared by quantize_rtn (quantize.cpp) and
// quantize_gptq (gptq_quantize.cpp) so that both produce the same scale, zero point and nibbles
// from the same values: asymmetric s = (max - min) / 15 over a range widened to include 0,
// z = round(-min / s); symmetric s = 2 absmax / 15, z = 8; the scale rounded to the activation
// dtype first, q = clamp(round(w / s) + z, 0, 15) with the stored scale.
#pragma once

#include <cmath>
#include <cstdint>

#include "lowbit/int4/weights.h"

namespace lowbit::int4::detail {

struct GroupGrid {
  uint16_t s_bits = 0;  // stored scale (activation dtype bits)
  float s = 0.f;        // its value; 0 when every weight of the group quantizes to z
  int z = 8;
  int quantize(float w) const {
    const int q = s > 0.f ? static_cast<int>(std::lrint(w / s)) + z : z;
    return q < 0 ? 0 : q > 15 ? 15 : q;
  }
};

// The grid of x[0], x[stride], ..., x[(count - 1) * stride]. A scale that underflows the dtype
// (or an all-zero group) stores 1 with every q = z (the group dequantizes to 0); a scale that
// overflows it is refused (`who`, row n and group g name it in the error; formatted only then).
inline Status group_grid(const float* x, int count, int stride, const WeightShape& shape, const char* who, int e, int n,
                         int g_index, GroupGrid* out) {
  float lo = 0.f, hi = 0.f;  // the range always includes 0 (GPTQ)
  for (int i = 0; i < count; ++i) lo = std::fmin(lo, x[static_cast<size_t>(i) * stride]),
                                   hi = std::fmax(hi, x[static_cast<size_t>(i) * stride]);
  GroupGrid g;
  const float s = shape.symmetric ? 2.f * std::fmax(-lo, hi) / 15.f : (hi - lo) / 15.f;
  g.s_bits = float_to_half_bits(shape.act, s);
  g.s = half_bits_to_float(shape.act, g.s_bits);
  if (!(g.s > 0.f) || !std::isfinite(g.s)) {
    if (!std::isfinite(g.s))
      return make_status(StatusCode::kInvalidArgument, "%s: expert %d row %d group %d: scale %g overflows %s", who, e,
                         n, g_index, static_cast<double>(s), dtype_name(shape.act));
    g.s_bits = float_to_half_bits(shape.act, 1.f);
    g.s = 0.f;
  }
  if (!shape.symmetric) g.z = g.s > 0.f ? static_cast<int>(std::lrint(std::fmin(15.f, -lo / g.s))) : 0;
  *out = g;
  return Status::Ok();
}

}  // namespace lowbit::int4::detail
