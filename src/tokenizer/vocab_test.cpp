// Vocabulary loading: malformed vocabularies are clear errors at load (built as plain data and as
// GGUF files written in the test), defaults for absent keys, UTF-8 helpers.
#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_gguf.h"

namespace cellm {
namespace {

Vocab small_spm() {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.tokens = {"<unk>", "<s>", "</s>", "a"};
  v.scores = {0, 0, 0, -1};
  v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl,
                   TokenType::kNormal};
  v.special = {.bos = 1, .eos = 2, .unk = 0};
  return v;
}

void expect_error(const Vocab& v, std::string_view fragment) {
  const Status status = validate_vocab(v, "test.gguf");
  ASSERT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("test.gguf"), std::string::npos) << status.message();
  EXPECT_FALSE(Tokenizer::from_vocab(v).ok());
}

TEST(VocabTest, MalformedPlainVocabulariesAreRefusedWithTheProblemNamed) {
  EXPECT_TRUE(validate_vocab(small_spm(), "test.gguf").ok());
  Vocab v = small_spm();
  v.scores.pop_back();
  expect_error(v, "scores has 3 entries for 4 tokens");
  v = small_spm();
  v.token_types.push_back(TokenType::kNormal);
  expect_error(v, "token_type has 5 entries for 4 tokens");
  v = small_spm();
  v.token_types[3] = static_cast<TokenType>(9);
  expect_error(v, "token_type[3] = 9");
  v = small_spm();
  v.special.eos = 4;
  expect_error(v, "eos_token_id = 4 is out of range");
  v = small_spm();
  v.tokens.clear(), v.scores.clear(), v.token_types.clear();
  expect_error(v, "tokens is empty");
  v = small_spm();
  v.add_bos = true;
  v.special.bos = kNoToken;
  expect_error(v, "no BOS id");
  v = small_spm();
  v.tokens[3] = "<0xZZ>";
  v.token_types[3] = TokenType::kByte;
  EXPECT_FALSE(Tokenizer::from_vocab(v).ok());
}

TEST(VocabTest, BpeMergesMustNameTokens) {
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.pre = "gpt-2";
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  EXPECT_TRUE(validate_vocab(v, "test.gguf").ok());
  v.merges = {"a c"};
  expect_error(v, "merges[0] 'a c': 'c' is not a token");
  v.merges = {"b a"};
  expect_error(v, "'ba' is not a token");
  v.merges = {"ab"};
  expect_error(v, "is not 'left right'");
}

// A vocabulary-only GGUF (no tensors) with the given tokenizer keys.
StatusOr<GgufFile> gguf_with(std::vector<std::pair<std::string, GgufValue>> keys,
                             std::vector<uint8_t>* storage) {
  GgufWriter writer;
  for (auto& [key, value] : keys) CELLM_RETURN_IF_ERROR(writer.add_metadata(key, value));
  CELLM_ASSIGN_OR_RETURN(*storage, writer.write_bytes());
  return GgufFile::parse(*storage);
}

GgufValue strings(std::vector<std::string> values) {
  std::vector<GgufValue> elements;
  for (std::string& s : values) elements.push_back(GgufValue::string(std::move(s)));
  return GgufValue::array(GgufValueType::kString, std::move(elements));
}

GgufValue floats(std::vector<float> values) {
  std::vector<GgufValue> elements;
  for (float f : values) elements.push_back(GgufValue::f32(f));
  return GgufValue::array(GgufValueType::kFloat32, std::move(elements));
}

std::string load_error(std::vector<std::pair<std::string, GgufValue>> keys) {
  std::vector<uint8_t> storage;
  StatusOr<GgufFile> file = gguf_with(std::move(keys), &storage);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return "";
  StatusOr<Tokenizer> tokenizer = Tokenizer::from_gguf(*file);
  return tokenizer.ok() ? "" : tokenizer.status().message();
}

TEST(VocabGgufTest, MalformedGgufVocabulariesAreClearErrorsAtLoad) {
  const auto model = [](std::string name) {
    return std::pair<std::string, GgufValue>("tokenizer.ggml.model", GgufValue::string(name));
  };
  const auto tokens = std::pair<std::string, GgufValue>("tokenizer.ggml.tokens",
                                                        strings({"<unk>", "<s>", "</s>", "a"}));
  EXPECT_NE(load_error({model("gpt2"), tokens}).find("needs tokenizer.ggml.merges"),
            std::string::npos);
  EXPECT_NE(load_error({model("llama")}).find("tokenizer.ggml.tokens"), std::string::npos);
  EXPECT_NE(load_error({tokens}).find("tokenizer.ggml.model"), std::string::npos);
  EXPECT_NE(load_error({model("rwkv"), tokens}).find("'rwkv' is not supported"), std::string::npos);
  EXPECT_NE(load_error({model("llama"), tokens, {"tokenizer.ggml.scores", floats({0, 0})}})
                .find("scores has 2 entries for 4 tokens"),
            std::string::npos);
  EXPECT_NE(load_error({model("llama"), tokens, {"tokenizer.ggml.eos_token_id", GgufValue::u32(7)}})
                .find("eos_token_id' = 7"),
            std::string::npos);
  EXPECT_NE(load_error({model("gpt2"), tokens, {"tokenizer.ggml.merges", strings({"a x"})}})
                .find("'x' is not a token"),
            std::string::npos);
  EXPECT_NE(load_error({model("gpt2"),
                        tokens,
                        {"tokenizer.ggml.merges", strings({})},
                        {"tokenizer.ggml.pre", GgufValue::string("klingon")}})
                .find("unknown tokenizer.ggml.pre 'klingon'"),
            std::string::npos);
}

TEST(VocabGgufTest, AbsentKeysTakeLlamaCppDefaults) {
  std::vector<uint8_t> storage;
  StatusOr<GgufFile> file =
      gguf_with({{"tokenizer.ggml.model", GgufValue::string("llama")},
                 {"tokenizer.ggml.tokens", strings({"<unk>", "<s>", "</s>", "a"})},
                 {"tokenizer.ggml.padding_token_id", GgufValue::u32(0xFFFFFFFFu)}},
                &storage);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  StatusOr<Vocab> vocab = vocab_from_gguf(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.status().to_string();
  EXPECT_EQ(vocab->special.bos, 1);
  EXPECT_EQ(vocab->special.eos, 2);
  EXPECT_EQ(vocab->special.unk, 0);
  EXPECT_EQ(vocab->special.pad, kNoToken);  // 0xFFFFFFFF: none
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_eos);
  EXPECT_TRUE(vocab->add_space_prefix);
  // A default that does not fit a tiny vocabulary is dropped, not an error.
  StatusOr<GgufFile> tiny = gguf_with({{"tokenizer.ggml.model", GgufValue::string("llama")},
                                       {"tokenizer.ggml.tokens", strings({"<unk>", "<s>"})},
                                       {"tokenizer.ggml.add_bos_token", GgufValue::boolean(false)}},
                                      &storage);
  ASSERT_TRUE(tiny.ok());
  StatusOr<Vocab> tiny_vocab = vocab_from_gguf(*tiny);
  ASSERT_TRUE(tiny_vocab.ok()) << tiny_vocab.status().to_string();
  EXPECT_EQ(tiny_vocab->special.eos, kNoToken);
  EXPECT_FALSE(tiny_vocab->add_bos);
}

TEST(Utf8Test, SanitizeReplacesEveryBadByteAndKeepsValidText) {
  using tokenizer_internal::sanitize_utf8;
  EXPECT_EQ(sanitize_utf8("a\xC3\xA9z"), "a\xC3\xA9z");
  EXPECT_EQ(sanitize_utf8("\xFF"
                          "a"),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(sanitize_utf8("\xE2\x96"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // cut short
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80").size(), 12u);  // above U+10FFFF
  EXPECT_TRUE(tokenizer_internal::is_valid_utf8("\xF0\x9F\xA6\x99"));
}

}  // namespace
}  // namespace cellm
