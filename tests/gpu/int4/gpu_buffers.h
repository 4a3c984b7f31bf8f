// Small RAII device buffer + weight upload helpers for the INT4 GPU tests and benches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "lowbit/int4/kernel_layout.h"

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

template <typename T>
DevBuf upload(const std::vector<T>& v) {
  DevBuf b(v.size() * sizeof(T));
  if (b.p && !v.empty()) cudaMemcpy(b.p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return b;
}
template <typename T>
std::vector<T> download(const void* p, size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

// Kernel-layout weights resident on the device.
struct DevWeights {
  DevBuf q, s, z;
  KernelWeightsView view;
  explicit DevWeights(const KernelWeights& w) {
    q = w.kind == KernelLayoutKind::kKPacked ? upload(w.qweight_k) : upload(w.qweight_n);
    s = upload(w.scales);
    if (!w.zeros.empty()) z = upload(w.zeros);
    view.shape = w.shape;
    view.kind = w.kind;
    view.qweight = q.p;
    view.scales = s.as<uint16_t>();
    view.zeros = w.zeros.empty() ? nullptr : z.as<uint16_t>();
  }
};

}  // namespace lowbit::int4::testing
