// CPU emulation of Int4Gemm.MatchesFp64Reference's statistic for M1_N192_K8320_Gpc_asym_bf16: the kernel's
// output approximated by fp64 sums of x * (q - z) * s (unrounded weights) rounded to bf16.
#include <cmath>
#include <cstdio>
#include <vector>
#include "tests/cpu/int4/random_weights.h"
using namespace lowbit; using namespace lowbit::int4; using namespace lowbit::int4::testing;
int main(int argc, char** argv) {
  const int m_rows = argc > 1 ? atoi(argv[1]) : 1, n = 192, k = 8320, g = -1; const bool sym = argc > 2 ? atoi(argv[2]) : false;
  const DType t = DType::kBF16;
  WeightShape s{1, n, k, g, sym, t};
  KPackedWeights kp = random_kpacked(s, 7u * s.n + 13u * s.k + static_cast<uint32_t>(s.group_size + 1));
  auto x = random_activations(static_cast<size_t>(m_rows) * k, t, 31u * m_rows + k);
  for (int stride : {61, 1}) {
    double err2 = 0, ref2 = 0, worst = 0;
    std::vector<int> cols; for (int c = 0; c < n; c += stride) cols.push_back(c); if (stride > 1) cols.push_back(n - 1);
    for (int m = 0; m < m_rows; ++m) for (int c : cols) {
      double ref = 0, ex = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double xv = half_bits_to_float(t, x[static_cast<size_t>(m) * k + kk]);
        ref += xv * half_bits_to_float(t, canon_dequant_bits(kp, 0, c, kk));
        const int gi = kk / s.group_len();
        const double sc = half_bits_to_float(t, kp.scales[static_cast<size_t>(c) * s.num_groups() + gi]);
        ex += xv * (canon_q(kp, 0, c, kk) - canon_z(kp, 0, c, gi)) * sc;
      }
      const double got = half_bits_to_float(t, float_to_half_bits(t, static_cast<float>(ex)));
      err2 += (got - ref) * (got - ref); ref2 += ref * ref; worst = std::fmax(worst, std::fabs(got - ref) / std::fabs(ref));
    }
    std::printf("M=%d sym=%d stride %d: %zu outputs, rel-L2 %.5f (bound 0.005), worst rel %.4f\n", m_rows, sym, stride, cols.size() * m_rows, std::sqrt(err2 / ref2), worst);
  }
}
