// `lowbit quant-error`: quantization error of every codec mode (int8/int4 x G=32/64/128) on
// synthetic Gaussian data, heavy-tailed "LLM activation" data (Gaussian rows of hidden size
// 4096 with 6 fixed outlier channels scaled x50..x100) and/or a user tensor (.npy or
// safetensors). Uses the CPU reference codec; errors are measured against the 16-bit input.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lowbit/codec.h"
#include "lowbit/io/npy.h"
#include "lowbit/io/safetensors.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"

namespace lowbit::codec {
namespace {

constexpr const char* kHelp =
    "usage: lowbit quant-error [--dist gaussian|outliers|all] [--n N] [--dtype bf16|fp16]\n"
    "                          [--file PATH [--tensor NAME]] [--json PATH]\n"
    "  For int8/int4 x group size 32/64/128 prints MSE, SNR (dB), max |error| and bytes per\n"
    "  element of the codec on the chosen data:\n"
    "    gaussian  N(0,1) samples\n"
    "    outliers  rows of hidden size 4096 ~ N(0,1) with 6 fixed channels scaled x50..x100\n"
    "    --file    a tensor from a .npy ('<f2','<f4','<f8', C order) or .safetensors file\n"
    "              (--tensor NAME required when the file holds several tensors)\n"
    "  Values are first rounded to --dtype (default bf16); errors are against those values.\n";

Status load_file(const std::string& path, const std::string& tensor, std::vector<double>* out, std::string* label) {
  bool st_file = path.size() > 12 && path.substr(path.size() - 12) == ".safetensors";
  if (!st_file) {
    io::NpyArray a;
    LOWBIT_RETURN_IF_ERROR(io::read_npy(path, &a));
    *out = std::move(a.values);
    *label = path;
    return Status::Ok();
  }
  io::SafetensorsFile f;
  LOWBIT_RETURN_IF_ERROR(io::SafetensorsFile::open(path, &f));
  std::string name = tensor;
  if (name.empty()) {
    if (f.tensors().size() != 1) {
      std::string names;
      for (const auto& [k, v] : f.tensors()) names += (names.empty() ? "" : ", ") + k;
      return make_status(StatusCode::kInvalidArgument, "%s holds %zu tensors; pick one with --tensor (%s)",
                         path.c_str(), f.tensors().size(), names.c_str());
    }
    name = f.tensors().begin()->first;
  }
  const io::TensorInfo* info = nullptr;
  LOWBIT_RETURN_IF_ERROR(f.find(name, &info));
  const uint8_t* d = f.data(*info);
  size_t n = static_cast<size_t>(info->numel());
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (info->dtype) {
      case io::TensorDType::kF16:
        (*out)[i] = f16_bits_to_float(static_cast<uint16_t>(d[2 * i] | (d[2 * i + 1] << 8)));
        break;
      case io::TensorDType::kBF16:
        (*out)[i] = bf16_bits_to_float(static_cast<uint16_t>(d[2 * i] | (d[2 * i + 1] << 8)));
        break;
      case io::TensorDType::kF32: {
        float v;
        std::memcpy(&v, d + 4 * i, 4);
        (*out)[i] = v;
        break;
      }
      case io::TensorDType::kF64:
        std::memcpy(&(*out)[i], d + 8 * i, 8);
        break;
      default:
        return make_status(StatusCode::kNotSupported, "tensor '%s' has dtype %s; expected F16, BF16, F32 or F64",
                           name.c_str(), io::tensor_dtype_name(info->dtype));
    }
  }
  *label = path + ":" + name;
  return Status::Ok();
}

int quant_error_main(const std::vector<std::string>& argv) {
  cli::Args args(argv, {"dist", "n", "dtype", "file", "tensor", "json", "help"}, {"help"});
  if (args.has("help")) {
    std::printf("%s", kHelp);
    return 0;
  }
  std::string dist = args.get("dist", args.has("file") ? "" : "all");
  int64_t n = args.get_int("n", 1 << 20);
  std::string dts = args.get("dtype", "bf16");
  if (!args.ok() || n <= 0 || (dts != "bf16" && dts != "fp16") ||
      (!dist.empty() && dist != "gaussian" && dist != "outliers" && dist != "all")) {
    std::fprintf(stderr, "lowbit quant-error: %s\n%s", args.ok() ? "bad --n, --dtype or --dist" : args.error().c_str(),
                 kHelp);
    return 2;
  }
  DType t = dts == "fp16" ? DType::kF16 : DType::kBF16;
  std::vector<std::pair<std::string, std::vector<double>>> sets;
  std::mt19937 rng(2024);
  std::normal_distribution<double> g(0.0, 1.0);
  if (dist == "gaussian" || dist == "all") {
    std::vector<double> v(static_cast<size_t>(n));
    for (auto& e : v) e = g(rng);
    sets.push_back({"gaussian", std::move(v)});
  }
  if (dist == "outliers" || dist == "all") {
    const int kHidden = 4096;
    const int kCh[6] = {17, 403, 1290, 2047, 3001, 4000};
    const double kMul[6] = {50, 64, 100, 75, 90, 55};
    std::vector<double> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = g(rng);
      for (int c = 0; c < 6; ++c)
        if (static_cast<int>(i % kHidden) == kCh[c]) v[i] *= kMul[c];
    }
    sets.push_back({"outliers", std::move(v)});
  }
  if (args.has("file")) {
    std::vector<double> v;
    std::string label;
    Status st = load_file(args.get("file"), args.get("tensor"), &v, &label);
    if (!st.ok()) {
      std::fprintf(stderr, "lowbit quant-error: %s\n", st.to_string().c_str());
      return 1;
    }
    sets.push_back({label, std::move(v)});
  }
  if (sets.empty()) {
    std::fprintf(stderr, "lowbit quant-error: nothing to measure (give --dist or --file)\n");
    return 2;
  }
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-28s %-6s %5s %12s %9s %12s %10s\n", "data", "codec", "G", "MSE", "SNR_dB", "max_abs_err",
              "bytes/elem");
  for (auto& [name, vals] : sets) {
    std::vector<uint16_t> x(vals.size());
    for (size_t i = 0; i < vals.size(); ++i) x[i] = float_to_half_bits(t, static_cast<float>(vals[i]));
    for (int bits : {8, 4})
      for (int gs : {32, 64, 128}) {
        CodecSpec s{bits, gs};
        std::vector<uint8_t> enc(codec_encoded_bytes(s, x.size()));
        std::vector<float> dec(x.size(), 0.0f);
        Status st = encode_ref(s, t, x.data(), x.size(), enc.data());
        if (st.ok()) st = decode_accumulate_ref(s, t, enc.data(), x.size(), dec.data());
        if (!st.ok()) {
          std::fprintf(stderr, "lowbit quant-error: %s\n", st.to_string().c_str());
          return 1;
        }
        // Errors of the decoded output as the dtype (what a consumer sees).
        double se = 0, sx = 0, mx = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          double xv = half_bits_to_float(t, x[i]);
          double dv = half_bits_to_float(t, float_to_half_bits(t, dec[i]));
          double e = xv - dv;
          se += e * e;
          sx += xv * xv;
          mx = std::max(mx, std::fabs(e));
        }
        double mse = se / x.size(), snr = se > 0 ? 10 * std::log10(sx / se) : INFINITY;
        double bpe = codec_bits_per_element(s) / 8.0;
        std::printf("%-28s int%-3d %5d %12.4e %9.2f %12.4e %10.4f\n", name.c_str(), bits, gs, mse, snr, mx, bpe);
        rows.push_back({{"data", name}, {"dtype", dts}, {"codec", "int" + std::to_string(bits)}, {"group_size", gs},
                        {"n", x.size()}, {"mse", mse}, {"snr_db", std::isfinite(snr) ? snr : 999.0},
                        {"max_abs_err", mx}, {"bytes_per_element", bpe}});
      }
  }
  if (args.has("json")) {
    std::ofstream f(args.get("json"));
    f << nlohmann::json{{"command", "quant-error"}, {"rows", rows}}.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "lowbit quant-error: cannot write %s\n", args.get("json").c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace lowbit::codec

LOWBIT_REGISTER_COMMAND("quant-error", "codec quantization error (MSE, SNR, max error) per mode",
                        lowbit::codec::quant_error_main);
