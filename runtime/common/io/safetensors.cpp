// safetensors reader/writer. The file is untrusted input: every length, offset and shape is
// checked with overflow-safe arithmetic before anything is indexed, JSON errors never
// escape as exceptions, and the tensors must tile the data section exactly (the format's
// own rule: sorted by offset, each begins where the previous ends, the last ends at EOF),
// which also rules out overlapping tensors and unreferenced bytes.
#include "lowbit/io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace lowbit::io {
namespace {

// The reference implementation (huggingface/safetensors) caps the header at 100 MB; a
// larger length is either corruption or an attack on memory.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// Bound on rank: real checkpoints use <= 5; a huge rank is corruption.
constexpr size_t kMaxRank = 16;

struct DTypeEntry {
  const char* name;
  TensorDType dtype;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {"F64", TensorDType::kF64, 8},   {"F32", TensorDType::kF32, 4},   {"F16", TensorDType::kF16, 2},
    {"BF16", TensorDType::kBF16, 2}, {"I64", TensorDType::kI64, 8},   {"I32", TensorDType::kI32, 4},
    {"I16", TensorDType::kI16, 2},   {"I8", TensorDType::kI8, 1},     {"U8", TensorDType::kU8, 1},
    {"BOOL", TensorDType::kBool, 1}, {"U16", TensorDType::kU16, 2},   {"U32", TensorDType::kU32, 4},
    {"U64", TensorDType::kU64, 8},   {"F8_E4M3", TensorDType::kF8E4M3, 1}, {"F8_E5M2", TensorDType::kF8E5M2, 1},
    {"F8_E8M0", TensorDType::kF8E8M0, 1}, {"C64", TensorDType::kC64, 8},
};

bool dtype_from_name(const std::string& s, TensorDType* out) {
  for (const auto& e : kDTypes)
    if (s == e.name) {
      *out = e.dtype;
      return true;
    }
  return false;
}

Status corrupt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status corrupt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return Status(StatusCode::kCorruptData, std::string("safetensors: ") + buf);
}

// Reads a JSON number that must be a non-negative integer fitting in uint64.
bool json_u64(const nlohmann::json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

// Short, printable excerpt of a tensor name for error messages (names are untrusted).
std::string printable(const std::string& s) {
  std::string o;
  for (char c : s.substr(0, 80)) o += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > 80) o += "...";
  return o;
}

Status parse_tensor(const std::string& name, const nlohmann::json& v, size_t data_size, TensorInfo* t) {
  const std::string pn = printable(name);
  if (!v.is_object()) return corrupt("tensor '%s': entry is not a JSON object", pn.c_str());
  for (const auto& [key, _] : v.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return corrupt("tensor '%s': unknown field '%s'", pn.c_str(), printable(key).c_str());
  auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
  if (dt == v.end() || sh == v.end() || off == v.end())
    return corrupt("tensor '%s': needs dtype, shape and data_offsets", pn.c_str());
  if (!dt->is_string()) return corrupt("tensor '%s': dtype is not a string", pn.c_str());
  t->name = name;
  if (!dtype_from_name(dt->get<std::string>(), &t->dtype))
    return corrupt("tensor '%s': unsupported dtype '%s'", pn.c_str(), printable(dt->get<std::string>()).c_str());
  if (!sh->is_array()) return corrupt("tensor '%s': shape is not an array", pn.c_str());
  if (sh->size() > kMaxRank) return corrupt("tensor '%s': rank %zu > %zu", pn.c_str(), sh->size(), kMaxRank);
  uint64_t numel = 1;
  t->shape.clear();
  for (const auto& d : *sh) {
    uint64_t x;
    if (!json_u64(d, &x) || x > static_cast<uint64_t>(INT64_MAX))
      return corrupt("tensor '%s': shape entry %s is not a non-negative integer", pn.c_str(),
                     d.dump().substr(0, 40).c_str());
    if (__builtin_mul_overflow(numel, x, &numel))
      return corrupt("tensor '%s': element count overflows 64 bits", pn.c_str());
    t->shape.push_back(static_cast<int64_t>(x));
  }
  uint64_t nbytes;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(tensor_dtype_size(t->dtype)), &nbytes))
    return corrupt("tensor '%s': byte size overflows 64 bits", pn.c_str());
  if (!off->is_array() || off->size() != 2)
    return corrupt("tensor '%s': data_offsets must be [begin, end]", pn.c_str());
  uint64_t b, e;
  if (!json_u64((*off)[0], &b) || !json_u64((*off)[1], &e))
    return corrupt("tensor '%s': data_offsets are not non-negative integers", pn.c_str());
  if (b > e) return corrupt("tensor '%s': data_offsets begin %llu > end %llu", pn.c_str(),
                            (unsigned long long)b, (unsigned long long)e);
  if (e > data_size)
    return corrupt("tensor '%s': data_offsets end %llu beyond the data section (%zu bytes)", pn.c_str(),
                   (unsigned long long)e, data_size);
  if (e - b != nbytes)
    return corrupt("tensor '%s': data_offsets span %llu bytes but shape x dtype needs %llu", pn.c_str(),
                   (unsigned long long)(e - b), (unsigned long long)nbytes);
  t->offset = static_cast<size_t>(b);
  t->nbytes = static_cast<size_t>(nbytes);
  return Status::Ok();
}

}  // namespace

const char* tensor_dtype_name(TensorDType t) {
  for (const auto& e : kDTypes)
    if (e.dtype == t) return e.name;
  return "?";
}

size_t tensor_dtype_size(TensorDType t) {
  for (const auto& e : kDTypes)
    if (e.dtype == t) return e.size;
  return 0;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated at parse time not to overflow
  return n;
}

Status SafetensorsFile::find(const std::string& name, const TensorInfo** info) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return make_status(StatusCode::kInvalidArgument, "safetensors: no tensor named '%s'", name.c_str());
  *info = &it->second;
  return Status::Ok();
}

namespace {

// A read-only private mapping of a whole file, unmapped when the last SafetensorsFile copy
// that shares it goes away.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

}  // namespace

Status SafetensorsFile::open(const std::string& path, SafetensorsFile* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "SafetensorsFile::open: out is null");
  *out = SafetensorsFile();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_status(StatusCode::kIoError, "safetensors: cannot open '%s': %s", path.c_str(), std::strerror(errno));
  struct stat sb;
  const int st_rc = ::fstat(fd, &sb);
  const int st_errno = errno;
  if (st_rc != 0 || !S_ISREG(sb.st_mode)) {
    ::close(fd);
    return st_rc != 0 ? make_status(StatusCode::kIoError, "safetensors: cannot stat '%s': %s", path.c_str(),
                                    std::strerror(st_errno))
                      : make_status(StatusCode::kIoError, "safetensors: '%s' is not a regular file", path.c_str());
  }
  const size_t size = static_cast<size_t>(sb.st_size);
  auto map = std::make_shared<Mapping>();
  if (size > 0) {  // an empty file cannot be mapped; parse_image reports it as too short
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return make_status(StatusCode::kIoError, "safetensors: cannot map '%s' (%zu bytes): %s", path.c_str(), size,
                         std::strerror(e));
    }
    map->addr = addr;
    map->size = size;
  }
  ::close(fd);  // the mapping keeps the file open
  const auto* base = static_cast<const uint8_t*>(map->addr);
  Status st = parse_image(std::move(map), base, size, out);
  if (!st.ok()) return Status(st.code(), st.message() + " (file '" + path + "')");
  return st;
}

Status SafetensorsFile::parse(std::vector<uint8_t> bytes, SafetensorsFile* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "SafetensorsFile::parse: out is null");
  auto owner = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const uint8_t* base = owner->data();
  const size_t size = owner->size();
  return parse_image(std::move(owner), base, size, out);
}

Status SafetensorsFile::parse_image(std::shared_ptr<const void> owner, const uint8_t* bytes, size_t size,
                                    SafetensorsFile* out) {
  *out = SafetensorsFile();
  if (size < 8) return corrupt("file is %zu bytes, shorter than the 8-byte header length", size);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (hlen > kMaxHeaderBytes)
    return corrupt("header length %llu exceeds the %llu-byte limit", (unsigned long long)hlen,
                   (unsigned long long)kMaxHeaderBytes);
  if (hlen > size - 8)
    return corrupt("header length %llu exceeds the %zu bytes after the length field (truncated?)",
                   (unsigned long long)hlen, size - 8);
  if (hlen < 2) return corrupt("header length %llu too small for a JSON object", (unsigned long long)hlen);
  const char* hbeg = reinterpret_cast<const char*>(bytes + 8);
  if (hbeg[0] != '{') return corrupt("header does not start with '{'");
  const size_t data_start = 8 + static_cast<size_t>(hlen);
  const size_t data_size = size - data_start;

  // Duplicate top-level keys would silently overwrite each other in a JSON object; the
  // callback sees every key at depth 1 and flags repeats.
  std::set<std::string> seen_keys;
  bool duplicate = false;
  std::string dup_name;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (ev == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!seen_keys.insert(parsed.get<std::string>()).second && !duplicate) {
        duplicate = true;
        dup_name = parsed.get<std::string>();
      }
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(hbeg, hbeg + hlen, cb, /*allow_exceptions=*/false);
  } catch (const std::exception& e) {
    return corrupt("header JSON: %s", e.what());
  }
  if (header.is_discarded()) return corrupt("header is not valid JSON");
  if (!header.is_object()) return corrupt("header is not a JSON object");
  if (duplicate) return corrupt("header repeats the key '%s'", printable(dup_name).c_str());

  try {
    std::vector<const TensorInfo*> order;
    for (const auto& [name, v] : header.items()) {
      if (name == "__metadata__") {
        if (!v.is_object()) return corrupt("__metadata__ is not a JSON object");
        for (const auto& [mk, mv] : v.items()) {
          if (!mv.is_string())
            return corrupt("__metadata__['%s'] is not a string", printable(mk).c_str());
          out->metadata_[mk] = mv.get<std::string>();
        }
        continue;
      }
      if (name.empty()) return corrupt("a tensor has an empty name");
      TensorInfo t;
      LOWBIT_RETURN_IF_ERROR(parse_tensor(name, v, data_size, &t));
      out->tensors_[name] = std::move(t);
    }
    for (const auto& [_, t] : out->tensors_) order.push_back(&t);
    // Ties (zero-byte tensors at one offset) are ordered by size so the coverage walk works.
    std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
    });
    size_t pos = 0;
    for (const TensorInfo* t : order) {
      if (t->offset < pos)
        return corrupt("tensor '%s' [%zu, %zu) overlaps the previous tensor (ends at %zu)",
                       printable(t->name).c_str(), t->offset, t->offset + t->nbytes, pos);
      if (t->offset > pos)
        return corrupt("gap in the data section: bytes [%zu, %zu) belong to no tensor (before '%s')", pos,
                       t->offset, printable(t->name).c_str());
      pos = t->offset + t->nbytes;
    }
    if (pos != data_size)
      return corrupt("tensors cover %zu bytes but the data section has %zu (truncated or trailing bytes)", pos,
                     data_size);
  } catch (const std::exception& e) {
    *out = SafetensorsFile();
    return corrupt("header JSON: %s", e.what());
  }
  out->owner_ = std::move(owner);
  out->base_ = bytes;
  out->data_start_ = data_start;
  return Status::Ok();
}

// ---- sharded checkpoints ----

namespace {

// A shard file name from an index: a plain name inside the index's directory.
bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos && s.find('\0') == std::string::npos;
}

Status list_directory(const std::string& dir, std::vector<std::string>* shards, std::vector<std::string>* indexes) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return make_status(StatusCode::kIoError, "safetensors: cannot list directory '%s': %s", dir.c_str(),
                       std::strerror(errno));
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.ends_with(".safetensors.index.json")) indexes->push_back(name);
    else if (name.ends_with(".safetensors")) shards->push_back(name);
  }
  ::closedir(d);
  std::sort(shards->begin(), shards->end());
  std::sort(indexes->begin(), indexes->end());
  return Status::Ok();
}

}  // namespace

Status SafetensorsCheckpoint::find(const std::string& name, const TensorInfo** info) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return make_status(StatusCode::kInvalidArgument, "safetensors: no tensor named '%s' in %zu shard(s) of '%s'",
                       name.c_str(), shards_.size(), directory_.c_str());
  *info = &it->second;
  return Status::Ok();
}

const uint8_t* SafetensorsCheckpoint::data(const TensorInfo& info) const {
  auto it = shard_of_.find(info.name);
  return it == shard_of_.end() ? nullptr : shards_[it->second].data(info);
}

Status SafetensorsCheckpoint::open(const std::string& path, SafetensorsCheckpoint* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "SafetensorsCheckpoint::open: out is null");
  *out = SafetensorsCheckpoint();
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0)
    return make_status(StatusCode::kIoError, "safetensors: cannot open '%s': %s", path.c_str(), std::strerror(errno));
  std::string dir, index;
  std::vector<std::string> names;  // shard file names inside dir
  if (S_ISDIR(sb.st_mode)) {
    dir = path;
    std::vector<std::string> indexes;
    LOWBIT_RETURN_IF_ERROR(list_directory(dir, &names, &indexes));
    if (indexes.size() > 1)
      return make_status(StatusCode::kInvalidArgument,
                         "safetensors: directory '%s' holds %zu index files ('%s', '%s', ...); name one", dir.c_str(),
                         indexes.size(), indexes[0].c_str(), indexes[1].c_str());
    out->whole_model_ = true;
    if (indexes.size() == 1) index = indexes[0];
    else if (names.empty())
      return make_status(StatusCode::kInvalidArgument, "safetensors: directory '%s' holds no .safetensors file",
                         dir.c_str());
  } else {
    const size_t slash = path.rfind('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    if (base.ends_with(".json")) index = base;
    else names = {base};
    out->whole_model_ = !index.empty();
  }
  std::map<std::string, std::string> weight_map;  // tensor -> shard file (index mode)
  if (!index.empty()) {
    const std::string ipath = dir + "/" + index;
    std::ifstream in(ipath);
    if (!in) return make_status(StatusCode::kIoError, "safetensors: cannot open index '%s'", ipath.c_str());
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return make_status(StatusCode::kCorruptData, "safetensors: index '%s' is not a JSON object", ipath.c_str());
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object() || wm->empty())
      return make_status(StatusCode::kCorruptData, "safetensors: index '%s' has no \"weight_map\" object of tensors",
                         ipath.c_str());
    std::set<std::string> files;
    for (const auto& [tensor, file] : wm->items()) {
      if (!file.is_string() || !plain_file_name(file.get<std::string>()))
        return make_status(StatusCode::kCorruptData,
                           "safetensors: index '%s' names shard %s for tensor '%s'; expected a file name in its directory",
                           ipath.c_str(), file.dump().substr(0, 80).c_str(), printable(tensor).c_str());
      weight_map[tensor] = file.get<std::string>();
      files.insert(file.get<std::string>());
    }
    names.assign(files.begin(), files.end());
  }
  out->directory_ = dir;
  for (const std::string& name : names) {
    out->paths_.push_back(dir + "/" + name);
    out->shards_.emplace_back();
    LOWBIT_RETURN_IF_ERROR(SafetensorsFile::open(out->paths_.back(), &out->shards_.back()));
  }
  for (size_t i = 0; i < out->shards_.size(); ++i) {
    for (const auto& [tname, t] : out->shards_[i].tensors()) {
      if (!index.empty()) {
        auto w = weight_map.find(tname);
        if (w == weight_map.end() || w->second != names[i]) {
          const std::string listed = w == weight_map.end() ? "does not list it" : "places it in '" + w->second + "'";
          return make_status(StatusCode::kCorruptData, "safetensors: tensor '%s' is in shard '%s' but the index '%s' %s",
                             printable(tname).c_str(), names[i].c_str(), index.c_str(), listed.c_str());
        }
      }
      auto [it, inserted] = out->shard_of_.emplace(tname, i);
      if (!inserted)
        return make_status(StatusCode::kCorruptData, "safetensors: tensor '%s' is in two shards, '%s' and '%s'",
                           printable(tname).c_str(), names[it->second].c_str(), names[i].c_str());
      out->tensors_.emplace(tname, t);
    }
  }
  for (const auto& [tname, file] : weight_map)
    if (out->shard_of_.count(tname) == 0)
      return make_status(StatusCode::kCorruptData, "safetensors: the index '%s' places tensor '%s' in shard '%s', which has no such tensor",
                         index.c_str(), printable(tname).c_str(), file.c_str());
  return Status::Ok();
}

// ---- writing ----

namespace {

// The header JSON of entries (name, dtype, shape, begin, end) and metadata, padded with spaces
// to a multiple of 8 bytes so the data section starts 8-byte aligned (as the reference writer
// does). A template so that it takes SafetensorsWriter's private entry type.
template <typename E>
Status encode_header(const std::vector<E>& entries, const std::map<std::string, std::string>& metadata,
                     std::string* out) {
  nlohmann::json header = nlohmann::json::object();
  for (const auto& e : entries)
    header[e.name] = {{"dtype", tensor_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  if (!metadata.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  try {
    *out = header.dump();
  } catch (const std::exception& e) {  // invalid UTF-8 in a name or metadata value
    return make_status(StatusCode::kInvalidArgument, "write_safetensors: cannot encode header: %s", e.what());
  }
  while (out->size() % 8 != 0) *out += ' ';
  return Status::Ok();
}

// Byte size of a tensor to write, checked (name, dtype, dimensions, overflow, data).
Status tensor_bytes(const TensorToWrite& t, uint64_t* bytes) {
  LOWBIT_CHECK_ARG(!t.name.empty() && t.name != "__metadata__", "write_safetensors: invalid tensor name '%s'",
                   t.name.c_str());
  const size_t es = tensor_dtype_size(t.dtype);
  LOWBIT_CHECK_ARG(es != 0, "write_safetensors: tensor '%s' has an invalid dtype", t.name.c_str());
  uint64_t n = es;
  for (int64_t d : t.shape) {
    LOWBIT_CHECK_ARG(d >= 0, "write_safetensors: tensor '%s' has a negative dimension", t.name.c_str());
    LOWBIT_CHECK_ARG(!__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n),
                     "write_safetensors: tensor '%s' size overflows", t.name.c_str());
  }
  LOWBIT_CHECK_ARG(n == 0 || t.data != nullptr, "write_safetensors: tensor '%s' has null data", t.name.c_str());
  *bytes = n;
  return Status::Ok();
}

bool pwrite_all(int fd, const void* data, uint64_t n, uint64_t offset) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n > (1u << 30) ? (1u << 30) : n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

// n bytes of in from in_off to out at out_off: copy_file_range (in-kernel, no user copy), or
// read / write through a buffer where the file system refuses it.
bool copy_range(int in, uint64_t in_off, int out, uint64_t out_off, uint64_t n) {
  while (n > 0) {
    loff_t io = static_cast<loff_t>(in_off), oo = static_cast<loff_t>(out_off);
    const ssize_t c = ::copy_file_range(in, &io, out, &oo, n > (1u << 30) ? (1u << 30) : n, 0);
    if (c < 0 && errno == EINTR) continue;
    if (c <= 0) break;
    in_off += static_cast<uint64_t>(c);
    out_off += static_cast<uint64_t>(c);
    n -= static_cast<uint64_t>(c);
  }
  std::vector<char> buf(n > 0 ? (8u << 20) : 0);
  while (n > 0) {
    const ssize_t r = ::pread(in, buf.data(), n < buf.size() ? n : buf.size(), static_cast<off_t>(in_off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || !pwrite_all(out, buf.data(), static_cast<uint64_t>(r), out_off)) return false;
    in_off += static_cast<uint64_t>(r);
    out_off += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

SafetensorsWriter::~SafetensorsWriter() { abandon(); }

void SafetensorsWriter::abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(partial_.c_str());
  }
  fd_ = -1;
}

Status SafetensorsWriter::open(const std::string& path, size_t header_reserve) {
  abandon();
  LOWBIT_CHECK_ARG(!path.empty(), "SafetensorsWriter::open: empty path");
  path_ = path;
  partial_ = path + ".partial";
  reserve_ = (std::max<size_t>(header_reserve, 16) + 7) / 8 * 8;
  pos_ = 0;
  entries_.clear();
  names_.clear();
  fd_ = ::open(partial_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return make_status(StatusCode::kIoError, "write_safetensors: cannot create '%s': %s", partial_.c_str(),
                       std::strerror(errno));
  return Status::Ok();
}

Status SafetensorsWriter::add(const TensorToWrite& t) {
  LOWBIT_CHECK_ARG(fd_ >= 0, "write_safetensors: add('%s') on a writer that is not open", t.name.c_str());
  uint64_t n = 0;
  Status st = tensor_bytes(t, &n);
  if (st.ok() && !names_.insert(t.name).second)
    st = make_status(StatusCode::kInvalidArgument, "write_safetensors: duplicate tensor name '%s'", t.name.c_str());
  if (st.ok() && n > 0 && !pwrite_all(fd_, t.data, n, reserve_ + pos_))
    st = make_status(StatusCode::kIoError, "write_safetensors: writing tensor '%s' to '%s' failed: %s", t.name.c_str(),
                     partial_.c_str(), std::strerror(errno));
  if (!st.ok()) {
    abandon();
    return st;
  }
  entries_.push_back({t.name, t.dtype, t.shape, pos_, pos_ + n});
  pos_ += n;
  return Status::Ok();
}

Status SafetensorsWriter::finish(const std::map<std::string, std::string>& metadata) {
  LOWBIT_CHECK_ARG(fd_ >= 0, "write_safetensors: finish() on a writer that is not open ('%s')", path_.c_str());
  std::string h;
  Status st = encode_header(entries_, metadata, &h);
  auto fail = [&](const char* what, const std::string& file) {
    const int e = errno;
    abandon();
    return make_status(StatusCode::kIoError, "write_safetensors: %s '%s': %s", what, file.c_str(), std::strerror(e));
  };
  if (!st.ok()) {
    abandon();
    return st;
  }
  auto length = [](uint64_t v) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
    return b;
  };
  if (8 + h.size() <= reserve_) {
    h.append(reserve_ - 8 - h.size(), ' ');  // the format allows trailing spaces in the header
    const std::string head = length(h.size()) + h;
    if (!pwrite_all(fd_, head.data(), head.size(), 0)) return fail("writing the header of", partial_);
    if (::close(fd_) != 0) {
      fd_ = -1;
      ::unlink(partial_.c_str());
      return make_status(StatusCode::kIoError, "write_safetensors: closing '%s' failed", partial_.c_str());
    }
    fd_ = -1;
    if (::rename(partial_.c_str(), path_.c_str()) != 0) {
      const int e = errno;
      ::unlink(partial_.c_str());
      return make_status(StatusCode::kIoError, "write_safetensors: cannot rename '%s' to '%s': %s", partial_.c_str(),
                         path_.c_str(), std::strerror(e));
    }
    return Status::Ok();
  }
  // The header outgrew its reserve: header and data into a second file.
  const std::string second = path_ + ".partial2";
  const int out = ::open(second.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return fail("cannot create", second);
  const std::string head = length(h.size()) + h;
  const bool ok = pwrite_all(out, head.data(), head.size(), 0) && copy_range(fd_, reserve_, out, head.size(), pos_);
  const int e = errno;
  const bool closed = ::close(out) == 0;
  if (!ok || !closed || ::rename(second.c_str(), path_.c_str()) != 0) {
    ::unlink(second.c_str());
    errno = ok && closed ? errno : e;
    return fail("writing", second);
  }
  abandon();  // the first partial file
  return Status::Ok();
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  // The header is known up front here: reserve exactly its size.
  struct Entry {
    std::string name;
    TensorDType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  uint64_t pos = 0;
  for (const auto& t : tensors) {
    uint64_t n = 0;
    LOWBIT_RETURN_IF_ERROR(tensor_bytes(t, &n));
    entries.push_back({t.name, t.dtype, t.shape, pos, pos + n});
    pos += n;
  }
  std::string h;
  LOWBIT_RETURN_IF_ERROR(encode_header(entries, metadata, &h));
  SafetensorsWriter w;
  LOWBIT_RETURN_IF_ERROR(w.open(path, 8 + h.size()));
  for (const auto& t : tensors) LOWBIT_RETURN_IF_ERROR(w.add(t));
  return w.finish(metadata);
}

}  // namespace lowbit::io
