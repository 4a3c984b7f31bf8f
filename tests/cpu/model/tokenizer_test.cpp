// Tokenizer: pre-tokenizer splits (synthetic), and on the real SmolLM2 vocabulary known ids
// and decode(encode(s)) == s on WikiText.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lowbit/model/tokenizer.h"
#include "tests/cpu/model/model_test_util.h"

namespace lowbit::model {
namespace {

TEST(PreTokenizer, Gpt2Rules) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Tokenizer::pre_tokenize("Hello world", false), (V{"Hello", " world"}));
  EXPECT_EQ(Tokenizer::pre_tokenize("it's they're", false), (V{"it", "'s", " they", "'re"}));
  // \s+(?!\S): of three spaces before a word, two stand alone and one prefixes the word.
  EXPECT_EQ(Tokenizer::pre_tokenize("a   b", false), (V{"a", "  ", " b"}));
  EXPECT_EQ(Tokenizer::pre_tokenize("x\n\ny ", false), (V{"x", "\n", "\n", "y", " "}));
  EXPECT_EQ(Tokenizer::pre_tokenize("ab, cd!!", false), (V{"ab", ",", " cd", "!!"}));
  EXPECT_EQ(Tokenizer::pre_tokenize("naïve café", false), (V{"naïve", " café"}));
  EXPECT_EQ(Tokenizer::pre_tokenize("x 123", false), (V{"x", " 123"}));
  // smollm: digits isolated first.
  EXPECT_EQ(Tokenizer::pre_tokenize("x 123", true), (V{"x", " ", "1", "2", "3"}));
  // Invalid UTF-8 bytes survive as their own pieces.
  std::string bad = "a\xff" "b";
  std::string joined;
  for (auto& p : Tokenizer::pre_tokenize(bad, true)) joined += p;
  EXPECT_EQ(joined, bad);
}

class SmolTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path = testutil::model_path();
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "model file absent: " << path;
    gguf::File f;
    Status st = gguf::File::open(path, &f);
    ASSERT_TRUE(st.ok()) << st.to_string();
    st = Tokenizer::from_gguf(f, &tok_);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  std::vector<int32_t> enc(const std::string& s, bool special = false) {
    std::vector<int32_t> ids;
    Status st = tok_.encode(s, false, special, &ids);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return ids;
  }
  Tokenizer tok_;
};

// Expected ids from the Hugging Face `tokenizers` package (0.23) with a BPE built from this
// GGUF's tokens and merges and SmolLM2's pre-tokenizer (Digits(individual_digits=True) +
// ByteLevel(add_prefix_space=False)): scripts/reference/hf_tokenizer_from_gguf.py MODEL "..."
TEST_F(SmolTokenizer, KnownIds) {
  EXPECT_EQ(tok_.pre_type(), "smollm");
  EXPECT_EQ(tok_.vocab_size(), 49152);
  EXPECT_EQ(tok_.bos_id(), 1);
  EXPECT_EQ(tok_.eos_id(), 2);
  EXPECT_EQ(enc("Hello world"), (std::vector<int32_t>{19556, 905}));
  EXPECT_EQ(enc(" = Robert Boulter = \\n"), (std::vector<int32_t>{446, 6356, 389, 9226, 352, 446, 3814, 94}));
  EXPECT_EQ(enc("In 1999, it's 3.14 km²  —  naïve café"),
            (std::vector<int32_t>{788, 216, 33, 41, 41, 41, 28, 357, 506, 216, 35, 30, 33, 36, 6381, 19133, 216, 1841, 216,
                                  15486, 46494, 37366}));
  EXPECT_EQ(enc("  multiple   spaces\\n\\n tab\\there"),
            (std::vector<int32_t>{216, 2701, 256, 5600, 76, 94, 76, 94, 10147, 76, 11527}));
}

TEST_F(SmolTokenizer, SpecialTokens) {
  int32_t im_start = tok_.find_token("<|im_start|>");
  ASSERT_GE(im_start, 0);
  auto ids = enc("<|im_start|>user\nHi", true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], im_start);
  auto plain = enc("<|im_start|>", false);
  EXPECT_GT(plain.size(), 1u);  // as text it is several ordinary tokens
  std::string back;
  ASSERT_TRUE(tok_.decode(ids, true, &back).ok());
  EXPECT_EQ(back, "user\nHi");
  EXPECT_FALSE(tok_.decode({-1}, false, &back).ok());
}

TEST_F(SmolTokenizer, RoundTripsWikiText) {
  std::string p = testutil::wiki_path();
  if (!std::filesystem::exists(p)) GTEST_SKIP() << "wiki text absent: " << p;
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str().substr(0, 200000);
  std::vector<int32_t> ids = enc(s);
  EXPECT_GT(ids.size(), s.size() / 8);
  std::string back;
  ASSERT_TRUE(tok_.decode(ids, false, &back).ok());
  EXPECT_TRUE(back == s);
}

}  // namespace
}  // namespace lowbit::model
