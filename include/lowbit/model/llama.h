// Llama-architecture model description shared by the CPU engine (reference/model,
// runtime/model) and the GPU tensor-parallel runner (runtime/model/*.cu, kernels/model).
// Weights are held on the host in fp32 row-major [out_features, in_features] after
// dequantization from the GGUF file (or synthetic initialization for benchmarks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/detail/float_bits.h"
#include "lowbit/status.h"

namespace lowbit::model {

struct LlamaConfig {
  std::string name;
  int vocab_size = 0;
  int hidden = 0;        // d_model
  int intermediate = 0;  // MLP inner size
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;      // hidden / n_heads unless the file says otherwise
  int context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool tied_embeddings = true;
  // MoE (0 experts = dense MLP). Used by the synthetic TTFT shapes (Qwen3-30B-A3B).
  int n_experts = 0;
  int n_experts_used = 0;
  int expert_intermediate = 0;
};

// RoPE convention: GGUF (llama.cpp) stores Q/K weights permuted so that rotation pairs are
// adjacent elements (2i, 2i+1) of each head ("normal" RoPE in llama.cpp terms for LLaMA).
struct LlamaLayerWeights {
  std::vector<float> attn_norm;   // [hidden]
  std::vector<float> wq;          // [n_heads*head_dim, hidden]
  std::vector<float> wk;          // [n_kv_heads*head_dim, hidden]
  std::vector<float> wv;          // [n_kv_heads*head_dim, hidden]
  std::vector<float> wo;          // [hidden, n_heads*head_dim]
  std::vector<float> ffn_norm;    // [hidden]
  std::vector<float> w_gate;      // [intermediate, hidden]
  std::vector<float> w_up;        // [intermediate, hidden]
  std::vector<float> w_down;      // [hidden, intermediate]
};

struct LlamaWeights {
  std::vector<float> tok_embd;     // [vocab, hidden]
  std::vector<float> output_norm;  // [hidden]
  std::vector<float> output;       // [vocab, hidden]; empty when tied to tok_embd
  std::vector<LlamaLayerWeights> layers;
};

// Loads a llama-architecture GGUF file (runtime/model/llama_loader.cpp): the llama.*
// metadata into cfg and every weight dequantized to fp32 into w. Tensors: token_embd,
// output_norm, output (optional: absent = tied), blk.N.{attn_norm, attn_q, attn_k, attn_v,
// attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}; every shape is checked against the
// config. Q/K rows are kept exactly as stored: llama.cpp's converter permuted the Hugging
// Face rows so that RoPE rotates adjacent pairs (2i, 2i+1) (see the RoPE note above); no
// un-permutation happens here. Errors name the missing or mis-shaped tensor.
Status load_llama(const std::string& path, LlamaConfig* cfg, LlamaWeights* w);

// Replaces every block's linear weight (q, k, v, o, gate, up, down; not the embeddings, norms
// or output head) by its INT4 round trip: int4::quantize_rtn with this group size (must
// divide each K) and symmetry, scales in `act`, dequantized per the INT4 contract
// (runtime/model/weight_quant.cpp). For measuring what the INT4 weight format costs the
// model: `lowbit ppl --weights int4`.
Status quantize_linear_weights_int4(const LlamaConfig& cfg, int group, bool symmetric, DType act, LlamaWeights* w);

// Calibration of the GPTQ variant below: `count` tokens run through the unquantized model in
// windows of `ctx` (the KV cache reset per window), each led by `bos` when it is >= 0 (then
// ctx - 1 text tokens per window), as the model will run: a first token's activations (the
// attention sink's large values) must be in the Hessians, or GPTQ moves rounding error into the
// directions only that token uses (measured: SmolLM2-135M G=64 sym, ppl 51.9 calibrated without
// BOS, RTN 43.4).
struct GptqCalibration {
  const int32_t* tokens = nullptr;
  int64_t count = 0;
  int ctx = 1024;
  int32_t bos = -1;
  int threads = 2;
  bool act_order = false;  // GPTQ desc_act
  double damp = 0.01;      // GPTQ percdamp
  // Weight of each window's first row (position 0: BOS, the attention sink) in the Hessians; 1 is
  // standard GPTQ. Every later query reads that position's key and value, but it is one row of
  // ctx in the sum, so standard GPTQ moves rounding error into the directions only it uses.
  // Measured on SmolLM2-135M (2 windows, G=64 sym, only q/k/v quantized): ppl 20.37 unquantized,
  // RTN 22.99, GPTQ 29.07, GPTQ with the first row weighted 1000x 20.84
  // (docs/benchmarks/ppl_int4_weights.md).
  double sink_weight = 1.0;
};
// The same round trip with GPTQ (lowbit/int4/gptq_quantize.h) instead of round-to-nearest:
// the Hessian of each block linear's input (sum of x x^T) is collected by running the plain
// fp32 CPU engine over the calibration tokens, then every weight is quantized against its
// input's Hessian (q, k, v share one; gate, up share one) and dequantized back into input order.
// One pass: the Hessians come from the unquantized model's activations (the paper propagates
// through the already quantized layers, layer by layer).
Status quantize_linear_weights_int4_gptq(const LlamaConfig& cfg, const GptqCalibration& cal, int group, bool symmetric,
                                         DType act, LlamaWeights* w);

}  // namespace lowbit::model
