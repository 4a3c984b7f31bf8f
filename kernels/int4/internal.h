// Launchers shared between the INT4 kernel files (one op per .cu file). Arguments are
// validated by the public entry points (gemm.cu, fused_moe.cu) before these are called.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "lowbit/int4/kernels.h"

namespace lowbit::int4::detail {

// Skinny (decode) GEMM tiling (gemm_skinny.cu): a block is 2 column warps x
// kSkinnyKSlices K-slice warps, 64 columns per warp (mma m16n8k16, y^T = W x^T), 128
// columns per block; K is split across the block's slices and across the grid (split-K),
// partial sums reduced in a fixed order.
constexpr int kSkinnyCols = 128;
constexpr int kSkinnyKSlices = 4;
constexpr int kSkinnySMs = 132;  // H200; fixed so the workspace size does not depend on the device
int skinny_rows_per_tile(int m);
int skinny_splits(int m, int n, int k);

cudaError_t launch_gemm_skinny(const void* x, void* y, int m, const KernelWeightsView& w, int expert, float* partials,
                               cudaStream_t stream);
cudaError_t launch_gemm_tc(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream);
cudaError_t launch_gemm_kpacked(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                cudaStream_t stream);

}  // namespace lowbit::int4::detail
