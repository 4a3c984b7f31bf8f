// Act-order row order from a g_idx (formats.h): shared by the GPTQ and compressed-tensors
// converters, whose checkpoints store it the same way.
#include <algorithm>
#include <numeric>

#include "lowbit/int4/formats.h"

namespace lowbit::int4 {

Status act_order_perm(const std::vector<int32_t>& g_idx, int K, int G, const char* who, std::vector<int32_t>* perm,
                      bool* act_order) {
  LOWBIT_CHECK_ARG(perm != nullptr && act_order != nullptr, "%s: act_order_perm output is null", who);
  LOWBIT_CHECK_ARG(K > 0 && G > 0 && K % G == 0, "%s: K=%d is not a multiple of the group size %d", who, K, G);
  LOWBIT_CHECK_ARG(g_idx.empty() || g_idx.size() == static_cast<size_t>(K), "%s: g_idx has %zu entries, expected K=%d",
                   who, g_idx.size(), K);
  const int NG = K / G;
  perm->resize(K);
  std::iota(perm->begin(), perm->end(), 0);
  *act_order = false;
  if (g_idx.empty()) return Status::Ok();
  std::vector<int> count(NG, 0);
  for (int k = 0; k < K; ++k) {
    const int g = g_idx[k];
    LOWBIT_CHECK_ARG(g >= 0 && g < NG, "%s: g_idx[%d]=%d outside [0, %d)", who, k, g, NG);
    ++count[g];
    if (g != k / G) *act_order = true;
  }
  for (int g = 0; g < NG; ++g)
    LOWBIT_CHECK_ARG(count[g] == G, "%s: act-order g_idx puts %d rows in group %d, expected group_size=%d", who,
                     count[g], g, G);
  if (*act_order) std::stable_sort(perm->begin(), perm->end(), [&](int a, int b) { return g_idx[a] < g_idx[b]; });
  return Status::Ok();
}

}  // namespace lowbit::int4
