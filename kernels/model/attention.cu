// Causal grouped-query attention for prefill: per (sequence, query head) S = Q K^T / sqrt(d)
// (cuBLAS batched GEMM, fp32 scores), causal softmax (bf16 probabilities), O = P V (cuBLAS
// batched GEMM written straight into the [tokens, heads * d] output). Scores and
// probabilities use rows padded to a multiple of 16 elements so that every pointer and row
// handed to cublasGemmBatchedEx meets cuBLAS's alignment contract for any seq
// (include/lowbit/detail/model_attention_layout.h says why). The GEMMs run over the
// full square (masked probabilities are 0), twice the causal FLOPs; a fused flash-style
// kernel is the planned replacement. When the workspace is smaller than the whole batch
// needs, sequences are processed in chunks (at least one sequence must fit).
#include <algorithm>
#include <cmath>

#include "kernels/model/cublas_check.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/detail/model_attention_layout.h"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {
namespace {

using ::lowbit::model::detail::attn_workspace_layout;
using ::lowbit::model::detail::score_ld;
using ::lowbit::model::detail::score_matrix_elems;

size_t chunk_bytes(const AttentionShape& s, int nb) {
  return attn_workspace_layout(s.seq, int64_t(nb) * s.n_q_heads).total;
}

// Pointer arrays for cublasGemmBatchedEx, built on the device so the whole op stays
// stream-ordered and capturable. Matrix m = b * n_q + h of the chunk; sq = elements of one
// padded score matrix (score_matrix_elems).
__global__ void attention_pointers_kernel(AttentionShape s, int b0, int nb, const bf16* qkv, bf16* out,
                                          float* scores, bf16* probs, int64_t sq, void** ptrs) {
  const int n_mat = nb * s.n_q_heads;
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= n_mat) return;
  const int b = b0 + m / s.n_q_heads, h = m % s.n_q_heads;
  const int g = h / (s.n_q_heads / s.n_kv_heads);
  const int64_t row0 = static_cast<int64_t>(b) * s.seq;
  ptrs[0 * n_mat + m] = (void*)(qkv + row0 * s.qkv_stride + static_cast<int64_t>(s.n_q_heads + g) * s.head_dim);  // K
  ptrs[1 * n_mat + m] = (void*)(qkv + row0 * s.qkv_stride + static_cast<int64_t>(h) * s.head_dim);  // Q
  ptrs[2 * n_mat + m] = scores + m * sq;
  ptrs[3 * n_mat + m] =
      (void*)(qkv + row0 * s.qkv_stride + static_cast<int64_t>(s.n_q_heads + s.n_kv_heads + g) * s.head_dim);  // V
  ptrs[4 * n_mat + m] = probs + m * sq;
  ptrs[5 * n_mat + m] = out + row0 * s.out_stride + static_cast<int64_t>(h) * s.head_dim;
}

}  // namespace

size_t attention_workspace_bytes(const AttentionShape& s) { return chunk_bytes(s, s.batch); }

Status causal_attention(cublasHandle_t handle, const AttentionShape& s, const bf16* qkv, bf16* out, void* workspace,
                        size_t workspace_bytes, cudaStream_t stream) {
  LOWBIT_CHECK_ARG(handle && qkv && out && workspace, "causal_attention: null pointer");
  LOWBIT_CHECK_ARG(s.batch > 0 && s.seq > 0 && s.n_q_heads > 0 && s.n_kv_heads > 0 && s.head_dim > 0,
                   "causal_attention: batch=%d seq=%d n_q=%d n_kv=%d head_dim=%d must be > 0", s.batch, s.seq,
                   s.n_q_heads, s.n_kv_heads, s.head_dim);
  LOWBIT_CHECK_ARG(s.n_q_heads % s.n_kv_heads == 0, "causal_attention: n_q=%d not a multiple of n_kv=%d",
                   s.n_q_heads, s.n_kv_heads);
  LOWBIT_CHECK_ARG(s.qkv_stride >= static_cast<int64_t>(s.n_q_heads + 2 * s.n_kv_heads) * s.head_dim,
                   "causal_attention: qkv_stride=%lld too small", static_cast<long long>(s.qkv_stride));
  LOWBIT_CHECK_ARG(s.out_stride >= static_cast<int64_t>(s.n_q_heads) * s.head_dim,
                   "causal_attention: out_stride=%lld too small", static_cast<long long>(s.out_stride));
  LOWBIT_CHECK_ARG(reinterpret_cast<uintptr_t>(workspace) % ::lowbit::model::detail::kAttnRegionAlign == 0,
                   "causal_attention: workspace not %zu-aligned", ::lowbit::model::detail::kAttnRegionAlign);
  int nb = s.batch;
  while (nb > 1 && chunk_bytes(s, nb) > workspace_bytes) nb = (nb + 1) / 2;
  LOWBIT_CHECK_ARG(chunk_bytes(s, nb) <= workspace_bytes,
                   "causal_attention: workspace %zu bytes < %zu needed for one sequence", workspace_bytes,
                   chunk_bytes(s, 1));
  // cublasSetStream also resets the handle's workspace to cuBLAS's default pool, dropping a
  // workspace the caller set with cublasSetWorkspace (the TP runner's, sized so that graph
  // capture never allocates): only switch when the stream really differs.
  cudaStream_t cur = nullptr;
  LOWBIT_CUBLAS_RETURN(cublasGetStream(handle, &cur));
  if (cur != stream) LOWBIT_CUBLAS_RETURN(cublasSetStream(handle, stream));
  const ::lowbit::model::detail::AttnWorkspaceLayout lay = attn_workspace_layout(s.seq, int64_t(nb) * s.n_q_heads);
  const int ld = static_cast<int>(score_ld(s.seq));
  char* ws = static_cast<char*>(workspace);
  float* scores = reinterpret_cast<float*>(ws + lay.scores);
  bf16* probs = reinterpret_cast<bf16*>(ws + lay.probs);
  void** ptrs = reinterpret_cast<void**>(ws + lay.ptrs);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const float one = 1.0f, zero = 0.0f;
  for (int b0 = 0; b0 < s.batch; b0 += nb) {
    const int cur = std::min(nb, s.batch - b0);
    const int n_mat = cur * s.n_q_heads;
    attention_pointers_kernel<<<(n_mat + 127) / 128, 128, 0, stream>>>(s, b0, cur, qkv, out, scores, probs,
                                                                           score_matrix_elems(s.seq), ptrs);
    LOWBIT_CUDA_RETURN_LAUNCH();
    // scores[m] (row-major [i, j]) = column-major C[j, i] = K_g[j, :] . Q_h[i, :]
    LOWBIT_CUBLAS_RETURN(cublasGemmBatchedEx(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, s.seq, s.seq, s.head_dim, &scale, const_cast<const void**>(ptrs + 0 * n_mat), CUDA_R_16BF,
        static_cast<int>(s.qkv_stride), const_cast<const void**>(ptrs + 1 * n_mat), CUDA_R_16BF, static_cast<int>(s.qkv_stride), &zero,
        ptrs + 2 * n_mat, CUDA_R_32F, ld, n_mat,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    LOWBIT_RETURN_IF_ERROR(causal_softmax(scores, probs, n_mat, s.seq, ld, stream));
    // out rows (row-major [i, d]) = column-major C[d, i] = sum_j V[j, d] P[i, j]
    LOWBIT_CUBLAS_RETURN(cublasGemmBatchedEx(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, s.head_dim, s.seq, s.seq, &one, const_cast<const void**>(ptrs + 3 * n_mat), CUDA_R_16BF,
        static_cast<int>(s.qkv_stride), const_cast<const void**>(ptrs + 4 * n_mat), CUDA_R_16BF, ld, &zero,
        ptrs + 5 * n_mat, CUDA_R_16BF,
        static_cast<int>(s.out_stride), n_mat, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return Status::Ok();
}

}  // namespace lowbit::model::gpu
