// Checked CUDA / NCCL calls for library code: a failure becomes a Status naming the
// device, file:line and the failing statement. Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include "lowbit/status.h"

#define LOWBIT_CUDA_RETURN(expr)                                                          \
  do {                                                                                    \
    cudaError_t _e = (expr);                                                              \
    if (_e != cudaSuccess) {                                                              \
      int _dev = -1;                                                                      \
      (void)cudaGetDevice(&_dev);                                                         \
      return ::lowbit::make_status(::lowbit::StatusCode::kCudaError, "%s:%d device %d: %s failed: %s", \
                                   __FILE__, __LINE__, _dev, #expr, cudaGetErrorString(_e)); \
    }                                                                                     \
  } while (0)

// After a kernel launch: catches launch-configuration errors without synchronizing.
#define LOWBIT_CUDA_RETURN_LAUNCH() LOWBIT_CUDA_RETURN(cudaGetLastError())

#define LOWBIT_NCCL_RETURN(expr)                                                          \
  do {                                                                                    \
    ncclResult_t _r = (expr);                                                             \
    if (_r != ncclSuccess) {                                                              \
      return ::lowbit::make_status(::lowbit::StatusCode::kNcclError, "%s:%d: %s failed: %s (%s)", \
                                   __FILE__, __LINE__, #expr, ncclGetErrorString(_r),     \
                                   ncclGetLastError(nullptr));                            \
    }                                                                                     \
  } while (0)
