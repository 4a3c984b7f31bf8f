// vLLM's Marlin W4A16 GEMM on raw pointers (see bench/baselines/vllm_marlin.h). vLLM's PyTorch
// entry, marlin_gemm(), checks its tensors, sizes the fp32 reduction buffer and calls
// marlin::marlin_mm(); gemm() below does the same on pointers, with vLLM's defaults for a
// GPTQ linear layer (fp32 reduce on, atomics off at N >= 2048).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <exception>

#include "bench/baselines/vllm_marlin.h"
#include "bench/baselines/vllm_marlin/convert.cuh"
#include "kernel.h"  // vLLM: vllm::ScalarType (core/scalar_type.hpp), MARLIN_KERNEL_PARAMS
#include "lowbit/detail/cuda_check.h"

namespace marlin {
// In marlin_host.cu (vLLM's marlin.cu up to its PyTorch entry).
void marlin_mm(const void* A, const void* B, void* C, void* C_tmp, void* b_bias, void* b_s, void* g_s, void* zp,
               int prob_m, int prob_n, int prob_k, int lda, void* workspace, vllm::ScalarType const& a_type,
               vllm::ScalarType const& b_type, vllm::ScalarType const& c_type, vllm::ScalarType const& s_type,
               bool has_bias, bool has_zp, int num_groups, int group_size, int dev, cudaStream_t stream,
               int thread_k_init, int thread_n_init, int sms, bool use_atomic_add, bool use_fp32_reduce,
               bool is_zp_float);
}  // namespace marlin

namespace lowbit::bench::vllm_marlin {

const char* const kMarlinSource = LOWBIT_VLLM_MARLIN_SOURCE;

namespace {

// Whether cmake/vllm_marlin.cmake instantiated Marlin for this group size (-1: one group).
bool group_built(int group) {
  // LOWBIT_VLLM_MARLIN_GROUPS: the group sizes instantiated, e.g. "128,-1".
  const char* p = LOWBIT_VLLM_MARLIN_GROUPS;
  while (*p) {
    char* end = nullptr;
    const long g = std::strtol(p, &end, 10);
    if (end == p) break;
    if (g == group) return true;
    p = *end == ',' ? end + 1 : end;
  }
  return false;
}

// Expert e of `w` into Marlin's words (q_out: [K/16, 2N] int32) and permuted scales (s_out:
// [NG, N]); gptq_tmp: K * N / 2 bytes of scratch; sms / smem: the repack kernel's grid and
// shared memory. Synchronizes `stream` (gptq_tmp is reused by the next expert).
Status convert_expert(const int4::KernelWeightsView& w, int e, void* q_out, void* s_out, void* gptq_tmp, int sms,
                      int smem, cudaStream_t stream) {
  const int n = w.shape.n, k = w.shape.k, ng = w.shape.num_groups();
  const uint32_t* tiled = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(e) * k * (n / 8);
  baselines::tiled_to_gptq_kernel<<<1024, 256, 0, stream>>>(tiled, static_cast<uint32_t*>(gptq_tmp), n, k,
                                                             /*column_major=*/false);
  LOWBIT_CUDA_RETURN_LAUNCH();
  LOWBIT_CUDA_RETURN(marlin::lowbit_launch_repack4(static_cast<const uint32_t*>(gptq_tmp), static_cast<uint32_t*>(q_out),
                                                   k, n, sms, smem, stream));
  detail::permute_scales_kernel<<<256, 256, 0, stream>>>(w.scales, static_cast<uint16_t*>(s_out), n, ng, e, ng > 1);
  LOWBIT_CUDA_RETURN_LAUNCH();
  LOWBIT_CUDA_RETURN(cudaStreamSynchronize(stream));
  return Status::Ok();
}

}  // namespace

Workspace::~Workspace() {
  if (c_tmp) (void)cudaFree(c_tmp);
  if (locks) (void)cudaFree(locks);
}

Status supported(const int4::WeightShape& sh) {
  if (!sh.symmetric)
    return make_status(StatusCode::kNotSupported,
                       "vLLM Marlin baseline: symmetric (uint4b8) weights only; zero points are not wired up");
  if (sh.n % 64 != 0 || sh.k % 128 != 0)
    return make_status(StatusCode::kNotSupported, "vLLM Marlin baseline: N %% 64 and K %% 128 must be 0 (N=%d K=%d)",
                       sh.n, sh.k);
  const int g = sh.group_size == int4::kPerChannel || sh.group_size == sh.k ? -1 : sh.group_size;
  if (!group_built(g))
    return make_status(StatusCode::kNotSupported,
                       "vLLM Marlin baseline: group size %d not built (LOWBIT_VLLM_MARLIN_GROUPS=%s)", sh.group_size,
                       LOWBIT_VLLM_MARLIN_GROUPS);
  return Status::Ok();
}

Status make_weights(const int4::KernelWeightsView& w, cudaStream_t stream, Weights* out) {
  LOWBIT_RETURN_IF_ERROR(supported(w.shape));
  if (w.kind != int4::KernelLayoutKind::kMmaTiled)
    return make_status(StatusCode::kNotSupported, "vLLM Marlin baseline: converts from the MMA-tiled layout only");
  if (!w.qweight || !w.scales) return make_status(StatusCode::kInvalidArgument, "vLLM Marlin baseline: null weight");
  const int E = w.shape.experts, n = w.shape.n, k = w.shape.k, ng = w.shape.num_groups();
  int dev = 0, sms = 0, smem = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  Weights r;
  r.experts = E, r.n = n, r.k = k, r.act = w.shape.act;
  r.group = ng == 1 ? -1 : w.shape.group_len();
  const size_t qe = static_cast<size_t>(k) * n / 2, se = static_cast<size_t>(ng) * n * 2;
  LOWBIT_RETURN_IF_ERROR(r.allocate(qe * E, se * E));
  void* gptq = nullptr;
  LOWBIT_CUDA_RETURN(cudaMalloc(&gptq, qe));
  Status st = Status::Ok();
  for (int e = 0; e < E && st.ok(); ++e)
    st = convert_expert(w, e, static_cast<char*>(r.q) + qe * e, static_cast<char*>(r.s) + se * e, gptq, sms, smem,
                        stream);
  (void)cudaFree(gptq);
  LOWBIT_RETURN_IF_ERROR(st);
  *out = static_cast<Weights&&>(r);
  return Status::Ok();
}

Status make_copies(const int4::KernelWeightsView& w, int copies, cudaStream_t stream, std::vector<Weights>* out) {
  return baselines::make_rotation_copies([&](Weights* first) { return make_weights(w, stream, first); }, copies,
                                         stream, out);
}

Status Workspace::reserve(size_t c_tmp_floats, cudaStream_t stream) {
  if (!locks) {
    int dev = 0;
    LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
    LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t lb = static_cast<size_t>(sms) * kMaxBlocksPerSm * sizeof(int);
    LOWBIT_CUDA_RETURN(cudaMalloc(reinterpret_cast<void**>(&locks), lb));
    LOWBIT_CUDA_RETURN(cudaMemsetAsync(locks, 0, lb, stream));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(stream));
  }
  const size_t bytes = c_tmp_floats * sizeof(float);
  if (bytes > c_tmp_bytes) {
    if (c_tmp) (void)cudaFree(c_tmp);
    c_tmp = nullptr;
    c_tmp_bytes = 0;
    LOWBIT_CUDA_RETURN(cudaMalloc(&c_tmp, bytes));
    c_tmp_bytes = bytes;
  }
  return Status::Ok();
}

Status Workspace::ensure(cudaStream_t stream) {
  LOWBIT_RETURN_IF_ERROR(reserve(0, stream));  // sms
  return reserve(static_cast<size_t>(sms) * 64 * marlin::max_thread_n, stream);
}

Status gemm(const Weights& w, const void* x, void* y, int m, Workspace& ws, cudaStream_t stream) {
  if (!w.q || !w.s || !x || !y || m <= 0)
    return make_status(StatusCode::kInvalidArgument, "vLLM Marlin baseline: null pointer or m = %d", m);
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 != 0)
    return make_status(StatusCode::kMisaligned, "vLLM Marlin baseline: x and y must be 16 B aligned");
  if (!ws.locks || !ws.c_tmp)
    return make_status(StatusCode::kInvalidArgument, "vLLM Marlin baseline: Workspace::ensure() first");
  if (w.experts != 1)
    return make_status(StatusCode::kInvalidArgument, "vLLM Marlin baseline: gemm() takes one weight, not %d experts",
                       w.experts);
  int dev = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  const vllm::ScalarType& t = w.act == DType::kBF16 ? vllm::kBFloat16 : vllm::kFloat16;
  const int num_groups = w.group == -1 ? 1 : w.k / w.group;
  try {
    marlin::marlin_mm(x, w.q, y, ws.c_tmp, /*b_bias=*/nullptr, w.s, /*g_s=*/nullptr, /*zp=*/nullptr, m, w.n, w.k,
                      /*lda=*/w.k, ws.locks, t, vllm::kU4B8, t, t, /*has_bias=*/false, /*has_zp=*/false, num_groups,
                      w.group, dev, stream, /*thread_k_init=*/-1, /*thread_n_init=*/-1, ws.sms,
                      /*use_atomic_add=*/false, /*use_fp32_reduce=*/true, /*is_zp_float=*/false);
  } catch (const std::exception& ex) {
    return make_status(StatusCode::kInvalidArgument, "%s", ex.what());
  }
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::bench::vllm_marlin
