// GPTQ quantization (include/lowbit/int4/gptq_quantize.h). The steps follow the paper's
// Algorithm 1 without its lazy batching (which reorders floating-point work, not the result's
// definition): damp the Hessian, invert it by Cholesky, take the upper Cholesky factor U of the
// inverse, then per row of W and column j in processing order: pick the group's grid when j
// starts a group (from the row's current, already error-corrected values, as GPTQ does),
// quantize w_j, and spread e = (w_j - dq_j) / U[j][j] over the later columns as w_l -= e U[j][l].
// Rows are independent given U, so they run in parallel.
#include "lowbit/int4/gptq_quantize.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lowbit/detail/parallel_for.h"
#include "reference/int4/quant_grid.h"

namespace lowbit::int4 {
namespace {

// In-place lower Cholesky factor of a [K, K] row-major SPD matrix (a = L L^T, L in the lower
// triangle); the first non-positive pivot is reported.
Status cholesky_lower(std::vector<double>& a, int k, const char* what) {
  for (int j = 0; j < k; ++j) {
    double* rj = a.data() + static_cast<size_t>(j) * k;
    double d = rj[j];
    for (int p = 0; p < j; ++p) d -= rj[p] * rj[p];
    if (!(d > 0.0) || !std::isfinite(d))
      return make_status(StatusCode::kInvalidArgument,
                         "gptq_prepare: %s is not positive definite (pivot %d = %g); more calibration data or a "
                         "larger damp",
                         what, j, d);
    const double ljj = std::sqrt(d);
    rj[j] = ljj;
    lowbit::detail::parallel_for(k - j - 1, lowbit::detail::host_threads(), [&](int i0, int i1) {
      for (int ii = i0; ii < i1; ++ii) {
        double* ri = a.data() + static_cast<size_t>(j + 1 + ii) * k;
        double s = ri[j];
        for (int p = 0; p < j; ++p) s -= ri[p] * rj[p];
        ri[j] = s / ljj;
      }
    });
  }
  return Status::Ok();
}

}  // namespace

Status gptq_prepare(const double* hessian, int k, const GptqOptions& opt, GptqPrepared* out) {
  LOWBIT_CHECK_ARG(hessian != nullptr && out != nullptr, "gptq_prepare: null pointer");
  LOWBIT_CHECK_ARG(k >= 1, "gptq_prepare: K=%d", k);
  LOWBIT_CHECK_ARG(opt.damp >= 0.0 && std::isfinite(opt.damp), "gptq_prepare: damp=%g must be >= 0", opt.damp);
  const size_t kk = static_cast<size_t>(k) * k;
  for (size_t i = 0; i < kk; ++i)
    if (!std::isfinite(hessian[i]))
      return make_status(StatusCode::kInvalidArgument, "gptq_prepare: Hessian entry (%zu, %zu) is %g", i / k, i % k,
                         hessian[i]);
  GptqPrepared p;
  p.k = k;
  p.act_order = opt.act_order;
  p.dead.assign(k, 0);
  std::vector<double> diag(k);
  for (int i = 0; i < k; ++i) {
    diag[i] = hessian[static_cast<size_t>(i) * k + i];
    LOWBIT_CHECK_ARG(diag[i] >= 0.0, "gptq_prepare: Hessian diagonal %d is negative (%g): not a Gram matrix", i,
                     diag[i]);
    if (diag[i] == 0.0) p.dead[i] = 1, diag[i] = 1.0;  // GPTQ: H[i][i] = 1, W[:, i] = 0
  }
  p.perm.resize(k);
  std::iota(p.perm.begin(), p.perm.end(), 0);
  if (opt.act_order)  // decreasing diag(H); ties keep input order (GPTQ's argsort is not stable; any order is valid)
    std::stable_sort(p.perm.begin(), p.perm.end(), [&](int a, int b) { return diag[a] > diag[b]; });
  // H in processing order, damped.
  std::vector<double> h(kk);
  double mean = 0;
  for (int i = 0; i < k; ++i) mean += diag[i];
  mean /= k;
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b) {
      const int ia = p.perm[a], ib = p.perm[b];
      double v = ia == ib ? diag[ia] : (p.dead[ia] || p.dead[ib] ? 0.0 : hessian[static_cast<size_t>(ia) * k + ib]);
      if (a == b) v += opt.damp * mean;
      h[static_cast<size_t>(a) * k + b] = v;
    }
  // H = L L^T; H^-1 = L^-T L^-1. Columns of L^-1 by forward substitution, then H^-1 = (L^-1)^T (L^-1).
  LOWBIT_RETURN_IF_ERROR(cholesky_lower(h, k, "the damped Hessian"));
  // linv_t[c][i] = (L^-1)[i][c]: column c of L^-1 (solve L y = e_c), stored as a row so that
  // both this solve and the product below read contiguous memory.
  std::vector<double> linv_t(kk, 0.0);
  const int T = std::max(1, std::min(k, lowbit::detail::host_threads()));
  // Interleaved over threads (c = t, t + T, ...): the work per column shrinks with c.
  lowbit::detail::parallel_for(T, T, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t)
    for (int c = t; c < k; c += T) {
      double* y = linv_t.data() + static_cast<size_t>(c) * k;
      for (int i = c; i < k; ++i) {
        const double* li = h.data() + static_cast<size_t>(i) * k;
        double s = i == c ? 1.0 : 0.0;
        for (int q = c; q < i; ++q) s -= li[q] * y[q];
        y[i] = s / li[i];
      }
    }
  });
  // H^-1[a][b] = sum over i >= max(a, b) of (L^-1)[i][a] (L^-1)[i][b].
  std::vector<double> hinv(kk);
  lowbit::detail::parallel_for(T, T, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t)
    for (int a = t; a < k; a += T) {
      const double* ya = linv_t.data() + static_cast<size_t>(a) * k;
      for (int b = 0; b <= a; ++b) {
        const double* yb = linv_t.data() + static_cast<size_t>(b) * k;
        double s = 0;
        for (int i = a; i < k; ++i) s += ya[i] * yb[i];
        hinv[static_cast<size_t>(a) * k + b] = hinv[static_cast<size_t>(b) * k + a] = s;
      }
    }
  });
  // U upper with U^T U = H^-1: the lower Cholesky factor of H^-1, transposed.
  LOWBIT_RETURN_IF_ERROR(cholesky_lower(hinv, k, "the inverse Hessian"));
  p.u.assign(kk, 0.0);
  for (int a = 0; a < k; ++a)
    for (int b = a; b < k; ++b) p.u[static_cast<size_t>(a) * k + b] = hinv[static_cast<size_t>(b) * k + a];
  *out = std::move(p);
  return Status::Ok();
}

Status quantize_gptq(const float* w, const WeightShape& shape, const GptqPrepared& p, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(w != nullptr && out != nullptr, "quantize_gptq: null pointer");
  LOWBIT_CHECK_ARG(shape.experts == 1, "quantize_gptq: one weight at a time (experts=%d)", shape.experts);
  LOWBIT_CHECK_ARG(shape.n >= 1 && shape.k >= 2 && shape.k % 2 == 0, "quantize_gptq: bad shape N=%d K=%d (K even)",
                   shape.n, shape.k);
  LOWBIT_CHECK_ARG(shape.k == p.k && p.u.size() == static_cast<size_t>(p.k) * p.k && p.perm.size() == static_cast<size_t>(p.k),
                   "quantize_gptq: K=%d but the prepared Hessian is for K=%d (gptq_prepare first)", shape.k, p.k);
  LOWBIT_CHECK_ARG(shape.group_size == kPerChannel || (shape.group_size >= 2 && shape.k % shape.group_size == 0),
                   "quantize_gptq: group_size=%d must be -1 or divide K=%d", shape.group_size, shape.k);
  const int N = shape.n, K = shape.k, G = shape.group_len();
  const size_t total = static_cast<size_t>(N) * K;
  for (size_t i = 0; i < total; ++i)
    if (!std::isfinite(w[i]))
      return make_status(StatusCode::kInvalidArgument, "quantize_gptq: weight %zu (row %zu, k %zu) is %f", i, i / K,
                         i % K, static_cast<double>(w[i]));
  KPackedWeights r;
  kpacked_allocate(shape, &r);
  std::vector<Status> row_status(N, Status::Ok());
  lowbit::detail::parallel_for(N, lowbit::detail::host_threads(), [&](int n0, int n1) {
    std::vector<double> row(K);
    std::vector<float> group(G);
    for (int n = n0; n < n1; ++n) {
      const float* src = w + static_cast<size_t>(n) * K;
      for (int j = 0; j < K; ++j) row[j] = p.dead[p.perm[j]] ? 0.0 : src[p.perm[j]];
      detail::GroupGrid grid;
      for (int j = 0; j < K; ++j) {
        if (j % G == 0) {
          const int g = j / G;
          for (int i = 0; i < G; ++i) group[i] = static_cast<float>(row[j + i]);
          row_status[n] = detail::group_grid(group.data(), G, 1, shape, "quantize_gptq", 0, n, g, &grid);
          if (!row_status[n].ok()) break;
          kpacked_set_s(&r, 0, n, g, grid.s_bits);
          if (!shape.symmetric) kpacked_set_z(&r, 0, n, g, grid.z);
        }
        const int q = grid.quantize(static_cast<float>(row[j]));
        kpacked_set_q(&r, 0, n, j, q);
        // The value the dequantization contract gives this nibble (rounded to the dtype).
        const double dq = half_bits_to_float(shape.act, dequant_bits(q, grid.z, grid.s_bits, shape.act));
        const double* uj = p.u.data() + static_cast<size_t>(j) * K;
        const double e = (row[j] - dq) / uj[j];
        for (int l = j + 1; l < K; ++l) row[l] -= e * uj[l];
      }
    }
  });
  for (const Status& st : row_status) LOWBIT_RETURN_IF_ERROR(st);
  if (p.act_order) r.k_perm = p.perm;
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace lowbit::int4
