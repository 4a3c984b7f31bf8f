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
#include <cstdint>
#include <vector>

#include "bench/baselines/device_arrays.h"
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/status.h"

namespace lowbit::bench::vllm_marlin {

// The vLLM release the kernels come from (cmake/vllm_marlin.cmake downloads it).
extern const char* const kMarlinSource;

// Marlin's copy of an int4 weight or expert stack: its tiled words ([E, K/16, 2N] int32) and
// its permuted scales ([E, K/G, N]); device memory owned by this object.
class Weights : public baselines::DeviceArrays {
 public:
  int experts = 1, n = 0, k = 0, group = 0;
  DType act = DType::kBF16;
  void copy_meta_from(const Weights& o) { experts = o.experts, n = o.n, k = o.k, group = o.group, act = o.act; }
};

// Whether Marlin (as built: the activation types and group sizes of
// LOWBIT_VLLM_MARLIN_GROUPS) takes this weight or expert stack; the status names what it does
// not take.
Status supported(const int4::WeightShape& shape);

// Converts a lowbit weight or expert stack (MMA-tiled layout, on the device) into Marlin's
// layout, expert by expert: a kernel reads every nibble through lowbit's layout map into GPTQ's
// K-packed int32 words, vLLM's gptq_marlin_repack kernel tiles them, and the scales take vLLM's
// marlin_permute_scales order (vLLM's gptq_marlin_moe_repack / marlin_moe_permute_scales are
// the same steps per expert).
Status make_weights(const int4::KernelWeightsView& w, cudaStream_t stream, Weights* out);
// `copies` Marlin copies of `w` for a bench's rotation: copy 0 converted by make_weights(), the
// others byte copies of it (distinct addresses, so replays read HBM as lowbit's rotation does).
Status make_copies(const int4::KernelWeightsView& w, int copies, cudaStream_t stream, std::vector<Weights>* out);

// Scratch of gemm() and moe_gemm(): the fp32 reduction buffer and the per-block locks, sms * 4
// ints (vLLM's MARLIN_MAX_BLOCKS_PER_SM; zeroed once, Marlin leaves them zeroed).
class Workspace {
 public:
  static constexpr int kMaxBlocksPerSm = 4;  // vLLM's MARLIN_MAX_BLOCKS_PER_SM
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();
  // gemm(): vLLM's max_c_tmp_size (Marlin's largest block of rows, 64), whatever M is.
  Status ensure(cudaStream_t stream);
  // moe_gemm(): up to `max_padded` sorted slots of block size `block`, N up to `max_n`.
  Status ensure_moe(long long max_padded, int block, int max_n, cudaStream_t stream);
  void* c_tmp = nullptr;
  int* locks = nullptr;
  int sms = 0;
  size_t c_tmp_bytes = 0;

 private:
  Status reserve(size_t c_tmp_floats, cudaStream_t stream);
};

// y[m, n] = x[m, k] * W^T for a single weight (experts == 1), x and y row-major in the weight's
// activation type. x and y must be 16 B aligned. Enqueues on `stream` only (graph-capturable, as vLLM captures it).
Status gemm(const Weights& w, const void* x, void* y, int m, Workspace& ws, cudaStream_t stream);

// ---- MoE: vLLM's fused_marlin_moe (csrc/moe/marlin_moe_wna16) ---------------------------
// What vLLM's fused_marlin_moe runs for a GPTQ int4 MoE layer: moe_align_block_size at a block
// size chosen from M * topk / E (moe_block_size below), GEMM1 (w13, gate then up) into
// [M * topk, 2I], silu_and_mul into [M * topk, I], GEMM2 (w2) with the routing weights
// multiplied in, then a sum over the top-k slots. moe_gemm() is one of the two Marlin GEMMs;
// the bench feeds them lowbit's routing (moe_route: the same sorted-id format, padding ids
// M * topk, experts per block) and times the two GEMMs alone (a lower bound of vLLM's layer)
// and the layer with silu_and_mul() and topk_sum() below standing in for vLLM's elementwise
// kernels.

// vLLM's rule (fused_marlin_moe): the first of 8, 16, 32, 48, 64 with M * topk / E / bm < 0.9.
int moe_block_size(int m, int topk, int experts);

// One Marlin MoE GEMM, as vLLM's moe_wna16_marlin_gemm: c[p, :] for every sorted slot p of
// the align output = a[row(p)] . w[expert]^T, row(p) = p / top_k (GEMM1: top_k = topk, a = x)
// or p (GEMM2: top_k = 1, a = the activated intermediate); times topk_weights[p] when
// mul_topk_weights. m: rows of a's token dimension (GEMM1: tokens; GEMM2: tokens * topk);
// max_padded: the sorted_ids entries (sizes the reduction buffer as vLLM does).
Status moe_gemm(const Weights& w, const void* a, void* c, const int32_t* sorted_ids, const int32_t* expert_ids,
                const int32_t* num_post_padded, const float* topk_weights, int block, int top_k, bool mul_topk_weights,
                int m, long long max_padded, Workspace& ws, cudaStream_t stream);
// out[p, i] = silu(h[p, i]) * h[p, I + i] (fp32, rounded once), p < rows: vLLM's silu_and_mul.
Status silu_and_mul(DType act, const void* h, void* out, int rows, int inter, cudaStream_t stream);
// y[t, :] = sum over s < topk of c[t * topk + s, :] (fp32, rounded once): torch.sum(dim=1).
Status topk_sum(DType act, const void* c, void* y, int tokens, int topk, int hidden, cudaStream_t stream);

}  // namespace lowbit::bench::vllm_marlin
