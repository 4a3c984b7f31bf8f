// Canonical K-packed INT4 weights: validation, element setters, expert stacking.
#include "lowbit/int4/weights.h"

#include <algorithm>

namespace lowbit::int4 {
namespace {

Status validate_shape(const WeightShape& s, const char* who) {
  LOWBIT_CHECK_ARG(s.experts >= 1, "%s: experts=%d must be >= 1", who, s.experts);
  LOWBIT_CHECK_ARG(s.n >= 1 && s.k >= 1, "%s: n=%d, k=%d must be >= 1", who, s.n, s.k);
  LOWBIT_CHECK_ARG(s.k % 2 == 0, "%s: k=%d must be even (two nibbles per byte)", who, s.k);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.group_size >= 2,
                   "%s: group_size=%d must be -1 (per-channel) or >= 2", who, s.group_size);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.k % s.group_size == 0,
                   "%s: k=%d is not a multiple of group_size=%d", who, s.k, s.group_size);
  LOWBIT_CHECK_ARG(s.act == DType::kF16 || s.act == DType::kBF16, "%s: unknown activation dtype", who);
  return Status::Ok();
}

}  // namespace

Status validate_k_perm(const std::vector<int32_t>& p, const WeightShape& s, const char* who) {
  if (p.empty()) return Status::Ok();
  LOWBIT_CHECK_ARG(p.size() == static_cast<size_t>(s.experts) * s.k, "%s: k_perm has %zu entries, expected E*K=%zu",
                   who, p.size(), static_cast<size_t>(s.experts) * s.k);
  std::vector<uint8_t> seen(s.k);
  for (int e = 0; e < s.experts; ++e) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int j = 0; j < s.k; ++j) {
      int32_t v = p[static_cast<size_t>(e) * s.k + j];
      LOWBIT_CHECK_ARG(v >= 0 && v < s.k && !seen[v], "%s: k_perm of expert %d is not a permutation (entry %d = %d)",
                       who, e, j, v);
      seen[v] = 1;
    }
  }
  return Status::Ok();
}

Status validate(const KPackedWeights& w) {
  const WeightShape& s = w.shape;
  LOWBIT_RETURN_IF_ERROR(validate_shape(s, "KPackedWeights"));
  const size_t E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  LOWBIT_CHECK_ARG(w.qweight.size() == E * N * K / 2, "KPackedWeights: qweight has %zu bytes, expected E*N*K/2=%zu",
                   w.qweight.size(), E * N * K / 2);
  LOWBIT_CHECK_ARG(w.scales.size() == E * N * NG, "KPackedWeights: scales has %zu entries, expected E*N*NG=%zu",
                   w.scales.size(), E * N * NG);
  const size_t nz = s.symmetric ? 0 : E * ((N + 1) / 2) * NG;
  LOWBIT_CHECK_ARG(w.zeros.size() == nz, "KPackedWeights: zeros has %zu bytes, expected %zu (%s)", w.zeros.size(), nz,
                   s.symmetric ? "symmetric: none" : "E*ceil(N/2)*NG");
  return validate_k_perm(w.k_perm, s, "KPackedWeights");
}

Status validate(const NPackedWeights& w) {
  const WeightShape& s = w.shape;
  LOWBIT_RETURN_IF_ERROR(validate_shape(s, "NPackedWeights"));
  LOWBIT_CHECK_ARG(s.n % 8 == 0, "NPackedWeights: n=%d must be a multiple of 8", s.n);
  const size_t E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  LOWBIT_CHECK_ARG(w.qweight.size() == E * K * N / 8, "NPackedWeights: qweight has %zu words, expected E*K*N/8=%zu",
                   w.qweight.size(), E * K * N / 8);
  LOWBIT_CHECK_ARG(w.scales.size() == E * NG * N, "NPackedWeights: scales has %zu entries, expected %zu",
                   w.scales.size(), E * NG * N);
  const size_t nz = s.symmetric ? 0 : E * NG * N;
  LOWBIT_CHECK_ARG(w.zeros.size() == nz, "NPackedWeights: zeros has %zu entries, expected %zu", w.zeros.size(), nz);
  return validate_k_perm(w.k_perm, s, "NPackedWeights");
}

void kpacked_allocate(const WeightShape& s, KPackedWeights* w) {
  w->shape = s;
  const size_t E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  w->qweight.assign(E * N * K / 2, 0);
  w->scales.assign(E * N * NG, 0);
  w->zeros.assign(s.symmetric ? 0 : E * ((N + 1) / 2) * NG, 0);
  w->k_perm.clear();
}

void kpacked_set_q(KPackedWeights* w, int e, int n, int k, int q) {
  uint8_t& b = w->qweight[(static_cast<size_t>(e) * w->shape.n + n) * (w->shape.k / 2) + k / 2];
  b = (k & 1) ? static_cast<uint8_t>((b & 0x0F) | (q << 4)) : static_cast<uint8_t>((b & 0xF0) | (q & 0xF));
}

void kpacked_set_z(KPackedWeights* w, int e, int n, int g, int z) {
  uint8_t& b = w->zeros[(static_cast<size_t>(e) * ((w->shape.n + 1) / 2) + n / 2) * w->shape.num_groups() + g];
  b = (n & 1) ? static_cast<uint8_t>((b & 0x0F) | (z << 4)) : static_cast<uint8_t>((b & 0xF0) | (z & 0xF));
}

WeightLayout layout_for(const WeightShape& s) { return s.n % 8 == 0 ? WeightLayout::kNPacked : WeightLayout::kKPacked; }

Status stack_experts(const std::vector<KPackedWeights>& parts, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(!parts.empty(), "stack_experts: no parts");
  WeightShape s = parts[0].shape;
  bool any_perm = false;
  int experts = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    LOWBIT_RETURN_IF_ERROR(validate(parts[i]));
    const WeightShape& p = parts[i].shape;
    LOWBIT_CHECK_ARG(p.n == s.n && p.k == s.k && p.group_size == s.group_size && p.symmetric == s.symmetric &&
                         p.act == s.act,
                     "stack_experts: part %zu has shape n=%d k=%d G=%d sym=%d act=%s, part 0 n=%d k=%d G=%d sym=%d "
                     "act=%s",
                     i, p.n, p.k, p.group_size, p.symmetric, dtype_name(p.act), s.n, s.k, s.group_size, s.symmetric,
                     dtype_name(s.act));
    any_perm |= !parts[i].k_perm.empty();
    experts += p.experts;
  }
  KPackedWeights r;
  r.shape = s;
  r.shape.experts = experts;
  for (const auto& p : parts) {
    r.qweight.insert(r.qweight.end(), p.qweight.begin(), p.qweight.end());
    r.scales.insert(r.scales.end(), p.scales.begin(), p.scales.end());
    r.zeros.insert(r.zeros.end(), p.zeros.begin(), p.zeros.end());
    if (any_perm) {
      if (p.k_perm.empty()) {
        for (int e = 0; e < p.shape.experts; ++e)
          for (int j = 0; j < s.k; ++j) r.k_perm.push_back(j);
      } else {
        r.k_perm.insert(r.k_perm.end(), p.k_perm.begin(), p.k_perm.end());
      }
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace lowbit::int4
