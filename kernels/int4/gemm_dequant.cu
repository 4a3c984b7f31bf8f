// Dense W4A16 GEMM for large M (prefill), the production route of vLLM's AWQ path for big
// batches: dequantize the INT4 weight on the GPU into a 16-bit slab (same LOP3 device math
// as dequant.cu and the GEMM kernels, so bit-exact with the CPU contract) and hand it to
// cuBLAS (fp32 accumulation, activation dtype in and out). The slab holds a chunk of output
// columns at a time (<= 64 MiB), so the scratch stays bounded for any N.
//
// Why it pays: at M >= ~128 the GEMM is compute bound and cuBLAS's Hopper kernels run at
// ~55-65% of the bf16 peak; the extra pass costs N*K*(0.5 read + 2 write) bytes, a few
// percent of the GEMM time at M >= 2048 (docs/int4-kernels.md has the measurements).
//
// The cuBLAS handle is library-internal: one per device, created lazily on first use,
// never destroyed (destroying it from a static destructor can run after the CUDA context
// is gone). Each call binds it to the caller's stream and to a workspace carved from the
// caller's workspace (cublasSetWorkspace), so nothing is allocated per call and the calls
// can be captured in a CUDA graph (the first call per device must happen outside capture:
// it creates the handle).
#include <cublas_v2.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/int4/common.cuh"
#include "kernels/int4/dequant_plan.h"
#include "kernels/int4/internal.h"
#include "lowbit/detail/cuda_check.h"

namespace lowbit::int4 {
namespace kern {
namespace {

// kKN: one thread per (expert, 8-row k block, word column of the chunk). The 8 rows share
// one quantization group (G is a multiple of 32 and k0 a multiple of 8), so the scales and
// zeros are loaded once; each row is one 4 B load and one 16 B store (coalesced across the
// warp: consecutive threads take consecutive word columns).
template <typename T>
__global__ void slab_kn_kernel(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                               const uint16_t* __restrict__ zeros, T* __restrict__ slab, int N, int K, int G, int n0,
                               int nc, int ldn, size_t expert_stride) {
  const int e = blockIdx.z;
  const int nw = N / 8, wc = (nc + 7) / 8, NG = K / G;
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (K / 8) * wc) return;
  const int c = idx % wc, kb = idx / wc, k0 = kb * 8;
  const uint32_t* q = qw + static_cast<size_t>(e) * K * nw + static_cast<size_t>(k0) * nw + n0 / 8 + c;
  const size_t so = (static_cast<size_t>(e) * NG + k0 / G) * N + n0 + 8 * c;
  OctetParams<T> p;
  load_octet_params<T>(scales, zeros, so, p);
  T* out = slab + e * expert_stride + static_cast<size_t>(k0) * ldn + 8 * c;
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    typename Act<T>::T2 w2[4];
    dequant_word<T>(__ldg(q + static_cast<size_t>(r) * nw), p, w2);
    *reinterpret_cast<uint4*>(out + static_cast<size_t>(r) * ldn) =
        make_uint4(as_bits(w2[0]), as_bits(w2[1]), as_bits(w2[2]), as_bits(w2[3]));
  }
}

// kNK (transposed, [n][k]): a block dequantizes a 64-column x 64-row tile into shared
// memory (as kKN does, one word per (k, octet)), then writes it out along k, 16 B per
// thread, 8 threads per 128 B column segment.
constexpr int kTileN = 64, kTileK = 64, kTileLd = kTileK + 8;  // +8 elements: 16 B aligned rows, fewer conflicts
template <typename T>
__global__ void __launch_bounds__(256)
    slab_nk_kernel(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                   const uint16_t* __restrict__ zeros, T* __restrict__ slab, int N, int K, int G, int n0, int nc,
                   size_t expert_stride) {
  __shared__ __align__(16) T tile[kTileN * kTileLd];
  const int e = blockIdx.z;
  const int nw = N / 8, NG = K / G;
  const int tn0 = blockIdx.x * kTileN, tk0 = blockIdx.y * kTileK;  // tn0 relative to the chunk
  const int ncols = min(kTileN, nc - tn0), krows = min(kTileK, K - tk0);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = threadIdx.x + r * 256;
    const int kl = i / 8, wl = i % 8;
    if (kl < krows && 8 * wl < ncols) {
      const int k = tk0 + kl, col = n0 + tn0 + 8 * wl;
      OctetParams<T> p;
      load_octet_params<T>(scales, zeros, (static_cast<size_t>(e) * NG + k / G) * N + col, p);
      typename Act<T>::T2 w2[4];
      dequant_word<T>(__ldg(qw + (static_cast<size_t>(e) * K + k) * nw + col / 8), p, w2);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        tile[(8 * wl + 2 * j) * kTileLd + kl] = w2[j].x;
        tile[(8 * wl + 2 * j + 1) * kTileLd + kl] = w2[j].y;
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = threadIdx.x + r * 256;
    const int nl = i / 8, kv = (i % 8) * 8;
    if (nl < ncols && kv < krows)  // krows is a multiple of 32
      *reinterpret_cast<uint4*>(slab + e * expert_stride + static_cast<size_t>(tn0 + nl) * K + tk0 + kv) =
          *reinterpret_cast<const uint4*>(&tile[nl * kTileLd + kv]);
  }
}

// MMA-tiled source: a block takes one 64-column group and 4 K steps (64 rows; 4 contiguous
// 512 B supertiles), one 16 B load per thread, dequantizes its 4 words (pairs (n, k), (n, k+1)
// with the contract's rounding, as dequant_word) into a shared tile, then writes the tile
// out 16 B per thread along n (kKN) or along k (kNK).
template <typename T, bool kKNOut>
__global__ void __launch_bounds__(128)
    slab_tiled_kernel(const uint4* __restrict__ qw, const uint16_t* __restrict__ scales,
                      const uint16_t* __restrict__ zeros, T* __restrict__ slab, int N, int K, int G, int n0, int ldn,
                      size_t expert_stride) {
  using T2 = typename Act<T>::T2;
  constexpr int kLd = 64 + 8;
  __shared__ __align__(16) T tile[64 * kLd];  // kKN: [k][n]; kNK: [n][k]
  const int e = blockIdx.z, steps = K / kMmaTileK, NG = K / G;
  const int cgrp = (n0 / kMmaTileCols) + blockIdx.x, st0 = blockIdx.y * 4;
  const int i = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int krows = min(64, K - kMmaTileK * st0);
  if (st0 + i < steps) {
    const uint4 v = __ldg(qw + (static_cast<size_t>(e) * steps * (N / kMmaTileCols) +
                                static_cast<size_t>(cgrp) * steps + st0 + i) * 32 + lane);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    const int kb = kMmaTileK * (st0 + i);
    const size_t gbase = (static_cast<size_t>(e) * NG + kb / G) * N + cgrp * kMmaTileCols;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int nl = 16 * j + g + 8 * (p & 1), kl = 16 * i + 2 * t + 8 * (p >> 1);
        const size_t si = gbase + mma_tiled_scale_col(nl);
        const T2 w2 = dequant_tiled_pair<T>(words[j], p, scales[si], zeros ? zeros[si] : Act<T>::kEight);
        if constexpr (kKNOut) {
          tile[kl * kLd + nl] = w2.x;
          tile[(kl + 1) * kLd + nl] = w2.y;
        } else {
          *reinterpret_cast<T2*>(&tile[nl * kLd + kl]) = w2;
        }
      }
  }
  __syncthreads();
  T* out = slab + e * expert_stride;
  const int nrel = cgrp * kMmaTileCols - n0;  // column of the chunk
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int idx = threadIdx.x + 128 * r;  // 512 pieces of 16 B
    const int row = idx / 8, v8 = (idx % 8) * 8;
    if constexpr (kKNOut) {
      if (row < krows)
        *reinterpret_cast<uint4*>(out + static_cast<size_t>(kMmaTileK * st0 + row) * ldn + nrel + v8) =
            *reinterpret_cast<const uint4*>(&tile[row * kLd + v8]);
    } else {
      if (v8 < krows)
        *reinterpret_cast<uint4*>(out + static_cast<size_t>(nrel + row) * K + kMmaTileK * st0 + v8) =
            *reinterpret_cast<const uint4*>(&tile[row * kLd + v8]);
    }
  }
}

template <typename T>
cudaError_t launch_slab(const KernelWeightsView& w, int e0, int ne, int n0, int nc, detail::SlabLayout layout, int ldn,
                        size_t expert_stride, void* slab, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, NG = s.num_groups();
  if (w.kind == KernelLayoutKind::kMmaTiled) {
    // n0 and nc are multiples of 128 (chunk_cols) or reach N (N % 64 == 0): whole column groups.
    dim3 grid(nc / kMmaTileCols, ceil_div(K / kMmaTileK, 4), ne);
    const uint4* qt = static_cast<const uint4*>(w.qweight) + static_cast<size_t>(e0) * K * (N / 8) / 4;
    const size_t so = static_cast<size_t>(e0) * NG * N;
    if (layout == detail::SlabLayout::kKN)
      slab_tiled_kernel<T, true><<<grid, 128, 0, stream>>>(qt, w.scales + so, w.zeros ? w.zeros + so : nullptr,
                                                           static_cast<T*>(slab), N, K, s.group_len(), n0, ldn,
                                                           expert_stride);
    else
      slab_tiled_kernel<T, false><<<grid, 128, 0, stream>>>(qt, w.scales + so, w.zeros ? w.zeros + so : nullptr,
                                                            static_cast<T*>(slab), N, K, s.group_len(), n0, ldn,
                                                            expert_stride);
    return cudaGetLastError();
  }
  const uint32_t* qw = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(e0) * K * (N / 8);
  const size_t so = static_cast<size_t>(e0) * NG * N;
  const uint16_t* sc = w.scales + so;
  const uint16_t* zp = w.zeros ? w.zeros + so : nullptr;
  if (layout == detail::SlabLayout::kKN) {
    const int items = (K / 8) * ((nc + 7) / 8);
    dim3 grid(ceil_div(items, 256), 1, ne);
    slab_kn_kernel<T><<<grid, 256, 0, stream>>>(qw, sc, zp, static_cast<T*>(slab), N, K, s.group_len(), n0, nc, ldn,
                                                expert_stride);
  } else {
    dim3 grid(ceil_div(nc, kTileN), ceil_div(K, kTileK), ne);
    slab_nk_kernel<T><<<grid, 256, 0, stream>>>(qw, sc, zp, static_cast<T*>(slab), N, K, s.group_len(), n0, nc,
                                                expert_stride);
  }
  return cudaGetLastError();
}

const char* cublas_error(cublasStatus_t st) { return cublasGetStatusString(st); }

// One slot per device: the handle, the lock that serializes its users, and the side stream +
// events of the overlapped dequantization (created with the handle, never destroyed).
struct CublasSlot {
  std::mutex mu;
  cublasHandle_t handle = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, dq_done[2] = {nullptr, nullptr}, gemm_done[2] = {nullptr, nullptr};
  // Worker streams and events of the grouped MoE path (moe_grouped.cu).
  cudaStream_t workers[detail::kLeaseWorkers] = {};
  cudaEvent_t pool[detail::kLeaseEvents] = {};
};
std::atomic<int> g_overlap_override{-1};
// -1 unset, 0 off, 1 on: detail::set_dequant_overlap, else LOWBIT_INT4_OVERLAP=0 / 1. Unset,
// dequant_slab_plan() decides (overlapped at M = 2048..4095 on K <= 8192 since session 29;
// tested for equality with the sequential schedule in tests/gpu/int4/test_prefill.cu).
int overlap_mode() {
  const int o = g_overlap_override.load(std::memory_order_relaxed);
  if (o >= 0) return o;
  static const int v = [] {
    const char* e = std::getenv("LOWBIT_INT4_OVERLAP");
    return e == nullptr ? -1 : std::strcmp(e, "1") == 0 ? 1 : 0;
  }();
  return v;
}
constexpr int kMaxDevices = 64;
CublasSlot g_slots[kMaxDevices];

std::atomic<size_t> g_budget_override{0};
// The slab budget that detail::set_slab_budget or LOWBIT_INT4_SLAB_MIB (1..64) set, 0 if none.
size_t slab_budget_knob() {
  const size_t o = g_budget_override.load(std::memory_order_relaxed);
  if (o > 0) return o;
  static const size_t v = [] {
    const char* e = std::getenv("LOWBIT_INT4_SLAB_MIB");
    long mib = e ? std::strtol(e, nullptr, 10) : 0;
    if (mib < 1 || mib > static_cast<long>(detail::kSlabMaxBytes >> 20)) return size_t{0};
    return static_cast<size_t>(mib) << 20;
  }();
  return v;
}
size_t env_slab_budget() {
  const size_t b = slab_budget_knob();
  return b > 0 ? b : detail::kSlabMaxBytes;
}

int chunk_cols(int n, int k, size_t budget) {
  const size_t per_col = static_cast<size_t>(k) * 2;
  if (static_cast<size_t>(n) * per_col <= budget) return n;
  int max_cols = static_cast<int>(budget / per_col) / 128 * 128;
  if (max_cols < 128) max_cols = 128;
  if (n <= max_cols) return n;
  const int chunks = ceil_div(n, max_cols);
  const int even = ceil_div(ceil_div(n, chunks), 128) * 128;  // <= max_cols (a multiple of 128)
  return even < n ? even : n;
}

}  // namespace
}  // namespace kern

namespace detail {

SlabLayout slab_layout() {
  static const SlabLayout v = [] {
    // kKN by default: measured on H200 (docs/int4-kernels.md) its dequantization runs near
    // the copy bandwidth while the transposing kNK kernel is ~2x slower, and cuBLAS runs the
    // NN and TN GEMMs at the same speed (M = 4096: 0.94-1.03x vs 0.85-0.95x of cuBLAS bf16).
    const char* e = std::getenv("LOWBIT_INT4_SLAB_LAYOUT");
    return (e && std::strcmp(e, "nk") == 0) ? SlabLayout::kNK : SlabLayout::kKN;
  }();
  return v;
}

// Chunk width under the default (largest) budget: sizes the workspace. The run-time budget
// (LOWBIT_INT4_SLAB_MIB) can only make chunks narrower, never wider (chunk_cols is monotone).
static_assert(kern::kSlabDefaultBytes == kSlabMaxBytes, "the slab plan's default budget sizes the workspace");
int slab_chunk_cols(int n, int k) { return kern::chunk_cols(n, k, kSlabMaxBytes); }
size_t slab_budget_bytes() { return kern::env_slab_budget(); }
int slab_chunk_cols_for(int n, int k, size_t budget) { return kern::chunk_cols(n, k, budget); }

size_t dequant_gemm_workspace_bytes(const WeightShape& shape) {
  const int nc = slab_chunk_cols(shape.n, shape.k);
  const size_t slab = (static_cast<size_t>(nc) * shape.k * 2 + 255) / 256 * 256;
  // Two slabs when the weight takes several chunks: chunk i+1 is dequantized (side stream)
  // while chunk i's GEMM runs.
  return 256 + kCublasWorkspaceBytes + slab * (nc < shape.n ? 2 : 1);
}

void set_slab_budget(size_t bytes) {
  kern::g_budget_override.store(bytes > kSlabMaxBytes ? kSlabMaxBytes : bytes);
}

void set_dequant_overlap(int mode) { kern::g_overlap_override.store(mode < 0 ? -1 : (mode ? 1 : 0)); }

cudaError_t launch_dequant_slab(const KernelWeightsView& w, int e0, int ne, int n0, int nc, SlabLayout layout, int ldn,
                                size_t expert_stride, void* slab, cudaStream_t stream) {
  return w.shape.act == DType::kF16
             ? kern::launch_slab<__half>(w, e0, ne, n0, nc, layout, ldn, expert_stride, slab, stream)
             : kern::launch_slab<__nv_bfloat16>(w, e0, ne, n0, nc, layout, ldn, expert_stride, slab, stream);
}

CublasLease::~CublasLease() {
  if (mutex_) static_cast<std::mutex*>(mutex_)->unlock();
}

Status CublasLease::acquire(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  int dev = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  if (dev < 0 || dev >= kern::kMaxDevices)
    return make_status(StatusCode::kNotSupported, "int4 cuBLAS path: device %d beyond the %d supported", dev,
                       kern::kMaxDevices);
  kern::CublasSlot& slot = kern::g_slots[dev];
  slot.mu.lock();
  mutex_ = &slot.mu;
  if (slot.handle == nullptr) {
    cublasHandle_t h = nullptr;
    const cublasStatus_t cs = cublasCreate(&h);
    if (cs != CUBLAS_STATUS_SUCCESS) {
      cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
      (void)cudaStreamIsCapturing(stream, &cap);
      (void)cudaGetLastError();
      return make_status(StatusCode::kInternal,
                         "int4 cuBLAS path: cublasCreate on device %d failed: %s%s", dev, kern::cublas_error(cs),
                         cap != cudaStreamCaptureStatusNone
                             ? " (the stream is being captured: make the first int4 prefill call of each device "
                               "outside CUDA graph capture; it creates the library's cuBLAS handle)"
                             : "");
    }
    // fp32 reductions everywhere (no fp16/bf16 split-K reductions): the tolerance the tests
    // state assumes one rounding of an fp32 accumulation.
    const cublasStatus_t ms =
        cublasSetMathMode(h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (ms != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(h);
      return make_status(StatusCode::kInternal, "int4 cuBLAS path: cublasSetMathMode failed: %s",
                         kern::cublas_error(ms));
    }
    // Side stream and events for the overlapped dequantization (gemm_dequant_cublas).
    cudaError_t ce = cudaStreamCreateWithFlags(&slot.side, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&slot.fork, cudaEventDisableTiming);
    for (int i = 0; i < 2 && ce == cudaSuccess; ++i) {
      ce = cudaEventCreateWithFlags(&slot.dq_done[i], cudaEventDisableTiming);
      if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&slot.gemm_done[i], cudaEventDisableTiming);
    }
    for (int i = 0; i < detail::kLeaseWorkers && ce == cudaSuccess; ++i)
      ce = cudaStreamCreateWithFlags(&slot.workers[i], cudaStreamNonBlocking);
    for (int i = 0; i < detail::kLeaseEvents && ce == cudaSuccess; ++i)
      ce = cudaEventCreateWithFlags(&slot.pool[i], cudaEventDisableTiming);
    if (ce != cudaSuccess) {
      cublasDestroy(h);
      return make_status(StatusCode::kCudaError, "int4 cuBLAS path: side stream/events on device %d: %s", dev,
                         cudaGetErrorString(ce));
    }
    slot.handle = h;
  }
  slot_ = &slot;
  handle_ = slot.handle;
  cublasHandle_t h = static_cast<cublasHandle_t>(handle_);
  // cublasSetStream resets the workspace to cuBLAS's own pool: set the stream first.
  cublasStatus_t cs = cublasSetStream(h, stream);
  if (cs != CUBLAS_STATUS_SUCCESS)
    return make_status(StatusCode::kInternal, "int4 cuBLAS path: cublasSetStream failed: %s", kern::cublas_error(cs));
  cs = cublasSetWorkspace(h, workspace, workspace_bytes);
  if (cs != CUBLAS_STATUS_SUCCESS)
    return make_status(StatusCode::kInternal, "int4 cuBLAS path: cublasSetWorkspace(%p, %zu) failed: %s", workspace,
                       workspace_bytes, kern::cublas_error(cs));
  return Status::Ok();
}

Status CublasLease::bind(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  if (handle_ == nullptr) return make_status(StatusCode::kInternal, "int4 cuBLAS path: handle not acquired");
  cublasHandle_t h = static_cast<cublasHandle_t>(handle_);
  cublasStatus_t cs = cublasSetStream(h, stream);  // resets the workspace: set it again below
  if (cs == CUBLAS_STATUS_SUCCESS) cs = cublasSetWorkspace(h, workspace, workspace_bytes);
  if (cs != CUBLAS_STATUS_SUCCESS)
    return make_status(StatusCode::kInternal, "int4 cuBLAS path: rebinding the handle failed: %s",
                       kern::cublas_error(cs));
  return Status::Ok();
}
cudaStream_t CublasLease::worker(int i) const { return static_cast<const kern::CublasSlot*>(slot_)->workers[i]; }
cudaEvent_t CublasLease::event(int i) const { return static_cast<const kern::CublasSlot*>(slot_)->pool[i]; }

Status CublasLease::slab_gemm(DType act, SlabLayout layout, int nc, int rows, int k, const void* slab, int slab_ld,
                              const void* x, int ldx, void* c, int ldc, bool ctype_f32, const char* who) {
  if (handle_ == nullptr) return make_status(StatusCode::kInternal, "%s: cuBLAS handle not acquired", who);
  const float alpha = 1.f, beta = 0.f;
  const cudaDataType dt = act == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  // Column-major view: C^T [nc x rows] = op(slab) [nc x k] * x^T [k x rows].
  const cublasOperation_t opa = layout == SlabLayout::kNK ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasStatus_t st =
      cublasGemmEx(static_cast<cublasHandle_t>(handle_), opa, CUBLAS_OP_N, nc, rows, k, &alpha, slab, dt, slab_ld, x,
                   dt, ldx, &beta, c, ctype_f32 ? CUDA_R_32F : dt, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    return make_status(StatusCode::kInternal, "%s: cublasGemmEx(%s, m=%d n=%d k=%d, %s) failed: %s", who,
                       layout == SlabLayout::kNK ? "TN" : "NN", rows, nc, k, dtype_name(act), kern::cublas_error(st));
  return Status::Ok();
}

Status gemm_dequant_cublas(const void* x, void* y, int m, const KernelWeightsView& w, int expert, void* workspace,
                           size_t workspace_bytes, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const size_t need = dequant_gemm_workspace_bytes(s);
  LOWBIT_CHECK_ARG(workspace != nullptr && workspace_bytes >= need,
                   "int4::gemm (dequant + cuBLAS path): workspace of %zu bytes given, %zu needed "
                   "(gemm_workspace_size)",
                   workspace_bytes, need);
  char* base = static_cast<char*>(workspace);
  base += (256 - reinterpret_cast<uintptr_t>(base) % 256) % 256;  // cuBLAS wants 256 B alignment
  void* cublas_ws = base;
  char* slab0 = base + kCublasWorkspaceBytes;
  const kern::SlabPlan plan = kern::dequant_slab_plan(m, s.k, kern::slab_budget_knob(), kern::overlap_mode());
  const int nc = kern::chunk_cols(s.n, s.k, plan.budget);
  const int chunks = kern::ceil_div(s.n, nc);
  const size_t slab_bytes = (static_cast<size_t>(nc) * s.k * 2 + 255) / 256 * 256;
  const size_t usable = workspace_bytes - static_cast<size_t>(base - static_cast<char*>(workspace));
  // Overlapped only where two slabs fit the workspace (sized for the default plan: two slabs
  // of <= 64 MiB where the weight takes several chunks, else one); else one slab in sequence.
  const bool overlap = chunks >= 2 && plan.overlap && usable >= kCublasWorkspaceBytes + 2 * slab_bytes;
  const SlabLayout layout = slab_layout();
  CublasLease lease;
  LOWBIT_RETURN_IF_ERROR(lease.acquire(stream, cublas_ws, kCublasWorkspaceBytes));
  const size_t elem = 2;
  auto gemm_chunk = [&](int n0, int cols, const void* slab) {
    return lease.slab_gemm(s.act, layout, cols, m, s.k, slab, layout == SlabLayout::kNK ? s.k : cols, x, s.k,
                           static_cast<char*>(y) + static_cast<size_t>(n0) * elem, s.n, false, "int4::gemm");
  };
  if (!overlap) {
    for (int n0 = 0; n0 < s.n; n0 += nc) {
      const int cols = s.n - n0 < nc ? s.n - n0 : nc;
      LOWBIT_CUDA_RETURN(launch_dequant_slab(w, expert, 1, n0, cols, layout, cols, 0, slab0, stream));
      LOWBIT_RETURN_IF_ERROR(gemm_chunk(n0, cols, slab0));
    }
    return Status::Ok();
  }
  // Overlapped: dequantize chunk i into slab i%2 on the side stream while the GEMM of chunk
  // i-1 runs on the caller's stream. Side work starts after everything already on `stream`
  // (fork), each GEMM waits for its slab's dequantization, each dequantization waits for the
  // GEMM that last read its slab; the last GEMM joins the side stream back into `stream`, so
  // the sequence is also valid inside CUDA graph capture (fork/join).
  const kern::CublasSlot& sd = *static_cast<const kern::CublasSlot*>(lease.slot());
  char* slabs[2] = {slab0, slab0 + slab_bytes};
  LOWBIT_CUDA_RETURN(cudaEventRecord(sd.fork, stream));
  LOWBIT_CUDA_RETURN(cudaStreamWaitEvent(sd.side, sd.fork, 0));
  for (int i = 0; i < chunks; ++i) {
    const int b = i % 2, n0 = i * nc, cols = s.n - n0 < nc ? s.n - n0 : nc;
    if (i >= 2) LOWBIT_CUDA_RETURN(cudaStreamWaitEvent(sd.side, sd.gemm_done[b], 0));
    LOWBIT_CUDA_RETURN(launch_dequant_slab(w, expert, 1, n0, cols, layout, cols, 0, slabs[b], sd.side));
    LOWBIT_CUDA_RETURN(cudaEventRecord(sd.dq_done[b], sd.side));
    LOWBIT_CUDA_RETURN(cudaStreamWaitEvent(stream, sd.dq_done[b], 0));
    LOWBIT_RETURN_IF_ERROR(gemm_chunk(n0, cols, slabs[b]));
    LOWBIT_CUDA_RETURN(cudaEventRecord(sd.gemm_done[b], stream));
  }
  return Status::Ok();
}

}  // namespace detail
}  // namespace lowbit::int4
