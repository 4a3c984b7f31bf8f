// Flash All-Reduce: public API (modes, options, the CPU reference of each algorithm).
// The GPU communicator is declared in lowbit/allreduce_cuda.h.
//
// Semantics every path keeps (GPU kernels, CPU simulation, CPU reference):
// - Unquantized modes (one-shot, two-shot): out = round_to_dtype(sum over ranks 0..N-1 in
//   rank order, in fp32).
// - Quantized two-step with codecs C1 (step 1) and C2 (step 2), per global group of G
//   elements (groups never straddle slices or chunks, so results do not depend on the
//   slicing, the chunk size or the number of SMs):
//     s   = sum over ranks r = 0..N-1 in rank order, fp32, of decode(C1, encode(C1, x_r))
//           (every rank's contribution, the owner's own included, passes through C1)
//     s16 = round_to_dtype(s)
//     out = decode(C2, encode(C2, s16))      -- the same bytes on every rank
//   so all ranks' outputs are bit-identical and equal the CPU reference bit for bit.
// - Every rounding to the dtype turns NaN into the positive canonical NaN (0x7E00 fp16,
//   0x7FC0 bf16): a NaN's sign is not preserved (GPU fp32 adds drop it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/detail/codec_math.h"
#include "lowbit/status.h"

namespace lowbit::allreduce {

enum class Mode {
  kAuto,     // fastest measured mode within Options::precision (never slower than NCCL)
  kNccl,     // ncclAllReduce
  kOneShot,  // every rank reads every peer's input and reduces (small messages)
  kTwoShot,  // reduce-scatter + all-gather by peer reads/writes, unquantized
  kQ8Q8,     // two-step, INT8 step 1, INT8 step 2
  kQ4Q8,     // two-step, INT4 step 1, INT8 step 2 (the paper's "INT6")
  kQ4Q4,     // two-step, INT4 step 1, INT4 step 2
};

// The most precision loss `kAuto` may choose.
enum class Precision { kExact, kInt8, kInt4Int8, kInt4 };

const char* mode_name(Mode m);        // "auto", "nccl", "oneshot", "twoshot", "q8q8", "q4q8", "q4q4"
Status parse_mode(const std::string& s, Mode* out);
const char* precision_name(Precision p);  // "exact", "int8", "int4-int8", "int4"
Status parse_precision(const std::string& s, Precision* out);
bool mode_is_quantized(Mode m);
// Codec of step 1 / step 2 of a quantized mode.
codec::CodecSpec step1_codec(Mode m, int group_size);
codec::CodecSpec step2_codec(Mode m, int group_size);

struct Options {
  Mode mode = Mode::kAuto;
  Precision precision = Precision::kExact;  // for kAuto
  int group_size = 128;                     // quantized modes: 32, 64 or 128
  int num_sms = 0;                          // 0: the communicator's tuned default
  // Diagnostics (lowbit bench allreduce --trace): a device buffer of 8 * kMaxTiles (132)
  // u64 on this rank's GPU, zeroed by the caller. Each block adds the nanoseconds it spent
  // in every phase (kernels/allreduce/allreduce_kernels.h: TracePhase). nullptr: off.
  uint64_t* debug_phase_ns = nullptr;
};

// Communicator configuration (plain C++ so CPU-only code can hold one).
struct Config {
  // Staging memory per rank (device memory, mapped on every peer), split into an LL one-shot
  // area (1/8), a one-shot area (1/8) and step-1 receive / step-2 gather areas (3/8 each).
  // Larger messages are processed in chunks that fit; see lowbit/detail/allreduce_protocol.h.
  size_t buffer_bytes = 256ull << 20;  // fewer chunks for large messages (an H200 has 141 GB)
  int timeout_ms = 10000;   // bound on every wait for a peer
  int default_num_sms = 0;  // blocks per kernel; 0: chosen per mode and size
  // One-shot messages up to this size use the LL variant (flags inside the data: no fence,
  // no flag round trip; twice the bytes on the wire). 0: never. Same results either way.
  size_t oneshot_ll_max_bytes = 512ull << 10;
  // Quantized messages of at least this size run the split two-step (three kernels per
  // chunk, each with as many warps as fit, instead of one fused kernel of one block per
  // SM; same bytes, same results). ~size_t{0}: never (the default until it is measured on
  // the GPUs: see docs/allreduce.md).
  size_t quant_split_min_bytes = ~size_t{0};
};

// CPU reference: outputs[r] (n values) for every rank, computed exactly as specified above.
// inputs and outputs hold one pointer per rank; outputs may alias inputs (in place).
// kAuto and kNccl are not algorithms of their own: pass the mode that would run.
Status reference_allreduce(Mode mode, int group_size, DType dtype, const std::vector<const uint16_t*>& inputs,
                           const std::vector<uint16_t*>& outputs, size_t n);

}  // namespace lowbit::allreduce
