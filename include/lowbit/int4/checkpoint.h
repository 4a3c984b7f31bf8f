// Whole-checkpoint conversion (what `lowbit convert` runs): find the INT4 linear layers of a
// safetensors checkpoint (GPTQ v1/v2, AWQ, compressed-tensors pack-quantized; one file, or a
// model directory / index of shards as Hugging Face stores them), convert each to the
// canonical K-packed layout and its load-time layout (N-packed when N % 8 == 0), and write
// them to one safetensors file in lowbit's layout. Input shards are memory-mapped and the
// output is written layer by layer (io::SafetensorsWriter), so the host holds one layer (one
// MoE layer's stacked experts) at a time, not the model.
//
// Output tensors per layer prefix P (E experts; E = 1 for a plain linear layer):
//   P.qweight_kpacked  U8      [E, N, K/2]      canonical K-packed (weights.h)
//   P.scales_kpacked   F16/BF16 [E, N, NG]
//   P.zeros_kpacked    U8      [E, ceil(N/2), NG]  asymmetric only
//   P.k_perm           I32     [E, K]           act-order only (x' = x[:, k_perm])
//   P.qweight_npacked  I32     [E, K, N/8]      when N % 8 == 0 (NPackedWeights), unless !write_npacked
//   P.scales_npacked   F16/BF16 [E, NG, N]
//   P.zeros_npacked    F16/BF16 [E, NG, N]      asymmetric only
// MoE experts: checkpoint layers A.experts.<e>.B for e = 0..E-1 (E >= 2, every index
// present, identical N, K, G and symmetry) are stacked into ONE weight P = A.experts.B with
// E experts (expert e = checkpoint layer A.experts.<e>.B). Anything else (a missing index,
// mismatched shapes, a single expert) is written one layer per checkpoint layer, E = 1.
// Metadata: "lowbit.format" = "int4-packed-v1", "lowbit.act" = fp16|bf16, and per layer
// "P" = JSON {"source","experts","n","k","group_size","symmetric","act_order","layout",
// "scales_rounded"} (+ "expert_layers": the checkpoint prefixes, in expert order).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lowbit/int4/formats.h"
#include "lowbit/io/safetensors.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

enum class CheckpointFormat : uint8_t { kUnknown = 0, kGptqV1, kGptqV2, kAwq, kCompressedTensors };
const char* checkpoint_format_name(CheckpointFormat f);

constexpr int kAllTpRanks = -1;  // ConvertOptions::tp_rank: write every rank's shard

struct ConvertOptions {
  // in_path: a .safetensors file, a shard index (*.safetensors.index.json) or a directory
  // holding either (io::SafetensorsCheckpoint).
  std::string in_path, out_path;
  // Optional HF config.json with "quantization_config" (or AutoGPTQ's quantize_config.json).
  // Empty with a directory or index input and no `format`: the directory's config.json when it
  // has a quantization_config, else its quantize_config.json, else none.
  std::string config_path;
  CheckpointFormat format = CheckpointFormat::kUnknown;  // kUnknown: config, else auto-detect
  int group_size = 0;        // 0: from config, else inferred from the scale shape
  int symmetric = -1;        // -1: from config, else from the zeros (all z = 8: symmetric); 0/1 forced
  std::string layer_prefix;  // only layers whose prefix starts with this
  DType act = DType::kBF16;
  ScalePolicy scale_policy = ScalePolicy::kExact;
  // Tensor parallelism (shard.h): write rank tp_rank's shard of every layer, split by its
  // name: o_proj / down_proj / w2 / out_proj by rows (K), gate_up_proj and w13 as [gate; up] halves,
  // other q/k/v/gate/up/w1/w3 projections by columns (N); tp_split >= 0 (a TpSplit) forces
  // one rule for every selected layer. A layer the rules do not name is refused.
  // tp_rank = kAllTpRanks: every rank's file in one pass (each unit read and converted once),
  // out_path holding "{rank}" (replaced by 0..tp_size-1; also honoured for one rank).
  int tp_rank = 0, tp_size = 1;
  int tp_split = -1;
  // Write X.gate_proj and X.up_proj (Mixtral: X.w1 and X.w3) as one layer X.gate_up_proj
  // (X.w13) = [gate; up] along N (concat_n): the w13 fused_moe takes, or one GEMM for a dense
  // MLP's gate and up. Metadata "fused_from": [gate layer, up layer]. With TP, its shard is
  // tp_shard(kGateUp). Parts that cannot be joined (shapes, act-order permutations) are an error.
  bool fuse_gate_up = false;
  // Fold each act-order X.down_proj's (X.w2's) permutation into X.gate_proj and X.up_proj (X.w1,
  // X.w3), or into both halves of a checkpoint's fused X.gate_up_proj (X.w13) (act_order_fold.h):
  // their output columns are written in down's stored row order and down
  // is written without k_perm. The layer computes the same bits with one activation gather less,
  // and down can be cut into K shards (TP), which an act-order weight cannot. An act-order down
  // layer without its gate and up beside it is an error. Metadata: "act_order_folded_into" on
  // down, "columns_permuted_by" on the producers (their columns no longer follow the checkpoint).
  bool fold_act_order = false;
  // Also write each layer's N-packed copy (when N % 8 == 0). false: the canonical K-packed
  // layout only, about half the file; repack_for_kernels at load time reads only that.
  bool write_npacked = true;
  // Called after each unit of work is written (a layer, one MoE layer's stacked experts, a fused
  // gate + up pair): units done so far, units in all, the last output layer written.
  std::function<void(size_t done, size_t total, const std::string& layer)> progress;
};

struct ConvertedLayer {
  std::string prefix;  // output prefix (A.experts.B for stacked experts)
  int experts = 1;
  CheckpointFormat source = CheckpointFormat::kUnknown;
  int n = 0, k = 0, group_size = 0;
  bool symmetric = true, act_order = false;
  WeightLayout layout = WeightLayout::kKPacked;
  int tp_split = -1;              // the TpSplit this shard was cut by (-1: whole layer)
  int tp_rank = -1;               // the rank whose shard this is (-1: whole layer)
  int checkpoint_group_size = 0;  // the checkpoint's G (group_size differs where a K shard refined it)
  // fold_act_order: on a down layer, the layers its act-order permutation went into (act_order is
  // then false); on those layers, the down layer whose permutation reordered their columns.
  std::vector<std::string> act_order_folded_into;
  std::string columns_permuted_by;
  size_t in_bytes = 0, out_bytes = 0;
  ConvertReport report;
};

struct ConvertSummary {
  CheckpointFormat format = CheckpointFormat::kUnknown;
  size_t shards = 0;        // safetensors files read
  std::string config_path;  // the quantization config read ("" when none)
  std::vector<std::string> out_paths;  // the files written (one per TP rank written)
  std::vector<ConvertedLayer> layers;
};

// Reads options.in_path, converts, writes options.out_path. Any layer that cannot be
// converted exactly fails the whole conversion with a message naming the layer.
Status convert_checkpoint(const ConvertOptions& options, ConvertSummary* summary);

// Loads one layer (all its experts) of a file written by convert_checkpoint back into
// K-packed form.
Status load_converted_layer(const io::SafetensorsFile& f, const std::string& prefix, KPackedWeights* out);

}  // namespace lowbit::int4
