// Grouped MoE prefill (MoePath::kGrouped): many tokens per expert make the two expert GEMMs
// compute bound, where cuBLAS on dequantized weights beats the CUDA-core fused kernels.
//   1. routing and align as in the fused path (moe_topk, moe_align with block_m, default 8:
//      little padding; each expert's rows are one contiguous run of the sorted order)
//   2. gather: xs[b] = x[sorted[b] / topk] (zeros for padding), pos[p] = b (inverse map;
//      moe_gather.cu, shared with the warp-specialized fused layer)
//   3. the per-expert runs are read back to the host (ONE stream synchronization; this is
//      why the path cannot be captured in a CUDA graph)
//   4. GEMM1: the active experts' w13 dequantized into the slab (several whole experts per
//      fill, or column chunks of one), h13[run_e] = xs[run_e] * W13[e]^T (cuBLAS, fp32
//      accumulation and fp32 output: gate and up are not rounded, as in moe_gemm1)
//   5. inter = act(silu(gate) * up) over all rows (fp32 math, one rounding, as moe_gemm1)
//   6. GEMM2 likewise into out2 (fp32)
//   (4 and 6 can spread the per-expert GEMMs over up to kLeaseWorkers streams: grouped_gemm;
//   one stream by default until measured, LOWBIT_INT4_MOE_STREAMS=4 enables it)
//   7. y[m] = act(sum over slots s, in slot order, of rw[m, s] * out2[pos[m*topk + s]]),
//      the same expression and order as moe_gemm2 + moe_sum.
#include <atomic>
#include <cstdlib>
#include <vector>

#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"
#include "lowbit/detail/cuda_check.h"

namespace lowbit::int4 {
namespace kern {
namespace {

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

struct GroupedLayout {
  size_t ids, weights, sorted, experts, npp, pos, xs, h13, inter, out2, cublas, slab, total;
  size_t slab_bytes;
};

GroupedLayout grouped_layout(int m, int topk, int E, int H, int I, int bm) {
  GroupedLayout L{};
  const size_t P = static_cast<size_t>(m) * topk;
  const size_t maxp = static_cast<size_t>(moe_max_padded(m, topk, E, bm));
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += align256(bytes);
    return at;
  };
  L.ids = take(P * 4);
  L.weights = take(P * 4);
  L.sorted = take(maxp * 4);
  L.experts = take(maxp / bm * 4);
  L.npp = take(4);
  L.pos = take(P * 4);
  L.xs = take(maxp * H * 2);
  L.h13 = take(maxp * 2 * I * 4);  // fp32
  L.inter = take(maxp * I * 2);
  L.out2 = take(maxp * H * 4);
  L.cublas = take(detail::kLeaseWorkers * detail::kCublasWorkspaceBytes);  // one per worker stream
  // The slab: the full budget (several small experts per fill), at least one chunk of each.
  size_t slab = detail::kSlabMaxBytes;
  const size_t c13 = static_cast<size_t>(detail::slab_chunk_cols(2 * I, H)) * H * 2;
  const size_t c2 = static_cast<size_t>(detail::slab_chunk_cols(H, I)) * I * 2;
  if (c13 > slab) slab = c13;
  if (c2 > slab) slab = c2;
  L.slab_bytes = align256(slab);
  L.slab = take(2 * L.slab_bytes);  // double slab: fill f+1 is dequantized while fill f's GEMMs run
  L.total = off;
  return L;
}

// inter[b, i] = act(silu(g) * u), g = h13[b, i], u = h13[b, I + i] (fp32), the expression of
// moe_gemm1's epilogue; 8 columns per thread.
template <typename T>
__global__ void silu_mul_kernel(const float* __restrict__ h13, const int32_t* __restrict__ npp, int I,
                                T* __restrict__ inter) {
  const int rows = *npp, nv = I / 8;
  const size_t total = static_cast<size_t>(rows) * nv;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t b = i / nv;
    const int c = static_cast<int>(i % nv);
    const float4* gp = reinterpret_cast<const float4*>(h13 + b * 2 * I + 8 * c);
    const float4* up = reinterpret_cast<const float4*>(h13 + b * 2 * I + I + 8 * c);
    const float4 g0 = gp[0], g1 = gp[1], u0 = up[0], u1 = up[1];
    const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    const float u[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    uint32_t ow[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      typename Act<T>::T2 o;
      o.x = Act<T>::from_float(g[2 * j] / (1.f + expf(-g[2 * j])) * u[2 * j]);
      o.y = Act<T>::from_float(g[2 * j + 1] / (1.f + expf(-g[2 * j + 1])) * u[2 * j + 1]);
      ow[j] = as_bits(o);
    }
    *reinterpret_cast<uint4*>(inter + b * I + 8 * c) = make_uint4(ow[0], ow[1], ow[2], ow[3]);
  }
}

// y[m, h] = act(sum_s tw[m*topk + s] * out2[pos[m*topk + s], h]), slots in order. ids (caller
// routing): pairs whose expert is outside [0, E) had no row (no pos) and are skipped.
template <typename T>
__global__ void combine_kernel(const float* __restrict__ out2, const int32_t* __restrict__ pos,
                               const float* __restrict__ tw, int M, int topk, int H, T* __restrict__ y,
                               const int32_t* __restrict__ ids, int E) {
  const size_t total = static_cast<size_t>(M) * H;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t m = i / H, h = i % H;
    float s = 0.f;
    for (int t = 0; t < topk; ++t) {
      const size_t p = m * topk + t;
      if (ids != nullptr && static_cast<unsigned>(__ldg(ids + p)) >= static_cast<unsigned>(E)) continue;
      s += tw[p] * out2[static_cast<size_t>(pos[p]) * H + h];
    }
    y[i] = Act<T>::from_float(s);
  }
}

int grid_for(size_t total) { return static_cast<int>(total / 256 + 1 < 4096 ? total / 256 + 1 : 4096); }

template <typename T>
cudaError_t launch_silu(const void* h13, const int32_t* npp, int maxp, int I, void* inter, cudaStream_t st) {
  silu_mul_kernel<T><<<grid_for(static_cast<size_t>(maxp) * (I / 8)), 256, 0, st>>>(static_cast<const float*>(h13),
                                                                                    npp, I, static_cast<T*>(inter));
  return cudaGetLastError();
}
template <typename T>
cudaError_t launch_combine(const float* out2, const int32_t* pos, const float* tw, int M, int topk, int H, void* y,
                           const int32_t* ids, int E, cudaStream_t st) {
  combine_kernel<T><<<grid_for(static_cast<size_t>(M) * H), 256, 0, st>>>(out2, pos, tw, M, topk, H,
                                                                          static_cast<T*>(y), ids, E);
  return cudaGetLastError();
}

// One expert's run of sorted rows.
struct Run {
  int expert, start, rows;
};

std::atomic<int> g_streams_override{0};
int grouped_streams() {
  const int o = g_streams_override.load(std::memory_order_relaxed);
  static const int env = [] {
    const char* e = std::getenv("LOWBIT_INT4_MOE_STREAMS");
    const int v = e ? std::atoi(e) : 0;
    return v >= 1 ? v : 1;  // 1 (the measured schedule) until the worker streams are measured
  }();
  const int n = o > 0 ? o : env;
  return n < 1 ? 1 : n > detail::kLeaseWorkers ? detail::kLeaseWorkers : n;
}

// Event ids in the lease's pool for the multi-stream schedule.
constexpr int kEvFill = 0;                                  // [2] a slab's dequantization done
constexpr int kEvGemm = 2;                                  // [2][workers] a worker's GEMMs of a slab done
constexpr int kEvJoin = kEvGemm + 2 * detail::kLeaseWorkers;  // [workers] a worker's work done
static_assert(kEvJoin + detail::kLeaseWorkers <= detail::kLeaseEvents, "event pool too small");

// GEMM over every run with weight w (N columns, K inputs): out[run rows, n] for all n.
// Consecutive active experts that fit the slab whole share one dequantization launch (a
// "fill"). With S > 1 streams: the fills are dequantized on `st` into two alternating slabs
// and the runs' GEMMs go round-robin to S worker streams (each with its own cuBLAS
// workspace), so small per-expert GEMMs run concurrently and fill f+1 is dequantized while
// fill f's GEMMs run; a slab is rewritten only after every worker finished reading it, and
// `st` joins all workers at the end. Every GEMM writes its own rows: the result does not
// depend on S.
Status grouped_gemm(detail::CublasLease& lease, const KernelWeightsView& w, const std::vector<Run>& runs,
                    const char* in, int ld_in, char* out, int ld_out, bool out_f32, char* slab_base, size_t slab_bytes,
                    char* cublas_ws, cudaStream_t st) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k;
  const detail::SlabLayout layout = detail::slab_layout();
  size_t budget = detail::slab_budget_bytes();
  if (budget > slab_bytes) budget = slab_bytes;
  const int nc = detail::slab_chunk_cols_for(N, K, budget);
  const size_t expert_elems = static_cast<size_t>(N) * K;
  int per_fill = nc == N ? static_cast<int>(budget / (expert_elems * 2)) : 1;
  if (per_fill < 1) per_fill = 1;
  const size_t out_elem = out_f32 ? 4 : 2;
  const int S = grouped_streams();
  char* slabs[2] = {slab_base, slab_base + slab_bytes};
  auto ws_of = [&](int wk) { return cublas_ws + static_cast<size_t>(wk) * detail::kCublasWorkspaceBytes; };
  if (S > 1) LOWBIT_RETURN_IF_ERROR(lease.bind(lease.worker(0), ws_of(0), detail::kCublasWorkspaceBytes));
  int fill = 0, next_worker = 0, bound = 0;
  for (size_t r0 = 0; r0 < runs.size();) {
    // A fill: runs r0.. with consecutive expert ids, at most per_fill of them.
    size_t r1 = r0 + 1;
    while (r1 < runs.size() && static_cast<int>(r1 - r0) < per_fill && runs[r1].expert == runs[r1 - 1].expert + 1)
      ++r1;
    const int e0 = runs[r0].expert, ne = static_cast<int>(r1 - r0);
    for (int n0 = 0; n0 < N; n0 += nc, ++fill) {
      const int cols = N - n0 < nc ? N - n0 : nc;
      const size_t stride = static_cast<size_t>(cols) * K;  // elements per expert in the slab
      const int b = S > 1 ? fill % 2 : 0;
      if (S > 1 && fill >= 2)
        for (int wk = 0; wk < S; ++wk) LOWBIT_CUDA_RETURN(cudaStreamWaitEvent(st, lease.event(kEvGemm + b * S + wk), 0));
      LOWBIT_CUDA_RETURN(detail::launch_dequant_slab(w, e0, ne, n0, cols, layout, cols, stride, slabs[b], st));
      if (S > 1) {
        LOWBIT_CUDA_RETURN(cudaEventRecord(lease.event(kEvFill + b), st));
        for (int wk = 0; wk < S; ++wk)
          LOWBIT_CUDA_RETURN(cudaStreamWaitEvent(lease.worker(wk), lease.event(kEvFill + b), 0));
      }
      for (size_t r = r0; r < r1; ++r) {
        const Run& run = runs[r];
        if (S > 1) {
          const int wk = next_worker;
          next_worker = (next_worker + 1) % S;
          if (wk != bound) {
            LOWBIT_RETURN_IF_ERROR(lease.bind(lease.worker(wk), ws_of(wk), detail::kCublasWorkspaceBytes));
            bound = wk;
          }
        }
        const char* a = slabs[b] + (run.expert - e0) * stride * 2;
        LOWBIT_RETURN_IF_ERROR(lease.slab_gemm(
            s.act, layout, cols, run.rows, K, a, layout == detail::SlabLayout::kNK ? K : cols,
            in + static_cast<size_t>(run.start) * ld_in * 2, ld_in,
            out + (static_cast<size_t>(run.start) * ld_out + n0) * out_elem, ld_out, out_f32, "int4::fused_moe (grouped)"));
      }
      if (S > 1)
        for (int wk = 0; wk < S; ++wk)
          LOWBIT_CUDA_RETURN(cudaEventRecord(lease.event(kEvGemm + b * S + wk), lease.worker(wk)));
    }
    r0 = r1;
  }
  if (S > 1) {
    for (int wk = 0; wk < S; ++wk) {
      LOWBIT_CUDA_RETURN(cudaEventRecord(lease.event(kEvJoin + wk), lease.worker(wk)));
      LOWBIT_CUDA_RETURN(cudaStreamWaitEvent(st, lease.event(kEvJoin + wk), 0));
    }
    LOWBIT_RETURN_IF_ERROR(lease.bind(st, ws_of(0), detail::kCublasWorkspaceBytes));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace kern

namespace detail {

void set_moe_grouped_streams(int n) { kern::g_streams_override.store(n > 0 ? n : 0); }

size_t moe_grouped_workspace_bytes(int m, int topk, int experts, int hidden, int inter, int block_m) {
  return kern::grouped_layout(m, topk, experts, hidden, inter, block_m).total + 256;  // +256: base alignment
}

Status fused_moe_grouped(const MoeArgs& a, const KernelWeightsView& w13, const KernelWeightsView& w2, int bm,
                         void* workspace, cudaStream_t st) {
  const int E = w13.shape.experts, H = w13.shape.k, I = w13.shape.n / 2;
  const int64_t maxp64 = moe_max_padded(a.m, a.topk, E, bm);
  LOWBIT_CHECK_ARG(maxp64 < (int64_t{1} << 31) / (H > 2 * I ? H : 2 * I),
                   "int4::fused_moe (grouped path): %lld sorted rows too many", static_cast<long long>(maxp64));
  const int maxp = static_cast<int>(maxp64);
  char* base = static_cast<char*>(workspace);
  base += (256 - reinterpret_cast<uintptr_t>(base) % 256) % 256;
  const kern::GroupedLayout L = kern::grouped_layout(a.m, a.topk, E, H, I, bm);
  auto* ids = reinterpret_cast<int32_t*>(base + L.ids);
  auto* tw = reinterpret_cast<float*>(base + L.weights);
  auto* sorted = reinterpret_cast<int32_t*>(base + L.sorted);
  auto* eids = reinterpret_cast<int32_t*>(base + L.experts);
  auto* npp = reinterpret_cast<int32_t*>(base + L.npp);
  auto* pos = reinterpret_cast<int32_t*>(base + L.pos);
  char* xs = base + L.xs;
  char* h13 = base + L.h13;
  char* inter = base + L.inter;
  auto* out2 = reinterpret_cast<float*>(base + L.out2);
  const bool f16 = w13.shape.act == DType::kF16;

  // The caller's top-k (kernels.h) or the logits' softmax top-k.
  const bool routed = a.topk_ids != nullptr;
  if (routed) {
    ids = const_cast<int32_t*>(a.topk_ids);  // read only below
    tw = const_cast<float*>(a.topk_weights);
  } else {
    LOWBIT_RETURN_IF_ERROR(moe_topk(a.router_logits, a.m, E, a.topk, a.renormalize, ids, tw, st));
  }
  LOWBIT_RETURN_IF_ERROR(moe_align(ids, a.m, a.topk, E, bm, sorted, eids, npp, st));
  LOWBIT_CUDA_RETURN(detail::launch_moe_gather_rows(a.x, sorted, npp, a.m, a.topk, H, maxp, xs, pos, st));

  // The per-expert runs, on the host (the one synchronization of this path).
  std::vector<int32_t> blocks(static_cast<size_t>(maxp / bm));
  int32_t total = 0;
  LOWBIT_CUDA_RETURN(cudaMemcpyAsync(&total, npp, 4, cudaMemcpyDeviceToHost, st));
  LOWBIT_CUDA_RETURN(cudaMemcpyAsync(blocks.data(), eids, blocks.size() * 4, cudaMemcpyDeviceToHost, st));
  LOWBIT_CUDA_RETURN(cudaStreamSynchronize(st));
  if (total < 0 || total > maxp || total % bm != 0)
    return make_status(StatusCode::kInternal, "int4::fused_moe (grouped path): align produced %d rows (max %d)", total,
                       maxp);
  std::vector<kern::Run> runs;
  for (int b = 0; b < total / bm; ++b) {
    const int e = blocks[b];
    if (e < 0 || e >= E)
      return make_status(StatusCode::kInternal, "int4::fused_moe (grouped path): block %d has expert %d", b, e);
    if (!runs.empty() && runs.back().expert == e)
      runs.back().rows += bm;
    else
      runs.push_back({e, b * bm, bm});
  }

  CublasLease lease;
  LOWBIT_RETURN_IF_ERROR(lease.acquire(st, base + L.cublas, kCublasWorkspaceBytes));
  LOWBIT_RETURN_IF_ERROR(
      kern::grouped_gemm(lease, w13, runs, xs, H, h13, 2 * I, true, base + L.slab, L.slab_bytes, base + L.cublas, st));
  LOWBIT_CUDA_RETURN(f16 ? kern::launch_silu<__half>(h13, npp, maxp, I, inter, st)
                         : kern::launch_silu<__nv_bfloat16>(h13, npp, maxp, I, inter, st));
  LOWBIT_RETURN_IF_ERROR(kern::grouped_gemm(lease, w2, runs, inter, I, reinterpret_cast<char*>(out2), H, true,
                                            base + L.slab, L.slab_bytes, base + L.cublas, st));
  const int32_t* skip_ids = routed ? a.topk_ids : nullptr;  // only caller ids can fall outside [0, E)
  LOWBIT_CUDA_RETURN(f16 ? kern::launch_combine<__half>(out2, pos, tw, a.m, a.topk, H, a.y, skip_ids, E, st)
                         : kern::launch_combine<__nv_bfloat16>(out2, pos, tw, a.m, a.topk, H, a.y, skip_ids, E, st));
  return Status::Ok();
}

}  // namespace detail
}  // namespace lowbit::int4
