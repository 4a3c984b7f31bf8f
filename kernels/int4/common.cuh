// Device helpers shared by the INT4 kernels: activation-dtype traits and the LOP3 /
// magic-number dequantization of one N-packed word (layout: kernel_layout.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "lowbit/int4/kernel_layout.h"

namespace lowbit::int4::kern {

template <typename T>
struct Act;

// fp16: 0x6400 is 1024.0; OR-ing a nibble into the mantissa gives 1024 + q exactly.
template <>
struct Act<__half> {
  using T2 = __half2;
  static constexpr bool kBf16 = false;
  static constexpr uint32_t kMagic = 0x64006400u;
  static constexpr uint16_t kMagicScalar = 0x6400u;  // 1024
  static constexpr float kMagicValue = 1024.f;
  static constexpr uint16_t kEight = 0x4800u;  // 8.0: the symmetric zero point
  __device__ static float to_float(__half v) { return __half2float(v); }
  __device__ static float bits_to_float(uint16_t b) { return __half2float(__ushort_as_half(b)); }
  __device__ static __half from_float(float v) { return __float2half_rn(v); }
  __device__ static float2 to_float2(__half2 v) { return __half22float2(v); }
};
// bf16: 0x4300 is 128.0 with 7 mantissa bits; 128 + q (q <= 15) is exact.
template <>
struct Act<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static constexpr bool kBf16 = true;
  static constexpr uint32_t kMagic = 0x43004300u;
  static constexpr uint16_t kMagicScalar = 0x4300u;  // 128
  static constexpr float kMagicValue = 128.f;
  static constexpr uint16_t kEight = 0x4100u;  // 8.0: the symmetric zero point
  __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static float bits_to_float(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
  __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
  __device__ static float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
};

template <typename T2>
__device__ __forceinline__ T2 bits_as(uint32_t u) {
  return *reinterpret_cast<T2*>(&u);
}
template <typename T2>
__device__ __forceinline__ uint32_t as_bits(T2 v) {
  return *reinterpret_cast<uint32_t*>(&v);
}

// (a & b) | c in one LOP3 (immLut 0xEA).
__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm volatile("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// magic + z for a pair of zero points (16-bit values, low and high half), exact (an integer
// below 2048 / 256); zero_pair = 0 when the weight is symmetric means z = 8.
template <typename T>
__device__ __forceinline__ typename Act<T>::T2 magic_plus_zero(uint32_t zero_pair) {
  using T2 = typename Act<T>::T2;
  return __hadd2(bits_as<T2>(Act<T>::kMagic), bits_as<T2>(zero_pair));
}
template <typename T>
__device__ __forceinline__ constexpr uint32_t sym_zero_pair() {
  return Act<T>::kEight | static_cast<uint32_t>(Act<T>::kEight) << 16;
}

// Pair p of a weight word (nibbles p and p + 4, i.e. bits 4p and 4p + 16) dequantized:
// round((q - z) * s) as the contract says: (magic + q) - (magic + z) is exact, the multiply
// rounds once (_rn: never contracted into an fma with a neighbouring add).
template <typename T>
__device__ __forceinline__ typename Act<T>::T2 dequant_pair(uint32_t word, int p, typename Act<T>::T2 magic_z,
                                                            typename Act<T>::T2 scale) {
  using T2 = typename Act<T>::T2;
  const uint32_t t = lop3_and_or(word >> (4 * p), 0x000F000Fu, Act<T>::kMagic);
  return __hmul2_rn(__hsub2(bits_as<T2>(t), magic_z), scale);
}

// Pair p of an MMA-tiled word: one column at rows (k, k + 1), so one scale and one zero
// point (16-bit values) for both halves.
template <typename T>
__device__ __forceinline__ typename Act<T>::T2 dequant_tiled_pair(uint32_t word, int p, uint32_t scale_bits,
                                                                  uint32_t zero_bits) {
  using T2 = typename Act<T>::T2;
  return dequant_pair<T>(word, p, magic_plus_zero<T>(zero_bits | zero_bits << 16),
                         bits_as<T2>(scale_bits | scale_bits << 16));
}

// Per-group constants of one column octet: zb[j] = magic + z for columns (2j, 2j+1), and
// s[j] the scales of those columns, both as packed 16-bit pairs.
template <typename T>
struct OctetParams {
  typename Act<T>::T2 zb[4];
  typename Act<T>::T2 s[4];
};

// Builds the octet's constants from its loaded scale vector and zero vector (zv == nullptr:
// symmetric, z = 8). Shared by the loaders from global memory (below) and from shared-memory
// stages (gemm_skinny.cu).
template <typename T>
__device__ __forceinline__ void octet_params_from(const uint4& sv, const uint4* zv, OctetParams<T>& p) {
  using T2 = typename Act<T>::T2;
  p.s[0] = bits_as<T2>(sv.x);
  p.s[1] = bits_as<T2>(sv.y);
  p.s[2] = bits_as<T2>(sv.z);
  p.s[3] = bits_as<T2>(sv.w);
  if (zv != nullptr) {
    p.zb[0] = magic_plus_zero<T>(zv->x);
    p.zb[1] = magic_plus_zero<T>(zv->y);
    p.zb[2] = magic_plus_zero<T>(zv->z);
    p.zb[3] = magic_plus_zero<T>(zv->w);
  } else {
    const T2 eight = magic_plus_zero<T>(sym_zero_pair<T>());
#pragma unroll
    for (int j = 0; j < 4; ++j) p.zb[j] = eight;
  }
}

// Loads the octet's scales (and zeros; symmetric: z = 8) for group g: two 16 B loads.
template <typename T>
__device__ __forceinline__ void load_octet_params(const uint16_t* __restrict__ scales,
                                                  const uint16_t* __restrict__ zeros, size_t idx,
                                                  OctetParams<T>& p) {
  const uint4 sv = __ldg(reinterpret_cast<const uint4*>(scales + idx));
  if (zeros != nullptr) {
    const uint4 zv = __ldg(reinterpret_cast<const uint4*>(zeros + idx));
    octet_params_from<T>(sv, &zv, p);
  } else {
    octet_params_from<T>(sv, nullptr, p);
  }
}

// Dequantizes one N-packed word: out[j] = columns (2j, 2j+1) in activation dtype, equal to
// round((q - z) * s): (magic+q) - (magic+z) is exact, the multiply rounds once.
template <typename T>
__device__ __forceinline__ void dequant_word(uint32_t word, const OctetParams<T>& p, typename Act<T>::T2 out[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = dequant_pair<T>(word, j, p.zb[j], p.s[j]);
}

// mma.sync m16n8k16, fp32 accumulate, A row-major (4 regs), B col-major (2 regs): the
// tensor-core step of the decode GEMMs (gemm_skinny.cu, gemm_decode.cu, skinny_tile.cuh).
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                            uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same MMAs with a zero accumulator in (d = a * b): the first K step of a window writes
// its sums without the accumulators being cleared first (ptxas reads C from the zero register).
template <typename T>
__device__ __forceinline__ void mma_m16n8k16_zc(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_m16n8k16_zc<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}
template <>
__device__ __forceinline__ void mma_m16n8k16_zc<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}

__host__ __device__ __forceinline__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Shared-memory address of a generic pointer into shared memory, and a 16 B shared load
// (the decode tile's and the pipelined GEMM's stages).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}

// Distributed shared memory: the address of the same shared-memory location in cluster rank
// `rank` (mapa), and a 16 B load through the cluster window (ld.shared::cluster).
__device__ __forceinline__ uint32_t mapa_shared(uint32_t a, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ uint4 ldsc128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}

// mbarriers and bulk asynchronous copies (the TMA unit) of the decode tile's weight stages
// and the warp-specialized pipelined tile. mbar_init: kCount arrivals complete a phase.
template <int kCount = 1>
__device__ __forceinline__ void mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "n"(kCount) : "memory");
}
// One arrival that also announces the bytes the phase's copies will complete.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// One plain arrival (release semantics at CTA scope).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// Waits until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(phase)
        : "memory");
  } while (!done);
}

}  // namespace lowbit::int4::kern
