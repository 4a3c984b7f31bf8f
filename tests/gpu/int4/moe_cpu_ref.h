// CPU reference of the fused MoE stages (routing, align), matching the contracts in
// include/lowbit/int4/kernels.h. Used by the GPU tests and the MoE bench's check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace lowbit::int4::testing {

// Top-k by (logit desc, index asc); weights = softmax prob (renormalized if asked).
inline void cpu_topk(const std::vector<float>& logits, int M, int E, int topk, bool renorm, std::vector<int32_t>* ids,
                     std::vector<float>* w) {
  ids->assign(static_cast<size_t>(M) * topk, 0);
  w->assign(static_cast<size_t>(M) * topk, 0.f);
  std::vector<int> order(E);
  for (int m = 0; m < M; ++m) {
    const float* l = logits.data() + static_cast<size_t>(m) * E;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    double mx = *std::max_element(l, l + E), sum = 0;
    for (int e = 0; e < E; ++e) sum += std::exp(static_cast<double>(l[e]) - mx);
    double chosen = 0;
    for (int s = 0; s < topk; ++s) chosen += std::exp(static_cast<double>(l[order[s]]) - mx) / sum;
    for (int s = 0; s < topk; ++s) {
      const double p = std::exp(static_cast<double>(l[order[s]]) - mx) / sum;
      (*ids)[static_cast<size_t>(m) * topk + s] = order[s];
      (*w)[static_cast<size_t>(m) * topk + s] = static_cast<float>(renorm ? p / chosen : p);
    }
  }
}

// Align: pairs sorted by (expert, pair index), runs padded to BM with sentinel P.
inline void cpu_align(const std::vector<int32_t>& ids, int P, int E, int BM, int64_t max_padded,
                      std::vector<int32_t>* sorted, std::vector<int32_t>* expert_ids, int32_t* npp) {
  sorted->assign(static_cast<size_t>(max_padded), P);
  expert_ids->assign(static_cast<size_t>(max_padded / BM), -1);
  int off = 0;
  for (int e = 0; e < E; ++e) {
    int cnt = 0;
    for (int p = 0; p < P; ++p)
      if (ids[p] == e) (*sorted)[off + cnt++] = p;
    const int padded = (cnt + BM - 1) / BM * BM;
    for (int b = off / BM; b < (off + padded) / BM; ++b) (*expert_ids)[b] = e;
    off += padded;
  }
  *npp = off;
}

}  // namespace lowbit::int4::testing
