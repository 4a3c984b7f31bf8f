// Causal GQA attention: scores by the blocked linear() (q rows x cached k rows), causal
// softmax per row, then out += p_j v_j (axpy over the cached values). Heads in parallel.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lowbit/detail/parallel_for.h"
#include "lowbit/model/cpu_ops.h"

namespace lowbit::model::cpu {

void attention(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv, float* out, int64_t ldo,
               int Tq, int pos0, int n_q, const int* kv_of_head, int hd, int threads) {
  const int Tk = pos0 + Tq;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  lowbit::detail::parallel_for(n_q, threads, [&](int h0, int h1) {
    std::vector<float> s(static_cast<size_t>(Tq) * Tk);
    for (int h = h0; h < h1; ++h) {
      const int g = kv_of_head[h];
      const float* qh = q + static_cast<int64_t>(h) * hd;
      const float* kg = k + static_cast<int64_t>(g) * hd;
      const float* vg = v + static_cast<int64_t>(g) * hd;
      linear(qh, ldq, kg, ldkv, s.data(), Tk, Tq, Tk, hd, 1);
      for (int i = 0; i < Tq; ++i) {
        float* si = s.data() + static_cast<size_t>(i) * Tk;
        const int nk = pos0 + i + 1;  // causal: keys 0 .. pos0 + i
        float mx = -INFINITY;
        for (int j = 0; j < nk; ++j) {
          si[j] *= scale;
          mx = std::max(mx, si[j]);
        }
        float sum = 0;
        for (int j = 0; j < nk; ++j) {
          si[j] = std::exp(si[j] - mx);
          sum += si[j];
        }
        const float inv = 1.0f / sum;
        float* o = out + i * ldo + static_cast<int64_t>(h) * hd;
        std::fill(o, o + hd, 0.0f);
        for (int j = 0; j < nk; ++j) {
          const float p = si[j] * inv;
          const float* vj = vg + j * ldkv;
          for (int d = 0; d < hd; ++d) o[d] += p * vj[d];
        }
      }
    }
  });
}

}  // namespace lowbit::model::cpu
