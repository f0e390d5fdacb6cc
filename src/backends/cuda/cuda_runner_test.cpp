// End to end through the Runner on the CUDA executor (stories260K): prefix reuse keeps the
// reference tokens, log-probabilities are the reference logits' log-softmax — summarized on
// the device for greedy rows, from the row for sampled ones — and JSON-schema-constrained
// generations (unions too; their rows kept on the device and fetched), text patterns and
// min_new_tokens' banned stop tokens pick what the CPU executor's do.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"
#include "backends/cuda/cuda_stories_fixture.h"
#include "batching/json_schema_oracle_test_util.h"
#include "batching/runner.h"

namespace cellm {
namespace {

using testing::Tokens;

class CudaRunnerTest : public testing::StoriesReferenceTest {
 protected:
  // A generation's tokens and how it ended.
  struct Outcome {
    Tokens tokens;
    FinishReason reason;
  };
  // Five generations of the reference prompts through a Runner with `options` — two greedy,
  // three sampled, `constrain` applied to the first four (the fifth runs beside them free) — on a
  // CUDA executor, then on a CPU executor of the same plan: {on CUDA, on the CPU}.
  std::pair<std::vector<Outcome>, std::vector<Outcome>> run_on_cuda_and_cpu(
      const RunnerOptions& options, int32_t max_new_tokens,
      const std::function<void(GenConfig&)>& constrain) {
    const ProgramSpec spec = testing::with_plan(model_->spec(), 64, 9, {1, 2, 4, 8});
    const auto run = [&](Executor& executor) {
      Runner runner(executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(64)), options);
      std::vector<Session> sessions;
      std::vector<GenerationHandle> handles;
      for (int i = 0; i < 5; ++i) {
        GenConfig config;
        config.max_new_tokens = max_new_tokens;
        config.sampling.temperature = i < 2 ? 0.0f : 0.8f;
        config.seed = static_cast<uint64_t>(i);
        if (i < 4) constrain(config);
        sessions.push_back(runner.open_session());
        handles.push_back(sessions.back().generate_async(reference_prompt(i % 3), config));
      }
      std::vector<Outcome> outcomes;
      for (GenerationHandle& handle : handles) {
        handle.wait();
        outcomes.push_back({handle.tokens(), handle.finish_reason()});
      }
      return outcomes;
    };
    auto cuda = testing::make_cuda(*model_, spec);
    EXPECT_NE(cuda, nullptr);
    if (cuda == nullptr) return {};
    std::vector<Outcome> on_cuda = run(*cuda);
    cuda.reset();
    auto cpu = testing::make_cpu(*model_, spec);
    return {std::move(on_cuda), run(*cpu)};
  }

  // run_on_cuda_and_cpu held to `schema_text` (over toy token bytes): CUDA picks what the CPU
  // executor picks, and every constrained generation that completes its value is valid.
  void expect_schema_generations_match(const char* schema_text, int32_t max_new_tokens,
                                       const char* label);
};

// Prefix reuse through the Runner (RunnerOptions::prefix_reuse): sessions continuing another
// session's text from its cells — some of them written by decode steps — still generate the
// reference tokens, from an open session and from a closed one the engine retained.
TEST_F(CudaRunnerTest, PrefixReuseThroughTheRunnerKeepsTheReferenceTokens) {
  const ProgramSpec spec = testing::with_plan(model_->spec(), 64, 9, {1, 2, 4, 8});
  auto executor = testing::make_cuda(*model_, spec);
  ASSERT_NE(executor, nullptr);
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(64)));
  const size_t c = 3;  // the longest reference prompt (11 tokens)
  const auto greedy = [](int32_t n) {
    GenConfig config;
    config.max_new_tokens = n;
    return config;
  };
  const auto tail = [&](size_t from, size_t count) {
    const Tokens all = reference_tokens(c, from + count);
    return Tokens(all.begin() + static_cast<ptrdiff_t>(from), all.end());
  };
  Session a = runner.open_session();
  GenerationHandle first = a.generate_async(reference_prompt(c), greedy(40));
  first.wait();
  EXPECT_EQ(first.tokens(), reference_tokens(c, 40));
  Session b = runner.open_session();  // from the open session's cells
  GenerationHandle second = b.generate_async(sequence(c, 20), greedy(16));
  second.wait();
  EXPECT_EQ(second.tokens(), tail(20, 16));
  EXPECT_EQ(second.metrics().num_reused_tokens, static_cast<int32_t>(sequence(c, 20).size()) - 1);
  a.close();
  Session d = runner.open_session();  // from the closed one, retained
  GenerationHandle third = d.generate_async(sequence(c, 30), greedy(16));
  third.wait();
  EXPECT_EQ(third.tokens(), tail(30, 16));
  EXPECT_EQ(third.metrics().num_reused_tokens, static_cast<int32_t>(sequence(c, 30).size()) - 1);
  EXPECT_EQ(runner.metrics().num_prefix_hits, 2);
}

// Log-probabilities through the Runner on CUDA: the device computes each row's argmax and
// summarizes the rows that ask (kernels/row_logprobs.cuh), so greedy generations asking for them
// copy no rows to the host; they are the log-softmax of the reference logits, for two sessions
// batched together; prompt log-probabilities (every prompt position's row kept and summarized)
// equal them too; and a sampled generation (its rows on the host for the sampler) takes its
// token's logit from the row and the rest from the summary, consistently.
TEST_F(CudaRunnerTest, LogprobsThroughTheRunnerAreTheLogSoftmaxOfTheReferenceLogits) {
  const ProgramSpec spec = testing::with_plan(model_->spec(), 64, 9, {1, 2, 4, 8});
  auto executor = testing::make_cuda(*model_, spec);
  ASSERT_NE(executor, nullptr);
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(64)));
  constexpr int32_t kTokens = 24;
  GenConfig config;
  config.max_new_tokens = kTokens;
  config.sampling.logprobs = 2;
  std::vector<Session> sessions;
  std::vector<std::vector<TokenLogprobs>> got(2);
  std::vector<GenerationHandle> handles;
  for (size_t c = 0; c < 2; ++c) {
    sessions.push_back(runner.open_session());
    handles.push_back(sessions.back().generate_async(
        reference_prompt(c), config, [&got, c](const GenerationUpdate& update) {
          got[c].insert(got[c].end(), update.logprobs.begin(), update.logprobs.end());
        }));
  }
  double worst = 0.0;
  for (size_t c = 0; c < 2; ++c) {
    handles[c].wait();
    ASSERT_EQ(handles[c].tokens(), reference_tokens(c, kTokens));
    ASSERT_EQ(got[c].size(), static_cast<size_t>(kTokens));
    const std::string path =
        testing::test_model_path("reference/stories260K-logits-" + std::to_string(c) + ".f32");
    std::ifstream in(path, std::ios::binary);
    std::vector<float> logits(static_cast<size_t>(kTokens) * vocab_);
    in.read(reinterpret_cast<char*>(logits.data()),
            static_cast<std::streamsize>(logits.size() * sizeof(float)));
    ASSERT_TRUE(in) << "cannot read " << path;
    for (int32_t i = 0; i < kTokens; ++i) {
      const float* row = logits.data() + static_cast<size_t>(i) * vocab_;
      const double top = *std::max_element(row, row + vocab_);
      double sum = 0.0;
      for (int32_t v = 0; v < vocab_; ++v) sum += std::exp(row[v] - top);
      const auto logprob = [&](int32_t t) { return row[t] - top - std::log(sum); };
      const TokenLogprobs& entry = got[c][static_cast<size_t>(i)];
      EXPECT_EQ(entry.token, handles[c].tokens()[static_cast<size_t>(i)]);
      worst = std::max(worst, std::fabs(entry.logprob - logprob(entry.token)));
      ASSERT_EQ(entry.top.size(), 2u);
      EXPECT_EQ(entry.top[0].first, entry.token) << "greedy: the sampled token is the best";
      for (const auto& [id, value] : entry.top) {
        worst = std::max(worst, std::fabs(value - logprob(id)));
      }
    }
  }
  std::printf("logprobs vs the reference's log-softmax: worst diff %.3g\n", worst);
  EXPECT_LE(worst, 1e-3);

  // Prompt log-probabilities: case 0's prompt and its first 8 generated tokens as the prompt, one
  // input per position (each keeps its row), the narrow ones run as decodes (m = 9).
  Tokens prompt = sequence(0, 8);
  const size_t num_prompt = reference_prompt(0).size();
  GenConfig prompt_config;
  prompt_config.max_new_tokens = 1;
  prompt_config.sampling.prompt_logprobs = 1;
  std::vector<TokenLogprobs> prompt_entries;
  Session session = runner.open_session();
  GenerationHandle handle = session.generate_async(
      prompt, prompt_config, [&prompt_entries](const GenerationUpdate& update) {
        prompt_entries.insert(prompt_entries.end(), update.prompt_logprobs.begin(),
                              update.prompt_logprobs.end());
      });
  handle.wait();
  ASSERT_EQ(handle.tokens(), Tokens{reference_tokens(0, 9).back()});
  ASSERT_EQ(prompt_entries.size(), prompt.size() - 1) << "every prompt token after position 0";
  std::ifstream in(testing::test_model_path("reference/stories260K-logits-0.f32"),
                   std::ios::binary);
  std::vector<float> rows(8 * static_cast<size_t>(vocab_));
  in.read(reinterpret_cast<char*>(rows.data()),
          static_cast<std::streamsize>(rows.size() * sizeof(float)));
  ASSERT_TRUE(in);
  double worst_prompt = 0.0;
  for (size_t g = 0; g < 8; ++g) {
    const float* row = rows.data() + g * static_cast<size_t>(vocab_);
    const double top = *std::max_element(row, row + vocab_);
    double sum = 0.0;
    for (int32_t v = 0; v < vocab_; ++v) sum += std::exp(row[v] - top);
    const TokenLogprobs& entry = prompt_entries[num_prompt - 1 + g];
    EXPECT_EQ(entry.token, prompt[num_prompt + g]);
    worst_prompt =
        std::max(worst_prompt, std::fabs(entry.logprob - (row[entry.token] - top - std::log(sum))));
  }
  std::printf("prompt logprobs vs the reference's log-softmax: worst diff %.3g\n", worst_prompt);
  EXPECT_LE(worst_prompt, 1e-3);

  // Sampled: the token's log-probability is its entry's in the top list whenever it is there
  // (the same logit, from the row or from the summary), the top list is ordered and its mass at
  // most 1.
  GenConfig sampled;
  sampled.max_new_tokens = 32;
  sampled.sampling.temperature = 1.5f;
  sampled.seed = 5;
  sampled.sampling.logprobs = kMaxLogprobs;
  std::vector<TokenLogprobs> sampled_entries;
  Session sampling = runner.open_session();
  GenerationHandle sampled_handle = sampling.generate_async(
      reference_prompt(1), sampled, [&sampled_entries](const GenerationUpdate& update) {
        sampled_entries.insert(sampled_entries.end(), update.logprobs.begin(),
                               update.logprobs.end());
      });
  sampled_handle.wait();
  ASSERT_EQ(sampled_entries.size(), 32u) << sampled_handle.error_message();
  int32_t found_in_top = 0;
  for (const TokenLogprobs& entry : sampled_entries) {
    ASSERT_EQ(entry.top.size(), static_cast<size_t>(kMaxLogprobs));
    double mass = 0.0;
    for (size_t k = 0; k < entry.top.size(); ++k) {
      mass += std::exp(static_cast<double>(entry.top[k].second));
      if (k > 0) {
        EXPECT_LE(entry.top[k].second, entry.top[k - 1].second);
      }
      if (entry.top[k].first == entry.token) {
        EXPECT_EQ(entry.logprob, entry.top[k].second);
        ++found_in_top;
      }
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
    EXPECT_LE(entry.logprob, entry.top[0].second);
    EXPECT_LT(entry.logprob, 0.0f);
  }
  EXPECT_GT(found_in_top, 0) << "no sampled token among the 20 best: the check compared nothing";
}

// Token bytes of a toy mapping (the engine reads only these): id t writes kPieces[t % 24], so the
// model's logits choose among JSON pieces; "" (ids 0, 24, ...) adds no text and is never picked.
RunnerOptions toy_token_bytes(int32_t vocab) {
  static const char* const kPieces[] = {"",  "{",  "}", "\"", "a",   "b",    ":",     ",",
                                        " ", "1",  "[", "]",  "x",   "true", "null",  "0",
                                        "-", "ab", "2", "\n", "{\"", "\":",  "\"a\"", "\"x\""};
  RunnerOptions options;
  for (int32_t t = 0; t < vocab; ++t) options.token_bytes.emplace_back(kPieces[t % 24]);
  return options;
}

void CudaRunnerTest::expect_schema_generations_match(const char* schema_text,
                                                     int32_t max_new_tokens, const char* label) {
  StatusOr<std::shared_ptr<const JsonSchema>> schema = JsonSchema::compile(schema_text);
  ASSERT_TRUE(schema.ok()) << schema.status().to_string();
  const RunnerOptions options = toy_token_bytes(vocab_);
  const auto [on_cuda, on_cpu] = run_on_cuda_and_cpu(
      options, max_new_tokens, [&](GenConfig& config) { config.json_schema = *schema; });
  ASSERT_EQ(on_cuda.size(), on_cpu.size());
  const nlohmann::json root = nlohmann::json::parse(schema_text);
  int num_valid = 0;
  for (size_t i = 0; i < on_cuda.size(); ++i) {
    EXPECT_EQ(on_cuda[i].tokens, on_cpu[i].tokens) << "generation " << i;
    EXPECT_EQ(on_cuda[i].reason, on_cpu[i].reason) << "generation " << i;
    if (i == 4 || on_cuda[i].reason != FinishReason::kFormatComplete) continue;
    std::string text;
    for (const int32_t t : on_cuda[i].tokens) text += options.token_bytes[static_cast<size_t>(t)];
    EXPECT_TRUE(testing::oracle_valid(root, root, nlohmann::json::parse(text))) << text;
    ++num_valid;
  }
  std::printf("%s generations on CUDA: %d of 4 complete and valid\n", label, num_valid);
  EXPECT_GT(num_valid, 0) << "no generation completed its value: the test shows too little";
}

TEST_F(CudaRunnerTest, JsonSchemaGenerationsPickWhatTheCpuExecutorsPick) {
  constexpr const char* kSchema = R"({"type": "object", "properties": {
      "a": {"type": "integer"},
      "ab": {"type": "array", "items": {"enum": ["x", true, null]}, "maxItems": 2}},
    "required": ["a", "ab"], "additionalProperties": false})";
  expect_schema_generations_match(kSchema, 64, "json_schema");
}

TEST_F(CudaRunnerTest, TextPatternGenerationsPickWhatTheCpuExecutorsPick) {
  constexpr const char* kPattern = "(ab|a|x)+( 1| 2)?|true|null|-?[0-2]+";
  StatusOr<std::shared_ptr<const StringPattern>> pattern = StringPattern::compile(
      kPattern, 0, StringPattern::kUnbounded, StringPattern::Target::kWholeText);
  ASSERT_TRUE(pattern.ok()) << pattern.status().to_string();
  const RunnerOptions options = toy_token_bytes(vocab_);
  const auto [on_cuda, on_cpu] = run_on_cuda_and_cpu(options, 24, [&](GenConfig& config) {
    config.text_pattern = *pattern;
    config.stop_tokens = {0};  // "": allowed where the text matches
    config.use_default_stop_tokens = false;
  });
  ASSERT_EQ(on_cuda.size(), on_cpu.size());
  const std::regex oracle(kPattern);
  int num_matched = 0;
  for (size_t i = 0; i < on_cuda.size(); ++i) {
    EXPECT_EQ(on_cuda[i].tokens, on_cpu[i].tokens) << "generation " << i;
    EXPECT_EQ(on_cuda[i].reason, on_cpu[i].reason) << "generation " << i;
    if (i == 4 || on_cuda[i].reason == FinishReason::kNewTokenLimit) continue;
    std::string text;  // without the stop token
    for (const int32_t t : on_cuda[i].tokens) text += options.token_bytes[static_cast<size_t>(t)];
    EXPECT_TRUE(std::regex_match(text, oracle)) << text;
    ++num_matched;
  }
  std::printf("text_pattern generations on CUDA: %d of 4 ended in a whole match\n", num_matched);
  EXPECT_GT(num_matched, 0) << "no generation ended its match: the test shows too little";
}

// A union of objects alike (walked as alternatives) and a oneOf told apart by a constant: the
// CUDA executor's rows give the same picks as the CPU executor's.
TEST_F(CudaRunnerTest, UnionSchemaGenerationsPickWhatTheCpuExecutorsPick) {
  constexpr const char* kSchema = R"({"anyOf": [
      {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"const": "x"}},
       "required": ["a"], "additionalProperties": false},
      {"type": "object", "properties": {"a": {"type": "array", "maxItems": 2}, "ab": {"const": true}},
       "required": ["a", "ab"], "additionalProperties": false},
      {"oneOf": [{"type": "array", "prefixItems": [{"const": 1}], "minItems": 1, "maxItems": 3},
                 {"type": "null"}]}]})";
  expect_schema_generations_match(kSchema, 48, "union schema");
}

// min_new_tokens: the stop token is banned by a rewrite of the first rows (applied on the device
// for listed rows) and allowed after; CUDA picks what the CPU executor picks, greedy and sampled.
TEST_F(CudaRunnerTest, MinNewTokensGenerationsPickWhatTheCpuExecutorsPick) {
  const int32_t stop = reference_tokens(0, 3)[2];  // greedy prompt 0 reaches it third
  const auto [on_cuda, on_cpu] = run_on_cuda_and_cpu({}, 24, [&](GenConfig& config) {
    config.stop_tokens = {stop};
    config.min_new_tokens = 6;
  });
  ASSERT_EQ(on_cuda.size(), on_cpu.size());
  for (size_t i = 0; i < on_cuda.size(); ++i) {
    EXPECT_EQ(on_cuda[i].tokens, on_cpu[i].tokens) << "generation " << i;
    EXPECT_EQ(on_cuda[i].reason, on_cpu[i].reason) << "generation " << i;
    if (i == 4) continue;
    ASSERT_GE(on_cuda[i].tokens.size(), 6u) << "generation " << i;
    for (size_t k = 0; k < 6; ++k) EXPECT_NE(on_cuda[i].tokens[k], stop) << i << ", " << k;
  }
  // Greedy prompt 0 follows the reference until the banned token, where the reference had it.
  EXPECT_EQ(Tokens(on_cuda[0].tokens.begin(), on_cuda[0].tokens.begin() + 2),
            Tokens(reference_tokens(0, 2)));
}

}  // namespace
}  // namespace cellm
