// Dequantization of GGML block types to fp32, by the block definitions of ggml-common.h
// (QK4_0 = QK4_1 = QK8_0 = 32). fp16 scales are decoded with lowbit's bit-exact converter.
#include <cstring>

#include "lowbit/detail/float_bits.h"
#include "lowbit/model/gguf.h"

namespace lowbit::model::gguf {

const char* tensor_type_name(uint32_t t) {
  switch (static_cast<TensorType>(t)) {
    case TensorType::kF32: return "F32";
    case TensorType::kF16: return "F16";
    case TensorType::kQ4_0: return "Q4_0";
    case TensorType::kQ4_1: return "Q4_1";
    case TensorType::kQ5_0: return "Q5_0";
    case TensorType::kQ5_1: return "Q5_1";
    case TensorType::kQ8_0: return "Q8_0";
    case TensorType::kQ8_1: return "Q8_1";
    case TensorType::kQ2_K: return "Q2_K";
    case TensorType::kQ3_K: return "Q3_K";
    case TensorType::kQ4_K: return "Q4_K";
    case TensorType::kQ5_K: return "Q5_K";
    case TensorType::kQ6_K: return "Q6_K";
    case TensorType::kQ8_K: return "Q8_K";
    case TensorType::kBF16: return "BF16";
  }
  return "unknown";
}

bool tensor_type_block(uint32_t t, int64_t* be, int64_t* bb) {
  switch (static_cast<TensorType>(t)) {
    case TensorType::kF32: *be = 1; *bb = 4; return true;
    case TensorType::kF16: *be = 1; *bb = 2; return true;
    case TensorType::kBF16: *be = 1; *bb = 2; return true;
    case TensorType::kQ4_0: *be = 32; *bb = 18; return true;
    case TensorType::kQ4_1: *be = 32; *bb = 20; return true;
    case TensorType::kQ5_0: *be = 32; *bb = 22; return true;
    case TensorType::kQ5_1: *be = 32; *bb = 24; return true;
    case TensorType::kQ8_0: *be = 32; *bb = 34; return true;
    case TensorType::kQ8_1: *be = 32; *bb = 36; return true;
    case TensorType::kQ2_K: *be = 256; *bb = 84; return true;
    case TensorType::kQ3_K: *be = 256; *bb = 110; return true;
    case TensorType::kQ4_K: *be = 256; *bb = 144; return true;
    case TensorType::kQ5_K: *be = 256; *bb = 176; return true;
    case TensorType::kQ6_K: *be = 256; *bb = 210; return true;
    case TensorType::kQ8_K: *be = 256; *bb = 292; return true;
  }
  return false;
}

bool tensor_type_supported(uint32_t t) {
  switch (static_cast<TensorType>(t)) {
    case TensorType::kF32: case TensorType::kF16: case TensorType::kBF16:
    case TensorType::kQ4_0: case TensorType::kQ4_1: case TensorType::kQ8_0:
      return true;
    default:
      return false;
  }
}

namespace {
uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
float load_f16(const uint8_t* p) { return f16_bits_to_float(load_u16(p)); }
}  // namespace

Status dequantize_raw(uint32_t type, const uint8_t* src, size_t n, float* dst) {
  LOWBIT_CHECK_ARG(src != nullptr && dst != nullptr, "dequantize: null pointer");
  int64_t be = 0, bb = 0;
  if (!tensor_type_supported(type) || !tensor_type_block(type, &be, &bb))
    return make_status(StatusCode::kNotSupported, "dequantize: ggml type %s (%u) is not implemented", tensor_type_name(type), type);
  LOWBIT_CHECK_ARG(n % static_cast<size_t>(be) == 0, "dequantize: n=%zu is not a multiple of the %s block (%lld)", n,
                   tensor_type_name(type), static_cast<long long>(be));
  size_t nb = n / static_cast<size_t>(be);
  switch (static_cast<TensorType>(type)) {
    case TensorType::kF32:
      std::memcpy(dst, src, n * 4);
      break;
    case TensorType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = load_f16(src + 2 * i);
      break;
    case TensorType::kBF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(load_u16(src + 2 * i));
      break;
    case TensorType::kQ4_0:
      for (size_t b = 0; b < nb; ++b, src += 18, dst += 32) {
        float d = load_f16(src);
        const uint8_t* qs = src + 2;
        for (int j = 0; j < 16; ++j) {
          dst[j] = static_cast<float>((qs[j] & 15) - 8) * d;
          dst[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
        }
      }
      break;
    case TensorType::kQ4_1:
      for (size_t b = 0; b < nb; ++b, src += 20, dst += 32) {
        float d = load_f16(src), m = load_f16(src + 2);
        const uint8_t* qs = src + 4;
        for (int j = 0; j < 16; ++j) {
          dst[j] = static_cast<float>(qs[j] & 15) * d + m;
          dst[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
        }
      }
      break;
    case TensorType::kQ8_0:
      for (size_t b = 0; b < nb; ++b, src += 34, dst += 32) {
        float d = load_f16(src);
        const int8_t* qs = reinterpret_cast<const int8_t*>(src + 2);
        for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(qs[j]) * d;
      }
      break;
    default:
      return make_status(StatusCode::kNotSupported, "dequantize: ggml type %u", type);
  }
  return Status::Ok();
}

}  // namespace lowbit::model::gguf
