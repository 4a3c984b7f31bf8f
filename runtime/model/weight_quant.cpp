// INT4 round trip of a loaded model's linear weights, for measuring what lowbit's INT4
// weight format costs a model's perplexity: every block's q, k, v, o, gate, up and down
// matrix goes through quantize_rtn (canonical K-packed, scales in the activation dtype) and
// back through dequantize() - the values the INT4 kernels' dequantization contract gives.
// Embeddings, norms and the output head stay as loaded (the usual W4A16 practice).
#include <cstdint>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/model/llama.h"

namespace lowbit::model {

Status quantize_linear_weights_int4(const LlamaConfig& cfg, int group, bool symmetric, DType act, LlamaWeights* w) {
  LOWBIT_CHECK_ARG(w != nullptr, "quantize_linear_weights_int4: null weights");
  LOWBIT_CHECK_ARG(static_cast<int>(w->layers.size()) == cfg.n_layers,
                   "quantize_linear_weights_int4: %zu layers loaded, config says %d", w->layers.size(), cfg.n_layers);
  const int q_dim = cfg.n_heads * cfg.head_dim;
  for (int l = 0; l < cfg.n_layers; ++l) {
    LlamaLayerWeights& L = w->layers[l];
    struct Mat {
      const char* name;
      std::vector<float>* v;
      int k;  // input features
    };
    const Mat mats[] = {{"attn_q", &L.wq, cfg.hidden},          {"attn_k", &L.wk, cfg.hidden},
                        {"attn_v", &L.wv, cfg.hidden},          {"attn_output", &L.wo, q_dim},
                        {"ffn_gate", &L.w_gate, cfg.hidden},    {"ffn_up", &L.w_up, cfg.hidden},
                        {"ffn_down", &L.w_down, cfg.intermediate}};
    for (const Mat& m : mats) {
      LOWBIT_CHECK_ARG(m.k > 0 && m.v->size() % static_cast<size_t>(m.k) == 0,
                       "quantize_linear_weights_int4: blk.%d.%s has %zu values, not a multiple of K=%d", l, m.name,
                       m.v->size(), m.k);
      int4::WeightShape s;
      s.experts = 1;
      s.n = static_cast<int>(m.v->size() / m.k);
      s.k = m.k;
      s.group_size = group;
      s.symmetric = symmetric;
      s.act = act;
      int4::KPackedWeights q;
      Status st = int4::quantize_rtn(m.v->data(), s, &q);
      if (!st.ok())
        return make_status(st.code(), "blk.%d.%s (N=%d, K=%d): %s", l, m.name, s.n, s.k, st.message().c_str());
      std::vector<uint16_t> bits;
      LOWBIT_RETURN_IF_ERROR(int4::dequantize(q, &bits));
      for (size_t i = 0; i < bits.size(); ++i) (*m.v)[i] = half_bits_to_float(act, bits[i]);
    }
  }
  return Status::Ok();
}

}  // namespace lowbit::model
