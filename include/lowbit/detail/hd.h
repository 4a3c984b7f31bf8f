// Host/device portability macros. Headers under lowbit/detail/ compile with a plain C++
// compiler and with nvcc, so the CPU reference and the CUDA kernels share one definition
// of every layout and every rounding step.
#pragma once

#if defined(__CUDACC__)
#define LOWBIT_HD __host__ __device__ __forceinline__
#define LOWBIT_DEVICE __device__ __forceinline__
#else
#define LOWBIT_HD inline
#define LOWBIT_DEVICE inline
#endif

#if defined(__CUDA_ARCH__)
#define LOWBIT_ON_DEVICE 1
#else
#define LOWBIT_ON_DEVICE 0
#endif
