// Column reorders of canonical INT4 weights, and the fold of a down projection's act-order
// permutation into its producers (include/lowbit/int4/act_order_fold.h).
#include "lowbit/int4/act_order_fold.h"

#include <cstring>

namespace lowbit::int4 {

Status permute_n(const KPackedWeights& w, const std::vector<int32_t>& perm, int parts, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "permute_n: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(parts >= 1 && s.n % parts == 0, "permute_n: N=%d does not split into %d equal parts", s.n, parts);
  const int P = s.n / parts;
  LOWBIT_CHECK_ARG(perm.size() == static_cast<size_t>(s.experts) * P,
                   "permute_n: perm has %zu entries, expected E x N / parts = %d x %d", perm.size(), s.experts, P);
  std::vector<uint8_t> seen(P);
  for (int e = 0; e < s.experts; ++e) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int j = 0; j < P; ++j) {
      const int32_t v = perm[static_cast<size_t>(e) * P + j];
      LOWBIT_CHECK_ARG(v >= 0 && v < P && !seen[v], "permute_n: perm of expert %d is not a permutation of 0..%d (entry %d = %d)",
                       e, P - 1, j, v);
      seen[v] = 1;
    }
  }
  KPackedWeights o;
  kpacked_allocate(s, &o);
  const size_t row_bytes = static_cast<size_t>(s.k) / 2, ng = s.num_groups();
  for (int e = 0; e < s.experts; ++e)
    for (int p = 0; p < parts; ++p)
      for (int j = 0; j < P; ++j) {
        const int dn = p * P + j, sn = p * P + perm[static_cast<size_t>(e) * P + j];
        const size_t dr = static_cast<size_t>(e) * s.n + dn, sr = static_cast<size_t>(e) * s.n + sn;
        std::memcpy(o.qweight.data() + dr * row_bytes, w.qweight.data() + sr * row_bytes, row_bytes);
        std::memcpy(o.scales.data() + dr * ng, w.scales.data() + sr * ng, ng * sizeof(uint16_t));
        if (!s.symmetric)  // row-pair packed: nibble by nibble
          for (int g = 0; g < static_cast<int>(ng); ++g) kpacked_set_z(&o, e, dn, g, kpacked_z(w, e, sn, g));
      }
  o.k_perm = w.k_perm;  // K untouched
  *out = std::move(o);
  return Status::Ok();
}

Status fold_act_order(const std::vector<KPackedWeights*>& producers, KPackedWeights* down) {
  LOWBIT_CHECK_ARG(down != nullptr, "fold_act_order: down is null");
  LOWBIT_RETURN_IF_ERROR(validate(*down));
  const WeightShape& d = down->shape;
  LOWBIT_CHECK_ARG(!producers.empty(), "fold_act_order: no producers (the gate / up weights whose outputs are down's input)");
  // Every check before any change: on error the weights are as they were.
  std::vector<int> parts(producers.size());
  for (size_t i = 0; i < producers.size(); ++i) {
    const KPackedWeights* p = producers[i];
    LOWBIT_CHECK_ARG(p != nullptr, "fold_act_order: producer %zu is null", i);
    LOWBIT_CHECK_ARG(p != down, "fold_act_order: producer %zu is down itself", i);
    for (size_t j = 0; j < i; ++j)
      LOWBIT_CHECK_ARG(producers[j] != p, "fold_act_order: producers %zu and %zu are the same weight", j, i);
    LOWBIT_RETURN_IF_ERROR(validate(*p));
    const WeightShape& s = p->shape;
    LOWBIT_CHECK_ARG(s.experts == d.experts, "fold_act_order: producer %zu has E=%d experts, down E=%d", i, s.experts,
                     d.experts);
    LOWBIT_CHECK_ARG(s.act == d.act, "fold_act_order: producer %zu's activation dtype %s differs from down's %s", i,
                     dtype_name(s.act), dtype_name(d.act));
    LOWBIT_CHECK_ARG(s.n == d.k || s.n == 2 * d.k,
                     "fold_act_order: producer %zu has N=%d outputs; down's input is K=%d features, so N must be K "
                     "(gate or up) or 2K ([gate; up])",
                     i, s.n, d.k);
    parts[i] = s.n / d.k;
  }
  if (down->k_perm.empty()) return Status::Ok();  // nothing to fold
  std::vector<KPackedWeights> folded(producers.size());
  for (size_t i = 0; i < producers.size(); ++i)
    LOWBIT_RETURN_IF_ERROR(permute_n(*producers[i], down->k_perm, parts[i], &folded[i]));
  for (size_t i = 0; i < producers.size(); ++i) *producers[i] = std::move(folded[i]);
  down->k_perm.clear();
  return Status::Ok();
}

}  // namespace lowbit::int4
