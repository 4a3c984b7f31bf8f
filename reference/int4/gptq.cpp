// GPTQ (v1 / v2) <-> canonical K-packed. Layout in formats.h and docs/int4-formats.md.
#include <algorithm>
#include <numeric>

#include "lowbit/int4/formats.h"

namespace lowbit::int4 {
namespace {

uint32_t scale_bits(const GptqLinear& in, size_t i) {
  return in.scale_source == ScaleSource::kF32 ? float_as_bits(in.scales_f32[i]) : in.scales[i];
}
int nib(int32_t word, int slot) { return static_cast<int>((static_cast<uint32_t>(word) >> (4 * slot)) & 0xF); }

}  // namespace

Status gptq_to_kpacked(const GptqLinear& in, DType act, ScalePolicy policy, KPackedWeights* out,
                       ConvertReport* report) {
  LOWBIT_CHECK_ARG(out != nullptr, "gptq_to_kpacked: out is null");
  const int K = in.k, N = in.n;
  LOWBIT_CHECK_ARG(K > 0 && N > 0 && K < (1 << 30) && N < (1 << 30), "gptq: k=%d, n=%d must be in [1, 2^30)", K, N);
  LOWBIT_CHECK_ARG(K % 8 == 0, "gptq: k=%d must be a multiple of 8 (qweight packs 8 rows per word)", K);
  const int G = in.group_size == kPerChannel ? K : in.group_size;
  LOWBIT_CHECK_ARG(G > 0 && K % G == 0, "gptq: k=%d is not a multiple of group_size=%d", K, in.group_size);
  const int NG = K / G, NW = (N + 7) / 8;
  LOWBIT_CHECK_ARG(in.qweight.size() == static_cast<size_t>(K / 8) * N, "gptq: qweight has %zu words, expected [K/8=%d, N=%d]",
                   in.qweight.size(), K / 8, N);
  const size_t nscale = in.scale_source == ScaleSource::kF32 ? in.scales_f32.size() : in.scales.size();
  LOWBIT_CHECK_ARG(nscale == static_cast<size_t>(NG) * N, "gptq: scales has %zu entries, expected [NG=%d, N=%d]", nscale,
                   NG, N);
  LOWBIT_CHECK_ARG(in.qzeros.empty() || in.qzeros.size() == static_cast<size_t>(NG) * NW,
                   "gptq: qzeros has %zu words, expected [NG=%d, ceil(N/8)=%d]", in.qzeros.size(), NG, NW);
  LOWBIT_CHECK_ARG(!in.symmetric ? !in.qzeros.empty() : true, "gptq: asymmetric layer without qzeros");
  const int v1 = in.version == GptqVersion::kV1 ? 1 : 0;

  // Zero points: v1 stores z-1, so z = stored + 1 (stored 15 -> 16 does not fit a nibble).
  auto zero_at = [&](int g, int n, int* z) -> Status {
    int stored = nib(in.qzeros[static_cast<size_t>(g) * NW + n / 8], n % 8);
    *z = stored + v1;
    if (*z > 15)
      return make_status(StatusCode::kNotSupported,
                         "gptq v1: qzeros[g=%d, n=%d] stores 15, i.e. z = 16, which a 4-bit zero point cannot hold "
                         "(v1 overflow; the checkpoint was quantized with z = 0 wrapped or z = 16)",
                         g, n);
    return Status::Ok();
  };
  if (in.symmetric && !in.qzeros.empty()) {
    for (int g = 0; g < NG; ++g)
      for (int n = 0; n < N; ++n) {
        int z;
        LOWBIT_RETURN_IF_ERROR(zero_at(g, n, &z));
        if (z != 8)
          return make_status(StatusCode::kCorruptData,
                             "gptq: symmetric layer but qzeros[g=%d, n=%d] gives z=%d (stored %d), expected z=8 "
                             "(v1 stores 7, v2 stores 8); convert it as asymmetric (--asym) or check checkpoint_format",
                             g, n, z, z - v1);
      }
  }

  // Row order: identity unless g_idx is an act-order permutation.
  std::vector<int32_t> perm;
  bool act_order = false;
  LOWBIT_RETURN_IF_ERROR(act_order_perm(in.g_idx, K, G, "gptq", &perm, &act_order));

  WeightShape s;
  s.experts = 1;
  s.n = N;
  s.k = K;
  s.group_size = in.group_size == kPerChannel ? kPerChannel : G;
  s.symmetric = in.symmetric;
  s.act = act;
  KPackedWeights r;
  kpacked_allocate(s, &r);
  if (act_order) r.k_perm = perm;
  if (!act_order) {
    // Checkpoint order: word (k/8, n) holds rows 8(k/8)..+7 of column n at bits 4(k%8), which
    // are, byte for byte (little-endian), the four K-packed bytes of row n at 4(k/8) (low
    // nibble = even k). A transpose of 32-bit words, not a loop over nibbles.
    const int KW = K / 8;
    for (int n = 0; n < N; ++n) {
      uint8_t* row = r.qweight.data() + static_cast<size_t>(n) * (K / 2);
      for (int kw = 0; kw < KW; ++kw) {
        const uint32_t w = static_cast<uint32_t>(in.qweight[static_cast<size_t>(kw) * N + n]);
        for (int b = 0; b < 4; ++b) row[4 * kw + b] = static_cast<uint8_t>(w >> (8 * b));
      }
    }
  } else {
    for (int j = 0; j < K; ++j) {
      const int k = perm[j];
      for (int n = 0; n < N; ++n) kpacked_set_q(&r, 0, n, j, nib(in.qweight[static_cast<size_t>(k / 8) * N + n], k % 8));
    }
  }
  for (int g = 0; g < NG; ++g)
    for (int n = 0; n < N; ++n) {
      size_t i = static_cast<size_t>(g) * N + n;
      uint16_t sb;
      LOWBIT_RETURN_IF_ERROR(convert_scale(in.scale_source, scale_bits(in, i), act, policy, "gptq scales", i, &sb, report));
      kpacked_set_s(&r, 0, n, g, sb);
      if (!in.symmetric) {
        int z;
        LOWBIT_RETURN_IF_ERROR(zero_at(g, n, &z));
        kpacked_set_z(&r, 0, n, g, z);
      }
    }
  if (report) report->act_order = act_order;
  *out = std::move(r);
  return Status::Ok();
}

Status kpacked_to_gptq(const KPackedWeights& w, int expert, GptqVersion version, GptqLinear* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "kpacked_to_gptq: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(expert >= 0 && expert < s.experts, "kpacked_to_gptq: expert %d outside [0, %d)", expert, s.experts);
  LOWBIT_CHECK_ARG(s.k % 8 == 0, "kpacked_to_gptq: k=%d must be a multiple of 8", s.k);
  const int K = s.k, N = s.n, NG = s.num_groups(), G = s.group_len(), NW = (N + 7) / 8;
  GptqLinear g;
  g.k = K;
  g.n = N;
  g.group_size = s.group_size;
  g.symmetric = s.symmetric;
  g.version = version;
  g.scale_source = s.act == DType::kF16 ? ScaleSource::kF16 : ScaleSource::kBF16;
  g.qweight.assign(static_cast<size_t>(K / 8) * N, 0);
  g.scales.resize(static_cast<size_t>(NG) * N);
  g.qzeros.assign(static_cast<size_t>(NG) * NW, 0);
  const int v1 = version == GptqVersion::kV1 ? 1 : 0;
  const int32_t* perm = w.k_perm.empty() ? nullptr : w.k_perm.data() + static_cast<size_t>(expert) * K;
  for (int j = 0; j < K; ++j) {
    const int k = perm ? perm[j] : j;  // checkpoint row
    for (int n = 0; n < N; ++n) {
      uint32_t q = static_cast<uint32_t>(kpacked_q(w, expert, n, j));
      int32_t& word = g.qweight[static_cast<size_t>(k / 8) * N + n];
      word = static_cast<int32_t>(static_cast<uint32_t>(word) | (q << (4 * (k % 8))));
    }
  }
  if (perm) {
    g.g_idx.resize(K);
    for (int j = 0; j < K; ++j) g.g_idx[perm[j]] = j / G;
  }
  for (int gi = 0; gi < NG; ++gi)
    for (int n = 0; n < N; ++n) {
      g.scales[static_cast<size_t>(gi) * N + n] = kpacked_s(w, expert, n, gi);
      int z = kpacked_z(w, expert, n, gi);
      LOWBIT_CHECK_ARG(z - v1 >= 0, "kpacked_to_gptq: v1 stores z-1 and cannot hold z=0 (g=%d, n=%d); write v2", gi, n);
      int32_t& word = g.qzeros[static_cast<size_t>(gi) * NW + n / 8];
      word = static_cast<int32_t>(static_cast<uint32_t>(word) | (static_cast<uint32_t>(z - v1) << (4 * (n % 8))));
    }
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace lowbit::int4
