#include "batching/token_logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace cellm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// log-softmax of the finite values in long double, the independent reference.
std::vector<long double> reference_logprobs(const std::vector<float>& row) {
  long double top = -INFINITY;
  for (const float v : row) {
    if (std::isfinite(v)) top = std::max<long double>(top, v);
  }
  long double sum = 0;
  for (const float v : row) {
    if (std::isfinite(v)) sum += std::exp(static_cast<long double>(v) - top);
  }
  std::vector<long double> out;
  for (const float v : row) {
    out.push_back(std::isfinite(v) ? static_cast<long double>(v) - top - std::log(sum) : -INFINITY);
  }
  return out;
}

TEST(TokenLogprobsTest, MatchTheLogSoftmaxOfTheRowAndListTheMostLikelyBestFirst) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> row(50000);
  for (float& v : row) v = normal(rng);
  const std::vector<long double> ref = reference_logprobs(row);
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });

  for (const int32_t token : {0, 17, 49999, order[0], order[3]}) {
    const TokenLogprobs lp = token_logprobs(row, token, 7);
    EXPECT_EQ(lp.token, token);
    EXPECT_NEAR(lp.logprob, static_cast<double>(ref[token]), 1e-5);
    ASSERT_EQ(lp.top.size(), 7u);
    for (size_t i = 0; i < lp.top.size(); ++i) {
      EXPECT_EQ(lp.top[i].first, order[i]) << "rank " << i;
      EXPECT_NEAR(lp.top[i].second, static_cast<double>(ref[order[i]]), 1e-5);
    }
  }
  EXPECT_TRUE(token_logprobs(row, 5, 0).top.empty());
}

TEST(TokenLogprobsTest, AWideSpreadOfLogitsKeepsEveryLogprobExact) {
  // Logits from 10 down to -300 (exp underflows float far above the bottom), and a row of 128K.
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> uniform(-300.0f, 10.0f);
  std::vector<float> row(128 * 1024 + 7);  // not a multiple of the block either
  for (float& v : row) v = uniform(rng);
  const std::vector<long double> ref = reference_logprobs(row);
  for (const int32_t token : {0, 1000, 70000, static_cast<int32_t>(row.size()) - 1}) {
    const TokenLogprobs lp = token_logprobs(row, token, 3);
    EXPECT_NEAR(lp.logprob, static_cast<double>(ref[token]), 1e-5 * std::fabs(lp.logprob) + 1e-5)
        << "token " << token << " logit " << row[token];
  }
}

TEST(TokenLogprobsTest, EveryTokensProbabilitySumsToOne) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> uniform(-30.0f, 30.0f);
  std::vector<float> row(1000);
  for (float& v : row) v = uniform(rng);
  const TokenLogprobs lp = token_logprobs(row, 3, static_cast<int32_t>(row.size()));
  ASSERT_EQ(lp.top.size(), row.size());
  double sum = 0.0;
  for (const auto& [id, logprob] : lp.top) sum += std::exp(static_cast<double>(logprob));
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(TokenLogprobsTest, TiesListTheLowerIdFirstAndNonFiniteLogitsNeverRank) {
  const std::vector<float> row = {1.0f, 3.0f, -kInf, 3.0f, NAN, 2.0f, kInf};
  const TokenLogprobs lp = token_logprobs(row, 2, 10);
  EXPECT_EQ(lp.logprob, -kInf) << "a banned token";
  ASSERT_EQ(lp.top.size(), 4u) << "only the four finite logits";
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 5);
  EXPECT_EQ(lp.top[3].first, 0);
  EXPECT_EQ(lp.top[0].second, lp.top[1].second);
  const double expected = 3.0 - std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(lp.top[0].second, expected, 1e-6);
  EXPECT_EQ(token_logprobs(row, 6, 1).logprob, -kInf) << "+infinity is not a finite logit";
}

TEST(TokenLogprobsTest, ARowWithNoFiniteLogitGivesMinusInfinityAndNoTop) {
  const std::vector<float> row = {-kInf, NAN, -kInf};
  const TokenLogprobs lp = token_logprobs(row, 1, 3);
  EXPECT_EQ(lp.logprob, -kInf);
  EXPECT_TRUE(lp.top.empty());
}

TEST(TokenLogprobsTest, ASummaryKeepsTheScoredLogitTheNormalizerAndTheTopLogits) {
  const std::vector<float> row = {1.0f, 3.0f, -kInf, 3.0f, NAN, 2.0f, kInf};
  const RowLogprobs summary = summarize_logprobs(row, 5, 3);
  EXPECT_EQ(summary.max_logit, 3.0f);
  EXPECT_NEAR(summary.log_sum_exp, std::log(std::exp(-2.0) + 2.0 + std::exp(-1.0)), 1e-7);
  EXPECT_EQ(summary.scored_logit, 2.0f);
  ASSERT_EQ(summary.top.size(), 3u);
  EXPECT_EQ(summary.top[0], (std::pair<int32_t, float>{1, 3.0f}));
  EXPECT_EQ(summary.top[1], (std::pair<int32_t, float>{3, 3.0f}));
  EXPECT_EQ(summary.top[2], (std::pair<int32_t, float>{5, 2.0f}));
  EXPECT_TRUE(std::isnan(summarize_logprobs(row, kNoToken, 0).scored_logit));
  EXPECT_EQ(summarize_logprobs(row, 2, 0).scored_logit, -kInf);

  const RowLogprobs nothing = summarize_logprobs(std::vector<float>{NAN, -kInf}, 0, 2);
  EXPECT_EQ(nothing.max_logit, -kInf);
  EXPECT_TRUE(nothing.top.empty());
  EXPECT_EQ(logprobs_from_summary(nothing, 0, nothing.scored_logit).logprob, -kInf);
}

TEST(TokenLogprobsTest, LogprobsFromASummaryEqualThoseFromTheRow) {
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(30000);
  for (float& v : row) v = normal(rng);
  row[123] = -kInf;
  for (const int32_t token : {0, 123, 29999}) {
    const TokenLogprobs direct = token_logprobs(row, token, 5);
    const RowLogprobs summary = summarize_logprobs(row, token, 5);
    const TokenLogprobs via = logprobs_from_summary(summary, token, summary.scored_logit);
    EXPECT_EQ(via.token, direct.token);
    EXPECT_EQ(via.logprob, direct.logprob) << "token " << token;
    EXPECT_EQ(via.top, direct.top);
  }
}

}  // namespace
}  // namespace cellm
