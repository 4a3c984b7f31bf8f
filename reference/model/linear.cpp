// y = x W^T, fp32. 3 rows of x x 4 rows of W per register tile (12 accumulators + 3 x
// vectors + 1 w vector = 16 ymm registers); rows of x blocked by 64 so the x block stays in
// L2 while the W rows stream. Tails reuse the last valid row (results discarded).
#include <immintrin.h>

#include <algorithm>

#include "lowbit/detail/parallel_for.h"
#include "lowbit/model/cpu_ops.h"

namespace lowbit::model::cpu {
namespace {

constexpr int kRowBlock = 64;

__attribute__((target("avx2,fma"))) float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

template <int MT>
__attribute__((target("avx2,fma"))) void tile_avx2(const float* const* xr, const float* const* wr, int K, float out[3][4]) {
  __m256 acc[MT][4];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
  int k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 xv[MT];
    for (int i = 0; i < MT; ++i) xv[i] = _mm256_loadu_ps(xr[i] + k);
    for (int j = 0; j < 4; ++j) {
      __m256 wv = _mm256_loadu_ps(wr[j] + k);
      for (int i = 0; i < MT; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = hsum256(acc[i][j]);
      for (int kk = k; kk < K; ++kk) s += xr[i][kk] * wr[j][kk];
      out[i][j] = s;
    }
}

template <int MT>
void tile_scalar(const float* const* xr, const float* const* wr, int K, float out[3][4]) {
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < 4; ++j) {
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int k = 0;
      for (; k + 4 <= K; k += 4) {
        s0 += xr[i][k] * wr[j][k];
        s1 += xr[i][k + 1] * wr[j][k + 1];
        s2 += xr[i][k + 2] * wr[j][k + 2];
        s3 += xr[i][k + 3] * wr[j][k + 3];
      }
      for (; k < K; ++k) s0 += xr[i][k] * wr[j][k];
      out[i][j] = (s0 + s1) + (s2 + s3);
    }
}

bool have_avx2() {
  static const bool v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return v;
}

void linear_range(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int T, int n0, int n1,
                  int K) {
  const bool avx = have_avx2();
  float out[3][4];
  for (int tb = 0; tb < T; tb += kRowBlock) {
    int te = std::min(T, tb + kRowBlock);
    for (int n = n0; n < n1; n += 4) {
      int nt = std::min(4, n1 - n);
      const float* wr[4];
      for (int j = 0; j < 4; ++j) wr[j] = w + static_cast<int64_t>(n + std::min(j, nt - 1)) * ldw;
      int t = tb;
      for (; t + 3 <= te; t += 3) {
        const float* xr[3] = {x + t * ldx, x + (t + 1) * ldx, x + (t + 2) * ldx};
        if (avx) tile_avx2<3>(xr, wr, K, out);
        else tile_scalar<3>(xr, wr, K, out);
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < nt; ++j) y[(t + i) * ldy + n + j] = out[i][j];
      }
      for (; t < te; ++t) {
        const float* xr[1] = {x + t * ldx};
        if (avx) tile_avx2<1>(xr, wr, K, out);
        else tile_scalar<1>(xr, wr, K, out);
        for (int j = 0; j < nt; ++j) y[t * ldy + n + j] = out[0][j];
      }
    }
  }
}

}  // namespace

void linear(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int T, int N, int K,
            int threads) {
  if (T <= 0 || N <= 0) return;
  int n_quads = (N + 3) / 4;
  lowbit::detail::parallel_for(n_quads, threads, [&](int b, int e) {
    linear_range(x, ldx, w, ldw, y, ldy, T, b * 4, std::min(N, e * 4), K);
  });
}

}  // namespace lowbit::model::cpu
