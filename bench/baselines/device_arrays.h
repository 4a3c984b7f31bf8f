// The two device arrays of a baseline kernel's weight copy (its packed words and its scales),
// owned and move-only: shared by the vLLM Marlin and Machete wrappers, whose Weights derive from
// it and add what their kernels need to know (shape, group, dtype).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "lowbit/detail/cuda_check.h"
#include "lowbit/status.h"

namespace lowbit::bench::baselines {

class DeviceArrays {
 public:
  DeviceArrays() = default;
  DeviceArrays(const DeviceArrays&) = delete;
  DeviceArrays& operator=(const DeviceArrays&) = delete;
  DeviceArrays(DeviceArrays&& o) noexcept { *this = static_cast<DeviceArrays&&>(o); }
  DeviceArrays& operator=(DeviceArrays&& o) noexcept {
    if (this != &o) {
      release();
      q = o.q, s = o.s, q_bytes = o.q_bytes, s_bytes = o.s_bytes;
      o.q = o.s = nullptr;
      o.q_bytes = o.s_bytes = 0;
    }
    return *this;
  }
  ~DeviceArrays() { release(); }
  // Frees both arrays (idempotent).
  void release() {
    if (q) (void)cudaFree(q);
    if (s) (void)cudaFree(s);
    q = s = nullptr;
    q_bytes = s_bytes = 0;
  }
  // Allocates both (freeing what was held).
  Status allocate(size_t words_bytes, size_t scale_bytes) {
    release();
    LOWBIT_CUDA_RETURN(cudaMalloc(&q, words_bytes));
    q_bytes = words_bytes;
    LOWBIT_CUDA_RETURN(cudaMalloc(&s, scale_bytes));
    s_bytes = scale_bytes;
    return Status::Ok();
  }
  // A byte copy of `from`'s arrays (new memory; synchronizes `stream`).
  Status copy_from(const DeviceArrays& from, cudaStream_t stream) {
    LOWBIT_RETURN_IF_ERROR(allocate(from.q_bytes, from.s_bytes));
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(q, from.q, q_bytes, cudaMemcpyDeviceToDevice, stream));
    LOWBIT_CUDA_RETURN(cudaMemcpyAsync(s, from.s, s_bytes, cudaMemcpyDeviceToDevice, stream));
    LOWBIT_CUDA_RETURN(cudaStreamSynchronize(stream));
    return Status::Ok();
  }

  void* q = nullptr;  // the kernel's packed words
  void* s = nullptr;  // its scales
  size_t q_bytes = 0, s_bytes = 0;
};

// `copies` weight copies for a bench's rotation: copy 0 made by `make` (a Status(W*)), the others
// byte copies of it with the same metadata (distinct addresses, so replays read HBM as lowbit's
// rotation does). W derives from DeviceArrays and has copy_meta_from(const W&).
template <class W, class Make>
Status make_rotation_copies(Make&& make, int copies, cudaStream_t stream, std::vector<W>* out) {
  if (copies < 1) return make_status(StatusCode::kInvalidArgument, "baseline weights: copies = %d", copies);
  out->clear();
  out->resize(copies);
  LOWBIT_RETURN_IF_ERROR(make(&(*out)[0]));
  for (int c = 1; c < copies; ++c) {
    W& w = (*out)[c];
    LOWBIT_RETURN_IF_ERROR(w.copy_from((*out)[0], stream));
    w.copy_meta_from((*out)[0]);
  }
  return Status::Ok();
}

}  // namespace lowbit::bench::baselines
