// Tiny random Llama models for the CPU engine tests, and an independent fp64 forward.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "lowbit/model/llama.h"

namespace lowbit::model::testutil {

// 9 query / 3 KV heads like SmolLM2 (uneven splits over TP=2 and TP=4), head_dim 8, so
// n_heads * head_dim = 72 differs from hidden = 48 (catches mixed-up dimensions);
// intermediate 40 splits unevenly over 3 ranks.
inline LlamaConfig tiny_config(int n_layers = 2) {
  LlamaConfig c;
  c.name = "tiny";
  c.vocab_size = 50;
  c.hidden = 48;
  c.intermediate = 40;
  c.n_layers = n_layers;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.head_dim = 8;
  c.context_length = 256;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  return c;
}

// Uniform weights scaled by 1/sqrt(fan_in) (activations stay O(1) through the layers),
// norm weights in [0.8, 1.2], an untied output matrix.
inline LlamaWeights tiny_weights(const LlamaConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  auto fill = [&](std::vector<float>* v, size_t n, float scale, float offset = 0.0f) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    v->resize(n);
    for (auto& x : *v) x = offset + scale * u(rng);
  };
  const size_t H = c.hidden, Q = size_t(c.n_heads) * c.head_dim, KV = size_t(c.n_kv_heads) * c.head_dim,
               I = c.intermediate;
  LlamaWeights w;
  fill(&w.tok_embd, size_t(c.vocab_size) * H, 1.0f);
  fill(&w.output_norm, H, 0.2f, 1.0f);
  fill(&w.output, size_t(c.vocab_size) * H, 2.0f / std::sqrt(float(H)));
  w.layers.resize(c.n_layers);
  for (auto& L : w.layers) {
    fill(&L.attn_norm, H, 0.2f, 1.0f);
    fill(&L.wq, Q * H, 2.0f / std::sqrt(float(H)));
    fill(&L.wk, KV * H, 2.0f / std::sqrt(float(H)));
    fill(&L.wv, KV * H, 1.5f / std::sqrt(float(H)));
    fill(&L.wo, H * Q, 1.5f / std::sqrt(float(Q)));
    fill(&L.ffn_norm, H, 0.2f, 1.0f);
    fill(&L.w_gate, I * H, 1.5f / std::sqrt(float(H)));
    fill(&L.w_up, I * H, 1.5f / std::sqrt(float(H)));
    fill(&L.w_down, H * I, 1.5f / std::sqrt(float(I)));
  }
  return w;
}

inline std::vector<int32_t> tiny_tokens(const LlamaConfig& c, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % uint32_t(c.vocab_size));
  return t;
}

// Straightforward fp64 forward of the whole sequence from position 0, written from the
// definitions (no KV cache, no blocking, no threads): the final-normed hidden states [n, H].
inline std::vector<double> fp64_forward(const LlamaConfig& c, const LlamaWeights& w, const std::vector<int32_t>& ids) {
  const int n = int(ids.size()), H = c.hidden, hd = c.head_dim, nq = c.n_heads, nkv = c.n_kv_heads, I = c.intermediate;
  const int Q = nq * hd, KV = nkv * hd;
  auto norm = [&](const std::vector<double>& x, const std::vector<float>& g) {
    std::vector<double> y(x.size());
    for (int t = 0; t < n; ++t) {
      double ss = 0;
      for (int i = 0; i < H; ++i) ss += x[t * H + i] * x[t * H + i];
      const double inv = 1.0 / std::sqrt(ss / H + c.rms_eps);
      for (int i = 0; i < H; ++i) y[t * H + i] = x[t * H + i] * inv * g[i];
    }
    return y;
  };
  auto lin = [&](const std::vector<double>& x, int K, const std::vector<float>& W, int N) {
    std::vector<double> y(size_t(n) * N);
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < N; ++o) {
        double s = 0;
        for (int k = 0; k < K; ++k) s += x[size_t(t) * K + k] * W[size_t(o) * K + k];
        y[size_t(t) * N + o] = s;
      }
    return y;
  };
  auto rope = [&](std::vector<double>& x, int heads) {
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hd / 2; ++i) {
          const double a = t * std::pow(double(c.rope_theta), -2.0 * i / hd);
          double* v = &x[size_t(t) * heads * hd + h * hd + 2 * i];
          const double x0 = v[0], x1 = v[1];
          v[0] = x0 * std::cos(a) - x1 * std::sin(a);
          v[1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
  };
  std::vector<double> x(size_t(n) * H);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < H; ++i) x[t * H + i] = w.tok_embd[size_t(ids[t]) * H + i];
  for (const auto& L : w.layers) {
    std::vector<double> xn = norm(x, L.attn_norm);
    std::vector<double> q = lin(xn, H, L.wq, Q), k = lin(xn, H, L.wk, KV), v = lin(xn, H, L.wv, KV);
    rope(q, nq);
    rope(k, nkv);
    std::vector<double> att(size_t(n) * Q, 0.0);
    for (int h = 0; h < nq; ++h) {
      const int g = h / (nq / nkv);
      for (int t = 0; t < n; ++t) {
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += q[size_t(t) * Q + h * hd + e] * k[size_t(j) * KV + g * hd + e];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int j = 0; j <= t; ++j)
          for (int e = 0; e < hd; ++e) att[size_t(t) * Q + h * hd + e] += s[j] / sum * v[size_t(j) * KV + g * hd + e];
      }
    }
    std::vector<double> o = lin(att, Q, L.wo, H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    xn = norm(x, L.ffn_norm);
    std::vector<double> gate = lin(xn, H, L.w_gate, I), up = lin(xn, H, L.w_up, I);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    std::vector<double> d = lin(gate, I, L.w_down, H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  return norm(x, w.output_norm);
}

// max |a - b| / max |b| over all elements.
template <typename A, typename B>
double rel_max_err(const std::vector<A>& a, const std::vector<B>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - double(b[i])));
    den = std::max(den, std::abs(double(b[i])));
  }
  return a.size() == b.size() && den > 0 ? num / den : 1e300;
}

}  // namespace lowbit::model::testutil
