// Launch plumbing shared by the codec kernels (kernels/codec/*.cu): argument validation,
// grid sizing and the (dtype, bits, group size) dispatch. Every kernel walks "chunks" of 8
// consecutive elements (one uint4 of 16-bit values; the chunk's codes are the contiguous
// bytes [c*bits, (c+1)*bits) of the data section), so a warp covers 256 elements = whole
// groups for every G.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lowbit/codec_cuda.h"
#include "lowbit/detail/codec_device.cuh"
#include "lowbit/detail/cuda_check.h"

namespace lowbit::codec::detail {

constexpr int kThreads = 256;

inline Status check_cuda_args(const char* op, CodecSpec spec, size_t n, const void* in, const char* in_name,
                              const void* out, const char* out_name) {
  LOWBIT_RETURN_IF_ERROR(validate(spec, n));
  if (n == 0) return Status::Ok();
  if (in == nullptr || out == nullptr) {
    return make_status(StatusCode::kInvalidArgument, "%s: null pointer (%s=%p, %s=%p) with n=%zu", op, in_name, in,
                       out_name, out, n);
  }
  if (reinterpret_cast<uintptr_t>(in) % 16 != 0) {
    return make_status(StatusCode::kMisaligned, "%s: %s=%p is not 16-byte aligned (the kernels use 16-byte accesses)",
                       op, in_name, in);
  }
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return make_status(StatusCode::kMisaligned, "%s: %s=%p is not 16-byte aligned (the kernels use 16-byte accesses)",
                       op, out_name, out);
  }
  return Status::Ok();
}

// Enough blocks to fill every SM several times over; kernels loop grid-stride beyond that.
inline Status grid_for(size_t work_items_per_block, size_t total_items, unsigned* grid) {
  int dev = 0, sms = 0;
  LOWBIT_CUDA_RETURN(cudaGetDevice(&dev));
  LOWBIT_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  size_t need = (total_items + work_items_per_block - 1) / work_items_per_block;
  size_t cap = static_cast<size_t>(sms) * 8;
  *grid = static_cast<unsigned>(need < cap ? need : cap);
  if (*grid == 0) *grid = 1;
  return Status::Ok();
}

// Loads chunk c (elements 8c..8c+7) of a 16-bit array of n elements; elements >= n read as 0.
LOWBIT_DEVICE uint4 load_chunk(const uint16_t* in, size_t n, size_t c, int* valid) {
  size_t e0 = c * 8;
  if (e0 + 8 <= n) {
    *valid = 8;
    return __ldg(reinterpret_cast<const uint4*>(in) + c);
  }
  int v = e0 < n ? static_cast<int>(n - e0) : 0;
  *valid = v;
  uint32_t w[4] = {0, 0, 0, 0};
  for (int i = 0; i < v; ++i) w[i / 2] |= static_cast<uint32_t>(in[e0 + i]) << (16 * (i % 2));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace lowbit::codec::detail

// Calls LAUNCH(T, BITS, G) with compile-time constants for the runtime (t, spec).
#define LOWBIT_CODEC_DISPATCH(t, spec, LAUNCH)                                              \
  do {                                                                                      \
    if ((t) == ::lowbit::DType::kBF16) {                                                    \
      LOWBIT_CODEC_DISPATCH_BITS(::lowbit::DType::kBF16, spec, LAUNCH);                     \
    } else {                                                                                \
      LOWBIT_CODEC_DISPATCH_BITS(::lowbit::DType::kF16, spec, LAUNCH);                      \
    }                                                                                       \
  } while (0)
#define LOWBIT_CODEC_DISPATCH_BITS(T, spec, LAUNCH)                                         \
  do {                                                                                      \
    if ((spec).bits == 4) {                                                                 \
      LOWBIT_CODEC_DISPATCH_G(T, 4, spec, LAUNCH);                                          \
    } else {                                                                                \
      LOWBIT_CODEC_DISPATCH_G(T, 8, spec, LAUNCH);                                          \
    }                                                                                       \
  } while (0)
#define LOWBIT_CODEC_DISPATCH_G(T, B, spec, LAUNCH)                                         \
  do {                                                                                      \
    if ((spec).group_size == 32) {                                                          \
      LAUNCH(T, B, 32);                                                                     \
    } else if ((spec).group_size == 64) {                                                   \
      LAUNCH(T, B, 64);                                                                     \
    } else {                                                                                \
      LAUNCH(T, B, 128);                                                                    \
    }                                                                                       \
  } while (0)
