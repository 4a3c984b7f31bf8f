// decode_accumulate_cuda: the decode kernel (kernels/codec/decode.cu) in its fp32
// read-modify-write form; this file only holds the entry point.
#include "lowbit/codec_cuda.h"

namespace lowbit::codec {
Status decode_accumulate_dispatch(CodecSpec spec, DType t, const uint8_t* enc, size_t n, float* acc,
                                  cudaStream_t stream);

Status decode_accumulate_cuda(CodecSpec spec, DType t, const uint8_t* enc, size_t n, float* acc,
                              cudaStream_t stream) {
  return decode_accumulate_dispatch(spec, t, enc, n, acc, stream);
}
}  // namespace lowbit::codec
