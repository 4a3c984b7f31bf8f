// INT4 round trip of a loaded model's linear weights, for measuring what lowbit's INT4
// weight format costs a model's perplexity: every block's q, k, v, o, gate, up and down
// matrix goes through quantize_rtn (canonical K-packed, scales in the activation dtype) and
// back through dequantize() - the values the INT4 kernels' dequantization contract gives.
// Embeddings, norms and the output head stay as loaded (the usual W4A16 practice).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lowbit/int4/gptq_quantize.h"
#include "lowbit/int4/weights.h"
#include "lowbit/model/cpu_engine.h"
#include "lowbit/model/cpu_ops.h"
#include "lowbit/model/llama.h"

namespace lowbit::model {
namespace {

// One block linear ([N, K] fp32, N = size / K) as an INT4 weight shape.
int4::WeightShape linear_shape(const std::vector<float>& m, int k, int group, bool symmetric, DType act) {
  int4::WeightShape s;
  s.experts = 1;
  s.n = static_cast<int>(m.size() / k);
  s.k = k;
  s.group_size = group;
  s.symmetric = symmetric;
  s.act = act;
  return s;
}

// m = the dequantized weight of q in input-row order (an act-order k_perm undone).
Status store_dequantized(const int4::KPackedWeights& q, DType act, std::vector<float>* m) {
  std::vector<uint16_t> bits;
  LOWBIT_RETURN_IF_ERROR(int4::dequantize(q, &bits));
  const int N = q.shape.n, K = q.shape.k;
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < K; ++j)
      (*m)[static_cast<size_t>(n) * K + (q.k_perm.empty() ? j : q.k_perm[j])] =
          half_bits_to_float(act, bits[static_cast<size_t>(n) * K + j]);
  return Status::Ok();
}

}  // namespace

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
      const int4::WeightShape s = linear_shape(*m.v, m.k, group, symmetric, act);
      int4::KPackedWeights q;
      Status st = int4::quantize_rtn(m.v->data(), s, &q);
      if (!st.ok())
        return make_status(st.code(), "blk.%d.%s (N=%d, K=%d): %s", l, m.name, s.n, s.k, st.message().c_str());
      LOWBIT_RETURN_IF_ERROR(store_dequantized(q, act, m.v));
    }
  }
  return Status::Ok();
}

namespace {

// Sums x x^T of every block linear's input over the calibration run: per (layer, site) a [K, K]
// fp64 accumulator, each forward's [n, K] input added as X^T X (fp32 product of one window,
// accumulated in fp64). Each forward is one window from position 0, so its row 0 is the window's
// first token, weighted by first_row_weight.
class HessianCollector : public LinearInputObserver {
 public:
  HessianCollector(int layers, const int site_k[4], int threads, double first_row_weight)
      : threads_(threads), first_scale_(static_cast<float>(std::sqrt(first_row_weight))) {
    h_.resize(static_cast<size_t>(layers) * 4);
    for (int l = 0; l < layers; ++l)
      for (int s = 0; s < 4; ++s) {
        k_[s] = site_k[s];
        h_[static_cast<size_t>(l) * 4 + s].assign(static_cast<size_t>(site_k[s]) * site_k[s], 0.0);
      }
  }
  void observe(int layer, int site, const float* x, int n, int k) override {
    if (k != k_[site]) {  // a shape the config did not announce: reported after the run
      bad_ = true;
      return;
    }
    xt_.resize(static_cast<size_t>(k) * n);
    for (int r = 0; r < n; ++r) {
      const float sc = r == 0 ? first_scale_ : 1.f;
      for (int i = 0; i < k; ++i) xt_[static_cast<size_t>(i) * n + r] = sc * x[static_cast<size_t>(r) * k + i];
    }
    prod_.resize(static_cast<size_t>(k) * k);
    cpu::linear(xt_.data(), n, xt_.data(), n, prod_.data(), k, k, k, n, threads_);  // X^T X
    std::vector<double>& h = h_[static_cast<size_t>(layer) * 4 + site];
    for (size_t i = 0; i < h.size(); ++i) h[i] += prod_[i];
  }
  const std::vector<double>& hessian(int layer, int site) const { return h_[static_cast<size_t>(layer) * 4 + site]; }
  bool bad() const { return bad_; }

 private:
  int threads_;
  float first_scale_;
  int k_[4] = {0, 0, 0, 0};
  bool bad_ = false;
  std::vector<std::vector<double>> h_;
  std::vector<float> xt_, prod_;
};

}  // namespace

Status quantize_linear_weights_int4_gptq(const LlamaConfig& cfg, const GptqCalibration& cal, int group, bool symmetric,
                                         DType act, LlamaWeights* w) {
  LOWBIT_CHECK_ARG(w != nullptr && cal.tokens != nullptr, "quantize_linear_weights_int4_gptq: null weights or tokens");
  LOWBIT_CHECK_ARG(static_cast<int>(w->layers.size()) == cfg.n_layers,
                   "quantize_linear_weights_int4_gptq: %zu layers loaded, config says %d", w->layers.size(),
                   cfg.n_layers);
  const int text_per_window = cal.bos >= 0 ? cal.ctx - 1 : cal.ctx;
  LOWBIT_CHECK_ARG(cal.ctx >= 2 && cal.count >= text_per_window,
                   "quantize_linear_weights_int4_gptq: %lld calibration tokens, fewer than one window of %d",
                   static_cast<long long>(cal.count), text_per_window);
  const int q_dim = cfg.n_heads * cfg.head_dim;
  const int site_k[4] = {cfg.hidden, q_dim, cfg.hidden, cfg.intermediate};
  LOWBIT_CHECK_ARG(cal.sink_weight > 0 && std::isfinite(cal.sink_weight),
                   "quantize_linear_weights_int4_gptq: sink_weight=%g must be > 0", cal.sink_weight);
  HessianCollector hc(cfg.n_layers, site_k, cal.threads, cal.sink_weight);
  {
    CpuEngineOptions o;
    o.tp = 0;
    o.threads = cal.threads;
    o.max_ctx = cal.ctx;
    o.observer = &hc;
    CpuLlama engine;
    LOWBIT_RETURN_IF_ERROR(engine.init(cfg, w, o));
    std::vector<float> hidden;
    std::vector<int32_t> window(cal.ctx);
    for (int64_t t0 = 0; t0 + text_per_window <= cal.count; t0 += text_per_window) {
      if (cal.bos >= 0) window[0] = cal.bos;
      std::copy_n(cal.tokens + t0, text_per_window, window.begin() + (cal.bos >= 0 ? 1 : 0));
      engine.reset();
      LOWBIT_RETURN_IF_ERROR(engine.forward(window.data(), cal.ctx, &hidden));
    }
  }
  LOWBIT_CHECK_ARG(!hc.bad(), "quantize_linear_weights_int4_gptq: a block linear's input width differs from the config");
  int4::GptqOptions go;
  go.act_order = cal.act_order;
  go.damp = cal.damp;
  static const char* const kSiteName[4] = {"attn_q/k/v input", "attn_output input", "ffn_gate/up input", "ffn_down input"};
  for (int l = 0; l < cfg.n_layers; ++l) {
    LlamaLayerWeights& L = w->layers[l];
    const std::vector<std::vector<float>*> site_mats[4] = {
        {&L.wq, &L.wk, &L.wv}, {&L.wo}, {&L.w_gate, &L.w_up}, {&L.w_down}};
    for (int site = 0; site < 4; ++site) {
      const int K = site_k[site];
      int4::GptqPrepared prep;
      Status st = int4::gptq_prepare(hc.hessian(l, site).data(), K, go, &prep);
      if (!st.ok()) return make_status(st.code(), "blk.%d %s: %s", l, kSiteName[site], st.message().c_str());
      for (std::vector<float>* m : site_mats[site]) {
        LOWBIT_CHECK_ARG(m->size() % static_cast<size_t>(K) == 0,
                         "quantize_linear_weights_int4_gptq: blk.%d: a %s weight has %zu values, not a multiple of K=%d",
                         l, kSiteName[site], m->size(), K);
        const int4::WeightShape s = linear_shape(*m, K, group, symmetric, act);
        int4::KPackedWeights q;
        st = int4::quantize_gptq(m->data(), s, prep, &q);
        if (!st.ok())
          return make_status(st.code(), "blk.%d %s (N=%d, K=%d): %s", l, kSiteName[site], s.n, K, st.message().c_str());
        LOWBIT_RETURN_IF_ERROR(store_dequantized(q, act, m));
      }
    }
  }
  return Status::Ok();
}

}  // namespace lowbit::model
