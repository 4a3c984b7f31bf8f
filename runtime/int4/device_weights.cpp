// Kernel-layout weights on the device (include/lowbit/int4/device_weights.h). validate() is
// plain C++; the upload needs CUDA (without it: kNotSupported).
#include "lowbit/int4/device_weights.h"

#include <utility>

#if LOWBIT_HAS_CUDA
#include "lowbit/detail/cuda_check.h"
#endif

namespace lowbit::int4 {

Status validate(const KernelWeights& w) {
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(s.experts >= 1 && s.n >= 1 && s.k >= 2 && s.k % 2 == 0,
                   "int4 kernel weights: shape E=%d N=%d K=%d (need E >= 1, N >= 1, even K >= 2)", s.experts, s.n,
                   s.k);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.group_size == 32 || s.group_size == 64 || s.group_size == 128,
                   "int4 kernel weights: group_size=%d not in {32, 64, 128, -1 (per-channel)}", s.group_size);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.k % s.group_size == 0,
                   "int4 kernel weights: group_size=%d does not divide K=%d", s.group_size, s.k);
  LOWBIT_CHECK_ARG(s.act == DType::kF16 || s.act == DType::kBF16, "int4 kernel weights: activation dtype must be fp16 or bf16");
  const size_t qbytes = kernel_qweight_bytes(s, w.kind);
  const bool kpacked = w.kind == KernelLayoutKind::kKPacked;
  LOWBIT_CHECK_ARG(w.kind == KernelLayoutKind::kKPacked || w.kind == KernelLayoutKind::kNPackedInterleaved ||
                       w.kind == KernelLayoutKind::kMmaTiled,
                   "int4 kernel weights: unknown layout kind %d", static_cast<int>(w.kind));
  if (w.kind == KernelLayoutKind::kNPackedInterleaved)
    LOWBIT_CHECK_ARG(s.n % 8 == 0 && s.k % kKernelKChunk == 0,
                     "int4 kernel weights: n-packed layout needs N %% 8 == 0 and K %% %d == 0 (N=%d K=%d)",
                     kKernelKChunk, s.n, s.k);
  if (w.kind == KernelLayoutKind::kMmaTiled)
    LOWBIT_CHECK_ARG(s.n % kMmaTileCols == 0 && s.k % kKernelKChunk == 0,
                     "int4 kernel weights: mma-tiled layout needs N %% %d == 0 and K %% %d == 0 (N=%d K=%d)",
                     kMmaTileCols, kKernelKChunk, s.n, s.k);
  const size_t have_q = kpacked ? w.qweight_k.size() : w.qweight_n.size() * sizeof(uint32_t);
  LOWBIT_CHECK_ARG(have_q == qbytes, "int4 kernel weights (%s): qweight_%s has %zu bytes, the shape needs %zu",
                   kernel_layout_name(w.kind), kpacked ? "k" : "n", have_q, qbytes);
  LOWBIT_CHECK_ARG(kpacked ? w.qweight_n.empty() : w.qweight_k.empty(),
                   "int4 kernel weights (%s): qweight_%s must be empty for this layout", kernel_layout_name(w.kind),
                   kpacked ? "n" : "k");
  const size_t nsc = kernel_scale_count(s);
  LOWBIT_CHECK_ARG(w.scales.size() == nsc, "int4 kernel weights: scales has %zu elements, the shape needs %zu",
                   w.scales.size(), nsc);
  if (s.symmetric)
    LOWBIT_CHECK_ARG(w.zeros.empty(), "int4 kernel weights: symmetric, but zeros has %zu elements", w.zeros.size());
  else
    LOWBIT_CHECK_ARG(w.zeros.size() == nsc, "int4 kernel weights: asymmetric, zeros has %zu elements, the shape needs %zu",
                     w.zeros.size(), nsc);
  return validate_k_perm(w.k_perm, s, "int4 kernel weights");
}

DeviceWeights::~DeviceWeights() { release(); }

DeviceWeights::DeviceWeights(DeviceWeights&& o) noexcept : s_(std::exchange(o.s_, State{})) {}

DeviceWeights& DeviceWeights::operator=(DeviceWeights&& o) noexcept {
  if (this != &o) {
    release();
    s_ = std::exchange(o.s_, State{});
  }
  return *this;
}

#if LOWBIT_HAS_CUDA

void DeviceWeights::release() {
  const void* arrays[] = {s_.view.qweight, s_.view.scales, s_.view.zeros, s_.view.k_perm};
  if (arrays[0] != nullptr || arrays[1] != nullptr || arrays[2] != nullptr || arrays[3] != nullptr) {
    // The arrays belong to s_.device; free them there (a destructor cannot report errors).
    int prev = -1;
    const bool switched =
        cudaGetDevice(&prev) == cudaSuccess && prev != s_.device && cudaSetDevice(s_.device) == cudaSuccess;
    for (const void* a : arrays)
      if (a != nullptr) (void)cudaFree(const_cast<void*>(a));
    if (switched) (void)cudaSetDevice(prev);
  }
  s_ = State{};
}

namespace {
// One array: allocated into *dev (so that its owner frees it even if the copy fails) and
// copied, or a Status naming it.
template <typename P>
Status upload_array(const void* host, size_t bytes, const char* what, const P** dev) {
  void* mem = nullptr;
  const cudaError_t e = cudaMalloc(&mem, bytes);
  if (e != cudaSuccess) {
    int d = -1;
    (void)cudaGetDevice(&d);
    return make_status(e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kCudaError,
                       "DeviceWeights::upload: cudaMalloc of %s (%zu bytes) on device %d failed: %s", what, bytes, d,
                       cudaGetErrorString(e));
  }
  *dev = static_cast<const P*>(mem);
  LOWBIT_CUDA_RETURN(cudaMemcpy(mem, host, bytes, cudaMemcpyHostToDevice));
  return Status::Ok();
}
}  // namespace

Status DeviceWeights::upload(const KernelWeights& w, DeviceWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "DeviceWeights::upload: out is null");
  out->release();
  LOWBIT_RETURN_IF_ERROR(validate(w));
  DeviceWeights d;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&d.s_.device));
  const bool kpacked = w.kind == KernelLayoutKind::kKPacked;
  const size_t qbytes = kernel_qweight_bytes(w.shape, w.kind);
  const void* qhost = kpacked ? static_cast<const void*>(w.qweight_k.data()) : static_cast<const void*>(w.qweight_n.data());
  const size_t sbytes = w.scales.size() * sizeof(uint16_t);
  // d frees whatever was allocated if a later step fails.
  KernelWeightsView& v = d.s_.view;
  LOWBIT_RETURN_IF_ERROR(upload_array(qhost, qbytes, "qweight", &v.qweight));
  LOWBIT_RETURN_IF_ERROR(upload_array(w.scales.data(), sbytes, "scales", &v.scales));
  if (!w.zeros.empty()) LOWBIT_RETURN_IF_ERROR(upload_array(w.zeros.data(), sbytes, "zeros", &v.zeros));
  const size_t pbytes = w.k_perm.size() * sizeof(int32_t);
  if (pbytes > 0) LOWBIT_RETURN_IF_ERROR(upload_array(w.k_perm.data(), pbytes, "k_perm", &v.k_perm));
  d.s_.bytes = qbytes + sbytes * (w.zeros.empty() ? 1 : 2) + pbytes;
  v.shape = w.shape;
  v.kind = w.kind;
  *out = std::move(d);
  return Status::Ok();
}

#else  // !LOWBIT_HAS_CUDA

void DeviceWeights::release() { s_ = State{}; }

Status DeviceWeights::upload(const KernelWeights& w, DeviceWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "DeviceWeights::upload: out is null");
  out->release();
  LOWBIT_RETURN_IF_ERROR(validate(w));
  return make_status(StatusCode::kNotSupported, "DeviceWeights::upload: lowbit was built without CUDA");
}

#endif

}  // namespace lowbit::int4
