// CPU simulation of the Flash All-Reduce protocol: N ranks x T blocks as std::threads over
// host buffers, executing the chunk/slot/flag/epoch logic of lowbit/detail/allreduce_protocol.h
// exactly as the kernels do (flags are std::atomic<uint64_t> with release/acquire; every
// wait is bounded and reports rank, peer, step and chunk). Used by the CPU tests to check
// the protocol (ordering, buffer reuse across chunks and calls, epochs, timeouts) without a
// GPU; its outputs must equal reference_allreduce bit for bit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "lowbit/allreduce.h"
#include "lowbit/detail/allreduce_protocol.h"

namespace lowbit::allreduce {

class ProtocolSim {
 public:
  // buffer_bytes: staging per rank (as Config::buffer_bytes); tiles: blocks per rank.
  ProtocolSim(int nranks, size_t buffer_bytes, int tiles, int timeout_ms);

  // One all-reduce on every rank (each rank's T blocks run as threads). Ranks whose
  // `present` entry is false do not take part (to test timeouts). Returns the first
  // failing rank's Status (timeouts name rank, missing peer, step and chunk).
  // mode: kOneShot, kTwoShot, kQ8Q8, kQ4Q8, kQ4Q4.
  Status allreduce(Mode mode, int group_size, DType dtype, const std::vector<const uint16_t*>& inputs,
                   const std::vector<uint16_t*>& outputs, size_t n, const std::vector<bool>& present = {});

  int nranks() const { return nranks_; }
  // One-shot calls up to this many bytes run the LL variant (as Config::oneshot_ll_max_bytes).
  void set_oneshot_ll_max_bytes(size_t b) { ll_max_bytes_ = b; }
  // Quantized calls of at least this many bytes run the split two-step (as
  // Config::quant_split_min_bytes).
  void set_quant_split_min_bytes(size_t b) { split_min_bytes_ = b; }

 private:
  struct Rank {
    std::vector<uint8_t> mem;                 // staging (control block bytes unused)
    std::unique_ptr<std::atomic<uint64_t>[]> ctl;  // control words
  };
  void run_block(int rank, int tile, const proto::Plan& plan, DType dtype, const uint16_t* in, uint16_t* out,
                 Status* st);
  void run_split_rank(int rank, const proto::Plan& plan, DType dtype, const uint16_t* in, uint16_t* out, Status* st);
  bool run_ll(int rank, int tile, const proto::Plan& plan, DType dtype, const uint16_t* in, uint16_t* out,
              uint64_t base, Status* st);
  bool wait_flag(int rank, size_t index, uint64_t epoch, int peer, int step, size_t chunk, Status* st);
  // The per-tile work of the quantized two-step, shared by the fused (run_block) and the
  // split (run_split_rank) schedules; they differ only in who does which tile and how the
  // flags are raised. Step 1: encode tile t of slice j of `in` into rank j's recv slot for
  // `rank`. Step 2: sum tile t of my slice over every sender (fixed order), round, encode it
  // into every rank's gather slot. Step 3: decode owner j's reduced tile t into `out`.
  void send_tile(int rank, int j, int t, size_t chunk, const proto::Plan& plan, DType dtype, const uint16_t* in);
  void reduce_tile(int rank, int t, size_t chunk, const proto::Plan& plan, DType dtype, uint16_t* tmp);
  void gather_tile(int rank, int j, int t, size_t chunk, const proto::Plan& plan, DType dtype, uint16_t* out);

  int nranks_;
  int tiles_;
  int timeout_ms_;
  size_t ll_max_bytes_ = Config{}.oneshot_ll_max_bytes;
  size_t split_min_bytes_ = Config{}.quant_split_min_bytes;
  proto::Areas areas_;
  std::vector<Rank> ranks_;
};

}  // namespace lowbit::allreduce
