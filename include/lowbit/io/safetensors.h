// A validating reader (and a small writer) for safetensors files: an 8-byte little-endian
// header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then raw little-endian tensor data. Every field is checked against the file size; a
// corrupt or truncated file is a Status error naming the problem, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lowbit/status.h"

namespace lowbit::io {

enum class TensorDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kU16, kU32, kU64 };

const char* tensor_dtype_name(TensorDType t);
size_t tensor_dtype_size(TensorDType t);

struct TensorInfo {
  std::string name;
  TensorDType dtype;
  std::vector<int64_t> shape;
  size_t offset = 0;  // byte offset of the data inside the file's data section
  size_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Reads and validates the whole file into memory.
  static Status open(const std::string& path, SafetensorsFile* out);
  // Parses an in-memory image (used by open() and by the fuzz tests).
  static Status parse(std::vector<uint8_t> bytes, SafetensorsFile* out);

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Returns kInvalidArgument naming the tensor if absent.
  Status find(const std::string& name, const TensorInfo** info) const;
  // Pointer to the tensor's raw bytes (valid while this object lives).
  const uint8_t* data(const TensorInfo& info) const { return bytes_.data() + data_start_ + info.offset; }

 private:
  std::vector<uint8_t> bytes_;
  size_t data_start_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  TensorDType dtype;
  std::vector<int64_t> shape;
  const void* data;  // numel * dtype size bytes
};

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace lowbit::io
