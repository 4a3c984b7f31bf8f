// W4A16 GEMM reference: y = x * dequant(W)^T in fp64 over the exactly dequantized weights.
#include "lowbit/int4/moe_ref.h"

namespace lowbit::int4 {

Status gemm_ref(const KPackedWeights& w, int expert, const uint16_t* x, int m, std::vector<double>* y64,
                std::vector<uint16_t>* y_act) {
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(expert >= 0 && expert < s.experts, "gemm_ref: expert %d outside [0, %d)", expert, s.experts);
  LOWBIT_CHECK_ARG(m >= 0, "gemm_ref: m=%d must be >= 0", m);
  LOWBIT_CHECK_ARG(m == 0 || x != nullptr, "gemm_ref: x is null");
  const int N = s.n, K = s.k, G = s.group_len();
  const int32_t* perm = w.k_perm.empty() ? nullptr : w.k_perm.data() + static_cast<size_t>(expert) * K;
  // Dequantize this expert once: wf[n, j] (stored column order).
  std::vector<double> wf(static_cast<size_t>(N) * K);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < K; ++j)
      wf[static_cast<size_t>(n) * K + j] = half_bits_to_float(
          s.act, dequant_bits(kpacked_q(w, expert, n, j), kpacked_z(w, expert, n, j / G),
                              kpacked_s(w, expert, n, j / G), s.act));
  std::vector<double> xr(K);
  if (y64) y64->assign(static_cast<size_t>(m) * N, 0.0);
  if (y_act) y_act->assign(static_cast<size_t>(m) * N, 0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < K; ++j) xr[j] = half_bits_to_float(s.act, x[static_cast<size_t>(i) * K + (perm ? perm[j] : j)]);
    for (int n = 0; n < N; ++n) {
      const double* wr = &wf[static_cast<size_t>(n) * K];
      double acc = 0.0;
      for (int j = 0; j < K; ++j) acc += xr[j] * wr[j];
      if (y64) (*y64)[static_cast<size_t>(i) * N + n] = acc;
      if (y_act) (*y_act)[static_cast<size_t>(i) * N + n] = float_to_half_bits(s.act, static_cast<float>(acc));
    }
  }
  return Status::Ok();
}

}  // namespace lowbit::int4
