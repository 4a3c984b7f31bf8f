// Stands in for PyTorch's torch::stable::Tensor when vLLM's Machete sources are built without
// PyTorch for `lowbit bench gemm` (bench/baselines/vllm_machete.h).
//
// A Tensor here is a non-owning view (pointer, sizes, strides, scalar type): what Machete's
// host code reads from a tensor to build CUTLASS arguments. Where vLLM's launcher allocates
// (the output D, the stream-K workspace, the prepacked weight), `empty` hands out one of the
// buffers the caller registered in a `lowbit_machete_shim::Arena` for this thread, so a call
// allocates nothing and can be captured in a CUDA graph; a request larger than the registered
// buffer throws instead of writing past it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "torch/headeronly/core/ScalarType.h"
#include "torch/headeronly/util/Exception.h"

namespace torch::stable {

class Device {
 public:
  explicit Device(int index = 0) : index_(index) {}
  int index() const { return index_; }

 private:
  int index_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, std::vector<int64_t> sizes, std::vector<int64_t> strides,
         torch::headeronly::ScalarType type, int device = 0)
      : data_(data), sizes_(std::move(sizes)), strides_(std::move(strides)), type_(type), device_(device) {
    STD_TORCH_CHECK(sizes_.size() == strides_.size(), "sizes and strides differ in rank");
  }
  // A contiguous (row-major) tensor.
  static Tensor contiguous(void* data, std::vector<int64_t> sizes, torch::headeronly::ScalarType type,
                           int device = 0) {
    std::vector<int64_t> strides(sizes.size(), 1);
    for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
    return Tensor(data, std::move(sizes), std::move(strides), type, device);
  }

  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t size(int64_t i) const { return sizes_.at(static_cast<size_t>(i < 0 ? i + dim() : i)); }
  int64_t stride(int64_t i) const { return strides_.at(static_cast<size_t>(i < 0 ? i + dim() : i)); }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes_) n *= s;
    return n;
  }
  torch::headeronly::ScalarType scalar_type() const { return type_; }
  int64_t element_size() const { return torch::headeronly::elementSize(type_); }
  void* data_ptr() const { return data_; }
  const void* const_data_ptr() const { return data_; }
  void* mutable_data_ptr() const { return data_; }
  Device device() const { return Device(device_); }
  int get_device_index() const { return device_; }

 private:
  void* data_ = nullptr;
  std::vector<int64_t> sizes_, strides_;
  torch::headeronly::ScalarType type_ = torch::headeronly::ScalarType::Byte;
  int device_ = 0;
};

inline Tensor transpose(const Tensor& t, int64_t a, int64_t b) {
  std::vector<int64_t> sizes = t.sizes(), strides = t.strides();
  std::swap(sizes.at(static_cast<size_t>(a)), sizes.at(static_cast<size_t>(b)));
  std::swap(strides.at(static_cast<size_t>(a)), strides.at(static_cast<size_t>(b)));
  return Tensor(t.data_ptr(), std::move(sizes), std::move(strides), t.scalar_type(), t.get_device_index());
}

namespace accelerator {
// Machete's launcher switches to the tensor's device; the bench calls on the current device,
// so the guard only checks that they agree.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    int current = -1;
    STD_TORCH_CHECK(cudaGetDevice(&current) == cudaSuccess && current == index,
                    "the tensor's device ", index, " is not the current device ", current);
  }
};
}  // namespace accelerator

}  // namespace torch::stable

namespace lowbit_machete_shim {

// The buffers and stream of the Machete call in flight on this thread.
struct Arena {
  void* out = nullptr;        // D of a GEMM, or the prepacked weight of prepack_B
  size_t out_bytes = 0;
  void* workspace = nullptr;  // the stream-K scheduler's workspace
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

inline thread_local Arena* current_arena = nullptr;

// Registers `a` for the calls made while it lives.
class ArenaScope {
 public:
  explicit ArenaScope(Arena& a) : prev_(current_arena) { current_arena = &a; }
  ~ArenaScope() { current_arena = prev_; }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena* prev_;
};

inline Arena& arena() {
  STD_TORCH_CHECK(current_arena != nullptr, "no lowbit_machete_shim::Arena registered on this thread");
  return *current_arena;
}

}  // namespace lowbit_machete_shim

namespace torch::stable {

// Byte tensors of one dimension are the launcher's workspace; any other is its output.
inline Tensor empty(std::vector<int64_t> sizes, torch::headeronly::ScalarType type,
                    std::optional<int> /*layout*/, Device device, std::optional<bool> /*pin_memory*/ = std::nullopt,
                    std::optional<torch::headeronly::MemoryFormat> /*format*/ = std::nullopt) {
  auto& a = lowbit_machete_shim::arena();
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(torch::headeronly::elementSize(type));
  const bool workspace = type == torch::headeronly::ScalarType::Byte && sizes.size() == 1;
  void* p = workspace ? a.workspace : a.out;
  const size_t have = workspace ? a.workspace_bytes : a.out_bytes;
  STD_TORCH_CHECK(bytes <= have, "Machete asked for ", bytes, " bytes of ", workspace ? "workspace" : "output",
                  ", the caller registered ", have);
  return Tensor::contiguous(p, std::move(sizes), type, device.index());
}

inline Tensor empty(int64_t n, torch::headeronly::ScalarType type, std::optional<int> layout, Device device) {
  return empty(std::vector<int64_t>{n}, type, layout, device);
}

}  // namespace torch::stable
