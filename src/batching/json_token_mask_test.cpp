// JsonTokenMask against the definition it shortcuts: at states reached by random constrained
// generations over a random vocabulary (every byte a token too, long whitespace runs, UTF-8, "",
// tokens that are prefixes of each other), its mask equals checking every token with accepts(),
// with or without a generation's cache of pattern masks.
#include "batching/json_token_mask.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "batching/json_schema.h"

namespace cellm {
namespace {

std::vector<std::string> random_vocabulary(std::mt19937& rng) {
  static const std::string kAlphabet = "{}[]\":, \n\t0123456789-.eEabnlrstuxyz\\";
  std::vector<std::string> vocab = {""};
  for (int b = 1; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  vocab.push_back("\xc3\xa9");
  vocab.push_back("      ");
  vocab.push_back("{\"name\": \"");
  vocab.push_back("\"name\"");
  vocab.push_back("null");
  vocab.push_back("");
  for (int i = 0; i < 3000; ++i) {
    std::string piece;
    const int length = 1 + static_cast<int>(rng() % 7);
    for (int k = 0; k < length; ++k) piece += kAlphabet[rng() % kAlphabet.size()];
    vocab.push_back(piece);
  }
  return vocab;
}

TEST(JsonTokenMaskTest, TheMaskIsEveryTokenTheWalkerAccepts) {
  const std::vector<std::string> schemas = {
      R"({"type": "object"})",
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
            "n": {"type": "integer", "minimum": -3, "maximum": 250},
            "tags": {"type": "array", "items": {"enum": ["ab", "b", null, 12]}}},
          "required": ["name"], "additionalProperties": false})",
      R"({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"},
            {"type": "object", "additionalProperties": {"type": "boolean"}}]}})",
      R"({"type": "array", "items": {"type": "string", "pattern": "^[a-z]*(é|\\n)?x?$",
            "maxLength": 9}, "minItems": 1})",
      R"({"type": "array", "items": {"type": "string", "pattern": "ab|\\d\\d"}})",
      R"({"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 2})",
      R"({"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"a": {
            "type": "integer", "maximum": 20}}, "additionalProperties": false}, {"type": "object",
            "properties": {"ab": {"type": "null"}, "a": {"type": "string"}}}, {"enum": [1, "x"]},
            {"type": "integer", "minimum": 100}]}})",
      R"({"anyOf": [{"type": "object", "properties": {"s": {"type": "string", "maxLength": 2},
            "x": {"type": "null"}}, "additionalProperties": false}, {"type": "object",
            "properties": {"s": {"type": "string", "maxLength": 5}}, "additionalProperties": false}
            ]})",
  };
  std::mt19937 rng(7);
  const std::vector<std::string> vocab = random_vocabulary(rng);
  const JsonTokenMask mask(vocab);
  int num_states = 0;
  for (const std::string& text : schemas) {
    StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(text);
    ASSERT_TRUE(schema.ok()) << schema.status().to_string();
    for (int generation = 0; generation < 12; ++generation) {
      JsonSchemaPrefix json(*schema, 6);
      JsonTokenMask::PatternMaskCache cache;
      std::string written;
      for (int step = 0; step < 60 && !json.complete(); ++step) {
        std::vector<uint8_t> allowed;
        mask.compute(json, allowed);
        ASSERT_EQ(allowed.size(), vocab.size());
        std::vector<uint8_t> from_cache;  // computed, or copied from an earlier state's
        mask.compute(json, from_cache, &cache);
        ASSERT_EQ(from_cache, allowed) << "the cache's mask after " << written;
        std::vector<int32_t> choices;
        for (size_t t = 0; t < vocab.size(); ++t) {
          const bool expected = !vocab[t].empty() && json.accepts(vocab[t]);
          ASSERT_EQ(allowed[t] != 0, expected) << "token '" << vocab[t] << "' after " << written;
          ASSERT_EQ(mask.allows(json, static_cast<int32_t>(t)), expected);
          if (expected) choices.push_back(static_cast<int32_t>(t));
        }
        ++num_states;
        ASSERT_FALSE(choices.empty()) << "nothing continues " << written;
        const std::string& piece = vocab[static_cast<size_t>(choices[rng() % choices.size()])];
        ASSERT_TRUE(json.feed(piece));
        written += piece;
      }
    }
  }
  EXPECT_GT(num_states, 500);
}

}  // namespace
}  // namespace cellm
