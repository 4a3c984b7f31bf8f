// Session 60 probe: what the work after griddepcontrol.wait costs a launch that streams its
// bytes ahead of it. Session 59's stream_limit.cu (stream_limit_h200.md) streamed 8.65 MB per
// launch in 2.00 us when the next launch may start at the kernel's start and only one store
// per block follows the wait; the dense decode GEMM takes 6.0 us for the same bytes (8B o,
// M = 1) and session 29's timeline put ~5.4 us of it after the wait. Here the same stream is
// followed by the chain a decode GEMM has after its wait, step by step:
//   chain 0  one atomicXor per block (stream_limit's tma rows)
//   chain 1  every thread loads 16 B of x (the previous launch's y: a real dependency), the
//            block stores 128 B of y
//   chain 2  chain 1 plus a second x load whose address depends on the first (two round trips)
//   chain 3  chain 1 plus the block's warps reduced through shared memory (a __syncthreads)
//            before the store
//   chain 4  chain 3 in clusters of 2 (the decode GEMM's split-K pairs): rank 1 writes 2 KB of
//            sums into rank 0's shared memory, a cluster barrier, rank 0 adds them and stores
//   chain 5  chain 4 with the decode GEMM's K loop between the x load and the reduction: K
//            steps of one 16 B word per lane from the landed stages, unpacked by a LOP3 per
//            register and multiplied by 5 bf16 MMAs m16n8k16 (4 column tiles and sum(x)) into
//            dependent accumulators, as the 8-row tile does (8B o, M = 1: 16 steps per warp)
// Added in session 61 (after the H100 run of chains 0-5, session61_raw/chain_limit_h100.md):
//   chain 6  chain 3 in pairs of independent blocks (2b, 2b + 1; no cluster) that reduce through
//            global memory: each stores its 2 KB of sums, fences, counts itself on the pair's
//            counter; the second to arrive loads the other's 2 KB, adds and stores y
//   chain 7  chain 6 with chain 5's K loop
//   chain 8  chain 5 with 4 MMAs per step (no sum(x) MMA: what computing it elsewhere saves)
//   chain 9  chain 3 with chain 5's K loop: split K inside the block only, no pair
// "half grid": one block per two SMs (16-warp blocks hold the warps of two 8-warp blocks; the
// next launch's blocks can take the SMs this one leaves idle).
// Blocks of NW warps; lane 0 of each warp streams the warp's contiguous share through R stages
// of C bytes (cp.async.bulk on per-stage mbarriers, every wait bounded), all requested before
// the wait when R x C covers the share. The floor, the graph timing and the machine line are
// the bench's own code (bench/common/gpu_timing.cu).
// Build (repository root, after the README's build): nvcc -O3 -std=c++20 -diag-suppress=2810 -I include -I .
//   -gencode=arch=compute_90a,code=sm_90a -o chain_limit docs/benchmarks/logs/session60_raw/chain_limit.cu
//   bench/common/gpu_timing.cu build/liblowbit_common.a
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "bench/common/gpu_timing.cuh"
#include "docs/benchmarks/logs/probes/probe_table.cuh"
#include "kernels/int4/common.cuh"

using lowbit::int4::kern::bulk_copy;
using lowbit::int4::kern::mbar_arrive_expect_tx;
using lowbit::int4::kern::mbar_init;
using lowbit::int4::kern::mma_m16n8k16;
using lowbit::int4::kern::smem_addr;

constexpr int kMaxWarps = 16, kMaxStages = 8;
constexpr unsigned kXyWords = 2048;  // 32 KB of x / y per launch: 132 blocks x 128 B of y fit without overlap
__device__ unsigned g_timeout;      // set when a bounded mbarrier wait gives up

__global__ void chain_kernel(const char* src, size_t bytes, int stages, int chunk, int trig, int chain, int ksteps,
                             const uint4* x, uint4* y, uint32_t* out, uint32_t* ws, unsigned* counts) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[kMaxWarps][kMaxStages];
  __shared__ uint32_t red[kMaxWarps];
  __shared__ uint32_t recv[512];  // chain 4: rank 1's 2 KB of sums
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const bool kloop = chain == 5 || chain == 7 || chain == 8 || chain == 9, cluster = chain == 4 || chain == 5 || chain == 8;
  const bool gpair = chain == 6 || chain == 7;
  // The warp's share [lo, hi), 16 B aligned.
  const size_t units = static_cast<size_t>(gridDim.x) * nw, u = static_cast<size_t>(blockIdx.x) * nw + warp;
  const size_t words = bytes / 16, lo = words * u / units * 16, hi = words * (u + 1) / units * 16;
  const int nchunks = static_cast<int>((hi - lo + chunk - 1) / chunk);
  unsigned char* const mine = smem + static_cast<size_t>(warp) * stages * chunk;
  auto issue = [&](int c) {
    const int s = c % stages;
    const size_t off = lo + static_cast<size_t>(c) * chunk;
    const uint32_t n = static_cast<uint32_t>(hi - off < static_cast<size_t>(chunk) ? hi - off : chunk);
    mbar_arrive_expect_tx(smem_addr(&bars[warp][s]), n);
    bulk_copy(smem_addr(mine + static_cast<size_t>(s) * chunk), src + off, n, smem_addr(&bars[warp][s]));
  };
  if (trig == 0) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (lane == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(smem_addr(&bars[warp][s]));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int c = 0; c < min(stages, nchunks); ++c) issue(c);
  }
  __syncwarp();
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  uint4 xv = make_uint4(0, 0, 0, 0);
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  if (chain >= 1) xv = x[tid % kXyWords];
  if (chain == 2) {
    const uint4 x2 = x[(xv.x + tid) % kXyWords];  // its address needs the first load's value
    xv.x ^= x2.y;
  }
  uint32_t acc = 0;
  bool ok = true;
  if (lane == 0)
    for (int c = 0; c < nchunks; ++c) {
      const int s = c % stages;
      if (!probe::mbar_wait_bounded(smem_addr(&bars[warp][s]), static_cast<uint32_t>(c / stages) & 1u)) {
        ok = false;
        break;
      }
      acc ^= *reinterpret_cast<const uint32_t*>(mine + static_cast<size_t>(s) * chunk);
      if (c + stages < nchunks) {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the read before the async refill
        issue(c + stages);
      }
    }
  if (!ok) atomicExch(&g_timeout, 1u);
  __syncwarp();
  if (trig == 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  acc ^= xv.x ^ xv.y ^ xv.z ^ xv.w;
  if (kloop) {  // the K loop: every word of a step feeds 4 MMAs, x (xv) their B operand
    float c[5][4] = {};
    const uint32_t b0 = xv.x, b1 = xv.y;
    const unsigned span = static_cast<unsigned>(stages * chunk) / 16u;  // the warp's stage words
    for (int i = 0; i < ksteps; ++i) {
      const uint4 w = reinterpret_cast<const uint4*>(mine)[(static_cast<unsigned>(i) * 32u + lane) % span];
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) a[r] = ((words[j] >> (4 * r)) & 0x000F000Fu) | 0x43004300u;
        mma_m16n8k16<__nv_bfloat16>(c[j], a, b0, b1);
      }
      const uint32_t ones[4] = {0x3F803F80u, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u};
      if (chain != 8) mma_m16n8k16<__nv_bfloat16>(c[4], ones, b0, b1);
    }
    float t = 0.f;
#pragma unroll
    for (int j = 0; j < 5; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) t += c[j][q];
    acc ^= __float_as_uint(t);
  }
  acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
  if (chain >= 3) {
    if (lane == 0) red[warp] = acc;
    __syncthreads();
    if (warp == 0) acc = __reduce_xor_sync(0xFFFFFFFFu, lane < nw ? red[lane] : 0u);
  }
  if (cluster) {  // rank 1's sums into rank 0's buffer, then rank 0 adds them
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    if (cl.block_rank() == 1) {
      uint32_t* dst = cl.map_shared_rank(recv, 0);
      for (int i = threadIdx.x; i < 512; i += blockDim.x) dst[i] = acc + i;
    }
    cl.sync();
    if (cl.block_rank() == 1) return;
    if (warp == 0)
      for (int i = lane; i < 512; i += 32) acc ^= recv[i];
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
  }
  if (gpair) {  // both store their sums; the pair's second arrival adds the other's
    __shared__ unsigned second;
    uint32_t* const mine_ws = ws + static_cast<size_t>(blockIdx.x) * 512;
    for (int i = threadIdx.x; i < 512; i += blockDim.x) mine_ws[i] = acc + i;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) second = atomicAdd(counts + blockIdx.x / 2, 1u) & 1u;  // launches count on: odd = second
    __syncthreads();
    if (second == 0) return;
    __threadfence();
    const volatile uint32_t* other = ws + static_cast<size_t>(blockIdx.x ^ 1u) * 512;
    if (warp == 0)
      for (int i = lane; i < 512; i += 32) acc ^= other[i];
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
  }
  if (chain == 0) {
    if (threadIdx.x == 0) atomicXor(out + blockIdx.x, acc);
  } else if (warp == 0 && lane < 8) {
    y[(blockIdx.x * 8 + lane) % kXyWords] = make_uint4(acc, acc + 1, acc + 2, acc + 3);  // 128 B per block
  }
}

struct Cfg {
  const char* name;
  int warps, stages, chunk, trig, chain;
  int ksteps = 0;  // chains 5, 7, 8, 9: K steps per warp
  int half = 0;    // 1: a grid of one block per two SMs
};

using probe::check;

int run() {
  const probe::Setup u = probe::setup();
  uint4* xy = nullptr;  // two x / y buffers: launch c reads c % 2 and writes (c + 1) % 2
  LOWBIT_BENCH_CUDA(cudaMalloc(&xy, 2 * kXyWords * sizeof(uint4)));
  LOWBIT_BENCH_CUDA(cudaMemset(xy, 0x33, 2 * kXyWords * sizeof(uint4)));
  LOWBIT_BENCH_CUDA(cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  if (u.sms % 2 != 0) throw std::runtime_error("chains 4-8 launch pairs: they need an even SM count");
  uint32_t* ws = nullptr;  // chains 6, 7: 2 KB of sums per block, one counter per pair
  unsigned* counts = nullptr;
  LOWBIT_BENCH_CUDA(cudaMalloc(&ws, static_cast<size_t>(u.sms) * 512 * sizeof(uint32_t)));
  LOWBIT_BENCH_CUDA(cudaMalloc(&counts, static_cast<size_t>(u.sms) * sizeof(unsigned)));
  LOWBIT_BENCH_CUDA(cudaMemset(counts, 0, static_cast<size_t>(u.sms) * sizeof(unsigned)));
  std::printf("# %s, %d SMs; copy bandwidth %.0f GB/s (the issue's floor: bytes / this); one block per SM\n",
              lowbit::bench::machine_description().c_str(), u.sms, u.copy_gbps);

  // One block per SM. 1 warp x 4 x 16 KB: stream_limit's best row; 8 warps x 1 x 8 KB: the same
  // bytes in flight in the decode GEMM's block shape; 8 warps x 3 x 4 KB: the decode GEMM's
  // 8-row stages (96 KB, two blocks per SM), which refill at 8B qkv and larger.
  const std::vector<Cfg> cfgs = {
      {"W1 R4 C16K trig start chain 0", 1, 4, 16384, 0, 0}, {"W1 R4 C16K trig start chain 1", 1, 4, 16384, 0, 1},
      {"W1 R4 C16K trig start chain 2", 1, 4, 16384, 0, 2}, {"W8 R1 C8K trig start chain 0", 8, 1, 8192, 0, 0},
      {"W8 R1 C8K trig start chain 1", 8, 1, 8192, 0, 1},   {"W8 R1 C8K trig start chain 3", 8, 1, 8192, 0, 3},
      {"W8 R2 C8K trig start chain 3", 8, 2, 8192, 0, 3},   {"W8 R3 C4K trig start chain 3", 8, 3, 4096, 0, 3},
      {"W8 R3 C4K trig end chain 3", 8, 3, 4096, 1, 3},     {"W8 R2 C8K trig end chain 3", 8, 2, 8192, 1, 3},
      {"W8 R1 C8K trig start chain 4", 8, 1, 8192, 0, 4},   {"W8 R3 C4K trig start chain 4", 8, 3, 4096, 0, 4},
      {"W8 R3 C4K trig end chain 4", 8, 3, 4096, 1, 4},
      {"W8 R1 C8K trig start chain 5 (16 K steps)", 8, 1, 8192, 0, 5, 16},
      {"W8 R3 C4K trig start chain 5 (16 K steps)", 8, 3, 4096, 0, 5, 16},
      {"W8 R3 C4K trig end chain 5 (16 K steps)", 8, 3, 4096, 1, 5, 16},
      {"W8 R1 C8K trig start chain 6", 8, 1, 8192, 0, 6},
      {"W8 R3 C4K trig start chain 6", 8, 3, 4096, 0, 6},
      {"W8 R1 C8K trig start chain 7 (16 K steps)", 8, 1, 8192, 0, 7, 16},
      {"W8 R3 C4K trig start chain 7 (16 K steps)", 8, 3, 4096, 0, 7, 16},
      {"W8 R1 C8K trig start chain 8 (16 K steps, 4 MMAs)", 8, 1, 8192, 0, 8, 16},
      {"W8 R3 C4K trig start chain 8 (16 K steps, 4 MMAs)", 8, 3, 4096, 0, 8, 16},
      {"W8 R1 C8K trig start chain 5 (32 K steps)", 8, 1, 8192, 0, 5, 32},
      {"W8 R1 C8K trig start chain 8 (32 K steps, 4 MMAs)", 8, 1, 8192, 0, 8, 32},
      {"W8 R1 C8K trig start chain 9 (16 K steps)", 8, 1, 8192, 0, 9, 16},
      {"W16 R1 C8K half grid trig start chain 3", 16, 1, 8192, 0, 3, 0, 1},
      {"W16 R1 C8K half grid trig start chain 9 (16 K steps)", 16, 1, 8192, 0, 9, 16, 1},
      {"W16 R2 C4K half grid trig start chain 9 (16 K steps)", 16, 2, 4096, 0, 9, 16, 1},
      {"W16 R1 C8K half grid trig end chain 9 (16 K steps)", 16, 1, 8192, 1, 9, 16, 1},
      {"W8 R2 C8K half grid trig start chain 9 (32 K steps)", 8, 2, 8192, 0, 9, 32, 1},
  };
  const probe::Sizes sizes = {
      {"4.3 MB", 4325376}, {"8B o 8.65 MB", 8650752}, {"8B qkv 12.98 MB", 12976128}, {"8B down 30.3 MB", 30277632}};
  probe::print_header(sizes);
  for (const Cfg& c : cfgs) {
    if (c.stages > kMaxStages || c.warps > kMaxWarps) {
      std::fprintf(stderr, "chain_limit: %s: at most %d stages, %d warps\n", c.name, kMaxStages, kMaxWarps);
      return 1;
    }
    std::printf("| %s | ", c.name);
    for (auto& z : sizes) {
      const size_t bytes = z.second;
      const int ncopies = static_cast<int>(std::min<size_t>(u.pool / bytes, 64)) & ~1;  // even: x / y alternate
      cudaLaunchAttribute la[2] = {probe::pdl_attribute(), {}};
      la[1].id = cudaLaunchAttributeClusterDimension;  // chains 4, 5, 8: pairs along x
      la[1].val.clusterDim.x = 2;
      la[1].val.clusterDim.y = 1;
      la[1].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.attrs = la;
      cfg.numAttrs = c.chain == 4 || c.chain == 5 || c.chain == 8 ? 2 : 1;
      cfg.gridDim = dim3(c.half != 0 ? u.sms / 2 : u.sms);
      cfg.blockDim = dim3(32 * c.warps);
      cfg.dynamicSmemBytes = static_cast<size_t>(c.warps) * c.stages * c.chunk;
      const lowbit::bench::Timing t = probe::time_launches(u.stream, ncopies, c.name, [&](cudaStream_t st, int k) {
        cfg.stream = st;
        const char* src = u.buf + static_cast<size_t>(k % ncopies) * bytes;
        const uint4* x = xy + (k % 2) * kXyWords;  // launch k reads launch k - 1's y
        uint4* y = xy + ((k + 1) % 2) * kXyWords;
        return cudaLaunchKernelEx(&cfg, chain_kernel, src, bytes, c.stages, c.chunk, c.trig, c.chain, c.ksteps, x, y, u.out, ws,
                                  counts);
      });
      probe::print_cell(&g_timeout, t, bytes, u.copy_gbps);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

int main() { return probe::main_of("chain_limit", run); }
