// Tensor-parallel Llama runner: one thread per rank, see include/lowbit/model/tp_runner.h
// and docs/tp-runner.md.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include "kernels/model/cublas_check.cuh"
#include "lowbit/allreduce_cuda.h"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/detail/float_bits.h"
#include "lowbit/model/gpu_ops.h"
#include "lowbit/model/tp_runner.h"

namespace lowbit::model {

using gpu::bf16;

namespace {
constexpr size_t kCublasWorkspace = 32ull << 20;  // set explicitly so graph capture never allocates

struct LayerPtrs {
  bf16* attn_norm = nullptr;  // [H]
  bf16* wqkv = nullptr;       // [(nq + 2 nkv) hd, H]: this rank's q rows, k rows, v rows
  bf16* wo = nullptr;         // [H, nq hd]: this rank's input columns
  bf16* ffn_norm = nullptr;   // [H]
  bf16* wgu = nullptr;        // [2 I, H]: this rank's gate rows then up rows
  bf16* wdown = nullptr;      // [H, I]: this rank's input columns
};

struct Rank {
  int rank = 0, device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_ws = nullptr;
  std::unique_ptr<allreduce::Communicator> comm;
  TpShard shard;
  std::vector<LayerPtrs> layers;
  bf16 *tok_embd = nullptr, *out_norm = nullptr, *lm_head = nullptr;
  std::vector<void*> weight_allocs;
  // activations (prepare)
  bf16 *x = nullptr, *xn = nullptr, *qkv = nullptr, *attn = nullptr, *y = nullptr, *gu = nullptr, *act = nullptr;
  int32_t *tokens = nullptr, *positions = nullptr, *targets = nullptr;
  float *logits = nullptr, *nll = nullptr;
  void* attn_ws = nullptr;
  size_t attn_ws_bytes = 0;
  std::vector<void*> act_allocs;
};

Status dmalloc(void** p, size_t bytes, std::vector<void*>* owner) {
  LOWBIT_CUDA_RETURN(cudaMalloc(p, std::max<size_t>(bytes, 256)));
  owner->push_back(*p);
  return Status::Ok();
}
template <class T>
Status dalloc(T** p, size_t count, std::vector<void*>* owner) {
  void* v = nullptr;
  LOWBIT_RETURN_IF_ERROR(dmalloc(&v, count * sizeof(T), owner));
  *p = static_cast<T*>(v);
  return Status::Ok();
}
void free_all(std::vector<void*>* v) {
  for (void* p : *v) cudaFree(p);
  v->clear();
}

Status upload_bf16(bf16* dst, const std::vector<uint16_t>& src) {
  LOWBIT_CUDA_RETURN(cudaMemcpy(dst, src.data(), src.size() * 2, cudaMemcpyHostToDevice));
  return Status::Ok();
}
std::vector<uint16_t> to_bf16(const float* p, size_t n) {
  std::vector<uint16_t> o(n);
  for (size_t i = 0; i < n; ++i) o[i] = float_to_bf16_bits(p[i]);
  return o;
}
// Rows [r0, r0 + nr) of a row-major [*, cols] matrix.
void append_rows(const std::vector<float>& m, int cols, int r0, int nr, std::vector<uint16_t>* out) {
  for (size_t i = size_t(r0) * cols; i < size_t(r0 + nr) * cols; ++i) out->push_back(float_to_bf16_bits(m[i]));
}
// Columns [c0, c0 + nc) of a row-major [rows, cols] matrix.
std::vector<uint16_t> cols_slice(const std::vector<float>& m, int rows, int cols, int c0, int nc) {
  std::vector<uint16_t> o(size_t(rows) * nc);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < nc; ++c) o[size_t(r) * nc + c] = float_to_bf16_bits(m[size_t(r) * cols + c0 + c]);
  return o;
}

}  // namespace

struct TpRunner::Impl {
  LlamaConfig cfg;
  std::vector<Rank> ranks;
  TpRunOptions opt;
  bool prepared = false, weights_ready = false, tokens_ready = false;

  int tp() const { return static_cast<int>(ranks.size()); }
  int layers_to_run() const { return opt.layers < 0 ? cfg.n_layers : std::min(opt.layers, cfg.n_layers); }
  int64_t qkv_width(const Rank& r) const { return int64_t(r.shard.n_q_heads + 2 * r.shard.n_kv_heads) * cfg.head_dim; }

  // Runs fn on every rank in its own thread (device set); the first error in rank order wins.
  Status for_ranks(const std::function<Status(Rank&)>& fn) {
    std::vector<Status> st(ranks.size());
    std::vector<std::thread> th;
    for (size_t i = 0; i < ranks.size(); ++i)
      th.emplace_back([&, i] {
        cudaError_t e = cudaSetDevice(ranks[i].device);
        st[i] = e == cudaSuccess ? fn(ranks[i])
                                 : make_status(StatusCode::kCudaError, "cudaSetDevice(%d): %s", ranks[i].device,
                                               cudaGetErrorString(e));
      });
    for (auto& t : th) t.join();
    for (size_t i = 0; i < st.size(); ++i)
      if (!st[i].ok()) return make_status(st[i].code(), "rank %zu: %s", i, st[i].message().c_str());
    return Status::Ok();
  }

  Status alloc_layer(Rank& r, LayerPtrs* L) {
    const int H = cfg.hidden;
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->attn_norm, H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->ffn_norm, H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->wqkv, size_t(qkv_width(r)) * H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->wo, size_t(H) * r.shard.n_q_heads * cfg.head_dim, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->wgu, size_t(2) * r.shard.n_inter * H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->wdown, size_t(H) * r.shard.n_inter, &r.weight_allocs));
    return Status::Ok();
  }

  Status enqueue_forward(Rank& r, const TpComm& comm) {
    const int T = opt.batch * opt.seq, H = cfg.hidden, hd = cfg.head_dim;
    const int nq = r.shard.n_q_heads, nkv = r.shard.n_kv_heads, I = r.shard.n_inter;
    const int64_t W = qkv_width(r);
    cudaStream_t s = r.stream;
    LOWBIT_CUBLAS_RETURN(cublasSetStream(r.cublas, s));
    const bool reduce = !comm.skip && tp() > 1;
    auto allreduce = [&]() -> Status {
      if (!reduce) return Status::Ok();
      return r.comm->allreduce(r.y, r.y, size_t(T) * H, DType::kBF16, comm.opts, s);
    };
    gpu::AttentionShape as;
    as.batch = opt.batch, as.seq = opt.seq, as.n_q_heads = nq, as.n_kv_heads = nkv, as.head_dim = hd;
    as.qkv_stride = W, as.out_stride = int64_t(nq) * hd;
    LOWBIT_RETURN_IF_ERROR(gpu::embedding(r.tokens, T, r.tok_embd, cfg.vocab_size, H, r.x, s));
    for (int l = 0; l < layers_to_run(); ++l) {
      const LayerPtrs& L = r.layers[l];
      LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x, H, L.attn_norm, r.xn, H, T, H, cfg.rms_eps, s));
      LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, L.wqkv, r.qkv, false, W, T, int(W), H));
      LOWBIT_RETURN_IF_ERROR(gpu::rope(r.qkv, W, T, nq + nkv, hd, r.positions, cfg.rope_theta, s));
      LOWBIT_RETURN_IF_ERROR(gpu::causal_attention(r.cublas, as, r.qkv, r.attn, r.attn_ws, r.attn_ws_bytes, s));
      LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.attn, int64_t(nq) * hd, L.wo, r.y, false, H, T, H, nq * hd));
      LOWBIT_RETURN_IF_ERROR(allreduce());
      LOWBIT_RETURN_IF_ERROR(gpu::residual_add(r.x, r.y, int64_t(T) * H, s));
      LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x, H, L.ffn_norm, r.xn, H, T, H, cfg.rms_eps, s));
      LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, L.wgu, r.gu, false, 2 * I, T, 2 * I, H));
      LOWBIT_RETURN_IF_ERROR(gpu::silu_mul(r.gu, T, I, r.act, s));
      LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.act, I, L.wdown, r.y, false, H, T, H, I));
      LOWBIT_RETURN_IF_ERROR(allreduce());
      LOWBIT_RETURN_IF_ERROR(gpu::residual_add(r.x, r.y, int64_t(T) * H, s));
    }
    if (opt.all_logits) {
      LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x, H, r.out_norm, r.xn, H, T, H, cfg.rms_eps, s));
      LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, r.lm_head, r.logits, true, cfg.vocab_size, T,
                                         cfg.vocab_size, H));
    } else {  // last token of every sequence: row stride seq * H picks it without a gather
      LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x + int64_t(opt.seq - 1) * H, int64_t(opt.seq) * H, r.out_norm, r.xn, H,
                                          opt.batch, H, cfg.rms_eps, s));
      LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, r.lm_head, r.logits, true, cfg.vocab_size, opt.batch,
                                         cfg.vocab_size, H));
    }
    return Status::Ok();
  }

  Status ready() const {
    if (!weights_ready) return make_status(StatusCode::kInvalidArgument, "TpRunner: no weights (load or synthesize)");
    if (!prepared) return make_status(StatusCode::kInvalidArgument, "TpRunner: prepare() not called");
    if (!tokens_ready) return make_status(StatusCode::kInvalidArgument, "TpRunner: set_tokens() not called");
    return Status::Ok();
  }

  // Times `enqueue` on all ranks: captured per rank (thread-local capture), replays started
  // together behind a barrier, per replay the slowest rank; median in ms.
  Status time_ranks(const std::function<Status(Rank&)>& enqueue, int warmup, int reps, double* median_ms,
                    bool* graphed) {
    const int n = tp();
    std::vector<cudaGraphExec_t> exec(n, nullptr);
    std::vector<int> captured(n, 0);
    LOWBIT_RETURN_IF_ERROR(for_ranks([&](Rank& r) -> Status {
      cudaGraph_t g = nullptr;
      LOWBIT_CUDA_RETURN(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
      Status st = enqueue(r);
      cudaError_t e = cudaStreamEndCapture(r.stream, &g);
      if (st.ok() && e == cudaSuccess && g && cudaGraphInstantiate(&exec[r.rank], g, 0) == cudaSuccess)
        captured[r.rank] = 1;
      if (g) cudaGraphDestroy(g);
      (void)cudaGetLastError();  // a failed capture is not an error: we fall back to eager launches
      return Status::Ok();
    }));
    const bool all_graphed = std::all_of(captured.begin(), captured.end(), [](int c) { return c != 0; });
    *graphed = all_graphed;
    std::vector<std::vector<double>> ms(n, std::vector<double>(reps, 0.0));
    std::barrier bar(n);
    Status st = for_ranks([&](Rank& r) -> Status {
      cudaEvent_t a = nullptr, b = nullptr;
      auto run = [&]() -> Status {
        if (all_graphed) {
          LOWBIT_CUDA_RETURN(cudaGraphLaunch(exec[r.rank], r.stream));
          return Status::Ok();
        }
        return enqueue(r);
      };
      auto body = [&]() -> Status {
        LOWBIT_CUDA_RETURN(cudaEventCreate(&a));
        LOWBIT_CUDA_RETURN(cudaEventCreate(&b));
        for (int i = 0; i < warmup; ++i) LOWBIT_RETURN_IF_ERROR(run());
        LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
        for (int i = 0; i < reps; ++i) {
          bar.arrive_and_wait();
          LOWBIT_CUDA_RETURN(cudaEventRecord(a, r.stream));
          LOWBIT_RETURN_IF_ERROR(run());
          LOWBIT_CUDA_RETURN(cudaEventRecord(b, r.stream));
          LOWBIT_CUDA_RETURN(cudaEventSynchronize(b));
          float t = 0;
          LOWBIT_CUDA_RETURN(cudaEventElapsedTime(&t, a, b));
          ms[r.rank][i] = t;
        }
        return Status::Ok();
      };
      Status s = body();
      if (!s.ok()) bar.arrive_and_drop();  // never leave the other ranks waiting on us
      if (a) cudaEventDestroy(a);
      if (b) cudaEventDestroy(b);
      if (s.ok() && r.comm) s = r.comm->check_peer_error();
      return s;
    });
    for (int i = 0; i < n; ++i)
      if (exec[i]) {
        cudaSetDevice(ranks[i].device);
        cudaGraphExecDestroy(exec[i]);
      }
    LOWBIT_RETURN_IF_ERROR(st);
    std::vector<double> per_rep(reps, 0.0);
    for (int i = 0; i < reps; ++i)
      for (int k = 0; k < n; ++k) per_rep[i] = std::max(per_rep[i], ms[k][i]);
    std::sort(per_rep.begin(), per_rep.end());
    *median_ms = per_rep[reps / 2];
    return Status::Ok();
  }

  ~Impl() {
    for (auto& r : ranks) {
      cudaSetDevice(r.device);
      r.comm.reset();
      free_all(&r.weight_allocs);
      free_all(&r.act_allocs);
      if (r.cublas) cublasDestroy(r.cublas);
      if (r.cublas_ws) cudaFree(r.cublas_ws);
      if (r.stream) cudaStreamDestroy(r.stream);
    }
  }
};

TpRunner::TpRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TpRunner::~TpRunner() = default;
const LlamaConfig& TpRunner::config() const { return impl_->cfg; }
int TpRunner::tp() const { return impl_->tp(); }

Status TpRunner::create(const LlamaConfig& cfg, const std::vector<int>& devices, const allreduce::Config& ar_cfg,
                        std::unique_ptr<TpRunner>* out) {
  LOWBIT_CHECK_ARG(out, "TpRunner::create: null output");
  LOWBIT_CHECK_ARG(!devices.empty(), "TpRunner::create: no devices");
  LOWBIT_CHECK_ARG(cfg.hidden > 0 && cfg.vocab_size > 0 && cfg.n_layers > 0 && cfg.head_dim > 0,
                   "TpRunner::create: config %s has hidden=%d vocab=%d layers=%d head_dim=%d", cfg.name.c_str(),
                   cfg.hidden, cfg.vocab_size, cfg.n_layers, cfg.head_dim);
  LOWBIT_CHECK_ARG(cfg.head_dim % 2 == 0, "TpRunner::create: head_dim=%d must be even (RoPE pairs)", cfg.head_dim);
  if (cfg.n_experts > 0)
    return make_status(StatusCode::kNotSupported,
                       "TpRunner: MoE layers (%s, %d experts) are not implemented yet; dense models only",
                       cfg.name.c_str(), cfg.n_experts);
  int n_dev = 0;
  LOWBIT_CUDA_RETURN(cudaGetDeviceCount(&n_dev));
  for (int d : devices)
    LOWBIT_CHECK_ARG(d >= 0 && d < n_dev, "TpRunner::create: device %d not present (%d GPUs)", d, n_dev);
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  const int tp = static_cast<int>(devices.size());
  impl->ranks.resize(tp);
  for (int i = 0; i < tp; ++i) {
    Rank& r = impl->ranks[i];
    r.rank = i;
    r.device = devices[i];
    LOWBIT_RETURN_IF_ERROR(tp_shard(cfg, tp, i, &r.shard));
    LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
    LOWBIT_CUDA_RETURN(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    LOWBIT_CUBLAS_RETURN(cublasCreate(&r.cublas));
    LOWBIT_CUDA_RETURN(cudaMalloc(&r.cublas_ws, kCublasWorkspace));
    LOWBIT_CUBLAS_RETURN(cublasSetWorkspace(r.cublas, r.cublas_ws, kCublasWorkspace));
    LOWBIT_CUBLAS_RETURN(cublasSetStream(r.cublas, r.stream));
  }
  if (tp > 1) {
    std::vector<std::unique_ptr<allreduce::Communicator>> comms;
    LOWBIT_RETURN_IF_ERROR(allreduce::Communicator::create_single_process(devices, ar_cfg, &comms));
    LOWBIT_CHECK_ARG(comms.size() == size_t(tp), "TpRunner::create: got %zu communicators for %d devices",
                     comms.size(), tp);
    for (int i = 0; i < tp; ++i) impl->ranks[i].comm = std::move(comms[i]);
  }
  out->reset(new TpRunner(std::move(impl)));
  return Status::Ok();
}

Status TpRunner::load_weights(const LlamaWeights& w) {
  Impl& m = *impl_;
  const LlamaConfig& c = m.cfg;
  const int H = c.hidden, hd = c.head_dim;
  auto check = [](const std::vector<float>& v, size_t n, const char* what, int layer) -> Status {
    if (v.size() != n)
      return make_status(StatusCode::kInvalidArgument, "load_weights: %s of layer %d has %zu values, expected %zu",
                         what, layer, v.size(), n);
    return Status::Ok();
  };
  LOWBIT_RETURN_IF_ERROR(check(w.tok_embd, size_t(c.vocab_size) * H, "tok_embd", -1));
  LOWBIT_RETURN_IF_ERROR(check(w.output_norm, H, "output_norm", -1));
  if (!w.output.empty()) LOWBIT_RETURN_IF_ERROR(check(w.output, size_t(c.vocab_size) * H, "output", -1));
  LOWBIT_CHECK_ARG(w.layers.size() == size_t(c.n_layers), "load_weights: %zu layers, config says %d", w.layers.size(),
                   c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const auto& L = w.layers[l];
    LOWBIT_RETURN_IF_ERROR(check(L.attn_norm, H, "attn_norm", l));
    LOWBIT_RETURN_IF_ERROR(check(L.ffn_norm, H, "ffn_norm", l));
    LOWBIT_RETURN_IF_ERROR(check(L.wq, size_t(c.n_heads) * hd * H, "wq", l));
    LOWBIT_RETURN_IF_ERROR(check(L.wk, size_t(c.n_kv_heads) * hd * H, "wk", l));
    LOWBIT_RETURN_IF_ERROR(check(L.wv, size_t(c.n_kv_heads) * hd * H, "wv", l));
    LOWBIT_RETURN_IF_ERROR(check(L.wo, size_t(H) * c.n_heads * hd, "wo", l));
    LOWBIT_RETURN_IF_ERROR(check(L.w_gate, size_t(c.intermediate) * H, "w_gate", l));
    LOWBIT_RETURN_IF_ERROR(check(L.w_up, size_t(c.intermediate) * H, "w_up", l));
    LOWBIT_RETURN_IF_ERROR(check(L.w_down, size_t(H) * c.intermediate, "w_down", l));
  }
  LOWBIT_RETURN_IF_ERROR(m.for_ranks([&](Rank& r) -> Status {
    free_all(&r.weight_allocs);
    const TpShard& sh = r.shard;
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.tok_embd, size_t(c.vocab_size) * H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(upload_bf16(r.tok_embd, to_bf16(w.tok_embd.data(), w.tok_embd.size())));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.out_norm, H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(upload_bf16(r.out_norm, to_bf16(w.output_norm.data(), H)));
    if (w.output.empty()) {
      r.lm_head = r.tok_embd;
    } else {
      LOWBIT_RETURN_IF_ERROR(dalloc(&r.lm_head, size_t(c.vocab_size) * H, &r.weight_allocs));
      LOWBIT_RETURN_IF_ERROR(upload_bf16(r.lm_head, to_bf16(w.output.data(), w.output.size())));
    }
    r.layers.assign(c.n_layers, LayerPtrs{});
    for (int l = 0; l < c.n_layers; ++l) {
      const auto& L = w.layers[l];
      LayerPtrs& P = r.layers[l];
      LOWBIT_RETURN_IF_ERROR(m.alloc_layer(r, &P));
      LOWBIT_RETURN_IF_ERROR(upload_bf16(P.attn_norm, to_bf16(L.attn_norm.data(), H)));
      LOWBIT_RETURN_IF_ERROR(upload_bf16(P.ffn_norm, to_bf16(L.ffn_norm.data(), H)));
      std::vector<uint16_t> qkv;
      append_rows(L.wq, H, sh.q_head0 * hd, sh.n_q_heads * hd, &qkv);
      append_rows(L.wk, H, sh.kv_head0 * hd, sh.n_kv_heads * hd, &qkv);
      append_rows(L.wv, H, sh.kv_head0 * hd, sh.n_kv_heads * hd, &qkv);
      LOWBIT_RETURN_IF_ERROR(upload_bf16(P.wqkv, qkv));
      LOWBIT_RETURN_IF_ERROR(upload_bf16(P.wo, cols_slice(L.wo, H, c.n_heads * hd, sh.q_head0 * hd, sh.n_q_heads * hd)));
      std::vector<uint16_t> gu;
      append_rows(L.w_gate, H, sh.inter0, sh.n_inter, &gu);
      append_rows(L.w_up, H, sh.inter0, sh.n_inter, &gu);
      LOWBIT_RETURN_IF_ERROR(upload_bf16(P.wgu, gu));
      LOWBIT_RETURN_IF_ERROR(upload_bf16(P.wdown, cols_slice(L.w_down, H, c.intermediate, sh.inter0, sh.n_inter)));
    }
    return Status::Ok();
  }));
  m.weights_ready = true;
  return Status::Ok();
}

Status TpRunner::init_synthetic(uint64_t seed, bool share_layers) {
  Impl& m = *impl_;
  const LlamaConfig& c = m.cfg;
  const int H = c.hidden;
  LOWBIT_RETURN_IF_ERROR(m.for_ranks([&](Rank& r) -> Status {
    free_all(&r.weight_allocs);
    uint64_t sd = seed * 1000003ull + uint64_t(r.rank) * 7919ull;
    auto fill = [&](bf16* p, size_t n, float lo, float hi) { return gpu::fill_uniform(p, n, ++sd, lo, hi, r.stream); };
    // Scales keep activations O(1) through the layers: U(-a, a) with a = sqrt(3 / fan_in).
    auto a = [](int fan_in) { return std::sqrt(3.0f / float(fan_in)); };
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.tok_embd, size_t(c.vocab_size) * H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(fill(r.tok_embd, size_t(c.vocab_size) * H, -1.0f, 1.0f));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.out_norm, H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(fill(r.out_norm, H, 0.9f, 1.1f));
    if (c.tied_embeddings) {
      r.lm_head = r.tok_embd;
    } else {
      LOWBIT_RETURN_IF_ERROR(dalloc(&r.lm_head, size_t(c.vocab_size) * H, &r.weight_allocs));
      LOWBIT_RETURN_IF_ERROR(fill(r.lm_head, size_t(c.vocab_size) * H, -a(H), a(H)));
    }
    r.layers.assign(c.n_layers, LayerPtrs{});
    const int distinct = share_layers ? 1 : c.n_layers;
    for (int l = 0; l < distinct; ++l) {
      LayerPtrs& P = r.layers[l];
      LOWBIT_RETURN_IF_ERROR(m.alloc_layer(r, &P));
      const int qdim = r.shard.n_q_heads * c.head_dim, I = r.shard.n_inter;
      LOWBIT_RETURN_IF_ERROR(fill(P.attn_norm, H, 0.9f, 1.1f));
      LOWBIT_RETURN_IF_ERROR(fill(P.ffn_norm, H, 0.9f, 1.1f));
      LOWBIT_RETURN_IF_ERROR(fill(P.wqkv, size_t(m.qkv_width(r)) * H, -a(H), a(H)));
      // Row-parallel inputs are 1/tp of the full fan-in: scale by the full one.
      LOWBIT_RETURN_IF_ERROR(fill(P.wo, size_t(H) * qdim, -a(c.n_heads * c.head_dim), a(c.n_heads * c.head_dim)));
      LOWBIT_RETURN_IF_ERROR(fill(P.wgu, size_t(2) * I * H, -a(H), a(H)));
      LOWBIT_RETURN_IF_ERROR(fill(P.wdown, size_t(H) * I, -a(c.intermediate), a(c.intermediate)));
    }
    for (int l = distinct; l < c.n_layers; ++l) r.layers[l] = r.layers[0];
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
    return Status::Ok();
  }));
  m.weights_ready = true;
  return Status::Ok();
}

Status TpRunner::prepare(const TpRunOptions& opt) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(opt.batch > 0 && opt.seq > 0, "prepare: batch=%d seq=%d must be > 0", opt.batch, opt.seq);
  const int64_t T64 = int64_t(opt.batch) * opt.seq;
  LOWBIT_CHECK_ARG(T64 * std::max(m.cfg.hidden, m.cfg.vocab_size) < (1ll << 31) || !opt.all_logits,
                   "prepare: %lld tokens x vocab %d logits exceed 2^31 elements; use a smaller batch",
                   static_cast<long long>(T64), m.cfg.vocab_size);
  LOWBIT_CHECK_ARG(T64 < (1 << 30), "prepare: %lld tokens too many", static_cast<long long>(T64));
  m.opt = opt;
  m.prepared = false;
  m.tokens_ready = false;
  const int T = int(T64), H = m.cfg.hidden;
  const int logit_rows = opt.all_logits ? T : opt.batch;
  LOWBIT_RETURN_IF_ERROR(m.for_ranks([&](Rank& r) -> Status {
    free_all(&r.act_allocs);
    const int I = r.shard.n_inter, qdim = r.shard.n_q_heads * m.cfg.head_dim;
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.x, size_t(T) * H, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.xn, size_t(T) * H, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.y, size_t(T) * H, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.qkv, size_t(T) * m.qkv_width(r), &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.attn, size_t(T) * qdim, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.gu, size_t(T) * 2 * I, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.act, size_t(T) * I, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.tokens, T, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.targets, T, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.nll, T, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.logits, size_t(logit_rows) * m.cfg.vocab_size, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.positions, T, &r.act_allocs));
    std::vector<int32_t> pos(T);
    for (int t = 0; t < T; ++t) pos[t] = t % opt.seq;
    LOWBIT_CUDA_RETURN(cudaMemcpy(r.positions, pos.data(), T * 4, cudaMemcpyHostToDevice));
    gpu::AttentionShape as;
    as.batch = opt.batch, as.seq = opt.seq, as.n_q_heads = r.shard.n_q_heads, as.n_kv_heads = r.shard.n_kv_heads;
    as.head_dim = m.cfg.head_dim;
    // Cap the score workspace at 8 GiB: larger batches run attention in sequence chunks.
    gpu::AttentionShape one = as;
    one.batch = 1;
    r.attn_ws_bytes = std::max(gpu::attention_workspace_bytes(one),
                               std::min<size_t>(gpu::attention_workspace_bytes(as), 8ull << 30));
    LOWBIT_RETURN_IF_ERROR(dmalloc(&r.attn_ws, r.attn_ws_bytes, &r.act_allocs));
    // Poison: a missing write shows up as NaN (0xFFFF bf16) instead of stale numbers.
    LOWBIT_CUDA_RETURN(cudaMemset(r.x, 0xFF, size_t(T) * H * 2));
    LOWBIT_CUDA_RETURN(cudaMemset(r.y, 0xFF, size_t(T) * H * 2));
    LOWBIT_CUDA_RETURN(cudaMemset(r.logits, 0xFF, size_t(logit_rows) * m.cfg.vocab_size * 4));
    return Status::Ok();
  }));
  m.prepared = true;
  return Status::Ok();
}

Status TpRunner::set_tokens(const std::vector<int32_t>& tokens) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(m.prepared, "set_tokens: prepare() first");
  const size_t T = size_t(m.opt.batch) * m.opt.seq;
  LOWBIT_CHECK_ARG(tokens.size() == T, "set_tokens: %zu tokens, batch x seq = %zu", tokens.size(), T);
  for (size_t i = 0; i < T; ++i)
    LOWBIT_CHECK_ARG(tokens[i] >= 0 && tokens[i] < m.cfg.vocab_size, "set_tokens: token %zu = %d outside vocab %d", i,
                     tokens[i], m.cfg.vocab_size);
  LOWBIT_RETURN_IF_ERROR(m.for_ranks([&](Rank& r) -> Status {
    LOWBIT_CUDA_RETURN(cudaMemcpy(r.tokens, tokens.data(), T * 4, cudaMemcpyHostToDevice));
    return Status::Ok();
  }));
  m.tokens_ready = true;
  return Status::Ok();
}

Status TpRunner::forward(const TpComm& comm) {
  Impl& m = *impl_;
  LOWBIT_RETURN_IF_ERROR(m.ready());
  return m.for_ranks([&](Rank& r) -> Status {
    LOWBIT_RETURN_IF_ERROR(m.enqueue_forward(r, comm));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
    if (r.comm) LOWBIT_RETURN_IF_ERROR(r.comm->check_peer_error());
    return Status::Ok();
  });
}

Status TpRunner::logits(std::vector<float>* out) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(out, "logits: null output");
  LOWBIT_RETURN_IF_ERROR(m.ready());
  const size_t rows = m.opt.all_logits ? size_t(m.opt.batch) * m.opt.seq : size_t(m.opt.batch);
  out->resize(rows * m.cfg.vocab_size);
  LOWBIT_CUDA_RETURN(cudaSetDevice(m.ranks[0].device));
  LOWBIT_CUDA_RETURN(cudaMemcpy(out->data(), m.ranks[0].logits, out->size() * 4, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status TpRunner::nll(const std::vector<int32_t>& targets, std::vector<float>* out) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(out, "nll: null output");
  LOWBIT_RETURN_IF_ERROR(m.ready());
  LOWBIT_CHECK_ARG(m.opt.all_logits, "nll: prepare with all_logits = true");
  const int T = m.opt.batch * m.opt.seq;
  LOWBIT_CHECK_ARG(targets.size() == size_t(T), "nll: %zu targets for %d tokens", targets.size(), T);
  for (int i = 0; i < T; ++i)
    LOWBIT_CHECK_ARG(targets[i] < m.cfg.vocab_size, "nll: target %d = %d outside vocab %d", i, targets[i],
                     m.cfg.vocab_size);
  Rank& r = m.ranks[0];
  LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
  LOWBIT_CUDA_RETURN(cudaMemcpy(r.targets, targets.data(), size_t(T) * 4, cudaMemcpyHostToDevice));
  LOWBIT_RETURN_IF_ERROR(gpu::nll_rows(r.logits, T, m.cfg.vocab_size, r.targets, r.nll, r.stream));
  out->resize(T);
  LOWBIT_CUDA_RETURN(cudaMemcpyAsync(out->data(), r.nll, size_t(T) * 4, cudaMemcpyDeviceToHost, r.stream));
  LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
  return Status::Ok();
}

Status TpRunner::hidden_state(int rank, std::vector<uint16_t>* bits) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(bits && rank >= 0 && rank < m.tp(), "hidden_state: rank %d of %d", rank, m.tp());
  LOWBIT_RETURN_IF_ERROR(m.ready());
  bits->resize(size_t(m.opt.batch) * m.opt.seq * m.cfg.hidden);
  LOWBIT_CUDA_RETURN(cudaSetDevice(m.ranks[rank].device));
  LOWBIT_CUDA_RETURN(cudaMemcpy(bits->data(), m.ranks[rank].x, bits->size() * 2, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status TpRunner::time_forward(const TpComm& comm, int warmup, int reps, double* median_ms, bool* graphed) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(median_ms && graphed && reps > 0 && warmup >= 0, "time_forward: bad arguments");
  LOWBIT_RETURN_IF_ERROR(m.ready());
  return m.time_ranks([&](Rank& r) { return m.enqueue_forward(r, comm); }, warmup, reps, median_ms, graphed);
}

Status TpRunner::time_allreduce(const allreduce::Options& opts, int calls, int warmup, int reps, double* median_us) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(median_us && calls > 0 && reps > 0, "time_allreduce: bad arguments");
  LOWBIT_CHECK_ARG(m.tp() > 1, "time_allreduce: needs tp > 1");
  LOWBIT_CHECK_ARG(m.prepared, "time_allreduce: prepare() first");
  const size_t n = size_t(m.opt.batch) * m.opt.seq * m.cfg.hidden;
  // Out of place from a fixed random input: in place, repeated sums would grow to inf.
  LOWBIT_RETURN_IF_ERROR(m.for_ranks([&](Rank& r) -> Status {
    LOWBIT_RETURN_IF_ERROR(gpu::fill_uniform(r.x, n, 1234 + r.rank, -2.0f, 2.0f, r.stream));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
    return Status::Ok();
  }));
  bool graphed = false;
  double ms = 0;
  LOWBIT_RETURN_IF_ERROR(m.time_ranks(
      [&](Rank& r) -> Status {
        for (int i = 0; i < calls; ++i)
          LOWBIT_RETURN_IF_ERROR(r.comm->allreduce(r.x, r.y, n, DType::kBF16, opts, r.stream));
        return Status::Ok();
      },
      warmup, reps, &ms, &graphed));
  *median_us = ms * 1000.0 / calls;
  m.tokens_ready = m.tokens_ready;  // x is the residual stream: the next forward rewrites it
  return Status::Ok();
}

allreduce::Mode TpRunner::resolve_mode(const allreduce::Options& opts) const {
  const Impl& m = *impl_;
  if (m.tp() < 2 || !m.ranks[0].comm) return opts.mode;
  return m.ranks[0].comm->resolve_mode(size_t(m.opt.batch) * m.opt.seq * m.cfg.hidden, DType::kBF16, opts);
}

// ---- perplexity ---------------------------------------------------------------------
Status gpu_perplexity(const LlamaConfig& cfg, const LlamaWeights& w, const std::vector<int>& tokens,
                      const GpuPplOptions& o, PplResult* out) {
  LOWBIT_CHECK_ARG(out, "gpu_perplexity: null output");
  LOWBIT_CHECK_ARG(o.ctx >= 2 && o.tp >= 1 && o.batch >= 1, "gpu_perplexity: ctx=%d tp=%d batch=%d", o.ctx, o.tp,
                   o.batch);
  LOWBIT_CHECK_ARG(o.first_scored < o.ctx, "gpu_perplexity: first_scored=%d >= ctx=%d", o.first_scored, o.ctx);
  int n_chunks = int(tokens.size() / size_t(o.ctx));
  if (o.max_chunks >= 0) n_chunks = std::min(n_chunks, o.max_chunks);
  LOWBIT_CHECK_ARG(n_chunks > 0, "gpu_perplexity: %zu tokens < ctx %d", tokens.size(), o.ctx);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> devices(o.tp);
  for (int i = 0; i < o.tp; ++i) devices[i] = i;
  std::unique_ptr<TpRunner> runner;
  LOWBIT_RETURN_IF_ERROR(TpRunner::create(cfg, devices, allreduce::Config{}, &runner));
  LOWBIT_RETURN_IF_ERROR(runner->load_weights(w));
  TpRunOptions ro;
  ro.batch = std::min(o.batch, n_chunks);
  ro.seq = o.ctx;
  ro.all_logits = true;
  LOWBIT_RETURN_IF_ERROR(runner->prepare(ro));
  PplResult r;
  const int first = std::max(1, o.first_scored);
  for (int c0 = 0; c0 < n_chunks; c0 += ro.batch) {
    std::vector<int32_t> tok(size_t(ro.batch) * o.ctx), tgt(size_t(ro.batch) * o.ctx, -1);
    for (int b = 0; b < ro.batch; ++b) {
      const int c = std::min(c0 + b, n_chunks - 1);  // padding rows repeat the last chunk, unscored
      for (int j = 0; j < o.ctx; ++j) tok[size_t(b) * o.ctx + j] = tokens[size_t(c) * o.ctx + j];
      if (c0 + b >= n_chunks) continue;
      for (int j = first; j < o.ctx; ++j) tgt[size_t(b) * o.ctx + j - 1] = tokens[size_t(c) * o.ctx + j];
    }
    LOWBIT_RETURN_IF_ERROR(runner->set_tokens(tok));
    LOWBIT_RETURN_IF_ERROR(runner->forward(o.comm));
    std::vector<float> nll;
    LOWBIT_RETURN_IF_ERROR(runner->nll(tgt, &nll));
    for (size_t i = 0; i < nll.size(); ++i)
      if (tgt[i] >= 0) {
        r.nll_sum += nll[i];
        ++r.n_scored;
      }
  }
  r.n_chunks = n_chunks;
  r.ppl = std::exp(r.nll_sum / double(r.n_scored));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = r;
  return Status::Ok();
}

Status gpu_perplexity(const LlamaConfig& cfg, const LlamaWeights& w, const std::vector<int>& tokens, int ctx, int tp,
                      allreduce::Mode mode, int group_size, PplResult* out) {
  GpuPplOptions o;
  o.ctx = ctx;
  o.tp = tp;
  o.comm.opts.mode = mode;
  o.comm.opts.group_size = group_size;
  return gpu_perplexity(cfg, w, tokens, o, out);
}

}  // namespace lowbit::model
