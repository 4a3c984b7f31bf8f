// CPU Llama forward with simulated tensor parallelism (see lowbit/model/cpu_engine.h).
#include <algorithm>
#include <cmath>

#include "lowbit/detail/float_bits.h"
#include "lowbit/model/cpu_engine.h"

namespace lowbit::model {

void SiteErrorStats::reset(int n_layers) {
  for (int s = 0; s < 2; ++s) {
    sum[s].assign(n_layers, 0.0);
    max[s].assign(n_layers, 0.0);
    count[s].assign(n_layers, 0);
  }
}

Status make_tp_plan(const LlamaConfig& c, int tp, std::vector<TpRankSlice>* plan) {
  LOWBIT_CHECK_ARG(plan != nullptr, "make_tp_plan: plan is null");
  LOWBIT_CHECK_ARG(tp >= 1 && tp <= c.n_heads, "make_tp_plan: tp=%d must be in [1, n_heads=%d]", tp, c.n_heads);
  LOWBIT_CHECK_ARG(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "make_tp_plan: n_heads %d / n_kv %d", c.n_heads,
                   c.n_kv_heads);
  LOWBIT_CHECK_ARG(tp <= c.intermediate, "make_tp_plan: tp=%d > intermediate %d", tp, c.intermediate);
  const int group = c.n_heads / c.n_kv_heads;
  plan->assign(tp, {});
  auto even = [](int n, int parts, int r, int* b, int* cnt) {
    int base = n / parts, extra = n % parts;
    *cnt = base + (r < extra ? 1 : 0);
    *b = r * base + std::min(r, extra);
  };
  for (int r = 0; r < tp; ++r) {
    TpRankSlice& s = (*plan)[r];
    if (tp <= c.n_kv_heads) {
      even(c.n_kv_heads, tp, r, &s.kv_head0, &s.n_kv);
      s.q_head0 = s.kv_head0 * group;
      s.n_q = s.n_kv * group;
    } else {
      even(c.n_heads, tp, r, &s.q_head0, &s.n_q);
      s.kv_head0 = s.q_head0 / group;
      s.n_kv = (s.q_head0 + s.n_q - 1) / group - s.kv_head0 + 1;
    }
    even(c.intermediate, tp, r, &s.inter0, &s.n_inter);
  }
  return Status::Ok();
}

Status CpuLlama::init(const LlamaConfig& cfg, const LlamaWeights* w, const CpuEngineOptions& opt) {
  LOWBIT_CHECK_ARG(w != nullptr, "CpuLlama::init: weights are null");
  LOWBIT_CHECK_ARG(opt.max_ctx > 0, "CpuLlama::init: max_ctx=%d", opt.max_ctx);
  LOWBIT_CHECK_ARG(opt.threads >= 1, "CpuLlama::init: threads=%d", opt.threads);
  LOWBIT_CHECK_ARG(static_cast<int>(w->layers.size()) == cfg.n_layers, "CpuLlama::init: %zu layers, config says %d",
                   w->layers.size(), cfg.n_layers);
  LOWBIT_CHECK_ARG(cfg.head_dim % 2 == 0, "CpuLlama::init: odd head_dim %d", cfg.head_dim);
  LOWBIT_CHECK_ARG(opt.observer == nullptr || opt.tp == 0,
                   "CpuLlama::init: a linear-input observer needs the plain engine (tp = 0), not tp = %d", opt.tp);
  if (opt.tp > 0) {
    LOWBIT_CHECK_ARG(opt.mode != allreduce::Mode::kAuto && opt.mode != allreduce::Mode::kNccl,
                     "CpuLlama::init: pass the all-reduce algorithm (oneshot for exact), not %s", allreduce::mode_name(opt.mode));
    if (allreduce::mode_is_quantized(opt.mode))
      LOWBIT_CHECK_ARG(opt.group_size == 32 || opt.group_size == 64 || opt.group_size == 128,
                       "CpuLlama::init: group size %d not in {32, 64, 128}", opt.group_size);
  }
  cfg_ = cfg;
  w_ = w;
  opt_ = opt;
  LOWBIT_RETURN_IF_ERROR(make_tp_plan(cfg, std::max(1, opt.tp), &plan_));
  const int H = cfg.hidden, hd = cfg.head_dim, I = cfg.intermediate, group = cfg.n_heads / cfg.n_kv_heads;
  rank_.assign(cfg.n_layers, std::vector<RankWeights>(plan_.size()));
  for (int l = 0; l < cfg.n_layers; ++l) {
    const LlamaLayerWeights& L = w->layers[l];
    for (size_t r = 0; r < plan_.size(); ++r) {
      const TpRankSlice& s = plan_[r];
      RankWeights& R = rank_[l][r];
      auto rows = [&](const std::vector<float>& src, int64_t row0, int64_t n, int64_t cols, std::vector<float>* dst) {
        dst->assign(src.begin() + row0 * cols, src.begin() + (row0 + n) * cols);
      };
      auto cols = [&](const std::vector<float>& src, int64_t nrows, int64_t ncols, int64_t c0, int64_t nc,
                      std::vector<float>* dst) {
        dst->resize(nrows * nc);
        for (int64_t i = 0; i < nrows; ++i)
          std::copy(src.begin() + i * ncols + c0, src.begin() + i * ncols + c0 + nc, dst->begin() + i * nc);
      };
      rows(L.wq, int64_t{s.q_head0} * hd, int64_t{s.n_q} * hd, H, &R.wq);
      rows(L.wk, int64_t{s.kv_head0} * hd, int64_t{s.n_kv} * hd, H, &R.wk);
      rows(L.wv, int64_t{s.kv_head0} * hd, int64_t{s.n_kv} * hd, H, &R.wv);
      cols(L.wo, H, int64_t{cfg.n_heads} * hd, int64_t{s.q_head0} * hd, int64_t{s.n_q} * hd, &R.wo);
      rows(L.w_gate, s.inter0, s.n_inter, H, &R.w_gate);
      rows(L.w_up, s.inter0, s.n_inter, H, &R.w_up);
      cols(L.w_down, H, I, s.inter0, s.n_inter, &R.w_down);
      R.kv_of_head.resize(s.n_q);
      for (int h = 0; h < s.n_q; ++h) R.kv_of_head[h] = (s.q_head0 + h) / group - s.kv_head0;
      R.k_cache.assign(static_cast<size_t>(opt.max_ctx) * s.n_kv * hd, 0.0f);
      R.v_cache.assign(R.k_cache.size(), 0.0f);
    }
  }
  cpu::rope_table(hd, opt.max_ctx, cfg.rope_theta, &rope_);
  if (opt.site_errors) opt.site_errors->reset(cfg.n_layers);
  pos_ = 0;
  return Status::Ok();
}

// x[n, H] += sum over ranks of partial[r]: plain fp32 add (tp = 0), or the bf16 all-reduce.
Status CpuLlama::combine(int layer, int site, std::vector<std::vector<float>>& partial, int n, float* x) {
  const size_t m = static_cast<size_t>(n) * cfg_.hidden;
  if (opt_.tp == 0) {
    for (size_t i = 0; i < m; ++i) x[i] += partial[0][i];
    return Status::Ok();
  }
  const size_t N = partial.size();
  // reference_allreduce writes the same result to every rank's output (the GPU ranks all end
  // with identical data), so one output buffer serves all N output pointers.
  std::vector<std::vector<uint16_t>> in(N, std::vector<uint16_t>(m));
  std::vector<uint16_t> out(m);
  std::vector<const uint16_t*> ip(N);
  std::vector<uint16_t*> op(N, out.data());
  for (size_t r = 0; r < N; ++r) {
    for (size_t i = 0; i < m; ++i) in[r][i] = float_to_bf16_bits(partial[r][i]);
    ip[r] = in[r].data();
  }
  LOWBIT_RETURN_IF_ERROR(allreduce::reference_allreduce(opt_.mode, opt_.group_size, DType::kBF16, ip, op, m));
  if (opt_.site_errors && allreduce::mode_is_quantized(opt_.mode)) {
    // The exact (one-shot) result of the same bf16 partials; every rank's output is the
    // same, so one buffer serves all output pointers.
    std::vector<uint16_t> exact(m);
    std::vector<uint16_t*> ep(N, exact.data());
    LOWBIT_RETURN_IF_ERROR(allreduce::reference_allreduce(allreduce::Mode::kOneShot, opt_.group_size, DType::kBF16, ip, ep, m));
    SiteErrorStats& st = *opt_.site_errors;
    for (int t = 0; t < n; ++t) {
      double num = 0, den = 0;
      for (int i = 0; i < cfg_.hidden; ++i) {
        size_t k = static_cast<size_t>(t) * cfg_.hidden + i;
        double e = bf16_bits_to_float(exact[k]), q = bf16_bits_to_float(out[k]);
        num += (q - e) * (q - e);
        den += e * e;
      }
      double rel = den > 0 ? std::sqrt(num / den) : 0.0;
      st.sum[site][layer] += rel;
      st.max[site][layer] = std::max(st.max[site][layer], rel);
      st.count[site][layer] += 1;
    }
  }
  for (size_t i = 0; i < m; ++i) x[i] += bf16_bits_to_float(out[i]);
  return Status::Ok();
}

Status CpuLlama::forward(const int32_t* ids, int n, std::vector<float>* hidden) {
  LOWBIT_CHECK_ARG(ids != nullptr && hidden != nullptr && n > 0, "CpuLlama::forward: bad arguments (n=%d)", n);
  LOWBIT_CHECK_ARG(w_ != nullptr, "CpuLlama::forward: init() first");
  LOWBIT_CHECK_ARG(pos_ + n <= opt_.max_ctx, "CpuLlama::forward: %d cached + %d new tokens exceed max_ctx %d", pos_, n,
                   opt_.max_ctx);
  const int H = cfg_.hidden, hd = cfg_.head_dim, T = opt_.threads;
  for (int t = 0; t < n; ++t)
    LOWBIT_CHECK_ARG(ids[t] >= 0 && ids[t] < cfg_.vocab_size, "CpuLlama::forward: token %d at %d out of range", ids[t], t);
  std::vector<float> x(static_cast<size_t>(n) * H), xn(x.size());
  for (int t = 0; t < n; ++t)
    std::copy_n(w_->tok_embd.begin() + static_cast<int64_t>(ids[t]) * H, H, x.begin() + static_cast<int64_t>(t) * H);
  const size_t R = plan_.size();
  std::vector<std::vector<float>> partial(R, std::vector<float>(x.size()));
  std::vector<float> q, attn, gate, up;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LlamaLayerWeights& L = w_->layers[l];
    cpu::rmsnorm(x.data(), L.attn_norm.data(), xn.data(), n, H, cfg_.rms_eps);
    for (size_t r = 0; r < R; ++r) {
      const TpRankSlice& s = plan_[r];
      RankWeights& W = rank_[l][r];
      const int qd = s.n_q * hd, kvd = s.n_kv * hd;
      q.resize(static_cast<size_t>(n) * qd);
      attn.resize(q.size());
      float* kc = W.k_cache.data() + static_cast<size_t>(pos_) * kvd;
      float* vc = W.v_cache.data() + static_cast<size_t>(pos_) * kvd;
      if (opt_.observer) opt_.observer->observe(l, 0, xn.data(), n, H);
      cpu::linear(xn.data(), H, W.wq.data(), H, q.data(), qd, n, qd, H, T);
      cpu::linear(xn.data(), H, W.wk.data(), H, kc, kvd, n, kvd, H, T);
      cpu::linear(xn.data(), H, W.wv.data(), H, vc, kvd, n, kvd, H, T);
      cpu::rope(q.data(), qd, n, s.n_q, hd, pos_, rope_);
      cpu::rope(kc, kvd, n, s.n_kv, hd, pos_, rope_);
      cpu::attention(q.data(), qd, W.k_cache.data(), W.v_cache.data(), kvd, attn.data(), qd, n, pos_, s.n_q,
                     W.kv_of_head.data(), hd, T);
      if (opt_.observer) opt_.observer->observe(l, 1, attn.data(), n, qd);
      cpu::linear(attn.data(), qd, W.wo.data(), qd, partial[r].data(), H, n, H, qd, T);
    }
    LOWBIT_RETURN_IF_ERROR(combine(l, 0, partial, n, x.data()));
    cpu::rmsnorm(x.data(), L.ffn_norm.data(), xn.data(), n, H, cfg_.rms_eps);
    for (size_t r = 0; r < R; ++r) {
      const TpRankSlice& s = plan_[r];
      RankWeights& W = rank_[l][r];
      const int I = s.n_inter;
      gate.resize(static_cast<size_t>(n) * I);
      up.resize(gate.size());
      if (opt_.observer) opt_.observer->observe(l, 2, xn.data(), n, H);
      cpu::linear(xn.data(), H, W.w_gate.data(), H, gate.data(), I, n, I, H, T);
      cpu::linear(xn.data(), H, W.w_up.data(), H, up.data(), I, n, I, H, T);
      cpu::swiglu(gate.data(), up.data(), gate.data(), static_cast<int64_t>(gate.size()));
      if (opt_.observer) opt_.observer->observe(l, 3, gate.data(), n, I);
      cpu::linear(gate.data(), I, W.w_down.data(), I, partial[r].data(), H, n, H, I, T);
    }
    LOWBIT_RETURN_IF_ERROR(combine(l, 1, partial, n, x.data()));
  }
  hidden->resize(x.size());
  cpu::rmsnorm(x.data(), w_->output_norm.data(), hidden->data(), n, H, cfg_.rms_eps);
  pos_ += n;
  return Status::Ok();
}

void CpuLlama::logits(const float* hidden, int rows, float* out) const {
  const std::vector<float>& wout = w_->output.empty() ? w_->tok_embd : w_->output;
  cpu::linear(hidden, cfg_.hidden, wout.data(), cfg_.hidden, out, cfg_.vocab_size, rows, cfg_.vocab_size, cfg_.hidden,
              opt_.threads);
}

}  // namespace lowbit::model
