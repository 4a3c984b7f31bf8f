// Small RAII device buffer + weight upload helpers for the INT4 GPU tests and benches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "lowbit/int4/device_weights.h"
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

// Kernel-layout weights resident on the device, uploaded by the library's DeviceWeights (so
// every GPU test that uploads weights exercises it). A failed upload leaves the view null,
// which every kernel entry refuses; `status` says why.
struct DevWeights {
  DeviceWeights dev;
  Status status;
  KernelWeightsView view;
  explicit DevWeights(const KernelWeights& w) : status(DeviceWeights::upload(w, &dev)), view(dev.view()) {}
};

}  // namespace lowbit::int4::testing
