// Small RAII device buffer + weight upload helpers for the INT4 GPU tests and benches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/int4/device_weights.h"
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4::testing {

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  DevBuf() = default;
  explicit DevBuf(size_t n) : bytes(n) {
    if (n && cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p), bytes(o.bytes) { o.p = nullptr; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    std::swap(p, o.p);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// Host <-> device copies that report a failure instead of returning unfilled memory: a
// std::runtime_error naming the copy, its size and the CUDA error (gtest reports it as the
// test's failure; the `lowbit` CLI prints it and exits non-zero). A DevBuf that could not be
// allocated is not an error by itself: its p is null and the caller decides (the benches
// report and skip the shape).
[[noreturn]] inline void throw_copy_error(const char* what, size_t bytes, cudaError_t e) {
  throw std::runtime_error(std::string(what) + " of " + std::to_string(bytes) + " bytes: " + cudaGetErrorName(e) +
                           " (" + cudaGetErrorString(e) + ")");
}
template <typename T>
DevBuf upload(const std::vector<T>& v) {
  const size_t bytes = v.size() * sizeof(T);
  DevBuf b(bytes);
  if (bytes == 0) return b;
  if (b.p == nullptr) throw_copy_error("upload: cudaMalloc", bytes, cudaErrorMemoryAllocation);
  if (const cudaError_t e = cudaMemcpy(b.p, v.data(), bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
    throw_copy_error("upload: cudaMemcpy host -> device", bytes, e);
  return b;
}
template <typename T>
std::vector<T> download(const void* p, size_t n) {
  std::vector<T> v(n);
  if (n == 0) return v;
  if (const cudaError_t e = cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost); e != cudaSuccess)
    throw_copy_error("download: cudaMemcpy device -> host", n * sizeof(T), e);
  return v;
}

// Kernel-layout weights resident on the device, uploaded by the library's DeviceWeights (so
// every GPU test that uploads weights exercises it). A failed upload leaves the view null,
// which every kernel entry refuses; `status` says why.
struct DevWeights {
  DeviceWeights dev;
  Status status;
  KernelWeightsView view;
  explicit DevWeights(const KernelWeights& w) : status(DeviceWeights::upload(w, &dev)), view(dev.view()) {}
};

// A fused MoE layer's arguments on test buffers: activations x, fp32 router logits, output y;
// renormalized top-k; block_m 0 = fused_moe's choice.
inline MoeArgs layer_args(const DevBuf& x, const DevBuf& logits, const DevBuf& y, int m, int topk, int block_m,
                          MoePath path) {
  MoeArgs a;
  a.x = x.p;
  a.router_logits = logits.as<float>();
  a.y = y.p;
  a.m = m;
  a.topk = topk;
  a.renormalize = true;
  a.block_m = block_m;
  a.path = path;
  return a;
}

}  // namespace lowbit::int4::testing
