// The INT4 weight layout the CUDA kernels read (kernels/int4/), produced once at load time
// from the canonical K-packed layout (weights.h) by repack_for_kernels() and converted back
// by unpack_from_kernels() (round trip bit-exact; tests/cpu/int4/test_kernel_layout.cpp).
//
// Two kinds, chosen by the shape:
//
// kNPackedInterleaved (fast path; needs N % 8 == 0 and K % 32 == 0):
//   qweight uint32 [E, K, N/8]. Word c of row k holds the 8 columns n = 8c + ORDER[i] at
//   bits 4i..4i+3 with ORDER = {0, 2, 4, 6, 1, 3, 5, 7} (AWQ / Marlin interleave). Why:
//   (word >> 4j) & 0x000F000F then holds columns 2j (low half) and 2j+1 (high half); OR-ing
//   0x64006400 (fp16) / 0x43004300 (bf16) makes a half2 / bf162 of (1024 + q) / (128 + q)
//   with one LOP3, so a warp turns 8 nibbles into 4 register pairs in column order with no
//   per-element shifts. Consecutive words of a row are consecutive column octets, so a warp
//   reading one row k reads 32 consecutive words (128 B, coalesced).
//   K % 32: the kernels walk K in chunks of 32 rows that never straddle a group.
//
// kMmaTiled (N % 64 == 0 and K % 32 == 0, per expert; the decode kernel's layout, default
// for dense weights and for expert stacks with N % 128 == 0):
//   qweight uint32 [E, N/64, K/16, 32 lanes, 4]. One 512 B "supertile" holds 64 columns x 16
//   K rows (column group c = n/64, K step s = k/16), stored in the order a warp loads it: lane
//   l = 4g + t reads 16 B, its words j = 0..3 being the A fragments of mma.m16n8k16 for the
//   16-column tile j (columns 64c + 16j .. +15). Slot p (bits 4p) and slot p + 4 of word j
//   hold the pair (k even, k + 1) of A-fragment register p (kMmaTiledPos below):
//     p = 0: column 16j + g,     k = 2t, 2t+1       p = 1: column 16j + g + 8, k = 2t, 2t+1
//     p = 2: column 16j + g,     k = 2t+8, 2t+9     p = 3: column 16j + g + 8, k = 2t+8, 2t+9
//   so (word >> 4p) & 0x000F000F | magic IS the register the MMA takes: no byte permutes,
//   and one warp reads 512 contiguous bytes per K step (a warp's whole K range is one
//   contiguous run). Expert stacks are tiled per expert when N % 128 == 0 (a gate/up stack's
//   halves are whole 64-column groups): the MoE decode kernels stream one gate group and its
//   up group side by side; other stacks stay N-packed (the skinny MoE tile).
//
// kKPacked (fallback for any other N, K; slower kernels): qweight is the canonical K-packed
//   uint8 [E, N, K/2] unchanged (k = 2b low nibble, 2b+1 high nibble of byte b of row n).
//
// Both kinds store, for every (group g, column n):
//   scales uint16 [E, NG, N]  bits of the activation dtype (NG = K/G, 1 for per-channel);
//                             transposed from the canonical [E, N, NG] so that 8
//                             consecutive columns' scales are one 16-byte load. kMmaTiled
//                             permutes the columns within each 64-column group
//                             (mma_tiled_scale_col): lane 4g + t of the decode tile reads
//                             the scales of its 8 columns (A-fragment rows 16j + g + 8h)
//                             as one 16 B vector already in register order, with no
//                             16-bit loads to merge after they arrive.
//   zeros  uint16 [E, NG, N]  asymmetric only: z converted at load time to the activation
//                             dtype (integers 0..15 are exact in fp16 and bf16), so the
//                             kernel subtracts in the activation dtype without int->float
//                             conversions. Empty when symmetric (the kernels use z = 8).
//
// Dequantization on the device (matches weights.h bit-for-bit):
//   h = (1024 + q) - (1024 + z)   exact in fp16 (bf16: 128 + q, exact: 8 significant bits)
//   w = h * s                      one correctly rounded fp16/bf16 multiply
// Since q - z is a small integer and s has <= 11 significant bits, the exact product is the
// fp32 product of the contract, and both round once to the activation dtype: identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lowbit/detail/hd.h"
#include "lowbit/int4/weights.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

enum class KernelLayoutKind : uint8_t { kNPackedInterleaved = 0, kKPacked = 1, kMmaTiled = 2 };
const char* kernel_layout_name(KernelLayoutKind k);

// Nibble slot i of an N-packed word holds column 8c + kNibbleOrder[i]; the inverse maps a
// column offset j (0..7) to its slot.
constexpr int kNibbleOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kNibbleSlotOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// K-chunk the fast kernels iterate over; also the K alignment of the fast layout.
constexpr int kKernelKChunk = 32;

// kMmaTiled geometry and the position of element (n, k) of one expert: word index within
// the expert's [N/64, K/16, 32, 4] block and nibble slot. Shared by the CPU repack and the
// CUDA kernels that unpack the layout (dequantization, slabs).
constexpr int kMmaTileCols = 64;   // columns per supertile (4 MMA row tiles of 16)
constexpr int kMmaTileK = 16;      // K rows per supertile (one mma k16 step)
constexpr int kMmaTileWords = 128; // 32 lanes x 4 words = 512 B
struct MmaTiledPos {
  size_t word;
  int slot;
};
LOWBIT_HD MmaTiledPos mma_tiled_pos(int n, int k, int K) {
  const int c = n / kMmaTileCols, nl = n % kMmaTileCols, j = nl / 16, r = nl % 16, g = r % 8, hi = r / 8;
  const int s = k / kMmaTileK, kl = k % kMmaTileK, t = (kl % 8) / 2, kh = kl / 8, odd = kl % 2;
  const size_t tile = static_cast<size_t>(c) * (K / kMmaTileK) + s;
  return {tile * kMmaTileWords + static_cast<size_t>(4 * (4 * g + t) + j), (hi + 2 * kh) + 4 * odd};
}
// Inverse for one word: the (n, k) of slot p (p = 0..3; slot p + 4 holds (n, k + 1)).
LOWBIT_HD void mma_tiled_coords(size_t word, int p, int K, int* n, int* k) {
  const int j = static_cast<int>(word % 4), lane = static_cast<int>((word / 4) % 32);
  const size_t tile = word / kMmaTileWords;
  const int steps = K / kMmaTileK;
  const int s = static_cast<int>(tile % steps), c = static_cast<int>(tile / steps);
  const int g = lane / 4, t = lane % 4, hi = p % 2, kh = p / 2;
  *n = kMmaTileCols * c + 16 * j + 8 * hi + g;
  *k = kMmaTileK * s + 8 * kh + 2 * t;
}

// kMmaTiled scales and zeros: column n of a 64-column group is stored at 8g + 2j + h of the
// group's 64 entries (n % 64 = 16j + 8h + g), so that entries 8g .. 8g + 7 are the columns
// 16j + g + 8h (j = 0..3, h = 0..1) in the order of the decode tile's GroupParams: two
// columns per 32-bit word, h = 0 in the low half.
LOWBIT_HD int mma_tiled_scale_col(int n) {
  const int nl = n % kMmaTileCols, j = nl / 16, r = nl % 16;
  return n - nl + 8 * (r % 8) + 2 * j + r / 8;
}
// Index of the scale (or zero) of column n, group grp, expert e in a kernel weight's
// [E, NG, N] array.
LOWBIT_HD size_t kernel_scale_index(KernelLayoutKind kind, int N, int NG, int e, int grp, int n) {
  return (static_cast<size_t>(e) * NG + grp) * N + (kind == KernelLayoutKind::kMmaTiled ? mma_tiled_scale_col(n) : n);
}

// The layout a shape gets: MMA-tiled when N % 64 == 0 and K % 32 == 0 (expert stacks:
// N % 128 == 0, whole column groups per gate/up half); else N-packed when N % 8 == 0 and
// K % 32 == 0; else K-packed.
KernelLayoutKind kernel_layout_for(const WeightShape& s);

struct KernelWeights {
  WeightShape shape;
  KernelLayoutKind kind = KernelLayoutKind::kNPackedInterleaved;
  std::vector<uint32_t> qweight_n;  // kNPackedInterleaved: [E, K, N/8]; kMmaTiled: [E, N/64, K/16, 32, 4]
  std::vector<uint8_t> qweight_k;   // kKPacked: [E, N, K/2]
  std::vector<uint16_t> scales;     // [E, NG, N], activation dtype bits
  std::vector<uint16_t> zeros;      // [E, NG, N], activation dtype bits; empty if symmetric
  // Act-order (GPTQ desc_act, compressed-tensors actorder "group"): [E, K], stored row j of
  // expert e holds input row k_perm[e * K + j] (as KPackedWeights::k_perm), or empty (identity).
  std::vector<int32_t> k_perm;
};

// Non-owning view of a KernelWeights copied to the device (what the kernels take).
// Alignment the kernels check: N-packed qweight 4 B, scales / zeros 16 B; MMA-tiled qweight,
// scales and zeros 16 B (bulk copies, vector loads); K-packed scales / zeros 2 B.
struct KernelWeightsView {
  WeightShape shape;
  KernelLayoutKind kind = KernelLayoutKind::kNPackedInterleaved;
  const void* qweight = nullptr;   // uint32 [E, K, N/8], uint32 [E, N/64, K/16, 32, 4] or uint8 [E, N, K/2]
  const uint16_t* scales = nullptr;  // [E, NG, N] (MMA-tiled: columns permuted, kernel_scale_index)
  const uint16_t* zeros = nullptr;   // [E, NG, N] or nullptr (symmetric)
  // [E, K] act-order permutation on the device (4 B aligned), or nullptr (identity). gemm()
  // gathers x[:, k_perm] into its workspace first (gemm_workspace_size(view, ...) counts it);
  // fused_moe() gathers per routed pair (kernels.h); dequantize() and the MoE stage functions
  // (moe_gemm1 / moe_gemm2) refuse such a weight.
  const int32_t* k_perm = nullptr;
};

// Byte sizes of the three device arrays for a shape and kind.
size_t kernel_qweight_bytes(const WeightShape& s, KernelLayoutKind kind);
size_t kernel_scale_count(const WeightShape& s);  // elements of scales (and of zeros)

// Canonical K-packed -> kernel layout. kind_override < 0: kernel_layout_for(shape);
// forcing kNPackedInterleaved or kMmaTiled on a shape that does not allow it is an error
// (kMmaTiled may be forced on expert stacks too: each expert is tiled). An act-order weight
// keeps its k_perm (checked to be a permutation per expert; an identity one is dropped): the
// rows stay in stored order and int4::gemm() gathers the activations to match.
Status repack_for_kernels(const KPackedWeights& in, KernelWeights* out, int kind_override = -1);
// Kernel layout -> canonical K-packed (exact inverse, k_perm included).
Status unpack_from_kernels(const KernelWeights& in, KPackedWeights* out);

// One element: the nibble q[e, n, k] and zero-point value (8 when symmetric) of the kernel
// layout; used by tests and CPU references that read the kernel layout directly.
int kernel_nibble(const KernelWeights& w, int e, int n, int k);
// Dequantized weight bits (activation dtype), per the contract in weights.h.
uint16_t kernel_dequant_bits(const KernelWeights& w, int e, int n, int k);

}  // namespace lowbit::int4
