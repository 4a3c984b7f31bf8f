// Tensor-parallel Llama runner: one thread per rank, see include/lowbit/model/tp_runner.h
// and docs/tp-runner.md.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include <nccl.h>

#include "kernels/model/cublas_check.cuh"
#include "lowbit/allreduce_cuda.h"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/detail/float_bits.h"
#include "lowbit/int4/kernels.h"
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
  // MoE layers (n_experts > 0) instead of wgu/wdown:
  bf16* router = nullptr;     // [E, H] bf16, replicated
  int4::KernelWeightsView w13, w2;  // int4 experts: [E, 2 I/TP, H] (gate rows then up rows), [E, H, I/TP]
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
  float* router_logits = nullptr;  // MoE: [T, E]
  void* moe_ws = nullptr;
  size_t moe_ws_bytes = 0;
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
    if (cfg.n_experts > 0) return alloc_moe(r, L);
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->wgu, size_t(2) * r.shard.n_inter * H, &r.weight_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->wdown, size_t(H) * r.shard.n_inter, &r.weight_allocs));
    return Status::Ok();
  }

  // Expert shapes of this rank: w13 [E, 2 I/TP, H], w2 [E, H, I/TP]; symmetric int4, group 128,
  // bf16 scales, the default kernel layout of the shape (MMA-tiled or N-packed).
  int4::WeightShape moe_shape(const Rank& r, bool w13) const {
    int4::WeightShape s;
    s.experts = cfg.n_experts;
    s.n = w13 ? 2 * r.shard.n_inter : cfg.hidden;
    s.k = w13 ? cfg.hidden : r.shard.n_inter;
    s.group_size = 128;
    s.symmetric = true;
    s.act = DType::kBF16;
    return s;
  }
  Status alloc_moe(Rank& r, LayerPtrs* L) {
    LOWBIT_RETURN_IF_ERROR(dalloc(&L->router, size_t(cfg.n_experts) * cfg.hidden, &r.weight_allocs));
    for (int which = 0; which < 2; ++which) {
      int4::KernelWeightsView& v = which == 0 ? L->w13 : L->w2;
      v.shape = moe_shape(r, which == 0);
      v.kind = int4::kernel_layout_for(v.shape);  // random words: any layout reads them
      LOWBIT_CHECK_ARG(v.kind == int4::KernelLayoutKind::kNPackedInterleaved || v.kind == int4::KernelLayoutKind::kMmaTiled,
                       "TpRunner: MoE expert shape N=%d K=%d has no int4 layout the fused MoE reads", v.shape.n,
                       v.shape.k);
      void *q = nullptr, *sc = nullptr;
      LOWBIT_RETURN_IF_ERROR(dmalloc(&q, int4::kernel_qweight_bytes(v.shape, v.kind), &r.weight_allocs));
      LOWBIT_RETURN_IF_ERROR(dmalloc(&sc, int4::kernel_scale_count(v.shape) * 2, &r.weight_allocs));
      v.qweight = q;
      v.scales = static_cast<const uint16_t*>(sc);
      v.zeros = nullptr;
    }
    return Status::Ok();
  }

  // The forward is enqueued on every rank from ONE thread: stage by stage, rank by rank,
  // with each set of all-reduces issued inside one ncclGroupStart/End. NCCL requires the
  // group when a single thread drives several GPUs; the earlier one-thread-per-rank capture
  // of ncclAllReduce (no group) faulted with an illegal address on 64 MiB messages.
  Status each_rank(const std::function<Status(Rank&)>& fn) {
    for (Rank& r : ranks) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
      if (Status st = fn(r); !st.ok()) return make_status(st.code(), "rank %d: %s", r.rank, st.message().c_str());
    }
    return Status::Ok();
  }
  // One all-reduce per rank of `count` bf16 from in to out, grouped.
  Status allreduce_all(const allreduce::Options& o, size_t count, bool from_x) {
    LOWBIT_NCCL_RETURN(ncclGroupStart());
    Status st = each_rank([&](Rank& r) { return r.comm->allreduce(from_x ? r.x : r.y, r.y, count, DType::kBF16, o, r.stream); });
    const ncclResult_t e = ncclGroupEnd();
    LOWBIT_RETURN_IF_ERROR(st);
    if (e != ncclSuccess) return make_status(StatusCode::kNcclError, "ncclGroupEnd: %s", ncclGetErrorString(e));
    return Status::Ok();
  }

  Status enqueue_attention(Rank& r, const LayerPtrs& L) {
    const int T = opt.batch * opt.seq, H = cfg.hidden, hd = cfg.head_dim;
    const int nq = r.shard.n_q_heads, nkv = r.shard.n_kv_heads;
    const int64_t W = qkv_width(r);
    cudaStream_t s = r.stream;
    gpu::AttentionShape as;
    as.batch = opt.batch, as.seq = opt.seq, as.n_q_heads = nq, as.n_kv_heads = nkv, as.head_dim = hd;
    as.qkv_stride = W, as.out_stride = int64_t(nq) * hd;
    LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x, H, L.attn_norm, r.xn, H, T, H, cfg.rms_eps, s));
    LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, L.wqkv, r.qkv, false, W, T, int(W), H));
    LOWBIT_RETURN_IF_ERROR(gpu::rope(r.qkv, W, T, nq + nkv, hd, r.positions, cfg.rope_theta, s));
    LOWBIT_RETURN_IF_ERROR(gpu::causal_attention(r.cublas, as, r.qkv, r.attn, r.attn_ws, r.attn_ws_bytes, s));
    return gpu::linear(r.cublas, r.attn, int64_t(nq) * hd, L.wo, r.y, false, H, T, H, nq * hd);
  }

  Status enqueue_ffn(Rank& r, const LayerPtrs& L) {
    const int T = opt.batch * opt.seq, H = cfg.hidden, I = r.shard.n_inter;
    cudaStream_t s = r.stream;
    LOWBIT_RETURN_IF_ERROR(gpu::residual_add(r.x, r.y, int64_t(T) * H, s));
    LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x, H, L.ffn_norm, r.xn, H, T, H, cfg.rms_eps, s));
    if (cfg.n_experts > 0) return enqueue_moe(r, L);
    LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, L.wgu, r.gu, false, 2 * I, T, 2 * I, H));
    LOWBIT_RETURN_IF_ERROR(gpu::silu_mul(r.gu, T, I, r.act, s));
    return gpu::linear(r.cublas, r.act, I, L.wdown, r.y, false, H, T, H, I);
  }

  // MoE FFN (Megatron MoE-TP): router logits from the replicated gate (fp32), then the int4
  // fused MoE over every expert's [i0, i0 + I/TP) slice; the partial sums are all-reduced.
  Status enqueue_moe(Rank& r, const LayerPtrs& L) {
    const int T = opt.batch * opt.seq, H = cfg.hidden;
    LOWBIT_RETURN_IF_ERROR(gpu::linear(r.cublas, r.xn, H, L.router, r.router_logits, true, cfg.n_experts, T,
                                       cfg.n_experts, H));
    int4::MoeArgs a;
    a.x = r.xn, a.router_logits = r.router_logits, a.y = r.y, a.m = T, a.topk = cfg.n_experts_used;
    a.renormalize = true;
    return int4::fused_moe(a, L.w13, L.w2, r.moe_ws, r.moe_ws_bytes, r.stream);
  }

  Status enqueue_forward_all(const TpComm& comm) {
    const int T = opt.batch * opt.seq, H = cfg.hidden;
    const bool reduce = !comm.skip && tp() > 1;
    const size_t n = size_t(T) * H;
    LOWBIT_RETURN_IF_ERROR(each_rank([&](Rank& r) -> Status {
      LOWBIT_CUBLAS_RETURN(cublasSetStream(r.cublas, r.stream));
      return gpu::embedding(r.tokens, T, r.tok_embd, cfg.vocab_size, H, r.x, r.stream);
    }));
    for (int l = 0; l < layers_to_run(); ++l) {
      LOWBIT_RETURN_IF_ERROR(each_rank([&](Rank& r) { return enqueue_attention(r, r.layers[l]); }));
      if (reduce) LOWBIT_RETURN_IF_ERROR(allreduce_all(comm.opts, n, false));
      LOWBIT_RETURN_IF_ERROR(each_rank([&](Rank& r) { return enqueue_ffn(r, r.layers[l]); }));
      if (reduce) LOWBIT_RETURN_IF_ERROR(allreduce_all(comm.opts, n, false));
      LOWBIT_RETURN_IF_ERROR(each_rank([&](Rank& r) { return gpu::residual_add(r.x, r.y, int64_t(T) * H, r.stream); }));
    }
    return each_rank([&](Rank& r) -> Status {
      cudaStream_t s = r.stream;
      if (opt.all_logits) {
        LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x, H, r.out_norm, r.xn, H, T, H, cfg.rms_eps, s));
        return gpu::linear(r.cublas, r.xn, H, r.lm_head, r.logits, true, cfg.vocab_size, T, cfg.vocab_size, H);
      }
      // last token of every sequence: row stride seq * H picks it without a gather
      LOWBIT_RETURN_IF_ERROR(gpu::rmsnorm(r.x + int64_t(opt.seq - 1) * H, int64_t(opt.seq) * H, r.out_norm, r.xn, H,
                                          opt.batch, H, cfg.rms_eps, s));
      return gpu::linear(r.cublas, r.xn, H, r.lm_head, r.logits, true, cfg.vocab_size, opt.batch, cfg.vocab_size, H);
    });
  }

  Status ready() const {
    if (!weights_ready) return make_status(StatusCode::kInvalidArgument, "TpRunner: no weights (load or synthesize)");
    if (!prepared) return make_status(StatusCode::kInvalidArgument, "TpRunner: prepare() not called");
    if (!tokens_ready) return make_status(StatusCode::kInvalidArgument, "TpRunner: set_tokens() not called");
    return Status::Ok();
  }

  // Times `enqueue_all` (enqueues on every rank from this thread): captured into one graph
  // per rank (all streams captured together, thread-local mode), warm-up replays, then
  // `reps` replays launched back to back on all ranks; per replay the slowest rank; median ms.
  // Falls back to eager launches when capture fails.
  Status time_all(const std::function<Status()>& enqueue_all, int warmup, int reps, double* median_ms,
                  bool* graphed) {
    const int n = tp();
    std::vector<cudaGraphExec_t> exec(n, nullptr);
    std::vector<cudaGraph_t> g(n, nullptr);
    bool ok = true;
    for (Rank& r : ranks) {
      LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
      LOWBIT_CUDA_RETURN(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
    }
    Status cap = enqueue_all();
    for (Rank& r : ranks) {
      if (cudaSetDevice(r.device) != cudaSuccess || cudaStreamEndCapture(r.stream, &g[r.rank]) != cudaSuccess ||
          !g[r.rank])
        ok = false;
    }
    ok = ok && cap.ok();
    for (Rank& r : ranks) {
      if (cudaSetDevice(r.device) != cudaSuccess) ok = false;
      if (ok && cudaGraphInstantiate(&exec[r.rank], g[r.rank], 0) != cudaSuccess) ok = false;
      if (g[r.rank]) cudaGraphDestroy(g[r.rank]);
      (void)cudaGetLastError();  // a failed capture is not an error: we fall back to eager launches
    }
    *graphed = ok;
    auto destroy = [&]() {
      for (Rank& r : ranks)
        if (exec[r.rank]) {
          cudaSetDevice(r.device);
          cudaGraphExecDestroy(exec[r.rank]);
        }
    };
    auto run = [&]() -> Status {
      if (!ok) return enqueue_all();
      for (Rank& r : ranks) {
        LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
        LOWBIT_CUDA_RETURN(cudaGraphLaunch(exec[r.rank], r.stream));
      }
      return Status::Ok();
    };
    std::vector<cudaEvent_t> a(n, nullptr), b(n, nullptr);
    std::vector<double> per_rep(reps, 0.0);
    auto body = [&]() -> Status {
      for (Rank& r : ranks) {
        LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
        LOWBIT_CUDA_RETURN(cudaEventCreate(&a[r.rank]));
        LOWBIT_CUDA_RETURN(cudaEventCreate(&b[r.rank]));
      }
      for (int i = 0; i < warmup; ++i) LOWBIT_RETURN_IF_ERROR(run());
      LOWBIT_RETURN_IF_ERROR(sync_all());
      for (int i = 0; i < reps; ++i) {
        for (Rank& r : ranks) {
          LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
          LOWBIT_CUDA_RETURN(cudaEventRecord(a[r.rank], r.stream));
        }
        LOWBIT_RETURN_IF_ERROR(run());
        for (Rank& r : ranks) {
          LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
          LOWBIT_CUDA_RETURN(cudaEventRecord(b[r.rank], r.stream));
        }
        for (Rank& r : ranks) {
          LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
          LOWBIT_CUDA_RETURN(cudaEventSynchronize(b[r.rank]));
          float t = 0;
          LOWBIT_CUDA_RETURN(cudaEventElapsedTime(&t, a[r.rank], b[r.rank]));
          per_rep[i] = std::max(per_rep[i], double(t));
        }
      }
      return Status::Ok();
    };
    Status st = body();
    for (Rank& r : ranks) {
      cudaSetDevice(r.device);
      if (a[r.rank]) cudaEventDestroy(a[r.rank]);
      if (b[r.rank]) cudaEventDestroy(b[r.rank]);
    }
    destroy();
    LOWBIT_RETURN_IF_ERROR(st);
    std::sort(per_rep.begin(), per_rep.end());
    *median_ms = per_rep[reps / 2];
    return Status::Ok();
  }

  // Waits for every rank's stream; a peer timeout recorded by an all-reduce kernel wins.
  Status sync_all() {
    Status first;
    for (Rank& r : ranks) {
      cudaError_t e = cudaSetDevice(r.device);
      if (e == cudaSuccess) e = cudaStreamSynchronize(r.stream);
      Status st = r.comm ? r.comm->check_peer_error() : Status::Ok();
      if (st.ok() && e != cudaSuccess)
        st = make_status(StatusCode::kCudaError, "cudaSetDevice / cudaStreamSynchronize: %s", cudaGetErrorString(e));
      if (!st.ok() && first.ok()) first = make_status(st.code(), "rank %d: %s", r.rank, st.message().c_str());
    }
    return first;
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
    LOWBIT_CHECK_ARG(cfg.n_experts_used >= 1 && cfg.n_experts_used <= cfg.n_experts && cfg.expert_intermediate > 0,
                     "TpRunner::create: MoE config %s: %d experts, %d used, expert_intermediate %d", cfg.name.c_str(),
                     cfg.n_experts, cfg.n_experts_used, cfg.expert_intermediate);
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
    // Stream first: cublasSetStream resets the workspace to cuBLAS's default pool.
    LOWBIT_CUBLAS_RETURN(cublasSetStream(r.cublas, r.stream));
    LOWBIT_CUBLAS_RETURN(cublasSetWorkspace(r.cublas, r.cublas_ws, kCublasWorkspace));
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
  if (c.n_experts > 0)
    return make_status(StatusCode::kNotSupported,
                       "load_weights: MoE (%s) runs with synthetic int4 experts only (init_synthetic)", c.name.c_str());
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
    // Pageable cudaMemcpy may return before the DMA lands, and the forward runs on a
    // non-blocking stream: wait here.
    LOWBIT_CUDA_RETURN(cudaDeviceSynchronize());
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
      if (c.n_experts > 0) {
        LOWBIT_RETURN_IF_ERROR(fill(P.router, size_t(c.n_experts) * H, -a(H), a(H)));
        // int4 experts: (q - 8) has standard deviation ~4.64, so scale 1 / (4.64 sqrt(fan_in))
        // gives weights of the same spread as the dense layers (fan_in of w2: the full I).
        for (int which = 0; which < 2; ++which) {
          const int4::KernelWeightsView& v = which == 0 ? P.w13 : P.w2;
          const float sc = 1.0f / (4.64f * std::sqrt(float(which == 0 ? H : c.expert_intermediate)));
          LOWBIT_RETURN_IF_ERROR(gpu::fill_bits(static_cast<uint32_t*>(const_cast<void*>(v.qweight)),
                                                int4::kernel_qweight_bytes(v.shape, v.kind) / 4, ++sd, r.stream));
          LOWBIT_RETURN_IF_ERROR(fill(reinterpret_cast<bf16*>(const_cast<uint16_t*>(v.scales)),
                                      int4::kernel_scale_count(v.shape), 0.9f * sc, 1.1f * sc));
        }
      } else {
        LOWBIT_RETURN_IF_ERROR(fill(P.wgu, size_t(2) * I * H, -a(H), a(H)));
        LOWBIT_RETURN_IF_ERROR(fill(P.wdown, size_t(H) * I, -a(c.intermediate), a(c.intermediate)));
      }
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
    if (m.cfg.n_experts > 0) {
      LOWBIT_RETURN_IF_ERROR(dalloc(&r.router_logits, size_t(T) * m.cfg.n_experts, &r.act_allocs));
      LOWBIT_RETURN_IF_ERROR(int4::moe_workspace_size(T, m.cfg.n_experts_used, m.cfg.n_experts, H, I, DType::kBF16, 0,
                                                      &r.moe_ws_bytes));
      LOWBIT_RETURN_IF_ERROR(dmalloc(&r.moe_ws, r.moe_ws_bytes, &r.act_allocs));
    } else {
      LOWBIT_RETURN_IF_ERROR(dalloc(&r.gu, size_t(T) * 2 * I, &r.act_allocs));
      LOWBIT_RETURN_IF_ERROR(dalloc(&r.act, size_t(T) * I, &r.act_allocs));
    }
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.tokens, T, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.targets, T, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.nll, T, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.logits, size_t(logit_rows) * m.cfg.vocab_size, &r.act_allocs));
    LOWBIT_RETURN_IF_ERROR(dalloc(&r.positions, T, &r.act_allocs));
    std::vector<int32_t> pos(T);
    for (int t = 0; t < T; ++t) pos[t] = t % opt.seq;
    // Every host<->device copy and memset goes on the rank's stream: it is non-blocking, so
    // work on the legacy default stream (plain cudaMemcpy/cudaMemset) is not ordered with
    // the kernels, and a pageable cudaMemcpy may return before its DMA has landed.
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(r.positions, pos.data(), size_t(T) * 4, cudaMemcpyHostToDevice, r.stream));
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
    LOWBIT_CUDA_RETURN(cudaMemsetAsync(r.x, 0xFF, size_t(T) * H * 2, r.stream));
    LOWBIT_CUDA_RETURN(cudaMemsetAsync(r.y, 0xFF, size_t(T) * H * 2, r.stream));
    LOWBIT_CUDA_RETURN(cudaMemsetAsync(r.logits, 0xFF, size_t(logit_rows) * m.cfg.vocab_size * 4, r.stream));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));  // pos leaves scope
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
    // On the rank's stream (see prepare): the next forward's embedding must see these ids.
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(r.tokens, tokens.data(), T * 4, cudaMemcpyHostToDevice, r.stream));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
    return Status::Ok();
  }));
  m.tokens_ready = true;
  return Status::Ok();
}

Status TpRunner::forward(const TpComm& comm) {
  Impl& m = *impl_;
  LOWBIT_RETURN_IF_ERROR(m.ready());
  Status st = m.enqueue_forward_all(comm);
  Status sy = m.sync_all();  // also after an enqueue error: never leave work in flight
  LOWBIT_RETURN_IF_ERROR(st);
  return sy;
}

Status TpRunner::logits(std::vector<float>* out) {
  Impl& m = *impl_;
  LOWBIT_CHECK_ARG(out, "logits: null output");
  LOWBIT_RETURN_IF_ERROR(m.ready());
  const size_t rows = m.opt.all_logits ? size_t(m.opt.batch) * m.opt.seq : size_t(m.opt.batch);
  out->resize(rows * m.cfg.vocab_size);
  Rank& r = m.ranks[0];
  LOWBIT_CUDA_RETURN(cudaSetDevice(r.device));
  LOWBIT_CUDA_RETURN(cudaMemcpyAsync(out->data(), r.logits, out->size() * 4, cudaMemcpyDeviceToHost, r.stream));
  LOWBIT_CUDA_RETURN(cudaStreamSynchronize(r.stream));
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
  LOWBIT_CUDA_RETURN(cudaMemcpyAsync(r.targets, targets.data(), size_t(T) * 4, cudaMemcpyHostToDevice, r.stream));
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
  return m.time_all([&] { return m.enqueue_forward_all(comm); }, warmup, reps, median_ms, graphed);
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
  LOWBIT_RETURN_IF_ERROR(m.time_all(
      [&]() -> Status {
        for (int i = 0; i < calls; ++i) LOWBIT_RETURN_IF_ERROR(m.allreduce_all(opts, n, true));
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
