// Byte-level BPE tokenizer (GPT-2 style) built from GGUF metadata: tokenizer.ggml.tokens,
// .merges, .token_type, .bos_token_id, .eos_token_id, .pre.
//
// Encoding: (1) optionally split out special tokens written literally in the text;
// (2) pre-tokenize each piece; (3) map every byte to its GPT-2 "byte encoder" character;
// (4) apply merges lowest rank first inside each pre-token; (5) look the pieces up.
// Pre-tokenizers (llama.cpp's names, the value of tokenizer.ggml.pre):
//   "gpt2":   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   "smollm": every \p{N} codepoint isolated first (Hugging Face Digits(individual_digits)),
//             then the gpt2 expression on the pieces in between (llama.cpp groups it with
//             starcoder/refact). Implemented by hand over UTF-8 (no std::regex).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "lowbit/model/gguf.h"
#include "lowbit/status.h"

namespace lowbit::model {

class Tokenizer {
 public:
  static Status from_gguf(const gguf::File& f, Tokenizer* out);

  // parse_special: control/user-defined token texts in `text` (e.g. "<|im_start|>") become
  // their ids; otherwise they are tokenized as plain text.
  Status encode(const std::string& text, bool add_bos, bool parse_special, std::vector<int32_t>* ids) const;
  // Concatenated bytes of the tokens; control tokens are dropped when skip_special.
  Status decode(const std::vector<int32_t>& ids, bool skip_special, std::string* text) const;
  std::string piece(int32_t id) const;  // bytes of one token ("" when out of range)

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  bool add_bos_default() const { return add_bos_; }
  const std::string& pre_type() const { return pre_; }
  // token id of an exact token text, -1 if absent.
  int32_t find_token(const std::string& text) const;

  // The pre-tokenizer split alone (byte strings of the input), for tests.
  static std::vector<std::string> pre_tokenize(const std::string& text, bool split_digits);

 private:
  void bpe(const std::string& word, std::vector<int32_t>* out) const;
  std::vector<std::string> tokens_;
  std::vector<int32_t> types_;
  std::unordered_map<std::string, int32_t> token_id_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<std::string> specials_;                    // texts of control/user tokens
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false;
  bool split_digits_ = true;
  std::string pre_;
};

}  // namespace lowbit::model
