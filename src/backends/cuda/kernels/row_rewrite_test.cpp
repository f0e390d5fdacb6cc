// The row_rewrite kernel against the host: rows rewritten on the device by samplers' bias and
// penalties (Sampler::rewrite_for, flattened as the executor flattens it) equal, bit for bit, the
// rows rewritten on the host by the sampler chain's definition written out here — biases added in
// the params' order, then the repetition penalty and presence + count · frequency per token of
// the window — and the candidates and draw of a rewritten row are the token the host's sample()
// draws from the raw row with the same sampler. Entries past the launch's rows or vocabulary are
// skipped.
#include "backends/cuda/kernels/row_rewrite.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/row_candidates.cuh"
#include "backends/cuda/kernels/row_draw.cuh"
#include "batching/sampler.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;
using testing::random_ints;

// One row's sampler and the context its token follows.
struct RowCase {
  SamplingParams params;
  std::vector<int32_t> context;
};

// The sampler chain's rewrite of `row` as batching/sampler.h defines it, written out.
std::vector<float> host_rewrite(std::span<const float> row, const RowCase& c) {
  std::vector<float> out(row.begin(), row.end());
  const SamplingParams& p = c.params;
  for (const LogitBias& bias : p.logit_bias) out[static_cast<size_t>(bias.token)] += bias.bias;
  const bool penalties =
      p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!penalties) return out;
  const size_t n = p.penalty_window < 0
                       ? c.context.size()
                       : std::min(c.context.size(), static_cast<size_t>(p.penalty_window));
  std::map<int32_t, int32_t> counts;
  for (size_t i = c.context.size() - n; i < c.context.size(); ++i) ++counts[c.context[i]];
  for (const auto& [token, count] : counts) {
    if (token < 0 || token >= static_cast<int32_t>(out.size())) continue;
    float score = out[static_cast<size_t>(token)];
    if (p.repetition_penalty != 1.0f) {
      score = score > 0.0f ? score / p.repetition_penalty : score * p.repetition_penalty;
    }
    const float per_count = static_cast<float>(count) * p.frequency_penalty;
    const float subtracted = p.presence_penalty + per_count;
    out[static_cast<size_t>(token)] = score - subtracted;
  }
  return out;
}

// Rows of `vocab` logits (stride `stride`) and a sampler per row: nothing, a repetition penalty
// over a window, presence and frequency over the whole context, biases (a token named twice,
// one banned, one large), a repetition penalty below 1 with biases, and a context token past the
// vocabulary. Contexts repeat the rows' best tokens so the penalties change the draws.
std::vector<RowCase> row_cases(const std::vector<float>& logits, int64_t vocab, int64_t stride) {
  const int num_rows = 6;
  std::vector<RowCase> cases(num_rows);
  for (int r = 0; r < num_rows; ++r) {
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    const float* row = logits.data() + r * stride;
    std::partial_sort(order.begin(), order.begin() + 40, order.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    const std::vector<int32_t> picks = random_ints(120, 300 + r, 0, 39);
    for (const int32_t k : picks) cases[r].context.push_back(order[static_cast<size_t>(k)]);
    cases[r].params.temperature = 0.8f;
  }
  cases[1].params.repetition_penalty = 1.3f;
  cases[1].params.penalty_window = 64;
  cases[1].params.top_k = 40;
  cases[2].params.presence_penalty = 0.5f;
  cases[2].params.frequency_penalty = 0.25f;
  cases[2].params.penalty_window = -1;
  cases[2].params.top_p = 0.9f;
  const std::vector<int32_t> aimed = random_ints(50, 77, 0, static_cast<int32_t>(vocab) - 1);
  const std::vector<float> biases = random_floats(50, 78, 3.0f);
  for (size_t i = 0; i < aimed.size(); ++i) {
    cases[3].params.logit_bias.push_back({aimed[i], biases[i]});
  }
  cases[3].params.logit_bias.push_back({aimed[4], 1.25f});  // named twice: added in order
  cases[3].params.logit_bias.push_back({cases[3].context[0], -INFINITY});
  cases[3].params.logit_bias.push_back({aimed[9], 6.0f});
  cases[3].params.temperature = 1.5f;
  cases[4].params.repetition_penalty = 0.8f;
  cases[4].params.penalty_window = 16;
  cases[4].params.logit_bias = {{cases[4].context.back(), 0.5f}, {aimed[1], -2.0f}};
  cases[4].params.min_p = 0.02f;
  cases[5].params.frequency_penalty = 0.75f;
  cases[5].context.push_back(static_cast<int32_t>(vocab) + 3);  // past the vocabulary: skipped
  return cases;
}

struct Flat {
  std::vector<RowRewriteEntry> entries;
  std::vector<float> biases;
  std::vector<PenaltyParams> penalties;
};

// The samplers' rewrites as the kernel takes them, rows counted from `first_row`.
Flat flatten(const std::vector<RowCase>& cases, int32_t first_row) {
  Flat flat;
  for (size_t r = 0; r < cases.size(); ++r) {
    const Sampler sampler(cases[r].params, 1);
    if (!sampler.rewrites_scores()) continue;
    const SamplerRewrite rewrite = sampler.rewrite_for(cases[r].context);
    const auto bias_base = static_cast<int32_t>(flat.biases.size());
    flat.biases.insert(flat.biases.end(), rewrite.biases.begin(), rewrite.biases.end());
    for (const TokenRewrite& t : rewrite.tokens) {
      flat.entries.push_back({first_row + static_cast<int32_t>(r), t.token, t.count,
                              bias_base + t.first_bias, t.num_biases,
                              static_cast<int32_t>(flat.penalties.size())});
    }
    flat.penalties.push_back(rewrite.penalties);
  }
  if (flat.biases.empty()) flat.biases.push_back(0.0f);  // a valid pointer
  return flat;
}

std::vector<float> rewrite_on_device(DeviceArray<float>& rows, const Flat& flat, int32_t first_row,
                                     int32_t num_rows, int64_t vocab, int64_t stride) {
  DeviceArray<RowRewriteEntry> entries(flat.entries);
  DeviceArray<float> biases(flat.biases);
  DeviceArray<PenaltyParams> penalties(flat.penalties);
  RowRewriteParams p;
  p.num_entries = static_cast<int32_t>(flat.entries.size());
  p.entries = entries.get();
  p.biases = biases.get();
  p.penalties = penalties.get();
  p.first_row = first_row;
  p.num_rows = num_rows;
  p.vocab = vocab;
  p.logits = rows.get();
  p.stride = stride;
  EXPECT_TRUE(launch_row_rewrite(p, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return rows.download();
}

TEST(RowRewriteKernelTest, RewrittenRowsAreTheSamplersBitForBit) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 32003;
  const int64_t stride = 32016;
  const std::vector<float> logits = random_floats(static_cast<size_t>(6 * stride), 91, 4.0f);
  const std::vector<RowCase> cases = row_cases(logits, vocab, stride);
  DeviceArray<float> rows(logits);
  const std::vector<float> got = rewrite_on_device(rows, flatten(cases, 0), 0, 6, vocab, stride);
  int changed = 0;
  for (size_t r = 0; r < cases.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const std::span<const float> raw(logits.data() + r * stride, static_cast<size_t>(vocab));
    const std::vector<float> want = host_rewrite(raw, cases[r]);
    for (int64_t i = 0; i < vocab; ++i) {
      const float g = got[r * stride + i];
      changed += g != raw[static_cast<size_t>(i)];
      if (g != want[static_cast<size_t>(i)]) {
        ADD_FAILURE() << "token " << i << ": " << g << " against the host's "
                      << want[static_cast<size_t>(i)] << " (raw " << raw[static_cast<size_t>(i)]
                      << ")";
        break;
      }
    }
    for (int64_t i = vocab; i < stride; ++i) {
      EXPECT_EQ(got[r * stride + i], logits[r * stride + i]) << "padding written";
    }
  }
  EXPECT_GT(changed, 5 * 30) << "the samplers rewrote almost nothing";
}

TEST(RowRewriteKernelTest, TheDrawFromARewrittenRowIsTheSamplersFromTheRawRow) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 32003;
  const std::vector<float> logits = random_floats(static_cast<size_t>(6 * vocab), 92, 4.0f);
  const std::vector<RowCase> cases = row_cases(logits, vocab, vocab);
  int drawn_differently = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    DeviceArray<float> rows(logits);
    rewrite_on_device(rows, flatten(cases, 0), 0, 6, vocab, vocab);
    std::vector<RowCandidatesAsk> asks(cases.size());
    for (size_t r = 0; r < cases.size(); ++r) {
      const SamplingParams& p = cases[r].params;
      asks[r].temperature = p.temperature;
      asks[r].draw = 1;
      asks[r].cuts = listed_draw_params(p);
      asks[r].seed = seed;
      asks[r].position = static_cast<int64_t>(cases[r].context.size());
    }
    DeviceArray<RowCandidatesAsk> asks_dev(asks);
    DeviceArray<RowCandidatesSummary> out(cases.size());
    RowCandidatesParams listing;
    listing.num_rows = static_cast<int32_t>(cases.size());
    listing.vocab = vocab;
    listing.logits = rows.get();
    listing.stride = vocab;
    listing.asks = asks_dev.get();
    listing.out = out.get();
    ASSERT_TRUE(launch_row_candidates(listing, nullptr).ok());
    RowDrawParams drawing;
    drawing.num_rows = listing.num_rows;
    drawing.vocab = vocab;
    drawing.logits = rows.get();
    drawing.stride = vocab;
    drawing.asks = asks_dev.get();
    drawing.summaries = out.get();
    ASSERT_TRUE(launch_row_draw(drawing, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<RowCandidatesSummary> summaries = out.download();
    for (size_t r = 0; r < cases.size(); ++r) {
      const std::span<const float> raw(logits.data() + r * vocab, static_cast<size_t>(vocab));
      Sampler with(cases[r].params, seed);
      const StatusOr<int32_t> want = with.sample(raw, cases[r].context);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      EXPECT_EQ(summaries[r].drawn, *want) << "row " << r;
      SamplingParams plain = cases[r].params;
      plain.logit_bias.clear();
      plain.repetition_penalty = 1.0f;
      plain.presence_penalty = 0.0f;
      plain.frequency_penalty = 0.0f;
      Sampler without(plain, seed);
      drawn_differently += *without.sample(raw, cases[r].context) != *want;
    }
  }
  // The rewrites matter: without them several draws would have been other tokens.
  EXPECT_GE(drawn_differently, 4);
}

TEST(RowRewriteKernelTest, EntriesPastTheLaunchsRowsOrVocabularyAreSkipped) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 500;
  const std::vector<float> logits = random_floats(static_cast<size_t>(3 * vocab), 93, 2.0f);
  Flat flat;
  flat.biases = {1.0f, 2.0f};
  flat.penalties = {PenaltyParams{2.0f, 0.5f, 0.25f}};
  // A call holding output rows 10-12: rows 9 and 13 are another call's, token 500 is past the
  // vocabulary, -1 before it.
  flat.entries = {{9, 1, 1, 0, 1, 0},   {10, 2, 1, 0, 1, 0},   {11, 500, 2, 0, 2, 0},
                  {12, -1, 1, 0, 0, 0}, {12, 499, 3, 1, 1, 0}, {13, 3, 1, 0, 2, 0}};
  DeviceArray<float> rows(logits);
  const std::vector<float> got = rewrite_on_device(rows, flat, 10, 3, vocab, vocab);
  std::vector<float> want = logits;
  const auto penalize = [](float score, int32_t count) {
    score = score > 0.0f ? score / 2.0f : score * 2.0f;
    return score - (0.5f + static_cast<float>(count) * 0.25f);
  };
  want[0 * vocab + 2] = penalize(want[0 * vocab + 2] + 1.0f, 1);
  want[2 * vocab + 499] = penalize(want[2 * vocab + 499] + 2.0f, 3);
  EXPECT_EQ(got, want);
}

TEST(RowRewriteKernelTest, BadShapesAreRefused) {
  RowRewriteParams p;
  p.num_entries = 1;
  p.num_rows = 1;
  p.vocab = 10;
  p.stride = 5;
  EXPECT_EQ(launch_row_rewrite(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.stride = 10;  // and null pointers
  EXPECT_EQ(launch_row_rewrite(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_entries = -1;
  EXPECT_EQ(launch_row_rewrite(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_entries = 0;
  EXPECT_TRUE(launch_row_rewrite(p, nullptr).ok()) << "no entries: nothing to launch";
}

}  // namespace
}  // namespace cellm::kernels
