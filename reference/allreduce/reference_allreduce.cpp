// CPU reference of every all-reduce algorithm (the contract in lowbit/allreduce.h), built
// straight on the codec arithmetic of lowbit/detail/codec_math.h and the group min/max rule
// of lowbit/detail/allreduce_protocol.h, the same functions the kernels call.
#include <cstring>
#include <vector>

#include "lowbit/allreduce.h"
#include "lowbit/detail/allreduce_protocol.h"

namespace lowbit::allreduce {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kAuto: return "auto";
    case Mode::kNccl: return "nccl";
    case Mode::kOneShot: return "oneshot";
    case Mode::kTwoShot: return "twoshot";
    case Mode::kQ8Q8: return "q8q8";
    case Mode::kQ4Q8: return "q4q8";
    case Mode::kQ4Q4: return "q4q4";
  }
  return "unknown";
}

Status parse_mode(const std::string& s, Mode* out) {
  for (Mode m : {Mode::kAuto, Mode::kNccl, Mode::kOneShot, Mode::kTwoShot, Mode::kQ8Q8, Mode::kQ4Q8, Mode::kQ4Q4}) {
    if (s == mode_name(m)) {
      *out = m;
      return Status::Ok();
    }
  }
  return make_status(StatusCode::kInvalidArgument,
                     "unknown all-reduce mode '%s' (auto, nccl, oneshot, twoshot, q8q8, q4q8, q4q4)", s.c_str());
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kExact: return "exact";
    case Precision::kInt8: return "int8";
    case Precision::kInt4Int8: return "int4-int8";
    case Precision::kInt4: return "int4";
  }
  return "unknown";
}

Status parse_precision(const std::string& s, Precision* out) {
  for (Precision p : {Precision::kExact, Precision::kInt8, Precision::kInt4Int8, Precision::kInt4}) {
    if (s == precision_name(p)) {
      *out = p;
      return Status::Ok();
    }
  }
  return make_status(StatusCode::kInvalidArgument, "unknown precision '%s' (exact, int8, int4-int8, int4)",
                     s.c_str());
}

bool mode_is_quantized(Mode m) { return m == Mode::kQ8Q8 || m == Mode::kQ4Q8 || m == Mode::kQ4Q4; }

codec::CodecSpec step1_codec(Mode m, int group_size) {
  return codec::CodecSpec{m == Mode::kQ8Q8 ? 8 : 4, group_size};
}
codec::CodecSpec step2_codec(Mode m, int group_size) {
  return codec::CodecSpec{m == Mode::kQ4Q4 ? 4 : 8, group_size};
}

namespace {

// decode(encode(x)) of one group of n <= G values, as fp32 (before rounding to dtype).
void roundtrip_group(codec::CodecSpec c, DType t, const uint16_t* x, size_t n, float* v) {
  uint32_t kmin = 0xFFFFFFFFu, kmax = 0;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    if (half_bits_nonfinite(t, x[i])) finite = false;
    uint32_t k = proto::half_order_key(x[i]);
    if (k < kmin) kmin = k;
    if (k > kmax) kmax = k;
  }
  codec::GroupMeta m = codec::make_group_meta(c, t, proto::half_from_order_key(kmin), proto::half_from_order_key(kmax),
                                              finite);
  for (size_t i = 0; i < n; ++i) {
    uint32_t q = codec::quantize_value(c, m, half_bits_to_float(t, x[i]));
    v[i] = codec::dequantize_value(t, m, q);
  }
}

}  // namespace

Status reference_allreduce(Mode mode, int group_size, DType dtype, const std::vector<const uint16_t*>& inputs,
                           const std::vector<uint16_t*>& outputs, size_t n) {
  LOWBIT_CHECK_ARG(!inputs.empty(), "reference_allreduce: no ranks");
  LOWBIT_CHECK_ARG(inputs.size() == outputs.size(), "reference_allreduce: %zu inputs but %zu outputs", inputs.size(),
                   outputs.size());
  LOWBIT_CHECK_ARG(mode != Mode::kAuto, "reference_allreduce: pass the mode that would run, not auto");
  LOWBIT_CHECK_ARG(dtype == DType::kF16 || dtype == DType::kBF16, "reference_allreduce: bad dtype");
  const size_t N = inputs.size();
  if (n == 0) return Status::Ok();
  for (size_t r = 0; r < N; ++r) {
    LOWBIT_CHECK_ARG(inputs[r] && outputs[r], "reference_allreduce: null buffer for rank %zu", r);
  }
  std::vector<uint16_t> result(n);
  if (!mode_is_quantized(mode)) {
    // kOneShot, kTwoShot, kNccl: fp32 sum in rank order.
    for (size_t i = 0; i < n; ++i) {
      float s = half_bits_to_float(dtype, inputs[0][i]);
      for (size_t r = 1; r < N; ++r) s += half_bits_to_float(dtype, inputs[r][i]);
      result[i] = proto::round_output(dtype, s);
    }
  } else {
    codec::CodecSpec c1 = step1_codec(mode, group_size), c2 = step2_codec(mode, group_size);
    LOWBIT_CHECK_ARG(codec::codec_spec_valid(c1), "reference_allreduce: group size %d not in {32, 64, 128}",
                     group_size);
    const size_t G = static_cast<size_t>(group_size);
    std::vector<float> acc(G), v(G), out(G);
    std::vector<uint16_t> s16(G);
    for (size_t g0 = 0; g0 < n; g0 += G) {
      size_t m = n - g0 < G ? n - g0 : G;
      for (size_t r = 0; r < N; ++r) {
        roundtrip_group(c1, dtype, inputs[r] + g0, m, v.data());
        for (size_t i = 0; i < m; ++i) acc[i] = r == 0 ? v[i] : acc[i] + v[i];
      }
      for (size_t i = 0; i < m; ++i) s16[i] = proto::round_output(dtype, acc[i]);
      roundtrip_group(c2, dtype, s16.data(), m, out.data());
      for (size_t i = 0; i < m; ++i) result[g0 + i] = proto::round_output(dtype, out[i]);
    }
  }
  for (size_t r = 0; r < N; ++r) std::memcpy(outputs[r], result.data(), n * sizeof(uint16_t));
  return Status::Ok();
}

}  // namespace lowbit::allreduce
