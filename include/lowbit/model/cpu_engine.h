// fp32 CPU Llama engine with a KV cache and simulated Megatron tensor parallelism.
//
// Plain mode (tp = 0): everything fp32, residual adds in fp32.
// TP mode (tp = N >= 1): rank r owns a contiguous range of query heads with the KV heads
// they read (column-parallel Q/K/V), a contiguous slice of the MLP intermediate
// (column-parallel gate/up) and the matching input columns of o and down (row-parallel).
// Each rank's partial output of o / down is rounded to bf16 (the GPU runner's activation
// dtype) and the N partials are combined by lowbit::allreduce::reference_allreduce(mode,
// G, bf16) -- the codec and summation order of the GPU all-reduce; the bf16 result is
// added to the fp32 residual.
// Head split (TpPlan): if N <= n_kv, KV heads are split as evenly as possible (first ranks
// get one more) and every query head goes with its KV head (9 q / 3 kv over TP=2: kv 2/1,
// q 6/3). If N > n_kv, query heads are split as evenly as possible (TP=4: 3/2/2/2) and each
// rank holds a replica of every KV head its query heads read (K/V projections of a shared
// KV head are computed redundantly by the ranks that share it). N > n_heads is rejected.
#pragma once

#include <cstdint>
#include <vector>

#include "lowbit/allreduce.h"
#include "lowbit/model/cpu_ops.h"
#include "lowbit/model/llama.h"

namespace lowbit::model {

struct TpRankSlice {
  int q_head0 = 0, n_q = 0;    // global query heads [q_head0, q_head0 + n_q)
  int kv_head0 = 0, n_kv = 0;  // global KV heads held (replicated when TP > n_kv)
  int inter0 = 0, n_inter = 0; // MLP intermediate columns
};
Status make_tp_plan(const LlamaConfig& c, int tp, std::vector<TpRankSlice>* plan);

// Per layer and all-reduce site (0: attention output, 1: MLP down): relative L2 error of
// the quantized all-reduce result vs the exact one on the same partials, per token.
struct SiteErrorStats {
  std::vector<double> sum[2];  // [layer]
  std::vector<double> max[2];
  std::vector<int64_t> count[2];
  void reset(int n_layers);
};

// Sees the input of every block linear as the plain engine (tp = 0) runs it: site 0 the input of
// q / k / v (the attention norm's output), 1 of o (the attention output), 2 of gate / up (the MLP
// norm's output), 3 of down (silu(gate) * up); x is [n, k] row-major. For calibration (GPTQ).
class LinearInputObserver {
 public:
  virtual ~LinearInputObserver() = default;
  virtual void observe(int layer, int site, const float* x, int n, int k) = 0;
};

struct CpuEngineOptions {
  int tp = 0;                                          // 0: plain fp32 forward
  allreduce::Mode mode = allreduce::Mode::kOneShot;    // exact = kOneShot
  int group_size = 128;
  int threads = 2;
  int max_ctx = 1024;
  SiteErrorStats* site_errors = nullptr;  // quantized modes: filled when set
  LinearInputObserver* observer = nullptr; // plain mode (tp = 0) only: refused with tp > 0
};

class CpuLlama {
 public:
  Status init(const LlamaConfig& cfg, const LlamaWeights* w, const CpuEngineOptions& opt);
  void reset() { pos_ = 0; }  // clears the KV cache
  int pos() const { return pos_; }
  const LlamaConfig& config() const { return cfg_; }
  // Runs n tokens at positions pos() .. pos()+n-1 (appending to the KV cache) and writes
  // the final-normed hidden states [n, hidden].
  Status forward(const int32_t* ids, int n, std::vector<float>* hidden);
  // logits[r, :] = hidden[r, :] . output^T (tied: tok_embd), rows x vocab.
  void logits(const float* hidden, int rows, float* out) const;

 private:
  struct RankWeights {
    std::vector<float> wq, wk, wv, wo, w_gate, w_up, w_down;  // sliced copies
    std::vector<int> kv_of_head;                              // local q head -> local kv head
    std::vector<float> k_cache, v_cache;                      // [max_ctx, n_kv*hd]
  };
  Status combine(int layer, int site, std::vector<std::vector<float>>& partial, int n, float* x);
  LlamaConfig cfg_;
  const LlamaWeights* w_ = nullptr;
  CpuEngineOptions opt_;
  std::vector<TpRankSlice> plan_;
  std::vector<std::vector<RankWeights>> rank_;  // [layer][rank]
  cpu::RopeTable rope_;
  int pos_ = 0;
};

}  // namespace lowbit::model
