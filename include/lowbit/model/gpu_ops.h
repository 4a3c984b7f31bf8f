// GPU ops of the tensor-parallel Llama runner (kernels/model/*.cu, one op per file).
// Include from CUDA-enabled code only (.cu files).
//
// Conventions shared by every op (and by the CPU references in tests/gpu/model/):
// - Activations are bf16, row-major [tokens, features], token t = b * seq + s.
// - Every reduction and every elementwise computation runs in fp32; results are rounded
//   once to bf16 (round to nearest even).
// - Weights are row-major [out_features, in_features] (the GGUF / LlamaWeights layout).
// - Fused QKV rows: [q heads | k heads | v heads] of this rank, each head head_dim wide.
// - RoPE: GGUF / llama.cpp "normal" convention for LLaMA: pairs of adjacent elements
//   (2i, 2i+1) inside each head rotate by angle pos * theta^(-2i / head_dim).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "lowbit/status.h"

namespace lowbit::model::gpu {

using bf16 = __nv_bfloat16;

// out[t, :] = table[ids[t], :] for t < n_tokens. An id outside [0, vocab) yields a row of
// NaN (never an out-of-bounds read), so a bad token shows up in the logits; the runner
// validates ids on the host before uploading them.
Status embedding(const int32_t* ids, int n_tokens, const bf16* table, int vocab, int hidden, bf16* out,
                 cudaStream_t stream);

// out[r, :] = bf16( x / sqrt(mean(x^2) + eps) * weight ), x = in[r, :] in fp32.
// Row r of `in` starts at in + r * in_stride (lets the final norm pick the last token of
// every sequence without a gather); out rows at out + r * out_stride.
Status rmsnorm(const bf16* in, int64_t in_stride, const bf16* weight, bf16* out, int64_t out_stride, int rows,
               int hidden, float eps, cudaStream_t stream);

// In place on the first n_heads heads of every row of x (row t at x + t * row_stride):
// (x[2i], x[2i+1]) <- (x[2i] c - x[2i+1] s, x[2i] s + x[2i+1] c), angle = positions[t] *
// theta^(-2i/head_dim), computed in fp32 with sincosf (full precision).
Status rope(bf16* x, int64_t row_stride, int n_tokens, int n_heads, int head_dim, const int32_t* positions,
            float theta, cudaStream_t stream);

// Causal softmax over rows of a [n_mat, seq, ld] fp32 score tensor (already scaled; row
// pitch ld >= seq elements, matrix pitch seq * ld): row i of every matrix keeps columns
// j <= i; probs (bf16, same layout) are 0 for seq > j > i; columns [seq, ld) are untouched.
Status causal_softmax(const float* scores, bf16* probs, int64_t n_mat, int seq, int64_t ld, cudaStream_t stream);

// gate_up: [n_tokens, 2 * inter] (gate in columns [0, inter), up in [inter, 2 inter));
// out[t, i] = bf16( silu(gate) * up ), silu(g) = g / (1 + exp(-g)).
Status silu_mul(const bf16* gate_up, int n_tokens, int inter, bf16* out, cudaStream_t stream);

// x[i] = bf16( float(x[i]) + float(y[i]) ), n elements.
Status residual_add(bf16* x, const bf16* y, int64_t n, cudaStream_t stream);

// nll[r] = logsumexp(logits[r, :]) - logits[r, targets[r]] (fp32 logits [rows, vocab]);
// targets[r] < 0: nll[r] = 0 (not scored). A target >= vocab yields NaN.
Status nll_rows(const float* logits, int rows, int vocab, const int32_t* targets, float* nll,
                cudaStream_t stream);

// Deterministic synthetic weights: p[i] = lo + (hi - lo) * u(seed, i), u a hash of the
// index in [0, 1). Generated on the device so that 70B-sized weights take no host time.
Status fill_uniform(bf16* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
// p[i] = 32 hash bits of (seed, i): synthetic packed INT4 weights (any word is 8 valid nibbles).
Status fill_bits(uint32_t* p, size_t n, uint64_t seed, cudaStream_t stream);

// y[T, N] = x[T, K] * W[N, K]^T via cuBLAS (bf16 in, fp32 accumulation), y in bf16 or fp32.
// ldx / ldy: row strides of x and y in elements. The handle's stream is used.
Status linear(cublasHandle_t handle, const bf16* x, int64_t ldx, const bf16* w, void* y, bool y_fp32, int64_t ldy,
              int T, int N, int K);

// Causal grouped-query attention for prefill (cuBLAS batched GEMMs + fused causal softmax).
struct AttentionShape {
  int batch = 0;
  int seq = 0;
  int n_q_heads = 0;   // this rank's query heads
  int n_kv_heads = 0;  // this rank's KV heads; query head h reads KV head h / (n_q / n_kv)
  int head_dim = 0;
  int64_t qkv_stride = 0;  // row stride of the fused QKV tensor (>= (n_q + 2 n_kv) head_dim)
  int64_t out_stride = 0;  // row stride of the output (>= n_q head_dim)
};
// Workspace: fp32 scores + bf16 probabilities [batch * n_q, seq, ld] (ld = seq rounded up to
// 16 elements) + pointer arrays; layout in lowbit/detail/model_attention_layout.h.
size_t attention_workspace_bytes(const AttentionShape& s);
// out[t, h*hd:(h+1)*hd] = softmax_causal(q_h k_g^T / sqrt(hd)) v_g for every sequence.
Status causal_attention(cublasHandle_t handle, const AttentionShape& s, const bf16* qkv, bf16* out, void* workspace,
                        size_t workspace_bytes, cudaStream_t stream);

}  // namespace lowbit::model::gpu
