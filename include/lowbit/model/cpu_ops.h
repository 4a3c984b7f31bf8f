// fp32 CPU ops of the Llama engine (reference/model/, one op per file). Row-major
// [rows, features] tensors; weights [out_features, in_features] as in LlamaWeights.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace lowbit::model::cpu {

// y[t, n] = sum_k x[t, k] w[n, k] for t < T, n < N (dot-product form: both operands
// contiguous along K). Blocked 3x4 register tile, AVX2+FMA when the CPU has it (runtime
// dispatch), scalar otherwise; the N range is split over `threads`.
void linear(const float* x, int64_t ldx, const float* w, int64_t ldw, float* y, int64_t ldy, int T, int N, int K,
            int threads);

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight (sum of squares in double).
void rmsnorm(const float* x, const float* weight, float* out, int rows, int hidden, float eps);

// GGUF / llama.cpp "normal" RoPE in place on n_heads heads of every row: pairs (2i, 2i+1)
// rotate by pos * theta^(-2i/head_dim); cos/sin from a table [max_pos, head_dim/2].
struct RopeTable {
  int head_dim = 0, max_pos = 0;
  std::vector<float> cos, sin;
};
void rope_table(int head_dim, int max_pos, float theta, RopeTable* t);
void rope(float* x, int64_t row_stride, int rows, int n_heads, int head_dim, int pos0, const RopeTable& t);

// out[t, i] = silu(gate[t, i]) * up[t, i], silu(g) = g / (1 + exp(-g)).
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// Causal grouped-query attention of Tq new queries at positions pos0 .. pos0+Tq-1 over the
// cached keys/values 0 .. pos0+Tq-1. q: [Tq, n_q*hd] (row stride ldq); k, v: [pos0+Tq,
// n_kv*hd] (row stride ldkv); out: [Tq, n_q*hd]. Query head h reads KV head
// kv_of_head[h]. Scores scaled by 1/sqrt(hd), softmax in fp32 (max-subtracted).
void attention(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldkv, float* out, int64_t ldo,
               int Tq, int pos0, int n_q, const int* kv_of_head, int hd, int threads);

}  // namespace lowbit::model::cpu
