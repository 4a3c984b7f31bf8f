// Round-to-nearest (RTN) quantization of fp32 weights to the canonical K-packed layout, with
// GPTQ's grid: per (expert, row n, group of K), asymmetric s = (max - min) / 15 over the
// range widened to include 0, z = round(-min / s); symmetric s = 2 absmax / 15, z = 8;
// q = clamp(round(w / s) + z, 0, 15). The scale is rounded to the activation dtype FIRST and
// q computed with the stored scale, so the dequantization contract (weights.h) reproduces
// the weight within s / 2 wherever it is not clipped. Used to measure what the INT4 format
// costs a model (`lowbit ppl --weights int4`); real checkpoints come through the converters.
#include <cmath>

#include "lowbit/int4/weights.h"
#include "reference/int4/quant_grid.h"

namespace lowbit::int4 {

Status quantize_rtn(const float* w, const WeightShape& shape, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(w != nullptr && out != nullptr, "quantize_rtn: null pointer");
  LOWBIT_CHECK_ARG(shape.experts >= 1 && shape.n >= 1 && shape.k >= 2 && shape.k % 2 == 0,
                   "quantize_rtn: bad shape E=%d N=%d K=%d (K even)", shape.experts, shape.n, shape.k);
  LOWBIT_CHECK_ARG(shape.group_size == kPerChannel || (shape.group_size >= 2 && shape.k % shape.group_size == 0),
                   "quantize_rtn: group_size=%d must be -1 or divide K=%d", shape.group_size, shape.k);
  const int K = shape.k, G = shape.group_len(), NG = shape.num_groups();
  const size_t total = static_cast<size_t>(shape.experts) * shape.n * K;
  for (size_t i = 0; i < total; ++i)
    if (!std::isfinite(w[i]))
      return make_status(StatusCode::kInvalidArgument, "quantize_rtn: weight %zu (expert %zu, row %zu, k %zu) is %f",
                         i, i / (static_cast<size_t>(shape.n) * K), (i / K) % shape.n, i % K,
                         static_cast<double>(w[i]));
  kpacked_allocate(shape, out);
  for (int e = 0; e < shape.experts; ++e)
    for (int n = 0; n < shape.n; ++n) {
      const float* row = w + (static_cast<size_t>(e) * shape.n + n) * K;
      for (int g = 0; g < NG; ++g) {
        const float* x = row + static_cast<size_t>(g) * G;
        detail::GroupGrid grid;
        LOWBIT_RETURN_IF_ERROR(detail::group_grid(x, G, 1, shape, "quantize_rtn", e, n, g, &grid));
        kpacked_set_s(out, e, n, g, grid.s_bits);
        if (!shape.symmetric) kpacked_set_z(out, e, n, g, grid.z);
        for (int i = 0; i < G; ++i) kpacked_set_q(out, e, n, g * G + i, grid.quantize(x[i]));
      }
    }
  return Status::Ok();
}

}  // namespace lowbit::int4
