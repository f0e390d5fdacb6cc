// sampling_candidates and Sampler::sample_from_candidates (sampler.h): the list against a sort of
// the whole row, and every token the candidates decide against sample() on the row itself, over
// rows from flat to peaked and the sampling chain's settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "batching/sampler.h"

namespace cellm {
namespace {

std::vector<float> gaussian_row(size_t vocab, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> row(vocab);
  for (float& v : row) v = normal(rng);
  return row;
}

TEST(SamplingCandidatesTest, ListTheBestFiniteLogitsLowerIdFirstOnTiesWithTheWholeNormalizer) {
  std::vector<float> row = gaussian_row(1000, 2.0f, 1);
  // Ties (three at the top, one across the list's end), and values that are not finite.
  row[700] = row[30] = row[5] = 9.0f;
  row[12] = std::numeric_limits<float>::quiet_NaN();
  row[13] = std::numeric_limits<float>::infinity();
  row[14] = -std::numeric_limits<float>::infinity();
  for (const float temperature : {0.7f, 1.0f, 2.5f}) {
    const RowCandidates c = sampling_candidates(row, temperature);
    std::vector<std::pair<int32_t, float>> finite;
    long double total = 0.0L;
    for (size_t t = 0; t < row.size(); ++t) {
      if (!std::isfinite(row[t])) continue;
      finite.emplace_back(static_cast<int32_t>(t), row[t]);
      total += std::exp((static_cast<long double>(row[t]) - 9.0L) / temperature);
    }
    std::stable_sort(finite.begin(), finite.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    finite.resize(kSamplingCandidates);
    EXPECT_EQ(c.top, finite);
    EXPECT_EQ(c.top[0].first, 5);
    EXPECT_EQ(c.top[1].first, 30);
    EXPECT_EQ(c.top[2].first, 700);
    EXPECT_EQ(c.max_logit, 9.0f);
    EXPECT_EQ(c.temperature, temperature);
    EXPECT_NEAR(c.total, static_cast<double>(total), 1e-12 * static_cast<double>(total));
  }
  const std::vector<float> short_row = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  const RowCandidates few = sampling_candidates(short_row, 1.0f);
  ASSERT_EQ(few.top.size(), 2u) << "every finite logit, when fewer than the list holds";
  EXPECT_EQ(few.top[0], std::make_pair(2, 3.0f));
  const std::vector<float> none(4, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(sampling_candidates(none, 1.0f).top.empty());
  EXPECT_EQ(sampling_candidates(none, 1.0f).max_logit, -std::numeric_limits<float>::infinity());
}

struct Tally {
  int decided = 0;
  int undecided = 0;
};

// Every setting of the chain on `row` at positions 0..num_positions-1: a decided token must be
// sample()'s. Returns how many the candidates decided.
Tally compare_on_row(const std::vector<float>& row, const SamplingParams& params,
                     int num_positions) {
  Tally tally;
  Sampler sampler(params, 1234);
  EXPECT_TRUE(sampler.takes_candidates());
  const RowCandidates candidates = sampling_candidates(row, params.temperature);
  for (int position = 0; position < num_positions; ++position) {
    const std::vector<int32_t> context(static_cast<size_t>(position), 0);
    const std::optional<int32_t> decided = sampler.sample_from_candidates(candidates, position);
    if (!decided.has_value()) {
      ++tally.undecided;
      continue;
    }
    ++tally.decided;
    const StatusOr<int32_t> sampled = sampler.sample(row, context);
    EXPECT_TRUE(sampled.ok());
    EXPECT_EQ(*decided, *sampled) << "position " << position << ", T " << params.temperature
                                  << ", top_k " << params.top_k << ", top_p " << params.top_p
                                  << ", min_p " << params.min_p << ", vocab " << row.size();
  }
  return tally;
}

TEST(SamplingCandidatesTest, EveryTokenTheCandidatesDecideIsTheOneSampleDrawsFromTheRow) {
  int decided = 0;
  int undecided = 0;
  int decided_past_list = 0;  // with a top-k past the list (K, K + 8) on rows longer than it
  uint32_t seed = 0;
  constexpr int32_t K = kSamplingCandidates;
  constexpr auto kList = static_cast<size_t>(K);
  for (const size_t vocab : {size_t{7}, kList - 1, kList, kList + 1, size_t{2000}}) {
    for (const float sigma : {0.3f, 2.0f, 6.0f}) {
      const std::vector<float> row = gaussian_row(vocab, sigma, ++seed);
      for (const float temperature : {0.4f, 1.0f, 1.6f}) {
        for (const int32_t top_k : {0, 1, 5, K - 1, K, K + 8}) {
          for (const float top_p : {1.0f, 0.9f, 0.4f}) {
            for (const float min_p : {0.0f, 0.05f, 0.5f}) {
              SamplingParams params;
              params.temperature = temperature;
              params.top_k = top_k;
              params.top_p = top_p;
              params.min_p = min_p;
              const Tally tally = compare_on_row(row, params, 24);
              decided += tally.decided;
              undecided += tally.undecided;
              if (top_k >= kSamplingCandidates && vocab > static_cast<size_t>(top_k)) {
                decided_past_list += tally.decided;
              }
              // A top-k cut inside the list, or a row the list holds whole, always decides.
              if ((top_k > 0 && top_k < kSamplingCandidates) ||
                  vocab < static_cast<size_t>(kSamplingCandidates)) {
                EXPECT_EQ(tally.undecided, 0) << "vocab " << vocab << ", top_k " << top_k;
              }
            }
          }
        }
      }
    }
  }
  std::printf("candidates decided %d draws (%d with a top-k past the list), left %d to the row\n",
              decided, decided_past_list, undecided);
  EXPECT_GT(undecided, 0) << "flat rows without cuts draw past the list";
  EXPECT_GT(decided, 2 * undecided) << "most settings decide within the list";
  EXPECT_GT(decided_past_list, 500)
      << "a min-p or top-p cut inside the list decides a top-k past it";
}

TEST(SamplingCandidatesTest, AFlatRowWithoutCutsIsLeftToTheRowAndAPeakedOneIsNot) {
  SamplingParams params;
  params.temperature = 1.0f;
  const std::vector<float> flat(4096, 0.5f);
  Sampler sampler(params, 9);
  const RowCandidates flat_candidates = sampling_candidates(flat, 1.0f);
  int flat_decided = 0;
  for (int position = 0; position < 64; ++position) {
    flat_decided += sampler.sample_from_candidates(flat_candidates, position).has_value();
  }
  EXPECT_LT(flat_decided, 8) << "32 of 4096 equal tokens hold under 1% of the mass";
  std::vector<float> peaked = flat;
  peaked[17] = 30.0f;
  const RowCandidates peaked_candidates = sampling_candidates(peaked, 1.0f);
  for (int position = 0; position < 64; ++position) {
    EXPECT_EQ(sampler.sample_from_candidates(peaked_candidates, position), 17);
  }
}

}  // namespace
}  // namespace cellm
