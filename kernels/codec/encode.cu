// encode_cuda. Work unit: a warp tile of kUnroll*32 consecutive 8-element chunks (16-byte
// loads; each load instruction of the warp reads 512 contiguous bytes), i.e. whole groups
// for every G; the tile's math is dev::encode_warp_tile (lowbit/detail/codec_warp_encode.cuh,
// shared with the all-reduce kernels). The last tile of the tensor (possibly partial) takes
// the generic per-chunk path.
#include "kernels/codec/codec_launch.cuh"
#include "lowbit/detail/codec_warp_encode.cuh"

namespace lowbit::codec {
namespace {

constexpr int kUnroll = dev::kWarpTileUnroll;
constexpr int kTileChunks = dev::kWarpTileChunks;

// Generic path for a tile that is not entirely inside [0, n): chunks c = tile0 + u*32 + lane.
template <DType T, int kBits, int kG>
__device__ __noinline__ void encode_tile_generic(const uint16_t* __restrict__ in, size_t n, size_t num_chunks,
                                                 size_t tile0, uint8_t* __restrict__ data,
                                                 uint32_t* __restrict__ meta) {
  constexpr int kLanes = kG / 8;
  const CodecSpec spec{kBits, kG};
  const int lane = threadIdx.x & 31;
#pragma unroll 1
  for (int u = 0; u < kUnroll; ++u) {
    const size_t c = tile0 + static_cast<size_t>(u) * 32 + lane;
    int valid = 0;
    uint4 x = detail::load_chunk(in, n, c, &valid);
    uint32_t mm = dev::minmax8(x, valid);
    mm = dev::group_reduce_minmax<kLanes>(mm);
    if (c >= num_chunks) continue;
    GroupMeta m = dev::group_meta<T>(spec, mm);
    dev::QuantCtx qc = dev::make_quant_ctx(spec, m);
    float r[8];
    dev::quantize8<T>(qc, spec, x, r, valid);
    if constexpr (kBits == 4) {
      reinterpret_cast<uint32_t*>(data)[c] = dev::int4_pack8(r);
    } else {
      reinterpret_cast<uint2*>(data)[c] = dev::int8_pack8(r);
    }
    if (lane % kLanes == 0) meta[c / kLanes] = dev::meta_word(m);
  }
}

template <DType T, int kBits, int kG>
__global__ void __launch_bounds__(detail::kThreads) encode_kernel(const uint16_t* __restrict__ in, size_t n,
                                                                  size_t num_chunks, uint8_t* __restrict__ data,
                                                                  uint32_t* __restrict__ meta) {
  constexpr int kLanes = kG / 8;  // lanes per group
  const int lane = threadIdx.x & 31;
  const size_t warps_total = static_cast<size_t>(gridDim.x) * (blockDim.x / 32);
  const size_t num_tiles = (num_chunks + kTileChunks - 1) / kTileChunks;
  // The loop bound is warp-uniform, so every lane reaches the shuffles.
  for (size_t tile = static_cast<size_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; tile < num_tiles;
       tile += warps_total) {
    const size_t tile0 = tile * kTileChunks;
    if ((tile0 + kTileChunks) * 8 > n) {  // last tile: partial chunks or groups
      encode_tile_generic<T, kBits, kG>(in, n, num_chunks, tile0, data, meta);
      continue;
    }
    const uint4* src4 = reinterpret_cast<const uint4*>(in) + tile0 + lane;
    uint4 x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = __ldg(src4 + u * 32);
    dev::encode_warp_tile<T, kBits, kG>(x, data + tile0 * kBits, meta + tile0 / kLanes);
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
