// Fast warp-tile encode shared by the codec's encode kernel (kernels/codec/encode.cu) and the
// Flash All-Reduce kernels (kernels/allreduce/): bit-identical to codec_math.h's encode.
// Work unit: a warp tile of kWarpTileChunks = 4 * 32 consecutive full 8-element chunks
// (every element valid), whole groups for every G. Lane l holds chunks u * 32 + l (u < 4):
//   1. packed min/max keys per chunk, reduced over the G/8 lanes of each group (shuffles),
//   2. metadata ONCE per group: lane j computes group j of the tile (double-precision scale
//      of codec_math, once per group instead of once per lane-chunk) and writes its meta
//      word; two shuffles per chunk bring the meta word and the reciprocal back,
//   3. quantization with FFMA and a magic number (FastQuant: two FFMAs per element, q read
//      from the mantissa bits, exactness argued in codec_device.cuh); elements within 2 ulp
//      of a rounding boundary are redone with codec_math's quantize_value, one flagged
//      element at a time (repair_flagged), not the whole chunk.
// Partial tiles (a tensor's tail, a short all-reduce span) take the per-chunk path of
// codec_device.cuh instead.
#pragma once
#if !defined(__CUDACC__)
#error "codec_warp_encode.cuh is CUDA-only; include it from .cu files"
#endif

#include "lowbit/detail/codec_device.cuh"

namespace lowbit::codec::dev {

constexpr int kWarpTileUnroll = 4;
constexpr int kWarpTileChunks = 32 * kWarpTileUnroll;

// Repair of a chunk whose fast-path words are already built: only the elements whose
// fraction field is < 5 (usually one per flagged lane) are recomputed with codec_math's
// quantize_value, one at a time, and their nibble / byte is replaced. The other elements
// keep the fast path's q, which equals quantize_value (argument in codec_device.cuh).
// Costs one division per flagged element instead of re-running the whole chunk; the lanes
// of the warp only diverge for as many iterations as the busiest lane has flagged elements.
template <DType T, int kBits, int kG>
LOWBIT_DEVICE uint2 repair_flagged(uint32_t mw, const uint4& x, uint32_t flags, uint2 words) {
  const CodecSpec spec{kBits, kG};
  const GroupMeta m = load_meta<T>(mw);
#pragma unroll 1
  while (flags != 0u) {
    const int e = __ffs(static_cast<int>(flags)) - 1;  // element index 0..7
    flags &= flags - 1u;
    const int pair = e >> 1;
    const uint32_t w = pair == 0 ? x.x : (pair == 1 ? x.y : (pair == 2 ? x.z : x.w));
    const float2 f = to_f32x2<T>(w);
    const uint32_t qe = quantize_value(spec, m, (e & 1) ? f.y : f.x);
    if constexpr (kBits == 4) {
      // element e sits in nibble slot kInt4Slot[e] = (e >> 1) + 4 * (e & 1)
      const int shift = 4 * pair + 16 * (e & 1);
      words.x = (words.x & ~(0xFu << shift)) | ((qe & 0xFu) << shift);
    } else {
      // element e is byte e: bytes 0..3 in .x, 4..7 in .y
      const int shift = 8 * (e & 3);
      if (e < 4) {
        words.x = (words.x & ~(0xFFu << shift)) | ((qe & 0xFFu) << shift);
      } else {
        words.y = (words.y & ~(0xFFu << shift)) | ((qe & 0xFFu) << shift);
      }
    }
  }
  return words;
}

// INT4 word / INT8 pair of words of 8 integer q's (layout of codec_math.h).
template <int kBits>
LOWBIT_DEVICE void pack_q(const uint32_t q[8], uint32_t* word4, uint2* word8) {
  if constexpr (kBits == 4) {
    *word4 = int4_pack8(q);
  } else {
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      lo |= (q[e] & 0xFFu) << (8 * e);
      hi |= (q[4 + e] & 0xFFu) << (8 * e);
    }
    *word8 = make_uint2(lo, hi);
  }
}

// Encodes one warp tile: x[u] = chunk u * 32 + lane of the tile (all 8 elements valid; the
// whole warp calls). Writes chunk c's code word (INT4: 4 bytes, INT8: 8 bytes) at byte
// c * kBits of `codes` and group j's meta word at meta[j] (j < 4 * 32 / (G / 8)). codes and
// meta may point to global or shared memory.
template <DType T, int kBits, int kG>
LOWBIT_DEVICE void encode_warp_tile(const uint4 (&x)[kWarpTileUnroll], uint8_t* codes, uint32_t* meta) {
  constexpr int kLanes = kG / 8;  // lanes per group
  constexpr int kGroupsPerLoad = 32 / kLanes;
  constexpr int kTileGroups = kWarpTileUnroll * kGroupsPerLoad;  // <= 32
  static_assert(kTileGroups <= 32, "one lane per group of the tile");
  using FQ = FastQuant<kBits>;
  const CodecSpec spec{kBits, kG};
  const int lane = threadIdx.x & 31;
  uint32_t mm[kWarpTileUnroll];
#pragma unroll
  for (int u = 0; u < kWarpTileUnroll; ++u) mm[u] = group_reduce_minmax<kLanes>(minmax8_full(x[u]));
  // Lane j handles group j of the tile: load u = j / kGroupsPerLoad, lanes from
  // (j % kGroupsPerLoad) * kLanes.
  uint32_t my = kMinMaxIdentity;
#pragma unroll
  for (int u = 0; u < kWarpTileUnroll; ++u) {
    uint32_t v = __shfl_sync(0xFFFFFFFFu, mm[u], (lane % kGroupsPerLoad) * kLanes);
    if (lane / kGroupsPerLoad == u) my = v;
  }
  uint32_t my_mw = 0;
  float my_inv = 0.0f;
  if (lane < kTileGroups) {
    GroupMeta m = group_meta<T>(spec, my);
    my_mw = meta_word(m);
    my_inv = fast_quant_inv(m);
    meta[lane] = my_mw;
  }
  // Code words of this lane: one 32-bit (INT4) or 64-bit (INT8) word per chunk, 32 apart.
  uint32_t* dst4 = reinterpret_cast<uint32_t*>(codes) + lane;
  uint2* dst8 = reinterpret_cast<uint2*>(codes) + lane;
#pragma unroll
  for (int u = 0; u < kWarpTileUnroll; ++u) {
    const int src = u * kGroupsPerLoad + lane / kLanes;
    const uint32_t mw = __shfl_sync(0xFFFFFFFFu, my_mw, src);
    const float inv = __shfl_sync(0xFFFFFFFFu, my_inv, src);
    uint32_t word4 = 0;
    uint2 word8 = make_uint2(0, 0);
    if (inv < 0.0f) {  // NaN/Inf group or extreme scale: the reference formula throughout
      uint32_t q[8];
      GroupMeta m = load_meta<T>(mw);
      uint32_t w[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 f = to_f32x2<T>(w[j]);
        q[2 * j] = quantize_value(spec, m, f.x);
        q[2 * j + 1] = quantize_value(spec, m, f.y);
      }
      pack_q<kBits>(q, &word4, &word8);
    } else {
      const float hmin = __fmul_rn(to_f32x2<T>(mw).y, 0.5f);  // min (high half), exact
      const float magic = inv == 0.0f ? FQ::kMagicConst : FQ::kMagic;
      uint32_t w[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
      uint32_t sb[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 f = to_f32x2<T>(w[j]);
        sb[2 * j] = __float_as_uint(__fmaf_rn(__fmaf_rn(f.x, 0.5f, -hmin), inv, magic));
        sb[2 * j + 1] = __float_as_uint(__fmaf_rn(__fmaf_rn(f.y, 0.5f, -hmin), inv, magic));
      }
      uint32_t chk;  // packed 16-bit minimum of the fraction fields
      if constexpr (kBits == 4) {
        chk = 0xFFFFFFFFu;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          chk = __vminu2(chk, __byte_perm(sb[2 * j], sb[2 * j + 1], 0x5410u));
          // high halves hold q in bits 0..3 (pairs 2j, 2j+1), as int4 words want them
          word4 |= (__byte_perm(sb[2 * j], sb[2 * j + 1], 0x7632u) & 0x000F000Fu) << (4 * j);
        }
      } else {
        chk = 0xFFFFFFFFu;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          chk = __vminu2(chk, __byte_perm(sb[2 * j], sb[2 * j + 1], 0x5410u) & 0x7FFF7FFFu);
        uint32_t y[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) y[e] = sb[e] << 1;  // q (bits 15..22) -> byte 2
        word8.x = __byte_perm(__byte_perm(y[0], y[1], 0x0062u), __byte_perm(y[2], y[3], 0x0062u), 0x5410u);
        word8.y = __byte_perm(__byte_perm(y[4], y[5], 0x0062u), __byte_perm(y[6], y[7], 0x0062u), 0x5410u);
      }
      if (min(chk & 0xFFFFu, chk >> 16) < 5u) {  // some element near a rounding boundary
        uint32_t flags = 0;
#pragma unroll
        for (int e = 0; e < 8; ++e) flags |= ((sb[e] & FQ::kFracMask) < 5u ? 1u : 0u) << e;
        if constexpr (kBits == 4) {  // INT4: the word travels in .x
          word4 = repair_flagged<T, kBits, kG>(mw, x[u], flags, make_uint2(word4, 0u)).x;
        } else {
          word8 = repair_flagged<T, kBits, kG>(mw, x[u], flags, word8);
        }
      }
    }
    if constexpr (kBits == 4) {
      dst4[u * 32] = word4;
    } else {
      dst8[u * 32] = word8;
    }
  }
}

}  // namespace lowbit::codec::dev
