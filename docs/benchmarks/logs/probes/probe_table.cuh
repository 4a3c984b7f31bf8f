// Helpers of the launch-limit probes (session59_raw/stream_limit.cu, session60_raw/chain_limit.cu):
// each prints one markdown table, a row per kernel configuration and a cell per byte count, every cell
// timed by the bench's own code (bench/common/gpu_timing.cu) so that the rows compare with
// `lowbit bench gemm`'s.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/gpu_timing.cuh"

namespace probe {

// The byte counts of a table: a column name and the bytes one launch streams.
using Sizes = std::vector<std::pair<const char*, size_t>>;

// kern::mbar_wait's try_wait loop (kernels/int4/common.cuh), bounded: false once ~2^24 tries
// have failed, so that a copy that never lands prints TIMEOUT instead of hanging the probe.
__device__ __forceinline__ bool mbar_wait_bounded(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  for (long spin = 0; !done; ++spin) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (!done && spin > (1l << 24)) break;
  }
  return done != 0;
}

inline void check(const lowbit::Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.to_string());
}

// What every probe starts from: the SM count, 1 GiB of rotated copies (far past the L2; filled,
// so no launch reads zeros), 256 KB for the kernels' per-block words, a stream, and the issue's
// floor as `lowbit bench gemm` measures it (1 GiB copies, bytes read + written). Freed at exit.
struct Setup {
  int sms = 0;
  size_t pool = size_t{1} << 30;
  char* buf = nullptr;
  uint32_t* out = nullptr;
  cudaStream_t stream = nullptr;
  double copy_gbps = 0;
};
inline Setup setup() {
  Setup u;
  LOWBIT_BENCH_CUDA(cudaDeviceGetAttribute(&u.sms, cudaDevAttrMultiProcessorCount, 0));
  LOWBIT_BENCH_CUDA(cudaMalloc(&u.buf, u.pool));
  LOWBIT_BENCH_CUDA(cudaMemset(u.buf, 0x5A, u.pool));
  LOWBIT_BENCH_CUDA(cudaMalloc(&u.out, 64 * 1024 * sizeof(uint32_t)));
  LOWBIT_BENCH_CUDA(cudaStreamCreate(&u.stream));
  check(lowbit::bench::measure_copy_bandwidth(0, u.pool, &u.copy_gbps), "copy bandwidth");
  return u;
}

inline void print_header(const Sizes& sizes) {
  std::printf("| kernel | ");
  for (auto& z : sizes) std::printf("%s us (%%floor) | ", z.first);
  std::printf("\n|---|");
  for (size_t i = 0; i < sizes.size(); ++i) std::printf("---|");
  std::printf("\n");
}

// One cell: "us (% of the copy-bandwidth floor)", or TIMEOUT when the kernel set its flag (the
// probe's __device__ unsigned, passed as &symbol from its translation unit; cleared here).
inline void print_cell(const void* timeout_flag, const lowbit::bench::Timing& t, size_t bytes, double copy_gbps) {
  LOWBIT_BENCH_CUDA(cudaDeviceSynchronize());
  unsigned to = 0;
  LOWBIT_BENCH_CUDA(cudaMemcpyFromSymbol(&to, timeout_flag, sizeof(to)));
  if (to) {
    std::printf("TIMEOUT (an mbarrier wait gave up) | ");
    to = 0;
    LOWBIT_BENCH_CUDA(cudaMemcpyToSymbol(timeout_flag, &to, sizeof(to)));
    return;
  }
  const double floor_us = bytes / (copy_gbps * 1e3);
  std::printf("%.2f (%.1f) | ", t.median_us, 100.0 * floor_us / t.median_us);
}

// The attribute of a programmatic (PDL) launch: the next kernel in the stream may start once
// every block of this one has triggered (griddepcontrol.launch_dependents) or exited.
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

// `calls` launches back to back in a CUDA graph, launch(stream, call) for call = 0, 1, ... (the
// probe rotates its copies by the call), timed by the bench's time_in_graph (2 warm-up and 15
// timed replays; the median is per launch).
template <typename Launch>
lowbit::bench::Timing time_launches(cudaStream_t s, int calls, const char* name, Launch&& launch) {
  lowbit::bench::Timing t{};
  int call = 0;
  check(lowbit::bench::time_in_graph(
            s,
            [&](cudaStream_t st) -> lowbit::Status {
              if (launch(st, call++) != cudaSuccess)
                return lowbit::make_status(lowbit::StatusCode::kCudaError, "%s: launch failed", name);
              return lowbit::Status::Ok();
            },
            calls, 2, 15, &t),
        name);
  return t;
}

// main(): run() with a failed CUDA call or timing step reported by name.
inline int main_of(const char* name, int (*run)()) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace probe
