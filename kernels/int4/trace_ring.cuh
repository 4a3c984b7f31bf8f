// Timeline probes' shared pieces (a measurement build only: -DLOWBIT_INT4_TRACE=1; the default
// build has none of this): the clock the probes stamp, and the dump of a translation unit's ring
// of per-block records as CSV. The decode tile (decode_tile.cuh: moe_trace_dump, dense_trace_dump)
// and the warp-specialized pipelined tile (pipelined_ws_tile.cuh: pipe_trace_dump) keep a ring
// each; `bench gemm` / `bench moe` write them with LOWBIT_INT4_TRACE_OUT=prefix.
#pragma once

#ifdef LOWBIT_INT4_TRACE
#include <cuda_runtime.h>

#include <cstdio>
#include <type_traits>
#include <vector>

namespace lowbit::int4::kern {

__device__ __forceinline__ unsigned long long trace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The SM the calling thread runs on (a record's smid field).
__device__ __forceinline__ unsigned trace_smid() {
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  return smid;
}

// `ring` (records x fields of stamps, a __device__ array) and its count `next` (a __device__
// counter the blocks advance; the ring wraps) as CSV into `path` under `header`, oldest record
// first; clears the count. `who` names the caller in messages.
template <typename Ring>
void trace_dump_csv(const char* path, const char* who, const Ring& ring, const unsigned& next, const char* header) {
  constexpr unsigned kRecords = std::extent_v<Ring, 0>;
  constexpr int kFields = static_cast<int>(std::extent_v<Ring, 1>);
  std::vector<unsigned long long> buf(static_cast<size_t>(kRecords) * kFields);
  unsigned n = 0;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(buf.data(), ring, sizeof(Ring)) != cudaSuccess ||
      cudaMemcpyFromSymbol(&n, next, sizeof(n)) != cudaSuccess) {
    std::fprintf(stderr, "%s: could not read the trace\n", who);
    return;
  }
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write %s\n", who, path);
    return;
  }
  std::fprintf(f, "%s\n", header);
  const unsigned count = n < kRecords ? n : kRecords, first = n < kRecords ? 0 : n % kRecords;
  for (unsigned i = 0; i < count; ++i) {
    const unsigned long long* r = &buf[static_cast<size_t>((first + i) % kRecords) * kFields];
    for (int k = 0; k < kFields; ++k) std::fprintf(f, k + 1 < kFields ? "%llu," : "%llu\n", r[k]);
  }
  std::fclose(f);
  const unsigned zero = 0;
  (void)cudaMemcpyToSymbol(next, &zero, sizeof(zero));
}

}  // namespace lowbit::int4::kern
#endif
