// Warpgroup MMA (wgmma, sm_90a) helpers shared by the INT4 kernels that multiply weights
// dequantized in registers (A) by activations in shared memory (B): the pipelined GEMM's
// 64- and 128-row tiles (pipelined_tile.cuh) and the decode tile's 16-row wgmma variant
// (decode_tile.cuh, DecodeCfg::WG). Code built for another architecture keeps the calls but
// never runs them (the hosts check the device first); wg_mma_n16 traps there.
#pragma once

#include <cstdint>

#include "kernels/int4/common.cuh"

namespace lowbit::int4::kern {

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOWBIT_WGMMA_CODE 1
#else
#define LOWBIT_WGMMA_CODE 0
#endif

// Orders this warp's register writes before the wgmmas that read them (the A fragments).
__device__ __forceinline__ void wg_fence() {
#if LOWBIT_WGMMA_CODE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if LOWBIT_WGMMA_CODE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups of this warp are still running.
template <int N>
__device__ __forceinline__ void wg_wait() {
#if LOWBIT_WGMMA_CODE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Shared-memory writes of this thread (st.shared, cp.async) before later reads by the async
// proxy (wgmma's B operand); a barrier then publishes them to the other warps' wgmmas.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Shared-memory matrix descriptor: start address, leading byte offset (between core matrices
// adjacent in K), stride byte offset (between core matrices adjacent in M / N), all >> 4, and
// the layout type in bits 62-63 (0: no swizzle, 1: 128 B swizzle).
__device__ __forceinline__ uint64_t wg_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo, uint32_t layout) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (static_cast<uint64_t>(layout) << 62);
}

// The accumulators of a wgmma stay where the compiler sees them written until the wait that
// retires it: reads placed after wg_keep() cannot move above the wait before it.
template <int N>
__device__ __forceinline__ void wg_keep(float (&d)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(d[i][q])::"memory");
}

// d (+)= A x B, m64n16k16: A (64 x 16) from registers, warp w of the warpgroup holding rows
// 16w .. 16w + 15 in the mma.m16n8k16 A-fragment layout; B (16 K x 16 rows of x, K-major)
// through a descriptor; d[nt] the n8 tile nt in the mma C-fragment layout. accumulate = 0
// writes a * b (the accumulators' old values are not read).
template <typename T>
__device__ __forceinline__ void wg_mma_n16(float (&d)[2][4], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#if LOWBIT_WGMMA_CODE
#define LOWBIT_WG_N16(TY)                                                                                          \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %13, 0;\n"                                                      \
               " wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY                                             \
               " {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"                                \
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),         \
                 "+f"(d[1][2]), "+f"(d[1][3])                                                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
  if constexpr (Act<T>::kBf16)
    LOWBIT_WG_N16("bf16");
  else
    LOWBIT_WG_N16("f16");
#undef LOWBIT_WG_N16
#else
  __trap();  // not sm_90a code: the host never launches the wgmma tiles then
#endif
}

}  // namespace lowbit::int4::kern
