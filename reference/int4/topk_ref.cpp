// Router top-k with softmax weights; deterministic tie-breaking (lower expert index wins).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "lowbit/int4/moe_ref.h"

namespace lowbit::int4 {

Status topk_softmax_ref(const float* logits, int m, int e, int topk, bool renormalize, std::vector<int32_t>* ids,
                        std::vector<float>* weights) {
  LOWBIT_CHECK_ARG(m >= 0 && e >= 1, "topk_softmax_ref: m=%d, e=%d", m, e);
  LOWBIT_CHECK_ARG(topk >= 1 && topk <= e, "topk_softmax_ref: topk=%d must be in [1, E=%d]", topk, e);
  LOWBIT_CHECK_ARG(m == 0 || logits != nullptr, "topk_softmax_ref: logits is null");
  LOWBIT_CHECK_ARG(ids != nullptr && weights != nullptr, "topk_softmax_ref: null output");
  ids->assign(static_cast<size_t>(m) * topk, 0);
  weights->assign(static_cast<size_t>(m) * topk, 0.f);
  std::vector<int> order(e);
  for (int t = 0; t < m; ++t) {
    const float* l = logits + static_cast<size_t>(t) * e;
    for (int i = 0; i < e; ++i)
      LOWBIT_CHECK_ARG(std::isfinite(l[i]), "topk_softmax_ref: logit [%d, %d] is not finite", t, i);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });  // stable: lower index first on ties
    double mx = l[order[0]], sum = 0.0;
    for (int i = 0; i < e; ++i) sum += std::exp(static_cast<double>(l[i]) - mx);
    double sel = 0.0;
    for (int j = 0; j < topk; ++j) sel += std::exp(static_cast<double>(l[order[j]]) - mx) / sum;
    for (int j = 0; j < topk; ++j) {
      double p = std::exp(static_cast<double>(l[order[j]]) - mx) / sum;
      (*ids)[static_cast<size_t>(t) * topk + j] = order[j];
      (*weights)[static_cast<size_t>(t) * topk + j] = static_cast<float>(renormalize ? p / sel : p);
    }
  }
  return Status::Ok();
}

}  // namespace lowbit::int4
