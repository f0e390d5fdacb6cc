// End to end on stories260K with the CPU executor: sixteen sessions whose prompts run from 0 to
// 300 tokens (after BOS), greedy, started together, each equal to its solo run token for token,
// for several (W, m) and decode widths (the recommended W 512, m 257, widths up to 256 among
// them); and the reference greedy outputs, all six batched.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime_e2e_util.h"

namespace cellm {
namespace {

using testing::ExecutorShape;
using testing::Tokens;

// Prompt lengths after BOS: the extremes 0 and 300 and a spread between.
const std::vector<int32_t> kPromptLengths = {0,   300, 1,   150, 17, 250, 5,   99,
                                             200, 42,  280, 63,  8,  120, 180, 33};
constexpr int32_t kNewTokens = 24;

std::vector<Tokens> prompts() {
  std::mt19937 rng(2024);
  std::vector<Tokens> out;
  for (const int32_t n : kPromptLengths) out.push_back(testing::random_prompt(n, rng));
  return out;
}

class RuntimeBatchingTest : public ::testing::TestWithParam<ExecutorShape> {};

TEST_P(RuntimeBatchingTest, SixteenSessionsStartedTogetherEqualTheirSoloRuns) {
  const std::vector<Tokens> all = prompts();
  const std::vector<GenConfig> configs = testing::greedy_configs(all.size(), kNewTokens);
  const testing::SoloAndBatched runs = testing::run_solo_and_batched(GetParam(), all, configs);
  const testing::RunResult& solo = runs.solo;
  const testing::RunResult& batched = runs.batched;
  const CpuExecutor* executor = runs.batched_executor.get();
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(solo.tokens[i].size(), static_cast<size_t>(kNewTokens)) << "request " << i;
    EXPECT_EQ(batched.tokens[i], solo.tokens[i])
        << "request " << i << " (prompt of " << all[i].size() << " tokens)";
  }
  EXPECT_EQ(batched.metrics.num_generated_tokens, 16 * kNewTokens);
  EXPECT_LT(batched.metrics.num_steps, solo.metrics.num_steps) << "batching packed nothing";
  EXPECT_LE(executor->stats().num_tokens, static_cast<int64_t>(batched.metrics.num_prompt_tokens +
                                                               batched.metrics.num_decode_tokens));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RuntimeBatchingTest,
    ::testing::Values(ExecutorShape{512, 5, {1}}, ExecutorShape{32, 5, {1}},
                      ExecutorShape{16, 1, {1}}, ExecutorShape{512, 5, {1, 2, 4, 8, 16}},
                      ExecutorShape{32, 5, {1, 2, 4, 8, 16}},
                      ExecutorShape{16, 1, {1, 2, 4, 8, 16}},
                      // The recommended plan (program_spec.h): slices below
                      // 257 tokens, prompt chunks included, run as decode
                      // calls padded up to 256 rows.
                      ExecutorShape{512, 257, {1, 2, 4, 8, 16, 32, 64, 128, 256}}),
    [](const ::testing::TestParamInfo<ExecutorShape>& info) {
      const ExecutorShape& s = info.param;
      return "W" + std::to_string(s.max_step_tokens) + "_m" + std::to_string(s.min_prefill_chunk) +
             "_widths" + std::to_string(s.decode_widths.back());
    });

TEST(RuntimeReferenceTest, TheSixReferenceCasesBatchedTogetherMatchTheReferenceGreedyTokens) {
  const std::string path = testing::test_model_path("reference/stories260K-greedy.json");
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  const nlohmann::json reference = nlohmann::json::parse(file);
  std::vector<Tokens> all;
  std::vector<Tokens> expected;
  for (const nlohmann::json& c : reference.at("cases")) {
    all.push_back(c.at("prompt_tokens").get<Tokens>());
    expected.push_back(c.at("generated_tokens").get<Tokens>());
  }
  ASSERT_EQ(all.size(), 6u);
  std::vector<GenConfig> configs;
  for (const Tokens& e : expected) configs.push_back(testing::greedy_configs(1, e.size())[0]);
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({32, 5, {1, 2, 4}});
  const testing::RunResult batched = testing::run_requests(*executor, all, configs, true);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(batched.tokens[i], expected[i]) << "reference case " << i;
  }
}

}  // namespace
}  // namespace cellm
