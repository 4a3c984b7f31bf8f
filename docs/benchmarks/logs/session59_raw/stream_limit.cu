// Session 59 probe: how fast can ANY kernel stream N bytes per launch, launched back to back in
// a CUDA graph on rotated copies (the bench's method), and so how much of issue 4's "% of the
// copy-bandwidth floor" a small dense decode shape (8B o: 8.65 MB, 8B qkv: 12.98 MB) can reach.
//
// Rows (no compute; each kernel stores one xor word per block so nothing is dead code):
//  read_us  the bench's own reference, lowbit::bench::time_stream_read (4 blocks of 512 threads
//           per SM, four 16 B loads in flight per thread, the next launch after the loads)
//  tma      B blocks of one warp; lane 0 streams the block's contiguous share through R (<= 16)
//           stages of C bytes by cp.async.bulk (the TMA unit) on per-stage mbarriers, reading one
//           word of each landed stage before refilling it; launch_dependents at the start (trig 0)
//           or after the last stage landed (trig 1); then griddepcontrol.wait and the store. With
//           R * C >= the share, a block requests all its bytes at once; with R * C <= ~110 KB two
//           blocks fit an SM, so launch i + 1's blocks stream while launch i's finish.
// The floor, the timing (a graph of launches, median of replays) and the read_us row are the
// bench's own code (bench/common/gpu_timing.cu), so the rows compare with `lowbit bench gemm`'s.
// Session 60: the host code that chain_limit.cu shares with it moved to logs/probes/probe_table.cuh;
// tma_kernel's PTX is identical to that of the binary that ran on the H200 (stream_limit_h200.md).
// Build (repository root, after the README's build): nvcc -O3 -std=c++20 -I include -I .
//   -gencode=arch=compute_90a,code=sm_90a -o stream_limit docs/benchmarks/logs/session59_raw/stream_limit.cu
//   bench/common/gpu_timing.cu build/liblowbit_common.a
// Run:   ./stream_limit            (prints a markdown table; every wait on an mbarrier is bounded)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/common/gpu_timing.cuh"
#include "docs/benchmarks/logs/probes/probe_table.cuh"
#include "kernels/int4/common.cuh"  // the decode tile's mbarrier and bulk-copy helpers

using lowbit::int4::kern::bulk_copy;
using lowbit::int4::kern::mbar_arrive_expect_tx;
using lowbit::int4::kern::mbar_init;
using lowbit::int4::kern::smem_addr;

__device__ unsigned g_timeout;  // set when a bounded mbarrier wait gives up

__global__ void tma_kernel(const char* src, size_t bytes, int stages, int chunk, int trig, uint32_t* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[16];
  const size_t nblk = gridDim.x;
  // The block's share: [lo, hi), 16 B aligned.
  const size_t words = bytes / 16;
  const size_t lo = words * blockIdx.x / nblk * 16, hi = words * (blockIdx.x + 1) / nblk * 16;
  const int nchunks = static_cast<int>((hi - lo + chunk - 1) / chunk);
  uint32_t acc = 0;
  if (trig == 0) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s)
      mbar_init(smem_addr(&bars[s]));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    auto issue = [&](int c) {
      const int s = c % stages;
      const size_t off = lo + static_cast<size_t>(c) * chunk;
      const uint32_t n = static_cast<uint32_t>(hi - off < static_cast<size_t>(chunk) ? hi - off : chunk);
      mbar_arrive_expect_tx(smem_addr(&bars[s]), n);
      bulk_copy(smem_addr(smem + static_cast<size_t>(s) * chunk), src + off, n, smem_addr(&bars[s]));
    };
    for (int c = 0; c < min(stages, nchunks); ++c) issue(c);
    for (int c = 0; c < nchunks; ++c) {
      const int s = c % stages;
      const uint32_t parity = static_cast<uint32_t>(c / stages) & 1u;
      const bool done = probe::mbar_wait_bounded(smem_addr(&bars[s]), parity);
      if (!done) {  // bounded: report and stop streaming (the table prints TIMEOUT)
        atomicExch(&g_timeout, 1u);
        break;
      }
      acc ^= *reinterpret_cast<const uint32_t*>(smem + static_cast<size_t>(s) * chunk);
      if (c + stages < nchunks) {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the read before the async refill
        issue(c + stages);
      }
    }
  }
  __syncwarp();  // (trig 1: the block triggers once lane 0's stages have all landed)
  if (trig == 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (threadIdx.x == 0) atomicXor(out + blockIdx.x, acc);
}

struct Cfg {
  const char* name;
  int blocks_per_sm;
  int stages, chunk, trig;
  bool pdl;
};

using probe::check;

int run() {
  const probe::Setup u = probe::setup();
  LOWBIT_BENCH_CUDA(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  std::printf("# %s, %d SMs; copy bandwidth %.0f GB/s (the issue's floor: bytes / this)\n",
              lowbit::bench::machine_description().c_str(), u.sms, u.copy_gbps);

  // blocks_per_sm 0: the bench's read_us row; otherwise a tma row.
  const std::vector<Cfg> cfgs = {
      {"read_us (the bench's reference)", 0, 0, 0, 0, true},
      {"tma 1/SM R4 C16K trig start", 1, 4, 16384, 0, true},
      {"tma 1/SM R6 C16K trig start", 1, 6, 16384, 0, true},
      {"tma 1/SM R6 C16K trig end", 1, 6, 16384, 1, true},
      {"tma 1/SM R6 C16K no PDL", 1, 6, 16384, 0, false},
      {"tma 2/SM R3 C16K trig start", 2, 3, 16384, 0, true},
      {"tma 2/SM R6 C8K trig start", 2, 6, 8192, 0, true},
      {"tma 1/SM R12 C8K trig start", 1, 12, 8192, 0, true},
      {"tma 1/SM R3 C32K trig start", 1, 3, 32768, 0, true},
  };
  // 8B o (4096 x 4096 int4 + G = 128 bf16 scales), 8B qkv (6144 x 4096), 8B down (4096 x 14336),
  // 8B gate_up (28672 x 4096), and 4.3 / 25.9 MB for the slope.
  const probe::Sizes sizes = {
      {"4.3 MB", 4325376},   {"8B o 8.65 MB", 8650752},     {"8B qkv 12.98 MB", 12976128},
      {"25.9 MB", 25952256}, {"8B down 30.3 MB", 30277632}, {"8B gate_up 60.6 MB", 60555264}};
  probe::print_header(sizes);
  for (const Cfg& c : cfgs) {
    if (c.stages > 16) {  // tma_kernel's barriers
      std::fprintf(stderr, "stream_limit: %s: %d stages (at most 16)\n", c.name, c.stages);
      return 1;
    }
    std::printf("| %s | ", c.name);
    for (auto& z : sizes) {
      const size_t bytes = z.second;
      const int ncopies = static_cast<int>(std::min<size_t>(u.pool / bytes, 64));
      lowbit::bench::Timing t{};
      if (c.blocks_per_sm == 0) {
        std::vector<std::vector<lowbit::bench::ReadRegion>> regions;
        for (int k = 0; k < ncopies; ++k) regions.push_back({{u.buf + k * bytes, bytes}});
        check(lowbit::bench::time_stream_read(u.stream, regions, 15, &t), "read_us");
      } else {
        cudaLaunchAttribute la[1] = {probe::pdl_attribute()};
        cudaLaunchConfig_t cfg = {};
        cfg.attrs = c.pdl ? la : nullptr;
        cfg.numAttrs = c.pdl ? 1 : 0;
        cfg.gridDim = dim3(u.sms * c.blocks_per_sm);
        cfg.blockDim = dim3(32);
        cfg.dynamicSmemBytes = static_cast<size_t>(c.stages) * c.chunk;
        t = probe::time_launches(u.stream, ncopies, c.name, [&](cudaStream_t st, int call) {
          cfg.stream = st;
          const char* src = u.buf + static_cast<size_t>(call % ncopies) * bytes;
          return cudaLaunchKernelEx(&cfg, tma_kernel, src, bytes, c.stages, c.chunk, c.trig, u.out);
        });
      }
      probe::print_cell(&g_timeout, t, bytes, u.copy_gbps);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

int main() { return probe::main_of("stream_limit", run); }
