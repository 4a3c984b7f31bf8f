// Perplexity windows on the CPU engine and their layout for the GPU runner
// (see lowbit/model/perplexity.h for the protocol).
#include "lowbit/model/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace lowbit::model {

double token_nll(const float* logits, int vocab, int target) {
  double mx = logits[0];
  for (int v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(logits[v]));
  double se = 0;
  for (int v = 0; v < vocab; ++v) se += std::exp(static_cast<double>(logits[v]) - mx);
  return std::log(se) + mx - static_cast<double>(logits[target]);
}

namespace {
Status check_windows(const std::vector<int32_t>& text, int32_t bos, int ctx, int n_windows, int vocab) {
  LOWBIT_CHECK_ARG(ctx >= 1 && n_windows >= 1, "perplexity: ctx=%d n_windows=%d must be >= 1", ctx, n_windows);
  LOWBIT_CHECK_ARG(static_cast<int64_t>(n_windows) * ctx <= static_cast<int64_t>(text.size()),
                   "perplexity: %d windows of %d tokens need %lld tokens, the text has %zu", n_windows, ctx,
                   static_cast<long long>(n_windows) * ctx, text.size());
  LOWBIT_CHECK_ARG(vocab <= 0 || (bos >= 0 && bos < vocab), "perplexity: BOS id %d outside vocab %d", bos, vocab);
  return Status::Ok();
}
}  // namespace

Status cpu_perplexity(CpuLlama* eng, int32_t bos, const std::vector<int32_t>& text, int ctx, int n_windows,
                      PplResult* out, const std::function<void(int, int, double)>& progress) {
  LOWBIT_CHECK_ARG(eng != nullptr && out != nullptr, "cpu_perplexity: null engine or output");
  const int V = eng->config().vocab_size, H = eng->config().hidden;
  LOWBIT_RETURN_IF_ERROR(check_windows(text, bos, ctx, n_windows, V));
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kRows = 64;  // logits computed 64 rows at a time: [64, vocab] fp32 stays small
  std::vector<float> hidden, logits(static_cast<size_t>(std::min(kRows, ctx)) * V);
  std::vector<int32_t> in(ctx);
  PplResult r;
  for (int w = 0; w < n_windows; ++w) {
    const int32_t* tgt = text.data() + static_cast<int64_t>(w) * ctx;
    for (int i = 0; i < ctx; ++i) LOWBIT_CHECK_ARG(tgt[i] >= 0 && tgt[i] < V, "cpu_perplexity: token %d outside vocab", tgt[i]);
    in[0] = bos;
    for (int i = 1; i < ctx; ++i) in[i] = tgt[i - 1];
    eng->reset();
    LOWBIT_RETURN_IF_ERROR(eng->forward(in.data(), ctx, &hidden));
    for (int r0 = 0; r0 < ctx; r0 += kRows) {
      const int rows = std::min(kRows, ctx - r0);
      eng->logits(hidden.data() + static_cast<size_t>(r0) * H, rows, logits.data());
      for (int i = 0; i < rows; ++i) {
        r.nll_sum += token_nll(logits.data() + static_cast<size_t>(i) * V, V, tgt[r0 + i]);
        ++r.n_scored;
      }
    }
    if (progress) progress(w + 1, n_windows, std::exp(r.nll_sum / static_cast<double>(r.n_scored)));
  }
  r.n_chunks = n_windows;
  r.ppl = std::exp(r.nll_sum / static_cast<double>(r.n_scored));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = r;
  return Status::Ok();
}

Status gpu_ppl_chunks(const std::vector<int32_t>& text, int32_t bos, int ctx, int n_windows, std::vector<int>* chunks) {
  LOWBIT_CHECK_ARG(chunks != nullptr, "gpu_ppl_chunks: null output");
  LOWBIT_RETURN_IF_ERROR(check_windows(text, bos, ctx, n_windows, 0));
  chunks->clear();
  chunks->reserve(static_cast<size_t>(n_windows) * (ctx + 1));
  for (int w = 0; w < n_windows; ++w) {
    chunks->push_back(bos);
    const int32_t* t = text.data() + static_cast<int64_t>(w) * ctx;
    chunks->insert(chunks->end(), t, t + ctx);
  }
  return Status::Ok();
}

}  // namespace lowbit::model
