// End to end on stories260K: a cell pool too small for all sessions at once. Preemption must
// happen, and every output still equals its solo run: nothing lost or duplicated.
#include <gtest/gtest.h>

#include "runtime_e2e_util.h"

namespace cellm {
namespace {

using testing::ExecutorShape;
using testing::Tokens;

constexpr int32_t kNewTokens = 24;

class RuntimePreemptionTest : public ::testing::TestWithParam<ExecutorShape> {};

// 16 sessions of about 150 tokens each (prompt + new tokens) in a pool of 600 cells.
TEST_P(RuntimePreemptionTest, APoolTooSmallPreemptsAndEveryOutputEqualsItsSoloRun) {
  std::mt19937 rng(7);
  std::vector<Tokens> all;
  for (int i = 0; i < 16; ++i) {
    all.push_back(
        testing::random_prompt(std::uniform_int_distribution<int32_t>(100, 125)(rng), rng));
  }
  const std::vector<GenConfig> configs = testing::greedy_configs(all.size(), kNewTokens);
  const testing::SoloAndBatched runs = testing::run_solo_and_batched(GetParam(), all, configs);
  const testing::RunResult& solo = runs.solo;
  const testing::RunResult& batched = runs.batched;
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(solo.tokens[i].size(), static_cast<size_t>(kNewTokens));
    EXPECT_EQ(batched.tokens[i], solo.tokens[i]) << "request " << i;
    EXPECT_EQ(batched.reasons[i], FinishReason::kNewTokenLimit);
  }
  const EngineMetrics& m = batched.metrics;
  EXPECT_GT(m.num_preemptions, 0) << format_report(m);
  EXPECT_GT(m.num_recomputed_tokens, 0);
  EXPECT_LE(m.pool_peak_used_cells, 600);
  EXPECT_EQ(m.num_generated_tokens, 16 * kNewTokens) << "nothing lost or duplicated";
  EXPECT_EQ(m.num_refusals, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RuntimePreemptionTest,
    ::testing::Values(ExecutorShape{512, 5, {1}, 600}, ExecutorShape{16, 1, {1, 2, 4, 8, 16}, 600},
                      ExecutorShape{512, 257, recommended_decode_widths(512), 600}),
    [](const ::testing::TestParamInfo<ExecutorShape>& info) {
      return "W" + std::to_string(info.param.max_step_tokens) + "_m" +
             std::to_string(info.param.min_prefill_chunk);
    });

TEST(RuntimePreemptionTest, ARequestLargerThanThePoolIsRefusedAtSubmit) {
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({16, 1, {1}, 100});
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(16)));
  Session session = runner.open_session();
  std::mt19937 rng(1);
  GenConfig config;
  config.max_new_tokens = 30;
  GenerationHandle handle = session.generate_async(testing::random_prompt(80, rng), config);
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(handle.error_message().find("whole cell pool of 100"), std::string::npos)
      << handle.error_message();
  EXPECT_EQ(runner.metrics().num_refusals, 1);
}

}  // namespace
}  // namespace cellm
