// Perplexity protocol of `lowbit ppl`, shared by the CPU engine and the GPU runner.
//
// The text is tokenized without BOS and cut into consecutive, non-overlapping blocks of
// ctx tokens (a shorter tail is dropped). Window w feeds [BOS, t_{w ctx} .. t_{w ctx + ctx-2}]
// and predicts t_{w ctx} .. t_{w ctx + ctx-1}: every token of the scored prefix is predicted
// exactly once, the first token of each block from BOS alone. ppl = exp(mean NLL), the NLL
// of each prediction taken from a log-softmax in double.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lowbit/model/cpu_engine.h"
#include "lowbit/model/tp_runner.h"  // PplResult (compiles without CUDA)

namespace lowbit::model {

// -log softmax(logits)[target] = log(sum_v exp(l_v - max)) + max - l_target, in double.
double token_nll(const float* logits, int vocab, int target);

// Scores n_windows windows of ctx tokens of `text` with the CPU engine (eng->reset() per
// window; eng's max_ctx must be >= ctx). out->n_chunks = n_windows, n_scored = n_windows * ctx.
// progress (optional) is called after every window with (windows done, total, running ppl).
Status cpu_perplexity(CpuLlama* eng, int32_t bos, const std::vector<int32_t>& text, int ctx, int n_windows,
                      PplResult* out, const std::function<void(int, int, double)>& progress = {});

// The same windows laid out for gpu_perplexity(): chunk w = [BOS, t_{w ctx} .. t_{w ctx + ctx-1}]
// (ctx + 1 tokens). gpu_perplexity with GpuPplOptions::ctx = ctx + 1 and first_scored = 0
// scores position j >= 1 of each chunk with the logits of position j - 1: exactly the ctx
// predictions per window of cpu_perplexity (the chunk's last token is only a target).
Status gpu_ppl_chunks(const std::vector<int32_t>& text, int32_t bos, int ctx, int n_windows, std::vector<int>* chunks);

}  // namespace lowbit::model
