// lowbit generate: greedy decoding, streaming the text. CPU: the fp32 engine with a KV cache.
// GPU: the TpRunner, which has prefill only (no KV cache / decode step): every new token
// re-runs the prefill of a fixed-length, padded sequence and reads the logits of the last
// real position (causal attention: padding after it changes nothing). O(n^2) but for short
// answers of a small model it takes milliseconds per token.
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

#include "lowbit/model/tp_runner.h"
#include "tools/cli/args.h"
#include "tools/cli/command.h"
#include "tools/cli/model/model_common.h"

namespace lowbit::cli::model_cmd {
namespace {

const char* kHelp =
    "usage: lowbit generate --prompt TEXT [options]\n"
    "Greedy decoding; prints the prompt (without --chat) and the continuation.\n"
    "  --chat               wrap the prompt in SmolLM2's chat template (default system prompt)\n"
    "  --max-tokens N       new tokens at most (default 64); stops at <|im_end|> / <|endoftext|>\n"
    "  --device cpu|gpu     cpu (default): fp32 engine with a KV cache, simulated TP\n"
    "                       gpu: TpRunner on GPUs 0..tp-1 (bf16, real all-reduce); no KV cache on\n"
    "                       the GPU: each token re-runs the prefill of the whole sequence\n"
    "  --tp N               ranks (default 1; cpu 0 = plain fp32)\n"
    "  --mode M             exact (default; gpu: nccl), q8q8, q4q8, q4q4 (cpu/gpu), nccl/oneshot/twoshot (gpu)\n"
    "  --group G            quantization group size 32, 64, 128 (default 128)\n"
    "  --threads N          cpu threads (default 2)\n"
    "  --model PATH         default models/SmolLM2-135M-Instruct.Q4_1.gguf (repo root or <exe>/../../)\n";

// SmolLM2-Instruct's chat template (tokenizer.chat_template in the GGUF) for one user turn
// with its default system prompt, ending with the assistant header.
std::string chat_prompt(const std::string& user) {
  return "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
         "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
}

int32_t argmax(const float* lg, int V) {
  int32_t best = 0;
  for (int v = 1; v < V; ++v)
    if (lg[v] > lg[best]) best = v;
  return best;
}

// Greedy decoding on the GPUs by repeated prefill (see the file comment). emit(token) is
// called per generated token and returns false to stop.
Status generate_gpu(const LoadedModel& m, std::vector<int32_t> ids, int max_tokens, int tp, const std::string& algo,
                    int group, const std::function<bool(int32_t)>& emit) {
#if LOWBIT_HAS_CUDA
  disable_nccl_nvls();
  std::vector<int> devices(tp);
  for (int i = 0; i < tp; ++i) devices[i] = i;
  std::unique_ptr<model::TpRunner> runner;
  LOWBIT_RETURN_IF_ERROR(model::TpRunner::create(m.cfg, devices, allreduce::Config{}, &runner));
  LOWBIT_RETURN_IF_ERROR(runner->load_weights(m.w));
  model::TpComm comm;
  LOWBIT_RETURN_IF_ERROR(model::parse_tp_comm(algo, group, &comm));
  model::TpRunOptions ro;
  ro.batch = 1;
  ro.seq = static_cast<int>(ids.size()) + max_tokens;
  ro.all_logits = true;
  LOWBIT_RETURN_IF_ERROR(runner->prepare(ro));
  const int V = m.cfg.vocab_size;
  std::vector<float> logits;
  for (int step = 0; step < max_tokens; ++step) {
    const size_t n = ids.size();
    std::vector<int32_t> padded(ids);
    padded.resize(ro.seq, ids.back());  // padding after the last real token is never attended to
    LOWBIT_RETURN_IF_ERROR(runner->set_tokens(padded));
    LOWBIT_RETURN_IF_ERROR(runner->forward(comm));
    LOWBIT_RETURN_IF_ERROR(runner->logits(&logits));
    const int32_t best = argmax(logits.data() + (n - 1) * size_t(V), V);
    if (!emit(best)) break;
    ids.push_back(best);
  }
  return Status::Ok();
#else
  (void)m, (void)ids, (void)max_tokens, (void)tp, (void)algo, (void)group, (void)emit;
  return make_status(StatusCode::kNotSupported, "lowbit was built without CUDA: --device gpu is unavailable");
#endif
}

int cmd_generate(const std::vector<std::string>& argv) {
  for (auto& s : argv)
    if (s == "--help" || s == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    }
  Args a(argv, {"model", "prompt", "max-tokens", "tp", "mode", "group", "chat", "threads", "device"}, {"chat"});
  if (!a.ok() || !a.has("prompt")) {
    std::fprintf(stderr, "lowbit generate: %s\n%s", a.ok() ? "--prompt is required" : a.error().c_str(), kHelp);
    return 2;
  }
  int max_tokens = static_cast<int>(a.get_int("max-tokens", 64)), tp = static_cast<int>(a.get_int("tp", 1));
  int group = static_cast<int>(a.get_int("group", 128)), threads = static_cast<int>(a.get_int("threads", 2));
  const std::string dev = a.get("device", "cpu"), mode_str = a.get("mode", "exact");
  allreduce::Mode mode;
  Status st = parse_model_mode(mode_str, &mode);
  if (!a.ok() || !st.ok() || max_tokens < 1 || tp < 0 || threads < 1 || (dev != "cpu" && dev != "gpu")) {
    std::fprintf(stderr, "lowbit generate: bad option %s %s (see --help)\n", a.error().c_str(),
                 st.ok() ? "" : st.to_string().c_str());
    return 2;
  }
  const bool gpu = dev == "gpu";
  if (gpu) {
    if (tp == 0) tp = 1;
    const int n = cuda_device_count();
    if (n < tp) {
      std::fprintf(stderr, "lowbit generate: --device gpu --tp %d but %s\n", tp,
                   LOWBIT_HAS_CUDA_FLAG ? (std::to_string(n) + " CUDA devices visible").c_str()
                                        : "lowbit was built without CUDA");
      return 1;
    }
  }
  LoadedModel m;
  st = load_model(a.get("model", default_model()), &m);
  std::string prompt = a.has("chat") ? chat_prompt(a.get("prompt")) : a.get("prompt");
  std::vector<int32_t> ids;
  if (st.ok()) st = m.tok.encode(prompt, false, /*parse_special=*/a.has("chat"), &ids);
  if (st.ok() && ids.empty()) st = make_status(StatusCode::kInvalidArgument, "empty prompt");
  // --device gpu printed wrong tokens beyond ~64 positions (prompt + --max-tokens; 2026-11-30).
  // Cause found by reading: the attention workspace handed cuBLAS's batched GEMMs matrices
  // off the alignment it assumes for most lengths (lowbit/detail/model_attention_layout.h),
  // and host copies were not ordered with the runner's non-blocking streams. Both fixed;
  // tests/gpu/model/test_generate_padded.cu runs this loop at 101 positions against fp64.
  if (!st.ok()) {
    std::fprintf(stderr, "lowbit generate: %s\n", st.to_string().c_str());
    return 1;
  }
  const int32_t end_of_text = m.tok.find_token("<|endoftext|>");
  int produced = 0;
  // Prints a token unless it ends the answer; false = stop.
  auto emit = [&](int32_t tok) {
    if (tok == m.tok.eos_id() || tok == end_of_text) return false;
    std::string piece = m.tok.piece(tok);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    ++produced;
    return true;
  };
  if (!a.has("chat")) std::fputs(prompt.c_str(), stdout);
  auto t0 = std::chrono::steady_clock::now(), t1 = t0;
  if (gpu) {
    st = generate_gpu(m, ids, max_tokens, tp, mode_str == "exact" ? "nccl" : mode_str, group, emit);
    t1 = t0;
  } else {
    model::CpuEngineOptions o;
    o.tp = tp;
    o.mode = mode;
    o.group_size = group;
    o.threads = threads;
    o.max_ctx = static_cast<int>(ids.size()) + max_tokens;
    model::CpuLlama eng;
    st = eng.init(m.cfg, &m.w, o);
    std::vector<float> hidden, logits(m.cfg.vocab_size);
    if (st.ok()) st = eng.forward(ids.data(), static_cast<int>(ids.size()), &hidden);
    t1 = std::chrono::steady_clock::now();
    while (st.ok() && produced < max_tokens) {
      eng.logits(hidden.data() + hidden.size() - m.cfg.hidden, 1, logits.data());
      const int32_t best = argmax(logits.data(), m.cfg.vocab_size);
      if (!emit(best)) break;
      if (produced < max_tokens) st = eng.forward(&best, 1, &hidden);
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "\nlowbit generate: %s\n", st.to_string().c_str());
    return 1;
  }
  double pre = std::chrono::duration<double>(t1 - t0).count(), dec = std::chrono::duration<double>(t2 - t1).count();
  if (gpu)
    std::fprintf(stderr, "\n[GPU: prompt %zu tokens, generated %d tokens in %.2f s incl. setup (%.1f tok/s); TP=%d %s]\n",
                 ids.size(), produced, dec, produced / dec, tp, mode_str.c_str());
  else
    std::fprintf(stderr, "\n[CPU: prompt %zu tokens in %.2f s (%.0f tok/s); generated %d tokens in %.2f s (%.1f tok/s); TP=%d %s]\n",
                 ids.size(), pre, ids.size() / pre, produced, dec, produced / dec, tp, display_mode(mode));
  return 0;
}

}  // namespace

LOWBIT_REGISTER_COMMAND("generate",
                        "greedy text generation (--device cpu|gpu; --chat for SmolLM2's chat template; --help)",
                        cmd_generate);

}  // namespace lowbit::cli::model_cmd
