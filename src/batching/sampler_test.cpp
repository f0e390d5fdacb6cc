#include "batching/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace cellm {
namespace {

using Tokens = std::vector<int32_t>;

int32_t sample(const SamplingParams& params, const std::vector<float>& logits,
               const Tokens& context = {}, uint64_t seed = 7) {
  Sampler sampler(params, seed);
  StatusOr<int32_t> token = sampler.sample(logits, context);
  EXPECT_TRUE(token.ok()) << token.status().to_string();
  return token.ok() ? *token : -1;
}

// Every token `num_draws` draws of one sampler give (contexts of 0, 1, ... tokens: new draws).
std::set<int32_t> tokens_drawn(const SamplingParams& params, const std::vector<float>& logits,
                               uint64_t seed, int32_t num_draws) {
  Sampler sampler(params, seed);
  std::set<int32_t> seen;
  for (int32_t n = 0; n < num_draws; ++n) {
    const StatusOr<int32_t> token = sampler.sample(logits, Tokens(n, 0));
    EXPECT_TRUE(token.ok()) << token.status().to_string();
    if (token.ok()) seen.insert(*token);
  }
  return seen;
}

// Probabilities 0.1, 0.2, 0.3, 0.4 at temperature 1.
const std::vector<float> kTenthsLogits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};

SamplingParams with_temperature(float temperature) {
  SamplingParams params;
  params.temperature = temperature;
  return params;
}

TEST(SamplerTest, GreedyTakesTheArgmaxAndTheLowestIdOnATie) {
  EXPECT_EQ(sample({}, {1.0f, 3.0f, 2.0f, 0.5f}), 1);
  EXPECT_EQ(sample({}, {1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(sample({}, {-5.0f, -4.0f, -4.5f}), 1);
}

TEST(SamplerTest, LogitBiasShiftsAndBans) {
  SamplingParams params;
  params.logit_bias = {{1, -INFINITY}};
  EXPECT_EQ(sample(params, {1.0f, 3.0f, 2.0f}), 2);
  params.logit_bias = {{0, 2.5f}};  // 1 + 2.5 = 3.5 beats 3
  EXPECT_EQ(sample(params, {1.0f, 3.0f, 2.0f}), 0);
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  // Token 1 (4 -> 2) falls below token 2 (3).
  EXPECT_EQ(sample(params, {0.0f, 4.0f, 3.0f}, {1}), 2);
  // Negative: token 0 (-1 -> -2) falls below token 2 (-1.5).
  EXPECT_EQ(sample(params, {-1.0f, -3.0f, -1.5f}, {0}), 2);
  // A token outside the window is not penalized.
  params.penalty_window = 1;
  EXPECT_EQ(sample(params, {0.0f, 4.0f, 3.0f}, {1, 0}), 1);
  params.penalty_window = -1;  // the whole context
  EXPECT_EQ(sample(params, {0.0f, 4.0f, 3.0f}, {1, 0}), 2);
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesSubtractPerTokenAndPerOccurrence) {
  SamplingParams params;
  params.presence_penalty = 0.5f;
  // Token 1: 3.0 - 0.5 = 2.5 < 2.8.
  EXPECT_EQ(sample(params, {0.0f, 3.0f, 2.8f}, {1, 1, 1}), 2);
  params.presence_penalty = 0.0f;
  params.frequency_penalty = 0.1f;
  // Token 1 seen 3 times: 3.0 - 0.3 = 2.7 < 2.8; seen once: 2.9 > 2.8.
  EXPECT_EQ(sample(params, {0.0f, 3.0f, 2.8f}, {1, 1, 1}), 2);
  EXPECT_EQ(sample(params, {0.0f, 3.0f, 2.8f}, {1}), 1);
}

TEST(SamplerTest, EveryTokenBannedIsAnErrorNotACrash) {
  SamplingParams params;
  params.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
  Sampler sampler(params, 1);
  StatusOr<int32_t> token = sampler.sample(std::vector<float>{1.0f, 2.0f}, Tokens{});
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), StatusCode::kFailedPrecondition);
  const std::vector<float> nan_row = {NAN, NAN};
  EXPECT_FALSE(Sampler({}, 1).sample(nan_row, Tokens{}).ok());
}

TEST(SamplerTest, UniformDrawDependsOnlyOnSeedAndPosition) {
  EXPECT_EQ(sampling_uniform(42, 17), sampling_uniform(42, 17));
  EXPECT_NE(sampling_uniform(42, 17), sampling_uniform(42, 18));
  EXPECT_NE(sampling_uniform(42, 17), sampling_uniform(43, 17));
  double sum = 0.0;
  for (int64_t p = 0; p < 10000; ++p) {
    const double u = sampling_uniform(5, p);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000.0, 0.5, 0.02);
}

TEST(SamplerTest, SameSeedAndPositionGiveTheSameTokenWhateverCameBefore) {
  const std::vector<float> logits = {0.1f, 0.5f, 0.3f, 0.9f, 0.2f};
  Sampler a(with_temperature(1.0f), 99);
  Sampler b(with_temperature(1.0f), 99);
  // b samples other rows first; its draws at the same positions must not change.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.sample(logits, Tokens(i + 1, 0)).ok());
  for (int32_t n = 0; n < 50; ++n) {
    const Tokens context(n, 1);
    EXPECT_EQ(*a.sample(logits, context), *b.sample(logits, context)) << "position " << n;
  }
}

TEST(SamplerTest, TemperatureSamplingFollowsTheSoftmax) {
  // logits ln(1), ln(2), ln(3), ln(4) at temperature 1: probabilities 0.1, 0.2, 0.3, 0.4.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  Sampler sampler(with_temperature(1.0f), 3);
  std::map<int32_t, int> counts;
  const int n = 20000;
  Tokens context;
  for (int i = 0; i < n; ++i) {
    ++counts[*sampler.sample(logits, context)];
    context.push_back(0);
  }
  EXPECT_NEAR(counts[0] / double(n), 0.1, 0.015);
  EXPECT_NEAR(counts[1] / double(n), 0.2, 0.015);
  EXPECT_NEAR(counts[2] / double(n), 0.3, 0.015);
  EXPECT_NEAR(counts[3] / double(n), 0.4, 0.015);
}

TEST(SamplerTest, TopKOneIsGreedyAtAnyTemperature) {
  SamplingParams params = with_temperature(5.0f);
  params.top_k = 1;
  EXPECT_EQ(tokens_drawn(params, {0.3f, 0.2f, 0.9f, 0.1f}, 11, 200), (std::set<int32_t>{2}));
}

TEST(SamplerTest, TopPKeepsOnlyTheNucleus) {
  // top_p 0.6 keeps {3, 2} (0.4 + 0.3 >= 0.6).
  SamplingParams params = with_temperature(1.0f);
  params.top_p = 0.6f;
  EXPECT_EQ(tokens_drawn(params, kTenthsLogits, 5, 2000), (std::set<int32_t>{2, 3}));
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheBest) {
  // min_p 0.6 keeps p >= 0.6 * 0.4 = 0.24, i.e. {2, 3}.
  SamplingParams params = with_temperature(1.0f);
  params.min_p = 0.6f;
  EXPECT_EQ(tokens_drawn(params, kTenthsLogits, 5, 2000), (std::set<int32_t>{2, 3}));
}

TEST(SamplerTest, LowTemperatureConcentratesOnTheBest) {
  EXPECT_EQ(tokens_drawn(with_temperature(0.01f), {1.0f, 2.0f, 1.5f}, 8, 200),
            (std::set<int32_t>{1}));
}

TEST(GenConfigTest, BadFieldsAreNamed) {
  const auto message = [](GenConfig config) { return validate_gen_config(config).message(); };
  GenConfig config;
  EXPECT_TRUE(validate_gen_config(config).ok());
  config.max_new_tokens = -1;
  EXPECT_NE(message(config).find("max_new_tokens"), std::string::npos);
  config = {};
  config.sampling.top_p = 0.0f;
  EXPECT_NE(message(config).find("top_p"), std::string::npos);
  config = {};
  config.sampling.min_p = 1.5f;
  EXPECT_NE(message(config).find("min_p"), std::string::npos);
  config = {};
  config.sampling.top_k = -2;
  EXPECT_NE(message(config).find("top_k"), std::string::npos);
  config = {};
  config.sampling.repetition_penalty = 0.0f;
  EXPECT_NE(message(config).find("repetition_penalty"), std::string::npos);
  config = {};
  config.stop_strings = {"ok", ""};
  EXPECT_NE(message(config).find("stop_strings[1]"), std::string::npos);
}

}  // namespace
}  // namespace cellm
