// Layout of the prefill attention workspace (kernels/model/attention.cu), shared with the
// CPU test that checks it (tests/cpu/model/test_attention_layout.cpp).
//
// Per chunk of nb sequences the workspace holds, each region starting on a 256-byte boundary:
//   scores  fp32 [nb * n_q][seq][ld]   (row i of matrix m at m * seq * ld + i * ld)
//   probs   bf16 [nb * n_q][seq][ld]   (same indexing)
//   ptrs    6 arrays of nb * n_q device pointers for cublasGemmBatchedEx
// with ld = score_ld(seq) = seq rounded up to a multiple of 16 elements. Columns [seq, ld)
// are never written nor read.
//
// Why the padding: cublasGemmBatchedEx cannot look at the matrix pointers (they live in
// device memory), so cuBLAS picks its kernel assuming they are aligned as its documentation
// requires (for bf16 operands: 16-byte aligned whenever k * 2 bytes is a multiple of 16;
// ideally always). With ld = seq, matrix m of the scores started at m * seq^2 * 4 bytes and
// of the probabilities at m * seq^2 * 2 bytes, 4- or 2-byte aligned for odd seq (e.g. the
// 101 positions of `lowbit generate --chat` with the default 64 new tokens), and the row
// pitch seq * 2 bytes was no multiple of 16 unless seq % 8 == 0. The tests only covered
// seq = 13, 37 (small shapes) and 1024 (every address aligned), never the 65..1023 range
// `generate --device gpu` uses, where it printed wrong text: the most likely cause, found by
// reading (no GPU at hand; tests/gpu/model/test_generate_padded.cu and the attention tests
// at seq 64..200 confirm or refute it). With ld % 16 == 0 every matrix start and every row
// is 64-byte (fp32) / 32-byte (bf16) aligned for any seq.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lowbit::model::detail {

constexpr int kScoreLdElems = 16;          // row pitch granule of scores and probabilities
constexpr size_t kAttnRegionAlign = 256;   // start of every workspace region

inline int64_t score_ld(int seq) { return (int64_t(seq) + kScoreLdElems - 1) / kScoreLdElems * kScoreLdElems; }
// Elements of one [seq][ld] matrix.
inline int64_t score_matrix_elems(int seq) { return int64_t(seq) * score_ld(seq); }
inline size_t attn_align_up(size_t v) { return (v + kAttnRegionAlign - 1) / kAttnRegionAlign * kAttnRegionAlign; }

// Byte offsets of the three regions for n_mat = nb * n_q matrices, and the total size.
struct AttnWorkspaceLayout {
  size_t scores = 0, probs = 0, ptrs = 0, total = 0;
};
inline AttnWorkspaceLayout attn_workspace_layout(int seq, int64_t n_mat) {
  AttnWorkspaceLayout l;
  const size_t elems = size_t(score_matrix_elems(seq)) * size_t(n_mat);
  l.scores = 0;
  l.probs = attn_align_up(elems * 4);
  l.ptrs = l.probs + attn_align_up(elems * 2);
  l.total = l.ptrs + attn_align_up(6 * sizeof(void*) * size_t(n_mat));
  return l;
}

}  // namespace lowbit::model::detail
