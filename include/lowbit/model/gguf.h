// Validating reader of GGUF v2/v3 files (the llama.cpp model format) and dequantization of
// the GGML tensor types lowbit's models use, to fp32.
//
// File layout (little endian): magic "GGUF", u32 version (2 or 3), u64 tensor_count,
// u64 kv_count, kv_count metadata entries {string key, u32 type, value}, tensor_count
// tensor infos {string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset}, then
// padding to general.alignment (default 32) and the data section. A string is u64 length +
// bytes (no terminator). ne[0] is the fastest-varying dimension, so a 2-D weight with
// ne = [in, out] is row-major [out, in]. Tensor offsets are relative to the data section
// and must be multiples of the alignment.
//
// Every inconsistency (bad magic, unsupported version, truncation anywhere, absurd counts
// or lengths, unknown value or tensor types, data out of bounds or misaligned) yields a
// kCorruptData / kNotSupported Status naming the problem; the reader never reads past
// the buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lowbit/status.h"

namespace lowbit::model::gguf {

// Metadata value types (gguf_type).
enum class ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* value_type_name(ValueType t);

// GGML tensor types (ggml_type numbering). Only those listed in tensor_type_supported()
// can be dequantized; any other id in a file is kNotSupported on dequantization (and
// kCorruptData at parse time when its block size is unknown).
enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15, kBF16 = 30,
};
const char* tensor_type_name(uint32_t t);
// Elements per block and bytes per block of a GGML type; false for an unknown id.
bool tensor_type_block(uint32_t t, int64_t* block_elems, int64_t* block_bytes);
// True for the types dequantize() implements: F32, F16, BF16, Q4_0, Q4_1, Q8_0.
bool tensor_type_supported(uint32_t t);

// One metadata value. Scalars: integers in i (signed types, bool) or u (unsigned), floats
// in f. Strings in s. Arrays: element type in elem_type; numeric elements in arr_i/arr_u/
// arr_f by the same rule, strings in arr_s (nested arrays are rejected as unsupported).
struct Value {
  ValueType type = ValueType::kU8;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0.0;
  std::string s;
  ValueType elem_type = ValueType::kU8;
  std::vector<int64_t> arr_i;
  std::vector<uint64_t> arr_u;
  std::vector<double> arr_f;
  std::vector<std::string> arr_s;
  size_t array_size() const;
};

struct TensorInfo {
  std::string name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] fastest
  uint32_t type = 0;             // a TensorType value
  uint64_t offset = 0;           // relative to the data section
  uint64_t n_bytes = 0;          // computed from ne and the type's block size
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Reads and validates the whole file (the data stays in memory).
  static Status open(const std::string& path, File* out);
  // Parses a file image already in memory (tests build corrupt images this way).
  static Status parse(std::vector<uint8_t> bytes, File* out);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, Value>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* find(const std::string& key) const;
  const TensorInfo* find_tensor(const std::string& name) const;
  // Typed getters: kInvalidArgument when the key is missing or has an incompatible type
  // (any integer type converts to int64 if it fits; any numeric type converts to double).
  Status get_int(const std::string& key, int64_t* out) const;
  Status get_float(const std::string& key, double* out) const;
  Status get_string(const std::string& key, std::string* out) const;
  Status get_string_array(const std::string& key, const std::vector<std::string>** out) const;

  // Raw bytes of a tensor (validated in bounds at parse time).
  const uint8_t* tensor_data(const TensorInfo& t) const { return bytes_.data() + data_start_ + t.offset; }
  // Dequantize a tensor to fp32 (n_elements values, ne[0] fastest).
  Status dequantize(const TensorInfo& t, std::vector<float>* out) const;

 private:
  std::vector<uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Dequantize n elements (a multiple of the type's block size) of GGML type `type` from
// `src` (n / block_elems blocks) into dst. Block definitions (ggml-common.h):
//   Q4_0: {f16 d; u8 qs[16]}         x[j] = ((qs[j] & 15) - 8) d, x[j+16] = ((qs[j] >> 4) - 8) d
//   Q4_1: {f16 d; f16 m; u8 qs[16]}  x[j] = (qs[j] & 15) d + m,  x[j+16] = (qs[j] >> 4) d + m
//   Q8_0: {f16 d; i8 qs[32]}         x[j] = qs[j] d
Status dequantize_raw(uint32_t type, const uint8_t* src, size_t n, float* dst);

}  // namespace lowbit::model::gguf

#include "lowbit/model/llama.h"

namespace lowbit::model {
// load_llama from a file already opened (lets the tokenizer share the parsed metadata).
Status load_llama(const gguf::File& file, LlamaConfig* cfg, LlamaWeights* w);
}  // namespace lowbit::model
