// GPU timing helpers for the bench drivers: CUDA-graph replay timing (launch gaps out of
// the numbers), device copy bandwidth (the memory-bound ceiling), machine description.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

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

// "NVIDIA H200 x2, driver 580.xx, CUDA 13.0"
std::string machine_description();

}  // namespace lowbit::bench
