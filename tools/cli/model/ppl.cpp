// lowbit ppl: perplexity of a GGUF Llama on WikiText-2 with the CPU engine, optionally
// under simulated tensor parallelism with a quantized all-reduce (see docs/model.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tools/cli/args.h"
#include "tools/cli/command.h"
#include "tools/cli/model/model_common.h"

namespace lowbit::cli::model_cmd {
namespace {

constexpr int kDefaultMaxWindows = 8;  // ~8k tokens: a few minutes on 2 cores

struct PplResult {
  std::string mode;
  int group = 0;
  double ppl = 0, nll = 0;
  int64_t tokens = 0;
  double seconds = 0;
  model::SiteErrorStats sites;
};

// Scores windows [BOS, t_0 .. t_{ctx-2}] -> targets t_0 .. t_{ctx-1} over consecutive,
// non-overlapping blocks of ctx text tokens: every text token of the prefix scored once.
Status run_ppl(const LoadedModel& m, const std::vector<int32_t>& toks, int ctx, int n_windows, int tp,
               allreduce::Mode mode, int group, int threads, bool site_errors, PplResult* res) {
  model::CpuEngineOptions o;
  o.tp = tp;
  o.mode = mode;
  o.group_size = group;
  o.threads = threads;
  o.max_ctx = ctx;
  o.site_errors = site_errors ? &res->sites : nullptr;
  model::CpuLlama eng;
  LOWBIT_RETURN_IF_ERROR(eng.init(m.cfg, &m.w, o));
  res->mode = display_mode(mode);
  res->group = allreduce::mode_is_quantized(mode) ? group : 0;
  const int V = m.cfg.vocab_size;
  constexpr int kRows = 64;
  std::vector<float> hidden, logits(static_cast<size_t>(kRows) * V);
  std::vector<int32_t> in(ctx);
  double nll = 0;
  int64_t count = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int w = 0; w < n_windows; ++w) {
    const int32_t* tgt = toks.data() + static_cast<int64_t>(w) * ctx;
    in[0] = m.tok.bos_id();
    for (int i = 1; i < ctx; ++i) in[i] = tgt[i - 1];
    eng.reset();
    LOWBIT_RETURN_IF_ERROR(eng.forward(in.data(), ctx, &hidden));
    for (int r0 = 0; r0 < ctx; r0 += kRows) {
      int rows = std::min(kRows, ctx - r0);
      eng.logits(hidden.data() + static_cast<size_t>(r0) * m.cfg.hidden, rows, logits.data());
      for (int r = 0; r < rows; ++r) {
        const float* lg = logits.data() + static_cast<size_t>(r) * V;
        double mx = lg[0];
        for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(lg[v]));
        double se = 0;
        for (int v = 0; v < V; ++v) se += std::exp(static_cast<double>(lg[v]) - mx);
        nll += std::log(se) + mx - lg[tgt[r0 + r]];
        ++count;
      }
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "\r  [%s%s] window %d/%d  ppl %.4f  %.0f tok/s   ", res->mode.c_str(),
                 res->group ? (" G" + std::to_string(res->group)).c_str() : "", w + 1, n_windows, std::exp(nll / count),
                 count / sec);
  }
  std::fprintf(stderr, "\n");
  res->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res->tokens = count;
  res->nll = nll / count;
  res->ppl = std::exp(res->nll);
  return Status::Ok();
}

nlohmann::json sites_json(const model::SiteErrorStats& s) {
  nlohmann::json j;
  const char* names[2] = {"attn_out", "mlp_down"};
  for (int site = 0; site < 2; ++site) {
    std::vector<double> mean;
    for (size_t l = 0; l < s.sum[site].size(); ++l)
      mean.push_back(s.count[site][l] ? s.sum[site][l] / s.count[site][l] : 0.0);
    j[names[site]] = {{"mean_rel_l2", mean}, {"max_rel_l2", s.max[site]}};
  }
  return j;
}

double site_mean(const model::SiteErrorStats& s, int site) {
  double a = 0;
  int64_t c = 0;
  for (size_t l = 0; l < s.sum[site].size(); ++l) {
    a += s.sum[site][l];
    c += s.count[site][l];
  }
  return c ? a / c : 0.0;
}

int cmd_ppl(const std::vector<std::string>& argv) {
  Args a(argv, {"model", "text", "ctx", "tp", "mode", "group", "max-windows", "all-modes", "json", "site-errors", "threads"},
         {"all-modes", "site-errors"});
  if (!a.ok()) {
    std::fprintf(stderr, "lowbit ppl: %s\n", a.error().c_str());
    return 2;
  }
  std::string model_path = a.get("model", default_model()), text_path = a.get("text", default_text());
  int ctx = static_cast<int>(a.get_int("ctx", 1024)), tp = static_cast<int>(a.get_int("tp", 2));
  int group = static_cast<int>(a.get_int("group", 128)), threads = static_cast<int>(a.get_int("threads", 2));
  int64_t max_windows = a.get_int("max-windows", kDefaultMaxWindows);
  bool all = a.has("all-modes"), sites = a.has("site-errors");
  if (!a.ok() || ctx < 2 || tp < 0 || threads < 1 || max_windows < 0) {
    std::fprintf(stderr, "lowbit ppl: bad option (%s)\n", a.error().c_str());
    return 2;
  }
  allreduce::Mode mode;
  Status st = parse_model_mode(a.get("mode", "exact"), &mode);
  if (!st.ok()) {
    std::fprintf(stderr, "lowbit ppl: %s\n", st.to_string().c_str());
    return 2;
  }
  LoadedModel m;
  auto t0 = std::chrono::steady_clock::now();
  st = load_model(model_path, &m);
  std::string text;
  if (st.ok()) st = read_text(text_path, &text);
  std::vector<int32_t> toks;
  if (st.ok()) st = m.tok.encode(text, false, false, &toks);
  if (!st.ok()) {
    std::fprintf(stderr, "lowbit ppl: %s\n", st.to_string().c_str());
    return 1;
  }
  if (ctx > m.cfg.context_length && m.cfg.context_length > 0) {
    std::fprintf(stderr, "lowbit ppl: --ctx %d exceeds the model's context %d\n", ctx, m.cfg.context_length);
    return 2;
  }
  int total_windows = static_cast<int>(toks.size() / ctx);
  int n_windows = max_windows == 0 ? total_windows : static_cast<int>(std::min<int64_t>(max_windows, total_windows));
  std::printf("model %s (%s): %d layers, hidden %d, heads %d/%d kv, vocab %d; loaded+tokenized in %.1f s\n", model_path.c_str(),
              m.cfg.name.c_str(), m.cfg.n_layers, m.cfg.hidden, m.cfg.n_heads, m.cfg.n_kv_heads, m.cfg.vocab_size,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::printf("text %s: %zu tokens = %d windows of %d; scoring %d windows (%d tokens)%s\n", text_path.c_str(), toks.size(),
              total_windows, ctx, n_windows, n_windows * ctx,
              n_windows < total_windows ? " -- a PREFIX of the test set (full set: --max-windows 0)" : " -- the full set");
  std::printf("engine: CPU fp32, %d threads, %s\n", threads,
              tp == 0 ? "no tensor parallelism (plain fp32)" : ("simulated TP=" + std::to_string(tp) + ", bf16 partials").c_str());

  std::vector<std::pair<allreduce::Mode, int>> runs;
  if (all) {
    runs.push_back({allreduce::Mode::kOneShot, 0});
    for (auto md : {allreduce::Mode::kQ8Q8, allreduce::Mode::kQ4Q8, allreduce::Mode::kQ4Q4})
      for (int g : {32, 64, 128}) runs.push_back({md, g});
    if (tp == 0) tp = 2;
  } else {
    runs.push_back({mode, group});
  }
  if (tp == 0 && allreduce::mode_is_quantized(mode)) {
    std::fprintf(stderr, "lowbit ppl: a quantized mode needs --tp >= 1\n");
    return 2;
  }
  std::vector<PplResult> results;
  for (auto [md, g] : runs) {
    PplResult r;
    st = run_ppl(m, toks, ctx, n_windows, tp, md, g == 0 ? 128 : g, threads, sites || all, &r);
    if (!st.ok()) {
      std::fprintf(stderr, "lowbit ppl: %s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("%-6s G=%-4s ppl %.4f  (%lld tokens, %.1f s, %.0f tok/s)\n", r.mode.c_str(),
                r.group ? std::to_string(r.group).c_str() : "-", r.ppl, static_cast<long long>(r.tokens), r.seconds,
                r.tokens / r.seconds);
    results.push_back(std::move(r));
  }
  nlohmann::json j;
  j["model"] = model_path;
  j["text"] = text_path;
  j["ctx"] = ctx;
  j["tp"] = tp;
  j["windows"] = n_windows;
  j["total_windows"] = total_windows;
  j["tokens_scored"] = static_cast<int64_t>(n_windows) * ctx;
  j["protocol"] = "windows [BOS, t0..t_{ctx-2}] predict t0..t_{ctx-1}; non-overlapping; ppl = exp(mean NLL)";
#ifdef LOWBIT_GIT_COMMIT
  j["commit"] = LOWBIT_GIT_COMMIT;
#endif
  double exact = results[0].mode == "exact" ? results[0].ppl : 0;
  if (results.size() > 1 || sites) {
    std::printf("\n| mode  | G   | ppl      | vs exact  | attn-out rel L2 | mlp-down rel L2 |\n");
    std::printf("|-------|-----|----------|-----------|-----------------|-----------------|\n");
  }
  for (auto& r : results) {
    nlohmann::json e = {{"mode", r.mode}, {"group", r.group}, {"ppl", r.ppl}, {"mean_nll", r.nll}, {"tokens", r.tokens},
                        {"seconds", r.seconds}};
    if (exact > 0) e["rel_change_vs_exact"] = r.ppl / exact - 1.0;
    bool q = r.group != 0 && (sites || all);
    if (q) e["site_errors"] = sites_json(r.sites);
    j["results"].push_back(e);
    if (results.size() > 1 || sites)
      std::printf("| %-5s | %-3s | %8.4f | %+8.3f%% | %15s | %15s |\n", r.mode.c_str(), r.group ? std::to_string(r.group).c_str() : "-",
                  r.ppl, exact > 0 ? 100.0 * (r.ppl / exact - 1.0) : 0.0,
                  q ? std::to_string(site_mean(r.sites, 0)).c_str() : "-", q ? std::to_string(site_mean(r.sites, 1)).c_str() : "-");
  }
  if (sites || all) {
    // Per-layer table of the quantized runs (mean relative L2 error over tokens).
    std::printf("\nper-layer all-reduce error (mean rel L2 over tokens), attn-out / mlp-down:\n%-5s", "layer");
    for (auto& r : results)
      if (r.group) std::printf(" %13s", (r.mode + "/G" + std::to_string(r.group)).c_str());
    std::printf("\n");
    for (int l = 0; l < m.cfg.n_layers; ++l) {
      std::printf("%-5d", l);
      for (auto& r : results)
        if (r.group) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.4f/%.4f", r.sites.sum[0][l] / std::max<int64_t>(1, r.sites.count[0][l]),
                        r.sites.sum[1][l] / std::max<int64_t>(1, r.sites.count[1][l]));
          std::printf(" %13s", buf);
        }
      std::printf("\n");
    }
  }
  if (a.has("json")) {
    std::ofstream out(a.get("json"));
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "lowbit ppl: cannot write %s\n", a.get("json").c_str());
      return 1;
    }
    std::printf("wrote %s\n", a.get("json").c_str());
  }
  return 0;
}

}  // namespace

LOWBIT_REGISTER_COMMAND("ppl",
                        "perplexity on WikiText-2 with the CPU engine (simulated TP + quantized all-reduce); --all-modes for the table",
                        cmd_ppl);

}  // namespace lowbit::cli::model_cmd
