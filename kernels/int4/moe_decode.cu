// MoE GEMMs on MMA-tiled expert stacks: the decode tile (decode_tile.cuh) in its MoE modes.
// GEMM1 (gate/up): a block takes the rows of one align block (8- or 16-row parts, gathered
// by sorted id) and one 64-column group of each half of w13 [E, 2I, H]: half of its warps
// stream the gate group, half the up group, and silu(gate) * up is formed in the reduction
// epilogue (no [M*topk, 2I] intermediate). GEMM2 (down): the same over w2 [E, H, I] with
// the routing weight applied to the fp32 slot rows (moe_sum adds them in slot order).
// Padding rows cost no K loop; blocks past num_post_padded exit before loading anything.
// Called by moe_gemm1.cu / moe_gemm2.cu when the weight is MMA-tiled.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/int4/decode_tile.cuh"

namespace lowbit::int4::detail {

// LOWBIT_INT4_MOE_WIDE=0 / 2 (read once; measurements): GEMM2's wide mode never / always
// (default 1: when K is short, see launch_moe_decode).
int env_moe_wide() {
  static const int v = kern::env_012("LOWBIT_INT4_MOE_WIDE");  // anything but 0 / 2 reads as the default
  return v;
}

namespace {
std::atomic<int> g_single_max_m_override{0};
}  // namespace

int moe_single_max_m(long long w13_elems) {
  static const int v = [] {  // -1: the rule
    if (!kern::env_on_unless_zero("LOWBIT_INT4_MOE_SINGLE")) return 0;
    const char* e = std::getenv("LOWBIT_INT4_MOE_SINGLE_MAXM");
    const int n = e ? std::atoi(e) : 0;
    return n >= 1 && n <= kMoeSingleMaxM ? n : -1;
  }();
  const int o = g_single_max_m_override.load(std::memory_order_relaxed);
  if (o > 0) return o;
  if (v >= 0) return v;
  return w13_elems <= kMoeSingleSmallW13 ? kMoeSingleSmallMaxM : kMoeSingleDefaultMaxM;
}

void set_moe_single_max_m(int m) { g_single_max_m_override.store(m >= 1 && m <= kMoeSingleMaxM ? m : 0); }

// The single-token GEMM2's slot sum in a cluster of its topk blocks (DecodeParams::ysum) up to
// this topk. Measured on H200 against the global counter (session 15, round EH, M = 1, two
// runs each, us): DeepSeek-V2-Lite (topk 6) 21.2 / 21.3 vs 22.2 / 22.3, Mixtral-8x7B (topk 2)
// 64.4 / 64.6 vs 63.9 / 64.4, but Qwen3-30B-A3B (topk 8) TP1 22.8 / 22.7 vs 19.6 / 19.6 and TP2
// 16.9 / 16.9 vs 15.9 / 15.9: a cluster of 8 blocks must find 8 SMs of one GPC with room while
// GEMM1's blocks still hold them, which delays GEMM2's early weight requests (not verified).
constexpr int kMoeYsumMaxTopk = 6;
// LOWBIT_INT4_MOE_YSUM=0 / 2 (read once; measurements and tests): never / up to topk 8 (the
// largest cluster), instead of up to kMoeYsumMaxTopk.
int moe_ysum_max_topk() {
  static const int v = [] {
    const int n = kern::env_012("LOWBIT_INT4_MOE_YSUM");  // anything but 0 / 2 reads as the default
    return n == 0 ? 0 : n == 2 ? kern::kClusterMaxSplits : kMoeYsumMaxTopk;
  }();
  return v;
}

// LOWBIT_INT4_MOE_W13_SHAPE=W:S (read once; measurements): GEMM1's (gate / up) block warps (4 or
// 8) and split-K cluster size (1..8) on both paths instead of decode_shape()'s choice; GEMM2 keeps
// its own. {0, 0} when unset or malformed.
kern::DecodeShape env_moe_w13_shape() {
  static const kern::DecodeShape v = [] {
    const char* e = std::getenv("LOWBIT_INT4_MOE_W13_SHAPE");
    int w = 0, sp = 0;
    char tail = 0;
    if (e == nullptr || std::sscanf(e, "%d:%d%c", &w, &sp, &tail) != 2 || (w != 4 && w != 8) || sp < 1 ||
        sp > kern::kClusterMaxSplits)
      return kern::DecodeShape{0, 0};
    return kern::DecodeShape{w, sp};
  }();
  return v;
}

// LOWBIT_INT4_MOE_W13_ROOM=0 (read once; measurements): GEMM1 keeps decode_shape()'s 8-warp pairs
// before a wide GEMM2 (kern::moe_gate_up_shape's exception off).
bool env_moe_w13_room() {
  static const bool v = kern::env_on_unless_zero("LOWBIT_INT4_MOE_W13_ROOM");
  return v;
}

// LOWBIT_INT4_MOE_LARGE_WARPS=0 (read once; measurements): large experts keep decode_shape()'s
// 4-warp blocks past one wave (kern::moe_large_expert_shape off).
bool env_moe_large_warps() {
  static const bool v = kern::env_on_unless_zero("LOWBIT_INT4_MOE_LARGE_WARPS");
  return v;
}

// Where MoE GEMM2 (down) lets the next launch start (DecodeParams::pdl_trigger): once its warps'
// first weight batches have landed, so that the next launch's blocks do not take the SMs' slots
// and stream against them. GEMM1 (gate/up) triggers at its start, a compile-time 0 in the
// kernel: GEMM2 then routes and streams its first batches during GEMM1's tail, and every
// GEMM1 position comes after its wait for the routing, which GEMM2's early ids and single-token
// routing rely on. Measured (session 55, 1x H100, three alternated passes, bench moe --path
// fused, M = 1 / 8 / 16 on six layers, a build where both were runtime values): GEMM2 after its
// first batch vs at its start, Qwen3 TP2 M = 1 15.6 vs 16.0 us, Qwen3.5-35B-A3B M = 1 18.5 vs
// 18.9, the other 16 rows 0.993-1.008x (after its K loop: 0.977-1.009x); GEMM1 after its first
// batch 0.98-1.04x, after its K loop 0.99-1.18x. Confirmed with this code (rule vs 0, M = 1..16):
// Qwen3.5 M = 2 22.4 vs 25.5 us, the 0.975 / 0.980x above again, 27 rows 0.987-1.010x (Qwen3
// TP1 M = 1 / 2 +0.1 us, the largest loss). LOWBIT_INT4_MOE_TRIGGER=0 / 1 / 2 (read
// once; measurements) sets GEMM2's position: the start, after the first batch, after the K loop.
int moe_down_pdl_trigger() {
  static const int v = kern::env_012("LOWBIT_INT4_MOE_TRIGGER");
  return v;
}

bool moe_early_down_enabled() {
  static const bool v = kern::env_on_unless_zero("LOWBIT_INT4_MOE_EARLY");
  return v;
}

cudaError_t launch_moe_decode(bool gate_up, const void* x, const KernelWeightsView& w, const int32_t* sorted_ids,
                              const int32_t* expert_ids, const int32_t* npp, const float* topk_weights, int m, int topk,
                              int bm, void* out, cudaStream_t stream, const MoeSingleToken* single, bool ids_early) {
  const WeightShape& s = w.shape;
  kern::DecodeParams p;
  p.x = x;
  p.y = out;
  p.qw = static_cast<const uint4*>(w.qweight);
  p.scales = w.scales;
  p.zeros = w.zeros;
  p.M = m;
  p.N = s.n;
  p.K = s.k;
  p.G = s.group_len();
  p.sorted_ids = sorted_ids;
  p.expert_ids = expert_ids;
  p.npp = npp;
  p.topk_weights = topk_weights;
  p.topk = topk;
  p.BM = bm;
  const int nt = moe_decode_part_rows(bm) / 8;
  p.parts = kern::ceil_div(bm, 8 * nt);
  p.qw_estride = tiled_expert_uint4s(s);
  p.sc_estride = expert_scale_entries(s);
  p.half_groups = s.n / 2 / kMmaTileCols;
  if (single != nullptr) {
    // The single-token path's grid: one block row per pick (grid.y = M * topk below).
    if (m < 1 || m > kMoeSingleMaxM || bm != 8 || single->experts > 256 || topk > 32) return cudaErrorInvalidValue;
    p.single = *single;
    if (gate_up) p.single.y = nullptr;  // the sum is GEMM2's
    p.ysum = !gate_up && topk <= moe_ysum_max_topk() ? 1 : 0;  // launch() keeps it where the cluster can run
  }
  p.ids_early = !gate_up && ids_early ? 1 : 0;
  p.pdl_trigger = gate_up ? 0 : moe_down_pdl_trigger();
  // The four-launch path's grid rows decide the block shape and GEMM2's mode on either path,
  // so that the single-token path at M > 1 runs the same K partition (bit-identical sums).
  const int64_t align_y = moe_decode_grid_rows(m, topk, s.experts, bm);
  if (align_y > 65535) return cudaErrorInvalidConfiguration;  // validate_moe_gemm refuses it first
  const int64_t grid_y = single != nullptr ? static_cast<int64_t>(m) * topk : align_y;
  const int blocks = static_cast<int>(align_y / p.parts);  // align blocks that can hold rows
  const int groups = gate_up ? p.half_groups : s.n / kMmaTileCols;
  // Planning estimate of the busy units: at most one align block per expert at decode sizes.
  const int busy = (blocks < s.experts ? blocks : s.experts) * p.parts * groups;
  // GEMM2 with a short K: each warp a column group's whole K (kern::moe_down_wide in
  // decode_plan.h says when that pays). GEMM1 asks the same of the GEMM2 that follows it (K = I =
  // w13's N / 2, H / 64 groups; the same align blocks and parts), whose wide blocks, when they are
  // one wave, want free slots (kern::moe_gate_up_shape).
  const int sms = kern::current_sm_count();
  const int wide_mode = env_moe_wide();
  const int down_k = gate_up ? s.n / 2 : s.k, down_groups = gate_up ? s.k / kMmaTileCols : groups;
  const int down_blocks = kern::moe_down_wide_blocks(blocks, s.experts, p.parts, down_groups);
  const bool down_wide = wide_mode == 2 || (wide_mode == 1 && kern::moe_down_wide(down_k, down_blocks, sms));
  p.wide = !gate_up && down_wide ? 1 : 0;
  const kern::DecodeGrid gr{1, static_cast<int>(grid_y), p.wide ? kern::ceil_div(groups, 4) : groups};
  const kern::DecodeTiles tiles = nt == 1 ? kern::DecodeTiles::kRows8 : kern::DecodeTiles::kRows16;
  kern::DecodeShape shape = gate_up && nt == 1
                                ? kern::moe_gate_up_shape(busy, down_wide && env_moe_w13_room(), down_blocks, sms)
                                : kern::decode_shape(busy, nt, sms);
  if (nt == 1 && env_moe_large_warps())
    shape = kern::moe_large_expert_shape(shape, m, busy, static_cast<long long>(s.n) * s.k, sms);
  if (gate_up && env_moe_w13_shape().warps != 0) shape = env_moe_w13_shape();
  return gate_up ? kern::launch_dtype<kern::kDecMoeGateUp>(s.act, p, tiles, shape, gr, stream)
                 : kern::launch_dtype<kern::kDecMoeDown>(s.act, p, tiles, shape, gr, stream);
}

#ifdef LOWBIT_INT4_TRACE
void moe_trace_dump(const char* path) { kern::trace_dump_ring(path, "moe_trace_dump"); }
#endif

}  // namespace lowbit::int4::detail
