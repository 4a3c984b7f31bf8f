// encode_cuda: one thread per 8-element chunk (16-byte load), a group spread over G/8
// lanes that reduce min/max with shuffles, codes stored as one 4-byte (INT4) or 8-byte
// (INT8) word per thread (a warp writes 128/256 contiguous bytes), metadata by the group's
// first lane. kUnroll chunks per thread are loaded before any math to keep bytes in flight.
#include "kernels/codec/codec_launch.cuh"

namespace lowbit::codec {
namespace {

constexpr int kUnroll = 4;

template <DType T, int kBits, int kG>
__global__ void __launch_bounds__(detail::kThreads) encode_kernel(const uint16_t* __restrict__ in, size_t n,
                                                                  size_t num_chunks, uint8_t* __restrict__ data,
                                                                  uint32_t* __restrict__ meta) {
  constexpr int kLanes = kG / 8;
  const CodecSpec spec{kBits, kG};
  const size_t tile = static_cast<size_t>(blockDim.x) * kUnroll;
  const int lane = threadIdx.x & 31;
  // The loop bound is block-uniform, so every lane reaches the shuffles.
  for (size_t base = blockIdx.x * tile; base < num_chunks; base += static_cast<size_t>(gridDim.x) * tile) {
    uint4 x[kUnroll];
    int valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      size_t c = base + static_cast<size_t>(u) * blockDim.x + threadIdx.x;
      x[u] = detail::load_chunk(in, n, c, &valid[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      size_t c = base + static_cast<size_t>(u) * blockDim.x + threadIdx.x;
      uint32_t mm = valid[u] == 8 ? dev::minmax8(x[u]) : dev::minmax8(x[u], valid[u]);
      mm = dev::group_reduce_minmax<kLanes>(mm);
      if (c >= num_chunks) continue;  // past the last group (its padding is written below)
      GroupMeta m = dev::group_meta<T>(spec, mm);
      dev::QuantCtx qc = dev::make_quant_ctx(spec, m);
      float r[8];
      dev::quantize8<T>(qc, spec, x[u], r, valid[u]);
      if constexpr (kBits == 4) {
        reinterpret_cast<uint32_t*>(data)[c] = dev::int4_pack8(r);
      } else {
        reinterpret_cast<uint2*>(data)[c] = dev::int8_pack8(r);
      }
      if (lane % kLanes == 0) meta[c / kLanes] = dev::meta_word(m);
    }
  }
}

}  // namespace

Status encode_cuda(CodecSpec spec, DType t, const uint16_t* in, size_t n, uint8_t* out, cudaStream_t stream) {
  LOWBIT_RETURN_IF_ERROR(detail::check_cuda_args("encode_cuda", spec, n, in, "in", out, "out"));
  if (n == 0) return Status::Ok();
  // Chunks cover whole groups: the padding of a partial last group is encoded as q = 0.
  const size_t num_chunks = codec_num_groups(spec, n) * static_cast<size_t>(spec.group_size) / 8;
  unsigned grid = 0;
  LOWBIT_RETURN_IF_ERROR(detail::grid_for(static_cast<size_t>(detail::kThreads) * kUnroll, num_chunks, &grid));
  uint32_t* meta = reinterpret_cast<uint32_t*>(out + codec_data_bytes(spec, n));
#define LOWBIT_LAUNCH_ENCODE(T, B, G) \
  encode_kernel<T, B, G><<<grid, detail::kThreads, 0, stream>>>(in, n, num_chunks, out, meta)
  LOWBIT_CODEC_DISPATCH(t, spec, LOWBIT_LAUNCH_ENCODE);
#undef LOWBIT_LAUNCH_ENCODE
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::codec
