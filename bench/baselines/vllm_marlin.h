// vLLM's Marlin W4A16 GEMM as a side-by-side baseline for `lowbit bench gemm`.
//
// Built only with -DLOWBIT_BENCH_VLLM_MARLIN=ON (cmake/vllm_marlin.cmake): the kernels are
// vLLM's own sources (csrc/quantization/marlin of the vLLM release on PyPI named in
// kMarlinSource), compiled without PyTorch; this wrapper replaces vLLM's PyTorch entry
// (marlin_gemm in marlin.cu) with the same steps on raw pointers. What vLLM runs for a GPTQ
// int4 linear layer on CUDA when it picks Marlin: uint4b8 weights (symmetric, zero 8),
// fp16 / bf16 activations and scales, fp32 global reduction (vLLM's default), no atomics
// (vLLM uses them only where N < 2048). lowbit's weights are converted exactly: same
// nibbles, same scales, so the two outputs differ only by summation order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "lowbit/int4/kernel_layout.h"
#include "lowbit/status.h"

namespace lowbit::bench::vllm_marlin {

// The vLLM release the kernels come from (cmake/vllm_marlin.cmake downloads it).
extern const char* const kMarlinSource;

// Marlin's copy of one int4 weight: its tiled words ([K/16, 2N] int32) and its permuted
// scales ([K/G, N]); device memory owned by this object.
class Weights {
 public:
  Weights() = default;
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;
  Weights(Weights&& o) noexcept { *this = static_cast<Weights&&>(o); }
  Weights& operator=(Weights&& o) noexcept;
  ~Weights();
  int n = 0, k = 0, group = 0;
  DType act = DType::kBF16;
  void* q = nullptr;
  void* s = nullptr;
  size_t q_bytes = 0, s_bytes = 0;
};

// Whether Marlin (as built: the activation types and group sizes of
// LOWBIT_VLLM_MARLIN_GROUPS) takes this shape; the status names what it does not take.
Status supported(const int4::WeightShape& shape);

// Converts one expert-less lowbit weight (MMA-tiled layout, on the device) into Marlin's
// layout: a kernel reads every nibble through lowbit's layout map into GPTQ's K-packed int32
// words, vLLM's gptq_marlin_repack kernel tiles them, and the scales take vLLM's
// marlin_permute_scales order.
Status make_weights(const int4::KernelWeightsView& w, cudaStream_t stream, Weights* out);
// Another copy of the same words and scales (the bench rotates copies so that replays read HBM).
Status copy_weights(const Weights& from, cudaStream_t stream, Weights* out);

// Scratch for gemm(): the fp32 reduction buffer and the per-block locks (zeroed once; Marlin
// leaves them zeroed).
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();
  Status ensure(int m, cudaStream_t stream);
  void* c_tmp = nullptr;
  int* locks = nullptr;
  int sms = 0;
  size_t c_tmp_bytes = 0;
};

// y[m, n] = x[m, k] * W^T, x and y row-major in the weight's activation type. x and y must be
// 16 B aligned. Enqueues on `stream` only (graph-capturable, as vLLM captures it).
Status gemm(const Weights& w, const void* x, void* y, int m, Workspace& ws, cudaStream_t stream);

}  // namespace lowbit::bench::vllm_marlin
