// Dequantize a whole kernel-layout weight to the activation dtype, [E, N, K] row-major.
// Uses the same device dequantization as the GEMMs (LOP3 path for N-packed and MMA-tiled), so the
// bit-exact test against the CPU contract covers the kernels' arithmetic.
#include "kernels/int4/common.cuh"
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

template <typename T>
__global__ void dequant_npacked_kernel(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                                       const uint16_t* __restrict__ zeros, T* __restrict__ out, int E, int N, int K,
                                       int G) {
  const int nw = N / 8, NG = K / G;
  const size_t total = static_cast<size_t>(E) * K * nw;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % nw);
    const int k = static_cast<int>((i / nw) % K);
    const int e = static_cast<int>(i / (static_cast<size_t>(nw) * K));
    OctetParams<T> p;
    const size_t so = (static_cast<size_t>(e) * NG + k / G) * N + 8 * c;
    load_octet_params<T>(scales, zeros ? zeros : nullptr, so, p);
    typename Act<T>::T2 w2[4];
    dequant_word<T>(qw[i], p, w2);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[(static_cast<size_t>(e) * N + 8 * c + 2 * j) * K + k] = w2[j].x;
      out[(static_cast<size_t>(e) * N + 8 * c + 2 * j + 1) * K + k] = w2[j].y;
    }
  }
}

// MMA-tiled: one thread per word; each of its 4 pairs is (column n, rows k and k + 1),
// adjacent in the [N, K] output: one 4 B store per pair.
template <typename T>
__global__ void dequant_tiled_kernel(const uint32_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                                     const uint16_t* __restrict__ zeros, T* __restrict__ out, int E, int N, int K,
                                     int G) {
  using T2 = typename Act<T>::T2;
  const size_t per_expert = static_cast<size_t>(K) * (N / 8), total = per_expert * E;
  const int NG = K / G;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int e = static_cast<int>(i / per_expert);
    const uint32_t word = qw[i];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      int n = 0, k = 0;
      mma_tiled_coords(i % per_expert, p, K, &n, &k);
      const size_t gi = kernel_scale_index(KernelLayoutKind::kMmaTiled, N, NG, e, k / G, n);
      *reinterpret_cast<T2*>(out + (static_cast<size_t>(e) * N + n) * K + k) =
          dequant_tiled_pair<T>(word, p, scales[gi], zeros ? zeros[gi] : Act<T>::kEight);
    }
  }
}

template <typename T>
__global__ void dequant_kpacked_kernel(const uint8_t* __restrict__ qw, const uint16_t* __restrict__ scales,
                                       const uint16_t* __restrict__ zeros, T* __restrict__ out, int E, int N, int K,
                                       int G) {
  const int NG = K / G;
  const size_t total = static_cast<size_t>(E) * N * K;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % K);
    const int n = static_cast<int>((i / K) % N);
    const int e = static_cast<int>(i / (static_cast<size_t>(N) * K));
    const int q = (qw[i / 2] >> (4 * (k & 1))) & 0xF;
    const size_t gi = (static_cast<size_t>(e) * NG + k / G) * N + n;
    const float s = Act<T>::to_float(*reinterpret_cast<const T*>(scales + gi));
    const float z = zeros ? Act<T>::to_float(*reinterpret_cast<const T*>(zeros + gi)) : 8.f;
    out[i] = Act<T>::from_float((static_cast<float>(q) - z) * s);
  }
}

template <typename T>
cudaError_t launch(const KernelWeightsView& w, uint16_t* out, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const size_t total = static_cast<size_t>(s.experts) * s.n * s.k;
  const int blocks = static_cast<int>(total / 256 + 1 < 4096 ? total / 256 + 1 : 4096);
  if (w.kind == KernelLayoutKind::kMmaTiled)
    dequant_tiled_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const uint32_t*>(w.qweight), w.scales, w.zeros,
                                                        reinterpret_cast<T*>(out), s.experts, s.n, s.k, s.group_len());
  else if (w.kind == KernelLayoutKind::kNPackedInterleaved)
    dequant_npacked_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const uint32_t*>(w.qweight), w.scales, w.zeros,
                                                          reinterpret_cast<T*>(out), s.experts, s.n, s.k, s.group_len());
  else
    dequant_kpacked_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const uint8_t*>(w.qweight), w.scales, w.zeros,
                                                          reinterpret_cast<T*>(out), s.experts, s.n, s.k, s.group_len());
  return cudaGetLastError();
}

}  // namespace
}  // namespace kern

Status validate_weights_view(const KernelWeightsView& w, const char* who, bool act_order_ok);  // gemm.cu

Status dequantize(const KernelWeightsView& w, uint16_t* w_out, Stream stream) {
  LOWBIT_RETURN_IF_ERROR(validate_weights_view(w, "int4::dequantize", /*act_order_ok=*/false));
  LOWBIT_CHECK_ARG(w_out != nullptr, "int4::dequantize: w_out is null");
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  LOWBIT_CUDA_RETURN(w.shape.act == DType::kF16 ? kern::launch<__half>(w, w_out, st)
                                                : kern::launch<__nv_bfloat16>(w, w_out, st));
  return Status::Ok();
}

}  // namespace lowbit::int4
