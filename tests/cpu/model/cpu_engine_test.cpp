// CPU engine (reference/model): fp32 forward vs an independent fp64 forward, simulated TP
// (exact and quantized all-reduce) vs TP=1, the uneven head split, KV-cache decode vs the
// full window, and the perplexity protocol against a hand-computed NLL. Tiny random models
// built here (tests/cpu/model/tiny_llama.h); one test on the real SmolLM2 file when present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>
#include <vector>

#include "lowbit/model/cpu_engine.h"
#include "lowbit/model/gguf.h"
#include "lowbit/model/perplexity.h"
#include "lowbit/model/tokenizer.h"
#include "lowbit/model/tp_runner.h"
#include "tests/cpu/model/model_test_util.h"
#include "tests/cpu/model/tiny_llama.h"

namespace lowbit::model {
namespace {

using testutil::rel_max_err;

// Runs the whole sequence in one forward and returns the final-normed hidden states.
std::vector<float> run(const LlamaConfig& c, const LlamaWeights& w, const std::vector<int32_t>& ids, int tp,
                       allreduce::Mode mode = allreduce::Mode::kOneShot, int group = 32, SiteErrorStats* sites = nullptr,
                       int threads = 2) {
  CpuEngineOptions o;
  o.tp = tp;
  o.mode = mode;
  o.group_size = group;
  o.threads = threads;
  o.max_ctx = int(ids.size());
  o.site_errors = sites;
  CpuLlama eng;
  Status st = eng.init(c, &w, o);
  EXPECT_TRUE(st.ok()) << st.to_string();
  std::vector<float> h(7, -1.0f);  // poisoned (wrong size and values) before the run
  st = eng.forward(ids.data(), int(ids.size()), &h);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return h;
}

class TinyEngine : public ::testing::Test {
 protected:
  LlamaConfig cfg = testutil::tiny_config();
  LlamaWeights w = testutil::tiny_weights(cfg, 1234);
  std::vector<int32_t> ids = testutil::tiny_tokens(cfg, 37, 99);  // 37: not a multiple of the 3-row tile
};

TEST_F(TinyEngine, PlainForwardMatchesFp64) {
  const std::vector<double> ref = testutil::fp64_forward(cfg, w, ids);
  for (int threads : {1, 2}) {
    std::vector<float> h = run(cfg, w, ids, 0, allreduce::Mode::kOneShot, 32, nullptr, threads);
    EXPECT_LT(rel_max_err(h, ref), 2e-5) << "threads " << threads;  // fp32 accumulation only
  }
}

TEST_F(TinyEngine, Tp1ExactCloseToPlain) {
  // TP=1 rounds the o/down outputs to bf16 (the GPU activation dtype) before the residual
  // add; plain keeps fp32. The difference is bf16 rounding (2^-9 relative) per site.
  std::vector<float> plain = run(cfg, w, ids, 0), tp1 = run(cfg, w, ids, 1);
  const double e = rel_max_err(tp1, plain);
  std::printf("  tp1 exact vs plain: rel max err %.2e\n", e);
  EXPECT_GT(e, 0.0);  // the bf16 rounding really happens
  EXPECT_LT(e, 1e-2);
}

TEST_F(TinyEngine, TpExactMatchesTp1WithinBf16Partials) {
  const std::vector<double> ref = testutil::fp64_forward(cfg, w, ids);
  std::vector<float> tp1 = run(cfg, w, ids, 1);
  for (int tp : {2, 3, 4, 9}) {
    std::vector<float> h = run(cfg, w, ids, tp);
    std::printf("  tp %d exact: rel max err vs tp1 %.2e, vs fp64 %.2e\n", tp, rel_max_err(h, tp1), rel_max_err(h, ref));
    // N bf16-rounded partials summed in fp32 and rounded once vs one rounding of the full
    // sum: a few bf16 ulps per site. A wrong head/KV/intermediate split is O(1).
    EXPECT_LT(rel_max_err(h, tp1), 2e-2) << "tp " << tp;
    EXPECT_LT(rel_max_err(h, ref), 2e-2) << "tp " << tp;
  }
}

TEST(TpPlan, UnevenHeadSplits) {
  const LlamaConfig c = testutil::tiny_config();  // 9 q / 3 kv heads, intermediate 40
  std::vector<TpRankSlice> p;
  ASSERT_TRUE(make_tp_plan(c, 2, &p).ok());
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(std::make_tuple(p[0].q_head0, p[0].n_q, p[0].kv_head0, p[0].n_kv), std::make_tuple(0, 6, 0, 2));
  EXPECT_EQ(std::make_tuple(p[1].q_head0, p[1].n_q, p[1].kv_head0, p[1].n_kv), std::make_tuple(6, 3, 2, 1));
  EXPECT_EQ(std::make_tuple(p[0].inter0, p[0].n_inter, p[1].inter0, p[1].n_inter), std::make_tuple(0, 20, 20, 20));
  ASSERT_TRUE(make_tp_plan(c, 3, &p).ok());
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(std::make_tuple(p[r].q_head0, p[r].n_q, p[r].kv_head0, p[r].n_kv), std::make_tuple(3 * r, 3, r, 1));
    EXPECT_EQ(p[r].n_inter, r == 0 ? 14 : 13);
  }
  // TP=4 > 3 KV heads: query heads 3/2/2/2; each rank replicates the KV heads it reads
  // (rank 2 holds q heads 5, 6 -> KV heads 1 and 2).
  ASSERT_TRUE(make_tp_plan(c, 4, &p).ok());
  const std::vector<std::tuple<int, int, int, int>> want = {{0, 3, 0, 1}, {3, 2, 1, 1}, {5, 2, 1, 2}, {7, 2, 2, 1}};
  int kv_held = 0;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(std::make_tuple(p[r].q_head0, p[r].n_q, p[r].kv_head0, p[r].n_kv), want[r]) << "rank " << r;
    kv_held += p[r].n_kv;
  }
  EXPECT_EQ(kv_held, 5);  // 3 KV heads, 2 of them held twice
  EXPECT_FALSE(make_tp_plan(c, 0, &p).ok());
  EXPECT_FALSE(make_tp_plan(c, 10, &p).ok());  // more ranks than query heads
}

TEST(TpPlan, AgreesWithGpuRunnerShards) {
  // Where the GPU runner supports the split (tp <= n_kv) both must cut the model the same way.
  for (auto [nq, nkv, inter] : std::vector<std::tuple<int, int, int>>{{9, 3, 1536}, {32, 8, 14336}, {12, 4, 101}}) {
    LlamaConfig c = testutil::tiny_config();
    c.n_heads = nq, c.n_kv_heads = nkv, c.intermediate = inter;
    for (int tp = 1; tp <= nkv && tp <= 4; ++tp) {
      std::vector<TpRankSlice> p;
      ASSERT_TRUE(make_tp_plan(c, tp, &p).ok());
      for (int r = 0; r < tp; ++r) {
        TpShard s;
        ASSERT_TRUE(tp_shard(c, tp, r, &s).ok());
        EXPECT_EQ(std::make_tuple(p[r].q_head0, p[r].n_q, p[r].kv_head0, p[r].n_kv, p[r].inter0, p[r].n_inter),
                  std::make_tuple(s.q_head0, s.n_q_heads, s.kv_head0, s.n_kv_heads, s.inter0, s.n_inter))
            << nq << "/" << nkv << " tp " << tp << " rank " << r;
      }
    }
  }
}

TEST_F(TinyEngine, QuantizedModesChangeResultsWithinBounds) {
  const std::vector<float> exact = run(cfg, w, ids, 2);
  double err[3] = {0, 0, 0}, site[3] = {0, 0, 0};
  const allreduce::Mode modes[3] = {allreduce::Mode::kQ8Q8, allreduce::Mode::kQ4Q8, allreduce::Mode::kQ4Q4};
  for (int i = 0; i < 3; ++i) {
    SiteErrorStats st;
    std::vector<float> h = run(cfg, w, ids, 2, modes[i], 32, &st);
    err[i] = rel_max_err(h, exact);
    double s = 0;
    int64_t n = 0;
    for (int k = 0; k < 2; ++k)
      for (int l = 0; l < cfg.n_layers; ++l) {
        EXPECT_EQ(st.count[k][l], int64_t(ids.size()));  // one entry per token per site
        EXPECT_LE(st.sum[k][l], st.max[k][l] * st.count[k][l] + 1e-12);
        s += st.sum[k][l], n += st.count[k][l];
      }
    site[i] = s / double(n);
  }
  std::printf("  hidden rel max err vs exact: q8q8 %.2e q4q8 %.2e q4q4 %.2e; mean site rel L2: %.2e %.2e %.2e\n", err[0],
              err[1], err[2], site[0], site[1], site[2]);
  // INT8 (~2^-8 of the group range): small but nonzero; INT4 step 1 (~2^-4): larger.
  EXPECT_GT(err[0], 0.0);
  EXPECT_LT(err[0], 0.05);
  EXPECT_LT(err[1], 0.5);
  EXPECT_LT(err[2], 0.5);
  EXPECT_GT(site[0], 0.0);
  EXPECT_LT(site[0], 0.02);
  EXPECT_GT(site[1], site[0]);
  EXPECT_GT(site[2], site[1] * 0.9);  // q4q4 re-quantizes the sum to INT4 too
  EXPECT_LT(site[2], 0.3);
  // Exact modes record no site errors.
  SiteErrorStats none;
  run(cfg, w, ids, 2, allreduce::Mode::kOneShot, 32, &none);
  for (int k = 0; k < 2; ++k)
    for (int l = 0; l < cfg.n_layers; ++l) EXPECT_EQ(none.count[k][l], 0);
}

TEST_F(TinyEngine, KvCacheDecodeEqualsFullWindow) {
  // Per-token results do not depend on how the tokens are batched (every dot product is
  // computed the same way), so decode must equal the full forward bit for bit.
  for (int tp : {0, 2, 4}) {
    const std::vector<float> full = run(cfg, w, ids, tp);
    CpuEngineOptions o;
    o.tp = tp;
    o.max_ctx = int(ids.size());
    CpuLlama eng;
    ASSERT_TRUE(eng.init(cfg, &w, o).ok());
    std::vector<float> got, h;
    const int steps[] = {5, 1, 1, 7, 2};  // prefill 5, single tokens, then chunks, rest one by one
    int p = 0;
    for (int i = 0; p < int(ids.size()); ++i) {
      const int n = i < 5 ? std::min(steps[i], int(ids.size()) - p) : 1;
      ASSERT_TRUE(eng.forward(ids.data() + p, n, &h).ok());
      ASSERT_EQ(h.size(), size_t(n) * cfg.hidden);
      got.insert(got.end(), h.begin(), h.end());
      p += n;
      EXPECT_EQ(eng.pos(), p);
    }
    ASSERT_EQ(got.size(), full.size());
    size_t diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff += got[i] != full[i];
    EXPECT_EQ(diff, 0u) << "tp " << tp;
    // The cache is full: one more token is rejected; reset() starts over.
    EXPECT_FALSE(eng.forward(ids.data(), 1, &h).ok());
    eng.reset();
    ASSERT_TRUE(eng.forward(ids.data(), 3, &h).ok());
    for (int i = 0; i < 3 * cfg.hidden; ++i) ASSERT_EQ(h[i], full[i]);
  }
}

TEST(CpuEngine, RejectsBadOptionsAndTokens) {
  const LlamaConfig c = testutil::tiny_config(1);
  const LlamaWeights w = testutil::tiny_weights(c, 5);
  CpuLlama eng;
  CpuEngineOptions o;
  o.tp = 2;
  o.mode = allreduce::Mode::kAuto;
  EXPECT_FALSE(eng.init(c, &w, o).ok());
  o.mode = allreduce::Mode::kQ8Q8;
  o.group_size = 48;
  EXPECT_FALSE(eng.init(c, &w, o).ok());
  o.group_size = 64;
  EXPECT_FALSE(eng.init(c, nullptr, o).ok());
  ASSERT_TRUE(eng.init(c, &w, o).ok());
  std::vector<float> h;
  const int32_t bad[2] = {1, c.vocab_size};
  EXPECT_FALSE(eng.forward(bad, 2, &h).ok());
  LlamaConfig more = c;
  more.n_layers = 2;
  EXPECT_FALSE(eng.init(more, &w, o).ok());  // 1 layer of weights, config says 2
}

// A 0-layer model whose logits are small integers: embedding rows are +-1 patterns (RMS
// exactly 1, eps 0, so the final norm is the identity) and the output rows are integers.
// NLL of each prediction computed here from the definition.
TEST(Perplexity, MatchesHandComputedNll) {
  LlamaConfig c;
  c.vocab_size = 5, c.hidden = 4, c.intermediate = 4, c.n_layers = 0, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 2;
  c.rms_eps = 0.0f;
  LlamaWeights w;
  const float emb[5][4] = {{1, 1, 1, 1}, {1, -1, 1, -1}, {-1, -1, 1, 1}, {1, 1, -1, -1}, {-1, 1, 1, -1}};
  const float out[5][4] = {{1, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, -1, 1}, {1, 1, 1, 1}, {0, -2, 1, 0}};
  for (auto& r : emb) w.tok_embd.insert(w.tok_embd.end(), r, r + 4);
  for (auto& r : out) w.output.insert(w.output.end(), r, r + 4);
  w.output_norm.assign(4, 1.0f);
  auto logit = [&](int tok, int v) {
    double s = 0;
    for (int i = 0; i < 4; ++i) s += double(emb[tok][i]) * out[v][i];
    return s;
  };
  auto nll = [&](int prev, int target) {
    double se = 0;
    for (int v = 0; v < 5; ++v) se += std::exp(logit(prev, v));
    return std::log(se) - logit(prev, target);
  };
  const int32_t bos = 0;
  const std::vector<int32_t> text = {3, 1, 4, 1, 2, 2, 4};  // ctx 3: two windows, the 7th token dropped
  // Window 0 = [BOS, 3, 1] predicts 3, 1, 4; window 1 = [BOS, 1, 2] predicts 1, 2, 2.
  const std::vector<std::pair<int, int>> pairs = {{0, 3}, {3, 1}, {1, 4}, {0, 1}, {1, 2}, {2, 2}};
  double want = 0;
  for (auto [p, t] : pairs) want += nll(p, t);
  want /= double(pairs.size());
  for (int tp : {0, 1}) {
    CpuEngineOptions o;
    o.tp = tp;
    o.max_ctx = 3;
    CpuLlama eng;
    ASSERT_TRUE(eng.init(c, &w, o).ok());
    PplResult r;
    int calls = 0;
    ASSERT_TRUE(cpu_perplexity(&eng, bos, text, 3, 2, &r, [&](int done, int total, double) {
                  EXPECT_EQ(done, ++calls);
                  EXPECT_EQ(total, 2);
                }).ok());
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(r.n_scored, 6);
    EXPECT_EQ(r.n_chunks, 2);
    EXPECT_NEAR(r.nll_sum / 6.0, want, 1e-12);
    EXPECT_NEAR(r.ppl, std::exp(want), 1e-10);
  }
  // Too few tokens for the windows asked for.
  CpuLlama eng;
  CpuEngineOptions o;
  o.max_ctx = 3;
  ASSERT_TRUE(eng.init(c, &w, o).ok());
  PplResult r;
  EXPECT_FALSE(cpu_perplexity(&eng, bos, text, 3, 3, &r).ok());
}

TEST_F(TinyEngine, PerplexityEqualsPerWindowLogSoftmax) {
  // ctx 70 > the 64 logit rows computed at a time: the row blocking is covered.
  const int ctx = 70, nw = 2;
  const std::vector<int32_t> text = testutil::tiny_tokens(cfg, ctx * nw + 11, 7);
  CpuEngineOptions o;
  o.tp = 2;
  o.max_ctx = ctx;
  CpuLlama eng;
  ASSERT_TRUE(eng.init(cfg, &w, o).ok());
  PplResult r;
  ASSERT_TRUE(cpu_perplexity(&eng, 1, text, ctx, nw, &r).ok());
  double want = 0;
  for (int win = 0; win < nw; ++win) {
    std::vector<int32_t> in = {1};
    in.insert(in.end(), text.begin() + win * ctx, text.begin() + win * ctx + ctx - 1);
    std::vector<float> h, lg(size_t(ctx) * cfg.vocab_size);
    eng.reset();
    ASSERT_TRUE(eng.forward(in.data(), ctx, &h).ok());
    eng.logits(h.data(), ctx, lg.data());
    for (int i = 0; i < ctx; ++i) {
      long double se = 0;
      for (int v = 0; v < cfg.vocab_size; ++v) se += std::exp((long double)lg[size_t(i) * cfg.vocab_size + v]);
      want += double(std::log(se) - lg[size_t(i) * cfg.vocab_size + text[win * ctx + i]]);
    }
  }
  EXPECT_EQ(r.n_scored, ctx * nw);
  EXPECT_NEAR(r.nll_sum, want, 1e-9 * std::abs(want));
}

TEST(Perplexity, GpuChunksScoreTheSamePredictions) {
  // gpu_perplexity (chunks of ctx+1, first_scored 0) scores (chunk[j-1] -> chunk[j]) for
  // j >= 1; the CPU windows score (BOS or t_{i-1} -> t_i). The pair lists must be equal.
  const std::vector<int32_t> text = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const int ctx = 4, nw = 2, bos = 1;
  std::vector<int> chunks;
  ASSERT_TRUE(gpu_ppl_chunks(text, bos, ctx, nw, &chunks).ok());
  ASSERT_EQ(chunks.size(), size_t(nw * (ctx + 1)));
  std::vector<std::pair<int, int>> gpu, cpu;
  for (int c = 0; c < nw; ++c)
    for (int j = 1; j < ctx + 1; ++j) gpu.push_back({chunks[c * (ctx + 1) + j - 1], chunks[c * (ctx + 1) + j]});
  for (int win = 0; win < nw; ++win)
    for (int i = 0; i < ctx; ++i) cpu.push_back({i == 0 ? bos : text[win * ctx + i - 1], text[win * ctx + i]});
  EXPECT_EQ(gpu, cpu);
  EXPECT_FALSE(gpu_ppl_chunks(text, bos, ctx, 3, &chunks).ok());
}

TEST(TokenNll, StableForLargeLogits) {
  const float lg[3] = {1000.0f, 1000.0f, 990.0f};
  EXPECT_NEAR(token_nll(lg, 3, 0), std::log(2.0 + std::exp(-10.0)), 1e-12);
  EXPECT_NEAR(token_nll(lg, 3, 2), 10.0 + std::log(2.0 + std::exp(-10.0)), 1e-12);
}

// Real SmolLM2 (skipped when the file is absent): TP=2 and TP=4 exact agree with plain fp32
// on a short prompt to bf16-partial precision, and greedy decoding completes a fact.
TEST(SmolLm2, TpExactAgreesAndPredictsParis) {
  const std::string path = testutil::model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model file absent: " << path;
  gguf::File f;
  ASSERT_TRUE(gguf::File::open(path, &f).ok());
  LlamaConfig c;
  LlamaWeights w;
  ASSERT_TRUE(load_llama(f, &c, &w).ok());
  Tokenizer tok;
  ASSERT_TRUE(Tokenizer::from_gguf(f, &tok).ok());
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok.encode("The capital of France is", false, false, &ids).ok());
  std::vector<float> plain = run(c, w, ids, 0), tp2 = run(c, w, ids, 2), tp4 = run(c, w, ids, 4);
  EXPECT_LT(rel_max_err(tp2, plain), 5e-2);
  EXPECT_LT(rel_max_err(tp4, plain), 5e-2);
  CpuEngineOptions o;
  o.max_ctx = int(ids.size());
  CpuLlama eng;
  ASSERT_TRUE(eng.init(c, &w, o).ok());
  std::vector<float> lg(c.vocab_size);
  for (const auto* h : {&plain, &tp2}) {
    eng.logits(h->data() + h->size() - c.hidden, 1, lg.data());
    int best = 0;
    for (int v = 1; v < c.vocab_size; ++v)
      if (lg[v] > lg[best]) best = v;
    EXPECT_EQ(tok.piece(best), " Paris");
  }
}

}  // namespace
}  // namespace lowbit::model
