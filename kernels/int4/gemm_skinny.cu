// Skinny W4A16 GEMM for decode (M <= 64; serves M <= 512) on tensor cores: one launch of the
// shared decode tile (skinny_tile.cuh: mma m16n8k16 on y^T = W x^T, block-wide cp.async
// stream of whole 64/128-byte weight row segments, split-K reduced inside the launch through
// a thread-block cluster's distributed shared memory, deterministic). Grid: x = column tile
// x split (cluster), y = tile of 8 NT activation rows (NT = 1, 2, 4 by M).
#include "kernels/int4/internal.h"
#include "kernels/int4/skinny_tile.cuh"

namespace lowbit::int4 {
namespace detail {

// Activation rows per block (grid.y) tile: 8 * NT with NT = 1, 2 or 4 MMA n8 tiles.
int skinny_rows_per_tile(int m) { return m <= 8 ? 8 : m <= 16 ? 16 : 32; }

// Split-K factor (cluster size, <= 8) the launch uses at this shape. The split-K partials
// no longer go through the workspace (they are reduced in the cluster's shared memory); the
// value is kept for gemm_workspace_size's bound (gemm.cu).
int skinny_splits(int m, int n, int k) {
  const int mt = skinny_rows_per_tile(m);
  return kern::skinny_plan(n, false, kern::ceil_div(m, mt), k / kKernelKChunk, mt / 8).splits;
}

}  // namespace detail

namespace kern {
namespace {

template <typename T, int NT>
cudaError_t launch(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, NG = s.num_groups();
  const int units = ceil_div(m, 8 * NT);
  const SkinnyPlan plan = skinny_plan(N, false, units, K / kKernelKChunk, NT);
  SkinnyParams p;
  p.x = x;
  p.out = y;
  p.qw = static_cast<const uint32_t*>(w.qweight) + static_cast<size_t>(expert) * K * (N / 8);
  const size_t so = static_cast<size_t>(expert) * NG * N;
  p.scales = w.scales + so;
  p.zeros = w.zeros ? w.zeros + so : nullptr;
  p.M = m;
  p.N = N;
  p.nw = N / 8;
  p.K = K;
  p.G = s.group_len();
  p.chunks = K / kKernelKChunk;
  p.splits = plan.splits;
  p.wn = plan.wn;
  p.vec16 = skinny_vec16(p.qw, p.nw, p.nw, 0);
  return launch_skinny<T, NT, kSkDense>(p, plan.tiles, static_cast<unsigned>(units), 1, stream);
}

template <typename T>
cudaError_t launch_t(const void* x, void* y, int m, const KernelWeightsView& w, int expert, cudaStream_t stream) {
  switch (detail::skinny_rows_per_tile(m)) {
    case 8: return launch<T, 1>(x, y, m, w, expert, stream);
    case 16: return launch<T, 2>(x, y, m, w, expert, stream);
    default: return launch<T, 4>(x, y, m, w, expert, stream);
  }
}

}  // namespace
}  // namespace kern

namespace detail {
cudaError_t launch_gemm_skinny(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                               float* /*partials: unused, split-K is reduced in-cluster*/, cudaStream_t stream) {
  return w.shape.act == DType::kF16 ? kern::launch_t<__half>(x, y, m, w, expert, stream)
                                    : kern::launch_t<__nv_bfloat16>(x, y, m, w, expert, stream);
}
}  // namespace detail
}  // namespace lowbit::int4
