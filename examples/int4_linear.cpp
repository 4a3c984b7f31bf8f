// lowbit's INT4 path in one file, as an engine would use it: a GPTQ layer (what a checkpoint
// holds; here one saved with desc_act, act-order) in, the kernel layout on the GPU, y = x W^T out
// for x in the checkpoint's input order, checked against the fp64 reference.
//
//   build/bin/lowbit_example_int4_linear          (built with the library; ctest runs it)
//
// Without a CUDA device it runs the CPU half (conversion and repack) and says SKIPPED for the
// GPU half. Error handling is the library's: every call returns a lowbit::Status naming the
// problem; this example prints it and exits 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "lowbit/int4/device_weights.h"
#include "lowbit/int4/formats.h"
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/int4/kernels.h"
#include "lowbit/int4/moe_ref.h"
#include "lowbit/int4/weights.h"

#if LOWBIT_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace lowbit;
using namespace lowbit::int4;

namespace {

bool failed(const Status& st, const char* what) {
  if (st.ok()) return false;
  std::fprintf(stderr, "%s: %s\n", what, st.to_string().c_str());
  return true;
}

#if LOWBIT_HAS_CUDA
bool cuda_failed(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return false;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return true;
}
#endif

}  // namespace

int main() {
  // A Llama-3-8B o_proj-sized layer: N = K = 4096, groups of 128, asymmetric, bf16 activations.
  const int N = 4096, K = 4096;
  WeightShape shape;
  shape.n = N;
  shape.k = K;
  shape.group_size = 128;
  shape.symmetric = false;
  shape.act = DType::kBF16;

  // 1. A stand-in checkpoint: random weights quantized by round-to-nearest, written as a
  //    GPTQ v2 layer (int32 qweight [K/8, N], qzeros [K/G, N/8], fp16 scales [K/G, N]) with
  //    desc_act: GPTQ quantized the input rows in a data-dependent order, so g_idx (the group of
  //    each input row) is not k / G. Here that order is a random permutation.
  std::vector<float> w(static_cast<size_t>(N) * K);
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.f, 0.02f);
  for (float& v : w) v = normal(rng);
  KPackedWeights quantized;
  if (failed(quantize_rtn(w.data(), shape, &quantized), "quantize_rtn")) return 1;
  quantized.k_perm.resize(K);  // stored row j (group j / G) is input row k_perm[j]
  for (int j = 0; j < K; ++j) quantized.k_perm[j] = j;
  std::shuffle(quantized.k_perm.begin(), quantized.k_perm.end(), rng);
  GptqLinear gptq;
  if (failed(kpacked_to_gptq(quantized, 0, GptqVersion::kV2, &gptq), "kpacked_to_gptq")) return 1;

  // 2. Load time: the checkpoint layer into the canonical layout, then the kernel layout.
  KPackedWeights kp;
  ConvertReport report;
  if (failed(gptq_to_kpacked(gptq, DType::kBF16, ScalePolicy::kExact, &kp, &report), "gptq_to_kpacked")) return 1;
  KernelWeights kw;  // rows in group order; k_perm says which input row each one takes
  if (failed(repack_for_kernels(kp, &kw), "repack_for_kernels")) return 1;
  std::printf("GPTQ v2 layer %d x %d (G = %d, asymmetric, act-order %s) -> %s layout, %zu scales changed by "
              "conversion\n", N, K, shape.group_size, report.act_order ? "yes" : "no", kernel_layout_name(kw.kind),
              report.scales_rounded);
  if (!report.act_order || kw.k_perm.size() != static_cast<size_t>(K)) {
    std::fprintf(stderr, "the desc_act layer lost its permutation on the way in\n");
    return 1;
  }

#if LOWBIT_HAS_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device; the conversion and repack above ran on the CPU\n");
    return 0;
  }
  // 3. Once per layer: the weights onto the device. DeviceWeights owns the arrays.
  DeviceWeights dw;
  if (failed(DeviceWeights::upload(kw, &dw), "DeviceWeights::upload")) return 1;

  // 4. Per step: y[M, N] = x[M, K] W^T on a stream; the workspace sized once for the largest M
  //    (sized from the view: gemm() gathers the act-order copy x[:, k_perm] into it).
  const int max_m = 16;
  size_t ws_bytes = 0;
  if (failed(gemm_workspace_size(dw.view(), max_m, &ws_bytes), "gemm_workspace_size")) return 1;
  void *dx = nullptr, *dy = nullptr, *ws = nullptr;
  cudaStream_t stream = nullptr;
  if (cuda_failed(cudaMalloc(&dx, static_cast<size_t>(max_m) * K * 2), "cudaMalloc x") ||
      cuda_failed(cudaMalloc(&dy, static_cast<size_t>(max_m) * N * 2), "cudaMalloc y") ||
      (ws_bytes > 0 && cuda_failed(cudaMalloc(&ws, ws_bytes), "cudaMalloc workspace")) ||
      cuda_failed(cudaStreamCreate(&stream), "cudaStreamCreate"))
    return 1;
  std::vector<uint16_t> x(static_cast<size_t>(max_m) * K);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (uint16_t& v : x) v = float_to_half_bits(DType::kBF16, uni(rng));
  if (cuda_failed(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy x")) return 1;

  int bad = 0;
  for (int m : {1, 16}) {
    GemmArgs args;
    args.x = dx;
    args.y = dy;
    args.m = m;  // path kAuto: the decode kernel at these M on the MMA-tiled layout
    if (failed(gemm(args, dw.view(), ws, ws_bytes, stream), "gemm")) return 1;
    std::vector<uint16_t> y(static_cast<size_t>(m) * N);
    if (cuda_failed(cudaMemcpyAsync(y.data(), dy, y.size() * 2, cudaMemcpyDeviceToHost, stream), "copy y") ||
        cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
      return 1;
    // 5. The fp64 reference of the same weights (the library's CPU reference; it applies k_perm).
    std::vector<double> ref;
    if (failed(gemm_ref(kp, 0, x.data(), m, &ref, nullptr), "gemm_ref")) return 1;
    double err = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double v = half_bits_to_float(DType::kBF16, y[i]);
      err = std::isfinite(v) ? std::max(err, std::fabs(v - ref[i])) : INFINITY;
      scale = std::max(scale, std::fabs(ref[i]));
    }
    // bf16 output rounding is 2^-9 relative; fp32 accumulation adds far less at K = 4096.
    const bool ok = err <= scale / 128;
    bad += ok ? 0 : 1;
    std::printf("M = %2d (%s path): max |y - y_fp64| = %.3g (max |y_fp64| = %.3g) %s\n", m,
                gemm_path_name(gemm_resolved_path(dw.view().shape, dw.view().kind, m)), err, scale,
                ok ? "OK" : "TOO LARGE");
  }
  cudaFree(dx);
  cudaFree(dy);
  if (ws != nullptr) cudaFree(ws);
  cudaStreamDestroy(stream);
  return bad == 0 ? 0 : 1;
#else
  std::printf("SKIPPED: lowbit built without CUDA; the conversion and repack above ran on the CPU\n");
  return 0;
#endif
}
