// Slab plan of the dequant + cuBLAS path (gemm_dequant.cu): the chunk budget and whether chunk
// i+1 is dequantized on a side stream while chunk i's GEMM runs. Host-only and free of CUDA so
// that the CPU tests check the measured choices (tests/cpu/int4/test_pipelined_plan.cpp).
#pragma once

#include <cstddef>

namespace lowbit::int4::kern {

constexpr size_t kSlabDefaultBytes = size_t{64} << 20;  // detail::kSlabMaxBytes: sizes the workspace
constexpr size_t kSlabMidBytes = size_t{32} << 20;

struct SlabPlan {
  size_t budget;  // bytes of one chunk's 16-bit slab, at most
  bool overlap;   // dequantize the next chunk on the side stream (needs two slabs of workspace)
};

// env_budget: LOWBIT_INT4_SLAB_MIB (or a test override) in bytes, 0 when unset; overlap_mode:
// LOWBIT_INT4_OVERLAP (or a test override), -1 unset, 0 off, 1 on. Either knob set: the knobs as
// given (64 MiB, sequential, where unset). Unset: the default, except at M = 2048..4095 on K <=
// 8192, where 32 MiB chunks, overlapped, were faster. Measured (session 29, rounds TG / TH, 1x
// H200, bf16 G = 128, --path cublas, each variant in one call, two passes, us at M = 2048, 32 MiB
// overlapped vs the default): 70b.qkv 463.5 / 463.0 vs 534.6 / 546.3, 8b.gate_up 663.9 / 667.8 vs
// 726.1 / 725.2, 70b.gate_up 2578.3 / 2581.5 vs 2628.7 / 2632.1, 70b.o 371.4 / 373.1 vs 376.0 /
// 376.4, 8b.o and 8b.qkv within +1.3%. Not below 2048 (M = 512: 70b.gate_up / 70b.o / 8b.qkv
// 1.12-1.14x; M = 1024: 1.02x on three of six shapes), not on K >= 14336 (8b.down / 70b.down
// 1.04-1.14x: chunks of 128-512 columns), and not from 4096 (+-5% between passes of one binary).
// Our reading: the gain is the chunk widths' wave fit in cuBLAS (70b.qkv: five chunks of 2048
// columns instead of three of 3456 / 3456 / 3328), not L2 residency (16 / 8 MiB lost 1.1-2x).
inline SlabPlan dequant_slab_plan(int m, int k, size_t env_budget, int overlap_mode) {
  if (env_budget > 0 || overlap_mode >= 0)
    return {env_budget > 0 ? env_budget : kSlabDefaultBytes, overlap_mode == 1};
  if (m >= 2048 && m < 4096 && k <= 8192) return {kSlabMidBytes, true};
  return {kSlabDefaultBytes, false};
}

}  // namespace lowbit::int4::kern
