// Tensor-parallel shards of canonical INT4 weights: K ranges with refined groups, N ranges,
// and fused gate/up halves (include/lowbit/int4/shard.h).
#include "lowbit/int4/shard.h"

#include <climits>
#include <cstring>
#include <numeric>

namespace lowbit::int4 {
namespace {

// Copies columns [n0, n0 + n) of `src` (every expert) to columns [d0, d0 + n) of `dst`, whose
// shape has the same E, K and groups (allocated by the caller).
void copy_columns(const KPackedWeights& src, int n0, int n, KPackedWeights* dst, int d0) {
  const WeightShape& s = src.shape;
  const WeightShape& d = dst->shape;
  const size_t row_bytes = static_cast<size_t>(s.k) / 2, ng = s.num_groups();
  for (int e = 0; e < s.experts; ++e) {
    const size_t sr = static_cast<size_t>(e) * s.n + n0, dr = static_cast<size_t>(e) * d.n + d0;
    std::memcpy(dst->qweight.data() + dr * row_bytes, src.qweight.data() + sr * row_bytes, n * row_bytes);
    std::memcpy(dst->scales.data() + dr * ng, src.scales.data() + sr * ng, n * ng * sizeof(uint16_t));
    if (!s.symmetric)  // row-pair packed: nibble by nibble (n0 may be odd)
      for (int j = 0; j < n; ++j)
        for (int g = 0; g < static_cast<int>(ng); ++g) kpacked_set_z(dst, e, d0 + j, g, kpacked_z(src, e, n0 + j, g));
  }
}

}  // namespace

int shard_group_size(int group_size, int k0, int k) {
  return group_size == kPerChannel ? kPerChannel : std::gcd(group_size, std::gcd(k0, k));
}

Status shard_k(const KPackedWeights& w, int k0, int k, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "shard_k: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(w.k_perm.empty(),
                   "shard_k: act-order weight (k_perm): a K range of its checkpoint rows falls into groups of "
                   "uneven length, which one group size cannot hold; a down projection's permutation can be folded "
                   "into its gate / up columns first (fold_act_order; lowbit convert --fold-act-order)");
  LOWBIT_CHECK_ARG(k0 >= 0 && k >= 2 && k0 <= s.k - k, "shard_k: rows [%d, %d + %d) outside K=%d", k0, k0, k, s.k);
  LOWBIT_CHECK_ARG(k0 % 2 == 0 && k % 2 == 0, "shard_k: k0=%d and k=%d must be even (two nibbles per byte)", k0, k);
  WeightShape r = s;
  r.k = k;
  r.group_size = shard_group_size(s.group_size, k0, k);
  KPackedWeights o;
  kpacked_allocate(r, &o);
  const size_t src_row = static_cast<size_t>(s.k) / 2, dst_row = static_cast<size_t>(k) / 2;
  const int ng = r.num_groups();
  for (int e = 0; e < s.experts; ++e)
    for (int n = 0; n < s.n; ++n) {
      const size_t row = static_cast<size_t>(e) * s.n + n;
      std::memcpy(o.qweight.data() + row * dst_row, w.qweight.data() + row * src_row + k0 / 2, dst_row);
      for (int g = 0; g < ng; ++g) {
        // The checkpoint group of the shard's group g (per-channel: the one group).
        const int src_g = s.group_size == kPerChannel ? 0 : (k0 + g * r.group_size) / s.group_size;
        kpacked_set_s(&o, e, n, g, kpacked_s(w, e, n, src_g));
        if (!s.symmetric) kpacked_set_z(&o, e, n, g, kpacked_z(w, e, n, src_g));
      }
    }
  *out = std::move(o);
  return Status::Ok();
}

Status shard_n(const KPackedWeights& w, int n0, int n, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "shard_n: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(n0 >= 0 && n >= 1 && n0 <= s.n - n, "shard_n: columns [%d, %d + %d) outside N=%d", n0, n0, n, s.n);
  WeightShape r = s;
  r.n = n;
  KPackedWeights o;
  kpacked_allocate(r, &o);
  copy_columns(w, n0, n, &o, 0);
  o.k_perm = w.k_perm;  // K untouched
  *out = std::move(o);
  return Status::Ok();
}

Status concat_n(const std::vector<KPackedWeights>& parts, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "concat_n: out is null");
  LOWBIT_CHECK_ARG(!parts.empty(), "concat_n: no parts");
  WeightShape r = parts[0].shape;
  r.n = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    LOWBIT_RETURN_IF_ERROR(validate(parts[i]));
    const WeightShape& p = parts[i].shape;
    const WeightShape& s = parts[0].shape;
    LOWBIT_CHECK_ARG(p.experts == s.experts && p.k == s.k && p.group_size == s.group_size &&
                         p.symmetric == s.symmetric && p.act == s.act,
                     "concat_n: part %zu has E=%d K=%d G=%d sym=%d act=%s, part 0 E=%d K=%d G=%d sym=%d act=%s", i,
                     p.experts, p.k, p.group_size, p.symmetric, dtype_name(p.act), s.experts, s.k, s.group_size,
                     s.symmetric, dtype_name(s.act));
    LOWBIT_CHECK_ARG(parts[i].k_perm == parts[0].k_perm,
                     "concat_n: part %zu's act-order permutation differs from part 0's; one weight has one K order",
                     i);
    LOWBIT_CHECK_ARG(r.n <= INT32_MAX - p.n, "concat_n: N overflows");
    r.n += p.n;
  }
  KPackedWeights o;
  kpacked_allocate(r, &o);
  int d0 = 0;
  for (const auto& p : parts) {
    copy_columns(p, 0, p.shape.n, &o, d0);
    d0 += p.shape.n;
  }
  o.k_perm = parts[0].k_perm;
  *out = std::move(o);
  return Status::Ok();
}

Status tp_shard(const KPackedWeights& w, TpSplit split, int rank, int ranks, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "tp_shard: out is null");
  LOWBIT_CHECK_ARG(ranks >= 1 && rank >= 0 && rank < ranks, "tp_shard: rank=%d outside [0, ranks=%d)", rank, ranks);
  LOWBIT_CHECK_ARG(split == TpSplit::kColumns || split == TpSplit::kRows || split == TpSplit::kGateUp,
                   "tp_shard: unknown split %d", static_cast<int>(split));
  const WeightShape& s = w.shape;
  if (split == TpSplit::kRows) {
    LOWBIT_CHECK_ARG(s.k % ranks == 0, "tp_shard: K=%d does not split into %d equal row ranges", s.k, ranks);
    return shard_k(w, rank * (s.k / ranks), s.k / ranks, out);
  }
  if (split == TpSplit::kColumns) {
    LOWBIT_CHECK_ARG(s.n % ranks == 0, "tp_shard: N=%d does not split into %d equal column ranges", s.n, ranks);
    return shard_n(w, rank * (s.n / ranks), s.n / ranks, out);
  }
  LOWBIT_RETURN_IF_ERROR(validate(w));
  LOWBIT_CHECK_ARG(s.n % 2 == 0 && (s.n / 2) % ranks == 0,
                   "tp_shard: gate_up N=%d is not [gate; up] with I=N/2 divisible by %d ranks", s.n, ranks);
  const int I = s.n / 2, part = I / ranks;
  WeightShape r = s;
  r.n = 2 * part;
  KPackedWeights o;
  kpacked_allocate(r, &o);
  copy_columns(w, rank * part, part, &o, 0);          // gate
  copy_columns(w, I + rank * part, part, &o, part);   // up
  o.k_perm = w.k_perm;
  *out = std::move(o);
  return Status::Ok();
}

}  // namespace lowbit::int4
