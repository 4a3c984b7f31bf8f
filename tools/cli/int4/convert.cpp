// `lowbit convert`: INT4 checkpoint (GPTQ v1/v2, AWQ, compressed-tensors) -> lowbit's packed
// layout (canonical K-packed + load-time N-packed), with a per-layer summary.
#include <cstdio>

#include <unistd.h>

#include "lowbit/int4/checkpoint.h"
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/int4/shard.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"

namespace {

const char* kUsage =
    "usage: lowbit convert --in CHECKPOINT --out PACKED.safetensors\n"
    "         [--config config.json | --format gptq|gptq_v2|awq|ct [--group G] [--sym|--asym]]\n"
    "         [--layer PREFIX] [--act bf16|fp16] [--round-scales] [--fuse-gate-up] [--fold-act-order] [--no-npacked]\n"
    "         [--tp-size T --tp-rank R [--tp-split S]]\n"
    "  --in            a .safetensors file, a model directory of shards, or its *.safetensors.index.json;\n"
    "                  shards are memory-mapped and the output is written layer by layer\n"
    "  --config        HF config.json (quantization_config) or AutoGPTQ quantize_config.json; default for a\n"
    "                  directory or index without --format: the config.json (with quantization_config) or\n"
    "                  quantize_config.json in it\n"
    "  --format        checkpoint format when there is no config (auto-detected when unambiguous)\n"
    "  --group         group size (-1 = per-channel); default: from the config or the scale shape\n"
    "  --sym/--asym    GPTQ symmetric flag (stored zeros are verified when symmetric)\n"
    "  --layer         only layers whose name starts with PREFIX\n"
    "  MoE experts A.experts.<e>.B (e = 0..E-1, same shape) are stacked into one E-expert weight A.experts.B\n"
    "  --act           activation dtype the scales are stored in (default bf16)\n"
    "  --round-scales  accept fp16 scales that round when stored as bf16 (default: refuse)\n"
    "  --fuse-gate-up  write X.gate_proj + X.up_proj (X.w1 + X.w3) as one [gate; up] layer X.gate_up_proj (X.w13):\n"
    "                  fused_moe's w13 for stacked experts, one GEMM for a dense MLP\n"
    "  --fold-act-order  fold each act-order X.down_proj's (X.w2's) permutation into the output columns of\n"
    "                  X.gate_proj / X.up_proj (X.w1 / X.w3) or of a fused X.gate_up_proj: down needs no activation\n"
    "                  gather and splits over TP ranks (an act-order down layer otherwise cannot); same outputs,\n"
    "                  bit for bit\n"
    "  --no-npacked    write the canonical K-packed layout only (no N-packed copy: about half the file;\n"
    "                  repack_for_kernels at load time reads only K-packed)\n"
    "  --tp-size/--tp-rank  write tensor-parallel rank R's shard of every layer (of T ranks; --tp-rank all: every\n"
    "                  rank's file in one pass, --out holding {rank}, e.g. packed-rank{rank}.safetensors): o_proj, down_proj,\n"
    "                  out_proj, w2 split K (a K range that cuts a scale group gets the exact finer group\n"
    "                  gcd(G, k0, k), column G); gate_up_proj its two halves; q/k/v_proj, gate/up_proj, w1, w3 split N\n"
    "  --tp-split      rows|columns|gate_up: one rule for every selected layer instead of the names'\n";

int run_convert(const std::vector<std::string>& argv) {
  lowbit::cli::Args a(argv, {"in", "out", "config", "format", "group", "layer", "act", "tp-size", "tp-rank", "tp-split"},
                      {"sym", "asym", "round-scales", "fuse-gate-up", "fold-act-order", "no-npacked", "help"});
  if (a.has("help")) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (!a.ok()) {
    std::fprintf(stderr, "lowbit convert: %s\n%s", a.error().c_str(), kUsage);
    return 2;
  }
  using namespace lowbit::int4;
  ConvertOptions o;
  o.in_path = a.get("in");
  o.out_path = a.get("out");
  o.config_path = a.get("config");
  o.layer_prefix = a.get("layer");
  if (o.in_path.empty() || o.out_path.empty()) {
    std::fprintf(stderr, "lowbit convert: --in and --out are required\n%s", kUsage);
    return 2;
  }
  std::string fmt = a.get("format");
  if (fmt == "gptq") o.format = CheckpointFormat::kGptqV1;
  else if (fmt == "gptq_v2") o.format = CheckpointFormat::kGptqV2;
  else if (fmt == "awq") o.format = CheckpointFormat::kAwq;
  else if (fmt == "ct" || fmt == "compressed-tensors") o.format = CheckpointFormat::kCompressedTensors;
  else if (!fmt.empty()) {
    std::fprintf(stderr, "lowbit convert: unknown --format '%s' (gptq, gptq_v2, awq, ct)\n", fmt.c_str());
    return 2;
  }
  o.group_size = static_cast<int>(a.get_int("group", 0));
  if (a.has("sym") && a.has("asym")) {
    std::fprintf(stderr, "lowbit convert: --sym and --asym exclude each other\n");
    return 2;
  }
  if (a.has("sym")) o.symmetric = 1;
  if (a.has("asym")) o.symmetric = 0;
  std::string act = a.get("act", "bf16");
  if (act != "bf16" && act != "fp16") {
    std::fprintf(stderr, "lowbit convert: --act must be bf16 or fp16\n");
    return 2;
  }
  o.act = act == "fp16" ? lowbit::DType::kF16 : lowbit::DType::kBF16;
  o.scale_policy = a.has("round-scales") ? ScalePolicy::kRound : ScalePolicy::kExact;
  o.fuse_gate_up = a.has("fuse-gate-up");
  o.fold_act_order = a.has("fold-act-order");
  o.write_npacked = !a.has("no-npacked");
  o.tp_size = static_cast<int>(a.get_int("tp-size", 1));
  o.tp_rank = a.get("tp-rank") == "all" ? kAllTpRanks : static_cast<int>(a.get_int("tp-rank", 0));
  if (o.tp_size < 1 || (o.tp_rank != kAllTpRanks && (o.tp_rank < 0 || o.tp_rank >= o.tp_size))) {
    std::fprintf(stderr, "lowbit convert: --tp-rank %d outside [0, --tp-size %d)\n", o.tp_rank, o.tp_size);
    return 2;
  }
  if (const std::string split = a.get("tp-split"); !split.empty()) {
    for (TpSplit t : {TpSplit::kColumns, TpSplit::kRows, TpSplit::kGateUp})
      if (split == tp_split_name(t)) o.tp_split = static_cast<int>(t);
    if (o.tp_split < 0) {
      std::fprintf(stderr, "lowbit convert: unknown --tp-split '%s' (rows, columns, gate_up)\n", split.c_str());
      return 2;
    }
  }
  if (!a.ok()) {
    std::fprintf(stderr, "lowbit convert: %s\n", a.error().c_str());
    return 2;
  }
  if (isatty(fileno(stderr)))  // a line per unit while a long conversion runs
    o.progress = [](size_t done, size_t total, const std::string& layer) {
      std::fprintf(stderr, "\r[%zu/%zu] %-72.72s", done, total, layer.c_str());
      if (done == total) std::fprintf(stderr, "\n");
    };
  ConvertSummary sum;
  lowbit::Status st = convert_checkpoint(o, &sum);
  if (!st.ok()) {
    std::fprintf(stderr, "lowbit convert: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("%zu shard(s), config %s\n", sum.shards, sum.config_path.empty() ? "none" : sum.config_path.c_str());
  size_t layers = 0;  // one entry per layer and rank written
  for (const auto& L : sum.layers) layers += L.tp_rank <= 0;
  std::printf("format %s, %zu layer(s), activation dtype %s", checkpoint_format_name(sum.format), layers,
              act.c_str());
  if (o.tp_size > 1 && o.tp_rank == kAllTpRanks)
    std::printf(", tensor-parallel ranks 0..%d of %d", o.tp_size - 1, o.tp_size);
  else if (o.tp_size > 1)
    std::printf(", tensor-parallel rank %d of %d", o.tp_rank, o.tp_size);
  for (size_t i = 0; i < sum.out_paths.size(); ++i) std::printf("%s%s", i == 0 ? " -> " : ", ", sum.out_paths[i].c_str());
  std::printf("\n");
  // "kernel": the layout repack_for_kernels() gives this weight at load time (the GPU path).
  std::printf("%-48s %-8s %4s %7s %7s %6s %5s %9s %-8s %-9s %11s %11s %8s %-7s\n", "layer", "source", "E", "N", "K", "G",
              "sym", "act-order", "layout", "kernel", "in bytes", "out bytes", "rounded", "split@rank");
  size_t tin = 0, tout = 0, folded = 0;
  for (const auto& L : sum.layers) {
    const lowbit::int4::WeightShape ks{L.experts, L.n, L.k, L.group_size, L.symmetric, o.act};
    // split: the TP rule of this shard; G then is the shard's (a K shard's refined group shows
    // the checkpoint's too, as "64<128").
    char split[32] = "-";
    if (L.tp_split >= 0)
      std::snprintf(split, sizeof split, "%s@%d", tp_split_name(static_cast<TpSplit>(L.tp_split)), L.tp_rank);
    char g[32];
    if (L.group_size != L.checkpoint_group_size)
      std::snprintf(g, sizeof g, "%d<%d", L.group_size, L.checkpoint_group_size);
    else
      std::snprintf(g, sizeof g, "%d", L.group_size);
    std::printf("%-48s %-8s %4d %7d %7d %6s %5s %9s %-8s %-9s %11zu %11zu %8zu %-7s\n", L.prefix.c_str(),
                checkpoint_format_name(L.source), L.experts, L.n, L.k, g,
                L.symmetric ? "yes" : "no", L.act_order ? "yes" : !L.act_order_folded_into.empty() ? "folded" : "no",
                weight_layout_name(L.layout),
                lowbit::int4::kernel_layout_name(lowbit::int4::kernel_layout_for(ks)), L.in_bytes, L.out_bytes,
                L.report.scales_rounded, split);
    if (L.tp_rank <= 0) tin += L.in_bytes;  // each layer read once, whatever the ranks written
    if (L.tp_rank <= 0 && !L.act_order_folded_into.empty()) ++folded;
    tout += L.out_bytes;
  }
  std::printf("total: %zu bytes in, %zu bytes out (%s)\n", tin, tout,
              o.write_npacked ? "K-packed + N-packed copies" : "K-packed only");
  if (folded > 0)
    std::printf("act-order folded: %zu down layer(s) read their input in stored order; their gate / up layers' output "
                "columns follow it (metadata columns_permuted_by)\n",
                folded);
  return 0;
}

}  // namespace

LOWBIT_REGISTER_COMMAND("convert", "convert a GPTQ/AWQ/compressed-tensors INT4 checkpoint to lowbit's packed layout",
                        run_convert);
