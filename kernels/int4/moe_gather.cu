// MoE activations gathered into the align order: xs[b] = x[sorted[b] / topk] for every sorted
// slot b < num_post_padded, zeros for padding slots (ids >= M * topk), and optionally the inverse
// map pos[id] = b. Two readers: fused_moe's prefill layer on the warp-specialized tile
// (moe_pipelined.cu) reads xs by tensor copies (an align block's rows are then one box of
// consecutive rows, which a TMA copy can fetch and a gather cannot: sm_90 has no gather mode), and
// the grouped path (moe_grouped.cu) runs cuBLAS on xs and combines through pos. The copy moves
// num_post_padded * H * 2 bytes each way, a few microseconds against the GEMMs' milliseconds at
// the sizes that take these paths.
#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/common.cuh"
#include "kernels/int4/internal.h"

namespace lowbit::int4 {
namespace kern {
namespace {

constexpr int kGatherThreads = 128;
constexpr int kGatherRowsPerBlock = 4;  // one warp per row

// Launched as a programmatic dependent of the align kernel: waits for its ids, then lets the
// GEMM launch (which waits for this kernel's completion before reading xs).
__global__ void __launch_bounds__(kGatherThreads) moe_gather_rows_kernel(const uint4* __restrict__ x,
                                                                       const int32_t* __restrict__ sorted,
                                                                       const int32_t* __restrict__ npp, int P,
                                                                       int topk, int row_vecs, uint4* __restrict__ xs,
                                                                       int32_t* __restrict__ pos) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int b = blockIdx.x * kGatherRowsPerBlock + static_cast<int>(threadIdx.x >> 5);
  if (b >= __ldg(npp)) return;
  const int id = __ldg(sorted + b);
  uint4* dst = xs + static_cast<size_t>(b) * row_vecs;
  if (id < 0 || id >= P) {
    for (int v = threadIdx.x & 31; v < row_vecs; v += 32) dst[v] = make_uint4(0, 0, 0, 0);
    return;
  }
  if (pos != nullptr && (threadIdx.x & 31) == 0) pos[id] = b;
  const uint4* src = x + static_cast<size_t>(id / topk) * row_vecs;
  for (int v = threadIdx.x & 31; v < row_vecs; v += 32) dst[v] = __ldg(src + v);
}

}  // namespace
}  // namespace kern

cudaError_t detail::launch_moe_gather_rows(const void* x, const int32_t* sorted_ids, const int32_t* npp, int m,
                                           int topk, int hidden, int max_rows, void* xs, int32_t* pos,
                                           cudaStream_t stream) {
  // 16-bit activations, rows of whole 16 B vectors (hidden % 8 == 0), both buffers 16 B aligned:
  // the callers check.
  const int row_vecs = hidden / 8;
  const unsigned blocks = static_cast<unsigned>((max_rows + kern::kGatherRowsPerBlock - 1) / kern::kGatherRowsPerBlock);
  return kern::launch_programmatic(kern::moe_gather_rows_kernel, dim3(blocks), dim3(kern::kGatherThreads), 0, stream,
                                   static_cast<const uint4*>(x), sorted_ids, npp, m * topk, topk, row_vecs,
                                   static_cast<uint4*>(xs), pos);
}

}  // namespace lowbit::int4
