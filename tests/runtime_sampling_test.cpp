// End to end on stories260K: temperature 0.8, top-p 0.9 and a fixed seed per request — each
// request's tokens are the same alone and batched with 15 others.
#include <gtest/gtest.h>

#include "runtime_e2e_util.h"

namespace cellm {
namespace {

using testing::Tokens;

TEST(RuntimeSamplingTest, SeededRequestsSampleTheSameAloneAndBatchedWithFifteenOthers) {
  std::mt19937 rng(99);
  std::vector<Tokens> all;
  std::vector<GenConfig> configs;
  for (int i = 0; i < 16; ++i) {
    all.push_back(testing::random_prompt(std::uniform_int_distribution<int32_t>(0, 120)(rng), rng));
    GenConfig config;
    config.max_new_tokens = 32;
    config.sampling.temperature = 0.8f;
    config.sampling.top_p = 0.9f;
    config.seed = 1234 + 17 * i;
    configs.push_back(config);
  }
  std::unique_ptr<CpuExecutor> solo_executor = testing::make_executor({32, 5, {1, 2, 4, 8}});
  const testing::RunResult alone = testing::run_requests(*solo_executor, all, configs, false);
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({32, 5, {1, 2, 4, 8}});
  const testing::RunResult batched = testing::run_requests(*executor, all, configs, true);
  const testing::RunResult greedy =
      testing::run_requests(*executor, all, testing::greedy_configs(all.size(), 32), true);
  int num_not_greedy = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(batched.tokens[i], alone.tokens[i]) << "request " << i;
    num_not_greedy += batched.tokens[i] != greedy.tokens[i];
  }
  EXPECT_GE(num_not_greedy, 12) << "temperature 0.8 should rarely reproduce greedy output";
}

}  // namespace
}  // namespace cellm
