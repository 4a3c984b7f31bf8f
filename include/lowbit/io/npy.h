// A small validating reader for NumPy .npy files (format versions 1-3): little-endian
// float arrays '<f2', '<f4', '<f8' in C order. Anything else (bad magic, truncated header or
// data, big-endian or non-float dtypes, Fortran order) is a Status error naming the problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/status.h"

namespace lowbit::io {

struct NpyArray {
  std::string descr;            // e.g. "<f4"
  std::vector<int64_t> shape;   // () for a scalar
  std::vector<double> values;   // all elements in C order, converted exactly to double
};

Status parse_npy(const std::vector<uint8_t>& bytes, NpyArray* out);
Status read_npy(const std::string& path, NpyArray* out);

}  // namespace lowbit::io
