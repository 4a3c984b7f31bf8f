// Checkpoint -> lowbit INT4 layout conversion (checkpoint.h). Reading is validated by the
// safetensors reader; every tensor's dtype and shape is checked here before conversion.
#include "lowbit/int4/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "lowbit/int4/act_order_fold.h"
#include "lowbit/int4/shard.h"

namespace lowbit::int4 {
namespace {

using io::SafetensorsCheckpoint;
using io::SafetensorsFile;
using io::TensorDType;
using io::TensorInfo;

// A layer name of the form A.experts.<e>.B (B not empty; the last ".experts.<digits>." that leaves
// one, as the pattern ^(.*)\.experts\.([0-9]+)\.(.+)$ matches it): A, e's digits and B. (A
// hand-written match: std::regex drew GCC 12's -Wmaybe-uninitialized from libstdc++ in the
// sanitizer build.)
struct ExpertName {
  std::string head, index, tail;
};
bool split_expert_name(const std::string& s, ExpertName* out) {
  static const std::string kKey = ".experts.";
  for (size_t pos = s.rfind(kKey); pos != std::string::npos; pos = pos == 0 ? std::string::npos : s.rfind(kKey, pos - 1)) {
    const size_t d = pos + kKey.size();
    size_t e = d;
    while (e < s.size() && s[e] >= '0' && s[e] <= '9') ++e;
    if (e > d && e + 1 < s.size() && s[e] == '.') {
      *out = {s.substr(0, pos), s.substr(d, e - d), s.substr(e + 1)};
      return true;
    }
  }
  return false;
}

// The TP split of a layer by its name's last component (ConvertOptions::tp_split forces one):
// the row-parallel projections (attention output, MLP / expert down) split K, a fused gate_up
// splits its two halves, the other named projections split N. Fused qkv_proj is refused: its q,
// k and v parts split by heads (with GQA, not one equal column range), which needs the model's
// head counts.
Status tp_split_for(const std::string& layer, int forced, TpSplit* out) {
  if (forced >= 0) {
    *out = static_cast<TpSplit>(forced);
    return Status::Ok();
  }
  const size_t dot = layer.rfind('.');
  const std::string last = dot == std::string::npos ? layer : layer.substr(dot + 1);
  for (const char* r : {"o_proj", "down_proj", "out_proj", "w2"})
    if (last == r) {
      *out = TpSplit::kRows;
      return Status::Ok();
    }
  if (last == "gate_up_proj" || last == "w13") {
    *out = TpSplit::kGateUp;
    return Status::Ok();
  }
  for (const char* c : {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "w1", "w3"})
    if (last == c) {
      *out = TpSplit::kColumns;
      return Status::Ok();
    }
  return make_status(StatusCode::kInvalidArgument,
                     "layer '%s': no tensor-parallel split for '%s' (rows: o_proj, down_proj, out_proj, w2; columns: "
                     "q/k/v_proj, gate_proj, up_proj, w1, w3; gate_up_proj, w13: halves%s); force one with --tp-split or "
                     "leave the layer out with --layer",
                     layer.c_str(), last.c_str(), last == "qkv_proj" ? "; fused qkv splits by heads" : "");
}

Status get_info(const SafetensorsCheckpoint& f, const std::string& name, size_t rank, const TensorInfo** t) {
  LOWBIT_RETURN_IF_ERROR(f.find(name, t));
  LOWBIT_CHECK_ARG((*t)->shape.size() == rank, "tensor '%s' has rank %zu, expected %zu", name.c_str(),
                   (*t)->shape.size(), rank);
  return Status::Ok();
}

// Integer tensor (I32, or I64 for g_idx / weight_shape) -> int32 vector (memcpy: the data may
// be unaligned in files written without padding).
template <typename File>  // SafetensorsCheckpoint (conversion) or SafetensorsFile (loading)
Status read_i32(const File& f, const TensorInfo& t, std::vector<int32_t>* out) {
  const size_t n = static_cast<size_t>(t.numel());
  out->resize(n);
  if (t.dtype == TensorDType::kI32 || t.dtype == TensorDType::kU32) {
    if (n) std::memcpy(out->data(), f.data(t), n * 4);
    return Status::Ok();
  }
  if (t.dtype == TensorDType::kI64) {
    for (size_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, f.data(t) + 8 * i, 8);
      LOWBIT_CHECK_ARG(v >= INT32_MIN && v <= INT32_MAX, "tensor '%s'[%zu] = %lld does not fit int32", t.name.c_str(), i,
                       static_cast<long long>(v));
      (*out)[i] = static_cast<int32_t>(v);
    }
    return Status::Ok();
  }
  return make_status(StatusCode::kInvalidArgument, "tensor '%s' has dtype %s, expected I32 (or I64)", t.name.c_str(),
                     io::tensor_dtype_name(t.dtype));
}

// Scale tensor -> 16-bit bits (F16/BF16) or fp32 values, with its source dtype.
Status read_scales(const SafetensorsCheckpoint& f, const TensorInfo& t, ScaleSource* src, std::vector<uint16_t>* s16,
                   std::vector<float>* s32) {
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype == TensorDType::kF16 || t.dtype == TensorDType::kBF16) {
    *src = t.dtype == TensorDType::kF16 ? ScaleSource::kF16 : ScaleSource::kBF16;
    s16->resize(n);
    if (n) std::memcpy(s16->data(), f.data(t), n * 2);
    return Status::Ok();
  }
  if (t.dtype == TensorDType::kF32) {
    *src = ScaleSource::kF32;
    s32->resize(n);
    if (n) std::memcpy(s32->data(), f.data(t), n * 4);
    return Status::Ok();
  }
  return make_status(StatusCode::kInvalidArgument, "tensor '%s' has dtype %s, expected F16, BF16 or F32",
                     t.name.c_str(), io::tensor_dtype_name(t.dtype));
}

// 16-bit source scales re-expressed for converters that take fp16 only (AWQ).
Status scales_to_f16(ScaleSource src, std::vector<uint16_t>* s16, const std::vector<float>& s32, const char* who) {
  if (src == ScaleSource::kF16) return Status::Ok();
  return make_status(StatusCode::kNotSupported, "%s: AWQ scales must be F16 (got %s)", who,
                     src == ScaleSource::kBF16 ? "BF16" : "F32");
}

struct QuantConfig {
  CheckpointFormat format = CheckpointFormat::kUnknown;
  int group_size = 0;  // 0 unknown
  int symmetric = -1;
  bool desc_act = false;
};

Status parse_config(const std::string& path, QuantConfig* qc) {
  std::ifstream in(path);
  if (!in) return make_status(StatusCode::kIoError, "convert: cannot open config '%s'", path.c_str());
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_status(StatusCode::kCorruptData, "convert: config '%s' is not a JSON object", path.c_str());
  try {
    const nlohmann::json& q = j.contains("quantization_config") ? j["quantization_config"] : j;
    std::string method = q.value("quant_method", std::string());
    if (method.empty() && q.contains("bits")) method = "gptq";  // AutoGPTQ quantize_config.json
    auto gsize = [](const nlohmann::json& v) { return v.is_null() ? kPerChannel : v.get<int>(); };
    if (method == "gptq") {
      LOWBIT_CHECK_ARG(q.value("bits", 4) == 4, "convert: config bits=%d, only 4-bit is supported", q.value("bits", 4));
      std::string cf = q.value("checkpoint_format", std::string("gptq"));
      qc->format = cf == "gptq_v2" ? CheckpointFormat::kGptqV2 : CheckpointFormat::kGptqV1;
      if (q.contains("group_size")) qc->group_size = gsize(q["group_size"]);
      if (q.contains("sym")) qc->symmetric = q["sym"].get<bool>() ? 1 : 0;
      qc->desc_act = q.value("desc_act", false);
    } else if (method == "awq") {
      int bits = q.contains("bits") ? q["bits"].get<int>() : q.value("w_bit", 4);
      LOWBIT_CHECK_ARG(bits == 4, "convert: config bits=%d, only 4-bit is supported", bits);
      std::string ver = q.value("version", std::string("gemm"));
      for (auto& c : ver) c = static_cast<char>(std::tolower(c));
      LOWBIT_CHECK_ARG(ver == "gemm", "convert: AWQ version '%s' not supported (only GEMM)", ver.c_str());
      qc->format = CheckpointFormat::kAwq;
      const char* gk = q.contains("group_size") ? "group_size" : "q_group_size";
      if (q.contains(gk)) qc->group_size = gsize(q[gk]);
      if (q.contains("zero_point")) qc->symmetric = q["zero_point"].get<bool>() ? 0 : 1;
    } else if (method == "compressed-tensors") {
      std::string fmt = q.value("format", std::string());
      LOWBIT_CHECK_ARG(fmt == "pack-quantized", "convert: compressed-tensors format '%s' not supported (pack-quantized only)",
                       fmt.c_str());
      qc->format = CheckpointFormat::kCompressedTensors;
      if (q.contains("config_groups") && q["config_groups"].is_object() && !q["config_groups"].empty()) {
        const auto& w = q["config_groups"].begin().value()["weights"];
        LOWBIT_CHECK_ARG(w.value("num_bits", 4) == 4, "convert: compressed-tensors num_bits=%d, only 4 supported",
                         w.value("num_bits", 4));
        std::string strategy = w.value("strategy", std::string("group"));
        if (strategy == "channel") qc->group_size = kPerChannel;
        else if (w.contains("group_size")) qc->group_size = gsize(w["group_size"]);
        if (w.contains("symmetric")) qc->symmetric = w["symmetric"].get<bool>() ? 1 : 0;
      }
    } else {
      return make_status(StatusCode::kNotSupported, "convert: quant_method '%s' not supported (gptq, awq, compressed-tensors)",
                         method.c_str());
    }
  } catch (const std::exception& e) {
    return make_status(StatusCode::kCorruptData, "convert: config '%s': %s", path.c_str(), e.what());
  }
  return Status::Ok();
}

// Group size from the scale tensor's group count, checked against a configured value.
Status resolve_group(int configured, int k, int64_t ng64, const std::string& layer, int* g) {
  LOWBIT_CHECK_ARG(ng64 >= 1 && ng64 <= k && k % ng64 == 0, "layer '%s': K=%d not divisible by %lld scale groups",
                   layer.c_str(), k, static_cast<long long>(ng64));
  const int ng = static_cast<int>(ng64);
  int inferred = ng == 1 ? kPerChannel : k / ng;
  if (configured == 0) {
    *g = inferred;
    return Status::Ok();
  }
  int cfg_groups = configured == kPerChannel ? 1 : (k + configured - 1) / configured;
  // A configured G >= K is one group: the same as per-channel.
  LOWBIT_CHECK_ARG(cfg_groups == ng, "layer '%s': group_size=%d implies %d groups over K=%d, the scales have %d",
                   layer.c_str(), configured, cfg_groups, k, ng);
  *g = ng == 1 ? kPerChannel : configured;
  return Status::Ok();
}

Status convert_gptq(const SafetensorsCheckpoint& f, const std::string& p, const QuantConfig& qc, const ConvertOptions& o,
                    KPackedWeights* w, ConvertedLayer* L) {
  const TensorInfo *qw, *sc, *qz = nullptr, *gi = nullptr;
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".qweight", 2, &qw));
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".scales", 2, &sc));
  if (f.has(p + ".qzeros")) LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".qzeros", 2, &qz));
  if (f.has(p + ".g_idx")) LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".g_idx", 1, &gi));
  GptqLinear g;
  g.k = static_cast<int>(qw->shape[0] * 8);
  g.n = static_cast<int>(qw->shape[1]);
  LOWBIT_CHECK_ARG(qw->shape[0] > 0 && qw->shape[0] < (1 << 24) && qw->shape[1] > 0 && qw->shape[1] < (1 << 27),
                   "layer '%s': qweight shape out of range", p.c_str());
  LOWBIT_CHECK_ARG(sc->shape[1] == g.n, "layer '%s': scales [%lld, %lld] do not match N=%d", p.c_str(),
                   (long long)sc->shape[0], (long long)sc->shape[1], g.n);
  LOWBIT_RETURN_IF_ERROR(resolve_group(qc.group_size, g.k, sc->shape[0], p, &g.group_size));
  g.version = qc.format == CheckpointFormat::kGptqV2 ? GptqVersion::kV2 : GptqVersion::kV1;
  g.symmetric = qc.symmetric == -1 ? true : qc.symmetric == 1;
  LOWBIT_RETURN_IF_ERROR(read_i32(f, *qw, &g.qweight));
  LOWBIT_RETURN_IF_ERROR(read_scales(f, *sc, &g.scale_source, &g.scales, &g.scales_f32));
  if (qz) LOWBIT_RETURN_IF_ERROR(read_i32(f, *qz, &g.qzeros));
  if (gi) LOWBIT_RETURN_IF_ERROR(read_i32(f, *gi, &g.g_idx));
  L->in_bytes = qw->nbytes + sc->nbytes + (qz ? qz->nbytes : 0) + (gi ? gi->nbytes : 0);
  Status st = gptq_to_kpacked(g, o.act, o.scale_policy, w, &L->report);
  if (qc.symmetric == -1 && !st.ok() && st.code() == StatusCode::kCorruptData && !g.qzeros.empty()) {
    // Symmetry unknown (no config, no --sym/--asym): zeros that are not all 8 mean asymmetric.
    g.symmetric = false;
    L->report = {};
    st = gptq_to_kpacked(g, o.act, o.scale_policy, w, &L->report);
  }
  L->symmetric = g.symmetric;
  return st;
}

Status convert_awq(const SafetensorsCheckpoint& f, const std::string& p, const QuantConfig& qc, const ConvertOptions& o,
                   KPackedWeights* w, ConvertedLayer* L) {
  const TensorInfo *qw, *sc, *qz = nullptr;
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".qweight", 2, &qw));
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".scales", 2, &sc));
  if (f.has(p + ".qzeros")) LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".qzeros", 2, &qz));
  AwqLinear a;
  LOWBIT_CHECK_ARG(qw->shape[0] > 0 && qw->shape[0] < (1 << 27) && qw->shape[1] > 0 && qw->shape[1] < (1 << 24),
                   "layer '%s': qweight shape out of range", p.c_str());
  a.k = static_cast<int>(qw->shape[0]);
  a.n = static_cast<int>(qw->shape[1] * 8);
  LOWBIT_CHECK_ARG(sc->shape[1] == a.n, "layer '%s': scales [%lld, %lld] do not match N=%d", p.c_str(),
                   (long long)sc->shape[0], (long long)sc->shape[1], a.n);
  LOWBIT_RETURN_IF_ERROR(resolve_group(qc.group_size, a.k, sc->shape[0], p, &a.group_size));
  LOWBIT_RETURN_IF_ERROR(read_i32(f, *qw, &a.qweight));
  ScaleSource src;
  std::vector<float> s32;
  LOWBIT_RETURN_IF_ERROR(read_scales(f, *sc, &src, &a.scales, &s32));
  LOWBIT_RETURN_IF_ERROR(scales_to_f16(src, &a.scales, s32, p.c_str()));
  if (qz && qc.symmetric != 1) LOWBIT_RETURN_IF_ERROR(read_i32(f, *qz, &a.qzeros));
  L->in_bytes = qw->nbytes + sc->nbytes + (qz ? qz->nbytes : 0);
  L->symmetric = a.qzeros.empty();
  return awq_to_kpacked(a, o.act, o.scale_policy, w, &L->report);
}

Status convert_ct(const SafetensorsCheckpoint& f, const std::string& p, const QuantConfig& qc, const ConvertOptions& o,
                  KPackedWeights* w, ConvertedLayer* L) {
  const TensorInfo *wp, *ws, *wsh, *zp = nullptr;
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".weight_packed", 2, &wp));
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".weight_scale", 2, &ws));
  LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".weight_shape", 1, &wsh));
  if (f.has(p + ".weight_zero_point")) LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".weight_zero_point", 2, &zp));
  const TensorInfo* gi = nullptr;  // actorder "group"
  if (f.has(p + ".weight_g_idx")) LOWBIT_RETURN_IF_ERROR(get_info(f, p + ".weight_g_idx", 1, &gi));
  std::vector<int32_t> shape;
  LOWBIT_RETURN_IF_ERROR(read_i32(f, *wsh, &shape));
  LOWBIT_CHECK_ARG(shape.size() == 2 && shape[0] > 0 && shape[1] > 0, "layer '%s': weight_shape must be [N, K] > 0",
                   p.c_str());
  CtLinear c;
  c.n = shape[0];
  c.k = shape[1];
  LOWBIT_CHECK_ARG(ws->shape[0] == c.n, "layer '%s': weight_scale rows %lld != N=%d", p.c_str(), (long long)ws->shape[0],
                   c.n);
  LOWBIT_RETURN_IF_ERROR(resolve_group(qc.group_size, c.k, ws->shape[1], p, &c.group_size));
  LOWBIT_RETURN_IF_ERROR(read_i32(f, *wp, &c.weight_packed));
  LOWBIT_RETURN_IF_ERROR(read_scales(f, *ws, &c.scale_source, &c.weight_scale, &c.weight_scale_f32));
  if (zp) LOWBIT_RETURN_IF_ERROR(read_i32(f, *zp, &c.weight_zero_point));
  if (gi) LOWBIT_RETURN_IF_ERROR(read_i32(f, *gi, &c.weight_g_idx));
  L->in_bytes = wp->nbytes + ws->nbytes + wsh->nbytes + (zp ? zp->nbytes : 0) + (gi ? gi->nbytes : 0);
  L->symmetric = c.weight_zero_point.empty();
  return ct_to_kpacked(c, o.act, o.scale_policy, w, &L->report);
}

// One checkpoint layer (all formats) -> K-packed, with an error that names the layer.
Status convert_layer(const SafetensorsCheckpoint& f, const std::string& p, const QuantConfig& qc,
                     const ConvertOptions& o, KPackedWeights* w, ConvertedLayer* L) {
  L->prefix = p;
  L->source = qc.format;
  Status st;
  if (f.has(p + ".weight_packed")) {
    L->source = CheckpointFormat::kCompressedTensors;
    st = convert_ct(f, p, qc, o, w, L);
  } else if (qc.format == CheckpointFormat::kAwq) {
    st = convert_awq(f, p, qc, o, w, L);
  } else if (qc.format == CheckpointFormat::kGptqV1 || qc.format == CheckpointFormat::kGptqV2) {
    st = convert_gptq(f, p, qc, o, w, L);
  } else {
    st = make_status(StatusCode::kInvalidArgument, "format %s does not use .qweight", checkpoint_format_name(qc.format));
  }
  if (st.ok()) return st;
  const bool named = st.message().find("'" + p + "'") != std::string::npos;
  return Status(st.code(), named ? "convert: " + st.message() : "convert: layer '" + p + "': " + st.message());
}

// The quantization config beside a checkpoint directory: config.json when it has a
// "quantization_config", else AutoGPTQ's quantize_config.json; "" when neither.
std::string find_config(const std::string& dir) {
  const std::string hf = dir + "/config.json";
  if (std::ifstream in(hf); in) {
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("quantization_config")) return hf;
  }
  const std::string autogptq = dir + "/quantize_config.json";
  return std::ifstream(autogptq) ? autogptq : std::string();
}

// What the output file holds of one layer: its tensors, written as soon as the layer is
// converted, and its metadata entry.
Status write_layer(const KPackedWeights& w, bool npacked_copy, ConvertedLayer* L, io::SafetensorsWriter* out,
                   std::map<std::string, std::string>* meta, const std::vector<std::string>& expert_layers,
                   const std::vector<std::string>& fused_from) {
  const std::string& p = L->prefix;
  const WeightShape& s = w.shape;
  L->experts = s.experts;
  L->n = s.n;
  L->k = s.k;
  L->group_size = s.group_size;
  L->symmetric = s.symmetric;
  L->act_order = !w.k_perm.empty();
  L->layout = npacked_copy ? layout_for(s) : WeightLayout::kKPacked;
  const TensorDType sdt = s.act == DType::kF16 ? TensorDType::kF16 : TensorDType::kBF16;
  const int64_t E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  LOWBIT_RETURN_IF_ERROR(out->add({p + ".qweight_kpacked", TensorDType::kU8, {E, N, K / 2}, w.qweight.data()}));
  LOWBIT_RETURN_IF_ERROR(out->add({p + ".scales_kpacked", sdt, {E, N, NG}, w.scales.data()}));
  if (!s.symmetric)
    LOWBIT_RETURN_IF_ERROR(out->add({p + ".zeros_kpacked", TensorDType::kU8, {E, (N + 1) / 2, NG}, w.zeros.data()}));
  if (L->act_order) LOWBIT_RETURN_IF_ERROR(out->add({p + ".k_perm", TensorDType::kI32, {E, K}, w.k_perm.data()}));
  L->out_bytes = w.qweight.size() + 2 * w.scales.size() + w.zeros.size() + 4 * w.k_perm.size();
  if (L->layout == WeightLayout::kNPacked) {
    NPackedWeights np;
    LOWBIT_RETURN_IF_ERROR(repack_to_npacked(w, &np));
    LOWBIT_RETURN_IF_ERROR(out->add({p + ".qweight_npacked", TensorDType::kI32, {E, K, N / 8}, np.qweight.data()}));
    LOWBIT_RETURN_IF_ERROR(out->add({p + ".scales_npacked", sdt, {E, NG, N}, np.scales.data()}));
    if (!s.symmetric) LOWBIT_RETURN_IF_ERROR(out->add({p + ".zeros_npacked", sdt, {E, NG, N}, np.zeros.data()}));
    L->out_bytes += 4 * np.qweight.size() + 2 * np.scales.size() + 2 * np.zeros.size();
  }
  nlohmann::json lj = {{"source", checkpoint_format_name(L->source)},
                       {"experts", L->experts},
                       {"n", L->n},
                       {"k", L->k},
                       {"group_size", L->group_size},
                       {"symmetric", L->symmetric},
                       {"act_order", L->act_order},
                       {"layout", weight_layout_name(L->layout)},
                       {"scales_rounded", L->report.scales_rounded}};
  if (L->tp_split >= 0) {
    lj["tp_split"] = tp_split_name(static_cast<TpSplit>(L->tp_split));
    lj["checkpoint_group_size"] = L->checkpoint_group_size;
  }
  if (!expert_layers.empty()) lj["expert_layers"] = expert_layers;  // a fused layer's: the gate's
  if (!fused_from.empty()) lj["fused_from"] = fused_from;          // [gate layer, up layer]
  if (!L->act_order_folded_into.empty()) lj["act_order_folded_into"] = L->act_order_folded_into;
  if (!L->columns_permuted_by.empty()) lj["columns_permuted_by"] = L->columns_permuted_by;
  (*meta)[p] = lj.dump();
  return Status::Ok();
}

}  // namespace

const char* checkpoint_format_name(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::kGptqV1: return "gptq";
    case CheckpointFormat::kGptqV2: return "gptq_v2";
    case CheckpointFormat::kAwq: return "awq";
    case CheckpointFormat::kCompressedTensors: return "compressed-tensors";
    default: return "unknown";
  }
}

Status convert_checkpoint(const ConvertOptions& o, ConvertSummary* summary) {
  LOWBIT_CHECK_ARG(summary != nullptr, "convert_checkpoint: summary is null");
  LOWBIT_CHECK_ARG(!o.in_path.empty() && !o.out_path.empty(), "convert: --in and --out are required");
  const bool all_ranks = o.tp_rank == kAllTpRanks;
  LOWBIT_CHECK_ARG(o.tp_size >= 1 && (all_ranks ? o.tp_size > 1 : o.tp_rank >= 0 && o.tp_rank < o.tp_size),
                   "convert: TP rank %d outside [0, size %d)%s", o.tp_rank, o.tp_size,
                   all_ranks ? " (all ranks need a TP size > 1)" : "");
  LOWBIT_CHECK_ARG(!all_ranks || o.out_path.find("{rank}") != std::string::npos,
                   "convert: writing all %d TP ranks needs '{rank}' in the output path (got '%s')", o.tp_size,
                   o.out_path.c_str());
  LOWBIT_CHECK_ARG(o.tp_split >= -1 && o.tp_split <= static_cast<int>(TpSplit::kGateUp), "convert: unknown TP split %d",
                   o.tp_split);
  SafetensorsCheckpoint f;
  LOWBIT_RETURN_IF_ERROR(SafetensorsCheckpoint::open(o.in_path, &f));
  summary->shards = f.shard_paths().size();
  summary->config_path = o.config_path;
  // The directory's config only when nothing was said: an explicit --format (with --group /
  // --sym) describes the checkpoint itself, e.g. one whose config names a method we do not parse.
  if (summary->config_path.empty() && f.whole_model() && o.format == CheckpointFormat::kUnknown)
    summary->config_path = find_config(f.directory());
  QuantConfig qc;
  if (!summary->config_path.empty()) LOWBIT_RETURN_IF_ERROR(parse_config(summary->config_path, &qc));
  if (o.format != CheckpointFormat::kUnknown) qc.format = o.format;
  if (o.group_size != 0) qc.group_size = o.group_size;
  if (o.symmetric != -1) qc.symmetric = o.symmetric;

  // Layers by tensor-name suffix.
  std::vector<std::string> prefixes;
  bool saw_ct = false, saw_q = false, saw_gidx = false;
  for (const auto& [name, t] : f.tensors()) {
    std::string p;
    if (name.ends_with(".weight_packed")) {
      p = name.substr(0, name.size() - 14);
      saw_ct = true;
    } else if (name.ends_with(".qweight")) {
      p = name.substr(0, name.size() - 8);
      saw_q = true;
      saw_gidx |= f.has(p + ".g_idx");
    } else {
      continue;
    }
    if (p.rfind(o.layer_prefix, 0) == 0) prefixes.push_back(p);
  }
  if (qc.format == CheckpointFormat::kUnknown) {
    if (saw_ct && !saw_q) qc.format = CheckpointFormat::kCompressedTensors;
    else if (saw_q && saw_gidx) qc.format = CheckpointFormat::kGptqV1;  // g_idx is GPTQ-only; v1 is the default
    else if (saw_q)
      return make_status(StatusCode::kInvalidArgument,
                         "convert: '%s' has .qweight tensors without g_idx: GPTQ or AWQ? pass --format or --config",
                         o.in_path.c_str());
  }
  LOWBIT_CHECK_ARG(!prefixes.empty(), "convert: no quantized layers (.qweight / .weight_packed) %s%s in '%s'",
                   o.layer_prefix.empty() ? "" : "with prefix ", o.layer_prefix.c_str(), o.in_path.c_str());
  summary->format = qc.format;
  summary->layers.clear();

  // Units of work, by name: MoE experts A.experts.<e>.B for e = 0..E-1 (E >= 2, every index
  // present) are one unit, to be stacked into A.experts.B with E experts (the [E, N, K] layout
  // fused_moe reads) when their shapes, groups and symmetry agree; every other layer is a unit
  // of its own. A unit is converted, written and freed before the next one is read, so memory
  // holds one unit (the largest MoE stack), not the checkpoint.
  struct Unit {
    std::vector<std::string> members;  // checkpoint prefixes, in expert order
    std::string stacked;               // A.experts.B, or "" for a plain layer
  };
  std::vector<Unit> units;
  {
    std::map<std::string, std::vector<std::pair<long, std::string>>> groups;
    for (const auto& p : prefixes) {
      ExpertName m;
      if (split_expert_name(p, &m) && m.index.size() < 9) groups[m.head + ".experts." + m.tail].push_back({std::stol(m.index), p});
    }
    std::map<std::string, bool> grouped;
    for (auto& [key, members] : groups) {
      std::sort(members.begin(), members.end());
      bool ok = members.size() >= 2;
      for (size_t j = 0; ok && j < members.size(); ++j) ok = members[j].first == static_cast<long>(j);
      if (!ok) continue;
      Unit u{{}, key};
      for (const auto& mb : members) {
        u.members.push_back(mb.second);
        grouped[mb.second] = true;
      }
      units.push_back(std::move(u));
    }
    for (const auto& p : prefixes)
      if (!grouped.count(p)) units.push_back({{p}, std::string()});
  }
  // The header's room: per output layer up to 7 tensor entries (~100 bytes each past the
  // name), its metadata entry (~300 bytes) and, for stacked experts, the list of their
  // checkpoint layers. Experts that turn out not to stack, or a header that needs more for
  // another reason, cost one copy of the data (SafetensorsWriter).
  size_t reserve = 4096;
  for (const auto& u : units) {
    reserve += 8 * (std::max(u.members[0].size(), u.stacked.size()) + 112) + 320;
    if (!u.stacked.empty())
      for (const auto& m : u.members) reserve += m.size() + 4;
  }
  // One output file per rank written (all ranks in one pass: every unit is read and converted
  // once, then cut T ways).
  std::vector<int> ranks;
  if (all_ranks)
    for (int r = 0; r < o.tp_size; ++r) ranks.push_back(r);
  else
    ranks.push_back(o.tp_rank);
  std::vector<std::unique_ptr<io::SafetensorsWriter>> outs;
  std::vector<std::map<std::string, std::string>> metas;
  summary->out_paths.clear();
  for (int r : ranks) {
    std::string path = o.out_path;
    for (size_t at = path.find("{rank}"); at != std::string::npos; at = path.find("{rank}"))
      path.replace(at, 6, std::to_string(r));
    summary->out_paths.push_back(path);
    outs.push_back(std::make_unique<io::SafetensorsWriter>());
    LOWBIT_RETURN_IF_ERROR(outs.back()->open(path, reserve));
    metas.push_back({{"lowbit.format", "int4-packed-v1"}, {"lowbit.act", dtype_name(o.act)}});
    if (o.tp_size > 1) metas.back()["lowbit.tp"] = std::to_string(r) + "/" + std::to_string(o.tp_size);
  }

  // Shards (tensor parallelism) and writes one output layer to every rank's file.
  auto emit = [&](ConvertedLayer L, const KPackedWeights& whole, const std::vector<std::string>& expert_layers,
                  const std::vector<std::string>& fused_from) {
    L.checkpoint_group_size = whole.shape.group_size;
    for (size_t i = 0; i < ranks.size(); ++i) {
      ConvertedLayer Lr = L;
      const KPackedWeights* wp = &whole;
      KPackedWeights shard;
      if (o.tp_size > 1) {  // this rank's shard of the (stacked) layer
        TpSplit split = TpSplit::kColumns;
        Status st = tp_split_for(L.prefix, o.tp_split, &split);
        if (st.ok()) st = tp_shard(whole, split, ranks[i], o.tp_size, &shard);
        if (!st.ok())
          return Status(st.code(), "convert: " + (st.message().rfind("layer '", 0) == 0
                                                      ? st.message()
                                                      : "layer '" + L.prefix + "': " + st.message()));
        Lr.tp_split = static_cast<int>(split);
        Lr.tp_rank = ranks[i];
        wp = &shard;
      }
      LOWBIT_RETURN_IF_ERROR(write_layer(*wp, o.write_npacked, &Lr, outs[i].get(), &metas[i], expert_layers, fused_from));
      summary->layers.push_back(std::move(Lr));
    }
    return Status::Ok();
  };

  // A unit converted: one piece (a plain layer, or its experts stacked), or one piece per
  // member when the experts do not share a shape.
  struct Piece {
    ConvertedLayer L;
    KPackedWeights w;
    std::vector<std::string> expert_layers;
  };
  auto convert_unit = [&](const Unit& u, std::vector<Piece>* pieces) -> Status {
    std::vector<ConvertedLayer> Ls(u.members.size());
    std::vector<KPackedWeights> ws(u.members.size());
    for (size_t i = 0; i < u.members.size(); ++i)
      LOWBIT_RETURN_IF_ERROR(convert_layer(f, u.members[i], qc, o, &ws[i], &Ls[i]));
    bool stack = !u.stacked.empty();
    for (size_t i = 1; stack && i < ws.size(); ++i) {
      const WeightShape& a = ws[i].shape;
      const WeightShape& b = ws[0].shape;
      stack = a.n == b.n && a.k == b.k && a.group_size == b.group_size && a.symmetric == b.symmetric;
    }
    pieces->clear();
    if (!stack) {  // plain layers (or experts that do not share a shape: one layer each)
      for (size_t i = 0; i < ws.size(); ++i) pieces->push_back({std::move(Ls[i]), std::move(ws[i]), {}});
      return Status::Ok();
    }
    Piece pc{Ls[0], {}, u.members};
    pc.L.prefix = u.stacked;
    for (size_t i = 1; i < Ls.size(); ++i) {
      pc.L.in_bytes += Ls[i].in_bytes;
      pc.L.report.scales_rounded += Ls[i].report.scales_rounded;
      pc.L.report.max_rel_scale_change = std::max(pc.L.report.max_rel_scale_change, Ls[i].report.max_rel_scale_change);
    }
    LOWBIT_RETURN_IF_ERROR(stack_experts(ws, &pc.w));
    pieces->push_back(std::move(pc));
    return Status::Ok();
  };

  // fuse_gate_up: X.gate_proj with X.up_proj (X.w1 with X.w3, Mixtral's names) become one
  // [gate; up] layer X.gate_up_proj (X.w13): fused_moe's w13, or one GEMM for a dense MLP.
  // fold_act_order: X.down_proj (X.w2) is converted with its gate and up, and an act-order one
  // folded into them (act_order_fold.h) before any of the three is written.
  struct MlpNames {
    const char *gate, *up, *down, *fused;
  };
  constexpr MlpNames kMlpNames[] = {{".gate_proj", ".up_proj", ".down_proj", ".gate_up_proj"},
                                    {".w1", ".w3", ".w2", ".w13"}};
  std::map<std::string, size_t> unit_of;  // output name -> unit
  auto out_name = [](const Unit& u) { return u.stacked.empty() ? u.members[0] : u.stacked; };
  for (size_t i = 0; i < units.size(); ++i) unit_of[out_name(units[i])] = i;
  std::vector<long> partner(units.size(), -1);  // gate unit -> its up unit
  std::vector<long> down_of(units.size(), -1);  // gate unit -> its down unit (fold_act_order)
  std::vector<bool> with_gate(units.size(), false);  // up / down units written with their gate
  std::vector<std::string> fused_name(units.size());
  if (o.fuse_gate_up || o.fold_act_order)
    for (size_t i = 0; i < units.size(); ++i) {
      const std::string n = out_name(units[i]);
      for (const MlpNames& mn : kMlpNames) {
        if (!n.ends_with(mn.gate)) continue;
        const std::string base = n.substr(0, n.size() - std::strlen(mn.gate));
        auto up = unit_of.find(base + mn.up);
        if (up == unit_of.end()) continue;
        auto down = o.fold_act_order ? unit_of.find(base + mn.down) : unit_of.end();
        if (down != unit_of.end()) {
          down_of[i] = static_cast<long>(down->second);
          with_gate[down->second] = true;
        }
        if (o.fuse_gate_up) fused_name[i] = base + mn.fused;
        if (o.fuse_gate_up || down_of[i] >= 0) {
          partner[i] = static_cast<long>(up->second);
          with_gate[up->second] = true;
        }
      }
      // A checkpoint that stores gate and up fused already (X.gate_up_proj, [gate; up] along N):
      // the one producer of X.down_proj, both halves reordered.
      for (const MlpNames& mn : kMlpNames) {
        if (!o.fold_act_order || !n.ends_with(mn.fused)) continue;
        const std::string base = n.substr(0, n.size() - std::strlen(mn.fused));
        auto down = unit_of.find(base + mn.down);
        if (down == unit_of.end() || unit_of.count(base + mn.gate) || with_gate[down->second]) continue;
        down_of[i] = static_cast<long>(down->second);
        with_gate[down->second] = true;
      }
    }
  auto is_down_name = [&](const std::string& n) {
    for (const MlpNames& mn : kMlpNames)
      if (n.ends_with(mn.down)) return true;
    return false;
  };

  size_t done = 0;  // units converted, for the progress callback
  auto report_progress = [&](size_t units_done) {
    done += units_done;
    if (o.progress) o.progress(done, units.size(), summary->layers.back().prefix);
  };
  // Folds down's act-order permutation into its producers' pieces (act_order_fold.h) and records
  // it in their metadata; `into`: the layers it went into, as they are written.
  auto fold_into = [](const std::vector<Piece*>& producers, Piece* down,
                      const std::vector<std::string>& into) -> Status {
    std::vector<KPackedWeights*> ws;
    std::string names;
    for (Piece* p : producers) {
      ws.push_back(&p->w);
      names += (names.empty() ? "'" : " and '") + p->L.prefix + "'";
    }
    const Status st = fold_act_order(ws, &down->w);
    if (!st.ok())
      return Status(st.code(),
                    "convert: cannot fold the act-order of '" + down->L.prefix + "' into " + names + ": " + st.message());
    for (Piece* p : producers) p->L.columns_permuted_by = down->L.prefix;
    down->L.act_order_folded_into = into;
    return Status::Ok();
  };
  for (size_t i = 0; i < units.size(); ++i) {
    if (with_gate[i]) continue;  // written with its gate
    std::vector<Piece> pieces;
    LOWBIT_RETURN_IF_ERROR(convert_unit(units[i], &pieces));
    if (partner[i] < 0 && down_of[i] >= 0) {  // a fused [gate; up] checkpoint layer and its down
      std::vector<Piece> down;
      LOWBIT_RETURN_IF_ERROR(convert_unit(units[static_cast<size_t>(down_of[i])], &down));
      const std::string gname = out_name(units[i]), dname = out_name(units[static_cast<size_t>(down_of[i])]);
      bool fold = false;
      for (const Piece& pc : down) fold |= !pc.w.k_perm.empty();
      if (fold) {
        if (pieces.size() != 1 || down.size() != 1)
          return make_status(StatusCode::kInvalidArgument,
                             "convert: cannot fold the act-order of '%s' into '%s': the experts of %s do not share one "
                             "shape (convert without --fold-act-order)",
                             dname.c_str(), gname.c_str(), pieces.size() != 1 ? gname.c_str() : dname.c_str());
        LOWBIT_RETURN_IF_ERROR(fold_into({&pieces[0]}, &down[0], {gname}));
      }
      for (std::vector<Piece>* part : {&pieces, &down})
        for (Piece& pc : *part) LOWBIT_RETURN_IF_ERROR(emit(std::move(pc.L), pc.w, pc.expert_layers, {}));
      report_progress(2);
      continue;
    }
    if (partner[i] < 0) {
      for (Piece& pc : pieces) {
        LOWBIT_CHECK_ARG(!(o.fold_act_order && !pc.w.k_perm.empty() && is_down_name(pc.L.prefix)),
                         "convert: cannot fold the act-order of '%s': its gate and up layers (or its fused gate_up) "
                         "are not in the selection (--layer) or not named as such (convert without --fold-act-order)",
                         pc.L.prefix.c_str());
        LOWBIT_RETURN_IF_ERROR(emit(std::move(pc.L), pc.w, pc.expert_layers, {}));
      }
      report_progress(1);
      continue;
    }
    std::vector<Piece> up, down;
    LOWBIT_RETURN_IF_ERROR(convert_unit(units[static_cast<size_t>(partner[i])], &up));
    if (down_of[i] >= 0) LOWBIT_RETURN_IF_ERROR(convert_unit(units[static_cast<size_t>(down_of[i])], &down));
    const std::string gname = out_name(units[i]), uname = out_name(units[static_cast<size_t>(partner[i])]);
    const std::string dname = down_of[i] >= 0 ? out_name(units[static_cast<size_t>(down_of[i])]) : std::string();
    bool fold = false;
    for (const Piece& pc : down) fold |= !pc.w.k_perm.empty();
    const bool fuse = !fused_name[i].empty();
    if (fuse || fold) {
      const std::string& split = pieces.size() != 1 ? gname : up.size() != 1 ? uname : dname;
      if (pieces.size() != 1 || up.size() != 1 || down.size() > 1)
        return make_status(StatusCode::kInvalidArgument,
                           "convert: cannot %s '%s' and '%s': the experts of %s do not share one shape (convert without "
                           "%s)",
                           fuse ? "fuse" : ("fold the act-order of '" + dname + "' into").c_str(), gname.c_str(),
                           uname.c_str(), split.c_str(), fuse ? "--fuse-gate-up" : "--fold-act-order");
    }
    if (fold) {
      LOWBIT_RETURN_IF_ERROR(fold_into({&pieces[0], &up[0]}, &down[0],
                                       fuse ? std::vector<std::string>{fused_name[i]} : std::vector<std::string>{gname, uname}));
    }
    if (fuse) {
      KPackedWeights w13;
      Status st = concat_n({pieces[0].w, up[0].w}, &w13);
      if (!st.ok())
        return Status(st.code(), "convert: cannot fuse '" + gname + "' and '" + uname + "': " + st.message());
      pieces[0].w = KPackedWeights();
      up[0].w = KPackedWeights();
      ConvertedLayer L = pieces[0].L;
      L.prefix = fused_name[i];
      L.in_bytes += up[0].L.in_bytes;
      L.report.scales_rounded += up[0].L.report.scales_rounded;
      L.report.max_rel_scale_change = std::max(L.report.max_rel_scale_change, up[0].L.report.max_rel_scale_change);
      LOWBIT_RETURN_IF_ERROR(emit(std::move(L), w13, pieces[0].expert_layers, {gname, uname}));
    } else {
      for (std::vector<Piece>* part : {&pieces, &up})
        for (Piece& pc : *part) LOWBIT_RETURN_IF_ERROR(emit(std::move(pc.L), pc.w, pc.expert_layers, {}));
    }
    for (Piece& pc : down) LOWBIT_RETURN_IF_ERROR(emit(std::move(pc.L), pc.w, pc.expert_layers, {}));
    report_progress(down_of[i] >= 0 ? 3 : 2);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const Status st = outs[i]->finish(metas[i]);
    if (!st.ok()) {  // no rank's file is left behind when one of them fails
      for (size_t j = 0; j < i; ++j) std::remove(summary->out_paths[j].c_str());
      return st;
    }
  }
  return Status::Ok();
}

Status load_converted_layer(const SafetensorsFile& f, const std::string& p, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "load_converted_layer: out is null");
  auto m = f.metadata().find(p);
  LOWBIT_CHECK_ARG(m != f.metadata().end(), "load_converted_layer: no metadata for layer '%s'", p.c_str());
  auto act = f.metadata().find("lowbit.act");
  LOWBIT_CHECK_ARG(act != f.metadata().end(), "load_converted_layer: no lowbit.act metadata");
  nlohmann::json lj = nlohmann::json::parse(m->second, nullptr, false);
  LOWBIT_CHECK_ARG(lj.is_object(), "load_converted_layer: bad metadata for '%s'", p.c_str());
  WeightShape s;
  try {
    s.experts = lj.contains("experts") ? lj.at("experts").get<int>() : 1;
    s.n = lj.at("n").get<int>();
    s.k = lj.at("k").get<int>();
    s.group_size = lj.at("group_size").get<int>();
    s.symmetric = lj.at("symmetric").get<bool>();
  } catch (const std::exception& e) {
    return make_status(StatusCode::kCorruptData, "load_converted_layer: metadata of '%s': %s", p.c_str(), e.what());
  }
  s.act = act->second == "fp16" ? DType::kF16 : DType::kBF16;
  KPackedWeights w;
  w.shape = s;
  const TensorInfo* t;
  LOWBIT_RETURN_IF_ERROR(f.find(p + ".qweight_kpacked", &t));
  w.qweight.assign(f.data(*t), f.data(*t) + t->nbytes);
  LOWBIT_RETURN_IF_ERROR(f.find(p + ".scales_kpacked", &t));
  w.scales.resize(t->nbytes / 2);
  std::memcpy(w.scales.data(), f.data(*t), t->nbytes);
  if (!s.symmetric) {
    LOWBIT_RETURN_IF_ERROR(f.find(p + ".zeros_kpacked", &t));
    w.zeros.assign(f.data(*t), f.data(*t) + t->nbytes);
  }
  if (f.has(p + ".k_perm")) {
    LOWBIT_RETURN_IF_ERROR(f.find(p + ".k_perm", &t));
    LOWBIT_RETURN_IF_ERROR(read_i32(f, *t, &w.k_perm));
  }
  LOWBIT_RETURN_IF_ERROR(validate(w));
  *out = std::move(w);
  return Status::Ok();
}

}  // namespace lowbit::int4
