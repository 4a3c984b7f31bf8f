// CUDA kernels of the Flash All-Reduce codec: same bytes as the CPU reference in
// lowbit/codec.h (layout and arithmetic: lowbit/detail/codec_math.h), verified bit-for-bit by
// tests/gpu/codec/. All pointers are device pointers and must be 16-byte aligned (the
// kernels use 16-byte vector accesses); n may be any count (0 is a no-op). Calls are
// asynchronous on `stream` and validate every argument before launching. Include only from
// .cu files or under LOWBIT_HAS_CUDA.
#pragma once

#include <cuda_runtime.h>

#include "lowbit/codec.h"

namespace lowbit::codec {

// in: n values of dtype t. out: codec_encoded_bytes(spec, n) bytes (data, then metadata).
Status encode_cuda(CodecSpec spec, DType t, const uint16_t* in, size_t n, uint8_t* out, cudaStream_t stream);
// enc: codec_encoded_bytes(spec, n) bytes. out: n values of dtype t.
Status decode_cuda(CodecSpec spec, DType t, const uint8_t* enc, size_t n, uint16_t* out, cudaStream_t stream);
// acc[i] += decoded value i in fp32 (bit-identical to decode_accumulate_ref; NaN results
// are NaN on both, with possibly different payloads).
Status decode_accumulate_cuda(CodecSpec spec, DType t, const uint8_t* enc, size_t n, float* acc,
                              cudaStream_t stream);

}  // namespace lowbit::codec
