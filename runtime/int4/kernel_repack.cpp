// Load-time repack between the canonical K-packed INT4 layout and the kernel layout
// (include/lowbit/int4/kernel_layout.h documents both).
#include <cstring>

#include "lowbit/detail/parallel_for.h"
#include "lowbit/int4/kernel_layout.h"

namespace lowbit::int4 {
namespace {

Status check_shape(const WeightShape& s) {
  LOWBIT_CHECK_ARG(s.experts >= 1, "int4 repack: experts=%d must be >= 1", s.experts);
  LOWBIT_CHECK_ARG(s.n >= 1 && s.k >= 2, "int4 repack: n=%d k=%d must be >= 1 and >= 2", s.n, s.k);
  LOWBIT_CHECK_ARG(s.k % 2 == 0, "int4 repack: k=%d must be even (two nibbles per byte)", s.k);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.group_size == 32 || s.group_size == 64 || s.group_size == 128,
                   "int4 repack: group_size=%d not in {32, 64, 128, -1 (per-channel)}", s.group_size);
  LOWBIT_CHECK_ARG(s.group_size == kPerChannel || s.k % s.group_size == 0,
                   "int4 repack: group_size=%d does not divide k=%d", s.group_size, s.k);
  return Status::Ok();
}

size_t count_of(const WeightShape& s) { return static_cast<size_t>(s.experts) * s.n * s.k; }

bool npacked_ok(const WeightShape& s) { return s.n % 8 == 0 && s.k % kKernelKChunk == 0; }
bool tiled_ok(const WeightShape& s) { return s.n % kMmaTileCols == 0 && s.k % kKernelKChunk == 0; }

}  // namespace

const char* kernel_layout_name(KernelLayoutKind k) {
  switch (k) {
    case KernelLayoutKind::kNPackedInterleaved: return "n-packed";
    case KernelLayoutKind::kKPacked: return "k-packed";
    case KernelLayoutKind::kMmaTiled: return "mma-tiled";
  }
  return "?";
}

KernelLayoutKind kernel_layout_for(const WeightShape& s) {
  // Expert stacks: whole 64-column groups per half of a gate/up stack (N % 128), so the MoE
  // decode kernel can stream a gate group and its up group side by side.
  if (tiled_ok(s) && (s.experts == 1 || s.n % 128 == 0)) return KernelLayoutKind::kMmaTiled;
  return npacked_ok(s) ? KernelLayoutKind::kNPackedInterleaved : KernelLayoutKind::kKPacked;
}

size_t kernel_qweight_bytes(const WeightShape& s, KernelLayoutKind) { return count_of(s) / 2; }

size_t kernel_scale_count(const WeightShape& s) {
  return static_cast<size_t>(s.experts) * s.num_groups() * s.n;
}

Status repack_for_kernels(const KPackedWeights& in, KernelWeights* out, int kind_override) {
  LOWBIT_CHECK_ARG(out != nullptr, "repack_for_kernels: out is null");
  const WeightShape& s = in.shape;
  LOWBIT_RETURN_IF_ERROR(check_shape(s));
  const int E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  LOWBIT_CHECK_ARG(in.qweight.size() == count_of(s) / 2, "repack_for_kernels: qweight has %zu bytes, shape needs %zu",
                   in.qweight.size(), count_of(s) / 2);
  const size_t nsc = kernel_scale_count(s);
  LOWBIT_CHECK_ARG(in.scales.size() == nsc, "repack_for_kernels: scales has %zu elements, shape needs %zu",
                   in.scales.size(), nsc);
  const size_t nz = static_cast<size_t>(E) * ((N + 1) / 2) * NG;
  LOWBIT_CHECK_ARG(s.symmetric ? in.zeros.empty() : in.zeros.size() == nz,
                   "repack_for_kernels: zeros has %zu bytes, expected %zu (%s)", in.zeros.size(),
                   s.symmetric ? size_t{0} : nz, s.symmetric ? "symmetric" : "asymmetric");
  // Act-order (GPTQ desc_act): rows are stored in group order; the permutation travels with the
  // kernel layout (int4::gemm gathers x[:, k_perm] to match). An identity one is dropped.
  LOWBIT_RETURN_IF_ERROR(validate_k_perm(in.k_perm, s, "repack_for_kernels"));
  bool identity = true;
  for (size_t i = 0; i < in.k_perm.size() && identity; ++i) identity = in.k_perm[i] == static_cast<int32_t>(i % K);
  LOWBIT_CHECK_ARG(kind_override < 0 || kind_override <= static_cast<int>(KernelLayoutKind::kMmaTiled),
                   "repack_for_kernels: unknown layout kind %d", kind_override);
  KernelLayoutKind kind = kind_override < 0 ? kernel_layout_for(s) : static_cast<KernelLayoutKind>(kind_override);
  LOWBIT_CHECK_ARG(kind != KernelLayoutKind::kNPackedInterleaved || npacked_ok(s),
                   "repack_for_kernels: N-packed layout needs n %% 8 == 0 and k %% 32 == 0 (n=%d k=%d)", N, K);
  LOWBIT_CHECK_ARG(kind != KernelLayoutKind::kMmaTiled || tiled_ok(s),
                   "repack_for_kernels: MMA-tiled layout needs n %% 64 == 0 and k %% 32 == 0 (n=%d k=%d)", N, K);

  out->shape = s;
  out->kind = kind;
  out->qweight_n.clear();
  out->qweight_k.clear();
  out->k_perm.clear();
  if (!identity) out->k_perm = in.k_perm;
  if (kind == KernelLayoutKind::kKPacked) {
    out->qweight_k = in.qweight;
  } else if (kind == KernelLayoutKind::kMmaTiled) {
    // Word by word, in output order: word j of lane 4g + t in tile (c, s) holds, in slots p and
    // p + 4, the nibbles k and k + 1 of (n, k) = (64c + 16j + g + 8(p % 2), 16s + 2t + 8(p / 2))
    // (mma_tiled_pos; k even, so both are one K-packed byte: low nibble -> slot p, high ->
    // slot p + 4). Four byte loads per word instead of eight nibble placements.
    const size_t per_expert = static_cast<size_t>(K) * (N / 8);
    const size_t row_bytes = static_cast<size_t>(K) / 2;
    const int steps = K / kMmaTileK;
    out->qweight_n.resize(static_cast<size_t>(E) * per_expert);
    const int groups = N / kMmaTileCols;  // work items: (expert, 64-column group), disjoint words
    lowbit::detail::parallel_for(E * groups, lowbit::detail::host_threads(), [&](int i0, int i1) {
      for (int i = i0; i < i1; ++i) {
        const int e = i / groups, c = i % groups;
        const uint8_t* ex = in.qweight.data() + static_cast<size_t>(e) * N * row_bytes;
        uint32_t* dst = out->qweight_n.data() + e * per_expert;
        for (int st = 0; st < steps; ++st)
          for (int lane = 0; lane < 32; ++lane)
            for (int j = 0; j < 4; ++j) {
              const int n0 = kMmaTileCols * c + 16 * j + lane / 4, kb0 = (kMmaTileK * st + 2 * (lane % 4)) / 2;
              const uint8_t* r0 = ex + static_cast<size_t>(n0) * row_bytes + kb0;
              const uint8_t* r8 = r0 + 8 * row_bytes;  // column n0 + 8
              const uint32_t b[4] = {r0[0], r8[0], r0[4], r8[4]};  // p = 0..3: (hi, kh) = (0,0) (1,0) (0,1) (1,1)
              uint32_t w = 0;
              for (int p = 0; p < 4; ++p) w |= (b[p] & 0xFu) << (4 * p) | (b[p] >> 4) << (4 * (p + 4));
              dst[((static_cast<size_t>(c) * steps + st) * 32 + lane) * 4 + j] = w;
            }
      }
    });
  } else {
    // Word (k, c): column 8c + i in slot kNibbleSlotOfColumn[i]; one byte of each of the 8 rows
    // gives the words of rows k and k + 1.
    out->qweight_n.resize(static_cast<size_t>(E) * K * (N / 8));
    const int words = N / 8;  // work items: (expert, word column), disjoint words
    lowbit::detail::parallel_for(E * words, lowbit::detail::host_threads(), [&](int i0, int i1) {
      for (int i = i0; i < i1; ++i) {
        const int e = i / words, c = i % words;
        const uint8_t* rows = in.qweight.data() + (static_cast<size_t>(e) * N + 8 * c) * (K / 2);
        uint32_t* col = out->qweight_n.data() + static_cast<size_t>(e) * K * (N / 8) + c;
        for (int kb = 0; kb < K / 2; ++kb) {
          uint32_t lo = 0, hi = 0;
          for (int b8 = 0; b8 < 8; ++b8) {
            const uint32_t b = rows[static_cast<size_t>(b8) * (K / 2) + kb];
            lo |= (b & 0xFu) << (4 * kNibbleSlotOfColumn[b8]);
            hi |= (b >> 4) << (4 * kNibbleSlotOfColumn[b8]);
          }
          col[static_cast<size_t>(2 * kb) * (N / 8)] = lo;
          col[static_cast<size_t>(2 * kb + 1) * (N / 8)] = hi;
        }
      }
    });
  }
  // Scales [E, N, NG] -> [E, NG, N]; zeros row-pair nibbles -> activation dtype [E, NG, N].
  out->scales.assign(nsc, 0);
  out->zeros.clear();
  if (!s.symmetric) out->zeros.assign(nsc, 0);
  for (int e = 0; e < E; ++e)
    for (int n = 0; n < N; ++n)
      for (int g = 0; g < NG; ++g) {
        const size_t dst = kernel_scale_index(kind, N, NG, e, g, n);
        out->scales[dst] = in.scales[(static_cast<size_t>(e) * N + n) * NG + g];
        if (!s.symmetric) {
          uint8_t b = in.zeros[(static_cast<size_t>(e) * ((N + 1) / 2) + n / 2) * NG + g];
          int z = (b >> (4 * (n & 1))) & 0xF;
          out->zeros[dst] = float_to_half_bits(s.act, static_cast<float>(z));
        }
      }
  return Status::Ok();
}

Status unpack_from_kernels(const KernelWeights& in, KPackedWeights* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "unpack_from_kernels: out is null");
  const WeightShape& s = in.shape;
  LOWBIT_RETURN_IF_ERROR(check_shape(s));
  const int E = s.experts, N = s.n, K = s.k, NG = s.num_groups();
  const size_t nsc = kernel_scale_count(s);
  LOWBIT_CHECK_ARG(in.scales.size() == nsc, "unpack_from_kernels: scales has %zu elements, shape needs %zu",
                   in.scales.size(), nsc);
  LOWBIT_CHECK_ARG(s.symmetric ? in.zeros.empty() : in.zeros.size() == nsc,
                   "unpack_from_kernels: zeros has %zu elements, expected %zu", in.zeros.size(),
                   s.symmetric ? size_t{0} : nsc);
  LOWBIT_RETURN_IF_ERROR(validate_k_perm(in.k_perm, s, "unpack_from_kernels"));
  out->shape = s;
  out->k_perm = in.k_perm;
  if (in.kind == KernelLayoutKind::kKPacked) {
    LOWBIT_CHECK_ARG(in.qweight_k.size() == count_of(s) / 2, "unpack_from_kernels: qweight_k has %zu bytes, need %zu",
                     in.qweight_k.size(), count_of(s) / 2);
    out->qweight = in.qweight_k;
  } else if (in.kind == KernelLayoutKind::kMmaTiled) {
    LOWBIT_CHECK_ARG(tiled_ok(s), "unpack_from_kernels: MMA-tiled layout with n=%d k=%d", N, K);
    LOWBIT_CHECK_ARG(in.qweight_n.size() == count_of(s) / 8, "unpack_from_kernels: qweight_n has %zu words, need %zu",
                     in.qweight_n.size(), count_of(s) / 8);
    out->qweight.assign(count_of(s) / 2, 0);
    const size_t per_expert = static_cast<size_t>(K) * (N / 8);
    for (int e = 0; e < E; ++e)
      for (size_t wi = 0; wi < per_expert; ++wi) {
        const uint32_t w = in.qweight_n[e * per_expert + wi];
        for (int p = 0; p < 4; ++p) {
          int n = 0, k = 0;
          mma_tiled_coords(wi, p, K, &n, &k);
          uint8_t* row = out->qweight.data() + (static_cast<size_t>(e) * N + n) * (K / 2);
          // k is even: slot p -> low nibble of byte k/2, slot p + 4 (k + 1) -> high nibble.
          row[k / 2] = static_cast<uint8_t>(((w >> (4 * p)) & 0xFu) | (((w >> (4 * (p + 4))) & 0xFu) << 4));
        }
      }
  } else {
    LOWBIT_CHECK_ARG(npacked_ok(s), "unpack_from_kernels: N-packed layout with n=%d k=%d", N, K);
    LOWBIT_CHECK_ARG(in.qweight_n.size() == count_of(s) / 8, "unpack_from_kernels: qweight_n has %zu words, need %zu",
                     in.qweight_n.size(), count_of(s) / 8);
    out->qweight.assign(count_of(s) / 2, 0);
    for (int e = 0; e < E; ++e)
      for (int k = 0; k < K; ++k)
        for (int c = 0; c < N / 8; ++c) {
          uint32_t w = in.qweight_n[(static_cast<size_t>(e) * K + k) * (N / 8) + c];
          for (int i = 0; i < 8; ++i) {
            int n = 8 * c + kNibbleOrder[i];
            uint8_t q = static_cast<uint8_t>((w >> (4 * i)) & 0xFu);
            out->qweight[(static_cast<size_t>(e) * N + n) * (K / 2) + k / 2] |= static_cast<uint8_t>(q << (4 * (k & 1)));
          }
        }
  }
  out->scales.assign(nsc, 0);
  out->zeros.clear();
  if (!s.symmetric) out->zeros.assign(static_cast<size_t>(E) * ((N + 1) / 2) * NG, 0);
  for (int e = 0; e < E; ++e)
    for (int n = 0; n < N; ++n)
      for (int g = 0; g < NG; ++g) {
        const size_t src = kernel_scale_index(in.kind, N, NG, e, g, n);
        out->scales[(static_cast<size_t>(e) * N + n) * NG + g] = in.scales[src];
        if (!s.symmetric) {
          float zf = half_bits_to_float(s.act, in.zeros[src]);
          int z = static_cast<int>(zf);
          LOWBIT_CHECK_ARG(zf == static_cast<float>(z) && z >= 0 && z <= 15,
                           "unpack_from_kernels: zero point %g at e=%d g=%d n=%d is not an integer in 0..15",
                           static_cast<double>(zf), e, g, n);
          out->zeros[(static_cast<size_t>(e) * ((N + 1) / 2) + n / 2) * NG + g] |= static_cast<uint8_t>(z << (4 * (n & 1)));
        }
      }
  return Status::Ok();
}

int kernel_nibble(const KernelWeights& w, int e, int n, int k) {
  const WeightShape& s = w.shape;
  if (w.kind == KernelLayoutKind::kKPacked) {
    uint8_t b = w.qweight_k[(static_cast<size_t>(e) * s.n + n) * (s.k / 2) + k / 2];
    return (b >> (4 * (k & 1))) & 0xF;
  }
  if (w.kind == KernelLayoutKind::kMmaTiled) {
    const MmaTiledPos pos = mma_tiled_pos(n, k, s.k);
    const uint32_t word = w.qweight_n[static_cast<size_t>(e) * s.k * (s.n / 8) + pos.word];
    return static_cast<int>((word >> (4 * pos.slot)) & 0xFu);
  }
  uint32_t word = w.qweight_n[(static_cast<size_t>(e) * s.k + k) * (s.n / 8) + n / 8];
  return static_cast<int>((word >> (4 * kNibbleSlotOfColumn[n % 8])) & 0xFu);
}

uint16_t kernel_dequant_bits(const KernelWeights& w, int e, int n, int k) {
  const WeightShape& s = w.shape;
  const size_t gi = kernel_scale_index(w.kind, s.n, s.num_groups(), e, k / s.group_len(), n);
  float z = s.symmetric ? 8.0f : half_bits_to_float(s.act, w.zeros[gi]);
  float sc = half_bits_to_float(s.act, w.scales[gi]);
  float d = static_cast<float>(kernel_nibble(w, e, n, k)) - z;  // small integer, exact
  return float_to_half_bits(s.act, d * sc);                      // exact product, one rounding
}

}  // namespace lowbit::int4
