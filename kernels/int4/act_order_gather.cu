// Act-order activations: x'[r, j] = x[r, k_perm[j]], the input order of a weight whose rows are
// stored sorted by group (GPTQ desc_act, compressed-tensors actorder "group"; weights.h). Dense
// (int4::gemm, gemm.cu): one permutation for every row. MoE (fused_moe.cu): row p is the pair
// (token p / topk, slot) routed to expert ids[p], whose own permutation applies; GEMM1 then reads
// the gathered rows as tokens of top-1 routing, and the intermediate is gathered again for w2.
// A copy, bit for bit: 16-bit elements moved, no arithmetic.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/int4/internal.h"

namespace lowbit::int4::detail {

namespace {

// One thread per 8 consecutive outputs of a row (one 16 B store): out[p, j] = src[p / row_div,
// perm[e * k + j]], the row's inputs read through the permutation (a row is at most a few hundred
// KB; L1 / L2 serve the scattered reads), the writes coalesced. Dense (kMoe false): e = 0, row
// p of src, no ids, no division (the one body for both forms had cost the dense instantiation a
// 64-bit p / row_div per 8 outputs: 488 SASS instructions against 198; that is the gather of
// every decode-sized act-order GEMM). MoE: e = ids[p]; rows of ids outside [0, experts)
// (foreign experts: the align gave them no rows, so no GEMM reads them) are left as they are.
template <bool kMoe>
__global__ void gather_act_order_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ out,
                                        const int32_t* __restrict__ ids, const int32_t* __restrict__ perm, int rows,
                                        int row_div, int experts, int k) {
  const int chunks = k / 8;
  const size_t total = static_cast<size_t>(rows) * chunks;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t p = i / chunks;
    int e = 0;
    size_t src_row = p;
    if constexpr (kMoe) {
      e = ids[p];
      if (e < 0 || e >= experts) continue;
      src_row = p / row_div;
    }
    const int j0 = static_cast<int>(i % chunks) * 8;
    const uint16_t* row = src + src_row * k;
    const int32_t* pe = perm + static_cast<size_t>(e) * k + j0;
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
      packed[q] = static_cast<uint32_t>(row[pe[2 * q]]) | static_cast<uint32_t>(row[pe[2 * q + 1]]) << 16;
    *reinterpret_cast<uint4*>(out + p * k + j0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// Any even K (the K-packed layout's weights): one element per thread.
__global__ void gather_act_order_scalar_kernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ out,
                                               const int32_t* __restrict__ perm, int m, int k) {
  const size_t total = static_cast<size_t>(m) * k;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / k;
    out[i] = x[r * k + perm[i % k]];
  }
}

// Staged: the kernels above read every element through the permutation with its own 2-byte
// load, 32 different lines per warp instruction, so a large gather is bound by L1 wavefronts,
// not bytes (dense M = 512, K = 28672: 69 us for 29 MB, session 39). Here a block copies one
// source row into shared memory with 16 B loads first, then writes the `fan` output rows made
// from it (MoE GEMM1: the token's topk pairs, each through its expert's permutation) with the
// permuted reads served by shared memory. grid.y splits the output columns when there are few
// rows, so that more blocks than rows share the work (each stages the whole row).
// Only for gathers of >= kStagedMinElems outputs: smaller ones are bound by latency, where the
// per-element kernels' wider grids win (session 39, part H: 70b.down M = 1 / 8 took +7.9 / +8.2 us
// staged against +5.4 / +6.9, Qwen3 MoE at M = 1..16 +2-4 us; from ~0.5 Mi outputs staged wins:
// 70b.down M = 32 / 128 / 512 +7.0 / +10.5 / +21.1 us against +8.9 / +23.2 / +69.2).
constexpr size_t kStagedMinElems = size_t{1} << 19;
constexpr int kStagedThreads = 256;
constexpr size_t kStagedMaxRowBytes = 160 * 1024;  // rows of up to 80 Ki elements

__global__ void __launch_bounds__(kStagedThreads) gather_rows_staged_kernel(
    const uint16_t* __restrict__ src, uint16_t* __restrict__ out, const int32_t* __restrict__ ids,
    const int32_t* __restrict__ perm, int fan, int experts, int k) {
  extern __shared__ uint4 s_row4[];
  const uint16_t* s_row = reinterpret_cast<const uint16_t*>(s_row4);
  const int chunks = k / 8;
  const size_t r = blockIdx.x;
  const uint4* row4 = reinterpret_cast<const uint4*>(src + r * k);
  for (int i = threadIdx.x; i < chunks; i += kStagedThreads) s_row4[i] = __ldg(row4 + i);
  __syncthreads();
  const int per = (chunks + gridDim.y - 1) / gridDim.y;
  const int c0 = blockIdx.y * per, c1 = min(chunks, c0 + per);
  for (int f = 0; f < fan; ++f) {
    const size_t p = r * fan + f;
    int e = 0;
    if (ids != nullptr) {
      e = ids[p];
      if (e < 0 || e >= experts) continue;  // a foreign expert: no GEMM reads this row
    }
    const ::int4* pe = reinterpret_cast<const ::int4*>(perm + static_cast<size_t>(e) * k);
    uint4* orow = reinterpret_cast<uint4*>(out + p * k);
    for (int c = c0 + threadIdx.x; c < c1; c += kStagedThreads) {
      const ::int4 a = __ldg(pe + 2 * c), b = __ldg(pe + 2 * c + 1);
      orow[c] = make_uint4(static_cast<uint32_t>(s_row[a.x]) | static_cast<uint32_t>(s_row[a.y]) << 16,
                           static_cast<uint32_t>(s_row[a.z]) | static_cast<uint32_t>(s_row[a.w]) << 16,
                           static_cast<uint32_t>(s_row[b.x]) | static_cast<uint32_t>(s_row[b.y]) << 16,
                           static_cast<uint32_t>(s_row[b.z]) | static_cast<uint32_t>(s_row[b.w]) << 16);
    }
  }
}

// Whether the staged kernel takes these operands (16 B aligned rows and permutation rows, K % 8
// == 0, a row within kStagedMaxRowBytes), and its launch: src_rows blocks (x slices).
bool staged_ok(const void* src, const void* out, const int32_t* perm, int k) {
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return k % 8 == 0 && k > 0 && static_cast<size_t>(k) * 2 <= kStagedMaxRowBytes && a16(src) && a16(out) && a16(perm);
}
cudaError_t launch_staged(const void* src, int src_rows, int fan, const int32_t* ids, int experts, const int32_t* perm,
                          int k, void* out, cudaStream_t stream) {
  if (src_rows < 1) return cudaSuccess;
  const size_t smem = static_cast<size_t>(k) * 2;
  static std::atomic<size_t> opted{48 * 1024};  // dynamic shared memory the kernel is opted in to
  if (smem > opted.load(std::memory_order_relaxed)) {
    if (const cudaError_t e = cudaFuncSetAttribute(gather_rows_staged_kernel,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(kStagedMaxRowBytes));
        e != cudaSuccess)
      return e;
    opted.store(kStagedMaxRowBytes, std::memory_order_relaxed);
  }
  // ~2 blocks per SM of an H200 in all; each slice keeps >= one chunk per thread.
  const int chunks = k / 8;
  int slices = (264 + src_rows - 1) / src_rows;
  const int most = chunks / kStagedThreads > 1 ? chunks / kStagedThreads : 1;
  if (slices > most) slices = most;
  if (slices < 1) slices = 1;
  gather_rows_staged_kernel<<<dim3(static_cast<unsigned>(src_rows), static_cast<unsigned>(slices)), kStagedThreads,
                              smem, stream>>>(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(out), ids,
                                              perm, fan, experts, k);
  return cudaGetLastError();
}

int gather_blocks(size_t items, int threads) {
  const size_t want = (items + threads - 1) / threads;
  return static_cast<int>(want < 65535 ? (want > 0 ? want : 1) : 65535);
}

}  // namespace

cudaError_t launch_gather_act_order(const void* x, void* out, const int32_t* perm, int m, int k,
                                    cudaStream_t stream) {
  if (static_cast<size_t>(m) * k >= kStagedMinElems && staged_ok(x, out, perm, k))
    return launch_staged(x, m, 1, nullptr, 1, perm, k, out, stream);
  const bool vec = k % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const size_t items = static_cast<size_t>(m) * (vec ? k / 8 : k);
  const int threads = 256;
  const int blocks = gather_blocks(items, threads);
  if (vec)
    gather_act_order_kernel<false><<<blocks, threads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                            static_cast<uint16_t*>(out), nullptr, perm, m, 1, 1, k);
  else
    gather_act_order_scalar_kernel<<<blocks, threads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                                   static_cast<uint16_t*>(out), perm, m, k);
  return cudaGetLastError();
}

cudaError_t launch_gather_moe_act_order(const void* src, int row_div, const int32_t* ids, int rows, int experts,
                                        const int32_t* perm, int k, void* out, cudaStream_t stream) {
  if (k % 8 != 0 || row_div < 1 || reinterpret_cast<uintptr_t>(out) % 16 != 0) return cudaErrorInvalidValue;
  if (static_cast<size_t>(rows) * k >= kStagedMinElems && rows % row_div == 0 && staged_ok(src, out, perm, k))
    return launch_staged(src, rows / row_div, row_div, ids, experts, perm, k, out, stream);
  const int threads = 256;
  gather_act_order_kernel<true><<<gather_blocks(static_cast<size_t>(rows) * (k / 8), threads), threads, 0, stream>>>(
      static_cast<const uint16_t*>(src), static_cast<uint16_t*>(out), ids, perm, rows, row_div, experts, k);
  return cudaGetLastError();
}

}  // namespace lowbit::int4::detail
