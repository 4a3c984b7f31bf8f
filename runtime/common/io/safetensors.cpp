// safetensors reader/writer. The file is untrusted input: every length, offset and shape is
// checked with overflow-safe arithmetic before anything is indexed, JSON errors never
// escape as exceptions, and the tensors must tile the data section exactly (the format's
// own rule: sorted by offset, each begins where the previous ends, the last ends at EOF),
// which also rules out overlapping tensors and unreferenced bytes.
#include "lowbit/io/safetensors.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

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
    {"U64", TensorDType::kU64, 8},
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

Status SafetensorsFile::open(const std::string& path, SafetensorsFile* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "SafetensorsFile::open: out is null");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return make_status(StatusCode::kIoError, "safetensors: cannot open '%s'", path.c_str());
  std::streamoff size = f.tellg();
  if (size < 0) return make_status(StatusCode::kIoError, "safetensors: cannot size '%s'", path.c_str());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  f.seekg(0);
  if (size > 0 && !f.read(reinterpret_cast<char*>(bytes.data()), size))
    return make_status(StatusCode::kIoError, "safetensors: short read of '%s'", path.c_str());
  Status st = parse(std::move(bytes), out);
  if (!st.ok()) return Status(st.code(), st.message() + " (file '" + path + "')");
  return st;
}

Status SafetensorsFile::parse(std::vector<uint8_t> bytes, SafetensorsFile* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "SafetensorsFile::parse: out is null");
  *out = SafetensorsFile();
  if (bytes.size() < 8) return corrupt("file is %zu bytes, shorter than the 8-byte header length", bytes.size());
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (hlen > kMaxHeaderBytes)
    return corrupt("header length %llu exceeds the %llu-byte limit", (unsigned long long)hlen,
                   (unsigned long long)kMaxHeaderBytes);
  if (hlen > bytes.size() - 8)
    return corrupt("header length %llu exceeds the %zu bytes after the length field (truncated?)",
                   (unsigned long long)hlen, bytes.size() - 8);
  if (hlen < 2) return corrupt("header length %llu too small for a JSON object", (unsigned long long)hlen);
  const char* hbeg = reinterpret_cast<const char*>(bytes.data() + 8);
  if (hbeg[0] != '{') return corrupt("header does not start with '{'");
  const size_t data_start = 8 + static_cast<size_t>(hlen);
  const size_t data_size = bytes.size() - data_start;

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
  out->bytes_ = std::move(bytes);
  out->data_start_ = data_start;
  return Status::Ok();
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::set<std::string> names;
  uint64_t pos = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors) {
    LOWBIT_CHECK_ARG(!t.name.empty() && t.name != "__metadata__", "write_safetensors: invalid tensor name '%s'",
                     t.name.c_str());
    LOWBIT_CHECK_ARG(names.insert(t.name).second, "write_safetensors: duplicate tensor name '%s'", t.name.c_str());
    size_t es = tensor_dtype_size(t.dtype);
    LOWBIT_CHECK_ARG(es != 0, "write_safetensors: tensor '%s' has an invalid dtype", t.name.c_str());
    uint64_t n = es;
    for (int64_t d : t.shape) {
      LOWBIT_CHECK_ARG(d >= 0, "write_safetensors: tensor '%s' has a negative dimension", t.name.c_str());
      LOWBIT_CHECK_ARG(!__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n),
                       "write_safetensors: tensor '%s' size overflows", t.name.c_str());
    }
    LOWBIT_CHECK_ARG(n == 0 || t.data != nullptr, "write_safetensors: tensor '%s' has null data", t.name.c_str());
    header[t.name] = {{"dtype", tensor_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {pos, pos + n}}};
    sizes.push_back(n);
    pos += n;
  }
  if (!metadata.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::string h;
  try {
    h = header.dump();
  } catch (const std::exception& e) {  // invalid UTF-8 in a name or metadata value
    return make_status(StatusCode::kInvalidArgument, "write_safetensors: cannot encode header: %s", e.what());
  }
  // Pad with spaces so the data section starts 8-byte aligned (as the reference writer does).
  while (h.size() % 8 != 0) h += ' ';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return make_status(StatusCode::kIoError, "write_safetensors: cannot create '%s'", path.c_str());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i]) f.write(static_cast<const char*>(tensors[i].data), static_cast<std::streamsize>(sizes[i]));
  f.flush();
  if (!f) return make_status(StatusCode::kIoError, "write_safetensors: write to '%s' failed", path.c_str());
  return Status::Ok();
}

}  // namespace lowbit::io
