// MoE GEMMs through the pipelined tile (pipelined_tile.cuh, its MoE modes) on MMA-tiled expert
// stacks, for align blocks of 16..128 rows (prefill and large decode batches, where tokens
// share experts): GEMM1 inter[id] = act(silu(x[id/topk] Wg^T) * (x[id/topk] Wu^T)), GEMM2
// slot_out[id] = topk_weight[id] * (inter[id] W2^T) in fp32. The decode tile's MoE modes
// (moe_decode.cu) keep 8-row blocks and the 16-row blocks of dense-sized experts
// (moe_pipelined_block in pipelined_plan.h: rows re-read per warp are cheap there).
#include <cstdlib>

#include "kernels/int4/pipelined_plan.h"
#include "kernels/int4/pipelined_tile.cuh"

namespace lowbit::int4::detail {
namespace {
constexpr int kMoeRasterRows = 8;
}  // namespace

// LOWBIT_INT4_MOE_PIPE=0 (read once; measurements): the decode tile's MoE modes at every block_m.
bool moe_pipelined_enabled() {
  static const bool v = kern::env_on_unless_zero("LOWBIT_INT4_MOE_PIPE");
  return v;
}
// Row tiles per raster group (pipelined_tile.cuh); LOWBIT_INT4_MOE_PIPE_RASTER=1..4096 replaces
// the default (read once; measurements; a value >= the row tiles is the dense order).
int moe_raster_rows() {
  static const int v = [] {
    const int r = kern::env_int_once("LOWBIT_INT4_MOE_PIPE_RASTER", 1, 4096);
    return r > 0 ? r : kMoeRasterRows;
  }();
  return v;
}

bool moe_pipelined_fits(bool gate_up, const KernelWeightsView& w, int m, int topk, int block_m, const void* out) {
  if (w.kind != KernelLayoutKind::kMmaTiled || !moe_pipelined_enabled()) return false;
  // The epilogues store 16 B per thread; the decode tile stores elements (the public
  // moe_gemm1 / moe_gemm2 accept outputs aligned to their element only).
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) return false;
  if (gate_up && (w.shape.n / 2) % kMmaTileCols != 0) return false;  // gate and up groups pair up
  // The tile's x offsets are 32-bit: rows of x times K below 2^32.
  if (static_cast<int64_t>(gate_up ? m : static_cast<int64_t>(m) * topk) * w.shape.k >= (int64_t{1} << 32)) return false;
  if (!kern::moe_pipelined_block(block_m, static_cast<int64_t>(w.shape.n) * w.shape.k)) return false;
  if (block_m == 128) return kern::pipe_wgmma_ok();
  return block_m == 16 || block_m == 32 || block_m == 64;
}

namespace {
template <int MODE>
cudaError_t launch_mode(DType act, bool sym, const kern::PipeMoeParams& p, int bm, unsigned tiles, cudaStream_t stream) {
  if (act == DType::kBF16)
    return sym ? kern::launch_moe_rows<__nv_bfloat16, true, MODE>(p, bm, tiles, stream)
               : kern::launch_moe_rows<__nv_bfloat16, false, MODE>(p, bm, tiles, stream);
  return sym ? kern::launch_moe_rows<__half, true, MODE>(p, bm, tiles, stream)
             : kern::launch_moe_rows<__half, false, MODE>(p, bm, tiles, stream);
}
}  // namespace

// The callers (moe_gemm1 / moe_gemm2) took this path through moe_pipelined_fits().
cudaError_t launch_moe_pipelined(bool gate_up, const void* x, const KernelWeightsView& w, const int32_t* sorted_ids,
                                 const int32_t* expert_ids, const int32_t* npp, const float* topk_weights, int m,
                                 int topk, int bm, void* out, cudaStream_t stream, bool ids_early) {
  const WeightShape& s = w.shape;
  kern::PipeMoeParams p;
  p.qw = static_cast<const uint4*>(w.qweight);
  p.scales = w.scales;
  p.zeros = w.zeros;
  p.x = x;
  p.y = out;
  p.P = m * topk;
  p.M = gate_up ? m : p.P;  // rows of x
  p.N = s.n;
  p.K = s.k;
  p.ksteps = s.k / kMmaTileK;
  p.gsteps = s.group_len() / kMmaTileK;
  p.split_steps = kern::ceil_div(p.ksteps, kern::kPipeStageSteps) * kern::kPipeStageSteps;
  p.splits = 1;
  p.sorted_ids = sorted_ids;
  p.expert_ids = expert_ids;
  p.npp = npp;
  p.topk_weights = topk_weights;
  p.topk = topk;
  p.half_groups = s.n / 2 / kMmaTileCols;
  p.qw_estride = tiled_expert_uint4s(s);
  p.sc_estride = expert_scale_entries(s);
  // Align blocks that can hold rows (at most one per (token, slot) pair); the rest of the
  // align output is never read.
  const int64_t max_blocks = moe_max_padded(m, topk, s.experts, bm) / bm;
  p.row_tiles = static_cast<int>(max_blocks < p.P ? max_blocks : p.P);
  p.col_tiles = kern::moe_pipe_col_tiles(gate_up, s.n);
  p.raster_rows = moe_raster_rows();
  p.ids_early = !gate_up && ids_early ? 1 : 0;
  const int64_t tiles = static_cast<int64_t>(p.col_tiles) * p.row_tiles;
  if (tiles > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const auto t = static_cast<unsigned>(tiles);
  const bool sym = p.zeros == nullptr;
  return gate_up ? launch_mode<kern::kPipeMoeGateUp>(s.act, sym, p, bm, t, stream)
                 : launch_mode<kern::kPipeMoeDown>(s.act, sym, p, bm, t, stream);
}

}  // namespace lowbit::int4::detail
