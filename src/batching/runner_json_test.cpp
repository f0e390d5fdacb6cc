// The Runner with GenConfig::json_object on the FakeExecutor, over a toy vocabulary whose tokens
// are pieces of JSON: every generation's text stays a prefix of one JSON object and ends when the
// object is whole, and its tokens are the ones an independent oracle (nlohmann::json's parser
// deciding which tokens keep the text a prefix: json_oracle_test_util.h) lets the toy model's
// rows pick. A generation held to a text pattern (GenConfig::text_pattern) picks among the
// tokens that keep its text a prefix of a match, stops only where it matches, and matches whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "batching/json_oracle_test_util.h"
#include "batching/json_schema_oracle_test_util.h"
#include "batching/json_schema_prefix.h"
#include "batching/runner.h"
#include "batching/runner_test_util.h"
#include "batching/sampler.h"
#include "batching/text_pattern_prefix.h"

namespace cellm::testing {
namespace {

// [kVocab] each token's bytes: structure, strings, numbers, literals, escapes, UTF-8 (whole and
// split), and "" for token 0 (a control token such as EOS: it adds no text). Every prefix of a
// JSON object these tokens can write has a token that continues it (no partial literal), as a
// real vocabulary, holding every byte, has.
const std::vector<std::string>& toy_bytes() {
  static const std::vector<std::string> bytes = {
      "",   "{",    "}",   "\"",    "a",        "b",    ":",    ",",  " ",  "1",    "[",
      "]",  "true", "{\"", "\":",   "\"}",      "ab",   "x",    "-",  ".",  "e",    "0",
      "\n", "null", "\\",  "false", "\xc3\xa9", "\xc3", "\xa9", "}}", "],", "\"a\""};
  return bytes;
}

// The longest run of whitespace bytes between tokens (outside strings) that `piece` ends or
// holds when it follows `text`.
int32_t whitespace_run_reached(const std::string& text, const std::string& piece) {
  const std::string all = text + piece;
  bool in_string = false;
  bool escaped = false;
  int32_t run = 0;
  int32_t most = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const char c = all[i];
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
      continue;
    }
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    run = space ? run + 1 : 0;
    in_string = c == '"';
    if (i >= text.size()) most = std::max(most, run);
  }
  return most;
}

struct Outcome {
  Tokens tokens;
  std::string text;
  FinishReason reason = FinishReason::kFailed;
};

// What a constrained generation must give: at each position the sampler (at `config`'s settings)
// picks among the tokens `allows(text, piece)` lets it take from the toy model's row; it ends once
// `whole(text)` or after max_new_tokens.
template <class Allows, class Whole>
Outcome expected_constrained(Tokens context, const GenConfig& config, Allows allows, Whole whole) {
  Sampler sampler(config.sampling, config.seed, /*masked=*/true);
  Outcome out;
  std::vector<uint8_t> allowed(kVocab);
  for (int32_t n = 0; n < config.max_new_tokens; ++n) {
    for (int32_t t = 0; t < kVocab; ++t) {
      const std::string& piece = toy_bytes()[static_cast<size_t>(t)];
      allowed[static_cast<size_t>(t)] = !piece.empty() && allows(out.text, piece) ? 1 : 0;
    }
    const StatusOr<int32_t> token = sampler.sample(fake_logits(context, kVocab), context, allowed);
    EXPECT_TRUE(token.ok()) << token.status().to_string() << " after " << out.text;
    if (!token.ok()) return out;
    context.push_back(*token);
    out.tokens.push_back(*token);
    out.text += toy_bytes()[static_cast<size_t>(*token)];
    if (whole(out.text)) {
      out.reason = FinishReason::kFormatComplete;
      return out;
    }
  }
  out.reason = FinishReason::kNewTokenLimit;
  return out;
}

// A json_object generation: the oracle's prefixes of one object, whitespace runs bounded.
Outcome expected(Tokens context, const GenConfig& config) {
  return expected_constrained(
      std::move(context), config,
      [](const std::string& text, const std::string& piece) {
        return is_prefix_of_json_object(text + piece) &&
               whitespace_run_reached(text, piece) <= kJsonMaxWhitespaceRun;
      },
      [](const std::string& text) { return is_json_object(text); });
}

RunnerOptions with_bytes() {
  RunnerOptions options;
  options.token_bytes = toy_bytes();
  return options;
}

GenConfig json_config(int32_t max_new_tokens, float temperature, uint64_t seed) {
  GenConfig config;
  config.max_new_tokens = max_new_tokens;
  config.sampling.temperature = temperature;
  config.seed = seed;
  config.json_object = true;
  return config;
}

// The executors' ways of handing rows over: the CPU's (every row returned), and the CUDA
// executor's (greedy tokens, candidates and draws on the device, rows kept and fetched).
std::vector<FakeExecutorConfig> executors() {
  FakeExecutorConfig device;
  device.greedy_tokens = true;
  device.logprobs = true;
  device.candidates = true;
  device.draws_rows = true;
  device.rewrites_rows = true;
  device.fetches_logits = true;
  return {FakeExecutorConfig{}, device};
}

TEST(RunnerJsonTest, EveryGenerationIsTheOracleConstrainedPickAndStopsWhenTheObjectIsWhole) {
  ASSERT_EQ(toy_bytes().size(), static_cast<size_t>(kVocab));
  for (const FakeExecutorConfig& executor : executors()) {
    Rig rig(executor, std::nullopt, with_bytes());
    std::vector<Session> sessions;
    std::vector<GenerationHandle> handles;
    std::vector<std::pair<Tokens, GenConfig>> asked;
    for (int32_t i = 0; i < 12; ++i) {  // greedy and sampled, batched together
      const GenConfig config = json_config(40, i % 3 == 0 ? 0.0f : 0.5f + 0.25f * (i % 4), i);
      asked.emplace_back(ramp(3 + i, i), config);
      sessions.push_back(rig.runner.open_session());
      handles.push_back(sessions.back().generate_async(asked.back().first, config));
    }
    int num_whole = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      handles[i].wait();
      const Outcome want = expected(asked[i].first, asked[i].second);
      EXPECT_EQ(handles[i].tokens(), want.tokens) << "generation " << i;
      EXPECT_EQ(handles[i].finish_reason(), want.reason)
          << "generation " << i << ": " << handles[i].error_message();
      std::string text;
      for (const int32_t t : handles[i].tokens()) text += toy_bytes()[static_cast<size_t>(t)];
      EXPECT_TRUE(is_prefix_of_json_object(text)) << text;
      if (handles[i].finish_reason() == FinishReason::kFormatComplete) {
        EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
        ++num_whole;
      }
    }
    EXPECT_GT(num_whole, 0) << "no generation closed its object: the test shows too little";
    EXPECT_EQ(rig.runner.metrics().finished(FinishReason::kFormatComplete), num_whole);
  }
}

// A schema the toy tokens can satisfy: an integer, a short list of enum values, nothing else.
constexpr const char* kToySchema = R"({"type": "object", "properties": {
    "a": {"type": "integer"},
    "ab": {"type": "array", "items": {"enum": ["x", true, null]}, "maxItems": 2}},
  "required": ["a", "ab"], "additionalProperties": false})";

// A json_schema generation: the tokens a JsonSchemaPrefix of the text so far accepts (the walker's
// own checks are json_schema_test's).
Outcome expected_with_schema(Tokens context, const GenConfig& config) {
  const auto walked = [&](const std::string& text) {
    JsonSchemaPrefix walker(config.json_schema, kJsonMaxWhitespaceRun);
    EXPECT_TRUE(walker.feed(text)) << text;
    return walker;
  };
  return expected_constrained(
      std::move(context), config,
      [&](const std::string& text, const std::string& piece) {
        return walked(text).accepts(piece);
      },
      [&](const std::string& text) { return walked(text).complete(); });
}

TEST(RunnerJsonTest, ASchemaGenerationPicksAmongTheTokensTheSchemaAllowsAndEndsValid) {
  StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(kToySchema);
  ASSERT_TRUE(schema.ok()) << schema.status().to_string();
  const nlohmann::json root = nlohmann::json::parse(kToySchema);
  for (const FakeExecutorConfig& executor : executors()) {
    Rig rig(executor, std::nullopt, with_bytes());
    std::vector<Session> sessions;
    std::vector<GenerationHandle> handles;
    std::vector<std::pair<Tokens, GenConfig>> asked;
    for (int32_t i = 0; i < 12; ++i) {  // greedy and sampled, beside a json_object generation
      GenConfig config = json_config(60, i % 3 == 0 ? 0.0f : 0.5f + 0.25f * (i % 4), i);
      config.json_object = i == 5;
      config.json_schema = i == 5 ? nullptr : *schema;
      asked.emplace_back(ramp(3 + i, i), config);
      sessions.push_back(rig.runner.open_session());
      handles.push_back(sessions.back().generate_async(asked.back().first, config));
    }
    int num_valid = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      handles[i].wait();
      const Outcome want = i == 5 ? expected(asked[i].first, asked[i].second)
                                  : expected_with_schema(asked[i].first, asked[i].second);
      EXPECT_EQ(handles[i].tokens(), want.tokens) << "generation " << i;
      EXPECT_EQ(handles[i].finish_reason(), want.reason)
          << "generation " << i << ": " << handles[i].error_message();
      if (i == 5 || handles[i].finish_reason() != FinishReason::kFormatComplete) continue;
      std::string text;
      for (const int32_t t : handles[i].tokens()) text += toy_bytes()[static_cast<size_t>(t)];
      EXPECT_TRUE(oracle_valid(root, root, nlohmann::json::parse(text))) << text;
      ++num_valid;
    }
    EXPECT_GT(num_valid, 0) << "no generation completed its value: the test shows too little";
  }
}

// A generation held by `walker` (a TextPatternPrefix, or a JsonSchemaPrefix of a value that may
// go on, such as a top-level number) and stopped by config.stop_tokens: the tokens the walker
// accepts after the text so far, and the stop tokens where the text may end already; it ends
// where it must (the walkers' own checks are their tests').
template <class Walker>
Outcome expected_walked(Walker walker, Tokens context, const GenConfig& config) {
  const auto is_stop = [&](int32_t t) {
    return std::find(config.stop_tokens.begin(), config.stop_tokens.end(), t) !=
           config.stop_tokens.end();
  };
  Sampler sampler(config.sampling, config.seed, /*masked=*/true);
  Outcome out;
  std::vector<uint8_t> allowed(kVocab);
  for (int32_t n = 0; n < config.max_new_tokens; ++n) {
    for (int32_t t = 0; t < kVocab; ++t) {
      const std::string& piece = toy_bytes()[static_cast<size_t>(t)];
      allowed[static_cast<size_t>(t)] =
          (!piece.empty() && walker.accepts(piece)) || (is_stop(t) && walker.complete());
    }
    const StatusOr<int32_t> token = sampler.sample(fake_logits(context, kVocab), context, allowed);
    EXPECT_TRUE(token.ok()) << token.status().to_string() << " after " << out.text;
    if (!token.ok()) return out;
    context.push_back(*token);
    out.tokens.push_back(*token);
    if (is_stop(*token)) {
      out.reason = FinishReason::kStopToken;
      return out;
    }
    EXPECT_TRUE(walker.feed(toy_bytes()[static_cast<size_t>(*token)]));
    out.text += toy_bytes()[static_cast<size_t>(*token)];
    if (walker.must_end()) {
      out.reason = FinishReason::kFormatComplete;
      return out;
    }
  }
  out.reason = FinishReason::kNewTokenLimit;
  return out;
}

// A text_pattern generation, stopped by token 0 ("") or token 17 ("x").
Outcome expected_with_pattern(Tokens context, const GenConfig& config) {
  return expected_walked(TextPatternPrefix(config.text_pattern), std::move(context), config);
}

TEST(RunnerJsonTest, ATopLevelNumberGoesOnUntilAStopTokenOrItsLastDigit) {
  // At most three digits: "1" may end (a stop token) or go on; "100" must end.
  StatusOr<std::shared_ptr<const JsonSchema>> schema =
      JsonSchema::compile(R"({"type": "integer", "minimum": -5, "maximum": 999})");
  ASSERT_TRUE(schema.ok()) << schema.status().to_string();
  for (const FakeExecutorConfig& executor : executors()) {
    Rig rig(executor, std::nullopt, with_bytes());
    std::vector<Session> sessions;
    std::vector<GenerationHandle> handles;
    std::vector<std::pair<Tokens, GenConfig>> asked;
    for (int32_t i = 0; i < 10; ++i) {
      GenConfig config = json_config(12, i % 3 == 0 ? 0.0f : 0.7f + 0.2f * (i % 4), i);
      config.json_object = false;
      config.json_schema = *schema;
      config.stop_tokens = {0};
      config.use_default_stop_tokens = false;
      asked.emplace_back(ramp(2 + i, 3 * i), config);
      sessions.push_back(rig.runner.open_session());
      handles.push_back(sessions.back().generate_async(asked.back().first, config));
    }
    std::set<size_t> lengths;  // digits and sign of the numbers written
    for (size_t i = 0; i < handles.size(); ++i) {
      handles[i].wait();
      const Outcome want = expected_walked(JsonSchemaPrefix(*schema, kJsonMaxWhitespaceRun),
                                           asked[i].first, asked[i].second);
      EXPECT_EQ(handles[i].tokens(), want.tokens) << "generation " << i;
      EXPECT_EQ(handles[i].finish_reason(), want.reason)
          << "generation " << i << ": " << handles[i].error_message();
      std::string text;
      for (const int32_t t : handles[i].tokens()) text += toy_bytes()[static_cast<size_t>(t)];
      if (handles[i].finish_reason() == FinishReason::kStopToken ||
          handles[i].finish_reason() == FinishReason::kFormatComplete) {
        const nlohmann::json value = nlohmann::json::parse(text);
        EXPECT_TRUE(value.is_number_integer() && value >= -5 && value <= 999) << text;
        lengths.insert(text.size());
      }
    }
    EXPECT_GT(lengths.size(), 1u) << "every number had one length: the test shows too little";
  }
}

TEST(RunnerJsonTest, APatternGenerationMatchesWholeAndStopsOnlyWhereItMatches) {
  constexpr const char* kPattern = "(ab|a)+x?|true|-?1\\.?0*";
  StatusOr<std::shared_ptr<const StringPattern>> pattern = StringPattern::compile(
      kPattern, 0, StringPattern::kUnbounded, StringPattern::Target::kWholeText);
  ASSERT_TRUE(pattern.ok()) << pattern.status().to_string();
  const std::wregex oracle(utf8_to_wide(kPattern), std::regex::ECMAScript);
  for (const FakeExecutorConfig& executor : executors()) {
    Rig rig(executor, std::nullopt, with_bytes());
    std::vector<Session> sessions;
    std::vector<GenerationHandle> handles;
    std::vector<std::pair<Tokens, GenConfig>> asked;
    for (int32_t i = 0; i < 12; ++i) {  // greedy and sampled, beside a json_object generation
      GenConfig config = json_config(30, i % 3 == 0 ? 0.0f : 0.5f + 0.25f * (i % 4), i);
      config.json_object = i == 5;
      config.text_pattern = i == 5 ? nullptr : *pattern;
      config.stop_tokens = {0, 17};  // "" and "x": a stop token the pattern may also take
      config.use_default_stop_tokens = false;
      asked.emplace_back(ramp(3 + i, i), config);
      sessions.push_back(rig.runner.open_session());
      handles.push_back(sessions.back().generate_async(asked.back().first, config));
    }
    int num_ended = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      handles[i].wait();
      if (i == 5) continue;  // its own test is above; here it only shares the steps
      const Outcome want = expected_with_pattern(asked[i].first, asked[i].second);
      EXPECT_EQ(handles[i].tokens(), want.tokens) << "generation " << i;
      EXPECT_EQ(handles[i].finish_reason(), want.reason)
          << "generation " << i << ": " << handles[i].error_message();
      if (handles[i].finish_reason() != FinishReason::kFormatComplete &&
          handles[i].finish_reason() != FinishReason::kStopToken) {
        continue;
      }
      std::string text;  // without the stop token that ended it
      const Tokens& tokens = handles[i].tokens();
      const size_t kept = tokens.size() - (handles[i].finish_reason() == FinishReason::kStopToken);
      for (size_t k = 0; k < kept; ++k) text += toy_bytes()[static_cast<size_t>(tokens[k])];
      EXPECT_TRUE(std::regex_match(utf8_to_wide(text), oracle)) << text;
      ++num_ended;
    }
    EXPECT_GT(num_ended, 0) << "no generation ended its match: the test shows too little";
  }
}

TEST(RunnerJsonTest, AGenerationWithoutTokenBytesIsRefusedAndOthersRun) {
  Rig rig;  // RunnerOptions without token_bytes
  Session session = rig.runner.open_session();
  GenerationHandle refused = session.generate_async(ramp(4), json_config(8, 0.0f, 0));
  refused.wait();
  EXPECT_EQ(refused.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(refused.error_message().find("a constrained output format needs the bytes"),
            std::string::npos)
      << refused.error_message();
  GenerationHandle plain = session.generate_async(ramp(4), greedy(3));
  plain.wait();
  EXPECT_EQ(plain.tokens(), fake_greedy(ramp(4), 3, kVocab));
}

}  // namespace
}  // namespace cellm::testing
