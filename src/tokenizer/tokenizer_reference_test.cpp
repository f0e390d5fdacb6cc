// The prompts of ../shared/models/reference (llama.cpp's greedy runs of stories260K and
// llama-2-tiny-random) encode to the reference prompt_tokens: BOS added, special text not
// parsed, SPM space prefix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_test_util.h"

namespace cellm {
namespace {

void check_reference(const std::string& model, const std::string& reference) {
  std::optional<Tokenizer> tokenizer = testing::load_tokenizer(model);
  ASSERT_TRUE(tokenizer.has_value());
  const nlohmann::json json = nlohmann::json::parse(
      testing::read_whole_file(testing::test_model_path("reference/" + reference)));
  ASSERT_FALSE(json["cases"].empty());
  for (const auto& c : json["cases"]) {
    const std::string prompt = c["prompt"];
    const std::vector<int32_t> expected = c["prompt_tokens"];
    StatusOr<std::vector<int32_t>> ids =
        tokenizer->encode(prompt, EncodeOptions{.add_special = true, .parse_special = false});
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, expected) << model << ": '" << prompt << "'";
  }
}

TEST(TokenizerReferenceTest, Stories260kPromptsMatchLlamaCpp) {
  check_reference("stories260K.gguf", "stories260K-greedy.json");
}

TEST(TokenizerReferenceTest, Llama2TinyRandomPromptsMatchLlamaCpp) {
  check_reference("llama-2-tiny-random.gguf", "llama-2-tiny-random-greedy.json");
}

}  // namespace
}  // namespace cellm
