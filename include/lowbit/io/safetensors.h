// Safetensors files: a validating reader (one file, memory-mapped), sharded checkpoints
// (several files and their index), and writers (all at once, or streamed tensor by tensor).
// The format: an 8-byte little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}, "__metadata__": {...}}, then raw little-endian tensor data. Every field is
// checked against the file size; a corrupt or truncated file is a Status error naming the
// problem, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "lowbit/status.h"

namespace lowbit::io {

// The byte-sized dtypes of the format. FP8 tensors (F8_E4M3, F8_E5M2, F8_E8M0) and complex64
// (C64) are read as bytes, so that a checkpoint holding them next to the INT4 layers (FP8 KV
// scales, MX block scales, an FP8 MTP layer) opens; sub-byte dtypes (F4, F6_*) are refused.
enum class TensorDType {
  kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kU16, kU32, kU64,
  kF8E4M3, kF8E5M2, kF8E8M0, kC64
};

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
  // Maps the file read-only and validates it. Tensor bytes are paged in when read, so a
  // checkpoint shard larger than the host's memory can be walked one tensor at a time.
  static Status open(const std::string& path, SafetensorsFile* out);
  // Parses an in-memory image (used by the fuzz tests).
  static Status parse(std::vector<uint8_t> bytes, SafetensorsFile* out);

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Returns kInvalidArgument naming the tensor if absent.
  Status find(const std::string& name, const TensorInfo** info) const;
  // Pointer to the tensor's raw bytes (valid while this object, or a copy of it, lives).
  const uint8_t* data(const TensorInfo& info) const { return base_ + data_start_ + info.offset; }

 private:
  static Status parse_image(std::shared_ptr<const void> owner, const uint8_t* base, size_t size,
                            SafetensorsFile* out);
  std::shared_ptr<const void> owner_;  // keeps the bytes alive: a vector or a file mapping
  const uint8_t* base_ = nullptr;
  size_t data_start_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The tensors of a checkpoint stored as several safetensors shards, the way Hugging Face
// writes models larger than one file: `model.safetensors.index.json` ({"weight_map": {tensor:
// shard file}}) beside the shards. open() takes that index, a directory (its index if there is
// one, else every *.safetensors file in it), or one .safetensors file. Every shard is opened
// and validated; a tensor the index places in a shard that lacks it, a tensor found in two
// shards or in a shard the index does not name for it, a missing shard and a shard name that
// leaves the directory are errors naming the tensor and the files.
class SafetensorsCheckpoint {
 public:
  static Status open(const std::string& path, SafetensorsCheckpoint* out);

  // The directory the files were found in and the shard paths, in name order.
  const std::string& directory() const { return directory_; }
  // Whether the checkpoint was opened as a model (a directory or an index), not one file.
  bool whole_model() const { return whole_model_; }
  const std::vector<std::string>& shard_paths() const { return paths_; }
  // Every tensor of every shard (names are unique across shards).
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  Status find(const std::string& name, const TensorInfo** info) const;
  // The tensor's bytes, in whichever shard holds it; info must come from this object.
  const uint8_t* data(const TensorInfo& info) const;

 private:
  std::string directory_;
  bool whole_model_ = false;
  std::vector<std::string> paths_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, size_t> shard_of_;  // tensor name -> index into shards_
};

struct TensorToWrite {
  std::string name;
  TensorDType dtype;
  std::vector<int64_t> shape;
  const void* data;  // numel * dtype size bytes
};

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Writes a safetensors file one tensor at a time, so that a converter holds only the tensors
// of the layer it is working on. The data go straight into `path`.partial after
// header_reserve bytes left for the header; finish() writes the header into that space
// (padded with spaces, which the format allows) and renames the file to `path`. A header that
// outgrows the reserve costs one copy of the data into a second file. An unfinished writer
// (an error, or destroyed before finish()) removes its partial files: a failed conversion
// never leaves an output behind.
class SafetensorsWriter {
 public:
  SafetensorsWriter() = default;
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // header_reserve: bytes before the data (rounded up to 8; at least 16).
  Status open(const std::string& path, size_t header_reserve = 64 * 1024);
  Status add(const TensorToWrite& tensor);
  Status finish(const std::map<std::string, std::string>& metadata = {});
  // Bytes of tensor data written so far.
  uint64_t data_bytes() const { return pos_; }

 private:
  struct Entry {
    std::string name;
    TensorDType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  void abandon();
  std::string path_, partial_;
  int fd_ = -1;
  size_t reserve_ = 0;
  uint64_t pos_ = 0;
  std::vector<Entry> entries_;
  std::set<std::string> names_;
};

}  // namespace lowbit::io
