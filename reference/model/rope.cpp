#include <cmath>

#include "lowbit/model/cpu_ops.h"

namespace lowbit::model::cpu {

void rope_table(int head_dim, int max_pos, float theta, RopeTable* t) {
  int half = head_dim / 2;
  t->head_dim = head_dim;
  t->max_pos = max_pos;
  t->cos.resize(static_cast<size_t>(max_pos) * half);
  t->sin.resize(t->cos.size());
  for (int p = 0; p < max_pos; ++p)
    for (int i = 0; i < half; ++i) {
      // Angles in double: the table is exact to fp32 rounding at every position.
      double a = p * std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      t->cos[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(a));
      t->sin[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(a));
    }
}

void rope(float* x, int64_t row_stride, int rows, int n_heads, int head_dim, int pos0, const RopeTable& t) {
  int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const float* c = t.cos.data() + static_cast<size_t>(pos0 + r) * half;
    const float* s = t.sin.data() + static_cast<size_t>(pos0 + r) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + r * row_stride + static_cast<int64_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c[i] - b * s[i];
        v[2 * i + 1] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace lowbit::model::cpu
