// vLLM's Machete W4A16 GEMM as a side-by-side baseline for `lowbit bench gemm`.
//
// Machete is the kernel vLLM picks first for a GPTQ / compressed-tensors int4 linear layer on
// Hopper (choose_mp_linear_kernel: CutlassW4A8, then Machete, then Marlin; Machete takes
// symmetric uint4b8 weights with group size 64, 128 or one group, K % 64 == 0, N % 128 == 0).
// Built only with -DLOWBIT_BENCH_VLLM_MACHETE=ON (cmake/vllm_machete.cmake): the kernels are
// vLLM's own CUTLASS-based sources and generator (csrc/quantization/machete of the vLLM release
// named in kMacheteSource), compiled without PyTorch against a small stand-in for the PyTorch
// types they take (bench/baselines/vllm_machete/torch_shim); vLLM's host dispatch, with its
// default heuristic of tile shapes by M, N and K, runs unchanged. lowbit's weights are converted
// exactly (same nibbles, same scales), so the two outputs differ only by summation order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/baselines/device_arrays.h"
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/status.h"

namespace lowbit::bench::vllm_machete {

// The vLLM release and CUTLASS the kernels come from (cmake/vllm_machete.cmake).
extern const char* const kMacheteSource;

// Machete's copy of one int4 weight: its prepacked words (K * N / 2 bytes, machete_prepack_B's
// layout) and its scales ([K/G, N] row-major in the activation type); device memory owned by
// this object.
class Weights : public baselines::DeviceArrays {
 public:
  int n = 0, k = 0, group = 0;  // group: -1 for one group over K (vLLM's per-channel)
  DType act = DType::kBF16;
  void copy_meta_from(const Weights& o) { n = o.n, k = o.k, group = o.group, act = o.act; }
};

// Whether vLLM would run Machete on this weight (and this build has it): one weight (Machete
// has no MoE path), symmetric, K % 64, N % 128, group size 64 / 128 / one group; the status
// names what it does not take.
Status supported(const int4::WeightShape& shape);

// Converts a lowbit weight (MMA-tiled layout, on the device) into Machete's: a kernel reads every
// nibble through lowbit's layout map into GPTQ's K-packed words in the column-major order vLLM
// hands machete_prepack_B, vLLM's prepack kernel reorders them, and the scales are gathered into
// [K/G, N] row-major (what vLLM's MacheteLinearKernel keeps).
Status make_weights(const int4::KernelWeightsView& w, cudaStream_t stream, Weights* out);
// `copies` Machete copies of `w` for a bench's rotation: copy 0 converted by make_weights(), the
// others byte copies of it (distinct addresses, so replays read HBM as lowbit's rotation does).
Status make_copies(const int4::KernelWeightsView& w, int copies, cudaStream_t stream, std::vector<Weights>* out);

// The stream-K workspace that vLLM's launcher allocates per call (CUTLASS's
// get_workspace_size); here one buffer, allocated once. gemm() fails by name if a call needs
// more than it holds.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();
  Status ensure(size_t bytes);
  void* p = nullptr;
  size_t bytes = 0;
};

// y[m, n] = x[m, k] * W^T, x and y row-major in the weight's activation type, 16 B aligned: what
// vLLM's machete_mm does for the layer (no schedule given: vLLM's heuristic picks the tile).
// Enqueues on `stream` only (graph-capturable, as vLLM captures it).
Status gemm(const Weights& w, const void* x, void* y, int m, Workspace& ws, cudaStream_t stream);

}  // namespace lowbit::bench::vllm_machete
