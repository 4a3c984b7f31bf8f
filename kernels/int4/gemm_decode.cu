// Decode W4A16 GEMM (M <= 512, built for M <= 16) on the MMA-tiled layout
// (kernel_layout.h, kMmaTiled): y^T = W x^T with mma.sync m16n8k16, the weight's columns
// as the MMA's 16 rows and 8 or 16 activation rows as its n8 tiles. This file is the dense
// entry; the kernel and its launch rules are in decode_tile.cuh (shared with the MoE GEMMs
// on MMA-tiled experts, moe_decode.cu).
//
// Why this kernel: a decode GEMM must stream the weight at HBM speed. The N-packed kernel
// (gemm_skinny.cu) stages words through shared memory and spends ~20 instructions per word
// (unpack, subtract, scale multiply, four byte permutes into MMA order). Here a warp's K
// range is one contiguous run of 512 B per K step of 64 columns: lane 0 moves a batch of
// D steps with one bulk asynchronous copy into the warp's shared-memory stage (3 or 6
// stages, so 2-5 batches stay in flight without holding registers: a register double
// buffer kept one batch in flight and streamed at ~50% of the floor, the stages at up to
// ~78%), each lane reads its 16 B per step, and each word already holds the A fragment
// pairs: a word costs 4 LOP3 (magic | q) and 3 shifts (1 for fp16), nothing else. The zero point and the
// group scale are applied to fp32 sums once per window of <= 8 K steps (see "Numerics").
// Measured on H200 against the N-packed kernel and cuBLAS: docs/int4-kernels.md.
//
// Numerics: the MMAs multiply (magic + q), exact in the activation dtype, by x; one more MMA
// per step against all-ones gives sum(x) over the same K (decode_tile.cuh, accx). At each window end
// tot += s * (acc - (magic + z) * sum(x)) in fp32 = s * sum (q - z) x: the unrounded
// dequantized weight, never rounded to the activation dtype. Outputs are compared with an
// fp64 reference under the GEMM tolerance (tests/gpu/int4/test_gemm.cu, which states the
// extra weight-rounding term); the sum order is fixed (windows, warps, then cluster ranks,
// in order): runs are bit-identical.
//
// Work split: block = 4 or 8 warps on one 64-column group, each warp a contiguous run of
// K batches, partial sums added in warp order in shared memory; grid.x = split-K blocks of
// one thread-block cluster, added in rank order through distributed shared memory by rank
// 0; grid.y = tiles of 8 or 16 activation rows (dense_decode_plan(); adjacent in launch
// order, so tiles sharing a weight read it from L2); grid.z = column groups. Block-shared x
// tiles (M = 9..16 where measured faster, docs/int4-kernels-sessions.md "Session 10") turn the block
// around: warp w streams column group 4 z + w over the block's whole K range and reads x from
// shared memory filled once for the 4 warps; split-K ranks add their sums slice by slice.
// One launch with no workspace; for 16-row tiles on large weights, given decode_x_steps_bytes()
// of workspace, a short launch before it copies x 16-row-tile-major (decode_x_steps.cu) so
// that the tiles' x loads touch 2 cache lines per instruction instead of 8.
#include "kernels/int4/decode_tile.cuh"

namespace lowbit::int4::kern {
std::atomic<int> g_decode_push_override{0};
}  // namespace lowbit::int4::kern

namespace lowbit::int4::detail {

int decode_x_steps_mode() {
  static const int v = kern::env_012("LOWBIT_INT4_DECODE_XSTEPS");
  return v;
}

cudaError_t launch_gemm_decode(const void* x, void* y, int m, const KernelWeightsView& w, int expert, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream) {
  const WeightShape& s = w.shape;
  kern::DecodeParams p;
  p.x = x;
  p.y = y;
  p.qw = static_cast<const uint4*>(w.qweight) + static_cast<size_t>(expert) * tiled_expert_uint4s(s);
  const size_t so = static_cast<size_t>(expert) * expert_scale_entries(s);
  p.scales = w.scales + so;
  p.zeros = w.zeros ? w.zeros + so : nullptr;
  p.M = m;
  p.N = s.n;
  p.K = s.k;
  p.G = s.group_len();
  const int groups = s.n / kMmaTileCols;
  const kern::DensePlan plan = kern::dense_decode_plan(m, groups, p.group_steps(), s.k / kMmaTileK,
                                                       kern::current_sm_count(), kern::env_rows16_max(),
                                                       kern::env_x_shared(), s.act == DType::kBF16, kern::env_few_rows8(),
                                                       kern::env_clusters4());
  const int mtiles = kern::decode_row_tiles(plan.tiles, m);
  if (kern::decode_x_steps_planned(plan, m, groups, static_cast<long long>(s.n) * s.k, kern::current_sm_count(),
                                   decode_x_steps_mode()) &&
      workspace != nullptr && workspace_bytes >= static_cast<size_t>(kern::decode_x_steps_bytes(m, s.k)) &&
      reinterpret_cast<uintptr_t>(workspace) % 16 == 0) {
    if (const cudaError_t e = launch_decode_x_steps(x, m, s.k, workspace, stream); e != cudaSuccess) return e;
    p.x_steps = workspace;
  }
  return kern::launch_dtype<kern::kDecDense>(s.act, p, plan.tiles, plan.shape, {1, mtiles, groups}, stream);
}

#ifdef LOWBIT_INT4_TRACE
void dense_trace_dump(const char* path) { kern::trace_dump_ring(path, "dense_trace_dump"); }
#endif

void set_decode_push(int mode) { kern::g_decode_push_override.store(mode == 1 || mode == 2 ? mode : 0); }

}  // namespace lowbit::int4::detail
