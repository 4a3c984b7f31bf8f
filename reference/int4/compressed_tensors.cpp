// compressed-tensors pack-quantized (int4) <-> canonical K-packed.
#include "lowbit/int4/formats.h"

namespace lowbit::int4 {
namespace {
int nib(int32_t word, int slot) { return static_cast<int>((static_cast<uint32_t>(word) >> (4 * slot)) & 0xF); }
void put(int32_t* word, int slot, int v) {
  *word = static_cast<int32_t>(static_cast<uint32_t>(*word) | (static_cast<uint32_t>(v & 0xF) << (4 * slot)));
}
}  // namespace

Status ct_to_kpacked(const CtLinear& in, DType act, ScalePolicy policy, KPackedWeights* out, ConvertReport* report) {
  LOWBIT_CHECK_ARG(out != nullptr, "ct_to_kpacked: out is null");
  const int K = in.k, N = in.n;
  LOWBIT_CHECK_ARG(K > 0 && N > 0 && K < (1 << 30) && N < (1 << 30),
                   "compressed-tensors: weight_shape [N=%d, K=%d] must be positive and < 2^30", N, K);
  LOWBIT_CHECK_ARG(K % 2 == 0, "compressed-tensors: K=%d must be even for the K-packed layout", K);
  const int G = in.group_size == kPerChannel ? K : in.group_size;
  LOWBIT_CHECK_ARG(G > 0 && K % G == 0, "compressed-tensors: K=%d is not a multiple of group_size=%d", K, in.group_size);
  const int NG = K / G, KW = (K + 7) / 8, NW = (N + 7) / 8;
  LOWBIT_CHECK_ARG(in.weight_packed.size() == static_cast<size_t>(N) * KW,
                   "compressed-tensors: weight_packed has %zu words, expected [N=%d, ceil(K/8)=%d]",
                   in.weight_packed.size(), N, KW);
  const size_t nscale = in.scale_source == ScaleSource::kF32 ? in.weight_scale_f32.size() : in.weight_scale.size();
  LOWBIT_CHECK_ARG(nscale == static_cast<size_t>(N) * NG,
                   "compressed-tensors: weight_scale has %zu entries, expected [N=%d, NG=%d]", nscale, N, NG);
  LOWBIT_CHECK_ARG(in.weight_zero_point.empty() || in.weight_zero_point.size() == static_cast<size_t>(NW) * NG,
                   "compressed-tensors: weight_zero_point has %zu words, expected [ceil(N/8)=%d, NG=%d]",
                   in.weight_zero_point.size(), NW, NG);
  // actorder "group": weight_g_idx folds into k_perm, as GPTQ's g_idx does (formats.h).
  std::vector<int32_t> perm;
  bool act_order = false;
  LOWBIT_RETURN_IF_ERROR(act_order_perm(in.weight_g_idx, K, G, "compressed-tensors weight_g_idx", &perm, &act_order));
  WeightShape s;
  s.n = N;
  s.k = K;
  s.group_size = in.group_size == kPerChannel ? kPerChannel : G;
  s.symmetric = in.weight_zero_point.empty();
  s.act = act;
  KPackedWeights r;
  kpacked_allocate(s, &r);
  if (act_order) r.k_perm = perm;
  for (int n = 0; n < N; ++n) {
    // Row n's words hold k at bits 4(k % 8): little-endian, they are the K-packed bytes of the
    // row (low nibble = even k), cut at K / 2 bytes (K's padding to a multiple of 8 dropped).
    uint8_t* row = r.qweight.data() + static_cast<size_t>(n) * (K / 2);
    const int32_t* words = in.weight_packed.data() + static_cast<size_t>(n) * KW;
    if (!act_order) {
      for (int b = 0; b < K / 2; ++b) row[b] = static_cast<uint8_t>(static_cast<uint32_t>(words[b / 4]) >> (8 * (b % 4)));
    } else {  // stored row j = checkpoint row perm[j]
      for (int j = 0; j < K; ++j) kpacked_set_q(&r, 0, n, j, nib(words[perm[j] / 8], perm[j] % 8));
    }
    for (int g = 0; g < NG; ++g) {
      size_t i = static_cast<size_t>(n) * NG + g;
      uint32_t bits = in.scale_source == ScaleSource::kF32 ? float_as_bits(in.weight_scale_f32[i]) : in.weight_scale[i];
      uint16_t sb;
      LOWBIT_RETURN_IF_ERROR(convert_scale(in.scale_source, bits, act, policy, "compressed-tensors weight_scale", i, &sb,
                                           report));
      kpacked_set_s(&r, 0, n, g, sb);
      if (!s.symmetric)
        kpacked_set_z(&r, 0, n, g, nib(in.weight_zero_point[static_cast<size_t>(n / 8) * NG + g], n % 8));
    }
  }
  if (report) report->act_order = act_order;
  *out = std::move(r);
  return Status::Ok();
}

Status kpacked_to_ct(const KPackedWeights& w, int expert, CtLinear* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "kpacked_to_ct: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(expert >= 0 && expert < s.experts, "kpacked_to_ct: expert %d outside [0, %d)", expert, s.experts);
  const int K = s.k, N = s.n, NG = s.num_groups(), KW = (K + 7) / 8, NW = (N + 7) / 8;
  const int32_t* perm = w.k_perm.empty() ? nullptr : w.k_perm.data() + static_cast<size_t>(expert) * K;
  CtLinear c;
  c.k = K;
  c.n = N;
  c.group_size = s.group_size;
  c.scale_source = s.act == DType::kF16 ? ScaleSource::kF16 : ScaleSource::kBF16;
  c.weight_packed.assign(static_cast<size_t>(N) * KW, 0);
  c.weight_scale.resize(static_cast<size_t>(N) * NG);
  if (!s.symmetric) c.weight_zero_point.assign(static_cast<size_t>(NW) * NG, 0);
  if (perm != nullptr) {  // act-order: checkpoint row perm[j] <- stored row j, its group j / G
    c.weight_g_idx.resize(K);
    for (int j = 0; j < K; ++j) c.weight_g_idx[perm[j]] = j / s.group_len();
  }
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < K; ++j) {
      const int k = perm != nullptr ? perm[j] : j;  // checkpoint row
      put(&c.weight_packed[static_cast<size_t>(n) * KW + k / 8], k % 8, kpacked_q(w, expert, n, j));
    }
    for (int g = 0; g < NG; ++g) {
      c.weight_scale[static_cast<size_t>(n) * NG + g] = kpacked_s(w, expert, n, g);
      if (!s.symmetric) put(&c.weight_zero_point[static_cast<size_t>(n / 8) * NG + g], n % 8, kpacked_z(w, expert, n, g));
    }
  }
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace lowbit::int4
