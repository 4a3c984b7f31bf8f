// Kernel-layout INT4 weights resident on a CUDA device: the step between the load-time
// repack (kernel_layout.h: repack_for_kernels) and the kernels (kernels.h), which take a
// non-owning KernelWeightsView. upload() checks every array against the weight's shape and
// kind, allocates the device arrays on the current device (cudaMalloc: 256 B aligned, past the
// kernels' 16 B requirement: words, scales, zeros if asymmetric, k_perm if act-order) and copies
// them; the object frees them.
//
//   KernelWeights kw;                      // repack_for_kernels(kpacked, &kw)
//   DeviceWeights dw;
//   Status st = DeviceWeights::upload(kw, &dw);
//   st = gemm(args, dw.view(), workspace, workspace_bytes, stream);
//
// This header compiles without CUDA; in a build without CUDA upload() returns kNotSupported.
#pragma once

#include <cstddef>

#include "lowbit/int4/kernel_layout.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

// Checks that the arrays of `w` hold exactly what its shape and kind need: qweight_n (N-packed,
// MMA-tiled) or qweight_k (K-packed) of kernel_qweight_bytes(), the other one empty;
// kernel_scale_count() scales; as many zeros when asymmetric, none when symmetric; k_perm empty or
// a permutation of 0..K-1 per expert (validate_k_perm).
Status validate(const KernelWeights& w);

class DeviceWeights {
 public:
  DeviceWeights() = default;
  ~DeviceWeights();
  DeviceWeights(DeviceWeights&& o) noexcept;
  DeviceWeights& operator=(DeviceWeights&& o) noexcept;
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;

  // validate(w), then allocate on the current device and copy (synchronous: a load-time
  // step). On error `out` is left empty (its previous arrays are freed either way).
  static Status upload(const KernelWeights& w, DeviceWeights* out);

  // What the kernels take; all pointers null while empty().
  const KernelWeightsView& view() const { return s_.view; }
  bool empty() const { return s_.view.qweight == nullptr; }
  size_t device_bytes() const { return s_.bytes; }  // the arrays together
  int device() const { return s_.device; }          // where they live (-1 while empty)

 private:
  // The view's pointers are the owned arrays (freed through it on `device`).
  struct State {
    KernelWeightsView view{};
    size_t bytes = 0;
    int device = -1;
  };
  void release();
  State s_;
};

}  // namespace lowbit::int4
