// Fused MoE reference (vLLM Triton fused_moe semantics), driven by moe_align_ref's blocks.
#include <cmath>

#include "lowbit/int4/moe_ref.h"

namespace lowbit::int4 {

Status fused_moe_ref(const KPackedWeights& w13, const KPackedWeights& w2, const FusedMoeArgs& a,
                     std::vector<double>* out64, std::vector<uint16_t>* out_act) {
  LOWBIT_RETURN_IF_ERROR(validate(w13));
  LOWBIT_RETURN_IF_ERROR(validate(w2));
  const WeightShape &s1 = w13.shape, &s2 = w2.shape;
  const int E = s1.experts, H = s1.k, I = s2.k;
  LOWBIT_CHECK_ARG(s2.experts == E, "fused_moe_ref: w13 has %d experts, w2 %d", E, s2.experts);
  LOWBIT_CHECK_ARG(s1.n == 2 * I, "fused_moe_ref: w13 rows %d must be 2*I = 2*%d (w2's K)", s1.n, I);
  LOWBIT_CHECK_ARG(s2.n == H, "fused_moe_ref: w2 rows %d must equal H=%d (w13's K)", s2.n, H);
  LOWBIT_CHECK_ARG(s1.act == s2.act, "fused_moe_ref: w13 and w2 activation dtypes differ");
  LOWBIT_CHECK_ARG(a.m >= 0 && (a.m == 0 || (a.x && a.topk_ids && a.topk_weights)), "fused_moe_ref: null input");
  const DType act = s1.act;
  MoeAlignment al;
  LOWBIT_RETURN_IF_ERROR(moe_align_ref(a.topk_ids, a.m, a.topk, E, a.block_m, &al, a.skip_foreign_ids));
  std::vector<double> acc(static_cast<size_t>(a.m) * H, 0.0);
  std::vector<uint16_t> xrow(H), arow(I);
  std::vector<double> h64, o64;
  std::vector<uint16_t> hact;
  auto round_act = [&](double v) { return half_bits_to_float(act, float_to_half_bits(act, static_cast<float>(v))); };
  const int nblocks = al.num_tokens_post_pad / a.block_m;
  for (int b = 0; b < nblocks; ++b) {
    const int e = al.expert_ids[b];
    for (int j = 0; j < a.block_m; ++j) {
      const int32_t pair = al.sorted_token_ids[static_cast<size_t>(b) * a.block_m + j];
      if (pair == al.sentinel) continue;  // padding costs nothing here
      const int t = pair / a.topk;
      for (int k = 0; k < H; ++k) xrow[k] = a.x[static_cast<size_t>(t) * H + k];
      LOWBIT_RETURN_IF_ERROR(gemm_ref(w13, e, xrow.data(), 1, &h64, nullptr));
      for (int i = 0; i < I; ++i) {
        double g = h64[i], u = h64[I + i];
        if (a.round_intermediates) {
          g = round_act(g);
          u = round_act(u);
        }
        double v = g / (1.0 + std::exp(-g)) * u;
        arow[i] = float_to_half_bits(act, static_cast<float>(v));
        h64[i] = v;  // the fp64 path carries the exact value into the second GEMM
      }
      if (a.round_intermediates) {
        LOWBIT_RETURN_IF_ERROR(gemm_ref(w2, e, arow.data(), 1, &o64, nullptr));
      } else {
        // Second GEMM on fp64 activations (gemm_ref takes activation-dtype bits).
        const int G = s2.group_len();
        const int32_t* perm = w2.k_perm.empty() ? nullptr : w2.k_perm.data() + static_cast<size_t>(e) * I;
        o64.assign(H, 0.0);
        for (int n = 0; n < H; ++n) {
          double sacc = 0.0;
          for (int k = 0; k < I; ++k) {
            double wv = half_bits_to_float(act, dequant_bits(kpacked_q(w2, e, n, k), kpacked_z(w2, e, n, k / G),
                                                             kpacked_s(w2, e, n, k / G), act));
            sacc += h64[perm ? perm[k] : k] * wv;
          }
          o64[n] = sacc;
        }
      }
      const double r = a.topk_weights[pair];
      for (int n = 0; n < H; ++n) acc[static_cast<size_t>(t) * H + n] += r * o64[n];
    }
  }
  if (out64) *out64 = acc;
  if (out_act) {
    out_act->resize(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) (*out_act)[i] = float_to_half_bits(act, static_cast<float>(acc[i]));
  }
  return Status::Ok();
}

}  // namespace lowbit::int4
