// Warp-specialized variant of the pipelined tile's 96- and 128-row wgmma tiles (dense GEMM,
// sm_90a), and the 256-row tile that exists only here (2 groups of 64 columns, one per consumer
// warpgroup on m64n256k16: each unpacked word feeds 256 rows; session 31): the same block tile (4
// adjacent 64-column groups x BM activation rows), the same
// math per warpgroup (wg_stage of pipelined_tile.cuh: each lane dequantizes its word wj, two
// wgmmas per K step, one group in flight) and the same epilogue, so the outputs are
// bit-identical to gemm_pipelined_kernel's; only the data movement differs.
//
// Why: in gemm_pipelined_kernel every warp both copies and computes. Each stage starts with a
// cp.async wait, a proxy fence and a block barrier, and the next stage's copies are issued
// before the first wgmma; both warpgroups leave the barrier together and dequantize at the
// same time, so the tensor pipe idles between their wgmma groups (Nsight Compute, 70b.gate_up
// M = 512: tensor pipe busy 58% of the cycles, issue slots 38%; docs/int4-kernels-sessions.md,
// "Session 26"). Here a producer warpgroup (warps 8-11) issues every copy through the TMA
// unit, one lane of warp w for column group w: per stage one bulk copy of the group's 4 K steps
// of words (2 KB, contiguous in the MMA-tiled layout), one per scale (and zero) row, and (warp
// 8) one tensor copy of the x tile (64 K x BM rows) that writes the 128 B swizzle the wgmma B
// descriptor names. Each stage has a `full` mbarrier (the producer warps' expect_tx arrivals,
// completed by the copies' bytes) and an `empty` one (one arrival per consumer thread once the
// wgmmas that read the stage have completed), so the consumer warpgroups (warps 0-7) never
// meet at a block barrier in the K loop, and the x tile needs no proxy fence (the copy engine
// writes it in the async proxy that wgmma reads).
//
// Registers: the producer warpgroup keeps 40 per thread and the consumers take 232 (setmaxnreg),
// above what the 128-row consumer code needs; both return to the launch's 168 for the epilogue.
// The host encodes the x tensor map on every call (cuTensorMapEncodeTiled, host only; under
// graph capture once, with the kernel's parameters).
// Rows past M: the tensor copy fills them with zeros (gemm_pipelined_kernel re-reads row
// M - 1); their sums are never stored, and a row's sums depend on that row of x only.
#pragma once

#include <cuda.h>          // CUtensorMap
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the encoder comes through the runtime's driver entry point

#include "kernels/int4/pipelined_tile.cuh"
#include "kernels/int4/trace_ring.cuh"

namespace lowbit::int4 {
namespace kern {
// detail::set_pipe_ws (tests): 0 as LOWBIT_INT4_PIPE_WS says, 1 never, 2 always. Defined in
// gemm_pipelined.cu.
extern std::atomic<int> g_pipe_ws_override;
extern std::atomic<long long> g_pipe_ws_launches;  // detail::pipe_ws_launches (tests): launches counted here
extern std::atomic<int> g_pipe_tail_override;     // detail::set_pipe_tail (tests): 0 env, 1 off, 2 on
namespace {

constexpr int kWsConsumerWarps = 8;                      // two warpgroups
constexpr int kWsThreads = 32 * kWsConsumerWarps + 128;  // + the producer warpgroup
constexpr int kWsConsumerThreads = 32 * kWsConsumerWarps;
// Registers per thread after setmaxnreg: the block is launched with 168 (65536 / 384, what
// __launch_bounds__(384, 1) allows); the producer warpgroup gives most of its share to the
// consumers (2 x 128 x 232 + 128 x 40 <= 65536). With 9 warps (one producer warp) an SM still
// allocates registers for 12 (warpgroups): ptxas held the tile to 168 and serialized the
// 128-row tile's wgmmas (C7512), and 224 per thread (__maxnreg__) did not launch.
constexpr int kWsProducerRegs = 40, kWsConsumerRegs = 232, kWsEpilogueRegs = 168;

// Shared memory: the stage layout of the wgmma tiles (PipeSmem<BM, true>: words, the x tile,
// scale and zero rows), with more stages: the producer refills a stage as soon as both
// warpgroups release it (after their next stage), so 6 of the 8 stages are loaded or in flight
// ahead of the one computed (3 of 5 in gemm_pipelined_kernel). 8 stages: 209 KB at 128 rows
// (round RD: 0.83-0.88x the pipelined tile's time with 8, 0.87-0.91x with 6 in round RC).
template <int BM>
struct PipeWsSmem : PipeSmem<BM, true, pipe_tile_groups(BM)> {
  using Base = PipeSmem<BM, true, pipe_tile_groups(BM)>;
  // 256-row tiles (37 KB stages): 6.
  static constexpr int kStages = BM == 256 ? 6 : kPipeWsStages;
  static constexpr int kTotal = (Base::kStage * kStages > Base::kEpi ? Base::kStage * kStages : Base::kEpi) + 1024;
  static_assert(kTotal <= 227 * 1024, "one block per SM");
};

// MoE modes (128-row align blocks; fused_moe's prefill layer, moe_pipelined.cu): x is a matrix
// in the align order (row b = the row of sorted slot b: GEMM1 reads x gathered by
// moe_gather_rows, GEMM2 the inter rows GEMM1 stored in that order), so an align block's rows are
// one tensor-copy box like a dense tile's. The block order, the routing wait, the ids and the
// expert are gemm_pipelined_kernel's (raster groups; padding ids -1; no split-K). Session 28
// gathered the rows by cp.async from the producer threads instead and was 1.07-1.30x slower than
// gemm_pipelined_kernel (docs/int4-kernels-sessions.md).
#ifdef LOWBIT_INT4_TRACE
// Timeline probes of the dense mode (a measurement build only: -DLOWBIT_INT4_TRACE=1; the default
// build has none of this): block 0..n's consumer thread 0 writes one record of %globaltimer stamps
// into this translation unit's ring at its end (gemm_pipelined.cu's pipe_trace_dump copies it
// out through trace_ring.cuh; bench gemm with LOWBIT_INT4_TRACE_OUT=prefix). Fields: blockIdx.x, smid, splits, unit0,
// then entry, the producer's griddepcontrol.wait returned, the first stage landed (consumer 0),
// K loop done, epilogue barrier passed, stores done, end.
constexpr int kWsTraceRecords = 1 << 15;
__device__ unsigned long long g_ws_trace[kWsTraceRecords][11];
__device__ unsigned int g_ws_trace_next;
#endif

template <int MODE>
struct PipeWsParams {
  PipeParamsFor<MODE> p;
  CUtensorMap xmap;  // x [M, K]: boxes of 64 K x BM rows in the 128 B swizzle (encode_x_map)
  int unit0 = 0;     // dense: the launch's first tile (a split tail's second launch; pipe_split_tail)
};

template <typename T, int BM, bool kSym, int MODE = kPipeDense>
__global__ void __launch_bounds__(kWsThreads, 1)
    gemm_pipelined_ws_kernel(const __grid_constant__ PipeWsParams<MODE> w) {
  constexpr bool kMoe = MODE != kPipeDense, kGateUp = MODE == kPipeMoeGateUp;
  const PipeParamsFor<MODE>& p = w.p;
  using L = PipeWsSmem<BM>;
  constexpr int S = L::kStages;
  constexpr int NT = BM / 8;
  // 64-column groups per block: 4, or 2 for the 256-row tile (one per consumer warpgroup, m64n256k16).
  constexpr int G = pipe_tile_groups(BM);
  constexpr int GW = G / 2;  // groups per consumer warpgroup
  static_assert(!kMoe || G == kPipeWarps, "MoE modes: 4 groups per block (gate/up pairs)");
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2 * S];  // full[0, S), empty[S, 2S)
  // warp_id through a shuffle from lane 0: ptxas then knows it is warp-uniform, so the role
  // branch below is not a divergent path around the consumers' wgmmas.
  const int tid = threadIdx.x, warp_id = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
#ifdef LOWBIT_INT4_TRACE
  __shared__ unsigned long long s_tr[7];
  if (tid == 0) s_tr[0] = trace_now();
#endif
  const int rank = static_cast<int>(blockIdx.x % p.splits);
  const int unit = static_cast<int>(blockIdx.x / p.splits) + w.unit0;
  int rt = unit % p.row_tiles;
  int ct = unit / p.row_tiles;
  // MoE: the expert's offsets into the weight stacks (dense: 0, so its code reads p's pointers
  // where it used them before the MoE modes: the same PTX but for the kernel's name).
  size_t w_off = 0, s_off = 0;
  __shared__ int s_ids[kMoe ? BM : 1];
  if constexpr (kMoe) {
    const PipeTile tile = moe_raster_tile(static_cast<int>(blockIdx.x), p.row_tiles, p.col_tiles, p.raster_rows);
    rt = tile.rt;
    ct = tile.ct;
    // ids_early (down): the ids are complete at launch (see gemm_pipelined_kernel); x (inter) is
    // waited for below, before its first tensor copy.
    if (!(MODE == kPipeMoeDown && p.ids_early != 0)) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int npp = __ldg(p.npp), e = __ldg(p.expert_ids + rt);
    if (rt * BM >= npp || e < 0) return;  // the whole block, before any barrier
    for (int i = tid; i < BM; i += kWsThreads) {
      const int id = __ldg(p.sorted_ids + static_cast<size_t>(rt) * BM + i);
      s_ids[i] = id >= 0 && id < p.P ? id : -1;
    }
    w_off = static_cast<size_t>(e) * p.qw_estride;
    s_off = static_cast<size_t>(e) * p.sc_estride;
  }
  const int m0 = rt * BM;
  const int s_begin = rank * p.split_steps;
  const int s_end = min(p.ksteps, s_begin + p.split_steps);
  const int nstages = s_begin < s_end ? (s_end - s_begin + kPipeStageSteps - 1) / kPipeStageSteps : 0;
  const uint32_t sbase = (smem_addr(smem) + 1023u) & ~1023u;  // the swizzled x tiles: 1024 B aligned
  unsigned char* const sgen = smem + (sbase - smem_addr(smem));
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[S]);
  // The block's column groups that exist (the last column tile may hold fewer than 4; MoE: the
  // consumers multiply all 4, as in gemm_pipelined_kernel, and the epilogue stores the columns
  // that exist).
  const int ng = kMoe ? G : min(G, p.N / 64 - ct * G);
  if (tid == 0) {
    for (int i = 0; i < S; ++i) {
      mbar_init<4>(full0 + 8 * i);  // one arrival per producer warp
      mbar_init<kWsConsumerThreads>(empty0 + 8 * i);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the copy engine
  }
  __syncthreads();
  float* epi = reinterpret_cast<float*>(sgen);

  if (warp_id >= kWsConsumerWarps) {
    // ---- producer warpgroup: lane 0 of warp pw issues the copies of column group pw (its
    // words, scale and zero rows), warp 0's also the x tile; each arrives once per stage on
    // the stage's full barrier with its bytes. (One lane issuing all of a stage's 9-13 copies,
    // each behind the address arithmetic, took longer than the consumers' stage: 1.14-1.22x
    // the pipelined tile's time, round RB.)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWsProducerRegs));
    const int pw = warp_id - kWsConsumerWarps;
    if (lane == 0) {
      // Column group pw of the block (gate/up: slots 0, 1 gate, 2, 3 up; see pipelined_tile.cuh).
      bool has_group = pw < ng;
      int group = ct * G + pw;
      if constexpr (kGateUp) {
        group = pw < 2 ? 2 * ct + pw : p.half_groups + 2 * ct + pw - 2;
        has_group = 2 * ct + (pw & 1) < p.half_groups;
      } else if constexpr (kMoe) {
        has_group = group < p.N / 64;
      }
      const uint4* wsrc = p.qw + w_off + (static_cast<size_t>(group) * p.ksteps + s_begin) * 32;
      const size_t scol = static_cast<size_t>(group) * 64;
      const uint32_t wdst = static_cast<uint32_t>(L::kW + pw * kPipeStageSteps * 512);
      const uint32_t sdst = static_cast<uint32_t>(L::kS + pw * 2 * 128), zdst = static_cast<uint32_t>(L::kZ + pw * 2 * 128);
      auto issue = [&](int it, bool weights, bool xtile) {
        const int s0 = s_begin + it * kPipeStageSteps, ns = min(kPipeStageSteps, s_end - s0);
        const int nr = p.gsteps == 2 && ns > 2 ? 2 : 1;  // scale rows: two groups per stage at G = 32
        const uint32_t st = sbase + static_cast<uint32_t>((it % S) * L::kStage), bar = full0 + 8u * (it % S);
        if (weights) {
          const uint32_t bytes = (has_group ? static_cast<uint32_t>(ns * 512 + nr * (kSym ? 128 : 256)) : 0u) +
                                 (pw == 0 ? static_cast<uint32_t>(BM * 128) : 0u);
          mbar_arrive_expect_tx(bar, bytes);
          if (has_group) {
            bulk_copy(st + wdst, wsrc + static_cast<size_t>(it) * kPipeStageSteps * 32, static_cast<uint32_t>(ns * 512),
                      bar);
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              if (r >= nr) break;
              const size_t src = static_cast<size_t>(s0 / p.gsteps + r) * p.N + scol;
              bulk_copy(st + sdst + 128u * r, p.scales + s_off + src, 128, bar);
              if constexpr (!kSym) bulk_copy(st + zdst + 128u * r, p.zeros + s_off + src, 128, bar);
            }
          }
        }
        if (xtile)
          asm volatile(
              "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
              "[%4];\n" ::"r"(st + static_cast<uint32_t>(L::kX)),
              "l"(reinterpret_cast<uint64_t>(&w.xmap)), "r"(s0 * 16), "r"(m0), "r"(bar)
              : "memory");
      };
      // The weights do not depend on the previous kernel: the first S stages' are requested
      // before griddepcontrol.wait, their x tiles after it.
      const int first = min(nstages, S);
      for (int it = 0; it < first; ++it) issue(it, true, false);
      if (pw == 0) {
        asm volatile("griddepcontrol.wait;\n" ::: "memory");
#ifdef LOWBIT_INT4_TRACE
        s_tr[1] = trace_now();
#endif
        for (int it = 0; it < first; ++it) issue(it, false, true);
      }
      for (int it = S; it < nstages; ++it) {
        mbar_wait(empty0 + 8u * (it % S), static_cast<uint32_t>(it / S - 1) & 1u);  // both warpgroups done with it
        issue(it, true, pw == 0);
      }
    }
    __syncwarp();
    // Back to the launch's share for the epilogue (the consumers give theirs back first).
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWsEpilogueRegs));
  } else {
    // ---- consumers: warpgroup wgi multiplies groups 2 wgi, 2 wgi + 1 ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWsConsumerRegs));
    const int wgi = warp_id >> 2, warp = warp_id & 3, g = lane >> 2, t = lane & 3;
    const int wj = (warp + (lane >> 3)) & 3;  // this lane's word (see gemm_pipelined_kernel)
    float acc[GW][NT][4];
#pragma unroll
    for (int j = 0; j < GW; ++j)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][n][e] = 0.f;
    const PipeLane ln{static_cast<uint32_t>(L::kW + wgi * GW * kPipeStageSteps * 512 + lane * 16 + wj * 4), 0u,
                      static_cast<uint32_t>(L::kS + wgi * GW * 256 + g * 16 + wj * 4),
                      static_cast<uint32_t>(L::kZ - L::kS), p.gsteps == 2 ? 128u : 0u};
    for (int it = 0; it < nstages; ++it) {
      mbar_wait(full0 + 8u * (it % S), static_cast<uint32_t>(it / S) & 1u);
#ifdef LOWBIT_INT4_TRACE
      if (it == 0 && tid == 0) s_tr[2] = trace_now();
#endif
      const uint32_t st = sbase + static_cast<uint32_t>((it % S) * L::kStage);
      if (s_end - (s_begin + it * kPipeStageSteps) >= kPipeStageSteps)
        wg_stage<T, NT, kPipeStageSteps, kSym, GW>(acc, st, ln, st + L::kX);
      else
        wg_stage<T, NT, 2, kSym, GW>(acc, st, ln, st + L::kX);
      // wg_stage ends with wgmma.wait_group 1: every wgmma of stage it - 1 has read its operands.
      // Every consumer thread arrives: an arrival releases only the arriving thread's own reads
      // (PTX memory model), so one lane per warp would leave its warp's other reads of the
      // stage unordered before the refill (compute-sanitizer racecheck reported those pairs,
      // rounds RE / RF). The proxy fence orders the generic reads before the copy engine's
      // (async proxy) writes.
      if (it > 0) {
        fence_proxy_async();
        mbar_arrive(empty0 + 8u * ((it - 1) % S));
      }
    }
    wg_wait<0>();
#ifdef LOWBIT_INT4_TRACE
    if (tid == 0) s_tr[3] = trace_now();
#endif
    // y may still be read by the previous kernel: wait for it (it has completed by now: the
    // producer waited before the first x tile) before the stores.
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    // Every consumer is done with the stages, and every copy the producer issued has landed
    // (each stage's full barrier was waited for): the epilogue reuses them.
    asm volatile("bar.sync 1, %0;\n" ::"n"(kWsConsumerThreads) : "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    // Fragment (j, n): group 2 wgi + j, the warp's rows 16 warp + g (+8), which hold columns
    // 16 wj + g (+8); activation rows 8n + 2t (+1).
#pragma unroll
    for (int j = 0; j < GW; ++j)
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        if (GW * wgi + j >= ng) continue;
        const int col = 64 * (GW * wgi + j) + 16 * wj + g, row = 8 * n + 2 * t;
        epi[row * L::kEpiPitch + col] = acc[j][n][0];
        epi[(row + 1) * L::kEpiPitch + col] = acc[j][n][1];
        epi[row * L::kEpiPitch + col + 8] = acc[j][n][2];
        epi[(row + 1) * L::kEpiPitch + col + 8] = acc[j][n][3];
      }
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWsEpilogueRegs));
  }
  // Epilogue, every warp at the launch's 168 registers: both roles reach the same barriers
  // from the same code (compute-sanitizer's synccheck reports one barrier taken at two places
  // as divergent), and the consumers' store loop does not spill.
  cg::cluster_group cluster = cg::this_cluster();
  if (p.splits > 1)
    cluster.sync();
  else
    __syncthreads();
#ifdef LOWBIT_INT4_TRACE
  if (tid == 0) s_tr[4] = trace_now();
#endif
  // Only the consumer warps store (the producer warps only take part in the barriers):
  // compute-sanitizer's racecheck reported the producer warps' epilogue loads of rows the
  // consumers wrote across the block barrier above (round RG, 8 hazards on the 128-row tiles
  // without split-K) although the barrier orders them; with 256 storing threads it reports
  // none (round SA), at 0.95-1.02x the time of all 384 storing (round SB, same binary).
  if (warp_id < kWsConsumerWarps) {
    if constexpr (kGateUp)
      pipe_store_moe_gate_up<T, BM, kWsConsumerThreads, L::kEpiPitch, true>(p, epi, s_ids, ct, tid, m0);
    else if constexpr (kMoe)
      pipe_store_moe_down<BM, kWsConsumerThreads, L::kEpiPitch>(p, epi, s_ids, ct, tid);
    else
      pipe_store_dense<T, BM, kWsConsumerThreads, L::kEpiPitch, 64 * G>(p, epi, m0, ct, rank, tid);
  }
#ifdef LOWBIT_INT4_TRACE
  if (tid == 0) s_tr[5] = trace_now();
#endif
  if (p.splits > 1) pipe_split_exit_barrier();  // no rank leaves while another still reads its tile
#ifdef LOWBIT_INT4_TRACE
  if constexpr (!kMoe) {
    if (tid == 0) {
      const unsigned i = atomicAdd(&g_ws_trace_next, 1u) % kWsTraceRecords;
      unsigned long long* r = g_ws_trace[i];
      r[0] = blockIdx.x;
      r[1] = trace_smid();
      r[2] = static_cast<unsigned>(p.splits);
      r[3] = static_cast<unsigned>(w.unit0);
      for (int f = 0; f < 6; ++f) r[4 + f] = s_tr[f];
      r[10] = trace_now();
    }
  }
#endif
}

// The tensor map of x [M, K] for TMA boxes of 64 K x bm rows in the 128 B swizzle (rows past
// M and K past K read as zeros). False when the driver's encoder is unavailable or refuses the
// map (then the caller launches gemm_pipelined_kernel).
template <typename T>
bool encode_x_map(CUtensorMap* map, const void* x, int m, int k, int bm) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(m)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * sizeof(T)};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(bm)};
  const cuuint32_t estr[2] = {1, 1};
  return encode(map, Act<T>::kBf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                const_cast<void*>(x), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Where the plan takes 96- or 128-row wgmma tiles, the warp-specialized ones run by
// pipe_ws_rule (pipelined_plan.h: where each split-K rank streams more stages than the ring
// holds). LOWBIT_INT4_PIPE_WS=0 / 2 (read once; measurements and tests): never / always;
// detail::set_pipe_ws overrides the variable (tests).
inline int pipe_ws_mode() {  // 0 never, 1 pipe_ws_rule, 2 always
  static const int v = env_012("LOWBIT_INT4_PIPE_WS");
  const int o = g_pipe_ws_override.load(std::memory_order_relaxed);
  return o == 1 ? 0 : o == 2 ? 2 : v;
}

// The split tail of the dense warp-specialized launches (pipe_split_tail): on unless
// LOWBIT_INT4_PIPE_TAIL=0 (read once; measurements) or detail::set_pipe_tail says otherwise.
inline bool pipe_tail_on() {
  static const bool v = env_on_unless_zero("LOWBIT_INT4_PIPE_TAIL");
  const int o = g_pipe_tail_override.load(std::memory_order_relaxed);
  return o == 1 ? false : o == 2 ? true : v;
}
// ... and whether plans count it: on, and the warp-specialized tiles not turned off (the tail
// only runs on them). The rows model of launch_rows and kAuto's time model (gemm.cu) both ask.
inline bool pipe_split_tail_planned() { return pipe_tail_on() && pipe_ws_mode() != 0; }

// Whether the bulk copies can address the operands: words, scale (and zero) rows and x 16 B
// aligned (the dense launch below and the MoE layer's moe_ws_prepare, which also checks its
// expert strides and y).
inline bool ws_operands_aligned(const PipeParams& p) {
  auto aligned16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return aligned16(p.qw) && aligned16(p.scales) && (p.zeros == nullptr || aligned16(p.zeros)) && aligned16(p.x);
}

// Launches the warp-specialized tile; *launched false (and nothing launched) when a bulk copy
// could not address the operands (16 B alignment) or the x tensor map cannot be encoded; each
// launch counts in g_pipe_ws_launches.
template <typename T, int BM, bool kSym>
cudaError_t launch_typed_ws(const PipeParams& prm, int sms, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (!ws_operands_aligned(prm)) return cudaSuccess;
  auto kernel = gemm_pipelined_ws_kernel<T, BM, kSym, kPipeDense>;
  constexpr size_t kSmem = PipeWsSmem<BM>::kTotal;
  static std::atomic<int> per_sm{0};
  int nb = 0;
  if (const cudaError_t e = blocks_per_sm_once(kernel, kWsThreads, kSmem, per_sm, &nb); e != cudaSuccess) return e;
  PipeWsParams<kPipeDense> q{prm, {}, 0};
  if (!encode_x_map<T>(&q.xmap, prm.x, prm.M, prm.K, BM)) return cudaSuccess;
  static ClusterSchedulable clusters = {};
  PipePlan pl = pipe_dense_launch_plan(kernel, BM, kWsThreads, kSmem, sms, nb, clusters, q.p);
  const int units = pl.row_tiles * pl.col_tiles;
  // Split tail: fewer ranks until every tail cluster is resident at once (one wave).
  if (pl.splits == 1 && pipe_tail_on() && env_pipe_splits() == 0) {
    for (int cap = kPipeMaxSplits;;) {
      pipe_split_tail(pl, prm.K, static_cast<long long>(nb) * sms, cap);
      if (pl.tail_splits < 2 ||
          active_clusters(kernel, pl.tail_splits, 1, 1, 1, kWsThreads, kSmem, clusters) >= units - pl.head_units)
        break;
      cap = pl.tail_splits - 1;
    }
  }
  *launched = true;
  if (pl.tail_splits < 2) {
    g_pipe_ws_launches.fetch_add(1, std::memory_order_relaxed);
    return launch_split_clusters(kernel, q, pl.splits, static_cast<unsigned>(units), 1, 1, kWsThreads, kSmem, stream,
                                 pdl_enabled());
  }
  // The head's whole waves, then the tail's clusters: disjoint tiles of y, the same x. The tail
  // (a programmatic launch too when PDL is on) waits for the head like any kernel before it.
  g_pipe_ws_launches.fetch_add(2, std::memory_order_relaxed);
  if (const cudaError_t e = launch_split_clusters(kernel, q, 1, static_cast<unsigned>(pl.head_units), 1, 1, kWsThreads,
                                                  kSmem, stream, pdl_enabled());
      e != cudaSuccess)
    return e;
  q.p.splits = pl.tail_splits;
  q.p.split_steps = pl.tail_steps;
  q.unit0 = pl.head_units;
  return launch_split_clusters(kernel, q, pl.tail_splits, static_cast<unsigned>(units - pl.head_units), 1, 1,
                               kWsThreads, kSmem, stream, pdl_enabled());
}

}  // namespace
}  // namespace kern
}  // namespace lowbit::int4
