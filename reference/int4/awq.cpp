// AWQ (GEMM variant) <-> canonical K-packed. Slot i of a word holds column 8c + kAwqOrder[i].
#include "lowbit/int4/formats.h"

namespace lowbit::int4 {
namespace {
int nib(int32_t word, int slot) { return static_cast<int>((static_cast<uint32_t>(word) >> (4 * slot)) & 0xF); }
void put(int32_t* word, int slot, int v) {
  *word = static_cast<int32_t>(static_cast<uint32_t>(*word) | (static_cast<uint32_t>(v & 0xF) << (4 * slot)));
}
}  // namespace

Status awq_to_kpacked(const AwqLinear& in, DType act, ScalePolicy policy, KPackedWeights* out, ConvertReport* report) {
  LOWBIT_CHECK_ARG(out != nullptr, "awq_to_kpacked: out is null");
  const int K = in.k, N = in.n;
  LOWBIT_CHECK_ARG(K > 0 && N > 0 && K < (1 << 30) && N < (1 << 30), "awq: k=%d, n=%d must be in [1, 2^30)", K, N);
  LOWBIT_CHECK_ARG(N % 8 == 0, "awq: n=%d must be a multiple of 8 (qweight packs 8 columns per word)", N);
  LOWBIT_CHECK_ARG(K % 2 == 0, "awq: k=%d must be even", K);
  const int G = in.group_size == kPerChannel ? K : in.group_size;
  LOWBIT_CHECK_ARG(G > 0 && K % G == 0, "awq: k=%d is not a multiple of group_size=%d", K, in.group_size);
  const int NG = K / G, NW = N / 8;
  LOWBIT_CHECK_ARG(in.qweight.size() == static_cast<size_t>(K) * NW, "awq: qweight has %zu words, expected [K=%d, N/8=%d]",
                   in.qweight.size(), K, NW);
  LOWBIT_CHECK_ARG(in.scales.size() == static_cast<size_t>(NG) * N, "awq: scales has %zu entries, expected [NG=%d, N=%d]",
                   in.scales.size(), NG, N);
  LOWBIT_CHECK_ARG(in.qzeros.empty() || in.qzeros.size() == static_cast<size_t>(NG) * NW,
                   "awq: qzeros has %zu words, expected [NG=%d, N/8=%d]", in.qzeros.size(), NG, NW);
  WeightShape s;
  s.n = N;
  s.k = K;
  s.group_size = in.group_size == kPerChannel ? kPerChannel : G;
  s.symmetric = in.qzeros.empty();
  s.act = act;
  KPackedWeights r;
  kpacked_allocate(s, &r);
  // Rows k and k + 1 of word column c: slot i of each is column 8c + kAwqOrder[i], whose
  // K-packed byte k / 2 takes row k's nibble low and row k + 1's high.
  const size_t row_bytes = static_cast<size_t>(K) / 2;
  for (int k = 0; k < K; k += 2)  // K is even (checked above)
    for (int c = 0; c < NW; ++c) {
      const uint32_t w0 = static_cast<uint32_t>(in.qweight[static_cast<size_t>(k) * NW + c]);
      const uint32_t w1 = static_cast<uint32_t>(in.qweight[static_cast<size_t>(k + 1) * NW + c]);
      for (int i = 0; i < 8; ++i)
        r.qweight[static_cast<size_t>(8 * c + kAwqOrder[i]) * row_bytes + k / 2] =
            static_cast<uint8_t>(((w0 >> (4 * i)) & 0xFu) | (((w1 >> (4 * i)) & 0xFu) << 4));
    }
  for (int g = 0; g < NG; ++g) {
    for (int n = 0; n < N; ++n) {
      size_t i = static_cast<size_t>(g) * N + n;
      uint16_t sb;
      LOWBIT_RETURN_IF_ERROR(convert_scale(ScaleSource::kF16, in.scales[i], act, policy, "awq scales", i, &sb, report));
      kpacked_set_s(&r, 0, n, g, sb);
    }
    if (!s.symmetric)
      for (int c = 0; c < NW; ++c) {
        int32_t word = in.qzeros[static_cast<size_t>(g) * NW + c];
        for (int i = 0; i < 8; ++i) kpacked_set_z(&r, 0, 8 * c + kAwqOrder[i], g, nib(word, i));
      }
  }
  *out = std::move(r);
  return Status::Ok();
}

Status kpacked_to_awq(const KPackedWeights& w, int expert, AwqLinear* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "kpacked_to_awq: out is null");
  LOWBIT_RETURN_IF_ERROR(validate(w));
  const WeightShape& s = w.shape;
  LOWBIT_CHECK_ARG(expert >= 0 && expert < s.experts, "kpacked_to_awq: expert %d outside [0, %d)", expert, s.experts);
  LOWBIT_CHECK_ARG(s.n % 8 == 0, "kpacked_to_awq: n=%d must be a multiple of 8", s.n);
  LOWBIT_CHECK_ARG(w.k_perm.empty(), "kpacked_to_awq: AWQ has no act-order; this weight carries a k_perm");
  LOWBIT_CHECK_ARG(s.act == DType::kF16, "kpacked_to_awq: AWQ scales are fp16; weight has %s scales", dtype_name(s.act));
  const int K = s.k, N = s.n, NG = s.num_groups(), NW = N / 8;
  AwqLinear a;
  a.k = K;
  a.n = N;
  a.group_size = s.group_size;
  a.qweight.assign(static_cast<size_t>(K) * NW, 0);
  a.scales.resize(static_cast<size_t>(NG) * N);
  if (!s.symmetric) a.qzeros.assign(static_cast<size_t>(NG) * NW, 0);
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < NW; ++c)
      for (int i = 0; i < 8; ++i)
        put(&a.qweight[static_cast<size_t>(k) * NW + c], i, kpacked_q(w, expert, 8 * c + kAwqOrder[i], k));
  for (int g = 0; g < NG; ++g) {
    for (int n = 0; n < N; ++n) a.scales[static_cast<size_t>(g) * N + n] = kpacked_s(w, expert, n, g);
    if (!s.symmetric)
      for (int c = 0; c < NW; ++c)
        for (int i = 0; i < 8; ++i)
          put(&a.qzeros[static_cast<size_t>(g) * NW + c], i, kpacked_z(w, expert, 8 * c + kAwqOrder[i], g));
  }
  *out = std::move(a);
  return Status::Ok();
}

}  // namespace lowbit::int4
