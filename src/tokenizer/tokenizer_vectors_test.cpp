// llama.cpp's tokenizer vectors (../shared/models/vocab): every case of every vocabulary that has
// a vocab file must give exactly the reference ids (no special tokens added or parsed), and
// decoding must give the text back (exactly for SPM and byte-level BPE).
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"

namespace cellm {
namespace {

using testing::load_tokenizer;
using testing::read_vectors;
using testing::VectorCase;

class TokenizerVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVectorsTest, EveryCaseGivesTheReferenceIdsAndDecodesBack) {
  const std::string name = GetParam();
  std::optional<Tokenizer> tokenizer = load_tokenizer("vocab/ggml-vocab-" + name + ".gguf");
  ASSERT_TRUE(tokenizer.has_value());
  const std::vector<VectorCase> cases = read_vectors(name);
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const VectorCase& c = cases[i];
    StatusOr<std::vector<int32_t>> ids = tokenizer->encode(c.text, EncodeOptions{});
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, c.ids) << name << " case " << i << ": '" << c.text << "'";
    if (tokenizer->kind() == VocabKind::kWpm) continue;  // normalizes; see wpm_test.cpp
    StatusOr<std::string> text = tokenizer->decode(*ids, DecodeOptions{});
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    EXPECT_EQ(*text, c.text) << name << " case " << i << " does not decode back";
  }
}

// gpt-neox and baichuan files predate `tokenizer.ggml.pre` and have no reference ids: they must
// load (BPE falls back to the "default" pre-tokenizer) and give every case's text back.
TEST(TokenizerVectorsTest, VocabulariesWithoutPreLoadAndDecodeBack) {
  const std::vector<VectorCase> cases = read_vectors("gpt-2");  // the same 46 texts
  for (const std::string name : {"gpt-neox", "baichuan"}) {
    std::optional<Tokenizer> tokenizer = load_tokenizer("vocab/ggml-vocab-" + name + ".gguf");
    ASSERT_TRUE(tokenizer.has_value()) << name;
    for (const VectorCase& c : cases) {
      StatusOr<std::vector<int32_t>> ids = tokenizer->encode(c.text, EncodeOptions{});
      ASSERT_TRUE(ids.ok()) << ids.status().to_string();
      EXPECT_EQ(*tokenizer->decode(*ids, DecodeOptions{}), c.text) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabularies, TokenizerVectorsTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "bert-bge",
                                           "deepseek-coder", "deepseek-llm", "falcon", "mpt",
                                           "refact", "starcoder"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace cellm
