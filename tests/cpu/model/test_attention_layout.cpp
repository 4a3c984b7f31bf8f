// The GPU attention workspace layout (include/lowbit/detail/model_attention_layout.h) meets
// cuBLAS's alignment contract for cublasGemmBatchedEx at every sequence length: each score
// (fp32) and probability (bf16) matrix starts on a 16-byte boundary and every row pitch is a
// multiple of 16 bytes. Before the fix the pitch was seq, which broke this for most lengths
// `lowbit generate --device gpu` uses (e.g. 101), and only 13, 37 and 1024 were tested.
#include <gtest/gtest.h>

#include "lowbit/detail/model_attention_layout.h"

namespace lowbit::model {
namespace {

TEST(AttentionLayout, EveryMatrixAndRowIs16ByteAlignedForAnyLength) {
  for (int seq = 1; seq <= 2100; ++seq) {
    const int64_t ld = detail::score_ld(seq);
    ASSERT_GE(ld, seq) << seq;
    ASSERT_LT(ld - seq, detail::kScoreLdElems) << seq;  // padding stays small
    ASSERT_EQ(ld * 2 % 16, 0) << seq;                    // bf16 row pitch
    ASSERT_EQ(ld * 4 % 16, 0) << seq;                    // fp32 row pitch
    for (int64_t n_mat : {1, 2, 9, 27, 72}) {
      const detail::AttnWorkspaceLayout l = detail::attn_workspace_layout(seq, n_mat);
      ASSERT_EQ(l.probs % detail::kAttnRegionAlign, 0u);
      ASSERT_EQ(l.ptrs % detail::kAttnRegionAlign, 0u);
      ASSERT_EQ(l.total % detail::kAttnRegionAlign, 0u);
      const size_t elems = size_t(detail::score_matrix_elems(seq));
      ASSERT_GE(l.probs, elems * n_mat * 4) << seq;  // regions do not overlap
      ASSERT_GE(l.ptrs - l.probs, elems * n_mat * 2) << seq;
      ASSERT_GE(l.total - l.ptrs, 6 * sizeof(void*) * n_mat) << seq;
      for (int64_t m = 0; m < n_mat; ++m) {
        ASSERT_EQ((l.scores + m * elems * 4) % 16, 0u) << "seq " << seq << " scores matrix " << m;
        ASSERT_EQ((l.probs + m * elems * 2) % 16, 0u) << "seq " << seq << " probs matrix " << m;
      }
    }
  }
}

TEST(AttentionLayout, UnpaddedPitchWouldBreakTheContractAt101Positions) {
  // The old layout (pitch = seq) at the defect's shape: matrix 1 of the probabilities started
  // 101 * 101 * 2 = 20402 bytes in, 2 bytes off a 16-byte boundary. The padded one does not.
  EXPECT_NE(size_t(101) * 101 * 2 % 16, 0u);
  EXPECT_EQ(size_t(detail::score_matrix_elems(101)) * 2 % 16, 0u);
  EXPECT_EQ(detail::score_ld(101), 112);
  EXPECT_EQ(detail::score_ld(64), 64);  // aligned lengths keep their pitch
  EXPECT_EQ(detail::score_ld(1024), 1024);
}

}  // namespace
}  // namespace lowbit::model
