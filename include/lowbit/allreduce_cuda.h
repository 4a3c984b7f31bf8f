// Flash All-Reduce on GPUs: the communicator. Include from CUDA-enabled code only.
//
// Two ways to create one:
// - One process per GPU (MPI or any launcher): from an initialized NCCL communicator of
//   this rank; buffer handles (CUDA IPC) are exchanged once over NCCL.
// - One process driving several GPUs: one Communicator per device, created together.
// Where peers cannot access each other's memory (no P2P, other nodes), every mode falls
// back to NCCL, so callers never special-case a topology.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "lowbit/allreduce.h"

namespace lowbit::allreduce {

// Config (buffer size, timeout, default blocks) is declared in lowbit/allreduce.h.

class Communicator {
 public:
  virtual ~Communicator() = default;

  // comm: this rank's NCCL communicator; the calling thread's current device is used.
  static Status create_from_nccl(ncclComm_t comm, const Config& cfg, std::unique_ptr<Communicator>* out);
  // One communicator per device in `devices` (rank i = devices[i]), all in this process.
  static Status create_single_process(const std::vector<int>& devices, const Config& cfg,
                                      std::vector<std::unique_ptr<Communicator>>* out);

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int device() const = 0;

  // All-reduce `count` elements of `dtype` from `in` to `out` (in == out allowed) on
  // `stream`. Stream-ordered, capturable in CUDA graphs. Every rank must call it with the
  // same count, dtype and options. Pointers must be 16-byte aligned (checked).
  virtual Status allreduce(const void* in, void* out, size_t count, DType dtype, const Options& opts,
                           cudaStream_t stream) = 0;

  // The mode `opts` resolves to for this size (resolves kAuto; reports the NCCL fallback).
  virtual Mode resolve_mode(size_t count, DType dtype, const Options& opts) const = 0;

  // After a kernel reported a timeout (a peer never arrived): the error naming the rank
  // and the step, or Ok. Reading it synchronizes the communicator's device.
  virtual Status check_peer_error() = 0;
};

}  // namespace lowbit::allreduce
