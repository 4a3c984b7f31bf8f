// decode_cuda and decode_accumulate_cuda: one thread per 8-element chunk (a 4-byte INT4 or
// 8-byte INT8 code load, coalesced across the warp, plus the group's 4-byte metadata, an L1
// hit for the group's other lanes); output as one 16-byte store of 8 values (decode) or two
// 16-byte read-modify-writes of fp32 (accumulate). kUnroll chunks per thread are loaded
// before any math to keep bytes in flight.
#include "kernels/codec/codec_launch.cuh"

namespace lowbit::codec {
namespace {

constexpr int kUnroll = 4;

template <DType T, int kBits, int kG, bool kAccumulate>
__global__ void __launch_bounds__(detail::kThreads) decode_kernel(const uint8_t* __restrict__ data,
                                                                  const uint32_t* __restrict__ meta, size_t n,
                                                                  size_t num_chunks, void* __restrict__ out) {
  constexpr int kLanes = kG / 8;
  const size_t tile = static_cast<size_t>(blockDim.x) * kUnroll;
  for (size_t base = blockIdx.x * tile; base < num_chunks; base += static_cast<size_t>(gridDim.x) * tile) {
    uint2 code[kUnroll];
    uint32_t mw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      size_t c = base + static_cast<size_t>(u) * blockDim.x + threadIdx.x;
      code[u] = make_uint2(0, 0);
      mw[u] = 0;
      if (c < num_chunks) {
        if constexpr (kBits == 4) {
          code[u].x = __ldg(reinterpret_cast<const uint32_t*>(data) + c);
        } else {
          code[u] = __ldg(reinterpret_cast<const uint2*>(data) + c);
        }
        mw[u] = __ldg(meta + c / kLanes);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      size_t c = base + static_cast<size_t>(u) * blockDim.x + threadIdx.x;
      if (c >= num_chunks) continue;
      GroupMeta m = dev::load_meta<T>(mw[u]);
      float qf[8], v[8];
      if constexpr (kBits == 4) {
        dev::int4_unpack8(code[u].x, qf);
      } else {
        dev::int8_unpack8(code[u], qf);
      }
      dev::dequantize8<T>(m, qf, v);
      const size_t e0 = c * 8;
      const int valid = e0 + 8 <= n ? 8 : static_cast<int>(n - e0);
      if constexpr (kAccumulate) {
        float* acc = static_cast<float*>(out) + e0;
        if (valid == 8) {
          float4* a4 = reinterpret_cast<float4*>(acc);
          float4 a = a4[0], b = a4[1];
          a.x = __fadd_rn(a.x, v[0]);
          a.y = __fadd_rn(a.y, v[1]);
          a.z = __fadd_rn(a.z, v[2]);
          a.w = __fadd_rn(a.w, v[3]);
          b.x = __fadd_rn(b.x, v[4]);
          b.y = __fadd_rn(b.y, v[5]);
          b.z = __fadd_rn(b.z, v[6]);
          b.w = __fadd_rn(b.w, v[7]);
          a4[0] = a;
          a4[1] = b;
        } else {
          for (int i = 0; i < valid; ++i) acc[i] = __fadd_rn(acc[i], v[i]);
        }
      } else {
        uint4 o = dev::pack_out8<T>(v);
        uint16_t* dst = static_cast<uint16_t*>(out) + e0;
        if (valid == 8) {
          *reinterpret_cast<uint4*>(dst) = o;
        } else {
          uint32_t w[4] = {o.x, o.y, o.z, o.w};
          for (int i = 0; i < valid; ++i) dst[i] = static_cast<uint16_t>(w[i / 2] >> (16 * (i % 2)));
        }
      }
    }
  }
}

template <bool kAccumulate>
Status launch_decode(const char* op, CodecSpec spec, DType t, const uint8_t* enc, size_t n, void* out,
                     cudaStream_t stream) {
  LOWBIT_RETURN_IF_ERROR(detail::check_cuda_args(op, spec, n, enc, "enc", out, kAccumulate ? "acc" : "out"));
  if (n == 0) return Status::Ok();
  const size_t num_chunks = (n + 7) / 8;  // only chunks holding outputs
  unsigned grid = 0;
  LOWBIT_RETURN_IF_ERROR(detail::grid_for(static_cast<size_t>(detail::kThreads) * kUnroll, num_chunks, &grid));
  const uint32_t* meta = reinterpret_cast<const uint32_t*>(enc + codec_data_bytes(spec, n));
#define LOWBIT_LAUNCH_DECODE(T, B, G) \
  decode_kernel<T, B, G, kAccumulate><<<grid, detail::kThreads, 0, stream>>>(enc, meta, n, num_chunks, out)
  LOWBIT_CODEC_DISPATCH(t, spec, LOWBIT_LAUNCH_DECODE);
#undef LOWBIT_LAUNCH_DECODE
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace

Status decode_cuda(CodecSpec spec, DType t, const uint8_t* enc, size_t n, uint16_t* out, cudaStream_t stream) {
  return launch_decode<false>("decode_cuda", spec, t, enc, n, out, stream);
}

}  // namespace lowbit::codec

namespace lowbit::codec {
// Entry used by decode_accumulate.cu (one kernel template serves both ops).
Status decode_accumulate_dispatch(CodecSpec spec, DType t, const uint8_t* enc, size_t n, float* acc,
                                  cudaStream_t stream) {
  return launch_decode<true>("decode_accumulate_cuda", spec, t, enc, n, acc, stream);
}
}  // namespace lowbit::codec
