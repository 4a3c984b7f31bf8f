// Byte-level BPE tokenizer; see lowbit/model/tokenizer.h for the algorithm.
#include "lowbit/model/tokenizer.h"

#include <algorithm>
#include <climits>

#include "runtime/model/unicode_tables.h"

namespace lowbit::model {
namespace {

bool in_ranges(uint32_t cp, const unicode::CodepointRange* r, size_t n) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp > r[mid].last) lo = mid + 1;
    else if (cp < r[mid].first) hi = mid;
    else return true;
  }
  return false;
}
bool is_letter(uint32_t cp) {
  if (cp < 128) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
  return in_ranges(cp, unicode::kLetterRanges, std::size(unicode::kLetterRanges));
}
bool is_number(uint32_t cp) {
  if (cp < 128) return cp >= '0' && cp <= '9';
  return in_ranges(cp, unicode::kNumberRanges, std::size(unicode::kNumberRanges));
}
// Unicode White_Space (what \s matches in the reference regex engines).
bool is_space(uint32_t cp) {
  return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

struct Cp {
  uint32_t cp;
  uint32_t off, len;  // bytes in the input
};

// Decodes UTF-8; an invalid byte becomes a codepoint of its own (0xDC00 + byte, a lone
// surrogate that no class matches), so every input byte survives into some pre-token.
std::vector<Cp> decode_utf8(const std::string& s) {
  std::vector<Cp> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    uint32_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (uint32_t k = 1; ok && k < len; ++k) {
      uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc >> 6) != 2) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back({0xDC00u + c, static_cast<uint32_t>(i), 1});
      ++i;
    } else {
      out.push_back({cp, static_cast<uint32_t>(i), len});
      i += len;
    }
  }
  return out;
}

void append_utf8(uint32_t cp, std::string* s) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// GPT-2 byte encoder: printable bytes map to themselves, the rest to 256 + k in order.
struct ByteMap {
  std::string enc[256];
  std::unordered_map<uint32_t, uint8_t> dec;
  ByteMap() {
    int k = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + k++);
      append_utf8(cp, &enc[b]);
      dec[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// The gpt2 expression over cps[b, e) (llama.cpp's unicode_regex_split_custom_gpt2 logic),
// appending byte ranges [start, end) of the input.
void split_gpt2(const std::vector<Cp>& cps, size_t b, size_t e, std::vector<std::pair<size_t, size_t>>* out) {
  auto get = [&](size_t p) -> int64_t { return p < e ? static_cast<int64_t>(cps[p].cp) : -1; };
  auto letter = [&](size_t p) { return p < e && is_letter(cps[p].cp); };
  auto number = [&](size_t p) { return p < e && is_number(cps[p].cp); };
  auto space = [&](size_t p) { return p < e && is_space(cps[p].cp); };
  auto other = [&](size_t p) { return p < e && !is_letter(cps[p].cp) && !is_number(cps[p].cp) && !is_space(cps[p].cp); };
  size_t pos = b;
  auto emit = [&](size_t end) {
    out->push_back({pos, end});
    pos = end;
  };
  while (pos < e) {
    int64_t c = get(pos);
    if (c == '\'' && pos + 1 < e) {
      int64_t n1 = get(pos + 1);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') { emit(pos + 2); continue; }
      int64_t n2 = get(pos + 2);
      if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) { emit(pos + 3); continue; }
    }
    size_t p2 = c == ' ' ? pos + 1 : pos;  // optional leading space
    if (letter(p2)) {
      size_t q = p2;
      while (letter(q)) ++q;
      emit(q);
      continue;
    }
    if (number(p2)) {
      size_t q = p2;
      while (number(q)) ++q;
      emit(q);
      continue;
    }
    if (other(p2)) {
      size_t q = p2;
      while (other(q)) ++q;
      emit(q);
      continue;
    }
    size_t q = pos;
    while (space(q)) ++q;
    size_t nws = q - pos;
    if (nws > 1 && q < e) { emit(q - 1); continue; }  // \s+(?!\S): leave one for the next word
    if (nws > 0) { emit(q); continue; }               // \s+
    emit(pos + 1);
  }
}

}  // namespace

std::vector<std::string> Tokenizer::pre_tokenize(const std::string& text, bool split_digits) {
  std::vector<Cp> cps = decode_utf8(text);
  std::vector<std::pair<size_t, size_t>> spans;
  size_t b = 0;
  for (size_t i = 0; i <= cps.size(); ++i) {
    if (i == cps.size() || (split_digits && is_number(cps[i].cp))) {
      if (i > b) split_gpt2(cps, b, i, &spans);
      if (i < cps.size()) spans.push_back({i, i + 1});
      b = i + 1;
    }
  }
  std::vector<std::string> out;
  out.reserve(spans.size());
  for (auto [s, e] : spans) {
    size_t off = cps[s].off, end = cps[e - 1].off + cps[e - 1].len;
    out.push_back(text.substr(off, end - off));
  }
  return out;
}

Status Tokenizer::from_gguf(const gguf::File& f, Tokenizer* out) {
  LOWBIT_CHECK_ARG(out != nullptr, "Tokenizer::from_gguf: out is null");
  Tokenizer t;
  std::string model;
  LOWBIT_RETURN_IF_ERROR(f.get_string("tokenizer.ggml.model", &model));
  if (model != "gpt2")
    return make_status(StatusCode::kNotSupported, "tokenizer: model '%s' is not byte-level BPE ('gpt2')", model.c_str());
  t.pre_ = "gpt2";
  if (f.find("tokenizer.ggml.pre")) LOWBIT_RETURN_IF_ERROR(f.get_string("tokenizer.ggml.pre", &t.pre_));
  if (t.pre_ == "smollm") t.split_digits_ = true;
  else if (t.pre_ == "gpt2") t.split_digits_ = false;
  else return make_status(StatusCode::kNotSupported, "tokenizer: pre-tokenizer '%s' not implemented (smollm, gpt2)", t.pre_.c_str());
  const std::vector<std::string>* toks = nullptr;
  const std::vector<std::string>* merges = nullptr;
  LOWBIT_RETURN_IF_ERROR(f.get_string_array("tokenizer.ggml.tokens", &toks));
  LOWBIT_RETURN_IF_ERROR(f.get_string_array("tokenizer.ggml.merges", &merges));
  LOWBIT_CHECK_ARG(!toks->empty() && toks->size() < (size_t{1} << 30), "tokenizer: %zu tokens", toks->size());
  t.tokens_ = *toks;
  t.types_.assign(t.tokens_.size(), 1);
  if (const gguf::Value* v = f.find("tokenizer.ggml.token_type")) {
    LOWBIT_CHECK_ARG(v->type == gguf::ValueType::kArray && v->array_size() == t.tokens_.size() && v->arr_i.size() == t.tokens_.size(),
                     "tokenizer: token_type must be an i32 array of %zu entries", t.tokens_.size());
    for (size_t i = 0; i < t.tokens_.size(); ++i) t.types_[i] = static_cast<int32_t>(v->arr_i[i]);
  }
  for (size_t i = 0; i < t.tokens_.size(); ++i) {
    t.token_id_.emplace(t.tokens_[i], static_cast<int32_t>(i));
    // 3 = control, 4 = user defined (llama.cpp's token types): matched as a whole.
    if ((t.types_[i] == 3 || t.types_[i] == 4) && !t.tokens_[i].empty()) t.specials_.push_back(t.tokens_[i]);
  }
  // Longest first, so that a special that is a prefix of another never wins.
  std::sort(t.specials_.begin(), t.specials_.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& m = (*merges)[i];
    if (m.find(' ') == std::string::npos)
      return make_status(StatusCode::kCorruptData, "tokenizer: merge %zu '%s' has no space", i, m.c_str());
    t.merge_rank_.emplace(m, static_cast<int32_t>(i));
  }
  auto get_id = [&](const char* key, int32_t* dst) -> Status {
    if (!f.find(key)) return Status::Ok();
    int64_t v = 0;
    LOWBIT_RETURN_IF_ERROR(f.get_int(key, &v));
    LOWBIT_CHECK_ARG(v >= 0 && v < static_cast<int64_t>(t.tokens_.size()), "tokenizer: %s = %lld out of range", key,
                     static_cast<long long>(v));
    *dst = static_cast<int32_t>(v);
    return Status::Ok();
  };
  LOWBIT_RETURN_IF_ERROR(get_id("tokenizer.ggml.bos_token_id", &t.bos_));
  LOWBIT_RETURN_IF_ERROR(get_id("tokenizer.ggml.eos_token_id", &t.eos_));
  LOWBIT_RETURN_IF_ERROR(get_id("tokenizer.ggml.unknown_token_id", &t.unk_));
  if (const gguf::Value* v = f.find("tokenizer.ggml.add_bos_token")) t.add_bos_ = v->type == gguf::ValueType::kBool && v->i != 0;
  *out = std::move(t);
  return Status::Ok();
}

int32_t Tokenizer::find_token(const std::string& text) const {
  auto it = token_id_.find(text);
  return it == token_id_.end() ? -1 : it->second;
}

void Tokenizer::bpe(const std::string& word, std::vector<int32_t>* out) const {
  const ByteMap& bm = byte_map();
  std::vector<std::string> sym;
  sym.reserve(word.size());
  for (unsigned char c : word) sym.push_back(bm.enc[c]);
  std::string key;
  while (sym.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      key.assign(sym[i]).append(" ").append(sym[i + 1]);
      auto it = merge_rank_.find(key);
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == INT_MAX) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + static_cast<long>(at) + 1);
  }
  for (const std::string& s : sym) {
    auto it = token_id_.find(s);
    if (it != token_id_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Not in the vocabulary (never for a consistent file): fall back to byte tokens.
    std::vector<uint32_t> cps;
    for (const Cp& c : decode_utf8(s)) {
      std::string one;
      append_utf8(c.cp, &one);
      auto jt = token_id_.find(one);
      out->push_back(jt != token_id_.end() ? jt->second : unk_);
    }
  }
}

Status Tokenizer::encode(const std::string& text, bool add_bos, bool parse_special, std::vector<int32_t>* ids) const {
  LOWBIT_CHECK_ARG(ids != nullptr, "Tokenizer::encode: ids is null");
  ids->clear();
  if (add_bos) {
    LOWBIT_CHECK_ARG(bos_ >= 0, "Tokenizer::encode: the model has no BOS token");
    ids->push_back(bos_);
  }
  // Words repeat a lot in running text: memoize each pre-token's BPE result.
  std::unordered_map<std::string, std::vector<int32_t>> cache;
  auto encode_plain = [&](const std::string& piece) {
    for (const std::string& w : pre_tokenize(piece, split_digits_)) {
      auto it = cache.find(w);
      if (it == cache.end()) {
        std::vector<int32_t> v;
        bpe(w, &v);
        it = cache.emplace(w, std::move(v)).first;
      }
      ids->insert(ids->end(), it->second.begin(), it->second.end());
    }
  };
  if (!parse_special || specials_.empty()) {
    encode_plain(text);
    return Status::Ok();
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string::npos;
    const std::string* which = nullptr;
    for (const std::string& s : specials_) {
      size_t p = text.find(s, pos);
      if (p < best) {
        best = p;
        which = &s;
      }
    }
    if (!which) {
      encode_plain(text.substr(pos));
      break;
    }
    if (best > pos) encode_plain(text.substr(pos, best - pos));
    ids->push_back(token_id_.at(*which));
    pos = best + which->size();
  }
  return Status::Ok();
}

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  if (types_[id] == 3 || types_[id] == 4) return tokens_[id];
  const ByteMap& bm = byte_map();
  std::string out;
  const std::string& t = tokens_[id];
  for (const Cp& c : decode_utf8(t)) {
    auto it = bm.dec.find(c.cp);
    if (it != bm.dec.end()) out.push_back(static_cast<char>(it->second));
    else out.append(t, c.off, c.len);
  }
  return out;
}

Status Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special, std::string* text) const {
  LOWBIT_CHECK_ARG(text != nullptr, "Tokenizer::decode: text is null");
  text->clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    LOWBIT_CHECK_ARG(id >= 0 && id < vocab_size(), "Tokenizer::decode: id %d at position %zu out of range [0, %d)", id, i,
                     vocab_size());
    if (skip_special && types_[id] == 3) continue;
    text->append(piece(id));
  }
  return Status::Ok();
}

}  // namespace lowbit::model
