// Shared pieces of the model subcommands (ppl, generate): default paths, loading, modes.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#if LOWBIT_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include "lowbit/allreduce.h"
#include "lowbit/model/cpu_engine.h"
#include "lowbit/model/gguf.h"
#include "lowbit/model/tokenizer.h"

namespace lowbit::cli::model_cmd {

// Repository root: $LOWBIT_SOURCE_DIR, else the current directory or a parent of it that
// holds models/ or include/lowbit, else the current directory.
inline std::string repo_root() {
  if (const char* s = std::getenv("LOWBIT_SOURCE_DIR")) return s;
  namespace fs = std::filesystem;
  fs::path cwd = fs::current_path();
  for (fs::path p = cwd; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "include/lowbit") || fs::exists(p / "models")) return p.string();
    if (p == p.parent_path()) break;
  }
  return cwd.string();
}
// <exe>/../.. : the binary lives in <repo>/build-*/bin, so this is the repository it was built
// in (or a copy of it) wherever the command is started from. Empty if unknown.
inline std::string exe_root() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return "";
  return exe.parent_path().parent_path().parent_path().string();
}
// Candidate roots, in order: repo_root(), then exe_root() when different.
inline std::vector<std::string> root_candidates() {
  std::vector<std::string> r = {repo_root()};
  std::string e = exe_root();
  std::error_code ec;
  if (!e.empty() && !std::filesystem::equivalent(r[0], e, ec)) r.push_back(e);
  return r;
}
inline std::string first_existing(const std::vector<std::string>& paths) {
  for (auto& p : paths)
    if (std::filesystem::exists(p)) return p;
  return paths.empty() ? "" : paths[0];
}
// models/SmolLM2-135M-Instruct.Q4_1.gguf under the first root that has it.
inline std::vector<std::string> default_model_candidates() {
  std::vector<std::string> c;
  for (auto& r : root_candidates()) c.push_back(r + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  return c;
}
inline std::string default_model() { return first_existing(default_model_candidates()); }
// WikiText-2 test split: $LOWBIT_DATA_DIR/wikitext-2-raw/wiki.test.raw when set; else, for each
// root, <root>/../shared/data/wikitext-2-raw/wiki.test.raw, <root>/data/wiki.test.raw,
// <root>/data/wikitext-2-raw/wiki.test.raw -- the first that exists.
inline std::vector<std::string> default_text_candidates() {
  if (const char* d = std::getenv("LOWBIT_DATA_DIR")) return {std::string(d) + "/wikitext-2-raw/wiki.test.raw"};
  std::vector<std::string> c;
  for (auto& r : root_candidates()) {
    c.push_back(r + "/../shared/data/wikitext-2-raw/wiki.test.raw");
    c.push_back(r + "/data/wiki.test.raw");
    c.push_back(r + "/data/wikitext-2-raw/wiki.test.raw");
  }
  return c;
}
inline std::string default_text() { return first_existing(default_text_candidates()); }
inline std::string join_paths(const std::vector<std::string>& v) {
  std::string s;
  for (auto& p : v) s += (s.empty() ? "" : ", ") + p;
  return s;
}

#if LOWBIT_HAS_CUDA
constexpr bool LOWBIT_HAS_CUDA_FLAG = true;
#else
constexpr bool LOWBIT_HAS_CUDA_FLAG = false;
#endif
// CUDA devices visible to this process (0 without CUDA or without a driver/device).
inline int cuda_device_count() {
#if LOWBIT_HAS_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return n;
#else
  return 0;
#endif
}
// The GPU paths create NCCL communicators; NVLink multicast (NVLS) must stay off on the
// project's machines, so it is disabled before any communicator exists.
inline void disable_nccl_nvls() { setenv("NCCL_NVLS_ENABLE", "0", 1); }
inline std::string cuda_device_name(int d) {
#if LOWBIT_HAS_CUDA
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, d) == cudaSuccess) return p.name;
  (void)cudaGetLastError();
#endif
  return "?";
}

inline Status read_text(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_status(StatusCode::kIoError, "cannot open text file '%s'", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

// "exact" (and "nccl", "oneshot", "twoshot": unquantized, the same fp32 sum of bf16
// partials rounded once) map to the one-shot reference; quantized modes to themselves.
inline Status parse_model_mode(const std::string& s, allreduce::Mode* m) {
  if (s == "exact" || s == "nccl" || s == "oneshot") { *m = allreduce::Mode::kOneShot; return Status::Ok(); }
  LOWBIT_RETURN_IF_ERROR(allreduce::parse_mode(s, m));
  if (*m == allreduce::Mode::kAuto) return make_status(StatusCode::kInvalidArgument, "mode auto is not a CPU algorithm");
  return Status::Ok();
}
inline const char* display_mode(allreduce::Mode m) { return allreduce::mode_is_quantized(m) ? allreduce::mode_name(m) : "exact"; }

struct LoadedModel {
  model::gguf::File file;
  model::LlamaConfig cfg;
  model::LlamaWeights w;
  model::Tokenizer tok;
};
inline Status load_model(const std::string& path, LoadedModel* m) {
  if (!std::filesystem::exists(path))
    return make_status(StatusCode::kIoError, "model file '%s' not found (run scripts/fetch_model.sh or pass --model)", path.c_str());
  LOWBIT_RETURN_IF_ERROR(model::gguf::File::open(path, &m->file));
  LOWBIT_RETURN_IF_ERROR(model::load_llama(m->file, &m->cfg, &m->w));
  LOWBIT_RETURN_IF_ERROR(model::Tokenizer::from_gguf(m->file, &m->tok));
  return Status::Ok();
}

}  // namespace lowbit::cli::model_cmd
