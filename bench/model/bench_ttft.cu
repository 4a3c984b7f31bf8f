// `lowbit bench ttft`: prefill time-to-first-token of a tensor-parallel Llama-architecture
// model (synthetic weights in real shapes) for every all-reduce mode plus `none` (no
// all-reduce: compute only). Per row: TTFT, the communication share
// s = (TTFT_nccl - TTFT_none) / TTFT_nccl, the speedup over NCCL, the all-reduce speedup k
// of that mode on the same [tokens, hidden] tensor measured alone in the same run (CUDA
// graph), the Amdahl bound 1 / ((1 - s) + s / k) and measured speedup / bound.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/common/bench_common.h"
#include "bench/common/gpu_timing.cuh"
#include "lowbit/model/tp_runner.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"

namespace lowbit::model {
namespace {

struct ModelSpec {
  LlamaConfig cfg;
  int default_layers;  // layers timed by default (-1: all); fewer are scaled to the full depth
};

std::map<std::string, ModelSpec> model_specs() {
  std::map<std::string, ModelSpec> m;
  LlamaConfig c;
  c.name = "llama3-8b";
  c.vocab_size = 128256, c.hidden = 4096, c.intermediate = 14336, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 8;
  c.head_dim = 128, c.rope_theta = 500000.0f, c.tied_embeddings = false, c.context_length = 8192;
  m[c.name] = {c, -1};
  c.name = "llama3-70b";
  c.hidden = 8192, c.intermediate = 28672, c.n_layers = 80, c.n_heads = 64, c.n_kv_heads = 8;
  m[c.name] = {c, 16};  // 80 layers x batch 32 would take minutes per mode: time 16, scale
  LlamaConfig q;
  q.name = "qwen3-30b-a3b";
  q.vocab_size = 151936, q.hidden = 2048, q.intermediate = 6144, q.n_layers = 48, q.n_heads = 32, q.n_kv_heads = 4;
  q.head_dim = 128, q.rope_theta = 1000000.0f, q.tied_embeddings = false, q.n_experts = 128, q.n_experts_used = 8;
  q.expert_intermediate = 768;
  // int4 experts on the int4 component's CUDA-core fused MoE (~32 ms per layer at 8 x 1024):
  // 2 of 48 identical layers timed, scaled, so batch 32 fits the device script's budget.
  m[q.name] = {q, 2};
  return m;
}

int usage(const std::string& err) {
  if (!err.empty()) std::fprintf(stderr, "bench ttft: %s\n", err.c_str());
  std::fprintf(stderr,
               "usage: lowbit bench ttft [--models llama3-8b,llama3-70b,qwen3-30b-a3b] [--batch 8,32] [--seq 1024]\n"
               "       [--tp N (default: all GPUs)] [--modes all|none,nccl,oneshot,twoshot,q8q8,q4q8,q4q4,auto]\n"
               "       [--layers L (time L layers, scale to the full depth; default all; 16 for 70B, 2 for Qwen3-30B-A3B)]\n"
               "       [--group 128] [--precision exact|int8|int4-int8|int4 (for auto)] [--warmup 1] [--reps 3]\n"
               "       [--out PREFIX (default docs/benchmarks/ttft)]\n");
  return 2;
}

int run(const std::vector<std::string>& argv) {
  cli::Args a(argv, {"models", "batch", "seq", "tp", "modes", "layers", "out", "group", "precision", "warmup", "reps"});
  if (!a.ok()) return usage(a.error());
  const auto models = a.get_list("models", {"llama3-8b", "llama3-70b", "qwen3-30b-a3b"});
  std::vector<int> batches;
  for (const auto& b : a.get_list("batch", {"8", "32"})) batches.push_back(std::atoi(b.c_str()));
  const int seq = int(a.get_int("seq", 1024));
  int n_gpu = 0;
  if (cudaGetDeviceCount(&n_gpu) != cudaSuccess) n_gpu = 0;
  const int tp = int(a.get_int("tp", n_gpu));
  const int layers_opt = int(a.get_int("layers", 0));
  const int group = int(a.get_int("group", 128));
  const int warmup = int(a.get_int("warmup", 1));
  const int reps = int(a.get_int("reps", 3));
  const std::string out = a.get("out", "docs/benchmarks/ttft");
  auto modes = a.get_list("modes", {"all"});
  if (modes.size() == 1 && modes[0] == "all") modes = {"none", "nccl", "oneshot", "twoshot", "q8q8", "q4q8", "q4q4", "auto"};
  if (!a.ok()) return usage(a.error());
  allreduce::Precision prec = allreduce::Precision::kExact;
  if (Status st = allreduce::parse_precision(a.get("precision", "exact"), &prec); !st.ok()) return usage(st.to_string());
  if (tp < 2 || tp > n_gpu) return usage("needs --tp between 2 and the " + std::to_string(n_gpu) + " GPUs present");
  for (int b : batches)
    if (b <= 0) return usage("bad --batch");
  if (seq <= 0 || reps <= 0 || warmup < 0) return usage("bad --seq/--reps/--warmup");
  // nccl and none anchor every row: always measure them.
  std::vector<TpComm> comms;
  auto add = [&](const std::string& name) -> Status {
    for (const auto& c : comms)
      if (tp_comm_name(c) == name) return Status::Ok();
    TpComm c;
    LOWBIT_RETURN_IF_ERROR(parse_tp_comm(name, group, &c));
    c.opts.precision = prec;
    comms.push_back(c);
    return Status::Ok();
  };
  for (const auto& m : std::vector<std::string>{"none", "nccl"})
    if (Status st = add(m); !st.ok()) return usage(st.to_string());
  for (const auto& m : modes)
    if (Status st = add(m); !st.ok()) return usage(st.to_string());

  auto specs = model_specs();
  nlohmann::json record = bench::run_record(argv, "bench ttft");
  record["machine"] = bench::machine_description();
  record["note"] =
      "synthetic bf16 weights in real shapes, one layer's weights shared by all layers (same compute); "
      "attention = cuBLAS batched GEMMs + causal softmax (not flash); TTFT = embedding + all layers + final norm "
      "+ LM head of each sequence's last token; Qwen3-30B-A3B: bf16 attention + router, int4 experts (symmetric, "
      "group 128) through int4::fused_moe, split by expert intermediate size over the ranks (no QK-norm)";
  nlohmann::json rows = nlohmann::json::array(), skipped = nlohmann::json::array();
  bench::Table table({{"model", 14}, {"batch", 6}, {"layers", 9}, {"mode", 8}, {"runs as", 8}, {"TTFT ms", 10},
                      {"comm %", 7}, {"vs nccl", 8}, {"AR us", 9}, {"AR k", 6}, {"bound", 7}, {"of bound", 9}});
  table.print_header();
  std::vector<int> devices(tp);
  for (int i = 0; i < tp; ++i) devices[i] = i;
  int failures = 0;
  for (const auto& name : models) {
    auto it = specs.find(name);
    if (it == specs.end()) return usage("unknown model " + name);
    const LlamaConfig& cfg = it->second.cfg;
    int L = layers_opt > 0 ? layers_opt : it->second.default_layers;
    if (L <= 0 || L > cfg.n_layers) L = cfg.n_layers;
    std::unique_ptr<TpRunner> runner;
    Status st = TpRunner::create(cfg, devices, allreduce::Config{}, &runner);
    if (st.ok()) st = runner->init_synthetic(2026, true);
    if (!st.ok()) {
      std::printf("%-14s skipped: %s\n", name.c_str(), st.to_string().c_str());
      skipped.push_back({{"model", name}, {"reason", st.to_string()}});
      continue;
    }
    for (int batch : batches) {
      std::vector<int32_t> tokens(size_t(batch) * seq);
      uint32_t h = 12345;
      for (auto& t : tokens) t = int32_t((h = h * 1664525u + 1013904223u) >> 8) % cfg.vocab_size;
      auto prep = [&](int layers) -> Status {
        TpRunOptions o;
        o.batch = batch, o.seq = seq, o.layers = layers;
        LOWBIT_RETURN_IF_ERROR(runner->prepare(o));
        return runner->set_tokens(tokens);
      };
      // Fixed part (embedding, final norm, LM head), needed to scale a layer subset.
      double t0 = 0;
      bool graphed = false;
      const bool scaled = L < cfg.n_layers;
      if (scaled) {
        st = prep(0);
        if (st.ok()) st = runner->time_forward(comms[0], warmup, reps, &t0, &graphed);
      }
      if (st.ok()) st = prep(L);
      if (!st.ok()) {
        std::printf("%-14s batch %d failed: %s\n", name.c_str(), batch, st.to_string().c_str());
        ++failures;
        continue;
      }
      const size_t msg_bytes = size_t(batch) * seq * cfg.hidden * 2;
      std::vector<double> ttft(comms.size(), -1), ar_us(comms.size(), -1);
      std::vector<bool> gr(comms.size(), false);
      for (size_t i = 0; i < comms.size(); ++i) {
        double ms = 0;
        bool g = false;
        Status s = runner->time_forward(comms[i], warmup, reps, &ms, &g);
        if (!s.ok()) {
          std::printf("%-14s batch %d mode %s failed: %s\n", name.c_str(), batch, tp_comm_name(comms[i]).c_str(),
                      s.to_string().c_str());
          ++failures;
          continue;
        }
        ttft[i] = scaled ? t0 + (ms - t0) * cfg.n_layers / L : ms;
        gr[i] = g;
        if (!comms[i].skip) {
          double us = 0;
          s = runner->time_allreduce(comms[i].opts, 10, warmup, reps, &us);
          if (s.ok()) ar_us[i] = us;
          else std::printf("  all-reduce alone, mode %s failed: %s\n", tp_comm_name(comms[i]).c_str(), s.to_string().c_str());
          s = runner->set_tokens(tokens);  // time_allreduce overwrote activations; inputs stay valid
        }
      }
      const double t_none = ttft[0], t_nccl = ttft[1], ar_nccl = ar_us[1];
      const double share = (t_none > 0 && t_nccl > 0) ? (t_nccl - t_none) / t_nccl : -1;
      for (size_t i = 0; i < comms.size(); ++i) {
        if (ttft[i] < 0) continue;
        const bool skip = comms[i].skip;
        const double speedup = t_nccl > 0 ? t_nccl / ttft[i] : -1;
        const double k = (!skip && ar_us[i] > 0 && ar_nccl > 0) ? ar_nccl / ar_us[i] : -1;
        const double bound = (k > 0 && share >= 0) ? 1.0 / ((1 - share) + share / k) : (skip && share >= 0 ? 1.0 / (1 - share) : -1);
        const double of_bound = bound > 0 ? speedup / bound : -1;
        const std::string runs_as = skip ? "-" : allreduce::mode_name(runner->resolve_mode(comms[i].opts));
        const std::string lay = scaled ? std::to_string(L) + "->" + std::to_string(cfg.n_layers) : std::to_string(L);
        table.print_row({name, std::to_string(batch), lay, tp_comm_name(comms[i]), runs_as, bench::fmt(ttft[i], 1),
                         share >= 0 ? bench::fmt(100 * share, 1) : "-", bench::fmt(speedup, 3),
                         ar_us[i] > 0 ? bench::fmt(ar_us[i], 0) : "-", k > 0 ? bench::fmt(k, 2) : "-",
                         bound > 0 ? bench::fmt(bound, 3) : "-", of_bound > 0 ? bench::fmt(100 * of_bound, 1) + "%" : "-"});
        rows.push_back({{"model", name}, {"batch", batch}, {"seq", seq}, {"tp", tp}, {"mode", tp_comm_name(comms[i])},
                        {"runs_as", runs_as}, {"group_size", group}, {"layers_timed", L}, {"layers", cfg.n_layers},
                        {"scaled", scaled}, {"fixed_part_ms", scaled ? nlohmann::json(t0) : nlohmann::json(nullptr)},
                        {"ttft_ms", ttft[i]}, {"comm_share", share}, {"speedup_vs_nccl", speedup},
                        {"allreduce_bytes", msg_bytes}, {"allreduce_us", ar_us[i] > 0 ? nlohmann::json(ar_us[i]) : nlohmann::json(nullptr)},
                        {"allreduce_k", k > 0 ? nlohmann::json(k) : nlohmann::json(nullptr)},
                        {"amdahl_bound", bound > 0 ? nlohmann::json(bound) : nlohmann::json(nullptr)},
                        {"speedup_over_bound", of_bound > 0 ? nlohmann::json(of_bound) : nlohmann::json(nullptr)},
                        {"graphed", bool(gr[i])}});
      }
      if (scaled)
        std::printf("  (%s batch %d: %d of %d layers timed, TTFT = fixed %.1f ms + layers x %d/%d)\n", name.c_str(),
                    batch, L, cfg.n_layers, t0, cfg.n_layers, L);
    }
  }
  record["skipped"] = skipped;
  nlohmann::json plot = {{"x", "batch"}, {"y", "speedup_vs_nccl"}, {"series", "mode"}, {"facet", "model"},
                         {"logx", true}, {"title", "TTFT speedup over NCCL (TP=" + std::to_string(tp) + ")"}};
  bench::write_results(out, record, rows, table.markdown(), plot);
  std::printf("wrote %s.{json,md,png}; target: measured speedup >= 90%% of the Amdahl bound\n", out.c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace lowbit::model

LOWBIT_REGISTER_COMMAND("bench ttft", "prefill TTFT of a TP Llama per all-reduce mode, comm share, Amdahl bound",
                        lowbit::model::run);
