// tokenizer.json → GGUF tokenizer keys (src/program/hf_tokenizer.h), checked through the engine's
// own tokenizer against llama.cpp's tokenizer vectors: vocabularies from ../shared/models/vocab
// are written as Hugging Face tokenizer.json files (SentencePiece-style BPE for llama-spm,
// byte-level BPE with each model's pre-tokenizer for gpt-2 and starcoder), converted, and must
// give exactly the reference ids; stories260K's exported checkpoint keeps its vocabulary, special
// tokens and chat template.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "export_hf_writer.h"
#include "gguf/gguf_writer.h"
#include "program/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_util.h"

namespace cellm {
namespace {

using ::testing::HasSubstr;

GgufFile open_model(const std::string& relative) {
  StatusOr<GgufFile> file = GgufFile::open(testing::test_model_path(relative));
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  return std::move(file).value();
}

// A byte-level BPE tokenizer.json of a GGUF gpt2 vocabulary with the given pre-tokenizer.
Json bpe_tokenizer_json(const GgufFile& vocab, const Json& pre_tokenizer) {
  const std::vector<std::string> tokens = *vocab.get_string_array("tokenizer.ggml.tokens");
  const std::vector<int32_t> types = *vocab.get_i32_array("tokenizer.ggml.token_type");
  Json table = Json::object();
  Json added = Json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 3 || types[i] == 4) {
      added.push_back({{"id", i}, {"content", tokens[i]}, {"special", types[i] == 3}});
    } else {
      table[tokens[i]] = i;
    }
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"model",
           {{"type", "BPE"},
            {"byte_fallback", false},
            {"vocab", table},
            {"merges", *vocab.get_string_array("tokenizer.ggml.merges")}}}};
}

// Converts `tokenizer` (written into a fresh folder) and builds the engine's Tokenizer from it.
StatusOr<Tokenizer> convert(const std::string& name, const Json& tokenizer, int32_t vocab_size,
                            GgufKeys* keys_out = nullptr) {
  const std::string dir = et::fresh_dir("tokenizer_" + name);
  EXPECT_TRUE(st::write_text(dir + "/tokenizer.json", tokenizer.dump()));
  HfConfig config;
  config.vocab_size = vocab_size;
  CELLM_ASSIGN_OR_RETURN(GgufKeys keys, tokenizer_keys_from_hf(dir, config));
  GgufWriter writer;
  for (const auto& [key, value] : keys) CELLM_RETURN_IF_ERROR(writer.add_metadata(key, value));
  CELLM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, writer.write_bytes());
  CELLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::parse(bytes));
  if (keys_out != nullptr) *keys_out = keys;
  return Tokenizer::from_gguf(file);  // copies what it needs from the bytes
}

std::string key_string(const GgufKeys& keys, const std::string& key) {
  for (const auto& [k, v] : keys) {
    if (k == key && v.as_string() != nullptr) return *v.as_string();
  }
  return "";
}

void expect_reference_ids(const Tokenizer& tokenizer, const std::string& vocab) {
  const std::vector<testing::VectorCase> cases = testing::read_vectors(vocab);
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    StatusOr<std::vector<int32_t>> ids = tokenizer.encode(cases[i].text, EncodeOptions{});
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, cases[i].ids) << vocab << " case " << i << ": '" << cases[i].text << "'";
  }
}

TEST(ExportTokenizerTest, SentencePieceBpeConvertsToTheReferenceIds) {
  const GgufFile vocab = open_model("vocab/ggml-vocab-llama-spm.gguf");
  GgufKeys keys;
  StatusOr<Tokenizer> tokenizer = convert("llama_spm", et::spm_tokenizer_json(vocab), 32000, &keys);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  EXPECT_EQ(tokenizer->kind(), VocabKind::kSpm);
  EXPECT_EQ(key_string(keys, "tokenizer.ggml.model"), "llama");
  expect_reference_ids(*tokenizer, "llama-spm");
}

TEST(ExportTokenizerTest, ByteLevelBpeNamesItsPreTokenizerAndConvertsToTheReferenceIds) {
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  struct Case {
    std::string vocab;
    Json pre_tokenizer;
    std::string expected_pre;
  };
  const std::vector<Case> cases = {
      {"gpt-2", byte_level, "gpt-2"},
      {"starcoder",
       {{"type", "Sequence"},
        {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}},
       "starcoder"},
  };
  for (const Case& c : cases) {
    const GgufFile vocab = open_model("vocab/ggml-vocab-" + c.vocab + ".gguf");
    const int32_t size =
        static_cast<int32_t>(vocab.get_string_array("tokenizer.ggml.tokens")->size());
    GgufKeys keys;
    StatusOr<Tokenizer> tokenizer =
        convert(c.vocab, bpe_tokenizer_json(vocab, c.pre_tokenizer), size, &keys);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    EXPECT_EQ(tokenizer->kind(), VocabKind::kBpe);
    EXPECT_EQ(key_string(keys, "tokenizer.ggml.pre"), c.expected_pre);
    expect_reference_ids(*tokenizer, c.vocab);
  }
}

TEST(ExportTokenizerTest, MissingIdsArePaddedUpToTheModelVocabulary) {
  const GgufFile vocab = open_model("vocab/ggml-vocab-gpt-2.gguf");
  const int32_t size =
      static_cast<int32_t>(vocab.get_string_array("tokenizer.ggml.tokens")->size());
  StatusOr<Tokenizer> tokenizer =
      convert("padded", bpe_tokenizer_json(vocab, {{"type", "ByteLevel"}}), size + 3);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  EXPECT_EQ(tokenizer->vocab_size(), size + 3);
  EXPECT_EQ(tokenizer->token_text(size + 1), "[PAD" + std::to_string(size + 1) + "]");
  EXPECT_EQ(tokenizer->vocab().type(size + 1), TokenType::kUserDefined);
  // More tokens than the model has rows is an error naming the file.
  EXPECT_THAT(convert("too_many", bpe_tokenizer_json(vocab, {{"type", "ByteLevel"}}), 1000)
                  .status()
                  .message(),
              HasSubstr("is past config.json's vocab_size 1000"));
}

// A multimodal checkpoint's processor keeps the template in chat_template.json (Gemma 3 4B and
// up); chat_template.jinja wins over it; a malformed one is refused by name.
TEST(ExportTokenizerTest, AProcessorsChatTemplateJsonGivesTheTemplate) {
  const GgufFile vocab = open_model("vocab/ggml-vocab-gpt-2.gguf");
  const std::string dir = et::fresh_dir("tokenizer_template_json");
  ASSERT_TRUE(st::write_text(dir + "/tokenizer.json",
                             bpe_tokenizer_json(vocab, {{"type", "ByteLevel"}}).dump()));
  HfConfig config;
  config.vocab_size = 50257;
  const std::string processor = "{{ bos_token }}<start_of_turn>user";
  ASSERT_TRUE(
      st::write_text(dir + "/chat_template.json", Json{{"chat_template", processor}}.dump()));
  StatusOr<GgufKeys> keys = tokenizer_keys_from_hf(dir, config);
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(key_string(*keys, "tokenizer.chat_template"), processor);

  ASSERT_TRUE(st::write_text(dir + "/chat_template.jinja", "{{ messages }}"));
  keys = tokenizer_keys_from_hf(dir, config);
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(key_string(*keys, "tokenizer.chat_template"), "{{ messages }}");

  std::filesystem::remove(dir + "/chat_template.jinja");
  ASSERT_TRUE(st::write_text(dir + "/chat_template.json", Json{{"chat_template", 7}}.dump()));
  const Status status = tokenizer_keys_from_hf(dir, config).status();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("chat_template.json: key 'chat_template'"));
}

TEST(ExportTokenizerTest, UnknownPreTokenizerIsAnErrorListingItsPatterns) {
  const GgufFile vocab = open_model("vocab/ggml-vocab-gpt-2.gguf");
  const Json pre = {{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "Split"}, {"pattern", {{"Regex", "[a-z]+"}}}},
                      {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  const Status status = convert("unknown_pre", bpe_tokenizer_json(vocab, pre), 50257).status();
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(),
              HasSubstr("tokenizer.json: the pre-tokenizer's regexes match none"));
  EXPECT_THAT(status.message(), HasSubstr("[a-z]+"));
}

TEST(ExportTokenizerTest, ExportedCheckpointKeepsTheVocabularySpecialTokensAndChatTemplate) {
  const GgufFile stories = open_model("stories260K.gguf");
  const std::string dir = et::fresh_dir("tokenizer_checkpoint");
  et::write_hf_checkpoint(stories, dir, {.dtype = "F32", .num_shards = 1});
  ExportOptions options;
  options.source = ExportSource::kCheckpoint;
  options.input = dir;
  options.output = dir + "/program.gguf";
  et::export_ok(options);
  const Program program = et::load_ok(options.output);
  const Tokenizer& exported = program.tokenizer();
  StatusOr<Tokenizer> original = Tokenizer::from_gguf(stories);
  ASSERT_TRUE(original.ok());
  ASSERT_EQ(exported.vocab_size(), 512);
  for (int32_t id = 0; id < 512; ++id) {
    EXPECT_EQ(exported.token_text(id), original->token_text(id)) << id;
    EXPECT_EQ(exported.vocab().type(id), original->vocab().type(id)) << id;
  }
  EXPECT_EQ(exported.bos_id(), 1);
  EXPECT_EQ(exported.eos_id(), 2);
  EXPECT_EQ(exported.vocab().special.unk, 0);
  EXPECT_TRUE(exported.vocab().add_bos);
  EXPECT_FALSE(exported.vocab().add_eos);
  EXPECT_TRUE(exported.vocab().add_space_prefix);
  EXPECT_EQ(exported.vocab().chat_template, et::kChatTemplate);
  EXPECT_EQ(*program.file().get_string("tokenizer.chat_template"), et::kChatTemplate);

  // The reference prompts and llama-spm's test texts encode as stories260K.gguf's own tokenizer
  // encodes them.
  std::ifstream in(testing::test_model_path("reference/stories260K-greedy.json"));
  const Json reference = Json::parse(in);
  for (const auto& c : reference.at("cases")) {
    StatusOr<std::vector<int32_t>> ids =
        exported.encode(c.at("prompt").get<std::string>(), {.add_special = true});
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, c.at("prompt_tokens").get<std::vector<int32_t>>());
  }
  for (const testing::VectorCase& c : testing::read_vectors("llama-spm")) {
    EXPECT_EQ(*exported.encode(c.text, {}), *original->encode(c.text, {})) << c.text;
  }
}

}  // namespace
}  // namespace cellm
