// lowbit ppl: perplexity of a GGUF Llama on WikiText-2, on the CPU engine (simulated tensor
// parallelism, reference all-reduce) or on the GPUs (TpRunner, the real all-reduce kernels).
// Protocol in lowbit/model/perplexity.h; see docs/model.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lowbit/model/perplexity.h"
#include "lowbit/model/tp_runner.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"
#include "tools/cli/model/model_common.h"
#include "lowbit_version.h"  // LOWBIT_GIT_COMMIT (generated at build time)

namespace lowbit::cli::model_cmd {
namespace {

constexpr int kDefaultCpuWindows = 8;  // ~8k tokens: a few minutes on 2 cores

const char* kHelp =
    "usage: lowbit ppl [options]\n"
    "Perplexity of a GGUF Llama on the WikiText-2 test split: the text is tokenized (no BOS) and\n"
    "cut into non-overlapping blocks of ctx tokens; window [BOS, t0..t_{ctx-2}] predicts\n"
    "t0..t_{ctx-1}, so every token of the scored prefix is predicted once; ppl = exp(mean NLL).\n"
    "\n"
    "  --device cpu|gpu|auto  auto (default): gpu when built with CUDA and a device is present\n"
    "                         cpu: fp32 engine, simulated TP, reference all-reduce (bf16 partials)\n"
    "                         gpu: TpRunner (bf16, cuBLAS) on GPUs 0..tp-1 with the real all-reduce\n"
    "  --tp N                 ranks (default 2; gpu: 1 when only one GPU is present). cpu: 0 = plain\n"
    "                         fp32 without TP; the gpu runner needs tp <= KV heads (SmolLM2: 3)\n"
    "  --mode M               exact (default), q8q8, q4q8, q4q4; also nccl/oneshot/twoshot (gpu:\n"
    "                         that algorithm; exact = nccl on gpu; cpu: all unquantized = exact)\n"
    "  --group G              quantization group size 32, 64, 128 (default 128)\n"
    "  --all-modes            exact + {q8q8,q4q8,q4q4} x G {32,64,128}; table with change vs exact\n"
    "  --ctx N                window length (default 1024)\n"
    "  --max-windows N        windows scored, 0 = all (default: gpu all 296, cpu 8 = a prefix)\n"
    "  --batch N              gpu: windows per forward (default 8)\n"
    "  --threads N            cpu threads (default 2)\n"
    "  --site-errors          cpu: per-layer relative L2 error of each quantized all-reduce\n"
    "  --weights as-loaded|int4  int4: every block's linear weight (q k v o gate up down) goes\n"
    "                         through lowbit's INT4 format and back (RTN, GPTQ grid, bf16 scales;\n"
    "                         embeddings and head as loaded): what INT4 weights cost the model\n"
    "  --wgroup G             int4 weight group size 32, 64, 128 or -1 (per-channel); must\n"
    "                         divide every K (SmolLM2: 576, 1536 -> 32, 64 or -1; default 64)\n"
    "  --wasym                int4 weights with zero points (default symmetric)\n"
    "  --wquant rtn|gptq      int4 quantizer: round to nearest (default) or GPTQ, calibrated on\n"
    "                         the text's LAST --calib-tokens tokens (disjoint from the scored\n"
    "                         windows; refused when they would overlap), plain fp32 CPU engine\n"
    "  --calib-tokens N       GPTQ calibration: N / ctx windows [BOS, ctx - 1 tokens] (default 4096)\n"
    "  --wact-order           GPTQ with act-order (desc_act: columns by decreasing Hessian diagonal)\n"
    "  --wsink-weight W       GPTQ: weight of each calibration window's first row (BOS, the attention\n"
    "                         sink) in the Hessians (default 1: standard GPTQ)\n"
    "  --json PATH            write the results as JSON and a markdown table (PATH with .md);\n"
    "                         --all-modes on gpu defaults to docs/benchmarks/ppl_gpu.json\n"
    "  --model PATH           default models/SmolLM2-135M-Instruct.Q4_1.gguf under the repo root\n"
    "                         (cwd or a parent with models/), else <exe>/../../\n"
    "  --text PATH            default $LOWBIT_DATA_DIR/wikitext-2-raw/wiki.test.raw; without\n"
    "                         LOWBIT_DATA_DIR the first existing of <root>/../shared/data/\n"
    "                         wikitext-2-raw/wiki.test.raw, <root>/data/wiki.test.raw,\n"
    "                         <root>/data/wikitext-2-raw/wiki.test.raw\n"
    "The file and device used are printed first.\n";

struct PplRow {
  std::string mode;  // display name: exact or the quantized mode
  std::string algo;  // the all-reduce algorithm that ran
  int group = 0;     // 0: unquantized
  double ppl = 0, nll = 0;
  int64_t tokens = 0;
  double seconds = 0;
  bool has_sites = false;
  model::SiteErrorStats sites;
};

Status run_cpu(const LoadedModel& m, const std::vector<int32_t>& toks, int ctx, int n_windows, int tp,
               allreduce::Mode mode, int group, int threads, bool site_errors, PplRow* res) {
  model::CpuEngineOptions o;
  o.tp = tp;
  o.mode = mode;
  o.group_size = group;
  o.threads = threads;
  o.max_ctx = ctx;
  res->has_sites = site_errors && allreduce::mode_is_quantized(mode);
  o.site_errors = res->has_sites ? &res->sites : nullptr;
  model::CpuLlama eng;
  LOWBIT_RETURN_IF_ERROR(eng.init(m.cfg, &m.w, o));
  const std::string tag = res->mode + (res->group ? " G" + std::to_string(res->group) : "");
  const auto t0 = std::chrono::steady_clock::now();
  model::PplResult r;
  LOWBIT_RETURN_IF_ERROR(model::cpu_perplexity(&eng, m.tok.bos_id(), toks, ctx, n_windows, &r,
                                               [&](int done, int total, double ppl) {
                                                 double s = std::chrono::duration<double>(
                                                                std::chrono::steady_clock::now() - t0).count();
                                                 std::fprintf(stderr, "\r  [%s] window %d/%d  ppl %.4f  %.0f tok/s   ",
                                                              tag.c_str(), done, total, ppl, double(done) * ctx / s);
                                               }));
  std::fprintf(stderr, "\n");
  res->seconds = r.seconds;
  res->tokens = r.n_scored;
  res->nll = r.nll_sum / double(r.n_scored);
  res->ppl = r.ppl;
  return Status::Ok();
}

Status run_gpu(const LoadedModel& m, const std::vector<int>& chunks, int ctx, int n_windows, int tp,
               const std::string& algo, int group, int batch, PplRow* res) {
  model::GpuPplOptions o;
  o.ctx = ctx + 1;       // chunk = [BOS, ctx text tokens]
  o.first_scored = 0;    // score every position j >= 1 of the chunk: ctx predictions
  o.tp = tp;
  o.batch = batch;
  o.max_chunks = n_windows;
  LOWBIT_RETURN_IF_ERROR(model::parse_tp_comm(algo, group, &o.comm));
  model::PplResult r;
  LOWBIT_RETURN_IF_ERROR(model::gpu_perplexity(m.cfg, m.w, chunks, o, &r));
  if (r.n_scored != int64_t(n_windows) * ctx)
    return make_status(StatusCode::kInternal, "gpu_perplexity scored %lld predictions, expected %lld",
                       static_cast<long long>(r.n_scored), static_cast<long long>(n_windows) * ctx);
  res->seconds = r.seconds;
  res->tokens = r.n_scored;
  res->nll = r.nll_sum / double(r.n_scored);
  res->ppl = r.ppl;
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

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

int fail(const Status& st) {
  std::fprintf(stderr, "lowbit ppl: %s\n", st.to_string().c_str());
  return 1;
}

int cmd_ppl(const std::vector<std::string>& argv) {
  for (auto& s : argv)
    if (s == "--help" || s == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
  Args a(argv, {"model", "text", "ctx", "tp", "mode", "group", "max-windows", "all-modes", "json", "site-errors",
                "threads", "device", "batch", "weights", "wgroup", "wasym", "wquant", "calib-tokens", "wact-order", "wsink-weight"},
         {"all-modes", "site-errors", "wasym", "wact-order"});
  if (!a.ok()) {
    std::fprintf(stderr, "lowbit ppl: %s (see lowbit ppl --help)\n", a.error().c_str());
    return 2;
  }
  // Device.
  const std::string dev_opt = a.get("device", "auto");
  const int n_gpus = cuda_device_count();
  bool gpu = false;
  std::string dev_why;
  if (dev_opt == "gpu") {
    if (n_gpus == 0) {
      std::fprintf(stderr, "lowbit ppl: --device gpu but %s\n",
                   LOWBIT_HAS_CUDA_FLAG ? "no CUDA device is visible" : "lowbit was built without CUDA");
      return 1;
    }
    gpu = true, dev_why = "--device gpu";
  } else if (dev_opt == "cpu") {
    dev_why = "--device cpu";
  } else if (dev_opt == "auto") {
    gpu = n_gpus > 0;
    dev_why = gpu ? "auto: CUDA device present" : (LOWBIT_HAS_CUDA_FLAG ? "auto: no CUDA device" : "auto: built without CUDA");
  } else {
    std::fprintf(stderr, "lowbit ppl: --device must be cpu, gpu or auto, not '%s'\n", dev_opt.c_str());
    return 2;
  }
  const std::string model_path = a.get("model", default_model());
  const bool text_given = a.has("text");
  const std::string text_path = a.get("text", default_text());
  const int ctx = static_cast<int>(a.get_int("ctx", 1024));
  int tp = static_cast<int>(a.get_int("tp", gpu && n_gpus < 2 ? 1 : 2));
  const int group = static_cast<int>(a.get_int("group", 128)), threads = static_cast<int>(a.get_int("threads", 2));
  const int batch = static_cast<int>(a.get_int("batch", 8));
  const int64_t max_windows = a.get_int("max-windows", gpu ? 0 : kDefaultCpuWindows);
  const bool all = a.has("all-modes"), sites = a.has("site-errors");
  const std::string mode_str = a.get("mode", "exact");
  const std::string weights_opt = a.get("weights", "as-loaded");
  const int wgroup = static_cast<int>(a.get_int("wgroup", 64));
  const bool wasym = a.has("wasym");
  const std::string wquant = a.get("wquant", "rtn");
  const int64_t calib_tokens = a.get_int("calib-tokens", 4096);
  const bool wact_order = a.has("wact-order");
  const double wsink = a.has("wsink-weight") ? std::atof(a.get("wsink-weight").c_str()) : 1.0;
  if (weights_opt != "as-loaded" && weights_opt != "int4") {
    std::fprintf(stderr, "lowbit ppl: --weights must be as-loaded or int4, not '%s'\n", weights_opt.c_str());
    return 2;
  }
  if (wquant != "rtn" && wquant != "gptq") {
    std::fprintf(stderr, "lowbit ppl: --wquant must be rtn or gptq, not '%s'\n", wquant.c_str());
    return 2;
  }
  if ((wquant == "gptq" || wact_order || a.has("calib-tokens") || a.has("wsink-weight")) && weights_opt != "int4") {
    std::fprintf(stderr, "lowbit ppl: --wquant / --calib-tokens / --wact-order need --weights int4\n");
    return 2;
  }
  if ((wact_order || a.has("wsink-weight")) && wquant != "gptq") {
    std::fprintf(stderr, "lowbit ppl: --wact-order and --wsink-weight are GPTQ options (--wquant gptq)\n");
    return 2;
  }
  if (!(wsink > 0) || !std::isfinite(wsink)) {
    std::fprintf(stderr, "lowbit ppl: --wsink-weight must be a positive number\n");
    return 2;
  }
  if (!a.ok() || ctx < 2 || tp < 0 || threads < 1 || max_windows < 0 || batch < 1) {
    std::fprintf(stderr, "lowbit ppl: bad option (%s)\n", a.error().c_str());
    return 2;
  }
  if (gpu && tp == 0) tp = 1;  // no "plain" mode on the GPU: TP=1 has no all-reduce
  if (gpu && tp > n_gpus) {
    std::fprintf(stderr, "lowbit ppl: --tp %d needs %d GPUs, %d visible\n", tp, tp, n_gpus);
    return 1;
  }
  // Runs: (display mode, algorithm name for the GPU, CPU mode, group).
  struct Run {
    std::string mode, algo;
    allreduce::Mode cpu_mode;
    int group;
  };
  std::vector<Run> runs;
  if (all) {
    runs.push_back({"exact", "nccl", allreduce::Mode::kOneShot, 0});
    for (auto md : {allreduce::Mode::kQ8Q8, allreduce::Mode::kQ4Q8, allreduce::Mode::kQ4Q4})
      for (int g : {32, 64, 128}) runs.push_back({allreduce::mode_name(md), allreduce::mode_name(md), md, g});
    if (tp == 0) tp = 2;
  } else {
    allreduce::Mode md;
    Status st = parse_model_mode(mode_str, &md);
    if (!st.ok()) {
      std::fprintf(stderr, "lowbit ppl: %s\n", st.to_string().c_str());
      return 2;
    }
    const bool q = allreduce::mode_is_quantized(md);
    runs.push_back({display_mode(md), mode_str == "exact" ? "nccl" : mode_str, md, q ? group : 0});
  }
  if (tp == 0 && allreduce::mode_is_quantized(runs[0].cpu_mode)) {
    std::fprintf(stderr, "lowbit ppl: a quantized mode needs --tp >= 1\n");
    return 2;
  }
  if (gpu && tp == 1 && (all || runs[0].group))
    std::fprintf(stderr, "lowbit ppl: warning: TP=1 has no all-reduce; quantized modes equal exact\n");

  std::printf("device: %s (%s)", gpu ? "GPU" : "CPU", dev_why.c_str());
  if (gpu) std::printf(", %d visible, using %d x %s", n_gpus, tp, cuda_device_name(0).c_str());
  std::printf("\n");
  std::fflush(stdout);
  if (!text_given && !std::filesystem::exists(text_path)) {
    std::fprintf(stderr, "lowbit ppl: no WikiText-2 test file; tried %s (pass --text or set LOWBIT_DATA_DIR)\n",
                 join_paths(default_text_candidates()).c_str());
    return 1;
  }
  std::printf("model: %s%s\ntext:  %s%s\n", model_path.c_str(), a.has("model") ? "" : " (default)", text_path.c_str(),
              text_given ? "" : " (default)");
  LoadedModel m;
  auto t0 = std::chrono::steady_clock::now();
  Status st = load_model(model_path, &m);
  std::string text;
  if (st.ok()) st = read_text(text_path, &text);
  std::vector<int32_t> toks;
  if (st.ok()) st = m.tok.encode(text, false, false, &toks);
  if (!st.ok()) return fail(st);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ctx > m.cfg.context_length && m.cfg.context_length > 0) {
    std::fprintf(stderr, "lowbit ppl: --ctx %d exceeds the model's context %d\n", ctx, m.cfg.context_length);
    return 2;
  }
  const int total_windows = static_cast<int>(toks.size() / ctx);
  const int n_windows =
      max_windows == 0 ? total_windows : static_cast<int>(std::min<int64_t>(max_windows, total_windows));
  if (n_windows < 1) {
    std::fprintf(stderr, "lowbit ppl: the text has %zu tokens, fewer than one window of %d\n", toks.size(), ctx);
    return 1;
  }
  std::string weights_desc = "as loaded (" + model_path.substr(model_path.find_last_of('/') + 1) + ", dequantized to fp32)";
  if (weights_opt == "int4" && wquant == "rtn") {
    st = model::quantize_linear_weights_int4(m.cfg, wgroup, !wasym, DType::kBF16, &m.w);
    if (!st.ok()) return fail(st);
    weights_desc = "INT4 round trip of the block linears (RTN, G=" + std::to_string(wgroup) +
                   (wasym ? ", asymmetric" : ", symmetric") + ", bf16 scales; embeddings and head as loaded)";
  } else if (weights_opt == "int4") {
    // Calibration: the last whole windows of the text, which the scored prefix must not reach,
    // each led by BOS as the scored windows are ([BOS, ctx - 1 text tokens]).
    const int64_t cal = calib_tokens / ctx * (ctx - 1);
    const int64_t cal0 = static_cast<int64_t>(toks.size()) - cal;
    if (cal < ctx || cal0 < static_cast<int64_t>(n_windows) * ctx) {
      std::fprintf(stderr,
                   "lowbit ppl: GPTQ calibration needs at least one window of %d tokens after the %lld scored ones "
                   "(--calib-tokens %lld, the text has %zu tokens; lower --max-windows or --calib-tokens)\n",
                   ctx, static_cast<long long>(n_windows) * ctx, static_cast<long long>(calib_tokens), toks.size());
      return 2;
    }
    model::GptqCalibration c;
    c.tokens = toks.data() + cal0;
    c.count = cal;
    c.ctx = ctx;
    c.bos = m.tok.bos_id();
    c.threads = threads;
    c.act_order = wact_order;
    c.sink_weight = wsink;
    auto tq = std::chrono::steady_clock::now();
    st = model::quantize_linear_weights_int4_gptq(m.cfg, c, wgroup, !wasym, DType::kBF16, &m.w);
    if (!st.ok()) return fail(st);
    char sink[48] = "";
    if (wsink != 1.0) std::snprintf(sink, sizeof(sink), " sink-weighted %g", wsink);
    weights_desc = "INT4 round trip of the block linears (GPTQ" + std::string(wact_order ? " act-order" : "") + sink +
                   ", G=" + std::to_string(wgroup) + (wasym ? ", asymmetric" : ", symmetric") +
                   ", bf16 scales, damp 0.01, calibrated on tokens " + std::to_string(cal0) + ".." +
                   std::to_string(cal0 + cal - 1) + " of the text in windows [BOS, " + std::to_string(ctx - 1) +
                   " tokens]; embeddings and head as loaded)";
    std::printf("GPTQ: Hessians of %lld calibration tokens and quantization in %.1f s\n", static_cast<long long>(cal),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - tq).count());
  }
  std::printf("weights: %s\n", weights_desc.c_str());
  std::printf("%s: %d layers, hidden %d, heads %d/%d kv, vocab %d; loaded+tokenized in %.1f s\n", m.cfg.name.c_str(),
              m.cfg.n_layers, m.cfg.hidden, m.cfg.n_heads, m.cfg.n_kv_heads, m.cfg.vocab_size, load_s);
  std::printf("%zu tokens = %d windows of %d; scoring %d windows (%lld tokens)%s\n", toks.size(), total_windows, ctx,
              n_windows, static_cast<long long>(n_windows) * ctx,
              n_windows < total_windows ? " -- a PREFIX of the test set (full set: --max-windows 0)" : " -- the full set");
  std::string engine = gpu ? "GPU TpRunner, bf16 activations, TP=" + std::to_string(tp) + ", " +
                                 std::to_string(batch) + " windows per forward"
                           : "CPU fp32, " + std::to_string(threads) + " threads, " +
                                 (tp == 0 ? std::string("no tensor parallelism (plain fp32)")
                                          : "simulated TP=" + std::to_string(tp) + ", bf16 partials");
  std::printf("engine: %s\n", engine.c_str());

  std::vector<int> chunks;
  if (gpu) {
    disable_nccl_nvls();
    st = model::gpu_ppl_chunks(toks, m.tok.bos_id(), ctx, n_windows, &chunks);
    if (!st.ok()) return fail(st);
  }
  std::vector<PplRow> results;
  for (const Run& run : runs) {
    PplRow r;
    r.mode = run.mode;
    r.group = run.group;
    r.algo = gpu ? run.algo : (allreduce::mode_is_quantized(run.cpu_mode) ? run.algo : "reference");
    st = gpu ? run_gpu(m, chunks, ctx, n_windows, tp, run.algo, run.group ? run.group : 128, batch, &r)
             : run_cpu(m, toks, ctx, n_windows, tp, run.cpu_mode, run.group ? run.group : 128, threads, sites || all, &r);
    if (!st.ok()) return fail(st);
    std::printf("%-6s G=%-4s ppl %.4f  (%lld tokens, %.1f s, %.0f tok/s)\n", r.mode.c_str(),
                r.group ? std::to_string(r.group).c_str() : "-", r.ppl, static_cast<long long>(r.tokens), r.seconds,
                r.tokens / r.seconds);
    std::fflush(stdout);
    results.push_back(std::move(r));
  }

  // Table (printed and written as markdown).
  const double exact = results[0].mode == "exact" ? results[0].ppl : 0;
  const bool any_sites = std::any_of(results.begin(), results.end(), [](const PplRow& r) { return r.has_sites; });
  std::string md = "| mode  | G   | ppl      | vs exact  |" + std::string(any_sites ? " attn-out rel L2 | mlp-down rel L2 |" : "") +
                   "\n|-------|-----|----------|-----------|" + (any_sites ? "-----------------|-----------------|" : "") + "\n";
  for (auto& r : results) {
    char line[256];
    std::snprintf(line, sizeof line, "| %-5s | %-3s | %8.4f | %9s |", r.mode.c_str(),
                  r.group ? std::to_string(r.group).c_str() : "-", r.ppl,
                  exact > 0 ? (fmt("%+.3f", 100.0 * (r.ppl / exact - 1.0)) + "%").c_str() : "-");
    md += line;
    if (any_sites)
      md += " " + (r.has_sites ? fmt("%15.4f", site_mean(r.sites, 0)) : std::string(14, ' ') + "-") +
            " | " + (r.has_sites ? fmt("%15.4f", site_mean(r.sites, 1)) : std::string(14, ' ') + "-") + " |";
    md += "\n";
  }
  if (results.size() > 1 || sites) std::printf("\n%s", md.c_str());
  if (any_sites) {
    // Per-layer table of the quantized runs (mean relative L2 error over tokens).
    std::printf("\nper-layer all-reduce error (mean rel L2 over tokens), attn-out / mlp-down:\n%-5s", "layer");
    for (auto& r : results)
      if (r.has_sites) std::printf(" %13s", (r.mode + "/G" + std::to_string(r.group)).c_str());
    std::printf("\n");
    for (int l = 0; l < m.cfg.n_layers; ++l) {
      std::printf("%-5d", l);
      for (auto& r : results)
        if (r.has_sites) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.4f/%.4f", r.sites.sum[0][l] / std::max<int64_t>(1, r.sites.count[0][l]),
                        r.sites.sum[1][l] / std::max<int64_t>(1, r.sites.count[1][l]));
          std::printf(" %13s", buf);
        }
      std::printf("\n");
    }
  }

  std::string json_path = a.get("json", "");
  if (json_path.empty() && gpu && all) json_path = repo_root() + "/docs/benchmarks/ppl_gpu.json";
  if (!json_path.empty()) {
    nlohmann::json j;
    j["device"] = gpu ? "gpu" : "cpu";
    if (gpu) j["gpu"] = cuda_device_name(0);
    j["engine"] = engine;
    j["model"] = model_path;
    j["text"] = text_path;
    j["ctx"] = ctx;
    j["tp"] = tp;
    j["windows"] = n_windows;
    j["weights"] = weights_desc;
    j["total_windows"] = total_windows;
    j["tokens_scored"] = static_cast<int64_t>(n_windows) * ctx;
    j["protocol"] = "windows [BOS, t0..t_{ctx-2}] predict t0..t_{ctx-1}; non-overlapping; ppl = exp(mean NLL)";
    j["commit"] = LOWBIT_GIT_COMMIT;
    for (auto& r : results) {
      nlohmann::json e = {{"mode", r.mode},  {"allreduce", r.algo}, {"group", r.group},      {"ppl", r.ppl},
                          {"mean_nll", r.nll}, {"tokens", r.tokens}, {"seconds", r.seconds}};
      if (exact > 0) e["rel_change_vs_exact"] = r.ppl / exact - 1.0;
      if (r.has_sites) e["site_errors"] = sites_json(r.sites);
      j["results"].push_back(e);
    }
    std::error_code ec;
    std::filesystem::path jp(json_path);
    if (jp.has_parent_path()) std::filesystem::create_directories(jp.parent_path(), ec);
    std::ofstream out(json_path);
    out << j.dump(2) << "\n";
    std::filesystem::path mp = jp;
    mp.replace_extension(".md");
    std::ofstream mout(mp);
    mout << "Perplexity, " << m.cfg.name << ", WikiText-2 test, " << n_windows << " x " << ctx << " tokens"
         << (n_windows < total_windows ? " (prefix)" : " (full set)") << "; " << engine << "\n\n"
         << md;
    if (!out || !mout) {
      std::fprintf(stderr, "lowbit ppl: cannot write %s / %s\n", json_path.c_str(), mp.string().c_str());
      return 1;
    }
    std::printf("wrote %s and %s\n", json_path.c_str(), mp.string().c_str());
  }
  return 0;
}

}  // namespace

LOWBIT_REGISTER_COMMAND("ppl",
                        "perplexity on WikiText-2 (--device cpu|gpu|auto; --all-modes for the quantized all-reduce "
                        "table; --help)",
                        cmd_ppl);

}  // namespace lowbit::cli::model_cmd
