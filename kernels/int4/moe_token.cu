// The single-token MoE layer in one persistent launch (fused_moe at M = 1 on MMA-tiled
// experts, when the layer's weights fit the plan below; docs/int4-kernels.md, "Session 15").
//
// Why: a timeline of the two-launch single-token path (moe_decode.cu; %globaltimer stamps per
// block, Qwen3-30B-A3B TP1, 20 us per layer for ~5 us of weight bytes) spent most of its time
// in hand-offs, not in streaming: the routing after the previous layer (~1.5 us), GEMM1's
// reduction epilogue behind its cluster partner (~3 us), the grid boundary before GEMM2 could
// read the intermediate, GEMM2's epilogue and the slot sum (~4 us), each while the memory
// system idled. Here one cooperative grid (one block per SM) routes the token in every block,
// requests every weight batch of both GEMMs into per-warp rings at once (GEMM2's batches flow
// in as GEMM1's stages drain), and hands work on through counters instead of launches.
//
// Work: "pieces", each a warp's share of one 64-column group: the decode tile's own partition
// of K (launch_moe_decode's plan: per column group `splits` ranks x `warps` warps, or one warp
// over all of K in the wide mode), so that every partial sum, and the order they are added in,
// is the decode tile's. Piece i goes to warp i % (blocks x 8) (warps interleaved over blocks),
// GEMM1's pieces first. A piece stores its 64 row-0 sums (fp32) in the workspace and counts
// itself on its unit's counter; the last one of a unit adds the unit's pieces in the decode
// tile's order (warps of a rank left to right, then ranks) and finishes it:
// - GEMM1 unit (pick b, column group c, both halves): inter[b, c] = act(silu(gate) * up),
//   then ready[b] += 1;
// - GEMM2 unit (column group c of y, all picks): y[c] = act(sum over picks in pick order of
//   weight_b * sum_b), moe_sum's expression.
// GEMM2 pieces of pick b wait (bounded) for ready[b] == I / 64 before reading inter[b]. The
// outputs are bit-identical to the four-launch path (routing, GEMM1, GEMM2, sum), as the
// two-launch path's are (tests: Int4MoeSingleToken).
// Counters are zeroed by block 0 at the start of every call, behind a grid barrier that
// overlaps the first weight batches' flight (no state survives between calls).
#include <cooperative_groups.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/int4/decode_tile.cuh"

namespace lowbit::int4 {
namespace kern {
namespace {

constexpr int kTokWarps = 8, kTokThreads = 32 * kTokWarps;
constexpr int kTokSteps = 8;                 // K steps per batch (the decode tile's D)
constexpr int kTokBatchBytes = kTokSteps * 512;  // one batch of one column group's words
constexpr int kTokMaxStages = 16;
constexpr int kTokMaxPer = 16;  // pieces per column group and half (the decode plans: <= 2 ranks x 8 warps)

// One GEMM's pieces. Piece index (within the GEMM) = ((((b * groups + c) * halves + h) *
// splits + r) * warps + w): pick b, column group c of a half h (gate/up: 0 gate, 1 up), rank
// r, warp w of the decode tile's partition.
struct TokGemm {
  const char* qw = nullptr;        // MMA-tiled words, expert 0
  const uint16_t* scales = nullptr;
  const uint16_t* zeros = nullptr;  // nullptr: symmetric
  size_t qw_estride = 0;           // bytes per expert
  size_t sc_estride = 0;           // scale entries per expert
  int N = 0, K = 0, gsteps = 0;
  int groups = 0, halves = 1, splits = 1, warps = 1;
  int pieces = 0;
};

struct TokParams {
  const void* x = nullptr;          // [H]
  const float* logits = nullptr;    // [E]
  int experts = 0, topk = 0, renorm = 0;
  TokGemm g[2];                     // gate/up, down
  void* inter = nullptr;            // [topk, I] act dtype
  float* part = nullptr;            // [g[0].pieces + g[1].pieces][64]
  float* slots = nullptr;           // [topk, H] fp32: GEMM2's slot rows (weight x sum)
  // [topk * I/64 (GEMM1 units) + topk (ready) + topk * H/64 (GEMM2 units) + H/64 (slot sums)]
  int* counters = nullptr;
  int num_counters = 0;
  void* y = nullptr;                // [H]
  int* error = nullptr;             // nonzero after a bounded wait timed out (outputs are NaN then)
  int stages = 1;                   // weight stages per warp
  int handoff_lane = 0;             // the lane that counts, polls and publishes (lane 0 issues the copies)
  int relaxed = 0;                  // EXPERIMENT ONLY: hand-offs without release / acquire (not a valid protocol)
  unsigned long long timeout_ns = 0;
};

struct Piece {
  int gemm, b, cgrp, unit, s0, nb;
};

__device__ __forceinline__ Piece piece_at(const TokParams& p, int i) {
  Piece q;
  q.gemm = i < p.g[0].pieces ? 0 : 1;
  const TokGemm& g = p.g[q.gemm];
  int j = q.gemm == 0 ? i : i - p.g[0].pieces;
  const int w = j % g.warps;
  j /= g.warps;
  const int r = j % g.splits;
  j /= g.splits;
  const int h = j % g.halves;
  j /= g.halves;
  const int c = j % g.groups;
  q.b = j / g.groups;
  q.cgrp = c + h * g.groups;
  q.unit = q.gemm == 0 ? q.b * g.groups + c : c;
  // The decode tile's ranges: whole batches, the rank's share cut in `warps` pieces.
  const int batches = g.K / (kMmaTileK * kTokSteps);
  const int bb0 = r * batches / g.splits, bb1 = (r + 1) * batches / g.splits;
  const int wb0 = bb0 + w * (bb1 - bb0) / g.warps, wb1 = bb0 + (w + 1) * (bb1 - bb0) / g.warps;
  q.s0 = wb0 * kTokSteps;
  q.nb = wb1 - wb0;
  return q;
}

__device__ __forceinline__ unsigned long long tok_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The hand-offs use release / acquire at GPU scope, by lane 0 after a __syncwarp (cumulative:
// the other lanes' stores before the barrier are released with lane 0's). Polling uses relaxed
// loads and one acquire fence after the flag is seen: an acquire load per poll invalidates the
// SM's L1 each time (measured: the whole layer 2x slower with 1000 polling warps).
__device__ __forceinline__ int ld_relaxed(const int* a) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(a) : "memory");
  return v;
}
__device__ __forceinline__ int atom_add_acq_rel(int* a, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(a), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void red_add_release(int* a, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(a), "r"(v) : "memory");
}
__device__ __forceinline__ void fence_acquire() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }

// A piece's (or slot row's) stores, then its count on `cnt`: whether it completed the unit
// of `unit_pieces` (then the unit's stores by every warp are visible to this one).
__device__ __forceinline__ bool last_to_arrive(int* cnt, int unit_pieces, int lane, int hl, int relaxed) {
  __syncwarp();
  int last = 0;
  if (lane == hl) last = (relaxed ? atomicAdd(cnt, 1) : atom_add_acq_rel(cnt, 1)) == unit_pieces - 1;
  last = __shfl_sync(0xFFFFFFFFu, last, hl);
  return last != 0;
}
// A unit's `n` pieces of one half (64 sums each, from `first` on) for columns lane and
// lane + 32: every load issued before any add (one latency, not n).
__device__ __forceinline__ void load_unit(const float* part, size_t first, int n, int lane, float (&x)[2][kTokMaxPer]) {
#pragma unroll
  for (int k = 0; k < kTokMaxPer; ++k)
#pragma unroll
    for (int c = 0; c < 2; ++c)
      x[c][k] = k < n ? __ldcg(part + (first + k) * kMmaTileCols + lane + 32 * c) : 0.f;
}
// Their sum in the decode tile's order: each rank's warps left to right, then the ranks.
__device__ __forceinline__ float fold_unit(const float (&x)[kTokMaxPer], int n, int warps) {
  float v = 0.f, rs = 0.f;
#pragma unroll
  for (int k = 0; k < kTokMaxPer; ++k) {
    if (k < n) {
      const int w = k % warps;
      rs = w == 0 ? x[k] : rs + x[k];
      if (w == warps - 1) v = k < warps ? rs : v + rs;
    }
  }
  return v;
}

template <typename T, bool kSym>
__global__ void __launch_bounds__(kTokThreads, 1) moe_token_kernel(const TokParams p) {
  namespace cg = cooperative_groups;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
#ifdef LOWBIT_INT4_TRACE
  unsigned long long tr_entry = trace_now(), tr_routed = 0, tr_sync = 0, tr_g1 = 0, tr_wait = 0, tr_pub = 0, tr_topk = 0;
#endif
  __shared__ int s_pick[32];
  __shared__ float s_wt[32];
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kScBytes = (kSym ? 1 : 2) * kMmaTileCols * 2;  // a batch's group row (+ zeros)
  const int S = p.stages;
  const int hl = p.handoff_lane;
  const uint32_t stage0 = smem_addr(smem) + static_cast<uint32_t>(warp * S * kTokBatchBytes);
  const uint32_t bar0 = smem_addr(smem) + static_cast<uint32_t>(kTokWarps * S * kTokBatchBytes + warp * S * 8);
  const uint32_t sc0 = smem_addr(smem) + static_cast<uint32_t>(kTokWarps * S * (kTokBatchBytes + 8) + warp * S * kScBytes);
  if (lane == 0)
    for (int st = 0; st < S; ++st) mbar_init(bar0 + 8 * st);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");

  // The logits (and x) come from the kernels before us.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (blockIdx.x == 0)  // the counters and the error word
    for (int i = threadIdx.x; i <= p.num_counters; i += kTokThreads) p.counters[i] = 0;
  if (warp == 0) {  // the routing kernel's top-k (the two-launch path's register sets)
    if (p.experts <= 128)
      topk_token_t<4>(p.logits, 0, p.experts, p.topk, p.renorm != 0, nullptr, s_wt, s_pick, lane);
    else
      topk_token_t<8>(p.logits, 0, p.experts, p.topk, p.renorm != 0, nullptr, s_wt, s_pick, lane);
    LOWBIT_TRACE_STAMP(tr_topk);
  }
  __syncthreads();

  const int nwarps = kTokWarps * static_cast<int>(gridDim.x);
  const int gw = warp * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x);
  const int total = p.g[0].pieces + p.g[1].pieces;

  // Issue side: the warp's batches in consumption order (its pieces in index order, each
  // piece's batches in K order), one bulk copy of words and one of the group row per batch.
  int ip = gw, ib = 0;
  Piece iq = piece_at(p, ip < total ? ip : 0);
  auto issue_next = [&](int stage) {
    while (ip < total && ib >= iq.nb) {
      ip += nwarps;
      ib = 0;
      if (ip < total) iq = piece_at(p, ip);
    }
    if (ip >= total) return;
    if (lane == 0) {
      const TokGemm& G = p.g[iq.gemm];
      const int e = s_pick[iq.b];
      const int sb = iq.s0 + ib * kTokSteps;
      const char* src = G.qw + static_cast<size_t>(e) * G.qw_estride +
                        (static_cast<size_t>(iq.cgrp) * (G.K / kMmaTileK) + sb) * 512;
      const uint32_t bar = bar0 + 8 * stage;
      mbar_arrive_expect_tx(bar, kTokBatchBytes + kScBytes);
      bulk_copy(stage0 + static_cast<uint32_t>(stage * kTokBatchBytes), src, kTokBatchBytes, bar);
      const size_t row = static_cast<size_t>(e) * G.sc_estride + static_cast<size_t>(sb / G.gsteps) * G.N +
                         iq.cgrp * kMmaTileCols;
      const uint32_t dst = sc0 + static_cast<uint32_t>(stage * kScBytes);
      bulk_copy(dst, G.scales + row, kMmaTileCols * 2, bar);
      if constexpr (!kSym) bulk_copy(dst + kMmaTileCols * 2, G.zeros + row, kMmaTileCols * 2, bar);
    }
    ++ib;
  };
  LOWBIT_TRACE_STAMP(tr_routed);
  for (int st = 0; st < S; ++st) issue_next(st);
  // Block 0's zeroed counters before any block counts (the copies above are in flight).
  cg::this_grid().sync();
  LOWBIT_TRACE_STAMP(tr_sync);

  const int I = p.g[0].groups * kMmaTileCols;
  int* const cnt1 = p.counters;
  int* const ready = cnt1 + p.topk * p.g[0].groups;
  int* const cnt2u = ready + p.topk;
  int* const cnt2 = cnt2u + p.topk * p.g[1].groups;
  float* const part = p.part;
  int stage = 0;
  uint32_t phase = 0;
  for (int i = gw; i < total; i += nwarps) {
    const Piece q = piece_at(p, i);
    const TokGemm& G = p.g[q.gemm];
    float acc[4][1][4], tot[4][1][4] = {}, accx[1][4];
    bool timed_out = false;
    if (q.nb > 0) {
      const uint32_t* xr;
      if (q.gemm == 0) {
        xr = static_cast<const uint32_t*>(p.x) + t;
      } else {
        // GEMM2 of pick b reads inter[b]: every GEMM1 unit of b must have stored its columns.
        const unsigned long long t0 = tok_now();
        if (lane == hl) {
          while (ld_relaxed(ready + q.b) < p.g[0].groups) {
            __nanosleep(32);
            if (tok_now() - t0 > p.timeout_ns) {
              timed_out = true;
              atomicExch(p.error, 1);
              break;
            }
          }
          if (!p.relaxed) fence_acquire();
        }
        timed_out = __shfl_sync(0xFFFFFFFFu, timed_out ? 1 : 0, hl) != 0;
#ifdef LOWBIT_INT4_TRACE
        if (tr_wait == 0) tr_wait = trace_now();
#endif
        xr = reinterpret_cast<const uint32_t*>(static_cast<const T*>(p.inter) + static_cast<size_t>(q.b) * I) + t;
      }
      // x fragments of one batch (every lane row 0: the token), one batch ahead of its MMAs.
      uint2 xa[kTokSteps][1], xn[kTokSteps][1];
      auto load_x = [&](uint2 (&xs)[kTokSteps][1], int sb) {
#pragma unroll
        for (int s = 0; s < kTokSteps; ++s) {
          const unsigned off = 8u * static_cast<unsigned>(sb + s);
          if (q.gemm == 0) {
            xs[s][0].x = __ldg(xr + off);
            xs[s][0].y = __ldg(xr + off + 4u);
          } else {
            xs[s][0].x = __ldcg(xr + off);
            xs[s][0].y = __ldcg(xr + off + 4u);
          }
        }
      };
      load_x(xn, q.s0);
      for (int bi = 0; bi < q.nb; ++bi) {
        const int sb = q.s0 + bi * kTokSteps;
#pragma unroll
        for (int s = 0; s < kTokSteps; ++s) xa[s][0] = xn[s][0];
        if (bi + 1 < q.nb) load_x(xn, sb + kTokSteps);
        mbar_wait(bar0 + 8 * stage, phase);
        const uint32_t st = stage0 + static_cast<uint32_t>(stage * kTokBatchBytes) + 16u * lane;
        uint4 wa[kTokSteps];
#pragma unroll
        for (int s = 0; s < kTokSteps; ++s) wa[s] = lds128(st + 512u * s);
        GroupParams gp;
        {
          const uint32_t sc = sc0 + static_cast<uint32_t>(stage * kScBytes) + 16u * g;
          const uint4 v = lds128(sc);
          gp.s[0] = v.x, gp.s[1] = v.y, gp.s[2] = v.z, gp.s[3] = v.w;
          if constexpr (!kSym) {
            const uint4 z = lds128(sc + kMmaTileCols * 2);
            gp.z[0] = z.x, gp.z[1] = z.y, gp.z[2] = z.z, gp.z[3] = z.w;
          }
        }
        __syncwarp();  // every lane has read the stage before it is refilled
        issue_next(stage);
        if (++stage == S) {
          stage = 0;
          phase ^= 1u;
        }
#pragma unroll
        for (int s = 0; s < kTokSteps; ++s) {
          uint2 xf[1] = {xa[s][0]};
          decode_step_mma<T, 1>(wa[s], xf, s == 0, acc, accx);
        }
        decode_fold<T, 1, kSym>(gp, acc, accx, tot);  // one window per batch (G >= 128)
      }
    }
#ifdef LOWBIT_INT4_TRACE
    if (q.gemm == 0) tr_g1 = trace_now();
#endif
    const float nan = __int_as_float(0x7FC00000);
    const int per = G.splits * G.warps;  // pieces per column group and half
    if (q.gemm == 1 && per == 1) {
      // Wide GEMM2: the piece is its (pick, column group) unit; its slot row straight away.
      if (t == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            p.slots[static_cast<size_t>(q.b) * p.g[1].N + q.cgrp * kMmaTileCols + frag_col(j, g, 2 * h)] =
                timed_out ? nan : s_wt[q.b] * tot[j][0][2 * h];
      }
    } else {
      // The piece's row-0 sums (lanes t == 0: columns 16 j + g + 8 h), NaN after a timeout.
      float* const mine = part + static_cast<size_t>(i) * kMmaTileCols;
      if (t == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) mine[frag_col(j, g, 2 * h)] = timed_out ? nan : tot[j][0][2 * h];
      }
      // Count it on its unit: GEMM1 (pick, column group) both halves, GEMM2 (pick, column group).
      int* const cnt = q.gemm == 0 ? cnt1 + q.unit : cnt2u + q.b * p.g[1].groups + q.unit;
      if (!last_to_arrive(cnt, G.halves * per, lane, hl, p.relaxed)) continue;
      // The unit's last piece adds its pieces in the decode tile's order. Lane l: columns l, l + 32.
      const size_t base = q.gemm == 0 ? static_cast<size_t>(q.unit) * 2 * per
                                      : p.g[0].pieces + (static_cast<size_t>(q.b) * G.groups + q.unit) * per;
      if (q.gemm == 0) {
        float xg[2][kTokMaxPer], xu[2][kTokMaxPer];
        load_unit(part, base, per, lane, xg);
        load_unit(part, base + per, per, lane, xu);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const float v = fold_unit(xg[k], per, G.warps), u = fold_unit(xu[k], per, G.warps);
          static_cast<T*>(p.inter)[static_cast<size_t>(q.b) * I + q.unit % G.groups * kMmaTileCols + lane + 32 * k] =
              Act<T>::from_float(v / (1.f + expf(-v)) * u);
        }
        __syncwarp();
        if (lane == hl) {
          if (p.relaxed)
            atomicAdd(ready + q.b, 1);
          else
            red_add_release(ready + q.b, 1);
        }
#ifdef LOWBIT_INT4_TRACE
        if (tr_pub == 0) tr_pub = trace_now();
#endif
        continue;
      }
      float x[2][kTokMaxPer];
      load_unit(part, base, per, lane, x);
#pragma unroll
      for (int k = 0; k < 2; ++k)  // the slot row: routing weight x sum (moe_decode's down epilogue)
        p.slots[static_cast<size_t>(q.b) * p.g[1].N + q.unit * kMmaTileCols + lane + 32 * k] =
            s_wt[q.b] * fold_unit(x[k], per, G.warps);
    }
    // GEMM2: the last of the topk slot rows of column group c adds them in slot order (moe_sum).
    const int c2 = q.gemm == 1 && per == 1 ? q.cgrp : q.unit;
    if (!last_to_arrive(cnt2 + c2, p.topk, lane, hl, p.relaxed)) continue;
    const float* const slot = p.slots + static_cast<size_t>(c2) * kMmaTileCols + lane;
    float sum[2] = {0.f, 0.f};
    for (int b0 = 0; b0 < p.topk; b0 += 8) {  // 8 slot rows' loads in flight at a time
      float v[2][8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          v[c][k] = b0 + k < p.topk ? __ldcg(slot + static_cast<size_t>(b0 + k) * p.g[1].N + 32 * c) : 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          if (b0 + k < p.topk) sum[c] += v[c][k];
    }
#pragma unroll
    for (int c = 0; c < 2; ++c)
      static_cast<T*>(p.y)[static_cast<size_t>(c2) * kMmaTileCols + lane + 32 * c] = Act<T>::from_float(sum[c]);
  }
#ifdef LOWBIT_INT4_TRACE
  if (lane == 0) {  // every warp
    unsigned long long* r = g_trace[atomicAdd(&g_trace_next, 1u) % kTraceRecords];
    r[0] = 3, r[1] = blockIdx.x, r[2] = warp, r[3] = tr_pub, r[4] = tr_topk;
    r[5] = tr_entry, r[6] = tr_routed, r[7] = tr_sync, r[8] = tr_g1, r[9] = tr_wait, r[10] = trace_now();
  }
#endif
}

}  // namespace
}  // namespace kern

namespace detail {
namespace {

// LOWBIT_INT4_MOE_TOKEN=0 turns the one-launch layer off (the two-launch path then runs).
int g_token_mode = -1;  // set_moe_token_mode: -1 environment, 0 off, 1 on
bool token_enabled() {
  if (g_token_mode >= 0) return g_token_mode != 0;
  static const bool v = kern::env_on_unless_zero("LOWBIT_INT4_MOE_TOKEN");
  return v;
}

struct TokPlan {
  kern::TokParams p;
  int blocks = 0;
  size_t smem = 0;
  bool ok = false;
};

// The pieces of one GEMM from launch_moe_decode's plan for the same call.
bool token_gemm(bool gate_up, const KernelWeightsView& w, int topk, kern::TokGemm* g) {
  MoeDecodePlan plan;
  MoeSingleToken st;  // a plan only: nothing is launched or read
  st.experts = w.shape.experts;
  if (launch_moe_decode(gate_up, nullptr, w, nullptr, nullptr, nullptr, nullptr, 1, topk, 8, nullptr, nullptr, &st,
                        false, &plan) != cudaSuccess)
    return false;
  const WeightShape& s = w.shape;
  g->qw = static_cast<const char*>(w.qweight);
  g->scales = w.scales;
  g->zeros = w.zeros;
  g->qw_estride = tiled_expert_uint4s(s) * 16;
  g->sc_estride = expert_scale_entries(s);
  g->N = s.n;
  g->K = s.k;
  g->gsteps = (s.group_len() < s.k ? s.group_len() : s.k) / kMmaTileK;
  g->halves = gate_up ? 2 : 1;
  g->groups = s.n / g->halves / kMmaTileCols;
  if (plan.wide) {
    g->splits = 1;
    g->warps = 1;
  } else {
    g->splits = plan.splits;
    g->warps = gate_up ? plan.warps / 2 : plan.warps;
  }
  g->pieces = topk * g->groups * g->halves * g->splits * g->warps;
  return true;
}

}  // namespace

void set_moe_token_mode(int mode) { g_token_mode = mode; }
#ifdef LOWBIT_INT4_TRACE
void moe_token_trace_dump(const char* path) {  // as moe_trace_dump (moe_decode.cu), this file's records
  constexpr int kF = 11;
  std::vector<unsigned long long> buf(static_cast<size_t>(kern::kTraceRecords) * kF);
  unsigned n = 0;
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpyFromSymbol(buf.data(), kern::g_trace, buf.size() * sizeof(buf[0])) != cudaSuccess ||
      cudaMemcpyFromSymbol(&n, kern::g_trace_next, sizeof(n)) != cudaSuccess)
    return;
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  std::fprintf(f, "mode,block,warp,g1pub,topk,entry,routed,gridsync,g1done,g2ready,end\n");
  const unsigned cap = kern::kTraceRecords, count = n < cap ? n : cap, first = n < cap ? 0 : n % cap;
  for (unsigned i = 0; i < count; ++i) {
    const unsigned long long* r = &buf[static_cast<size_t>((first + i) % cap) * kF];
    for (int k = 0; k < kF; ++k) std::fprintf(f, k + 1 < kF ? "%llu," : "%llu\n", r[k]);
  }
  std::fclose(f);
  const unsigned zero = 0;
  (void)cudaMemcpyToSymbol(kern::g_trace_next, &zero, sizeof(zero));
}
#endif
std::atomic<long long> g_token_launches{0};
long long moe_token_launches() { return g_token_launches.load(); }

// Scratch: the pieces' sums | GEMM2's slot rows | the counters and the error word.
size_t moe_token_scratch_bytes(int topk, int hidden, int inter) {
  // Pieces: per column group and half at most kTokMaxPer (launch_moe_decode's plans), 64 floats each.
  const size_t pieces = static_cast<size_t>(topk) * (2 * (inter / kMmaTileCols) + hidden / kMmaTileCols) * kern::kTokMaxPer;
  const size_t slots = static_cast<size_t>(topk) * hidden * 4;
  const size_t counters = static_cast<size_t>(topk) * (inter / kMmaTileCols + 1 + hidden / kMmaTileCols) +
                          hidden / kMmaTileCols + 1;
  return (pieces * kMmaTileCols * 4 + 255) / 256 * 256 + (slots + 255) / 256 * 256 + counters * 4;
}

cudaError_t launch_moe_token(const void* x, const float* logits, int experts, int topk, bool renorm,
                             const KernelWeightsView& w13, const KernelWeightsView& w2, void* inter, void* scratch,
                             size_t scratch_bytes, void* y, cudaStream_t stream, bool* taken) {
  *taken = false;
  if (!token_enabled()) return cudaSuccess;
  const WeightShape &s13 = w13.shape, &s2 = w2.shape;
  // Whole batches of 8 K steps with one scale window each (G >= 128 or per channel), the
  // single-token path's limits.
  const int H = s13.k, I = s2.k;
  if (H % (kMmaTileK * kern::kTokSteps) != 0 || I % (kMmaTileK * kern::kTokSteps) != 0) return cudaSuccess;
  for (const WeightShape* s : {&s13, &s2}) {
    const int gl = s->group_len() < s->k ? s->group_len() : s->k;
    if (gl % (kMmaTileK * kern::kTokSteps) != 0) return cudaSuccess;
  }
  const bool sym = w13.zeros == nullptr;  // as the decode tile tells them apart
  if (experts > 256 || topk > 32 || sym != (w2.zeros == nullptr)) return cudaSuccess;
  kern::TokParams p;
  if (!token_gemm(true, w13, topk, &p.g[0]) || !token_gemm(false, w2, topk, &p.g[1])) return cudaSuccess;
  for (const kern::TokGemm* g : {&p.g[0], &p.g[1]})
    if (g->splits * g->warps > kern::kTokMaxPer) return cudaSuccess;  // e.g. LOWBIT_INT4_DECODE_SPLITS=8
  const size_t part_bytes = (static_cast<size_t>(p.g[0].pieces + p.g[1].pieces) * kMmaTileCols * 4 + 255) / 256 * 256;
  const size_t slot_bytes = (static_cast<size_t>(topk) * H * 4 + 255) / 256 * 256;
  const int num_counters = topk * p.g[0].groups + topk + topk * p.g[1].groups + p.g[1].groups;
  const size_t need = part_bytes + slot_bytes + static_cast<size_t>(num_counters + 1) * 4;
  if (need > scratch_bytes) return cudaErrorInvalidValue;  // moe_token_scratch_bytes bounds every plan taken
  char* sp = static_cast<char*>(scratch);
  p.part = reinterpret_cast<float*>(sp);
  p.slots = reinterpret_cast<float*>(sp + part_bytes);
  p.counters = reinterpret_cast<int*>(sp + part_bytes + slot_bytes);
  p.num_counters = num_counters;
  p.error = p.counters + num_counters;
  p.x = x;
  p.logits = logits;
  p.experts = experts;
  p.topk = topk;
  p.renorm = renorm ? 1 : 0;
  p.inter = inter;
  p.y = y;
  p.timeout_ns = 1000ull * 1000ull * 1000ull;  // 1 s (the layer takes microseconds)

  const int sms = kern::current_sm_count();
  // Stages per warp: as many as shared memory holds (up to kTokMaxStages): at the decode
  // shapes that is every batch of every warp, all weight requests in flight at once.
  const int sc_bytes = (sym ? 1 : 2) * kMmaTileCols * 2;
  const int per_stage = kern::kTokWarps * (kern::kTokBatchBytes + 8 + sc_bytes);
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return cudaErrorInvalidDevice;
  int optin = 0;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return cudaErrorUnknown;
  const int static_bytes = 32 * 8 + 1024;  // s_pick, s_wt and the routing's registers' spill room
  int stages = (optin - static_bytes) / per_stage;
  if (stages > kern::kTokMaxStages) stages = kern::kTokMaxStages;
  // Measurements: LOWBIT_INT4_MOE_TOKEN_STAGES caps the stages, LOWBIT_INT4_MOE_TOKEN_LANE picks
  // the hand-off lane (read once).
  static const int env_stages = [] {
    const char* e = std::getenv("LOWBIT_INT4_MOE_TOKEN_STAGES");
    return e ? std::atoi(e) : 0;
  }();
  static const int env_lane = [] {
    const char* e = std::getenv("LOWBIT_INT4_MOE_TOKEN_LANE");
    const int v = e ? std::atoi(e) : 31;
    return v >= 0 && v < 32 ? v : 31;
  }();
  const int fit_stages = stages;
  if (env_stages >= 2 && env_stages < stages) stages = env_stages;
  p.handoff_lane = env_lane;
  p.relaxed = std::getenv("LOWBIT_INT4_MOE_TOKEN_RELAXED") != nullptr ? 1 : 0;
  if (stages < 2) return cudaSuccess;
  // Layers whose weights stream through the rings many times over (Mixtral-8x7B's experts:
  // ~40 batches per warp) are the two launches' (their tiles are built for streaming): the
  // one-launch layer takes a layer when the busiest warp's batches fit twice its ring (an
  // upper bound: pieces per warp x batches per piece, per GEMM).
  int most = 0;
  for (const kern::TokGemm* g : {&p.g[0], &p.g[1]}) {
    const int batches = g->K / (kMmaTileK * kern::kTokSteps), per = g->splits * g->warps;
    most += (g->pieces + sms * kern::kTokWarps - 1) / (sms * kern::kTokWarps) * ((batches + per - 1) / per);
  }
  if (most > 2 * fit_stages) return cudaSuccess;
  p.stages = stages;
  const size_t smem = static_cast<size_t>(stages) * per_stage;
  auto kernel = s13.act == DType::kF16 ? (sym ? kern::moe_token_kernel<__half, true> : kern::moe_token_kernel<__half, false>)
                                       : (sym ? kern::moe_token_kernel<__nv_bfloat16, true>
                                                  : kern::moe_token_kernel<__nv_bfloat16, false>);
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      e != cudaSuccess)
    return e;
  int per_sm = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kern::kTokThreads, smem);
      e != cudaSuccess)
    return e;
  if (per_sm < 1) return cudaSuccess;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(sms));
  cfg.blockDim = dim3(kern::kTokThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  // Cooperative: every block resident at once (the counters' waiters and the grid barrier
  // need it). Not a programmatic dependent launch: the blocks of the kernel before us hold the
  // shared memory ours need anyway, and an early launch could not start them.
  cudaLaunchAttribute attrs[1];
  attrs[0].id = cudaLaunchAttributeCooperative;
  attrs[0].val.cooperative = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, p);
  if (e == cudaSuccess) {
    *taken = true;
    ++g_token_launches;
  }
  return e;
}

}  // namespace detail
}  // namespace lowbit::int4
