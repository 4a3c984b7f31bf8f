// Random canonical K-packed INT4 weights for tests (CPU and GPU suites share this header).
// Scales are random non-zero values of moderate size; zeros random 0..15 (asymmetric).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "lowbit/int4/weights.h"

namespace lowbit::int4::testing {

// A random act-order permutation per expert, [E, K] as KPackedWeights::k_perm (the kernels
// accept any; GPTQ's are sorted by group): iota, then std::shuffle with `rng`, expert by expert.
inline std::vector<int32_t> random_k_perm(int experts, int k, std::mt19937& rng) {
  std::vector<int32_t> p(static_cast<size_t>(experts) * k);
  for (int e = 0; e < experts; ++e) {
    auto first = p.begin() + static_cast<std::ptrdiff_t>(e) * k;
    std::iota(first, first + k, 0);
    std::shuffle(first, first + k, rng);
  }
  return p;
}
inline std::vector<int32_t> random_k_perm(int experts, int k, uint32_t seed) {
  std::mt19937 rng(seed);
  return random_k_perm(experts, k, rng);
}

// x'[r, j] = x[r, perm[j]] for the M rows of x [M, K] (one expert's permutation): the
// act-order activations gathered on the host, as the kernels' gathers must produce them.
template <typename T>
std::vector<T> gather_columns(const std::vector<T>& x, int m, int k, const int32_t* perm) {
  std::vector<T> out(static_cast<size_t>(m) * k);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < k; ++j) out[static_cast<size_t>(r) * k + j] = x[static_cast<size_t>(r) * k + perm[j]];
  return out;
}

inline KPackedWeights random_kpacked(const WeightShape& s, uint32_t seed, float scale_mag = 0.02f) {
  std::mt19937 rng(seed);
  KPackedWeights w;
  w.shape = s;
  const size_t nq = static_cast<size_t>(s.experts) * s.n * (s.k / 2);
  w.qweight.resize(nq);
  for (auto& b : w.qweight) b = static_cast<uint8_t>(rng() & 0xFF);
  const int ng = s.num_groups();
  w.scales.resize(static_cast<size_t>(s.experts) * s.n * ng);
  std::uniform_real_distribution<float> u(0.25f, 1.0f);
  for (auto& v : w.scales) {
    float f = u(rng) * scale_mag * ((rng() & 1) ? 1.0f : -1.0f);
    v = float_to_half_bits(s.act, f);
  }
  if (!s.symmetric) {
    w.zeros.resize(static_cast<size_t>(s.experts) * ((s.n + 1) / 2) * ng);
    for (size_t i = 0; i < w.zeros.size(); ++i) w.zeros[i] = static_cast<uint8_t>(rng() & 0xFF);
    if (s.n % 2 == 1)  // the last row pair's high nibble is unused (weights.h)
      for (int e = 0; e < s.experts; ++e)
        for (int g = 0; g < ng; ++g)
          w.zeros[(static_cast<size_t>(e) * ((s.n + 1) / 2) + s.n / 2) * ng + g] &= 0x0F;
  }
  return w;
}

// n activations of dtype t (bits): magnitudes uniform in [0.1, 1), random signs (never zero).
inline std::vector<uint16_t> random_activations(size_t n, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = float_to_half_bits(t, (rng() & 1) ? u(rng) : -u(rng));
  return v;
}

// Canonical nibble and zero point (contract in weights.h).
inline int canon_q(const KPackedWeights& w, int e, int n, int k) {
  return (w.qweight[(static_cast<size_t>(e) * w.shape.n + n) * (w.shape.k / 2) + k / 2] >> (4 * (k & 1))) & 0xF;
}
inline int canon_z(const KPackedWeights& w, int e, int n, int g) {
  if (w.shape.symmetric) return 8;
  const int ng = w.shape.num_groups();
  return (w.zeros[(static_cast<size_t>(e) * ((w.shape.n + 1) / 2) + n / 2) * ng + g] >> (4 * (n & 1))) & 0xF;
}
// w[e, n, k] in activation-dtype bits, straight from the canonical layout.
inline uint16_t canon_dequant_bits(const KPackedWeights& w, int e, int n, int k) {
  const int g = k / w.shape.group_len();
  float s = half_bits_to_float(w.shape.act, w.scales[(static_cast<size_t>(e) * w.shape.n + n) * w.shape.num_groups() + g]);
  float d = static_cast<float>(canon_q(w, e, n, k) - canon_z(w, e, n, g));
  return float_to_half_bits(w.shape.act, d * s);
}

}  // namespace lowbit::int4::testing
