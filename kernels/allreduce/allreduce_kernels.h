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
  uint64_t* trace;  // nullptr or [tiles][kTracePhases] ns sums (Options::debug_phase_ns)
};

// Phases timed per block when KernelArgs::trace is set (thread 0's view: "work" ends when
// thread 0 finished its share, the following signal includes waiting for the others).
enum TracePhase : int {
  kTraceWork1 = 0,    // step 1 (one-shot: copy to peers)
  kTraceSignal1 = 1,  // __syncthreads + system fence + flag stores
  kTraceWait1 = 2,    // waiting for the peers' step-1 flags
  kTraceWork2 = 3,    // step 2 (one-shot: the sum)
  kTraceSignal2 = 4,
  kTraceWait2 = 5,
  kTraceWork3 = 6,    // step 3 (decode / copy out)
  kTraceTotal = 7,    // kernel start to finish
  kTracePhases = 8,
};

constexpr int kThreads = 256;  // 512 forces <= 128 registers and spills in the quantized kernels

// mode: kOneShot, kTwoShot, kQ8Q8, kQ4Q8, kQ4Q4; grid = plan.tiles blocks.
Status launch_allreduce(Mode mode, int group_size, const KernelArgs& a, cudaStream_t stream);

}  // namespace lowbit::allreduce::kernels
