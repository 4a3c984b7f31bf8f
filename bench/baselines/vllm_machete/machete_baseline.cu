// vLLM's Machete W4A16 GEMM on raw pointers (see bench/baselines/vllm_machete.h). vLLM's PyTorch
// entries (machete_prepack_B and machete_mm in machete_pytorch.cu) build MMArgs / PrepackBArgs
// from tensors and call the generated dispatch; this file does the same with views of lowbit's
// buffers (torch_shim's non-owning Tensor) and an Arena that hands vLLM's launcher the output and
// workspace buffers instead of PyTorch's allocator.
#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "bench/baselines/tiled_to_gptq.cuh"
#include "bench/baselines/vllm_machete.h"
#include "core/scalar_type.hpp"  // vLLM: vllm::kU4B8
#include "lowbit/detail/cuda_check.h"
#include "machete_mm_launcher.cuh"       // vLLM: machete::MMArgs, mm_dispatch (generated)
#include "machete_prepack_launcher.cuh"  // vLLM: machete::PrepackBArgs, prepack_B_dispatch (generated)

namespace lowbit::bench::vllm_machete {

const char* const kMacheteSource = LOWBIT_VLLM_MACHETE_SOURCE;

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

ScalarType act_type(DType act) { return act == DType::kBF16 ? ScalarType::BFloat16 : ScalarType::Half; }

// Scales of lowbit's MMA-tiled copy ([NG, N], columns permuted: kernel_scale_index) into [NG, N]
// row-major in column order, as vLLM's MacheteLinearKernel keeps weight_scale.
__global__ void gather_scales_kernel(const uint16_t* __restrict__ ours, uint16_t* __restrict__ out, int n, int ng) {
  const size_t total = static_cast<size_t>(ng) * n;
  for (size_t f = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; f < total;
       f += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int g = static_cast<int>(f / n), c = static_cast<int>(f % n);
    out[f] = ours[int4::kernel_scale_index(int4::KernelLayoutKind::kMmaTiled, n, ng, 0, g, c)];
  }
}

}  // namespace

Workspace::~Workspace() {
  if (p) (void)cudaFree(p);
}

Status Workspace::ensure(size_t want) {
  if (want <= bytes && p) return Status::Ok();
  if (p) (void)cudaFree(p);
  p = nullptr;
  bytes = 0;
  LOWBIT_CUDA_RETURN(cudaMalloc(&p, want));
  bytes = want;
  return Status::Ok();
}

Status supported(const int4::WeightShape& sh) {
  if (sh.experts != 1)
    return make_status(StatusCode::kNotSupported, "vLLM Machete baseline: one weight, not %d experts (vLLM has no "
                       "Machete MoE path)", sh.experts);
  if (!sh.symmetric)
    return make_status(StatusCode::kNotSupported,
                       "vLLM Machete baseline: symmetric (uint4b8) weights only; zero points are not built");
  if (sh.k % 64 != 0 || sh.n % 128 != 0)
    return make_status(StatusCode::kNotSupported,
                       "vLLM Machete baseline: K %% 64 and N %% 128 must be 0 (vLLM's check_machete_supports_shape; "
                       "N=%d K=%d)", sh.n, sh.k);
  const int g = sh.group_size == int4::kPerChannel || sh.group_size == sh.k ? -1 : sh.group_size;
  if (g != -1 && g != 64 && g != 128)
    return make_status(StatusCode::kNotSupported,
                       "vLLM Machete baseline: group size %d (vLLM's Machete takes 64, 128 or one group)", sh.group_size);
  return Status::Ok();
}

Status make_weights(const int4::KernelWeightsView& w, cudaStream_t stream, Weights* out) {
  LOWBIT_RETURN_IF_ERROR(supported(w.shape));
  if (w.kind != int4::KernelLayoutKind::kMmaTiled)
    return make_status(StatusCode::kNotSupported, "vLLM Machete baseline: converts from the MMA-tiled layout only");
  if (!w.qweight || !w.scales) return make_status(StatusCode::kInvalidArgument, "vLLM Machete baseline: null weight");
  const int n = w.shape.n, k = w.shape.k, ng = w.shape.num_groups();
  Weights r;
  r.n = n, r.k = k, r.act = w.shape.act;
  r.group = ng == 1 ? -1 : w.shape.group_len();
  LOWBIT_RETURN_IF_ERROR(r.allocate(static_cast<size_t>(k) * n / 2, static_cast<size_t>(ng) * n * 2));
  void* gptq = nullptr;
  LOWBIT_CUDA_RETURN(cudaMalloc(&gptq, r.q_bytes));
  baselines::tiled_to_gptq_kernel<<<1024, 256, 0, stream>>>(static_cast<const uint32_t*>(w.qweight),
                                                            static_cast<uint32_t*>(gptq), n, k, /*column_major=*/true);
  Status st = make_status(StatusCode::kInternal, "vLLM Machete baseline: prepack did not run");
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    st = make_status(StatusCode::kCudaError, "vLLM Machete baseline: tiled_to_gptq: %s", cudaGetErrorString(e));
  } else {
    // vLLM: machete_prepack_B(qweight.t().contiguous().t(), a_type, uint4b8, group_scales_type = a_type).
    const ScalarType at = act_type(r.act);
    const Tensor b(gptq, {k / 8, n}, {1, k / 8}, ScalarType::Int);
    lowbit_machete_shim::Arena arena;
    arena.out = r.q, arena.out_bytes = r.q_bytes, arena.stream = stream;
    try {
      lowbit_machete_shim::ArenaScope scope(arena);
      const Tensor packed = machete::prepack_B_dispatch(machete::PrepackBArgs{b, at, vllm::kU4B8, at});
      st = packed.data_ptr() == r.q ? Status::Ok()
                                    : make_status(StatusCode::kInternal, "vLLM Machete baseline: prepack wrote elsewhere");
    } catch (const std::exception& ex) {
      st = make_status(StatusCode::kInvalidArgument, "%s", ex.what());
    }
    if (st.ok()) {
      gather_scales_kernel<<<256, 256, 0, stream>>>(w.scales, static_cast<uint16_t*>(r.s), n, ng);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
        st = make_status(StatusCode::kCudaError, "vLLM Machete baseline: scales: %s", cudaGetErrorString(e));
    }
    if (cudaError_t e = cudaStreamSynchronize(stream); st.ok() && e != cudaSuccess)
      st = make_status(StatusCode::kCudaError, "vLLM Machete baseline: prepack: %s", cudaGetErrorString(e));
  }
  (void)cudaFree(gptq);
  LOWBIT_RETURN_IF_ERROR(st);
  *out = static_cast<Weights&&>(r);
  return Status::Ok();
}

Status make_copies(const int4::KernelWeightsView& w, int copies, cudaStream_t stream, std::vector<Weights>* out) {
  return baselines::make_rotation_copies([&](Weights* first) { return make_weights(w, stream, first); }, copies,
                                         stream, out);
}

Status gemm(const Weights& w, const void* x, void* y, int m, Workspace& ws, cudaStream_t stream) {
  if (!w.q || !w.s || !x || !y || m <= 0)
    return make_status(StatusCode::kInvalidArgument, "vLLM Machete baseline: null pointer or m = %d", m);
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 != 0)
    return make_status(StatusCode::kMisaligned, "vLLM Machete baseline: x and y must be 16 B aligned");
  if (!ws.p) return make_status(StatusCode::kInvalidArgument, "vLLM Machete baseline: Workspace::ensure() first");
  const ScalarType at = act_type(w.act);
  const int ng = w.group == -1 ? 1 : w.k / w.group;
  // vLLM's MacheteLinearKernel.apply_weights: machete_mm(a = x_2d, b_q, uint4b8, b_group_scales =
  // w_s, b_group_size = group_size); no zeros, channel or token scales, no schedule.
  const Tensor a = Tensor::contiguous(const_cast<void*>(x), {m, w.k}, at);
  const Tensor b = Tensor::contiguous(w.q, {w.k / 8, w.n}, ScalarType::Int);
  const std::optional<Tensor> scales = Tensor::contiguous(w.s, {ng, w.n}, at);
  const std::optional<Tensor> none;
  const std::optional<ScalarType> out_type;
  lowbit_machete_shim::Arena arena;
  arena.out = y, arena.out_bytes = static_cast<size_t>(m) * w.n * 2;
  arena.workspace = ws.p, arena.workspace_bytes = ws.bytes, arena.stream = stream;
  try {
    lowbit_machete_shim::ArenaScope scope(arena);
    const Tensor d = machete::mm_dispatch(machete::MMArgs{a, b, vllm::kU4B8, out_type, scales, none,
                                                          std::optional<int64_t>(w.group), none, none, std::nullopt});
    if (d.data_ptr() != y)
      return make_status(StatusCode::kInternal, "vLLM Machete baseline: machete_mm wrote elsewhere");
  } catch (const std::exception& ex) {
    return make_status(StatusCode::kInvalidArgument, "%s", ex.what());
  }
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::bench::vllm_machete
