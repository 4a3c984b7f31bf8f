// Checked cuBLAS calls for the model ops: a failure becomes a Status naming file:line.
#pragma once

#include <cublas_v2.h>

#include "lowbit/status.h"

#define LOWBIT_CUBLAS_RETURN(expr)                                                                    \
  do {                                                                                                \
    cublasStatus_t _s = (expr);                                                                       \
    if (_s != CUBLAS_STATUS_SUCCESS)                                                                  \
      return ::lowbit::make_status(::lowbit::StatusCode::kCudaError, "%s:%d: %s failed: %s (%d)",    \
                                   __FILE__, __LINE__, #expr, cublasGetStatusString(_s), (int)_s);    \
  } while (0)
