// GGUF -> LlamaConfig + fp32 LlamaWeights.
#include <string>

#include "lowbit/model/gguf.h"
#include "lowbit/model/llama.h"

namespace lowbit::model {
namespace {

// Reads tensor `name`, checks its shape is exactly [rows, cols] (ne = [cols, rows]; a 1-D
// tensor passes rows = 1) and dequantizes it.
Status load_tensor(const gguf::File& f, const std::string& name, int64_t rows, int64_t cols, std::vector<float>* out) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return make_status(StatusCode::kCorruptData, "load_llama: tensor '%s' missing", name.c_str());
  bool ok = rows == 1 ? (t->n_dims == 1 && t->ne[0] == cols)
                      : (t->n_dims == 2 && t->ne[0] == cols && t->ne[1] == rows);
  if (!ok)
    return make_status(StatusCode::kCorruptData, "load_llama: tensor '%s' has shape ne=[%lld,%lld] (n_dims %d), expected [%lld,%lld]",
                       name.c_str(), static_cast<long long>(t->ne[0]), static_cast<long long>(t->ne[1]), t->n_dims,
                       static_cast<long long>(cols), static_cast<long long>(rows));
  return f.dequantize(*t, out);
}

Status get_positive(const gguf::File& f, const std::string& key, int* out) {
  int64_t v = 0;
  LOWBIT_RETURN_IF_ERROR(f.get_int(key, &v));
  if (v <= 0 || v > (int64_t{1} << 30))
    return make_status(StatusCode::kCorruptData, "load_llama: %s = %lld is out of range", key.c_str(), static_cast<long long>(v));
  *out = static_cast<int>(v);
  return Status::Ok();
}

}  // namespace

Status load_llama(const gguf::File& f, LlamaConfig* cfg, LlamaWeights* w) {
  LOWBIT_CHECK_ARG(cfg != nullptr && w != nullptr, "load_llama: null output");
  std::string arch;
  LOWBIT_RETURN_IF_ERROR(f.get_string("general.architecture", &arch));
  if (arch != "llama")
    return make_status(StatusCode::kNotSupported, "load_llama: architecture '%s' is not 'llama'", arch.c_str());
  LlamaConfig c;
  if (f.find("general.name")) LOWBIT_RETURN_IF_ERROR(f.get_string("general.name", &c.name));
  LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.embedding_length", &c.hidden));
  LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.feed_forward_length", &c.intermediate));
  LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.block_count", &c.n_layers));
  LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.attention.head_count", &c.n_heads));
  c.n_kv_heads = c.n_heads;
  if (f.find("llama.attention.head_count_kv"))
    LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.attention.head_count_kv", &c.n_kv_heads));
  if (c.hidden % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0)
    return make_status(StatusCode::kCorruptData, "load_llama: hidden %d / heads %d / kv heads %d do not divide", c.hidden,
                       c.n_heads, c.n_kv_heads);
  c.head_dim = c.hidden / c.n_heads;
  if (f.find("llama.rope.dimension_count")) {
    int rd = 0;
    LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.rope.dimension_count", &rd));
    if (rd != c.head_dim)
      return make_status(StatusCode::kNotSupported, "load_llama: partial RoPE (dimension_count %d != head_dim %d)", rd, c.head_dim);
  }
  if (f.find("llama.context_length")) LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.context_length", &c.context_length));
  double d = 0;
  if (f.find("llama.attention.layer_norm_rms_epsilon")) {
    LOWBIT_RETURN_IF_ERROR(f.get_float("llama.attention.layer_norm_rms_epsilon", &d));
    c.rms_eps = static_cast<float>(d);
  }
  if (f.find("llama.rope.freq_base")) {
    LOWBIT_RETURN_IF_ERROR(f.get_float("llama.rope.freq_base", &d));
    c.rope_theta = static_cast<float>(d);
  }
  if (!(c.rms_eps > 0.0f) || !(c.rope_theta > 1.0f))
    return make_status(StatusCode::kCorruptData, "load_llama: rms eps %g / rope theta %g out of range", c.rms_eps, c.rope_theta);
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb || emb->n_dims != 2)
    return make_status(StatusCode::kCorruptData, "load_llama: tensor 'token_embd.weight' missing or not 2-D");
  c.vocab_size = static_cast<int>(emb->ne[1]);
  if (f.find("llama.vocab_size")) {
    int v = 0;
    LOWBIT_RETURN_IF_ERROR(get_positive(f, "llama.vocab_size", &v));
    if (v != c.vocab_size)
      return make_status(StatusCode::kCorruptData, "load_llama: llama.vocab_size %d but token_embd has %d rows", v, c.vocab_size);
  }
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;

  LlamaWeights lw;
  const int64_t H = c.hidden, hd = c.head_dim, I = c.intermediate;
  LOWBIT_RETURN_IF_ERROR(load_tensor(f, "token_embd.weight", c.vocab_size, H, &lw.tok_embd));
  LOWBIT_RETURN_IF_ERROR(load_tensor(f, "output_norm.weight", 1, H, &lw.output_norm));
  if (!c.tied_embeddings) LOWBIT_RETURN_IF_ERROR(load_tensor(f, "output.weight", c.vocab_size, H, &lw.output));
  lw.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    LlamaLayerWeights& L = lw.layers[l];
    std::string p = "blk." + std::to_string(l) + ".";
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "attn_norm.weight", 1, H, &L.attn_norm));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "attn_q.weight", c.n_heads * hd, H, &L.wq));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "attn_k.weight", c.n_kv_heads * hd, H, &L.wk));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "attn_v.weight", c.n_kv_heads * hd, H, &L.wv));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "attn_output.weight", H, c.n_heads * hd, &L.wo));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "ffn_norm.weight", 1, H, &L.ffn_norm));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "ffn_gate.weight", I, H, &L.w_gate));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "ffn_up.weight", I, H, &L.w_up));
    LOWBIT_RETURN_IF_ERROR(load_tensor(f, p + "ffn_down.weight", H, I, &L.w_down));
  }
  *cfg = std::move(c);
  *w = std::move(lw);
  return Status::Ok();
}

Status load_llama(const std::string& path, LlamaConfig* cfg, LlamaWeights* w) {
  gguf::File f;
  LOWBIT_RETURN_IF_ERROR(gguf::File::open(path, &f));
  return load_llama(f, cfg, w);
}

}  // namespace lowbit::model
