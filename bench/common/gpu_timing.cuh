// GPU timing helpers for the bench drivers: CUDA-graph replay timing (launch gaps out of
// the numbers), device copy bandwidth (the memory-bound ceiling), machine description.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/status.h"

namespace lowbit::bench {

struct Timing {
  double median_us = 0;  // per call
  double min_us = 0;
  double max_us = 0;
};

// Captures `calls_per_graph` invocations of enqueue(stream) into one CUDA graph, replays
// it `warmup` times, then `reps` times with events around each replay; reports per-call
// time. enqueue must only enqueue work on the given stream.
Status time_in_graph(cudaStream_t stream, const std::function<Status(cudaStream_t)>& enqueue, int calls_per_graph,
                     int warmup, int reps, Timing* out);

// Device-to-device cudaMemcpyAsync of `bytes`, counted as bytes read + bytes written, in
// GB/s (1e9). The ceiling that memory-bound kernels are reported against.
Status measure_copy_bandwidth(int device, size_t bytes, double* gbps);

// The zero-compute reference of a memory-bound launch: what launch latency, pipeline ramp and
// bandwidth alone cost a kernel that reads these bytes. A kernel reads each region (16 B
// loads, four in flight per thread; sizes multiples of 16 B) and, after griddepcontrol.wait,
// writes one word per block; it is launched back to back as programmatic dependent launches
// (the int4 decode kernels' pattern: loads before the wait, the result after it), copy
// c % copies.size() at call c, timed like time_in_graph.
struct ReadRegion {
  const void* p;
  size_t bytes;
};
Status time_stream_read(cudaStream_t stream, const std::vector<std::vector<ReadRegion>>& copies, int reps,
                        Timing* out);

// What a read-only stream reaches: time_stream_read over one region of `bytes` (well past the
// L2), in GB/s of bytes read. HBM serves reads alone faster than the copy's mix of reads and
// writes (H200: ~4.3-4.4 against ~3.9 TB/s), so this is the stricter yardstick for kernels that
// mostly read (the int4 GEMMs); the benches print it next to the copy bandwidth.
Status measure_read_bandwidth(int device, size_t bytes, double* gbps);

// "NVIDIA H200 x2, driver 580.xx, CUDA 13.0"
std::string machine_description();

// A bench's setup call that must succeed (device selection, streams, events, buffers): a
// failure throws std::runtime_error naming the call and the CUDA error, which the `lowbit`
// CLI prints before it exits non-zero. Calls whose failure a bench reports itself keep their
// own checks.
inline void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
#define LOWBIT_BENCH_CUDA(x) ::lowbit::bench::check_cuda((x), #x)

}  // namespace lowbit::bench
