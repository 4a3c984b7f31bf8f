// INT4 checkpoint formats (GPTQ v1/v2, AWQ GEMM, compressed-tensors pack-quantized) and
// their exact conversions to and from the canonical K-packed layout (weights.h). One
// linear layer of one expert per call; stack_experts() concatenates experts. Layouts are
// spelled out per struct and in docs/int4-formats.md. Every converter validates sizes and
// values first and refuses, naming the problem, anything it cannot represent exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/int4/weights.h"
#include "lowbit/status.h"

namespace lowbit::int4 {

// How checkpoint scales (fp16 for GPTQ/AWQ; fp16/bf16/fp32 for compressed-tensors) become
// activation-dtype scales: kExact refuses any scale that changes; kRound rounds to nearest
// even and counts the changes (ConvertReport). Non-finite results are always refused.
enum class ScalePolicy : uint8_t { kExact = 0, kRound = 1 };

struct ConvertReport {
  size_t scales_rounded = 0;       // scales changed by kRound
  double max_rel_scale_change = 0;  // largest |s' - s| / |s|
  bool act_order = false;          // a non-trivial g_idx was folded into k_perm
};

// Scale source dtype for the converters (checkpoint dtype of the scale tensor).
enum class ScaleSource : uint8_t { kF16 = 0, kBF16 = 1, kF32 = 2 };

// ---- GPTQ (AutoGPTQ / GPTQModel) ------------------------------------------------------
//   qweight int32 [K/8, N]      element (k, n) at bits 4*(k%8) of word [k/8, n]
//   qzeros  int32 [NG, ceil(N/8)] element (g, n) at bits 4*(n%8) of word [g, n/8];
//                                 v1 stores z-1 (mod 16), v2 stores z
//   scales  fp16  [NG, N]
//   g_idx   int32 [K] (optional) group of input row k; k/G unless act-order
// Symmetric: z = 8 everywhere (v1 stores 7, v2 stores 8); the converter verifies this.
// Act-order: a g_idx that is not k/G is folded into k_perm (rows sorted by group, stable);
// each group must then hold exactly G rows.
enum class GptqVersion : uint8_t { kV1 = 1, kV2 = 2 };

struct GptqLinear {
  int k = 0, n = 0;
  int group_size = 128;  // or kPerChannel
  bool symmetric = true;
  GptqVersion version = GptqVersion::kV1;
  std::vector<int32_t> qweight, qzeros, g_idx;  // qzeros/g_idx may be empty (sym / identity)
  std::vector<uint16_t> scales;                 // raw bits of scale_source (f32: two halves)
  std::vector<float> scales_f32;                // used instead of scales when scale_source == kF32
  ScaleSource scale_source = ScaleSource::kF16;
};

Status gptq_to_kpacked(const GptqLinear& in, DType act, ScalePolicy policy, KPackedWeights* out,
                       ConvertReport* report = nullptr);
// Writes expert `expert` of `w` as a GPTQ layer, its scales in w's activation dtype
// (scale_source kF16 or kBF16: write the scales tensor in that dtype). v1 cannot store z = 0:
// refused. k_perm becomes g_idx.
Status kpacked_to_gptq(const KPackedWeights& w, int expert, GptqVersion version, GptqLinear* out);

// ---- AWQ (GEMM variant) -----------------------------------------------------------------
//   qweight int32 [K, N/8]  slot i (bits 4i) of word c holds column 8c + kAwqOrder[i]
//   qzeros  int32 [NG, N/8] same interleave, z stored exactly (absent -> symmetric, z = 8)
//   scales  fp16  [NG, N]
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr int kAwqInverseOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

struct AwqLinear {
  int k = 0, n = 0;
  int group_size = 128;
  std::vector<int32_t> qweight, qzeros;  // qzeros empty -> symmetric
  std::vector<uint16_t> scales;          // fp16 bits
};

Status awq_to_kpacked(const AwqLinear& in, DType act, ScalePolicy policy, KPackedWeights* out,
                      ConvertReport* report = nullptr);
Status kpacked_to_awq(const KPackedWeights& w, int expert, AwqLinear* out);

// Act-order (GPTQ desc_act, compressed-tensors actorder "group"): g_idx [K] gives the group of
// each checkpoint input row. One that is not k / G is folded into a row order: perm = the rows
// sorted by group (stable), stored row j = checkpoint row perm[j], k_perm = perm. Every group
// must hold exactly G rows (a named error otherwise). Empty or k / G: act_order false, perm
// the identity. `who` prefixes the messages.
Status act_order_perm(const std::vector<int32_t>& g_idx, int K, int G, const char* who, std::vector<int32_t>* perm,
                      bool* act_order);

// ---- compressed-tensors pack-quantized (int4) -------------------------------------------
//   weight_packed     int32 [N, ceil(K/8)]  element (n, k) at bits 4*(k%8) of word [n, k/8];
//                                           nibble = signed value + 8; K padded with 0 nibbles
//   weight_shape      [N, K]
//   weight_scale      [N, NG]               fp16 / bf16 / fp32
//   weight_zero_point int32 [ceil(N/8), NG] optional, packed along N (nibble = signed + 8)
//   weight_g_idx      int32 [K]             optional (actorder "group"): the group of each
//                                           input row; folded into k_perm (act_order_perm)
// Dequantization (q_s - zp_s) * s with q_s = nibble - 8, zp_s = zp_nibble - 8 is the
// contract with q = nibble, z = zp nibble (8 when symmetric).
struct CtLinear {
  int k = 0, n = 0;
  int group_size = 128;
  std::vector<int32_t> weight_packed, weight_zero_point;  // zero point empty -> symmetric
  std::vector<int32_t> weight_g_idx;                      // empty, or [K]
  std::vector<uint16_t> weight_scale;                     // bits of scale_source (16-bit sources)
  std::vector<float> weight_scale_f32;                    // when scale_source == kF32
  ScaleSource scale_source = ScaleSource::kBF16;
};

Status ct_to_kpacked(const CtLinear& in, DType act, ScalePolicy policy, KPackedWeights* out,
                     ConvertReport* report = nullptr);
// Writes scales in the activation dtype of `w` (scale_source = act); k_perm becomes weight_g_idx
// (rows in checkpoint order), as kpacked_to_gptq writes g_idx.
Status kpacked_to_ct(const KPackedWeights& w, int expert, CtLinear* out);

// Scale conversion shared by the converters: source scale -> activation-dtype bits under the
// policy. `where` names the tensor for messages.
Status convert_scale(ScaleSource src, uint32_t bits, DType act, ScalePolicy policy, const char* where, size_t index,
                     uint16_t* out, ConvertReport* report);

}  // namespace lowbit::int4
