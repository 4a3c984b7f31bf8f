// .npy reader (include/lowbit/io/npy.h). Format: "\x93NUMPY", major, minor, header length
// (uint16 for v1, uint32 for v2/v3), an ASCII Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, then the raw data.
#include "lowbit/io/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "lowbit/detail/float_bits.h"

namespace lowbit::io {
namespace {

// Value text following 'key': in the header dict, or "" when absent.
std::string dict_value(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return "";
  size_t c = h.find(':', k);
  if (c == std::string::npos) return "";
  size_t s = h.find_first_not_of(' ', c + 1);
  if (s == std::string::npos) return "";
  if (h[s] == '(') {
    size_t e = h.find(')', s);
    return e == std::string::npos ? "" : h.substr(s, e - s + 1);
  }
  if (h[s] == '\'') {
    size_t e = h.find('\'', s + 1);
    return e == std::string::npos ? "" : h.substr(s + 1, e - s - 1);
  }
  size_t e = h.find_first_of(",}", s);
  return h.substr(s, e == std::string::npos ? std::string::npos : e - s);
}

}  // namespace

Status parse_npy(const std::vector<uint8_t>& b, NpyArray* out) {
  static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10 || std::memcmp(b.data(), kMagic, 6) != 0) {
    return make_status(StatusCode::kCorruptData, "npy: bad magic (not a .npy file, %zu bytes)", b.size());
  }
  int major = b[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = b[8] | (b[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return make_status(StatusCode::kCorruptData, "npy: truncated header length");
    hlen = static_cast<size_t>(b[8]) | (static_cast<size_t>(b[9]) << 8) | (static_cast<size_t>(b[10]) << 16) |
           (static_cast<size_t>(b[11]) << 24);
    hstart = 12;
  } else {
    return make_status(StatusCode::kCorruptData, "npy: unsupported format version %d", major);
  }
  if (hstart + hlen > b.size()) {
    return make_status(StatusCode::kCorruptData, "npy: header of %zu bytes truncated (file has %zu bytes)", hlen,
                       b.size());
  }
  std::string h(reinterpret_cast<const char*>(b.data() + hstart), hlen);
  std::string descr = dict_value(h, "descr"), fortran = dict_value(h, "fortran_order"), shape = dict_value(h, "shape");
  if (descr.empty() || fortran.empty() || shape.empty()) {
    return make_status(StatusCode::kCorruptData, "npy: header lacks descr/fortran_order/shape: %s", h.c_str());
  }
  if (fortran != "False") return make_status(StatusCode::kNotSupported, "npy: Fortran-order arrays are not supported");
  size_t esize;
  if (descr == "<f2") {
    esize = 2;
  } else if (descr == "<f4") {
    esize = 4;
  } else if (descr == "<f8") {
    esize = 8;
  } else {
    return make_status(StatusCode::kNotSupported, "npy: unsupported dtype '%s' (expected '<f2', '<f4' or '<f8')",
                       descr.c_str());
  }
  NpyArray a;
  a.descr = descr;
  int64_t count = 1;
  std::string dims = shape.substr(1, shape.size() - 2);
  size_t p = 0;
  while (p < dims.size()) {
    size_t q = dims.find(',', p);
    std::string tok = dims.substr(p, q == std::string::npos ? std::string::npos : q - p);
    size_t f = tok.find_first_not_of(' ');
    if (f != std::string::npos) {
      tok = tok.substr(f, tok.find_last_not_of(' ') - f + 1);
      char* end = nullptr;
      long long d = std::strtoll(tok.c_str(), &end, 10);
      if (*end != '\0' || d < 0 || (d > 0 && count > (int64_t{1} << 40) / d)) {
        return make_status(StatusCode::kCorruptData, "npy: bad shape %s", shape.c_str());
      }
      a.shape.push_back(d);
      count *= d;
    }
    if (q == std::string::npos) break;
    p = q + 1;
  }
  size_t dstart = hstart + hlen, need = static_cast<size_t>(count) * esize;
  if (b.size() - dstart < need) {
    return make_status(StatusCode::kCorruptData, "npy: data truncated: shape %s %s needs %zu bytes, file has %zu",
                       shape.c_str(), descr.c_str(), need, b.size() - dstart);
  }
  a.values.resize(static_cast<size_t>(count));
  const uint8_t* d = b.data() + dstart;
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (esize == 2) {
      a.values[i] = f16_bits_to_float(static_cast<uint16_t>(d[2 * i] | (d[2 * i + 1] << 8)));
    } else if (esize == 4) {
      float f;
      std::memcpy(&f, d + 4 * i, 4);
      a.values[i] = f;
    } else {
      std::memcpy(&a.values[i], d + 8 * i, 8);
    }
  }
  *out = std::move(a);
  return Status::Ok();
}

Status read_npy(const std::string& path, NpyArray* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_status(StatusCode::kIoError, "npy: cannot open '%s'", path.c_str());
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Status st = parse_npy(bytes, out);
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return st;
}

}  // namespace lowbit::io
