// Dense W4A16 GEMM through the pipelined tile (pipelined_tile.cuh) on MMA-tiled weights:
// gemm()'s GemmPath::kPipelined and kAuto's choice for batched decode and short prefill. The
// 96- and 128-row wgmma tiles may run warp-specialized (pipelined_ws_tile.cuh: the same sums).
#include "kernels/int4/pipelined_ws_tile.cuh"

namespace lowbit::int4 {
namespace kern {

std::atomic<int> g_pipe_ws_override{0};
std::atomic<long long> g_pipe_ws_launches{0};
std::atomic<int> g_pipe_tail_override{0};

namespace {

// The 96- / 128-row tiles warp-specialized where pipe_ws_mode() / pipe_ws_rule() say so and the
// operands allow it (launch_typed_ws), else the tile of gemm_pipelined_kernel. The rule reads
// the plan of one block per SM (both kernels' occupancy) before any cluster-size fallback.
template <typename T, int BM, bool kSym>
cudaError_t launch_wg_rows(const PipeParams& prm, int sms, cudaStream_t stream) {
  const int mode = pipe_ws_mode();
  if (mode == 2 ||
      (mode == 1 && pipe_ws_rule(pipelined_plan(prm.M, prm.N, prm.K, BM, sms, 1, kPipeMaxSplits, env_pipe_splits())))) {
    bool launched = false;
    const cudaError_t e = launch_typed_ws<T, BM, kSym>(prm, sms, stream, &launched);
    if (e != cudaSuccess || launched) return e;
  }
  return launch_typed<T, BM, kSym, true>(prm, sms, stream);
}

// Rows per dense tile at M x N x K: the plan's choice (pipelined_rows_for) or the knob's, less
// the tiles this build / device / the knobs leave out (96 and 48 wgmma-only; 128 falls to 64
// without wgmma). The 256-row fallback is launch_rows' (it depends on the operands).
int dense_tile_rows(int m, int n, int k, bool wg, int sms) {
  int bm = env_pipe_rows() > 0 ? env_pipe_rows() : pipelined_rows_for(m, n, k, wg, sms, pipe_split_tail_planned());
  if (bm == 96 && !(wg && env_pipe_wg96())) bm = 128;
  if (bm == 128 && !wg) bm = 64;
  if (bm == 48 && !(wg && env_pipe_wg48())) bm = 64;
  return bm;
}

template <typename T, bool kSym>
cudaError_t launch_rows(const PipeParams& prm, int sms, cudaStream_t stream, void* ws, size_t ws_bytes) {
  const bool wg = pipe_wgmma_ok();
  int bm = dense_tile_rows(prm.M, prm.N, prm.K, wg, sms);
  if (bm == 16) return launch_typed<T, 16, kSym, false>(prm, sms, stream);
  if (bm == 32 && wg && env_pipe_wg32()) return launch_typed<T, 32, kSym, true>(prm, sms, stream, ws, ws_bytes);
  if (bm == 48) return launch_typed<T, 48, kSym, true>(prm, sms, stream, ws, ws_bytes);
  if (bm == 32) return launch_typed<T, 32, kSym, false>(prm, sms, stream);
  // 256-row tiles exist only warp-specialized (pipelined_ws_tile.cuh); where those cannot run
  // (LOWBIT_INT4_PIPE_WS=0, unaligned operands, no tensor map) the 128-row tile takes the GEMM.
  if (bm == 256 && wg && pipe_ws_mode() != 0) {
    bool launched = false;
    const cudaError_t e = launch_typed_ws<T, 256, kSym>(prm, sms, stream, &launched);
    if (e != cudaSuccess || launched) return e;
  }
  if (bm == 256) bm = wg ? 128 : 64;
  if (bm == 96) return launch_wg_rows<T, 96, kSym>(prm, sms, stream);
  if (bm == 128) return launch_wg_rows<T, 128, kSym>(prm, sms, stream);
  if (wg) return launch_typed<T, 64, kSym, true>(prm, sms, stream, ws, ws_bytes);
  return launch_typed<T, 64, kSym, false>(prm, sms, stream);
}

}  // namespace
}  // namespace kern

namespace detail {

bool pipelined_uses_wgmma() { return kern::pipe_wgmma_ok(); }

int device_sm_count() { return kern::current_sm_count(); }

void set_pipe_ws(int mode) { kern::g_pipe_ws_override.store(mode == 1 || mode == 2 ? mode : 0); }
void set_pipe_tail(int mode) { kern::g_pipe_tail_override.store(mode == 1 || mode == 2 ? mode : 0); }
void set_pipe_sk(int blocks) { kern::pipe_sk_override().store(blocks < 0 ? -1 : blocks); }
long long pipe_sk_launches() { return kern::pipe_sk_launch_count().load(std::memory_order_relaxed); }
size_t pipelined_sk_workspace_bytes(const WeightShape& s, int m) {
  // The stream-K launch launch_typed() would make at this M on this device: the same tile rows,
  // the same plan at the 32- / 48-row wgmma kernels' two blocks per SM, the same stream-K rule
  // (or forced block count); 0 where it takes none. (The rule never takes stream-K for a plan
  // that splits K; a forced block count does, and its size does not depend on the splits. With
  // LOWBIT_INT4_PIPE_SPLITS forcing splits that launch_typed then lowers to fit cluster
  // scheduling, the launch's rule may want stream-K where this says 0: it then runs the plan
  // without it, since the launch checks the workspace it is given. Default knobs never meet that:
  // splitting needs tiles <= SMs, stream-K tiles > SMs.)
  if (!kern::pipe_wgmma_ok() || s.n % kMmaTileCols != 0) return 0;
  const int sms = device_sm_count();
  const int bm = kern::dense_tile_rows(m, s.n, s.k, true, sms);
  if (bm != 48 && !(bm == 32 && kern::env_pipe_wg32())) return 0;
  const kern::PipePlan pl = kern::pipelined_plan(m, s.n, s.k, bm, sms, 2, kern::kPipeMaxSplits, kern::env_pipe_splits());
  const kern::PipeSkPlan sk = kern::pipe_sk_plan(pl, s.k, sms, 2, kern::pipe_sk_forced_blocks());
  return sk.blocks > 0 ? kern::pipe_sk_workspace_bytes(bm, sk.blocks) : 0;
}
bool pipe_split_tail_on() { return kern::pipe_split_tail_planned(); }

#ifdef LOWBIT_INT4_TRACE
void pipe_trace_dump(const char* path) {
  kern::trace_dump_csv(path, "pipe_trace_dump", kern::g_ws_trace, kern::g_ws_trace_next,
                       "bx,smid,splits,unit0,entry,waited,first,loop,epi,stored,end");
}
#endif
long long pipe_ws_launches() { return kern::g_pipe_ws_launches.load(std::memory_order_relaxed); }

cudaError_t launch_gemm_pipelined(const void* x, void* y, int m, const KernelWeightsView& w, int expert,
                                  cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  const WeightShape& s = w.shape;
  kern::PipeParams p;
  p.qw = static_cast<const uint4*>(w.qweight) + static_cast<size_t>(expert) * tiled_expert_uint4s(s);
  const size_t so = static_cast<size_t>(expert) * expert_scale_entries(s);
  p.scales = w.scales + so;
  p.zeros = w.zeros ? w.zeros + so : nullptr;
  p.x = x;
  p.y = y;
  p.M = m;
  p.N = s.n;
  p.K = s.k;
  p.ksteps = s.k / kMmaTileK;
  p.gsteps = s.group_len() / kMmaTileK;
  const int sms = device_sm_count();
  const bool sym = p.zeros == nullptr;
  if (s.act == DType::kBF16)
    return sym ? kern::launch_rows<__nv_bfloat16, true>(p, sms, stream, workspace, workspace_bytes)
               : kern::launch_rows<__nv_bfloat16, false>(p, sms, stream, workspace, workspace_bytes);
  return sym ? kern::launch_rows<__half, true>(p, sms, stream, workspace, workspace_bytes)
             : kern::launch_rows<__half, false>(p, sms, stream, workspace, workspace_bytes);
}

}  // namespace detail
}  // namespace lowbit::int4
