// Bitwise run-vs-run checks shared by the INT4 GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/cpu/int4/random_weights.h"

namespace lowbit::int4::testing {

// Two runs of one GEMM or layer that must agree bit for bit: no element differs, and every
// element of `got` was written (the outputs were poisoned with NaN) and fewer than 1% are zero.
inline void expect_same_bits_all_written(DType t, const std::vector<uint16_t>& ref, const std::vector<uint16_t>& got) {
  ASSERT_EQ(ref.size(), got.size());
  size_t diff = 0, nonfinite = 0, zero = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += ref[i] != got[i];
    const float v = half_bits_to_float(t, got[i]);
    nonfinite += !std::isfinite(v);
    zero += v == 0.f;
  }
  EXPECT_EQ(diff, 0u);
  EXPECT_EQ(nonfinite, 0u);  // every output written (the poison is NaN)
  EXPECT_LT(zero, got.size() / 100);
}

}  // namespace lowbit::int4::testing
