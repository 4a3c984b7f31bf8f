// Shared pieces of `lowbit bench gemm` and `lowbit bench moe`: random device fills (never
// time on zeros), kernel-layout weights built directly on the device, cuBLAS bf16/fp16
// GEMM baseline, and weight copies rotated across calls so replays stream from HBM, not
// from the 50 MB L2.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lowbit/int4/kernels.h"
#include "tests/gpu/int4/gpu_buffers.h"
#include "tools/cli/args.h"

namespace lowbit::int4::bench_util {
namespace {  // per-TU copies: both bench files include this header

using testing::DevBuf;
using testing::download;
using testing::upload;

__device__ __forceinline__ uint32_t hash32(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}
__global__ void fill_u32_kernel(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = hash32(i, seed);
}
// 16-bit act values uniform in +-[lo, hi] (bits of fp16/bf16).
__global__ void fill_act_kernel(uint16_t* p, size_t n, uint32_t seed, bool bf16, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint32_t h = hash32(i, seed);
    float v = lo + (hi - lo) * (h >> 8) * (1.f / 16777216.f);
    if (h & 1) v = -v;
    p[i] = bf16 ? float_to_bf16_bits(v) : float_to_f16_bits(v);
  }
}
__global__ void fill_zero_kernel(uint16_t* p, size_t n, uint32_t seed, bool bf16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float z = static_cast<float>(hash32(i, seed) & 15u);
    p[i] = bf16 ? float_to_bf16_bits(z) : float_to_f16_bits(z);
  }
}
inline void fill_u32(void* p, size_t n, uint32_t seed) { fill_u32_kernel<<<1024, 256>>>(static_cast<uint32_t*>(p), n, seed); }
inline void fill_act(void* p, size_t n, uint32_t seed, DType t, float lo, float hi) {
  fill_act_kernel<<<1024, 256>>>(static_cast<uint16_t*>(p), n, seed, t == DType::kBF16, lo, hi);
}

// Random int4 weights on the device (all experts), in the shape's default kernel layout
// (the words are random, so the view's kind may be switched to any layout the shape allows).
struct DevInt4 {
  DevBuf q, s, z;
  KernelWeightsView view;
  size_t bytes = 0;  // q + s (+ z)
  DevInt4(const WeightShape& sh, uint32_t seed, float scale) {
    const size_t nq = static_cast<size_t>(sh.experts) * sh.k * sh.n / 8;
    const size_t ns = kernel_scale_count(sh);
    view.shape = sh;
    bytes = nq * 4 + ns * 2 * (sh.symmetric ? 1 : 2);
    q = DevBuf(nq * 4);
    s = DevBuf(ns * 2);
    if (!sh.symmetric) z = DevBuf(ns * 2);
    if (!ok()) return;  // out of GPU memory (a --shapes layer too large): the caller checks ok()
    fill_u32(q.p, nq, seed);
    fill_act(s.p, ns, seed + 1, sh.act, 0.25f * scale, scale);
    if (!sh.symmetric) fill_zero_kernel<<<1024, 256>>>(z.as<uint16_t>(), ns, seed + 2, sh.act == DType::kBF16);
    view.kind = kernel_layout_for(sh);  // random words: any layout of the shape reads them
    view.qweight = q.p;
    view.scales = s.as<uint16_t>();
    view.zeros = sh.symmetric ? nullptr : z.as<uint16_t>();
  }
  bool ok() const { return q.p && s.p && (view.shape.symmetric || z.p); }
};

// The view in stored row order: dequantize() takes no permutation (--act-order: the cuBLAS
// baselines and references apply it to x instead).
inline KernelWeightsView stored_order(KernelWeightsView v) {
  v.k_perm = nullptr;
  return v;
}

// Copies so that one graph replay streams >= ~256 MB (5x the L2) of distinct weights.
inline int rotation_copies(size_t bytes_per_call, int max_copies) {
  const size_t target = size_t{256} << 20;
  size_t c = (target + bytes_per_call - 1) / (bytes_per_call ? bytes_per_call : 1);
  if (c < 1) c = 1;
  if (c > static_cast<size_t>(max_copies)) c = max_copies;
  return static_cast<int>(c);
}

// y[M, N] = x[M, K] * W[N, K]^T in act dtype with fp32 accumulation (cuBLAS column-major:
// y^T = W * x^T, W row-major [N, K] is column-major [K, N] transposed).
inline cublasStatus_t cublas_gemm(cublasHandle_t h, DType t, int M, int N, int K, const void* x, const void* w,
                                  void* y) {
  const float alpha = 1.f, beta = 0.f;
  const cudaDataType dt = t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, dt, K, x, dt, K, &beta, y, dt, N,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

// The options `bench gemm` and `bench moe` share, read and checked: a bad value (an M that is
// not an integer in [1, 2^20], a dtype other than bf16 / fp16, a group outside 32 / 64 / 128 /
// -1, reps < 1) is reported naming the option, and the bench exits with 2 before touching the
// GPU (an unknown dtype used to run bf16, a non-numeric M ran as M = 0).
struct CommonOptions {
  bool quick = false;
  std::vector<int> ms;
  DType act = DType::kBF16;
  int group = 128;
  bool sym = true;
  int reps = 10;
  std::string out;
  bool act_order = false;
};
inline bool read_common_options(const char* who, cli::Args& args, const std::vector<std::string>& quick_ms,
                                const std::vector<std::string>& full_ms, const std::string& default_out,
                                CommonOptions* o) {
  o->quick = args.has("quick");
  o->ms.clear();
  for (const std::string& s : args.get_list("m", o->quick ? quick_ms : full_ms)) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > (1L << 20)) {
      std::fprintf(stderr, "%s: --m: '%s' is not an M in [1, 1048576]\n", who, s.c_str());
      return false;
    }
    o->ms.push_back(static_cast<int>(v));
  }
  if (o->ms.empty()) {
    std::fprintf(stderr, "%s: --m: no M given\n", who);
    return false;
  }
  const std::string dt = args.get("dtype", "bf16");
  if (dt != "bf16" && dt != "fp16") {
    std::fprintf(stderr, "%s: --dtype %s (bf16, fp16)\n", who, dt.c_str());
    return false;
  }
  o->act = dt == "fp16" ? DType::kF16 : DType::kBF16;
  o->group = static_cast<int>(args.get_int("group", 128));
  o->reps = static_cast<int>(args.get_int("reps", 10));
  if (!args.ok()) {
    std::fprintf(stderr, "%s: %s\n", who, args.error().c_str());
    return false;
  }
  if (o->group != 32 && o->group != 64 && o->group != 128 && o->group != kPerChannel) {
    std::fprintf(stderr, "%s: --group %d (32, 64, 128, -1: per channel)\n", who, o->group);
    return false;
  }
  if (o->reps < 1) {
    std::fprintf(stderr, "%s: --reps %d must be >= 1\n", who, o->reps);
    return false;
  }
  o->sym = !args.has("asym");
  o->out = args.get("out", default_out);
  o->act_order = args.has("act-order");
  return true;
}

// --shapes a,b: keep the named shapes of `all` in the given order. Returns false (and names
// the unknown shape in *bad) when a name is not in the list; an empty selection keeps all.
template <typename Shape>
bool select_shapes(const std::vector<std::string>& names, std::vector<Shape>* all, std::string* bad) {
  if (names.empty()) return true;
  std::vector<Shape> picked;
  for (const std::string& n : names) {
    bool found = false;
    for (const Shape& s : *all)
      if (n == s.name) picked.push_back(s), found = true;
    if (!found) {
      *bad = n;
      return false;
    }
  }
  *all = std::move(picked);
  return true;
}

}  // namespace
}  // namespace lowbit::int4::bench_util
