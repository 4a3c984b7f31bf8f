// Shared pieces of the model subcommands (ppl, generate): default paths, loading, modes.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lowbit/allreduce.h"
#include "lowbit/model/cpu_engine.h"
#include "lowbit/model/gguf.h"
#include "lowbit/model/tokenizer.h"

namespace lowbit::cli::model_cmd {

// Repository root: $LOWBIT_SOURCE_DIR, else the current directory if it holds models/ or
// include/lowbit, else the build's parent (binaries live in <repo>/build-*/bin).
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
inline std::string default_model() { return repo_root() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }
// $LOWBIT_DATA_DIR/wikitext-2-raw/wiki.test.raw, else <repo>/../shared/data/...
inline std::string default_text() {
  const char* d = std::getenv("LOWBIT_DATA_DIR");
  std::string dir = d ? d : repo_root() + "/../shared/data";
  return dir + "/wikitext-2-raw/wiki.test.raw";
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
