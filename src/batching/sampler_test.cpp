#include "batching/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
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

TEST(SamplerTest, RewriteForListsEachTouchedTokenOnceWithItsBiasesInOrderAndItsWindowCount) {
  SamplingParams params;
  params.temperature = 0.7f;
  params.logit_bias = {{7, 1.0f}, {3, 2.0f}, {7, -0.5f}, {12, -INFINITY}};
  params.frequency_penalty = 0.25f;
  params.repetition_penalty = 1.5f;
  params.penalty_window = 4;
  const Sampler sampler(params, 1);
  EXPECT_TRUE(sampler.rewrites_scores());
  EXPECT_FALSE(sampler.takes_candidates());
  // The window is the last four tokens: 3, 9, 3, 7 (1 and the first 3 fall out of it).
  const SamplerRewrite rewrite = sampler.rewrite_for(Tokens{1, 3, 3, 9, 3, 7});
  const std::vector<TokenRewrite> want = {{3, 2, 0, 1}, {7, 1, 1, 2}, {9, 1, 3, 0}, {12, 0, 3, 1}};
  EXPECT_EQ(rewrite.tokens, want);
  EXPECT_EQ(rewrite.biases, (std::vector<float>{2.0f, 1.0f, -0.5f, -INFINITY}));
  EXPECT_EQ(rewrite.penalties, (PenaltyParams{1.5f, 0.0f, 0.25f}));
  // Token 7: (2 + 1 - 0.5) / 1.5 - 0.25; token 3 (negative): -1 * 1.5 - 0.5.
  EXPECT_FLOAT_EQ(rewrite_score(2.0f, rewrite.biases.data() + 1, 2, 1, rewrite.penalties),
                  2.5f / 1.5f - 0.25f);
  EXPECT_FLOAT_EQ(rewrite_score(-3.0f, rewrite.biases.data(), 1, 2, rewrite.penalties), -2.0f);
  // Without penalties the window is not listed; with nothing to rewrite, nothing is.
  params.frequency_penalty = 0.0f;
  params.repetition_penalty = 1.0f;
  EXPECT_EQ(Sampler(params, 1).rewrite_for(Tokens{1, 3, 3, 9, 3, 7}).tokens.size(), 3u);
  EXPECT_TRUE(Sampler(with_temperature(0.7f), 1).rewrite_for(Tokens{1, 3}).tokens.empty());
  EXPECT_FALSE(Sampler(with_temperature(0.7f), 1).rewrites_scores());
}

TEST(SamplerTest, RewriteIntoReusedStorageGivesRewriteForEachTime) {
  // The engine's per-step path reuses one SamplerRewrite: nothing of an earlier, longer rewrite
  // may survive into a later one.
  SamplingParams params;
  params.temperature = 1.0f;
  params.presence_penalty = 0.5f;
  params.penalty_window = 6;
  params.logit_bias = {{4, 1.0f}, {2, -1.0f}, {4, 0.25f}};
  Sampler sampler(params, 3);
  SamplerRewrite reused;
  const std::vector<Tokens> contexts = {
      {9, 8, 7, 6, 5, 4, 3}, {1}, {4, 4, 4, 4}, {}, {2, 9, 2, 9, 2, 9, 2, 9}};
  for (const Tokens& context : contexts) {
    sampler.rewrite_into(context, reused);
    const SamplerRewrite fresh = sampler.rewrite_for(context);
    EXPECT_EQ(reused.tokens, fresh.tokens);
    EXPECT_EQ(reused.biases, fresh.biases);
    EXPECT_EQ(reused.penalties, fresh.penalties);
  }
  // The last context's window (2, 9, 2, 9, 2, 9) and the biases: tokens 2, 4 and 9.
  const std::vector<TokenRewrite> want = {{2, 3, 0, 1}, {4, 0, 1, 2}, {9, 3, 3, 0}};
  EXPECT_EQ(reused.tokens, want);
  EXPECT_EQ(reused.biases, (std::vector<float>{-1.0f, 1.0f, 0.25f}));
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

TEST(SamplerTest, ArgmaxFiniteSkipsNanAndInfinityAndTakesTheLowestIdOnATie) {
  // Long rows exercise the lanes and the tail: the best at every place of a 37-element row.
  for (size_t at = 0; at < 37; ++at) {
    std::vector<float> row(37, -1.0f);
    row[(at + 5) % 37] = NAN;
    row[(at + 9) % 37] = INFINITY;
    row[at] = 2.0f;
    if (at + 20 < 37) row[at + 20] = 2.0f;  // a tie after it: the lower id wins
    EXPECT_EQ(argmax_finite(row), static_cast<int32_t>(at)) << "best at " << at;
  }
  EXPECT_EQ(argmax_finite(std::vector<float>(40, -INFINITY)), kNoToken);
  EXPECT_EQ(argmax_finite(std::vector<float>{NAN, INFINITY, -INFINITY}), kNoToken);
  EXPECT_EQ(argmax_finite(std::vector<float>{-INFINITY, -3e38f, NAN}), 1);
}

TEST(SamplerTest, OnlyPlainGreedyTakesTheArgmax) {
  EXPECT_TRUE(Sampler({}, 1).takes_argmax());
  SamplingParams biased;
  biased.logit_bias = {{0, 1.0f}};
  EXPECT_FALSE(Sampler(biased, 1).takes_argmax());
  SamplingParams penalized;
  penalized.frequency_penalty = 0.5f;
  EXPECT_FALSE(Sampler(penalized, 1).takes_argmax());
  EXPECT_FALSE(Sampler(with_temperature(0.7f), 1).takes_argmax());
  SamplingParams with_logprobs;  // the engine reads them apart from the sampler
  with_logprobs.logprobs = 5;
  EXPECT_TRUE(Sampler(with_logprobs, 1).takes_argmax());
}

TEST(SamplerTest, AMaskedSamplerPicksOnlyAllowedTokensAsIfTheOthersWereBanned) {
  const std::vector<float> logits = {3.0f, 2.5f, 0.5f, 2.9f, -1.0f, 1.0f};
  const std::vector<uint8_t> allowed = {0, 1, 1, 0, 1, 1};
  Sampler greedy({}, 1, /*masked=*/true);
  EXPECT_FALSE(greedy.takes_argmax()) << "the executor's argmax may be a banned token";
  const StatusOr<int32_t> best = greedy.sample(logits, {}, allowed);
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  EXPECT_EQ(*best, 1);
  // At a temperature the mask is a bias of -infinity on the others: the same draws, and no
  // candidates shortcut.
  SamplingParams params = with_temperature(1.5f);
  params.top_p = 0.9f;
  SamplingParams banned = params;
  for (size_t t = 0; t < allowed.size(); ++t) {
    if (allowed[t] == 0) {
      banned.logit_bias.push_back(
          {static_cast<int32_t>(t), -std::numeric_limits<float>::infinity()});
    }
  }
  Sampler masked(params, 9, /*masked=*/true);
  EXPECT_FALSE(masked.takes_candidates());
  Sampler biased(banned, 9);
  Tokens context;
  for (int32_t n = 0; n < 200; ++n) {
    const StatusOr<int32_t> a = masked.sample(logits, context, allowed);
    const StatusOr<int32_t> b = biased.sample(logits, context);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << "draw " << n;
    EXPECT_NE(allowed[static_cast<size_t>(*a)], 0) << "draw " << n;
    context.push_back(0);  // the next position: a new draw
  }
  const std::vector<uint8_t> none(logits.size(), 0);
  const StatusOr<int32_t> nothing = greedy.sample(logits, {}, none);
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.status().message().find("response format"), std::string::npos);
}

// The chain written the plain way (the whole vocabulary sorted best first): what the sampler's
// partial selection must reproduce token for token.
int32_t sample_by_full_sort(const SamplingParams& p, const std::vector<float>& logits,
                            uint64_t seed, int64_t position) {
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(p.top_k);
  const double inv_t = 1.0 / p.temperature;
  const double top = logits[order[0]] * inv_t;
  std::vector<double> probs;
  double total = 0.0;
  for (const int32_t t : order) {
    probs.push_back(std::exp(logits[t] * inv_t - top));
    total += probs.back();
  }
  size_t keep = order.size();
  double mass = 0.0;
  for (size_t i = 0; i < order.size() && p.top_p < 1.0f; ++i) {
    mass += probs[i];
    if (mass >= p.top_p * total) {
      keep = i + 1;
      break;
    }
  }
  size_t i = 1;
  while (p.min_p > 0.0f && i < keep && probs[i] >= p.min_p * probs[0]) ++i;
  if (p.min_p > 0.0f) keep = i;
  double kept = 0.0;
  for (size_t j = 0; j < keep; ++j) kept += probs[j];
  const double u = sampling_uniform(seed, position) * kept;
  mass = 0.0;
  for (size_t j = 0; j < keep; ++j) {
    mass += probs[j];
    if (u < mass) return order[j];
  }
  return order[keep - 1];
}

TEST(SamplerTest, PartialSelectionDrawsWhatSortingTheWholeVocabularyDraws) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(5000);
  for (float& v : logits) v = normal(rng);
  for (int i = 0; i < 40; ++i) logits[rng() % logits.size()] = logits[rng() % logits.size()];
  struct Case {
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
  };
  for (const Case& c :
       {Case{0.8f, 0, 1.0f, 0.0f}, Case{1.0f, 40, 1.0f, 0.0f}, Case{0.7f, 0, 0.9f, 0.0f},
        Case{1.5f, 0, 0.5f, 0.0f}, Case{1.0f, 0, 1.0f, 0.05f}, Case{0.9f, 200, 0.95f, 0.01f},
        Case{3.0f, 0, 0.99f, 0.0f}}) {
    SamplingParams params = with_temperature(c.temperature);
    params.top_k = c.top_k;
    params.top_p = c.top_p;
    params.min_p = c.min_p;
    Sampler sampler(params, 21);
    std::set<int32_t> distinct;
    for (int32_t n = 0; n < 200; ++n) {
      const StatusOr<int32_t> token = sampler.sample(logits, Tokens(n, 0));
      ASSERT_TRUE(token.ok()) << token.status().to_string();
      distinct.insert(*token);
      ASSERT_EQ(*token, sample_by_full_sort(params, logits, 21, n))
          << "temperature " << c.temperature << " top_k " << c.top_k << " top_p " << c.top_p
          << " min_p " << c.min_p << " position " << n;
    }
    EXPECT_GT(distinct.size(), 3u) << "the draws should spread";
  }
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
