// GPTQ (Frantar, Ashkboos, Hoefler, Alistarh 2022): one-shot INT4 quantization of a linear
// weight that compensates each column's rounding error in the columns not yet quantized,
// through the inverse Hessian of the layer's reconstruction loss ||X W^T - X Wq^T||^2, where X
// are calibration inputs of the layer. The grid, scale rounding and zero points are
// quantize_rtn's (weights.h), so GPTQ and RTN differ only in which nibbles they pick; with
// act_order (GPTQ's desc_act) columns are quantized by decreasing Hessian diagonal and groups
// formed in that order, which gives the k_perm of a desc_act checkpoint.
//
//   std::vector<double> h(K * K);          // sum over calibration rows x of x x^T
//   GptqPrepared p;
//   st = gptq_prepare(h.data(), K, GptqOptions{}, &p);   // once per input (q, k, v share one)
//   st = quantize_gptq(w, shape, p, &kpacked);            // per weight [N, K]
//
// Plain C++ (CPU); fp64 throughout.
#pragma once

#include <cstdint>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

struct GptqOptions {
  bool act_order = false;  // GPTQ desc_act: columns by decreasing diag(H)
  double damp = 0.01;      // GPTQ's percdamp: this fraction of mean(diag H) added to the diagonal
};

// What quantize_gptq needs from a Hessian: the column order, the dead inputs (diag H == 0:
// never seen non-zero in calibration; their weights are quantized as 0, as GPTQ does) and the
// upper Cholesky factor U of H^-1 (U^T U = H^-1) in that order.
struct GptqPrepared {
  int k = 0;
  bool act_order = false;
  std::vector<int32_t> perm;   // processing position j -> input row perm[j]
  std::vector<uint8_t> dead;   // [K] by input row
  std::vector<double> u;       // [K, K] row-major, upper triangle used
};

// hessian: [K, K] row-major, symmetric (only what a Gram matrix of finite inputs can be).
// Refused by name: K < 1, a non-finite entry, a negative diagonal, or a matrix that is not
// positive definite after damping (Cholesky pivot, row).
Status gptq_prepare(const double* hessian, int k, const GptqOptions& opt, GptqPrepared* out);

// w: [N, K] fp32 row-major (shape.experts == 1, shape.k == prepared.k). The result is
// canonical: with act_order its rows are stored in processing order and k_perm = prepared.perm
// (input row k_perm[j] is stored row j; the groups are runs of G stored rows), else k_perm is
// empty. Non-finite weights and scales that overflow the dtype are refused, as by quantize_rtn.
Status quantize_gptq(const float* w, const WeightShape& shape, const GptqPrepared& prepared, KPackedWeights* out);

}  // namespace lowbit::int4
