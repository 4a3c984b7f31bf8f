#include <cmath>

#include "lowbit/model/cpu_ops.h"

namespace lowbit::model::cpu {

void rmsnorm(const float* x, const float* weight, float* out, int rows, int hidden, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * hidden;
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    float inv = static_cast<float>(1.0 / std::sqrt(ss / hidden + eps));
    float* o = out + static_cast<int64_t>(r) * hidden;
    for (int i = 0; i < hidden; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

}  // namespace lowbit::model::cpu
