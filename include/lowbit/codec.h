// Public API of the Flash All-Reduce codec (layout: lowbit/detail/codec_math.h).
// CPU reference entry points; the CUDA kernels are in lowbit/codec_cuda.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lowbit/detail/codec_math.h"
#include "lowbit/status.h"

namespace lowbit::codec {

// Checks a spec and an element count; n == 0 is allowed (nothing to do).
Status validate(CodecSpec spec, size_t n);

// in: n 16-bit values of dtype t. out: codec_encoded_bytes(spec, n) bytes.
Status encode_ref(CodecSpec spec, DType t, const uint16_t* in, size_t n, uint8_t* out);
// out: n 16-bit values of dtype t.
Status decode_ref(CodecSpec spec, DType t, const uint8_t* enc, size_t n, uint16_t* out);
// acc[i] += decoded value i (fp32).
Status decode_accumulate_ref(CodecSpec spec, DType t, const uint8_t* enc, size_t n, float* acc);

}  // namespace lowbit::codec
