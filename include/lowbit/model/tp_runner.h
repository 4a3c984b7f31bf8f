// Tensor-parallel Llama runner on GPUs: one process drives N GPUs, one thread per rank,
// each rank with its stream, cuBLAS handle and a lowbit::allreduce::Communicator
// (Communicator::create_single_process). Megatron split:
// - column-parallel: Q/K/V by heads (KV heads split as evenly as possible, the first ranks
//   take the remainder; each rank takes the query heads of its KV groups, so SmolLM2's
//   9 query / 3 KV heads over TP=2 become 6+2 / 3+1), gate/up by intermediate rows;
// - row-parallel: o_proj and down_proj on the rank's input slice, each followed by
//   communicator->allreduce(in place, [tokens, hidden] bf16, Options{mode, group_size});
// - replicated: embedding, norms, LM head (every rank computes the same logits).
// Activations bf16, accumulation fp32; GEMMs via cuBLAS. See docs/tp-runner.md.
//
// This header compiles without CUDA; without CUDA every entry point returns kNotSupported.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lowbit/allreduce.h"
#include "lowbit/model/llama.h"
#include "lowbit/status.h"

namespace lowbit::model {

// How the row-parallel outputs are reduced. skip = the `none` mode: no all-reduce at all
// (compute-only timing; the results are wrong with TP > 1).
struct TpComm {
  bool skip = false;
  allreduce::Options opts;
};
// "none" or an all-reduce mode name (nccl, oneshot, twoshot, q8q8, q4q8, q4q4, auto).
Status parse_tp_comm(const std::string& s, int group_size, TpComm* out);
std::string tp_comm_name(const TpComm& c);

// The slice of the model that rank `rank` of `tp` holds.
struct TpShard {
  int q_head0 = 0, n_q_heads = 0;
  int kv_head0 = 0, n_kv_heads = 0;
  int inter0 = 0, n_inter = 0;
};
Status tp_shard(const LlamaConfig& cfg, int tp, int rank, TpShard* out);

struct TpRunOptions {
  int batch = 1;
  int seq = 1;
  bool all_logits = false;  // logits for every token (perplexity) instead of each sequence's last
  int layers = -1;          // run only the first `layers` layers (timing subsets); -1: all
};

class TpRunner {
 public:
  ~TpRunner();
  TpRunner(const TpRunner&) = delete;
  TpRunner& operator=(const TpRunner&) = delete;

  // devices: one GPU per rank (rank i = devices[i]); creates streams, cuBLAS handles and the
  // communicators (Config default unless given).
  static Status create(const LlamaConfig& cfg, const std::vector<int>& devices, const allreduce::Config& ar_cfg,
                       std::unique_ptr<TpRunner>* out);

  // fp32 host weights -> bf16 device shards. Shapes are validated against the config.
  Status load_weights(const LlamaWeights& w);
  // Random bf16 weights generated on the GPUs from `seed` (deterministic). share_layers: one
  // set of layer weights serves every layer (same compute, a fraction of the memory: 70B fits).
  Status init_synthetic(uint64_t seed, bool share_layers);

  // Allocates activations and workspaces for batch x seq tokens (call before forward).
  Status prepare(const TpRunOptions& opt);
  // tokens: batch*seq ids (token t = b*seq + s), validated against the vocabulary.
  Status set_tokens(const std::vector<int32_t>& tokens);
  // One prefill forward on every rank; returns when all ranks are done.
  Status forward(const TpComm& comm);
  // Logits of rank 0 after forward: [rows, vocab] fp32, rows = batch*seq (all_logits) or batch.
  Status logits(std::vector<float>* out);
  // Per-token NLL on the GPU (all_logits only): targets[t] (< 0: not scored) -> nll[t].
  Status nll(const std::vector<int32_t>& targets, std::vector<float>* out);
  // The residual stream (after the last layer run, before the final norm) of rank `rank`.
  Status hidden_state(int rank, std::vector<uint16_t>* bf16_bits);

  // Prefill time: the forward captured into one CUDA graph per rank (falls back to eager
  // launches between events if capture fails), warm-up replays, then `reps` replays started
  // together on all ranks; per replay the slowest rank's time; the median in ms.
  Status time_forward(const TpComm& comm, int warmup, int reps, double* median_ms, bool* graphed);
  // The all-reduce alone on the [tokens, hidden] bf16 activation, `calls` per graph replay,
  // same protocol; median microseconds per call.
  Status time_allreduce(const allreduce::Options& opts, int calls, int warmup, int reps, double* median_us);

  const LlamaConfig& config() const;
  int tp() const;
  allreduce::Mode resolve_mode(const allreduce::Options& opts) const;  // for the current shape

  struct Impl;

 private:
  explicit TpRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Perplexity on the GPUs (for `lowbit ppl --device gpu`). tokens are split into
// consecutive non-overlapping chunks of ctx tokens (a shorter tail is dropped); inside each
// chunk the token at position j (first_scored <= j < ctx, j >= 1) is scored with the
// logits of position j-1. ppl = exp(nll_sum / n_scored). Chunks run `batch` at a time.
struct PplResult {
  double nll_sum = 0;
  int64_t n_scored = 0;
  int n_chunks = 0;
  double ppl = 0;
  double seconds = 0;
};
struct GpuPplOptions {
  int ctx = 512;
  int tp = 1;              // GPUs 0..tp-1
  TpComm comm;             // all-reduce mode of the row-parallel outputs
  int first_scored = 1;    // llama.cpp's perplexity scores from ctx/2: pass ctx/2 to match it
  int batch = 8;           // chunks per forward
  int max_chunks = -1;     // -1: all
};
Status gpu_perplexity(const LlamaConfig& cfg, const LlamaWeights& w, const std::vector<int>& tokens,
                      const GpuPplOptions& opt, PplResult* out);
// The brief's short form: gpu_perplexity(cfg, w, tokens, ctx, tp, mode, group, &r).
Status gpu_perplexity(const LlamaConfig& cfg, const LlamaWeights& w, const std::vector<int>& tokens, int ctx, int tp,
                      allreduce::Mode mode, int group_size, PplResult* out);

}  // namespace lowbit::model
