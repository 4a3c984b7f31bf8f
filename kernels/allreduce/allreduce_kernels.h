// Launchers of the fused all-reduce kernels (one-shot; two-step for twoshot/q8q8/q4q8/q4q4).
// The protocol (chunks, slots, flags, epochs) is lowbit/detail/allreduce_protocol.h.
#pragma once

#include <cuda_runtime.h>

#include "lowbit/allreduce.h"
#include "lowbit/detail/allreduce_protocol.h"

namespace lowbit::allreduce::kernels {

struct KernelArgs {
  proto::Plan plan;
  proto::Areas areas;
  int rank;
  int nranks;
  DType dtype;
  const uint16_t* in;
  uint16_t* out;
  uint8_t* base[proto::kMaxRanks];  // every rank's allocation as mapped here (own included)
  proto::ErrorRecord* err;          // host-mapped, device pointer
  uint64_t timeout_ns;
};

constexpr int kThreads = 256;  // 512 forces <= 128 registers and spills in the quantized kernels

// mode: kOneShot, kTwoShot, kQ8Q8, kQ4Q8, kQ4Q4; grid = plan.tiles blocks.
Status launch_allreduce(Mode mode, int group_size, const KernelArgs& a, cudaStream_t stream);

}  // namespace lowbit::allreduce::kernels
