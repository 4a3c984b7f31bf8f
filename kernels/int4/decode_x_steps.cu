// The copy of the activations that the dense decode GEMM's 16-row tiles read
// (DecodeParams::x_steps, DecodeCfg::XP; layout: decode_plan.h decode_x_steps_index): per
// 16-row tile, K step by K step, the 16 rows' 16 elements of that step (rows past M: zeros).
//
// Why: the decode tile's lane (g, t) loads its B fragments as two 4 B words per K step and
// row tile, from activation row g. In row-major x the 8 rows of one load instruction are K * 2
// bytes apart, so each instruction touches 8 cache lines; at M = 12..16 those loads kept
// L1TEX 77% busy on 70b.gate_up and a probe with one line per instruction ran 0.73-0.94x the
// time (session 22, docs/int4-kernels-sessions.md). In the copy the 8 rows of a K step are 256
// contiguous bytes: 2 lines per instruction, the same instructions and the same registers, so
// the sums, and the outputs, are bit-identical.
//
// One 16 B chunk per thread, in the copy's order (stores coalesced; each pair of threads reads
// 32 B of one row, which the previous kernel has just written to L2). A programmatic
// dependent launch: the decode kernel may launch (and request its first weight batches) at
// once; its griddepcontrol.wait then waits for this copy.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/int4/cluster_launch.cuh"
#include "kernels/int4/decode_plan.h"
#include "kernels/int4/internal.h"

namespace lowbit::int4::kern {
namespace {

__global__ void __launch_bounds__(256) decode_x_steps_kernel(const uint4* __restrict__ x, uint4* __restrict__ xs,
                                                             int m, int k, long long chunks) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // x is the previous kernel's output
  const long long o = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= chunks) return;
  // Chunk o of the copy (8 elements) = half c of row 16 tile + rr in K step s.
  const int c = static_cast<int>(o & 1);
  const int rr = static_cast<int>((o >> 1) & 15);
  const long long ts = o >> 5;  // tile * (K / 16) + s
  const int steps = k / 16;
  const int r = static_cast<int>(ts / steps) * 16 + rr;
  const long long s = ts % steps;
  xs[o] = r < m ? __ldg(x + (static_cast<long long>(r) * k + s * 16 + c * 8) / 8) : make_uint4(0, 0, 0, 0);
}

}  // namespace
}  // namespace lowbit::int4::kern

namespace lowbit::int4::detail {

cudaError_t launch_decode_x_steps(const void* x, int m, int k, void* xs, cudaStream_t stream) {
  static_assert(kern::decode_x_steps_index(17, 37, 64) == ((1 * 4 + 2) * 16 + 1) * 16 + 5, "the copy's order");
  const long long chunks = kern::decode_x_steps_bytes(m, k) / 16;  // K % 32 == 0 (MMA-tiled)
  const unsigned blocks = static_cast<unsigned>((chunks + 255) / 256);
  return kern::launch_programmatic(kern::decode_x_steps_kernel, dim3(blocks), dim3(256), 0, stream,
                                   static_cast<const uint4*>(x), static_cast<uint4*>(xs), m, k, chunks);
}

}  // namespace lowbit::int4::detail
