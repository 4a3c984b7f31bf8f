// lowbit's INT4 MoE path in one file, as an engine would use it: a GPTQ MoE checkpoint stored
// the way Hugging Face stores it (shards, an index, config.json) converted with gate and up
// fused into w13, loaded onto the GPU, routed by the engine itself (DeepSeek-V3-style sigmoid
// scores with a selection bias and a routed scaling factor, which fused_moe's softmax routing
// does not do), run by fused_moe and checked against the fp64 reference. The checkpoint was
// saved with desc_act (act-order): each expert's input rows were quantized in its own order, so
// every expert carries a permutation (gate and up share theirs: they read the same input).
//
//   build/bin/lowbit_example_int4_moe          (built with the library; ctest runs it)
//
// Without a CUDA device it runs the CPU half (checkpoint, conversion, load, reference) and
// says SKIPPED for the GPU half. Every library call returns a lowbit::Status naming the
// problem; this example prints it and exits 1.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "lowbit/int4/checkpoint.h"
#include "lowbit/int4/device_weights.h"
#include "lowbit/int4/formats.h"
#include "lowbit/int4/kernel_layout.h"
#include "lowbit/int4/kernels.h"
#include "lowbit/int4/moe_ref.h"
#include "lowbit/int4/shard.h"
#include "lowbit/int4/weights.h"
#include "lowbit/io/safetensors.h"

#if LOWBIT_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace lowbit;
using namespace lowbit::int4;

namespace {

bool failed(const Status& st, const char* what) {
  if (st.ok()) return false;
  std::fprintf(stderr, "%s: %s\n", what, st.to_string().c_str());
  return true;
}

#if LOWBIT_HAS_CUDA
bool cuda_failed(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return false;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return true;
}
#endif

// A small MoE layer: E experts of hidden H and intermediate I, top-k routing, GPTQ G = 128.
constexpr int E = 16, H = 512, I = 256, kTopk = 4, G = 128, M = 4;
constexpr float kRoutedScaling = 2.5f;
// fp16 activations: GPTQ stores fp16 scales, which bf16 activations could hold only rounded
// (the converter refuses that unless asked: ScalePolicy::kRound, CLI --round-scales).
constexpr DType kAct = DType::kF16;

// One checkpoint layer (GPTQ v1, symmetric, desc_act): qweight, qzeros, scales and g_idx (the
// group of each input row), kept alive until its shard is written.
struct Layer {
  std::string name;
  GptqLinear g;
};

// `order`: the input rows in the order GPTQ quantized them (act-order: by a data-dependent
// importance; here a random permutation), so group j / G holds input rows order[j].
Status quantized_layer(const std::string& name, int n, int k, const std::vector<int32_t>& order, std::mt19937* rng,
                       Layer* out) {
  std::vector<float> w(static_cast<size_t>(n) * k);
  std::normal_distribution<float> normal(0.f, 0.05f);
  for (float& v : w) v = normal(*rng);
  const WeightShape s{1, n, k, G, true, kAct};  // fp16 scales, as GPTQ checkpoints store them
  KPackedWeights kp;
  LOWBIT_RETURN_IF_ERROR(quantize_rtn(w.data(), s, &kp));  // stored row j is quantized as row j of w ...
  kp.k_perm = order;                                       // ... and multiplies input order[j]
  out->name = name;
  return kpacked_to_gptq(kp, 0, GptqVersion::kV1, &out->g);  // qweight back in input order, g_idx from order
}

// The layers as a Hugging Face checkpoint directory: `shards` files, the index, config.json.
Status write_checkpoint(const std::string& dir, const std::vector<Layer>& layers, int shards) {
  std::string weight_map;
  const size_t per = (layers.size() + shards - 1) / shards;
  for (int s = 0; s < shards; ++s) {
    const std::string file = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    std::vector<io::TensorToWrite> t;
    for (size_t i = s * per; i < std::min(layers.size(), (s + 1) * per); ++i) {
      const Layer& l = layers[i];
      const int64_t k = l.g.k, n = l.g.n;
      t.push_back({l.name + ".qweight", io::TensorDType::kI32, {k / 8, n}, l.g.qweight.data()});
      t.push_back({l.name + ".qzeros", io::TensorDType::kI32, {k / G, n / 8}, l.g.qzeros.data()});
      t.push_back({l.name + ".scales", io::TensorDType::kF16, {k / G, n}, l.g.scales.data()});
      t.push_back({l.name + ".g_idx", io::TensorDType::kI32, {k}, l.g.g_idx.data()});
    }
    for (const auto& x : t) weight_map += (weight_map.empty() ? "\"" : ", \"") + x.name + "\": \"" + file + "\"";
    LOWBIT_RETURN_IF_ERROR(io::write_safetensors(dir + "/" + file, t));
  }
  std::ofstream(dir + "/model.safetensors.index.json") << "{\"metadata\": {}, \"weight_map\": {" << weight_map << "}}";
  std::ofstream(dir + "/config.json") << R"({"architectures": ["ExampleMoeForCausalLM"], "quantization_config":
    {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true, "desc_act": true}})";
  return Status::Ok();
}

// The engine's routing (DeepSeek-V3 style): scores = sigmoid(logits); the top-k by score +
// bias (a load-balancing correction), weighted by the unbiased scores normalized over the k
// chosen and multiplied by the routed scaling factor.
void route(const std::vector<float>& logits, const std::vector<float>& bias, std::vector<int32_t>* ids,
           std::vector<float>* weights) {
  ids->resize(static_cast<size_t>(M) * kTopk);
  weights->resize(ids->size());
  for (int m = 0; m < M; ++m) {
    std::vector<float> score(E);
    for (int e = 0; e < E; ++e) score[e] = 1.f / (1.f + std::exp(-logits[static_cast<size_t>(m) * E + e]));
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] + bias[a] > score[b] + bias[b]; });
    float sum = 0.f;
    for (int s = 0; s < kTopk; ++s) sum += score[order[s]];
    for (int s = 0; s < kTopk; ++s) {
      (*ids)[static_cast<size_t>(m) * kTopk + s] = order[s];
      (*weights)[static_cast<size_t>(m) * kTopk + s] = kRoutedScaling * score[order[s]] / sum;
    }
  }
}

}  // namespace

int main() {
  // 1. A stand-in checkpoint: per expert gate_proj, up_proj [I, H] and down_proj [H, I], RTN
  //    quantized in act-order and written as GPTQ v1 in three shards with experts split across them.
  std::mt19937 rng(7);
  auto random_order = [&](int k) {
    std::vector<int32_t> o(k);
    std::iota(o.begin(), o.end(), 0);
    std::shuffle(o.begin(), o.end(), rng);
    return o;
  };
  std::vector<Layer> layers;
  for (int e = 0; e < E; ++e) {
    const std::string p = "model.layers.0.mlp.experts." + std::to_string(e);
    const std::vector<int32_t> gate_up_order = random_order(H), down_order = random_order(I);
    for (const auto& [proj, n, k] : {std::tuple<const char*, int, int>{"gate_proj", I, H}, {"up_proj", I, H},
                                     {"down_proj", H, I}}) {
      layers.emplace_back();
      const bool down = std::string(proj) == "down_proj";
      if (failed(quantized_layer(p + "." + proj, n, k, down ? down_order : gate_up_order, &rng, &layers.back()),
                 "quantize"))
        return 1;
    }
  }
  const std::string dir = (std::filesystem::temp_directory_path() / ("lowbit_example_moe_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  struct Cleanup {
    std::string d;
    ~Cleanup() { std::filesystem::remove_all(d); }
  } cleanup{dir};
  if (failed(write_checkpoint(dir, layers, 3), "write checkpoint")) return 1;

  // 2. Conversion (what `lowbit convert --in DIR --out FILE --fuse-gate-up` runs): the config
  //    is found beside the shards, the experts are stacked and gate + up fused into w13.
  ConvertOptions co;
  co.in_path = dir;
  co.out_path = dir + "/packed.safetensors";
  co.fuse_gate_up = true;
  co.act = kAct;
  ConvertSummary summary;
  if (failed(convert_checkpoint(co, &summary), "convert_checkpoint")) return 1;
  std::printf("converted %zu shard(s) with %s into %zu layer(s):\n", summary.shards, summary.config_path.c_str(),
              summary.layers.size());
  for (const auto& L : summary.layers)
    std::printf("  %-44s E = %d, N = %d, K = %d, G = %d\n", L.prefix.c_str(), L.experts, L.n, L.k, L.group_size);

  // 3. Load time: the packed layers back into the canonical layout, then the kernel layout.
  io::SafetensorsFile packed;
  if (failed(io::SafetensorsFile::open(co.out_path, &packed), "open packed file")) return 1;
  KPackedWeights k13, k2;
  if (failed(load_converted_layer(packed, "model.layers.0.mlp.experts.gate_up_proj", &k13), "load w13") ||
      failed(load_converted_layer(packed, "model.layers.0.mlp.experts.down_proj", &k2), "load w2"))
    return 1;
  // The loaded layers are the checkpoint's, bit for bit: each expert's GPTQ layers converted on
  // their own, stacked, gate and up joined.
  {
    std::vector<KPackedWeights> gate, up, down;
    for (const Layer& l : layers) {
      KPackedWeights kp;
      if (failed(gptq_to_kpacked(l.g, kAct, ScalePolicy::kExact, &kp), "gptq_to_kpacked")) return 1;
      const bool is_gate = l.name.find(".gate_proj") != std::string::npos;
      (is_gate ? gate : l.name.find(".up_proj") != std::string::npos ? up : down).push_back(std::move(kp));
    }
    KPackedWeights sg, su, want13, want2;
    if (failed(stack_experts(gate, &sg), "stack") || failed(stack_experts(up, &su), "stack") ||
        failed(concat_n({sg, su}, &want13), "concat_n") || failed(stack_experts(down, &want2), "stack"))
      return 1;
    const bool same = k13.qweight == want13.qweight && k13.scales == want13.scales && k13.k_perm == want13.k_perm &&
                      k2.qweight == want2.qweight && k2.scales == want2.scales && k2.k_perm == want2.k_perm;
    std::printf("loaded layers equal the checkpoint's, bit for bit: %s\n", same ? "yes" : "NO");
    if (!same) return 1;
  }
  KernelWeights kw13, kw2;
  if (failed(repack_for_kernels(k13, &kw13), "repack w13") || failed(repack_for_kernels(k2, &kw2), "repack w2")) return 1;
  std::printf("w13 [%d, %d, %d] and w2 [%d, %d, %d] in the %s layout, act-order: %s (a permutation per expert)\n",
              k13.shape.experts, k13.shape.n, k13.shape.k, k2.shape.experts, k2.shape.n, k2.shape.k,
              kernel_layout_name(kw13.kind), !kw13.k_perm.empty() && !kw2.k_perm.empty() ? "yes" : "NO");
  if (kw13.k_perm.empty() || kw2.k_perm.empty()) return 1;

  // 4. The engine's inputs: activations, router logits and its own routing.
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<uint16_t> x(static_cast<size_t>(M) * H);
  for (uint16_t& v : x) v = float_to_half_bits(kAct, uni(rng));
  std::vector<float> logits(static_cast<size_t>(M) * E), bias(E);
  for (float& v : logits) v = 2.f * uni(rng);
  for (float& v : bias) v = 0.1f * uni(rng);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  route(logits, bias, &ids, &weights);

  // 5. The fp64 reference of the layer with those ids and weights.
  FusedMoeArgs ra;
  ra.x = x.data();
  ra.m = M;
  ra.topk = kTopk;
  ra.topk_ids = ids.data();
  ra.topk_weights = weights.data();
  std::vector<double> ref;
  if (failed(fused_moe_ref(k13, k2, ra, &ref, nullptr), "fused_moe_ref")) return 1;

#if LOWBIT_HAS_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device; the checkpoint, conversion, load and reference above ran on the CPU\n");
    return 0;
  }
  // 6. Once per layer: the experts onto the device.
  DeviceWeights d13, d2;
  if (failed(DeviceWeights::upload(kw13, &d13), "upload w13") || failed(DeviceWeights::upload(kw2, &d2), "upload w2"))
    return 1;
  // 7. Per step: fused_moe with the caller's routing, workspace sized once for these weights
  //    (the views' size counts the act-order copies of x and of the intermediate).
  size_t ws_bytes = 0;
  if (failed(moe_workspace_size(d13.view(), d2.view(), M, kTopk, 0, &ws_bytes), "moe_workspace_size")) return 1;
  void *dx = nullptr, *dy = nullptr, *dids = nullptr, *dw = nullptr, *ws = nullptr;
  cudaStream_t stream = nullptr;
  if (cuda_failed(cudaMalloc(&dx, x.size() * 2), "cudaMalloc x") ||
      cuda_failed(cudaMalloc(&dy, x.size() * 2), "cudaMalloc y") ||
      cuda_failed(cudaMalloc(&dids, ids.size() * 4), "cudaMalloc ids") ||
      cuda_failed(cudaMalloc(&dw, weights.size() * 4), "cudaMalloc weights") ||
      cuda_failed(cudaMalloc(&ws, ws_bytes), "cudaMalloc workspace") ||
      cuda_failed(cudaStreamCreate(&stream), "cudaStreamCreate") ||
      cuda_failed(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), "copy x") ||
      cuda_failed(cudaMemcpy(dids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), "copy ids") ||
      cuda_failed(cudaMemcpy(dw, weights.data(), weights.size() * 4, cudaMemcpyHostToDevice), "copy weights"))
    return 1;
  MoeArgs a;
  a.x = dx;
  a.y = dy;
  a.m = M;
  a.topk = kTopk;
  a.topk_ids = static_cast<const int32_t*>(dids);
  a.topk_weights = static_cast<const float*>(dw);
  if (failed(fused_moe(a, d13.view(), d2.view(), ws, ws_bytes, stream), "fused_moe")) return 1;
  std::vector<uint16_t> y(x.size());
  if (cuda_failed(cudaMemcpyAsync(y.data(), dy, y.size() * 2, cudaMemcpyDeviceToHost, stream), "copy y") ||
      cuda_failed(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
    return 1;
  double err2 = 0, ref2 = 0;
  bool finite = true;
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = half_bits_to_float(kAct, y[i]);
    finite = finite && std::isfinite(v);
    err2 += (v - ref[i]) * (v - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  // fp16: the intermediate and output roundings (2^-12 relative each), fp32 accumulation
  // (the GPU tests' bound for fp16 layers).
  const double rel = std::sqrt(err2 / ref2);
  const bool ok = finite && rel < 2e-3;
  std::printf("fused_moe (caller routing, M = %d, top-%d of %d): relative RMS error vs fp64 %.3g %s\n", M, kTopk, E, rel,
              ok ? "OK" : "TOO LARGE");
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dids);
  cudaFree(dw);
  cudaFree(ws);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
#else
  std::printf("SKIPPED: lowbit built without CUDA; the checkpoint, conversion, load and reference above ran on the CPU\n");
  return 0;
#endif
}
