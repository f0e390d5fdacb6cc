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

}  // namespace
}  // namespace cellm
