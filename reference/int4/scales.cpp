// Checkpoint scale -> activation-dtype scale, exact or counted rounding (formats.h).
#include <cmath>

#include "lowbit/int4/formats.h"

namespace lowbit::int4 {

Status convert_scale(ScaleSource src, uint32_t bits, DType act, ScalePolicy policy, const char* where, size_t index,
                     uint16_t* out, ConvertReport* report) {
  float v;
  switch (src) {
    case ScaleSource::kF16: v = f16_bits_to_float(static_cast<uint16_t>(bits)); break;
    case ScaleSource::kBF16: v = bf16_bits_to_float(static_cast<uint16_t>(bits)); break;
    default: v = bits_as_float(bits); break;
  }
  if (!std::isfinite(v))
    return make_status(StatusCode::kCorruptData, "%s[%zu]: scale is not finite (bits 0x%x)", where, index, bits);
  uint16_t h = float_to_half_bits(act, v);
  float back = half_bits_to_float(act, h);
  if (!std::isfinite(back))
    return make_status(StatusCode::kInvalidArgument, "%s[%zu]: scale %g overflows %s", where, index,
                       static_cast<double>(v), dtype_name(act));
  if (back != v) {
    if (policy == ScalePolicy::kExact)
      return make_status(StatusCode::kInvalidArgument,
                         "%s[%zu]: scale %.9g is not exactly representable in %s (nearest %.9g); convert with "
                         "ScalePolicy::kRound (CLI: --round-scales) to accept rounding",
                         where, index, static_cast<double>(v), dtype_name(act), static_cast<double>(back));
    if (report) {
      ++report->scales_rounded;
      double rel = std::fabs(static_cast<double>(back) - v) / std::fabs(static_cast<double>(v));
      if (rel > report->max_rel_scale_change) report->max_rel_scale_change = rel;
    }
  }
  *out = h;
  return Status::Ok();
}

}  // namespace lowbit::int4
