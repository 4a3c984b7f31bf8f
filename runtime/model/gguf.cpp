// GGUF reader: a bounds-checked cursor over the file image; every read names what it was
// reading when the file ends early.
#include "lowbit/model/gguf.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace lowbit::model::gguf {
namespace {

// Limits far above any real model, low enough that a corrupt count cannot make us
// allocate unbounded memory before the truncation check fires.
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxKv = 1u << 20;
constexpr uint64_t kMaxStringLen = 1u << 30;
constexpr int kMaxDims = 4;

class Cursor {
 public:
  Cursor(const std::vector<uint8_t>& b) : b_(b) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return b_.size() - pos_; }
  Status bytes(void* dst, size_t n, const char* what) {
    if (n > remaining())
      return make_status(StatusCode::kCorruptData, "gguf: truncated while reading %s at byte %zu (need %zu, have %zu)",
                         what, pos_, n, remaining());
    std::memcpy(dst, b_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  template <typename T>
  Status read(T* v, const char* what) {
    return bytes(v, sizeof(T), what);
  }
  Status string(std::string* s, const char* what) {
    uint64_t n = 0;
    LOWBIT_RETURN_IF_ERROR(read(&n, what));
    if (n > kMaxStringLen || n > remaining())
      return make_status(StatusCode::kCorruptData, "gguf: %s: string length %llu at byte %zu exceeds the file (%zu left)",
                         what, static_cast<unsigned long long>(n), pos_, remaining());
    s->assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return Status::Ok();
  }

 private:
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    default: return 0;
  }
}

// Reads one scalar of type t into (i, u, f) by the Value convention.
Status read_scalar(Cursor& c, ValueType t, int64_t* i, uint64_t* u, double* f, const std::string& key) {
  const char* what = key.c_str();
  switch (t) {
    case ValueType::kU8: { uint8_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *u = v; break; }
    case ValueType::kI8: { int8_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *i = v; break; }
    case ValueType::kU16: { uint16_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *u = v; break; }
    case ValueType::kI16: { int16_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *i = v; break; }
    case ValueType::kU32: { uint32_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *u = v; break; }
    case ValueType::kI32: { int32_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *i = v; break; }
    case ValueType::kU64: { uint64_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *u = v; break; }
    case ValueType::kI64: { int64_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *i = v; break; }
    case ValueType::kF32: { float v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *f = v; break; }
    case ValueType::kF64: { double v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what)); *f = v; break; }
    case ValueType::kBool: {
      uint8_t v{}; LOWBIT_RETURN_IF_ERROR(c.read(&v, what));
      if (v > 1) return make_status(StatusCode::kCorruptData, "gguf: key '%s': bool value %u is not 0 or 1", what, v);
      *i = v; break;
    }
    default:
      return make_status(StatusCode::kCorruptData, "gguf: key '%s': not a scalar type (%u)", what, static_cast<unsigned>(t));
  }
  return Status::Ok();
}

bool is_float(ValueType t) { return t == ValueType::kF32 || t == ValueType::kF64; }
bool is_unsigned(ValueType t) {
  return t == ValueType::kU8 || t == ValueType::kU16 || t == ValueType::kU32 || t == ValueType::kU64;
}

Status read_value(Cursor& c, const std::string& key, Value* v) {
  uint32_t t = 0;
  LOWBIT_RETURN_IF_ERROR(c.read(&t, "metadata value type"));
  if (t > static_cast<uint32_t>(ValueType::kF64))
    return make_status(StatusCode::kCorruptData, "gguf: key '%s': unknown value type %u", key.c_str(), t);
  v->type = static_cast<ValueType>(t);
  if (v->type == ValueType::kString) return c.string(&v->s, key.c_str());
  if (v->type != ValueType::kArray) return read_scalar(c, v->type, &v->i, &v->u, &v->f, key);

  uint32_t et = 0;
  uint64_t n = 0;
  LOWBIT_RETURN_IF_ERROR(c.read(&et, "array element type"));
  LOWBIT_RETURN_IF_ERROR(c.read(&n, "array length"));
  if (et > static_cast<uint32_t>(ValueType::kF64))
    return make_status(StatusCode::kCorruptData, "gguf: key '%s': unknown array element type %u", key.c_str(), et);
  v->elem_type = static_cast<ValueType>(et);
  if (v->elem_type == ValueType::kArray)
    return make_status(StatusCode::kNotSupported, "gguf: key '%s': nested arrays are not supported", key.c_str());
  // Every element takes at least 1 byte (a string at least 8): a longer array than the
  // rest of the file is corrupt, checked before reserving memory.
  size_t min_elem = v->elem_type == ValueType::kString ? 8 : scalar_size(v->elem_type);
  if (n > c.remaining() / min_elem)
    return make_status(StatusCode::kCorruptData, "gguf: key '%s': array of %llu elements exceeds the file (%zu bytes left)",
                       key.c_str(), static_cast<unsigned long long>(n), c.remaining());
  if (v->elem_type == ValueType::kString) {
    v->arr_s.resize(n);
    for (uint64_t k = 0; k < n; ++k) LOWBIT_RETURN_IF_ERROR(c.string(&v->arr_s[k], key.c_str()));
  } else if (is_float(v->elem_type)) {
    v->arr_f.resize(n);
    int64_t i; uint64_t u;
    for (uint64_t k = 0; k < n; ++k) LOWBIT_RETURN_IF_ERROR(read_scalar(c, v->elem_type, &i, &u, &v->arr_f[k], key));
  } else if (is_unsigned(v->elem_type)) {
    v->arr_u.resize(n);
    int64_t i; double f;
    for (uint64_t k = 0; k < n; ++k) LOWBIT_RETURN_IF_ERROR(read_scalar(c, v->elem_type, &i, &v->arr_u[k], &f, key));
  } else {
    v->arr_i.resize(n);
    uint64_t u; double f;
    for (uint64_t k = 0; k < n; ++k) LOWBIT_RETURN_IF_ERROR(read_scalar(c, v->elem_type, &v->arr_i[k], &u, &f, key));
  }
  return Status::Ok();
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto k = static_cast<uint32_t>(t);
  return k < 13 ? names[k] : "unknown";
}

size_t Value::array_size() const {
  if (type != ValueType::kArray) return 0;
  return arr_s.size() + arr_f.size() + arr_u.size() + arr_i.size();
}

Status File::open(const std::string& path, File* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "gguf::File::open: out is null");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return make_status(StatusCode::kIoError, "gguf: cannot open '%s'", path.c_str());
  std::streamsize size = f.tellg();
  if (size < 0) return make_status(StatusCode::kIoError, "gguf: cannot size '%s'", path.c_str());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  f.seekg(0);
  if (size > 0 && !f.read(reinterpret_cast<char*>(bytes.data()), size))
    return make_status(StatusCode::kIoError, "gguf: read of '%s' failed", path.c_str());
  Status st = parse(std::move(bytes), out);
  if (!st.ok()) return Status(st.code(), st.message() + " (file '" + path + "')");
  return st;
}

Status File::parse(std::vector<uint8_t> bytes, File* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "gguf::File::parse: out is null");
  File g;
  g.bytes_ = std::move(bytes);
  Cursor c(g.bytes_);
  char magic[4];
  LOWBIT_RETURN_IF_ERROR(c.bytes(magic, 4, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0)
    return make_status(StatusCode::kCorruptData, "gguf: bad magic %02x %02x %02x %02x (expected 'GGUF')",
                       static_cast<uint8_t>(magic[0]), static_cast<uint8_t>(magic[1]), static_cast<uint8_t>(magic[2]),
                       static_cast<uint8_t>(magic[3]));
  LOWBIT_RETURN_IF_ERROR(c.read(&g.version_, "version"));
  if (g.version_ != 2 && g.version_ != 3)
    return make_status(StatusCode::kNotSupported, "gguf: unsupported version %u (only 2 and 3)", g.version_);
  uint64_t n_tensors = 0, n_kv = 0;
  LOWBIT_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  LOWBIT_RETURN_IF_ERROR(c.read(&n_kv, "metadata count"));
  if (n_tensors > kMaxTensors)
    return make_status(StatusCode::kCorruptData, "gguf: absurd tensor count %llu", static_cast<unsigned long long>(n_tensors));
  if (n_kv > kMaxKv)
    return make_status(StatusCode::kCorruptData, "gguf: absurd metadata count %llu", static_cast<unsigned long long>(n_kv));

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    LOWBIT_RETURN_IF_ERROR(c.string(&key, "metadata key"));
    Value v;
    LOWBIT_RETURN_IF_ERROR(read_value(c, key, &v));
    if (!g.kv_.emplace(key, std::move(v)).second)
      return make_status(StatusCode::kCorruptData, "gguf: duplicate metadata key '%s'", key.c_str());
  }
  if (const Value* a = g.find("general.alignment")) {
    uint64_t al = a->type == ValueType::kU32 || a->type == ValueType::kU64 ? a->u : 0;
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      return make_status(StatusCode::kCorruptData, "gguf: general.alignment must be a u32 power of two, got type %s value %llu",
                         value_type_name(a->type), static_cast<unsigned long long>(al));
    g.alignment_ = al;
  }

  g.tensors_.resize(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo& t = g.tensors_[k];
    LOWBIT_RETURN_IF_ERROR(c.string(&t.name, "tensor name"));
    uint32_t nd = 0;
    LOWBIT_RETURN_IF_ERROR(c.read(&nd, "tensor n_dims"));
    if (nd < 1 || nd > kMaxDims)
      return make_status(StatusCode::kCorruptData, "gguf: tensor '%s': n_dims %u not in [1, %d]", t.name.c_str(), nd, kMaxDims);
    t.n_dims = static_cast<int>(nd);
    uint64_t total = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t ne = 0;
      LOWBIT_RETURN_IF_ERROR(c.read(&ne, "tensor shape"));
      // 2^40 per dim and 2^50 in total: far beyond any model, safe from overflow.
      if (ne == 0 || ne > (uint64_t{1} << 40) || total > (uint64_t{1} << 50) / ne)
        return make_status(StatusCode::kCorruptData, "gguf: tensor '%s': absurd dimension %u = %llu", t.name.c_str(), d,
                           static_cast<unsigned long long>(ne));
      t.ne[d] = static_cast<int64_t>(ne);
      total *= ne;
    }
    LOWBIT_RETURN_IF_ERROR(c.read(&t.type, "tensor type"));
    LOWBIT_RETURN_IF_ERROR(c.read(&t.offset, "tensor offset"));
    int64_t be = 0, bb = 0;
    if (!tensor_type_block(t.type, &be, &bb))
      return make_status(StatusCode::kCorruptData, "gguf: tensor '%s': unknown ggml type %u", t.name.c_str(), t.type);
    if (t.ne[0] % be != 0)
      return make_status(StatusCode::kCorruptData, "gguf: tensor '%s': row of %lld elements is not a multiple of the %s block (%lld)",
                         t.name.c_str(), static_cast<long long>(t.ne[0]), tensor_type_name(t.type), static_cast<long long>(be));
    t.n_bytes = total / static_cast<uint64_t>(be) * static_cast<uint64_t>(bb);
    if (!g.tensor_index_.emplace(t.name, k).second)
      return make_status(StatusCode::kCorruptData, "gguf: duplicate tensor name '%s'", t.name.c_str());
  }
  // Data section: after the header, padded to the alignment.
  uint64_t hdr_end = c.pos();
  g.data_start_ = (hdr_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  if (n_tensors > 0 && g.data_start_ > g.bytes_.size())
    return make_status(StatusCode::kCorruptData, "gguf: truncated before the data section (header ends at %llu, file has %zu bytes)",
                       static_cast<unsigned long long>(hdr_end), g.bytes_.size());
  uint64_t data_size = g.bytes_.size() > g.data_start_ ? g.bytes_.size() - g.data_start_ : 0;
  for (const TensorInfo& t : g.tensors_) {
    if (t.offset % g.alignment_ != 0)
      return make_status(StatusCode::kMisaligned, "gguf: tensor '%s': offset %llu is not a multiple of general.alignment %llu",
                         t.name.c_str(), static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(g.alignment_));
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      return make_status(StatusCode::kCorruptData,
                         "gguf: tensor '%s': data [%llu, %llu) out of bounds of the data section (%llu bytes; file truncated?)",
                         t.name.c_str(), static_cast<unsigned long long>(t.offset),
                         static_cast<unsigned long long>(t.offset + t.n_bytes), static_cast<unsigned long long>(data_size));
  }
  *out = std::move(g);
  return Status::Ok();
}

const Value* File::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status File::get_int(const std::string& key, int64_t* out) const {
  const Value* v = find(key);
  LOWBIT_CHECK_ARG(v != nullptr, "gguf: missing metadata key '%s'", key.c_str());
  if (v->type == ValueType::kArray || v->type == ValueType::kString || is_float(v->type))
    return make_status(StatusCode::kInvalidArgument, "gguf: key '%s' is %s, not an integer", key.c_str(), value_type_name(v->type));
  if (is_unsigned(v->type)) {
    LOWBIT_CHECK_ARG(v->u <= static_cast<uint64_t>(INT64_MAX), "gguf: key '%s' = %llu does not fit int64", key.c_str(),
                     static_cast<unsigned long long>(v->u));
    *out = static_cast<int64_t>(v->u);
  } else {
    *out = v->i;
  }
  return Status::Ok();
}

Status File::get_float(const std::string& key, double* out) const {
  const Value* v = find(key);
  LOWBIT_CHECK_ARG(v != nullptr, "gguf: missing metadata key '%s'", key.c_str());
  if (is_float(v->type)) { *out = v->f; return Status::Ok(); }
  int64_t i = 0;
  LOWBIT_RETURN_IF_ERROR(get_int(key, &i));
  *out = static_cast<double>(i);
  return Status::Ok();
}

Status File::get_string(const std::string& key, std::string* out) const {
  const Value* v = find(key);
  LOWBIT_CHECK_ARG(v != nullptr, "gguf: missing metadata key '%s'", key.c_str());
  LOWBIT_CHECK_ARG(v->type == ValueType::kString, "gguf: key '%s' is %s, not a string", key.c_str(), value_type_name(v->type));
  *out = v->s;
  return Status::Ok();
}

Status File::get_string_array(const std::string& key, const std::vector<std::string>** out) const {
  const Value* v = find(key);
  LOWBIT_CHECK_ARG(v != nullptr, "gguf: missing metadata key '%s'", key.c_str());
  LOWBIT_CHECK_ARG(v->type == ValueType::kArray && v->elem_type == ValueType::kString,
                   "gguf: key '%s' is not an array of strings", key.c_str());
  *out = &v->arr_s;
  return Status::Ok();
}

Status File::dequantize(const TensorInfo& t, std::vector<float>* out) const {
  LOWBIT_CHECK_ARG(out != nullptr, "gguf::dequantize: out is null");
  if (!tensor_type_supported(t.type))
    return make_status(StatusCode::kNotSupported, "gguf: tensor '%s': dequantization of type %s (%u) is not implemented",
                       t.name.c_str(), tensor_type_name(t.type), t.type);
  out->resize(static_cast<size_t>(t.n_elements()));
  return dequantize_raw(t.type, tensor_data(t), out->size(), out->data());
}

}  // namespace lowbit::model::gguf
