// moe_align_block_size reference: group (token, slot) pairs by expert, pad to block_m.
#include "lowbit/int4/moe_ref.h"

namespace lowbit::int4 {

Status moe_align_ref(const int32_t* topk_ids, int m, int topk, int num_experts, int block_m, MoeAlignment* out,
                     bool skip_foreign_ids) {
  LOWBIT_CHECK_ARG(out != nullptr, "moe_align_ref: out is null");
  LOWBIT_CHECK_ARG(m >= 0 && topk >= 1 && num_experts >= 1, "moe_align_ref: m=%d topk=%d experts=%d", m, topk,
                   num_experts);
  LOWBIT_CHECK_ARG(block_m >= 1, "moe_align_ref: block_m=%d must be >= 1", block_m);
  LOWBIT_CHECK_ARG(m == 0 || topk_ids != nullptr, "moe_align_ref: topk_ids is null");
  const int64_t pairs = static_cast<int64_t>(m) * topk;
  LOWBIT_CHECK_ARG(pairs < INT32_MAX, "moe_align_ref: M*topk=%lld does not fit int32", static_cast<long long>(pairs));
  std::vector<std::vector<int32_t>> per(num_experts);
  for (int64_t i = 0; i < pairs; ++i) {
    int32_t e = topk_ids[i];
    if (skip_foreign_ids && (e < 0 || e >= num_experts)) continue;
    LOWBIT_CHECK_ARG(e >= 0 && e < num_experts, "moe_align_ref: topk_ids[%lld]=%d outside [0, %d)",
                     static_cast<long long>(i), e, num_experts);
    per[e].push_back(static_cast<int32_t>(i));
  }
  MoeAlignment r;
  r.sentinel = static_cast<int32_t>(pairs);
  for (int e = 0; e < num_experts; ++e) {
    if (per[e].empty()) continue;
    size_t padded = (per[e].size() + block_m - 1) / block_m * block_m;
    for (size_t j = 0; j < padded; ++j) r.sorted_token_ids.push_back(j < per[e].size() ? per[e][j] : r.sentinel);
    for (size_t b = 0; b < padded / block_m; ++b) r.expert_ids.push_back(e);
  }
  r.num_tokens_post_pad = static_cast<int32_t>(r.sorted_token_ids.size());
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace lowbit::int4
