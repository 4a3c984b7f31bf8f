// The dense GEMM on the shared decode tile (skinny_tile.cuh), callable directly: the GPU
// tests run it next to gemm()'s default skinny kernel; gemm() takes it when the environment
// has LOWBIT_INT4_SKINNY_TILE=1. Same contract as gemm() on the N-packed layout for
// 1 <= m <= 512 (x, y 16 B aligned, arguments validated by the caller); no workspace.
#pragma once

#include <cuda_runtime.h>

#include "lowbit/int4/kernels.h"

namespace lowbit::int4::detail {

cudaError_t launch_gemm_skinny_tile(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                    cudaStream_t stream);

}  // namespace lowbit::int4::detail
