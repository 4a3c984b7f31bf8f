// CPU fp64 references for the model GPU ops and for a whole Llama forward (shared by
// tests/gpu/model and tests/multigpu/model). Same layouts and conventions as
// include/lowbit/model/gpu_ops.h: row-major [tokens, features], fused QKV [q | k | v],
// RoPE on adjacent pairs (2i, 2i+1), causal GQA, SwiGLU.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "lowbit/detail/float_bits.h"
#include "lowbit/model/llama.h"
#include "lowbit/status.h"

// gtest assertion that a lowbit::Status is Ok, printing it otherwise (the model GPU suites).
#define ASSERT_OK(x)                          \
  do {                                        \
    ::lowbit::Status _st = (x);               \
    ASSERT_TRUE(_st.ok()) << _st.to_string(); \
  } while (0)

namespace lowbit::model::testref {

inline float round_bf16(float x) { return bf16_bits_to_float(float_to_bf16_bits(x)); }

// Non-zero random values in [-a, a], rounded to bf16 (the GPU sees exactly these).
inline std::vector<float> random_bf16(size_t n, float a, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) {
    float r = d(g);
    if (r == 0.0f) r = a * 0.5f;
    x = round_bf16(r);
  }
  return v;
}
inline std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = float_to_bf16_bits(v[i]);
  return o;
}
inline std::vector<float> from_bf16_bits(const std::vector<uint16_t>& v) {
  std::vector<float> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_bits_to_float(v[i]);
  return o;
}

template <class T>
void rmsnorm(const std::vector<T>& x, const std::vector<float>& w, int rows, int hidden, double eps,
             std::vector<double>* out) {
  out->assign(static_cast<size_t>(rows) * hidden, 0.0);
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += double(x[size_t(r) * hidden + i]) * double(x[size_t(r) * hidden + i]);
    const double inv = 1.0 / std::sqrt(ss / hidden + eps);
    for (int i = 0; i < hidden; ++i) (*out)[size_t(r) * hidden + i] = double(x[size_t(r) * hidden + i]) * inv * w[i];
  }
}

// In place on the first n_heads heads of each row (stride row_stride); pos[t] positions.
template <class T>
void rope(std::vector<T>* x, int64_t row_stride, int n_tokens, int n_heads, int head_dim, const std::vector<int>& pos,
          double theta) {
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < head_dim / 2; ++i) {
        const double ang = pos[t] * std::pow(theta, -2.0 * i / head_dim);
        T* p = x->data() + t * row_stride + int64_t(h) * head_dim + 2 * i;
        const double a = p[0], b = p[1];
        p[0] = T(a * std::cos(ang) - b * std::sin(ang));
        p[1] = T(a * std::sin(ang) + b * std::cos(ang));
      }
}

// qkv [batch*seq, (nq + 2 nkv) hd] -> out [batch*seq, nq hd].
template <class T>
void attention(const std::vector<T>& qkv, int batch, int seq, int nq, int nkv, int hd, std::vector<double>* out) {
  const int64_t w = int64_t(nq + 2 * nkv) * hd;
  out->assign(size_t(batch) * seq * nq * hd, 0.0);
  std::vector<double> p(seq);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < nq; ++h) {
      const int g = h / (nq / nkv);
      for (int i = 0; i < seq; ++i) {
        const T* q = qkv.data() + (int64_t(b) * seq + i) * w + int64_t(h) * hd;
        double m = -1e300;
        for (int j = 0; j <= i; ++j) {
          const T* k = qkv.data() + (int64_t(b) * seq + j) * w + int64_t(nq + g) * hd;
          double s = 0;
          for (int d = 0; d < hd; ++d) s += double(q[d]) * double(k[d]);
          p[j] = s / std::sqrt(double(hd));
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - m));
        double* o = out->data() + (int64_t(b) * seq + i) * nq * hd + int64_t(h) * hd;
        for (int j = 0; j <= i; ++j) {
          const T* v = qkv.data() + (int64_t(b) * seq + j) * w + int64_t(nq + nkv + g) * hd;
          for (int d = 0; d < hd; ++d) o[d] += p[j] / sum * double(v[d]);
        }
      }
    }
}

// y[T, N] = x[T, K] W[N, K]^T
template <class T>
void linear(const std::vector<T>& x, const std::vector<float>& w, int T_, int N, int K, std::vector<double>* y) {
  y->assign(size_t(T_) * N, 0.0);
  for (int t = 0; t < T_; ++t)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(x[size_t(t) * K + k]) * double(w[size_t(n) * K + k]);
      (*y)[size_t(t) * N + n] = s;
    }
}

inline double silu(double g) { return g / (1.0 + std::exp(-g)); }

// Whole forward in fp64 (weights as given, activations unrounded): logits [batch*seq, vocab].
inline void forward(const LlamaConfig& c, const LlamaWeights& w, const std::vector<int>& tokens, int batch, int seq,
                    std::vector<double>* logits) {
  const int T = batch * seq, H = c.hidden, hd = c.head_dim, nq = c.n_heads, nkv = c.n_kv_heads;
  std::vector<double> x(size_t(T) * H);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) x[size_t(t) * H + i] = w.tok_embd[size_t(tokens[t]) * H + i];
  std::vector<int> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = t % seq;
  std::vector<double> xn, q, k, v, att, o, g, u, d;
  for (const auto& L : w.layers) {
    rmsnorm(x, L.attn_norm, T, H, c.rms_eps, &xn);
    linear(xn, L.wq, T, nq * hd, H, &q);
    linear(xn, L.wk, T, nkv * hd, H, &k);
    linear(xn, L.wv, T, nkv * hd, H, &v);
    const int W = (nq + 2 * nkv) * hd;
    std::vector<double> qkv(size_t(T) * W);
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < nq * hd; ++i) qkv[size_t(t) * W + i] = q[size_t(t) * nq * hd + i];
      for (int i = 0; i < nkv * hd; ++i) qkv[size_t(t) * W + nq * hd + i] = k[size_t(t) * nkv * hd + i];
      for (int i = 0; i < nkv * hd; ++i) qkv[size_t(t) * W + (nq + nkv) * hd + i] = v[size_t(t) * nkv * hd + i];
    }
    rope(&qkv, W, T, nq + nkv, hd, pos, c.rope_theta);
    attention(qkv, batch, seq, nq, nkv, hd, &att);
    linear(att, L.wo, T, H, nq * hd, &o);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    rmsnorm(x, L.ffn_norm, T, H, c.rms_eps, &xn);
    linear(xn, L.w_gate, T, c.intermediate, H, &g);
    linear(xn, L.w_up, T, c.intermediate, H, &u);
    for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
    linear(g, L.w_down, T, H, c.intermediate, &d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  rmsnorm(x, w.output_norm, T, H, c.rms_eps, &xn);
  linear(xn, w.output.empty() ? w.tok_embd : w.output, T, c.vocab_size, H, logits);
}

// A tiny random Llama with bf16-exact weights (the GPU holds exactly these values).
inline void tiny_llama(const LlamaConfig& c, uint32_t seed, LlamaWeights* w) {
  auto mat = [&](int n, int k, uint32_t s) { return random_bf16(size_t(n) * k, 1.0f / std::sqrt(float(k)), s); };
  auto norm = [&](int n, uint32_t s) {
    auto v = random_bf16(n, 0.2f, s);
    for (auto& x : v) x = round_bf16(1.0f + x);
    return v;
  };
  const int H = c.hidden, hd = c.head_dim;
  w->tok_embd = random_bf16(size_t(c.vocab_size) * H, 1.0f, seed);
  w->output_norm = norm(H, seed + 1);
  if (!c.tied_embeddings) w->output = mat(c.vocab_size, H, seed + 2);
  w->layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    auto& L = w->layers[l];
    const uint32_t s = seed + 100 * (l + 1);
    L.attn_norm = norm(H, s);
    L.wq = mat(c.n_heads * hd, H, s + 1);
    L.wk = mat(c.n_kv_heads * hd, H, s + 2);
    L.wv = mat(c.n_kv_heads * hd, H, s + 3);
    L.wo = mat(H, c.n_heads * hd, s + 4);
    L.ffn_norm = norm(H, s + 5);
    L.w_gate = mat(c.intermediate, H, s + 6);
    L.w_up = mat(c.intermediate, H, s + 7);
    L.w_down = mat(H, c.intermediate, s + 8);
  }
}

}  // namespace lowbit::model::testref
