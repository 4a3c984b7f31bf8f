// CPU-side pieces of the TP runner (no CUDA needed): the Megatron split and the mode names.
#include <string>

#include "lowbit/model/tp_runner.h"

namespace lowbit::model {

Status parse_tp_comm(const std::string& s, int group_size, TpComm* out) {
  LOWBIT_CHECK_ARG(out, "parse_tp_comm: null output");
  TpComm c;
  c.opts.group_size = group_size;
  if (s == "none") {
    c.skip = true;
    c.opts.mode = allreduce::Mode::kNccl;
  } else {
    LOWBIT_RETURN_IF_ERROR(allreduce::parse_mode(s, &c.opts.mode));
    // auto may pick any mode the caller allows; the TTFT bench and ppl allow int4 loss
    // only when asked, so auto defaults to exact here.
  }
  *out = c;
  return Status::Ok();
}

std::string tp_comm_name(const TpComm& c) { return c.skip ? "none" : allreduce::mode_name(c.opts.mode); }

Status tp_shard(const LlamaConfig& c, int tp, int rank, TpShard* out) {
  LOWBIT_CHECK_ARG(out, "tp_shard: null output");
  LOWBIT_CHECK_ARG(tp >= 1 && rank >= 0 && rank < tp, "tp_shard: rank %d of tp %d", rank, tp);
  LOWBIT_CHECK_ARG(c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0,
                   "tp_shard: n_heads=%d not a positive multiple of n_kv_heads=%d", c.n_heads, c.n_kv_heads);
  if (c.n_kv_heads < tp)
    return make_status(StatusCode::kNotSupported,
                       "tp_shard: %d KV heads over tp=%d would need KV-head replication (not implemented)",
                       c.n_kv_heads, tp);
  const int inter = c.n_experts > 0 ? c.expert_intermediate : c.intermediate;
  LOWBIT_CHECK_ARG(inter >= tp, "tp_shard: intermediate=%d smaller than tp=%d", inter, tp);
  const int group = c.n_heads / c.n_kv_heads;
  auto split = [&](int total, int r, int* first, int* count) {
    const int base = total / tp, rem = total % tp;
    *count = base + (r < rem ? 1 : 0);
    *first = r * base + (r < rem ? r : rem);
  };
  TpShard s;
  split(c.n_kv_heads, rank, &s.kv_head0, &s.n_kv_heads);
  s.q_head0 = s.kv_head0 * group;
  s.n_q_heads = s.n_kv_heads * group;
  split(inter, rank, &s.inter0, &s.n_inter);
  *out = s;
  return Status::Ok();
}

}  // namespace lowbit::model
