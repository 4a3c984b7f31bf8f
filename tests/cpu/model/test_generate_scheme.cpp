// The scheme `lowbit generate --device gpu` relies on, checked on the CPU engine beyond 64
// positions: greedy decoding by one fresh prefill per new token of a fixed-length sequence
// padded with its last token, reading the last real position, gives bit for bit the hidden
// states of KV-cache decoding (causal attention: the padding is never attended to, and
// per-token results do not depend on how tokens are batched). The GPU runs the same loop
// (tests/gpu/model/test_generate_padded.cu checks it against fp64 on a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "lowbit/model/cpu_engine.h"
#include "tests/cpu/model/tiny_llama.h"

namespace lowbit::model {
namespace {

TEST(GenerateScheme, PaddedPrefillEqualsKvCacheDecodeBeyond64Positions) {
  const LlamaConfig cfg = testutil::tiny_config();
  const LlamaWeights w = testutil::tiny_weights(cfg, 99);
  const int prompt = 37, new_tokens = 64, seq = prompt + new_tokens;  // 101, generate --chat's default
  std::vector<int32_t> ids = testutil::tiny_tokens(cfg, prompt, 5);
  CpuEngineOptions o;
  o.tp = 0;
  o.max_ctx = seq;
  CpuLlama cached, fresh;
  ASSERT_TRUE(cached.init(cfg, &w, o).ok());
  ASSERT_TRUE(fresh.init(cfg, &w, o).ok());
  std::vector<float> hc, hp, logits(cfg.vocab_size);
  ASSERT_TRUE(cached.forward(ids.data(), prompt, &hc).ok());
  int diff = 0;
  for (int step = 0; step < new_tokens; ++step) {
    const size_t n = ids.size();
    std::vector<int32_t> padded(ids);
    padded.resize(seq, ids.back());
    fresh.reset();
    ASSERT_TRUE(fresh.forward(padded.data(), seq, &hp).ok());
    const float* last_cached = hc.data() + hc.size() - cfg.hidden;
    const float* last_padded = hp.data() + (n - 1) * cfg.hidden;
    for (int i = 0; i < cfg.hidden; ++i) diff += last_cached[i] != last_padded[i];
    cached.logits(last_cached, 1, logits.data());
    const int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ids.push_back(best);
    if (step + 1 < new_tokens) {
      ASSERT_TRUE(cached.forward(&best, 1, &hc).ok());
    }
  }
  EXPECT_EQ(diff, 0) << "values differing between padded prefill and KV-cache decode";
  // The sequence really is longer than 64 positions and used the whole window.
  EXPECT_EQ(int(ids.size()), seq);
}

}  // namespace
}  // namespace lowbit::model
