// Load-time repack K-packed uint8 [E, N, K/2] <-> N-packed int32 [E, K, N/8] (vLLM PR
// #43389), and dequantization of both layouts to [E, N, K] activation-dtype bits. The two
// dequantizations share dequant_bits() and must agree bit-for-bit (tests/cpu/int4).
#include <cmath>

#include "lowbit/int4/weights.h"

namespace lowbit::int4 {

Status repack_to_npacked(const KPackedWeights& in, NPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "repack_to_npacked: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(in));
  const WeightShape& s = in.shape;
  LOWBIT_CHECK_ARG(s.n % 8 == 0, "repack_to_npacked: n=%d is not a multiple of 8; this weight keeps the K-packed layout",
                   s.n);
  const int E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  NPackedWeights r;
  r.shape = s;
  r.k_perm = in.k_perm;
  r.qweight.assign(static_cast<size_t>(E) * K * (N / 8), 0);
  r.scales.resize(static_cast<size_t>(E) * NG * N);
  if (!s.symmetric) r.zeros.resize(static_cast<size_t>(E) * NG * N);
  for (int e = 0; e < E; ++e) {
    // Word (k, c) = nibble k of columns 8c..8c+7; one byte of each of the 8 rows gives the
    // words of rows k and k + 1 (low and high nibbles).
    for (int c = 0; c < N / 8; ++c) {
      const uint8_t* rows = in.qweight.data() + (static_cast<size_t>(e) * N + 8 * c) * (K / 2);
      int32_t* col = r.qweight.data() + static_cast<size_t>(e) * K * (N / 8) + c;
      for (int kb = 0; kb < K / 2; ++kb) {
        uint32_t lo = 0, hi = 0;
        for (int i = 0; i < 8; ++i) {
          const uint32_t b = rows[static_cast<size_t>(i) * (K / 2) + kb];
          lo |= (b & 0xFu) << (4 * i);
          hi |= (b >> 4) << (4 * i);
        }
        col[static_cast<size_t>(2 * kb) * (N / 8)] = static_cast<int32_t>(lo);
        col[static_cast<size_t>(2 * kb + 1) * (N / 8)] = static_cast<int32_t>(hi);
      }
    }
    for (int g = 0; g < NG; ++g)
      for (int n = 0; n < N; ++n) {
        size_t o = (static_cast<size_t>(e) * NG + g) * N + n;
        r.scales[o] = kpacked_s(in, e, n, g);
        // Integers 0..15 are exact in fp16 and bf16.
        if (!s.symmetric) r.zeros[o] = float_to_half_bits(s.act, static_cast<float>(kpacked_z(in, e, n, g)));
      }
  }
  *out = std::move(r);
  return Status::Ok();
}

Status unpack_from_npacked(const NPackedWeights& in, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "unpack_from_npacked: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(in));
  const WeightShape& s = in.shape;
  const int E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  KPackedWeights r;
  kpacked_allocate(s, &r);
  r.k_perm = in.k_perm;
  for (int e = 0; e < E; ++e) {
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) {
        uint32_t word = static_cast<uint32_t>(in.qweight[(static_cast<size_t>(e) * K + k) * (N / 8) + n / 8]);
        kpacked_set_q(&r, e, n, k, static_cast<int>((word >> (4 * (n % 8))) & 0xF));
      }
    for (int g = 0; g < NG; ++g)
      for (int n = 0; n < N; ++n) {
        size_t o = (static_cast<size_t>(e) * NG + g) * N + n;
        kpacked_set_s(&r, e, n, g, in.scales[o]);
        if (!s.symmetric) {
          float z = half_bits_to_float(s.act, in.zeros[o]);
          LOWBIT_CHECK_ARG(z >= 0.0f && z <= 15.0f && z == std::floor(z),
                           "unpack_from_npacked: zero point [e=%d, g=%d, n=%d] = %g is not an integer 0..15", e, g, n,
                           static_cast<double>(z));
          kpacked_set_z(&r, e, n, g, static_cast<int>(z));
        }
      }
  }
  *out = std::move(r);
  return Status::Ok();
}

Status dequantize(const KPackedWeights& w, std::vector<uint16_t>* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "dequantize: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  const int G = s.group_len();
  out->resize(static_cast<size_t>(s.experts) * s.n * s.k);
  for (int e = 0; e < s.experts; ++e)
    for (int n = 0; n < s.n; ++n)
      for (int k = 0; k < s.k; ++k)
        (*out)[(static_cast<size_t>(e) * s.n + n) * s.k + k] =
            dequant_bits(kpacked_q(w, e, n, k), kpacked_z(w, e, n, k / G), kpacked_s(w, e, n, k / G), s.act);
  return Status::Ok();
}

Status dequantize(const NPackedWeights& w, std::vector<uint16_t>* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "dequantize: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  const int N = s.n, K = s.k, NG = s.num_groups(), G = s.group_len();
  out->resize(static_cast<size_t>(s.experts) * N * K);
  for (int e = 0; e < s.experts; ++e)
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) {
        uint32_t word = static_cast<uint32_t>(w.qweight[(static_cast<size_t>(e) * K + k) * (N / 8) + n / 8]);
        int q = static_cast<int>((word >> (4 * (n % 8))) & 0xF);
        size_t o = (static_cast<size_t>(e) * NG + k / G) * N + n;
        // The zero as stored (activation dtype); an integer 0..15 by construction.
        int z = s.symmetric ? 8 : static_cast<int>(half_bits_to_float(s.act, w.zeros[o]));
        (*out)[(static_cast<size_t>(e) * N + n) * K + k] = dequant_bits(q, z, w.scales[o], s.act);
      }
  return Status::Ok();
}

}  // namespace lowbit::int4
