// Test helpers of the model suite: a tiny GGUF writer and the model/data locations.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace lowbit::model::testutil {

// Writes GGUF v3 (or `version`) images: metadata first, then tensor infos, then the data
// section aligned to 32 (or general.alignment when a test sets it; data offsets stay
// 32-aligned so a bad alignment value can be tested).
struct GgufWriter {
  uint32_t version = 3;
  std::map<std::string, uint64_t> offset_override;
  std::vector<uint8_t> kv;
  uint64_t n_kv = 0;
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  std::vector<T> tensors;

  template <typename V>
  static void put(std::vector<uint8_t>& b, V v) {
    uint8_t t[sizeof(V)];
    std::memcpy(t, &v, sizeof(V));
    b.insert(b.end(), t, t + sizeof(V));
  }
  static void put_str(std::vector<uint8_t>& b, const std::string& s) {
    put<uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void kv_raw(const std::string& k, uint32_t type, const std::vector<uint8_t>& payload) {
    put_str(kv, k);
    put<uint32_t>(kv, type);
    kv.insert(kv.end(), payload.begin(), payload.end());
    ++n_kv;
  }
  void kv_string(const std::string& k, const std::string& v) {
    std::vector<uint8_t> p;
    put_str(p, v);
    kv_raw(k, 8, p);
  }
  void kv_u32(const std::string& k, uint32_t v) {
    std::vector<uint8_t> p;
    put(p, v);
    kv_raw(k, 4, p);
  }
  void kv_i32(const std::string& k, int32_t v) {
    std::vector<uint8_t> p;
    put(p, v);
    kv_raw(k, 5, p);
  }
  void kv_f32(const std::string& k, float v) {
    std::vector<uint8_t> p;
    put(p, v);
    kv_raw(k, 6, p);
  }
  void kv_string_array(const std::string& k, const std::vector<std::string>& v) {
    std::vector<uint8_t> p;
    put<uint32_t>(p, 8);
    put<uint64_t>(p, v.size());
    for (auto& s : v) put_str(p, s);
    kv_raw(k, 9, p);
  }
  void kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    std::vector<uint8_t> p;
    put<uint32_t>(p, 5);
    put<uint64_t>(p, v.size());
    for (auto x : v) put(p, x);
    kv_raw(k, 9, p);
  }
  void tensor_raw(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> data) {
    tensors.push_back({name, std::move(ne), type, std::move(data)});
  }
  void tensor_f32(const std::string& name, std::vector<uint64_t> ne, const std::vector<float>& v) {
    std::vector<uint8_t> d(v.size() * 4);
    std::memcpy(d.data(), v.data(), d.size());
    tensor_raw(name, std::move(ne), 0, std::move(d));
  }
  std::vector<uint8_t> build() const {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    put(b, version);
    put<uint64_t>(b, tensors.size());
    put<uint64_t>(b, n_kv);
    b.insert(b.end(), kv.begin(), kv.end());
    uint64_t off = 0;
    std::vector<uint64_t> offs;
    for (auto& t : tensors) {
      offs.push_back(off);
      off += (t.data.size() + 31) / 32 * 32;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      auto& t = tensors[i];
      put_str(b, t.name);
      put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
      for (auto n : t.ne) put(b, n);
      put(b, t.type);
      auto it = offset_override.find(t.name);
      put<uint64_t>(b, it != offset_override.end() ? it->second : offs[i]);
    }
    while (b.size() % 32) b.push_back(0);
    for (auto& t : tensors) {
      b.insert(b.end(), t.data.begin(), t.data.end());
      while (b.size() % 32) b.push_back(0);
    }
    return b;
  }
};

inline std::string source_dir() {
  const char* s = std::getenv("LOWBIT_SOURCE_DIR");
  return s ? s : ".";
}
inline std::string model_path() {
  const char* m = std::getenv("LOWBIT_MODEL");
  return m ? m : source_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace lowbit::model::testutil

namespace lowbit::model::testutil {
// WikiText-2 test split: $LOWBIT_DATA_DIR/wikitext-2-raw/wiki.test.raw, else the shared
// folder beside the checkout.
inline std::string wiki_path() {
  const char* d = std::getenv("LOWBIT_DATA_DIR");
  std::string dir = d ? d : source_dir() + "/../shared/data";
  return dir + "/wikitext-2-raw/wiki.test.raw";
}
}  // namespace lowbit::model::testutil
