// Whole-checkpoint conversion (the code behind `lowbit convert`): synthetic GPTQ / AWQ /
// compressed-tensors checkpoints written with the format writers convert back bit-exactly.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

#include "lowbit/int4/act_order_fold.h"
#include "lowbit/int4/checkpoint.h"
#include "lowbit/int4/shard.h"

using namespace lowbit;
using namespace lowbit::int4;
using io::TensorDType;

namespace {

std::string tmp(const std::string& tag) {
  return ::testing::TempDir() + "lowbit_cv_" + tag + "_" + std::to_string(::getpid());
}

KPackedWeights weight(int n, int k, int g, bool sym, DType act, uint32_t seed, int zlo = 0) {
  std::mt19937 rng(seed);
  const WeightShape s{1, n, k, g, sym, act};
  KPackedWeights w;
  kpacked_allocate(s, &w);
  for (auto& b : w.qweight) b = static_cast<uint8_t>(rng());
  for (auto& v : w.scales) v = float_to_half_bits(act, std::ldexp(static_cast<float>(128 + rng() % 128), -14));
  for (int nn = 0; nn < (sym ? 0 : n); ++nn)
    for (int gg = 0; gg < s.num_groups(); ++gg) kpacked_set_z(&w, 0, nn, gg, zlo + static_cast<int>(rng() % (16 - zlo)));
  return w;
}

// Keeps tensor bytes alive for write_safetensors.
struct Ckpt {
  std::vector<std::vector<int32_t>> i32;
  std::vector<std::vector<uint16_t>> h;
  std::vector<io::TensorToWrite> list;
  void add_i32(const std::string& name, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    i32.push_back(v);
    list.push_back({name, TensorDType::kI32, shape, nullptr});
    idx.push_back({0, i32.size() - 1});
  }
  void add_h(const std::string& name, TensorDType dt, std::vector<int64_t> shape, const std::vector<uint16_t>& v) {
    h.push_back(v);
    list.push_back({name, dt, shape, nullptr});
    idx.push_back({1, h.size() - 1});
  }
  void add_bytes(const std::string& name, TensorDType dt, std::vector<int64_t> shape, const std::vector<uint8_t>& v) {
    b.push_back(v);
    list.push_back({name, dt, shape, nullptr});
    idx.push_back({2, b.size() - 1});
  }
  Status write(const std::string& path) {
    for (size_t i = 0; i < list.size(); ++i) {
      const size_t j = idx[i].second;
      list[i].data = idx[i].first == 0   ? static_cast<const void*>(i32[j].data())
                     : idx[i].first == 1 ? static_cast<const void*>(h[j].data())
                                         : static_cast<const void*>(b[j].data());
    }
    return io::write_safetensors(path, list);
  }
  std::vector<std::vector<uint8_t>> b;
  std::vector<std::pair<int, size_t>> idx;
};

// The layer's qweight goes to c, its other tensors to rest (another shard) when given.
void add_gptq(Ckpt* c, const std::string& p, const GptqLinear& g, Ckpt* rest = nullptr) {
  c->add_i32(p + ".qweight", {g.k / 8, g.n}, g.qweight);
  if (rest != nullptr) c = rest;
  c->add_i32(p + ".qzeros", {static_cast<int64_t>(g.scales.size() / g.n), (g.n + 7) / 8}, g.qzeros);
  c->add_h(p + ".scales", TensorDType::kF16, {static_cast<int64_t>(g.scales.size() / g.n), g.n}, g.scales);
  std::vector<int32_t> gi = g.g_idx;
  if (gi.empty()) {
    int G = g.group_size == kPerChannel ? g.k : g.group_size;
    for (int k = 0; k < g.k; ++k) gi.push_back(k / G);
  }
  c->add_i32(p + ".g_idx", {g.k}, gi);
}

// A canonical weight written into the checkpoint as a GPTQ v1 layer.
Status add_weight(Ckpt* c, const std::string& p, const KPackedWeights& w, Ckpt* rest = nullptr) {
  GptqLinear g;
  LOWBIT_RETURN_IF_ERROR(kpacked_to_gptq(w, 0, GptqVersion::kV1, &g));
  add_gptq(c, p, g, rest);
  return Status::Ok();
}

void expect_layer(const io::SafetensorsFile& f, const std::string& p, const KPackedWeights& want) {
  KPackedWeights got;
  Status st = load_converted_layer(f, p, &got);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(got.shape.n, want.shape.n);
  EXPECT_EQ(got.shape.k, want.shape.k);
  EXPECT_EQ(got.shape.group_size, want.shape.group_size);
  EXPECT_EQ(got.shape.symmetric, want.shape.symmetric);
  EXPECT_TRUE(got.qweight == want.qweight) << p;
  EXPECT_TRUE(got.scales == want.scales) << p;
  EXPECT_TRUE(got.zeros == want.zeros) << p;
  EXPECT_TRUE(got.k_perm == want.k_perm) << p;
  if (layout_for(want.shape) == WeightLayout::kNPacked) {
    NPackedWeights np;
    ASSERT_TRUE(repack_to_npacked(want, &np).ok());
    const io::TensorInfo* t;
    ASSERT_TRUE(f.find(p + ".qweight_npacked", &t).ok());
    ASSERT_EQ(t->nbytes, np.qweight.size() * 4);
    EXPECT_EQ(std::memcmp(f.data(*t), np.qweight.data(), t->nbytes), 0);
    ASSERT_TRUE(f.find(p + ".scales_npacked", &t).ok());
    EXPECT_EQ(std::memcmp(f.data(*t), np.scales.data(), t->nbytes), 0);
  } else {
    EXPECT_FALSE(f.has(p + ".qweight_npacked"));
  }
}

// Options of the GPTQ v1 checkpoints the expert and TP tests write: asymmetric, fp16 scales.
ConvertOptions gptq_asym_f16_options(const std::string& in, const std::string& out) {
  ConvertOptions o;
  o.in_path = in;
  o.out_path = out;
  o.format = CheckpointFormat::kGptqV1;
  o.symmetric = 0;
  o.act = DType::kF16;
  return o;
}

}  // namespace

TEST(Convert, GptqV1WithActOrderAndConfig) {
  const std::string in = tmp("gptq.safetensors"), out = tmp("gptq_out.safetensors"), cfg = tmp("config.json");
  Ckpt c;
  auto w0 = weight(32, 64, 32, false, DType::kF16, 1, 1);
  auto w1 = weight(12, 64, 32, false, DType::kF16, 2, 1);  // N % 8 != 0: stays K-packed
  GptqLinear g0, g1;
  ASSERT_TRUE(kpacked_to_gptq(w0, 0, GptqVersion::kV1, &g0).ok());
  // Layer 1: act-order with the two groups swapped. (A permutation is recovered from g_idx only
  // up to the order within a group; the converter keeps checkpoint order there, as here.)
  w1.k_perm.resize(64);
  for (int j = 0; j < 64; ++j) w1.k_perm[j] = (j + 32) % 64;
  ASSERT_TRUE(kpacked_to_gptq(w1, 0, GptqVersion::kV1, &g1).ok());
  add_gptq(&c, "model.layers.0.mlp.up_proj", g0);
  add_gptq(&c, "model.layers.1.mlp.up_proj", g1);
  ASSERT_TRUE(c.write(in).ok());
  {
    std::ofstream f(cfg);
    f << R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": false,
             "desc_act": true}})";
  }
  ConvertOptions o;
  o.in_path = in;
  o.out_path = out;
  o.config_path = cfg;
  o.act = DType::kF16;
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(sum.layers.size(), 2u);
  EXPECT_EQ(sum.format, CheckpointFormat::kGptqV1);
  EXPECT_EQ(sum.layers[0].layout, WeightLayout::kNPacked);
  EXPECT_EQ(sum.layers[1].layout, WeightLayout::kKPacked);
  EXPECT_TRUE(sum.layers[1].act_order);
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
  EXPECT_EQ(f.metadata().at("lowbit.format"), "int4-packed-v1");
  expect_layer(f, "model.layers.0.mlp.up_proj", w0);
  expect_layer(f, "model.layers.1.mlp.up_proj", w1);
  // --layer filter.
  o.layer_prefix = "model.layers.1.";
  ASSERT_TRUE(convert_checkpoint(o, &sum).ok());
  EXPECT_EQ(sum.layers.size(), 1u);
  // bf16 activations: 8-significant-bit scales convert exactly (weight() makes such scales).
  o.act = DType::kBF16;
  o.layer_prefix.clear();
  st = convert_checkpoint(o, &sum);
  EXPECT_TRUE(st.ok()) << st.to_string();
  // Wrong group size in the config is named.
  {
    std::ofstream f2(cfg);
    f2 << R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 16, "sym": false}})";
  }
  st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("group_size=16"), std::string::npos) << st.message();
  std::remove(in.c_str());
  std::remove(out.c_str());
  std::remove(cfg.c_str());
}

// MoE checkpoints: A.experts.<e>.B layers with e = 0..E-1 and one shape are stacked into one
// E-expert weight A.experts.B (expert e = checkpoint layer e, bit-exact); a set with a
// missing index stays one layer per checkpoint layer.
TEST(Convert, MoeExpertsStacked) {
  const std::string in = tmp("moe.safetensors"), out = tmp("moe_out.safetensors");
  Ckpt c;
  std::vector<KPackedWeights> gate;
  for (int e = 0; e < 3; ++e) {
    gate.push_back(weight(16, 64, 32, false, DType::kF16, 40 + e, 1));
    GptqLinear g;
    ASSERT_TRUE(kpacked_to_gptq(gate.back(), 0, GptqVersion::kV1, &g).ok());
    add_gptq(&c, "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj", g);
  }
  auto up0 = weight(16, 64, 32, false, DType::kF16, 50, 1), up2 = weight(16, 64, 32, false, DType::kF16, 52, 1);
  GptqLinear gu0, gu2;
  ASSERT_TRUE(kpacked_to_gptq(up0, 0, GptqVersion::kV1, &gu0).ok());
  ASSERT_TRUE(kpacked_to_gptq(up2, 0, GptqVersion::kV1, &gu2).ok());
  add_gptq(&c, "model.layers.0.mlp.experts.0.up_proj", gu0);
  add_gptq(&c, "model.layers.0.mlp.experts.2.up_proj", gu2);  // expert 1 missing: not stacked
  ASSERT_TRUE(c.write(in).ok());
  ConvertOptions o = gptq_asym_f16_options(in, out);
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(sum.layers.size(), 3u);
  int stacked = 0;
  for (const auto& L : sum.layers) {
    if (L.prefix == "model.layers.0.mlp.experts.gate_proj") {
      ++stacked;
      EXPECT_EQ(L.experts, 3);
    } else {
      EXPECT_EQ(L.experts, 1) << L.prefix;
    }
  }
  EXPECT_EQ(stacked, 1);
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
  KPackedWeights want;
  ASSERT_TRUE(stack_experts(gate, &want).ok());
  KPackedWeights got;
  ASSERT_TRUE(load_converted_layer(f, "model.layers.0.mlp.experts.gate_proj", &got).ok());
  EXPECT_EQ(got.shape.experts, 3);
  expect_layer(f, "model.layers.0.mlp.experts.gate_proj", want);
  expect_layer(f, "model.layers.0.mlp.experts.0.up_proj", up0);
  expect_layer(f, "model.layers.0.mlp.experts.2.up_proj", up2);
  EXPECT_FALSE(f.has("model.layers.0.mlp.experts.0.gate_proj.qweight_kpacked"));
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// A checkpoint stored as Hugging Face shards (an index, experts of one MoE layer in two
// shards, one layer's tensors split between shards, the quantization config beside them)
// converts to the same bytes as the same tensors in one file with the config named: opened
// as the directory and as the index. The output appears only when complete.
TEST(Convert, ShardedCheckpointSameAsOneFile) {
  const std::string dir = tmp("shards"), one = tmp("one.safetensors"), cfg = tmp("one_config.json");
  const std::string out_one = tmp("one_out.safetensors"), out_dir = tmp("dir_out.safetensors");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  Ckpt whole, s1, s2, s3;
  std::vector<KPackedWeights> gate;
  for (int e = 0; e < 3; ++e) {
    gate.push_back(weight(64, 64, 32, false, DType::kF16, 60 + e, 1));
    const std::string p = "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj";
    ASSERT_TRUE(add_weight(&whole, p, gate.back()).ok());
    ASSERT_TRUE(add_weight(e < 2 ? &s1 : &s2, p, gate.back()).ok());
  }
  auto o_proj = weight(32, 128, 32, false, DType::kF16, 70, 1);
  GptqLinear go;
  ASSERT_TRUE(kpacked_to_gptq(o_proj, 0, GptqVersion::kV1, &go).ok());
  add_gptq(&whole, "model.layers.0.self_attn.o_proj", go);
  add_gptq(&s2, "model.layers.0.self_attn.o_proj", go, &s3);
  ASSERT_TRUE(whole.write(one).ok());
  const char* names[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                         "model-00003-of-00003.safetensors"};
  ASSERT_TRUE(s1.write(dir + "/" + names[0]).ok());
  ASSERT_TRUE(s2.write(dir + "/" + names[1]).ok());
  ASSERT_TRUE(s3.write(dir + "/" + names[2]).ok());
  {
    std::ofstream idx(dir + "/model.safetensors.index.json");
    idx << "{\"metadata\": {}, \"weight_map\": {";
    const Ckpt* shards[] = {&s1, &s2, &s3};
    bool first = true;
    for (int i = 0; i < 3; ++i)
      for (const auto& t : shards[i]->list) {
        idx << (first ? "" : ", ") << "\"" << t.name << "\": \"" << names[i] << "\"";
        first = false;
      }
    idx << "}}";
  }
  const char* config = R"({"architectures": ["Qwen3MoeForCausalLM"], "quantization_config": {"quant_method": "gptq",
      "bits": 4, "group_size": 32, "sym": false, "desc_act": false}})";
  std::ofstream(dir + "/config.json") << config;
  std::ofstream(cfg) << config;
  ConvertOptions o;
  o.in_path = one;
  o.out_path = out_one;
  o.config_path = cfg;
  o.act = DType::kF16;
  ConvertSummary sum_one;
  Status st = convert_checkpoint(o, &sum_one);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(sum_one.shards, 1u);
  const auto bytes = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  for (const std::string& in : {dir, dir + "/model.safetensors.index.json"}) {
    o.in_path = in;
    o.out_path = out_dir;
    o.config_path.clear();  // found beside the shards
    ConvertSummary sum;
    st = convert_checkpoint(o, &sum);
    ASSERT_TRUE(st.ok()) << in << ": " << st.to_string();
    EXPECT_EQ(sum.shards, 3u);
    EXPECT_EQ(sum.config_path, dir + "/config.json");
    EXPECT_EQ(sum.format, CheckpointFormat::kGptqV1);
    ASSERT_EQ(sum.layers.size(), 2u);
    EXPECT_EQ(sum.layers[0].prefix, "model.layers.0.mlp.experts.gate_proj");
    EXPECT_EQ(sum.layers[0].experts, 3);
    EXPECT_TRUE(bytes(out_dir) == bytes(out_one)) << in;
    std::remove(out_dir.c_str());
  }
  // A config naming a method the parser does not take stops the auto-discovery, not an
  // explicit --format (which then describes the checkpoint itself).
  std::ofstream(dir + "/config.json") << R"({"quantization_config": {"quant_method": "auto-round", "bits": 4}})";
  o.in_path = dir;
  o.out_path = out_dir;
  o.config_path.clear();
  ConvertSummary sum_fmt;
  st = convert_checkpoint(o, &sum_fmt);
  EXPECT_NE(st.message().find("quant_method 'auto-round' not supported"), std::string::npos) << st.message();
  ConvertOptions of = gptq_asym_f16_options(dir, out_dir);
  st = convert_checkpoint(of, &sum_fmt);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(sum_fmt.config_path.empty());
  EXPECT_TRUE(bytes(out_dir) == bytes(out_one));
  std::remove(out_dir.c_str());
  std::ofstream(dir + "/config.json") << config;
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out_one, &f).ok());
  KPackedWeights want;
  ASSERT_TRUE(stack_experts(gate, &want).ok());
  expect_layer(f, "model.layers.0.mlp.experts.gate_proj", want);
  expect_layer(f, "model.layers.0.self_attn.o_proj", o_proj);
  // A conversion that fails midway (o_proj, after the experts were written: a NaN scale)
  // leaves no output.
  std::remove((dir + "/" + names[2]).c_str());
  Ckpt qweight_only, s3_bad;
  GptqLinear go_nan = go;
  go_nan.scales[5] = 0x7E00;
  add_gptq(&qweight_only, "model.layers.0.self_attn.o_proj", go_nan, &s3_bad);
  ASSERT_TRUE(s3_bad.write(dir + "/" + names[2]).ok());
  o.in_path = dir;
  o.out_path = out_dir;
  st = convert_checkpoint(o, &sum_one);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model.layers.0.self_attn.o_proj"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not finite"), std::string::npos) << st.message();
  struct stat sb;
  EXPECT_NE(::stat(out_dir.c_str(), &sb), 0) << "no output file after a failed conversion";
  EXPECT_NE(::stat((out_dir + ".partial").c_str(), &sb), 0);
  for (const char* n : names) std::remove((dir + "/" + n).c_str());
  for (const char* n : {"/model.safetensors.index.json", "/config.json"}) std::remove((dir + n).c_str());
  ::rmdir(dir.c_str());
  for (const std::string& p : {one, cfg, out_one}) std::remove(p.c_str());
}

// --fuse-gate-up: X.gate_proj + X.up_proj -> X.gate_up_proj and Mixtral's X.w1 + X.w3 -> X.w13,
// for stacked experts (fused_moe's w13: [E, 2I, H]) and dense MLPs alike, bit for bit
// concat_n of the parts; a TP rank's fused shard is tp_shard(kGateUp) of the whole fused
// weight; gate and up that cannot be joined are named.
TEST(Convert, FusesGateAndUp) {
  const std::string in = tmp("fuse.safetensors"), out = tmp("fuse_out.safetensors");
  Ckpt c;
  std::vector<KPackedWeights> gate, up, w1, w3;
  auto add = [&](const std::string& p, const KPackedWeights& w) { ASSERT_TRUE(add_weight(&c, p, w).ok()); };
  for (int e = 0; e < 2; ++e) {
    const std::string q = "model.layers.0.mlp.experts." + std::to_string(e);
    gate.push_back(weight(32, 64, 32, false, DType::kF16, 90 + e, 1));
    up.push_back(weight(32, 64, 32, false, DType::kF16, 92 + e, 1));
    add(q + ".gate_proj", gate.back());
    add(q + ".up_proj", up.back());
    add(q + ".down_proj", weight(64, 32, 32, false, DType::kF16, 94 + e, 1));
    const std::string x = "model.layers.0.block_sparse_moe.experts." + std::to_string(e);
    w1.push_back(weight(16, 64, 32, false, DType::kF16, 96 + e, 1));
    w3.push_back(weight(16, 64, 32, false, DType::kF16, 98 + e, 1));
    add(x + ".w1", w1.back());
    add(x + ".w3", w3.back());
  }
  const auto dgate = weight(24, 64, 32, false, DType::kF16, 100, 1), dup = weight(24, 64, 32, false, DType::kF16, 101, 1);
  add("model.layers.1.mlp.gate_proj", dgate);
  add("model.layers.1.mlp.up_proj", dup);
  ASSERT_TRUE(c.write(in).ok());
  auto joined = [](const std::vector<KPackedWeights>& g, const std::vector<KPackedWeights>& u) {
    KPackedWeights sg, su, j;
    EXPECT_TRUE(stack_experts(g, &sg).ok());
    EXPECT_TRUE(stack_experts(u, &su).ok());
    EXPECT_TRUE(concat_n({sg, su}, &j).ok());
    return j;
  };
  const KPackedWeights want13 = joined(gate, up), want_w13 = joined(w1, w3), want_dense = joined({dgate}, {dup});
  ConvertOptions o = gptq_asym_f16_options(in, out);
  o.fuse_gate_up = true;
  std::vector<std::pair<size_t, size_t>> calls;  // (done, total) per progress call
  o.progress = [&](size_t done, size_t total, const std::string&) { calls.push_back({done, total}); };
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // 7 units (3 stacked expert sets of layer 0's MLP, Mixtral's w1 and w3, the dense gate and up),
  // the fused pairs counted twice: progress ends at 7 of 7, increasing.
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), (std::pair<size_t, size_t>{7, 7}));
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].first, calls[i - 1].first);
  o.progress = nullptr;
  std::vector<std::string> names;
  for (const auto& L : sum.layers) names.push_back(L.prefix);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"model.layers.0.block_sparse_moe.experts.w13",
                                             "model.layers.0.mlp.experts.down_proj",
                                             "model.layers.0.mlp.experts.gate_up_proj",
                                             "model.layers.1.mlp.gate_up_proj"}));
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    expect_layer(f, "model.layers.0.mlp.experts.gate_up_proj", want13);
    expect_layer(f, "model.layers.0.block_sparse_moe.experts.w13", want_w13);
    expect_layer(f, "model.layers.1.mlp.gate_up_proj", want_dense);
    const std::string meta = f.metadata().at("model.layers.0.mlp.experts.gate_up_proj");
    EXPECT_NE(meta.find(R"("fused_from":["model.layers.0.mlp.experts.gate_proj","model.layers.0.mlp.experts.up_proj"])"),
              std::string::npos)
        << meta;
  }
  // TP 2, rank 1: the fused layers split as [gate; up] halves.
  o.tp_size = 2;
  o.tp_rank = 1;
  st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    KPackedWeights r13, rw13;
    ASSERT_TRUE(tp_shard(want13, TpSplit::kGateUp, 1, 2, &r13).ok());
    ASSERT_TRUE(tp_shard(want_w13, TpSplit::kGateUp, 1, 2, &rw13).ok());
    expect_layer(f, "model.layers.0.mlp.experts.gate_up_proj", r13);
    expect_layer(f, "model.layers.0.block_sparse_moe.experts.w13", rw13);
  }
  // K-packed only: no N-packed tensors, the layers load the same.
  o.tp_size = 1;
  o.tp_rank = 0;
  o.write_npacked = false;
  ASSERT_TRUE(convert_checkpoint(o, &sum).ok());
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    for (const auto& [name, t] : f.tensors()) EXPECT_EQ(name.find("npacked"), std::string::npos) << name;
    for (const auto& L : sum.layers) EXPECT_EQ(L.layout, WeightLayout::kKPacked) << L.prefix;
    KPackedWeights got;
    ASSERT_TRUE(load_converted_layer(f, "model.layers.0.mlp.experts.gate_up_proj", &got).ok());
    EXPECT_TRUE(got.qweight == want13.qweight && got.scales == want13.scales && got.zeros == want13.zeros);
  }
  o.write_npacked = true;
  // Without the option the parts stay separate layers.
  o.tp_size = 1;
  o.tp_rank = 0;
  o.fuse_gate_up = false;
  ASSERT_TRUE(convert_checkpoint(o, &sum).ok());
  EXPECT_EQ(sum.layers.size(), 7u);
  // --fold-act-order on a checkpoint without act-order changes nothing: the same tensors, bytes and
  // metadata (an MLP's layers are then written one after another, so the file's order differs).
  {
    const std::string plain_out = tmp("fuse_plain.safetensors");
    std::rename(out.c_str(), plain_out.c_str());
    o.fold_act_order = true;
    ASSERT_TRUE(convert_checkpoint(o, &sum).ok());
    o.fold_act_order = false;
    io::SafetensorsFile a, b;
    ASSERT_TRUE(io::SafetensorsFile::open(plain_out, &a).ok());
    ASSERT_TRUE(io::SafetensorsFile::open(out, &b).ok());
    EXPECT_EQ(a.metadata(), b.metadata());
    ASSERT_EQ(a.tensors().size(), b.tensors().size());
    for (const auto& [name, t] : a.tensors()) {
      ASSERT_TRUE(b.has(name)) << name;
      const io::TensorInfo& u = b.tensors().at(name);
      ASSERT_EQ(t.nbytes, u.nbytes) << name;
      EXPECT_EQ(std::memcmp(a.data(t), b.data(u), t.nbytes), 0) << name;
    }
    std::remove(plain_out.c_str());
  }
  // Gate and up of different K cannot be joined.
  Ckpt bad;
  ASSERT_TRUE(add_weight(&bad, "m.gate_proj", weight(16, 64, 32, false, DType::kF16, 102, 1)).ok());
  ASSERT_TRUE(add_weight(&bad, "m.up_proj", weight(16, 128, 32, false, DType::kF16, 103, 1)).ok());
  ASSERT_TRUE(bad.write(in).ok());
  o.fuse_gate_up = true;
  st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("cannot fuse 'm.gate_proj' and 'm.up_proj'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("K=128"), std::string::npos) << st.message();
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// An act-order permutation as GPTQ's g_idx gives it back: random group membership, each group's
// checkpoint rows in increasing order (the converter keeps checkpoint order within a group).
std::vector<int32_t> gptq_k_perm(int k, int g, uint32_t seed) {
  std::vector<int32_t> p(k);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  for (int j = 0; j < k; j += g) std::sort(p.begin() + j, p.begin() + j + g);
  return p;
}

// --fold-act-order: an act-order down_proj (per expert: stacked, each its own permutation) is
// written without k_perm, its gate and up with their columns in its stored row order (bit for
// bit permute_n of the checkpoint's, metadata naming the other side), fused or not; TP then
// splits it by rows, which the unfolded act-order layer refuses; a down layer without its gate
// and up in the selection is refused by name.
TEST(Convert, FoldsActOrderDownIntoGateAndUp) {
  const std::string in = tmp("fold.safetensors"), out = tmp("fold_out.safetensors");
  constexpr int H = 64, I = 96, G = 32;
  // Stacked experts (layer 0), a dense MLP (layer 1) and Mixtral's names (layer 2, w1 / w3 / w2).
  struct Mlp {
    std::string base;  // the output prefix of the (stacked) layers
    std::vector<std::string> members;  // checkpoint prefixes, in expert order
    const char *g, *u, *d, *fused;
    KPackedWeights gate, up, down, gate_up;  // as written: gate / up / gate_up folded, down without k_perm
  };
  std::vector<Mlp> want = {
      {"model.layers.0.mlp.experts", {"model.layers.0.mlp.experts.0", "model.layers.0.mlp.experts.1"}, ".gate_proj",
       ".up_proj", ".down_proj", ".gate_up_proj", {}, {}, {}, {}},
      {"model.layers.1.mlp", {"model.layers.1.mlp"}, ".gate_proj", ".up_proj", ".down_proj", ".gate_up_proj", {}, {}, {}, {}},
      {"model.layers.2.block_sparse_moe.experts",
       {"model.layers.2.block_sparse_moe.experts.0", "model.layers.2.block_sparse_moe.experts.1"}, ".w1", ".w3", ".w2",
       ".w13", {}, {}, {}, {}}};
  Ckpt c;
  const std::vector<int32_t> perm_h = gptq_k_perm(H, G, 7);  // gate and up share x, so one K order
  uint32_t seed = 110;
  for (Mlp& m : want) {
    std::vector<KPackedWeights> gate, up, down;
    for (const std::string& q : m.members) {
      gate.push_back(weight(I, H, G, false, DType::kF16, seed++, 1));
      up.push_back(weight(I, H, G, false, DType::kF16, seed++, 1));
      down.push_back(weight(H, I, G, false, DType::kF16, seed++, 1));
      gate.back().k_perm = up.back().k_perm = perm_h;
      down.back().k_perm = gptq_k_perm(I, G, seed++);
      ASSERT_TRUE(add_weight(&c, q + m.g, gate.back()).ok());
      ASSERT_TRUE(add_weight(&c, q + m.u, up.back()).ok());
      ASSERT_TRUE(add_weight(&c, q + m.d, down.back()).ok());
    }
    KPackedWeights sg, su, sd;
    ASSERT_TRUE(stack_experts(gate, &sg).ok());
    ASSERT_TRUE(stack_experts(up, &su).ok());
    ASSERT_TRUE(stack_experts(down, &sd).ok());
    ASSERT_TRUE(permute_n(sg, sd.k_perm, 1, &m.gate).ok());
    ASSERT_TRUE(permute_n(su, sd.k_perm, 1, &m.up).ok());
    ASSERT_TRUE(concat_n({m.gate, m.up}, &m.gate_up).ok());
    m.down = sd;
    m.down.k_perm.clear();
  }
  ASSERT_TRUE(c.write(in).ok());
  ConvertOptions o = gptq_asym_f16_options(in, out);
  o.fold_act_order = true;
  std::vector<std::pair<size_t, size_t>> calls;
  o.progress = [&](size_t done, size_t total, const std::string&) { calls.push_back({done, total}); };
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), (std::pair<size_t, size_t>{9, 9}));
  o.progress = nullptr;
  ASSERT_EQ(sum.layers.size(), 9u);
  for (const auto& L : sum.layers) {
    const bool is_down = L.prefix.ends_with(".down_proj") || L.prefix.ends_with(".w2");
    EXPECT_EQ(L.act_order, !is_down) << L.prefix;  // gate / up keep their own K order
    EXPECT_EQ(L.act_order_folded_into.size(), is_down ? 2u : 0u) << L.prefix;
    EXPECT_EQ(L.columns_permuted_by.empty(), is_down) << L.prefix;
  }
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    for (const Mlp& m : want) {
      expect_layer(f, m.base + m.g, m.gate);
      expect_layer(f, m.base + m.u, m.up);
      expect_layer(f, m.base + m.d, m.down);
      EXPECT_FALSE(f.has(m.base + m.d + ".k_perm"));
      const std::string dm = f.metadata().at(m.base + m.d), gm = f.metadata().at(m.base + m.g);
      EXPECT_NE(dm.find(R"("act_order_folded_into":[")" + m.base + m.g + R"(",")" + m.base + m.u + R"("])"),
                std::string::npos)
          << dm;
      EXPECT_NE(gm.find(R"("columns_permuted_by":")" + m.base + m.d + R"(")"), std::string::npos) << gm;
    }
  }
  // With --fuse-gate-up: one [gate; up] layer, both halves in down's order.
  o.fuse_gate_up = true;
  st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(sum.layers.size(), 6u);
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    for (const Mlp& m : want) {
      expect_layer(f, m.base + m.fused, m.gate_up);
      expect_layer(f, m.base + m.d, m.down);
      const std::string dm = f.metadata().at(m.base + m.d);
      EXPECT_NE(dm.find(R"("act_order_folded_into":[")" + m.base + m.fused + R"("])"), std::string::npos) << dm;
    }
  }
  // TP 2: down splits by rows once folded (rank 1 here); unfolded, its act-order is refused with a
  // pointer to the option.
  o.tp_size = 2;
  o.tp_rank = 1;
  st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    for (const Mlp& m : want) {
      KPackedWeights r13, r2;
      ASSERT_TRUE(tp_shard(m.gate_up, TpSplit::kGateUp, 1, 2, &r13).ok());
      ASSERT_TRUE(tp_shard(m.down, TpSplit::kRows, 1, 2, &r2).ok());
      EXPECT_EQ(r2.shape.group_size, 16);  // 48 rows of a G = 32 weight from row 48
      expect_layer(f, m.base + m.fused, r13);
      expect_layer(f, m.base + m.d, r2);
    }
  }
  o.fold_act_order = false;
  st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("down_proj"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--fold-act-order"), std::string::npos) << st.message();
  // A down layer selected without its gate and up cannot be folded.
  o.fold_act_order = true;
  o.tp_size = 1;
  o.tp_rank = 0;
  o.layer_prefix = "model.layers.1.mlp.down";
  st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("cannot fold the act-order of 'model.layers.1.mlp.down_proj'"), std::string::npos)
      << st.message();
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// A checkpoint that stores gate and up fused already (Phi-3's X.gate_up_proj, [gate; up] along N):
// --fold-act-order reorders both halves by down's permutation.
TEST(Convert, FoldsActOrderIntoAFusedGateUpLayer) {
  const std::string in = tmp("fold_fused.safetensors"), out = tmp("fold_fused_out.safetensors");
  constexpr int H = 64, I = 64, G = 32;
  KPackedWeights gate_up = weight(2 * I, H, G, false, DType::kF16, 140, 1);
  KPackedWeights down = weight(H, I, G, false, DType::kF16, 141, 1);
  gate_up.k_perm = gptq_k_perm(H, G, 142);
  down.k_perm = gptq_k_perm(I, G, 143);
  Ckpt c;
  ASSERT_TRUE(add_weight(&c, "model.layers.0.mlp.gate_up_proj", gate_up).ok());
  ASSERT_TRUE(add_weight(&c, "model.layers.0.mlp.down_proj", down).ok());
  ASSERT_TRUE(c.write(in).ok());
  KPackedWeights want13, want2 = down;
  ASSERT_TRUE(permute_n(gate_up, down.k_perm, 2, &want13).ok());
  want2.k_perm.clear();
  ConvertOptions o = gptq_asym_f16_options(in, out);
  o.fold_act_order = true;
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(sum.layers.size(), 2u);
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
  expect_layer(f, "model.layers.0.mlp.gate_up_proj", want13);
  expect_layer(f, "model.layers.0.mlp.down_proj", want2);
  const std::string dm = f.metadata().at("model.layers.0.mlp.down_proj");
  EXPECT_NE(dm.find(R"("act_order_folded_into":["model.layers.0.mlp.gate_up_proj"])"), std::string::npos) << dm;
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// A checkpoint that also holds FP8 tensors (an FP8 layer, MX block scales) converts its INT4
// layers; the others are read past, not refused.
TEST(Convert, Fp8TensorsBesideTheLayersAreReadPast) {
  const std::string in = tmp("fp8.safetensors"), out = tmp("fp8_out.safetensors");
  Ckpt c;
  const auto w = weight(16, 64, 32, false, DType::kF16, 110, 1);
  ASSERT_TRUE(add_weight(&c, "model.layers.0.mlp.down_proj", w).ok());
  c.add_bytes("model.layers.1.self_attn.q_proj.weight", TensorDType::kF8E4M3, {8, 8}, std::vector<uint8_t>(64, 0x38));
  c.add_bytes("model.layers.1.mlp.experts.w1.scale", TensorDType::kF8E8M0, {8}, std::vector<uint8_t>(8, 127));
  ASSERT_TRUE(c.write(in).ok());
  ConvertOptions o = gptq_asym_f16_options(in, out);
  ConvertSummary sum;
  const Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(sum.layers.size(), 1u);
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
  expect_layer(f, "model.layers.0.mlp.down_proj", w);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

// Tensor-parallel conversion (--tp-size / --tp-rank): each rank's file holds tp_shard of every
// layer by its name's rule; down_proj's K range cuts a scale group (K = 384 = 3 groups of 128,
// 192 rows per rank), so its shard carries G = 64; experts' gate_proj (stacked) split by columns;
// a fused qkv_proj is refused unless a rule is forced; bad ranks are refused.
TEST(Convert, TensorParallelShards) {
  const std::string in = tmp("tp.safetensors"), out = tmp("tp_out.safetensors");
  Ckpt c;
  const KPackedWeights down = weight(16, 384, 128, false, DType::kF16, 60, 1);
  GptqLinear g;
  ASSERT_TRUE(kpacked_to_gptq(down, 0, GptqVersion::kV1, &g).ok());
  add_gptq(&c, "model.layers.0.mlp.down_proj", g);
  std::vector<KPackedWeights> gate;
  for (int e = 0; e < 2; ++e) {
    gate.push_back(weight(32, 64, 32, false, DType::kF16, 70 + e, 1));
    ASSERT_TRUE(kpacked_to_gptq(gate.back(), 0, GptqVersion::kV1, &g).ok());
    add_gptq(&c, "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj", g);
  }
  const KPackedWeights qkv = weight(48, 64, 32, false, DType::kF16, 80, 1);
  ASSERT_TRUE(kpacked_to_gptq(qkv, 0, GptqVersion::kV1, &g).ok());
  add_gptq(&c, "model.layers.0.self_attn.qkv_proj", g);
  ASSERT_TRUE(c.write(in).ok());
  KPackedWeights gate_stack;
  ASSERT_TRUE(stack_experts(gate, &gate_stack).ok());
  ConvertOptions o = gptq_asym_f16_options(in, out);
  o.tp_size = 2;
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);  // qkv_proj has no rule
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model.layers.0.self_attn.qkv_proj"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("fused qkv"), std::string::npos) << st.to_string();
  o.layer_prefix = "model.layers.0.mlp";
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    o.tp_rank = r;
    st = convert_checkpoint(o, &sum);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(sum.layers.size(), 2u);
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    EXPECT_EQ(f.metadata().at("lowbit.tp"), std::to_string(r) + "/2");
    KPackedWeights want;
    ASSERT_TRUE(tp_shard(down, TpSplit::kRows, r, 2, &want).ok());
    EXPECT_EQ(want.shape.group_size, 64);
    expect_layer(f, "model.layers.0.mlp.down_proj", want);
    ASSERT_TRUE(tp_shard(gate_stack, TpSplit::kColumns, r, 2, &want).ok());
    expect_layer(f, "model.layers.0.mlp.experts.gate_proj", want);
    for (const auto& L : sum.layers) {
      const bool is_down = L.prefix == "model.layers.0.mlp.down_proj";
      EXPECT_EQ(L.tp_split, static_cast<int>(is_down ? TpSplit::kRows : TpSplit::kColumns)) << L.prefix;
      EXPECT_EQ(L.group_size, is_down ? 64 : 32) << L.prefix;
      EXPECT_EQ(L.checkpoint_group_size, is_down ? 128 : 32) << L.prefix;
    }
  }
  o.layer_prefix = "model.layers.0.self_attn";
  o.tp_split = static_cast<int>(TpSplit::kColumns);  // forced: equal column ranges of the fused tensor
  o.tp_rank = 1;
  st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  {
    io::SafetensorsFile f;
    ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
    KPackedWeights want;
    ASSERT_TRUE(tp_shard(qkv, TpSplit::kColumns, 1, 2, &want).ok());
    expect_layer(f, "model.layers.0.self_attn.qkv_proj", want);
  }
  // Every rank in one pass (kAllTpRanks, "{rank}" in the path): the same bytes as one run per rank.
  {
    o.tp_split = -1;
    o.layer_prefix = "model.layers.0.mlp";
    const std::string pattern = tmp("tp_all_{rank}.safetensors");
    auto bytes = [](const std::string& p) {
      std::ifstream f(p, std::ios::binary);
      return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    };
    ConvertOptions all = o;
    all.tp_rank = kAllTpRanks;
    all.out_path = pattern;
    ConvertSummary sa;
    st = convert_checkpoint(all, &sa);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(sa.out_paths.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      o.tp_rank = r;
      ASSERT_TRUE(convert_checkpoint(o, &sum).ok());
      EXPECT_EQ(sa.out_paths[r], tmp("tp_all_" + std::to_string(r) + ".safetensors"));
      EXPECT_TRUE(bytes(sa.out_paths[r]) == bytes(out)) << "rank " << r;
      std::remove(sa.out_paths[r].c_str());
    }
    int rank1 = 0;
    for (const auto& L : sa.layers) rank1 += L.tp_rank == 1;
    EXPECT_EQ(rank1 * 2, static_cast<int>(sa.layers.size()));
    all.out_path = out;  // no "{rank}": refused
    st = convert_checkpoint(all, &sa);
    EXPECT_NE(st.message().find("needs '{rank}'"), std::string::npos) << st.to_string();
    all.out_path = pattern;
    all.tp_size = 1;
    st = convert_checkpoint(all, &sa);
    EXPECT_NE(st.message().find("all ranks need a TP size > 1"), std::string::npos) << st.to_string();
  }
  o.tp_rank = 2;
  st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("TP rank 2"), std::string::npos) << st.to_string();
  o.tp_rank = 0;
  o.tp_size = 3;  // 48 columns split, but gate_proj's 32 do not
  o.layer_prefix = "model.layers.0.mlp.experts";
  o.tp_split = -1;
  st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("layer 'model.layers.0.mlp.experts.gate_proj'"), std::string::npos) << st.to_string();
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(Convert, AwqNeedsFormatAndRoundTrips) {
  const std::string in = tmp("awq.safetensors"), out = tmp("awq_out.safetensors");
  auto w = weight(16, 32, kPerChannel, false, DType::kF16, 5);
  AwqLinear a;
  ASSERT_TRUE(kpacked_to_awq(w, 0, &a).ok());
  Ckpt c;
  c.add_i32("l.qweight", {32, 2}, a.qweight);
  c.add_i32("l.qzeros", {1, 2}, a.qzeros);
  c.add_h("l.scales", TensorDType::kF16, {1, 16}, a.scales);
  ASSERT_TRUE(c.write(in).ok());
  ConvertOptions o;
  o.in_path = in;
  o.out_path = out;
  o.act = DType::kF16;
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  EXPECT_NE(st.message().find("GPTQ or AWQ"), std::string::npos) << st.message();
  o.format = CheckpointFormat::kAwq;
  st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(sum.layers[0].group_size, kPerChannel);
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
  expect_layer(f, "l", w);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(Convert, CompressedTensorsAutoDetected) {
  const std::string in = tmp("ct.safetensors"), out = tmp("ct_out.safetensors");
  auto w = weight(8, 24, 8, true, DType::kBF16, 6);
  CtLinear ct;
  ASSERT_TRUE(kpacked_to_ct(w, 0, &ct).ok());
  Ckpt c;
  c.add_i32("m.experts.0.down_proj.weight_packed", {8, 3}, ct.weight_packed);
  c.add_h("m.experts.0.down_proj.weight_scale", TensorDType::kBF16, {8, 3}, ct.weight_scale);
  c.add_i32("m.experts.0.down_proj.weight_shape", {2}, {8, 24});
  ASSERT_TRUE(c.write(in).ok());
  ConvertOptions o;
  o.in_path = in;
  o.out_path = out;
  o.act = DType::kBF16;
  ConvertSummary sum;
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(sum.format, CheckpointFormat::kCompressedTensors);
  io::SafetensorsFile f;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &f).ok());
  expect_layer(f, "m.experts.0.down_proj", w);
  // actorder "group": the layer's weight_g_idx becomes its k_perm (two groups swapped here);
  // a converter that ignored it would dequantize every row with the wrong group's scale.
  KPackedWeights wa = weight(8, 32, 16, false, DType::kBF16, 7, 1);
  wa.k_perm.resize(32);
  for (int j = 0; j < 32; ++j) wa.k_perm[j] = (j + 16) % 32;
  ASSERT_TRUE(kpacked_to_ct(wa, 0, &ct).ok());
  ASSERT_EQ(ct.weight_g_idx.size(), 32u);
  Ckpt ca;
  ca.add_i32("m.o_proj.weight_packed", {8, 4}, ct.weight_packed);
  ca.add_h("m.o_proj.weight_scale", TensorDType::kBF16, {8, 2}, ct.weight_scale);
  ca.add_i32("m.o_proj.weight_shape", {2}, {8, 32});
  ca.add_i32("m.o_proj.weight_zero_point", {1, 2}, ct.weight_zero_point);
  ca.add_i32("m.o_proj.weight_g_idx", {32}, ct.weight_g_idx);
  ASSERT_TRUE(ca.write(in).ok());
  st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(sum.layers.size(), 1u);
  EXPECT_TRUE(sum.layers[0].act_order);
  io::SafetensorsFile fa;
  ASSERT_TRUE(io::SafetensorsFile::open(out, &fa).ok());
  expect_layer(fa, "m.o_proj", wa);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(Convert, ErrorsAreNamed) {
  ConvertOptions o;
  o.in_path = tmp("missing.safetensors");
  o.out_path = tmp("x.safetensors");
  ConvertSummary sum;
  EXPECT_EQ(convert_checkpoint(o, &sum).code(), StatusCode::kIoError);
  const std::string in = tmp("empty.safetensors");
  int32_t v = 1;
  ASSERT_TRUE(io::write_safetensors(in, {{"a.weight", TensorDType::kI32, {1}, &v}}).ok());
  o.in_path = in;
  EXPECT_NE(convert_checkpoint(o, &sum).message().find("no quantized layers"), std::string::npos);
  std::remove(in.c_str());
}

// Mutated checkpoints (header and data bytes) must give a Status, never a crash; run under
// ASan/UBSan in the sanitizer build.
TEST(Convert, MutatedCheckpointsNeverCrash) {
  const std::string in = tmp("fz.safetensors"), mut = tmp("fz_mut.safetensors"), out = tmp("fz_out.safetensors");
  auto w = weight(16, 32, 16, false, DType::kF16, 9, 1);
  GptqLinear g;
  ASSERT_TRUE(kpacked_to_gptq(w, 0, GptqVersion::kV1, &g).ok());
  Ckpt c;
  add_gptq(&c, "x", g);
  auto wc = weight(8, 16, 8, false, DType::kF16, 10);
  CtLinear ct;
  ASSERT_TRUE(kpacked_to_ct(wc, 0, &ct).ok());
  c.add_i32("y.weight_packed", {8, 2}, ct.weight_packed);
  c.add_h("y.weight_scale", TensorDType::kF16, {8, 2}, ct.weight_scale);
  c.add_i32("y.weight_shape", {2}, {8, 16});
  c.add_i32("y.weight_zero_point", {1, 2}, ct.weight_zero_point);
  ASSERT_TRUE(c.write(in).ok());
  std::ifstream f(in, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ConvertOptions o;
  o.in_path = mut;
  o.out_path = out;
  o.format = CheckpointFormat::kGptqV1;
  o.act = DType::kF16;
  ConvertSummary sum;
  {
    std::ofstream m(mut, std::ios::binary);
    m.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Status st = convert_checkpoint(o, &sum);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::mt19937 rng(77);
  int failures = 0;
  for (int it = 0; it < 400; ++it) {
    auto b = bytes;
    for (int m = 0; m < 1 + static_cast<int>(rng() % 3); ++m) {
      size_t i = rng() % b.size();
      if (rng() % 2) b[i] = static_cast<char>(rng());
      else b[i] = "0123456789[],"[rng() % 13];
    }
    {
      std::ofstream m(mut, std::ios::binary | std::ios::trunc);
      m.write(b.data(), static_cast<std::streamsize>(b.size()));
    }
    st = convert_checkpoint(o, &sum);
    if (!st.ok()) {
      ++failures;
      EXPECT_FALSE(st.message().empty());
    }
  }
  EXPECT_GT(failures, 0);
  std::remove(in.c_str());
  std::remove(mut.c_str());
  std::remove(out.c_str());
}
