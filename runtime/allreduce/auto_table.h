// kAuto: the fastest mode per (world size, message size) within the caller's precision.
// world 2 rows: measured on 2x H200 NV18 (bf16, G=128, `lowbit bench allreduce --sizes
// 16K:1G`, 2026-12-01, see docs/benchmarks/allreduce.md): NCCL wherever nothing beat it. Other
// world sizes: unmeasured structural defaults (one-shot small, two-shot medium, quantized
// large when allowed). Rows are matched in order: first row with world in {0, N} and
// bytes <= max_bytes. `lowbit bench allreduce` prints measured rows in this format.
#pragma once

#include <cstddef>

#include "lowbit/allreduce.h"

namespace lowbit::allreduce {

struct AutoRow {
  int world;         // 0: any world size
  size_t max_bytes;  // message bytes (count * 2) up to and including this
  Mode exact, int8, int4int8, int4;
};

constexpr size_t kAutoKiB = 1024, kAutoMiB = 1024 * 1024;

constexpr AutoRow kAutoTable[] = {
    // world, max bytes, exact, int8, int4-int8, int4
    {2, 4 * kAutoMiB, Mode::kOneShot, Mode::kOneShot, Mode::kOneShot, Mode::kOneShot},
    {2, 32 * kAutoMiB, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4},
    {2, ~size_t{0}, Mode::kNccl, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4},
    {0, 512 * kAutoKiB, Mode::kOneShot, Mode::kOneShot, Mode::kOneShot, Mode::kOneShot},
    {0, 4 * kAutoMiB, Mode::kTwoShot, Mode::kTwoShot, Mode::kTwoShot, Mode::kTwoShot},
    {0, 16 * kAutoMiB, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4},
    {0, ~size_t{0}, Mode::kNccl, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4},
};

inline Mode auto_mode(int world, size_t bytes, Precision p) {
  for (const AutoRow& r : kAutoTable) {
    if ((r.world == 0 || r.world == world) && bytes <= r.max_bytes) {
      switch (p) {
        case Precision::kExact: return r.exact;
        case Precision::kInt8: return r.int8;
        case Precision::kInt4Int8: return r.int4int8;
        case Precision::kInt4: return r.int4;
      }
    }
  }
  return Mode::kNccl;
}

}  // namespace lowbit::allreduce
