// lowbit generate: greedy decoding with the CPU engine (KV cache), streaming the text.
#include <chrono>
#include <cstdio>

#include "tools/cli/args.h"
#include "tools/cli/command.h"
#include "tools/cli/model/model_common.h"

namespace lowbit::cli::model_cmd {
namespace {

// SmolLM2-Instruct's chat template (tokenizer.chat_template in the GGUF) for one user turn
// with its default system prompt, ending with the assistant header.
std::string chat_prompt(const std::string& user) {
  return "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
         "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
}

int cmd_generate(const std::vector<std::string>& argv) {
  Args a(argv, {"model", "prompt", "max-tokens", "tp", "mode", "group", "chat", "threads"}, {"chat"});
  if (!a.ok() || !a.has("prompt")) {
    std::fprintf(stderr, "lowbit generate: %s\nusage: lowbit generate --prompt TEXT [--max-tokens 64] [--tp 1] "
                 "[--mode exact|q8q8|q4q8|q4q4] [--group 128] [--chat] [--model PATH]\n",
                 a.ok() ? "--prompt is required" : a.error().c_str());
    return 2;
  }
  int max_tokens = static_cast<int>(a.get_int("max-tokens", 64)), tp = static_cast<int>(a.get_int("tp", 1));
  int group = static_cast<int>(a.get_int("group", 128)), threads = static_cast<int>(a.get_int("threads", 2));
  allreduce::Mode mode;
  Status st = parse_model_mode(a.get("mode", "exact"), &mode);
  if (!a.ok() || !st.ok() || max_tokens < 1 || tp < 0 || threads < 1) {
    std::fprintf(stderr, "lowbit generate: bad option %s %s\n", a.error().c_str(), st.ok() ? "" : st.to_string().c_str());
    return 2;
  }
  LoadedModel m;
  st = load_model(a.get("model", default_model()), &m);
  std::string prompt = a.has("chat") ? chat_prompt(a.get("prompt")) : a.get("prompt");
  std::vector<int32_t> ids;
  if (st.ok()) st = m.tok.encode(prompt, false, /*parse_special=*/a.has("chat"), &ids);
  if (st.ok() && ids.empty()) st = make_status(StatusCode::kInvalidArgument, "empty prompt");
  model::CpuEngineOptions o;
  o.tp = tp;
  o.mode = mode;
  o.group_size = group;
  o.threads = threads;
  o.max_ctx = static_cast<int>(ids.size()) + max_tokens;
  model::CpuLlama eng;
  if (st.ok()) st = eng.init(m.cfg, &m.w, o);
  if (!st.ok()) {
    std::fprintf(stderr, "lowbit generate: %s\n", st.to_string().c_str());
    return 1;
  }
  std::vector<float> hidden, logits(m.cfg.vocab_size);
  const int32_t end_of_text = m.tok.find_token("<|endoftext|>");
  auto t0 = std::chrono::steady_clock::now();
  st = eng.forward(ids.data(), static_cast<int>(ids.size()), &hidden);
  auto t1 = std::chrono::steady_clock::now();
  if (!a.has("chat")) std::fputs(prompt.c_str(), stdout);
  int produced = 0;
  while (st.ok() && produced < max_tokens) {
    eng.logits(hidden.data() + hidden.size() - m.cfg.hidden, 1, logits.data());
    int32_t best = 0;
    for (int v = 1; v < m.cfg.vocab_size; ++v)
      if (logits[v] > logits[best]) best = v;
    if (best == m.tok.eos_id() || best == end_of_text) break;
    std::string piece = m.tok.piece(best);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    ++produced;
    if (produced < max_tokens) st = eng.forward(&best, 1, &hidden);
  }
  auto t2 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "\nlowbit generate: %s\n", st.to_string().c_str());
    return 1;
  }
  double pre = std::chrono::duration<double>(t1 - t0).count(), dec = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "\n[prompt %zu tokens in %.2f s (%.0f tok/s); generated %d tokens in %.2f s (%.1f tok/s); TP=%d %s]\n",
               ids.size(), pre, ids.size() / pre, produced, dec, produced / dec, tp, display_mode(mode));
  return 0;
}

}  // namespace

LOWBIT_REGISTER_COMMAND("generate", "greedy text generation with the CPU engine (--chat for SmolLM2's chat template)",
                        cmd_generate);

}  // namespace lowbit::cli::model_cmd
