// Dense projection y = x W^T through cuBLAS (bf16 operands, fp32 accumulation).
// Row-major y[T, N] is column-major y^T[N, T] = W^T(op T of col-major [K, N]) * x^T.
#include "kernels/model/cublas_check.cuh"
#include "lowbit/model/gpu_ops.h"

namespace lowbit::model::gpu {

Status linear(cublasHandle_t handle, const bf16* x, int64_t ldx, const bf16* w, void* y, bool y_fp32, int64_t ldy,
              int T, int N, int K) {
  LOWBIT_CHECK_ARG(handle && x && w && y, "linear: null pointer");
  LOWBIT_CHECK_ARG(T > 0 && N > 0 && K > 0, "linear: T=%d N=%d K=%d must be > 0", T, N, K);
  LOWBIT_CHECK_ARG(ldx >= K && ldy >= N, "linear: ldx=%lld < K=%d or ldy=%lld < N=%d", static_cast<long long>(ldx), K,
                   static_cast<long long>(ldy), N);
  const float alpha = 1.0f, beta = 0.0f;
  LOWBIT_CUBLAS_RETURN(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &alpha, w, CUDA_R_16BF, K, x,
                                    CUDA_R_16BF, static_cast<int>(ldx), &beta, y, y_fp32 ? CUDA_R_32F : CUDA_R_16BF,
                                    static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return Status::Ok();
}

}  // namespace lowbit::model::gpu
