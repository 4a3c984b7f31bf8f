// MoE GEMMs through the pipelined tile (pipelined_tile.cuh, its MoE modes) on MMA-tiled expert
// stacks, for align blocks of 16..128 rows (prefill and large decode batches, where tokens
// share experts): GEMM1 inter[id] = act(silu(x[id/topk] Wg^T) * (x[id/topk] Wu^T)), GEMM2
// slot_out[id] = topk_weight[id] * (inter[id] W2^T) in fp32. The decode tile's MoE modes
// (moe_decode.cu) keep 8-row blocks and the 16-row blocks of dense-sized experts
// (moe_pipelined_block in pipelined_plan.h: rows re-read per warp are cheap there).
#include <atomic>
#include <cstdlib>

#include "kernels/int4/pipelined_plan.h"
#include "kernels/int4/pipelined_ws_tile.cuh"

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

MoeTile moe_gemm_tile(bool gate_up, const KernelWeightsView& w, int m, int topk, int block_m, const void* out) {
  if (moe_pipelined_fits(gate_up, w, m, topk, block_m, out)) return MoeTile::kPipelined;
  return w.kind == KernelLayoutKind::kMmaTiled ? MoeTile::kDecode : MoeTile::kNPacked;
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

namespace {
// The pipelined tile's MoE parameters of one GEMM (see pipelined_tile.cuh); *tiles: the grid.
kern::PipeMoeParams moe_params(bool gate_up, const void* x, const KernelWeightsView& w, const int32_t* sorted_ids,
                               const int32_t* expert_ids, const int32_t* npp, const float* topk_weights, int m,
                               int topk, int bm, void* out, bool ids_early, int64_t* tiles) {
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
  *tiles = static_cast<int64_t>(p.col_tiles) * p.row_tiles;
  return p;
}
}  // namespace

// The callers (moe_gemm1 / moe_gemm2) took this path through moe_pipelined_fits().
cudaError_t launch_moe_pipelined(bool gate_up, const void* x, const KernelWeightsView& w, const int32_t* sorted_ids,
                                 const int32_t* expert_ids, const int32_t* npp, const float* topk_weights, int m,
                                 int topk, int bm, void* out, cudaStream_t stream, bool ids_early) {
  int64_t tiles = 0;
  const kern::PipeMoeParams p =
      moe_params(gate_up, x, w, sorted_ids, expert_ids, npp, topk_weights, m, topk, bm, out, ids_early, &tiles);
  if (tiles > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const auto t = static_cast<unsigned>(tiles);
  const bool sym = p.zeros == nullptr;
  return gate_up ? launch_mode<kern::kPipeMoeGateUp>(w.shape.act, sym, p, bm, t, stream)
                 : launch_mode<kern::kPipeMoeDown>(w.shape.act, sym, p, bm, t, stream);
}

// ---- fused_moe's layer on the warp-specialized tile (128-row align blocks) ----------------

namespace {
// The gather costs ~P x H x 4 bytes of traffic against GEMMs of P x H x I: with I = 384
// (Qwen3-30B-A3B TP2, M = 8192) the layer took 1445 us against 1392 on the pipelined tile,
// with I = 768 2017 against 2054 (round A of session 32).
constexpr int kMoeWsMinInter = 512;
std::atomic<int> g_moe_ws_override{0};
std::atomic<long long> g_moe_ws_launches{0};

// LOWBIT_INT4_MOE_WS=0 / 2 (read once; measurements): never / wherever it can run (also below
// kMoeWsMinInter); set_moe_ws overrides it (tests). 0 never, 1 the rule, 2 always.
int moe_ws_mode() {
  static const int v = kern::env_012("LOWBIT_INT4_MOE_WS");
  const int o = g_moe_ws_override.load(std::memory_order_relaxed);
  return o == 1 ? 0 : o == 2 ? 2 : v;
}

// The tensor map of a GEMM's x (rows in the align order) and the operands' 16 B alignment for
// the bulk copies; false where either is not available.
template <int MODE>
bool moe_ws_prepare(kern::PipeWsParams<MODE>* q, DType act, int x_rows) {
  const kern::PipeMoeParams& p = q->p;
  if (!kern::ws_operands_aligned(p) || reinterpret_cast<uintptr_t>(p.y) % 16 != 0) return false;
  // Every expert's words and scale rows stay 16 B aligned (bulk copies).
  if ((p.qw_estride * sizeof(uint4)) % 16 != 0 || (p.sc_estride * sizeof(uint16_t)) % 16 != 0) return false;
  return act == DType::kBF16 ? kern::encode_x_map<__nv_bfloat16>(&q->xmap, p.x, x_rows, p.K, 128)
                             : kern::encode_x_map<__half>(&q->xmap, p.x, x_rows, p.K, 128);
}

template <typename T, bool kSym, int MODE>
cudaError_t launch_moe_ws_typed(const kern::PipeWsParams<MODE>& q, unsigned tiles, cudaStream_t stream) {
  auto kernel = kern::gemm_pipelined_ws_kernel<T, 128, kSym, MODE>;
  constexpr size_t kSmem = kern::PipeWsSmem<128>::kTotal;
  static std::atomic<int> per_sm{0};  // per instantiation (session 28: a cache per kernel type failed)
  int nb = 0;
  if (const cudaError_t e = kern::blocks_per_sm_once(kernel, kern::kWsThreads, kSmem, per_sm, &nb); e != cudaSuccess)
    return e;
  return kern::launch_split_clusters(kernel, q, 1, tiles, 1, 1, kern::kWsThreads, kSmem, stream, kern::pdl_enabled());
}
template <int MODE>
cudaError_t launch_moe_ws_mode(const kern::PipeWsParams<MODE>& q, DType act, unsigned tiles, cudaStream_t stream) {
  const bool sym = q.p.zeros == nullptr;
  if (act == DType::kBF16)
    return sym ? launch_moe_ws_typed<__nv_bfloat16, true, MODE>(q, tiles, stream)
               : launch_moe_ws_typed<__nv_bfloat16, false, MODE>(q, tiles, stream);
  return sym ? launch_moe_ws_typed<__half, true, MODE>(q, tiles, stream)
             : launch_moe_ws_typed<__half, false, MODE>(q, tiles, stream);
}
}  // namespace

bool moe_ws_takes(int inter) {
  const int mode = moe_ws_mode();
  return kern::pipe_wgmma_ok() && (mode == 2 || (mode == 1 && inter >= kMoeWsMinInter));
}
void set_moe_ws(int mode) { g_moe_ws_override.store(mode == 1 || mode == 2 ? mode : 0); }
long long moe_ws_launches() { return g_moe_ws_launches.load(std::memory_order_relaxed); }

bool moe_ws_fits(const KernelWeightsView& w13, const KernelWeightsView& w2, int m, int topk, int block_m,
                 const void* inter, const float* slot_out) {
  if (block_m != 128 || !moe_ws_takes(w2.shape.k)) return false;
  if (w13.shape.k % 8 != 0 || w2.shape.k % 8 != 0) return false;  // rows of whole 16 B vectors (tensor maps, gather)
  return moe_pipelined_fits(true, w13, m, topk, block_m, inter) &&
         moe_pipelined_fits(false, w2, m, topk, block_m, slot_out);
}

cudaError_t launch_moe_ws_layer(const void* x, void* xs, const KernelWeightsView& w13, const KernelWeightsView& w2,
                                const int32_t* sorted_ids, const int32_t* expert_ids, const int32_t* npp,
                                const float* topk_weights, int m, int topk, void* inter_sorted, float* slot_out,
                                cudaStream_t stream, bool ids_early, bool* launched) {
  *launched = false;
  constexpr int bm = 128;
  const int rows = static_cast<int>(moe_max_padded(m, topk, w13.shape.experts, bm));  // xs / inter rows
  int64_t t1 = 0, t2 = 0;
  kern::PipeWsParams<kern::kPipeMoeGateUp> q1{
      moe_params(true, xs, w13, sorted_ids, expert_ids, npp, nullptr, m, topk, bm, inter_sorted, false, &t1), {}};
  kern::PipeWsParams<kern::kPipeMoeDown> q2{moe_params(false, inter_sorted, w2, sorted_ids, expert_ids, npp,
                                                       topk_weights, m, topk, bm, slot_out, ids_early, &t2),
                                            {}};
  if (t1 > 0x7FFFFFFF || t2 > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  // Both maps before anything is launched: GEMM1 stores inter in the align order, which only
  // this GEMM2 reads.
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || !moe_ws_prepare(&q1, w13.shape.act, rows) ||
      !moe_ws_prepare(&q2, w2.shape.act, rows))
    return cudaSuccess;
  *launched = true;
  g_moe_ws_launches.fetch_add(1, std::memory_order_relaxed);
  if (const cudaError_t e = launch_moe_gather_rows(x, sorted_ids, npp, m, topk, w13.shape.k, rows, xs, nullptr, stream);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e = launch_moe_ws_mode(q1, w13.shape.act, static_cast<unsigned>(t1), stream); e != cudaSuccess)
    return e;
  return launch_moe_ws_mode(q2, w2.shape.act, static_cast<unsigned>(t2), stream);
}

}  // namespace lowbit::int4::detail
