// MoE align: group the M*topk (token, slot) pairs by expert, in pair order within an expert
// (a stable counting sort), pad each expert's run to a multiple of BM with the sentinel
// M*topk, and give every block its expert (-1 past the end). One block of 256 threads:
// counts per expert, a serial prefix over E (E <= 1024), then a tiled stable scatter where
// a warp finds equal experts with __match_any_sync and earlier warps' counts come from
// shared memory. Output identical to the CPU reference (no order depends on scheduling).
#include "lowbit/detail/cuda_check.h"
#include "lowbit/int4/kernels.h"

namespace lowbit::int4 {
namespace kern {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

__global__ void __launch_bounds__(kThreads)
    moe_align_kernel(const int32_t* __restrict__ topk_ids, int P, int E, int BM, int max_padded,
                     int32_t* __restrict__ sorted_ids, int32_t* __restrict__ expert_ids,
                     int32_t* __restrict__ num_post_padded) {
  extern __shared__ int smem[];
  int* counts = smem;          // [E]
  int* cursor = counts + E;    // [E]
  int* wcnt = cursor + E;      // [kWarps][E]
  __shared__ int s_total;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < E * (2 + kWarps); i += kThreads) smem[i] = 0;
  __syncthreads();
  for (int p = tid; p < P; p += kThreads) {
    const int e = topk_ids[p];
    if (e >= 0 && e < E) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (tid == 0) {
    int off = 0;
    for (int e = 0; e < E; ++e) {
      cursor[e] = off;
      off += (counts[e] + BM - 1) / BM * BM;
    }
    s_total = off;
    *num_post_padded = off;
  }
  __syncthreads();
  const int total = s_total;
  for (int i = tid; i < max_padded; i += kThreads) sorted_ids[i] = P;
  for (int b = total / BM + tid; b < max_padded / BM; b += kThreads) expert_ids[b] = -1;
  for (int e = tid; e < E; e += kThreads) {
    const int b0 = cursor[e] / BM, nb = (counts[e] + BM - 1) / BM;
    for (int b = 0; b < nb; ++b) expert_ids[b0 + b] = e;
  }
  __syncthreads();  // sentinel fill before the scatter overwrites it
  const unsigned lt = (1u << lane) - 1u;
  for (int base = 0; base < P; base += kThreads) {
    const int p = base + tid;
    int e = p < P ? topk_ids[p] : -1;
    if (e >= E) e = -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & lt);
    if (e >= 0 && rank == 0) wcnt[warp * E + e] = __popc(same);
    __syncthreads();
    if (e >= 0) {
      int off = cursor[e] + rank;
      for (int w = 0; w < warp; ++w) off += wcnt[w * E + e];
      sorted_ids[off] = p;
    }
    __syncthreads();
    if (e >= 0 && rank == 0) {
      atomicAdd(&cursor[e], __popc(same));
      wcnt[warp * E + e] = 0;
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace kern

int64_t moe_max_padded(int m, int topk, int experts, int block_m) {
  const int64_t raw = static_cast<int64_t>(m) * topk + static_cast<int64_t>(experts) * (block_m - 1);
  return (raw + block_m - 1) / block_m * block_m;
}

Status moe_align(const int32_t* topk_ids, int m, int topk, int experts, int block_m, int32_t* sorted_ids,
                 int32_t* expert_ids, int32_t* num_post_padded, Stream stream) {
  LOWBIT_CHECK_ARG(topk_ids && sorted_ids && expert_ids && num_post_padded, "int4::moe_align: null pointer");
  LOWBIT_CHECK_ARG(m >= 1 && topk >= 1, "int4::moe_align: m=%d topk=%d must be >= 1", m, topk);
  LOWBIT_CHECK_ARG(experts >= 1 && experts <= 1024, "int4::moe_align: experts=%d outside [1, 1024]", experts);
  LOWBIT_CHECK_ARG(block_m >= 1 && block_m <= 128, "int4::moe_align: block_m=%d outside [1, 128]", block_m);
  const int64_t maxp = moe_max_padded(m, topk, experts, block_m);
  LOWBIT_CHECK_ARG(maxp < (int64_t{1} << 31), "int4::moe_align: m*topk too large (%lld padded slots)",
                   static_cast<long long>(maxp));
  cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  const size_t smem = static_cast<size_t>(experts) * (2 + kern::kWarps) * sizeof(int);
  kern::moe_align_kernel<<<1, kern::kThreads, smem, st>>>(topk_ids, m * topk, experts, block_m, static_cast<int>(maxp),
                                                          sorted_ids, expert_ids, num_post_padded);
  LOWBIT_CUDA_RETURN_LAUNCH();
  return Status::Ok();
}

}  // namespace lowbit::int4
