// The row_draw kernel against the host's sampler: after row_candidates lists a row, every draw the
// list leaves undecided is drawn from the whole row on the device, and it must be the token
// batching/sampler.h's sample() draws from the same row with the same cuts, seed and position —
// over flat rows (nothing decides from 64 candidates), wide ones, ties everywhere, non-finite
// logits, peaked rows whose terms underflow, padded strides and vocabularies shorter than the
// cluster. Rows the list decided, or that ask no draw, are left as the candidates wrote them.
#include "backends/cuda/kernels/row_draw.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/kernels/kernel_test_support.h"
#include "backends/cuda/kernels/row_candidates.cuh"
#include "batching/sampler.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

// One row's ask in the test: which logits row it reads, at what temperature, with which cuts.
struct Case {
  int64_t row = 0;
  float temperature = 1.0f;
  ListedDrawParams cuts;
  bool draws = true;
};

// The cut sets every row is drawn with: none, a nucleus, min-p, top-k past the list, all three,
// a top-k past the vocabulary, and a top-k inside the list (decided by the list: left alone).
const std::vector<ListedDrawParams>& cut_sets() {
  static const std::vector<ListedDrawParams> sets = {
      {0, 1.0f, 0.0f},      {0, 0.9f, 0.0f},   {0, 1.0f, 0.05f},       {100, 1.0f, 0.0f},
      {1000, 0.95f, 0.01f}, {0, 0.5f, 0.001f}, {1 << 20, 0.97f, 0.0f}, {20, 1.0f, 0.0f}};
  return sets;
}

struct Drawn {
  std::vector<RowCandidatesSummary> listed;  // after row_candidates
  std::vector<RowCandidatesSummary> drawn;   // after row_draw
};

Drawn run_kernels(const std::vector<float>& logits, int64_t vocab, int64_t stride,
                  const std::vector<Case>& cases) {
  // Each case reads its own copy of its row, so that every row index of the launch is one case.
  std::vector<float> rows;
  std::vector<RowCandidatesAsk> asks;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto* row = logits.data() + cases[c].row * stride;
    rows.insert(rows.end(), row, row + stride);
    RowCandidatesAsk ask;
    ask.temperature = cases[c].temperature;
    ask.draw = cases[c].draws ? 1 : 0;
    ask.cuts = cases[c].cuts;
    ask.seed = 500 + c;
    ask.position = static_cast<int64_t>(3 * c + 1);
    asks.push_back(ask);
  }
  DeviceArray<float> rows_dev(rows);
  DeviceArray<RowCandidatesAsk> asks_dev(asks);
  DeviceArray<RowCandidatesSummary> out(cases.size());
  EXPECT_EQ(cudaMemset(out.get(), 0xff, out.size() * sizeof(RowCandidatesSummary)), cudaSuccess);
  RowCandidatesParams listing;
  listing.num_rows = static_cast<int32_t>(cases.size());
  listing.vocab = vocab;
  listing.logits = rows_dev.get();
  listing.stride = stride;
  listing.asks = asks_dev.get();
  listing.out = out.get();
  EXPECT_TRUE(launch_row_candidates(listing, nullptr).ok());
  Drawn result;
  result.listed = out.download();
  RowDrawParams drawing;
  drawing.num_rows = listing.num_rows;
  drawing.vocab = vocab;
  drawing.logits = rows_dev.get();
  drawing.stride = stride;
  drawing.asks = asks_dev.get();
  drawing.summaries = out.get();
  EXPECT_TRUE(launch_row_draw(drawing, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  result.drawn = out.download();
  return result;
}

// Every case's token against sample() on its row; returns how many the row draw made.
int expect_host_draws(const std::vector<float>& logits, int64_t vocab, int64_t stride,
                      const std::vector<Case>& cases) {
  const Drawn got = run_kernels(logits, vocab, stride, cases);
  int from_row = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + " (row " + std::to_string(cases[c].row) + ", T " +
                 std::to_string(cases[c].temperature) + ", top-k " +
                 std::to_string(cases[c].cuts.top_k) + ", top-p " +
                 std::to_string(cases[c].cuts.top_p) + ", min-p " +
                 std::to_string(cases[c].cuts.min_p) + ")");
    const RowCandidatesSummary& listed = got.listed[c];
    const RowCandidatesSummary& drawn = got.drawn[c];
    const bool undecided = listed.drawn == kListedUndecided;
    if (!cases[c].draws || !undecided || listed.num <= 0) {
      EXPECT_EQ(std::memcmp(&listed, &drawn, sizeof(listed)), 0) << "a row not to draw written";
      continue;
    }
    if (drawn.drawn_from_row != 1 || drawn.drawn < 0 || drawn.drawn >= vocab) {
      ADD_FAILURE() << "an undecided row not drawn, or drawn out of range: " << drawn.drawn;
      continue;
    }
    ++from_row;
    const std::span<const float> row(logits.data() + cases[c].row * stride,
                                     static_cast<size_t>(vocab));
    SamplingParams params;
    params.temperature = cases[c].temperature;
    params.top_k = cases[c].cuts.top_k;
    params.top_p = cases[c].cuts.top_p;
    params.min_p = cases[c].cuts.min_p;
    Sampler sampler(params, 500 + c);
    const StatusOr<int32_t> want = sampler.sample(row, std::vector<int32_t>(3 * c + 1, 0));
    EXPECT_EQ(drawn.drawn, want.ok() ? *want : kNoToken) << want.status().to_string();
    EXPECT_EQ(drawn.drawn_logit, row[static_cast<size_t>(drawn.drawn)]);
    // Only the draw's three fields change.
    RowCandidatesSummary rest = drawn;
    rest.drawn = listed.drawn;
    rest.drawn_from_row = listed.drawn_from_row;
    rest.drawn_logit = listed.drawn_logit;
    EXPECT_EQ(std::memcmp(&rest, &listed, sizeof(rest)), 0) << "the list changed";
  }
  return from_row;
}

// Every row of `num_rows` at each temperature with each cut set; every seventh case asks no draw.
std::vector<Case> every_case(int64_t num_rows, const std::vector<float>& temperatures) {
  std::vector<Case> cases;
  for (int64_t r = 0; r < num_rows; ++r) {
    for (const float t : temperatures) {
      for (const ListedDrawParams& cuts : cut_sets()) {
        Case c{r, t, cuts, true};
        c.draws = cases.size() % 7 != 6;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

TEST(RowDrawKernelTest, UndecidedDrawsAreTheSamplersOnA128KVocabulary) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 128256;
  // Rows 0-1: flat (no list of 64 decides); 2: a wide spread; 3: peaked, its terms underflow at a
  // low temperature; 4-7: the edge rows (non-finite near the top, nothing finite, three finite,
  // all equal); 8: ties across the cluster's parts at the top.
  std::vector<float> logits = random_floats(static_cast<size_t>(9 * vocab), 71, 1.0f);
  const auto at = [&](int64_t r, int64_t i) -> float& { return logits[r * vocab + i]; };
  for (int64_t i = 0; i < vocab; ++i) at(2, i) *= 12.0f;
  for (int64_t i = 0; i < vocab; ++i) at(3, i) *= 40.0f;
  testing::plant_edge_rows(logits, vocab, 4);
  for (int64_t k = 0; k < 3000; ++k) at(8, (k * 7919) % vocab) = 2.0f;
  const int from_row = expect_host_draws(logits, vocab, vocab, every_case(9, {1.0f, 0.7f, 2.0f}));
  // Flat rows at every cut set but the top-k inside the list, at three temperatures: most cases.
  EXPECT_GE(from_row, 60);
}

TEST(RowDrawKernelTest, PaddedRowsAndShortVocabularies) {
  CELLM_REQUIRE_DEVICE();
  // A padded stride (the padding never ranks), a vocabulary of uneven parts, one shorter than the
  // list, and one shorter than the cluster (empty parts).
  for (const auto& [vocab, stride] :
       {std::pair<int64_t, int64_t>{32003, 32016}, {300, 300}, {9, 9}, {8192 + 5, 8192 + 5}}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    std::vector<float> logits = random_floats(static_cast<size_t>(3 * stride), 72, 1.0f);
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t i = vocab; i < stride; ++i) logits[r * stride + i] = 1e30f;
    }
    if (vocab > 2) testing::plant_tie_and_sparse_rows(logits, stride, 1);
    for (int64_t r = 1; r < 3; ++r) {
      for (int64_t i = vocab; i < stride; ++i) logits[r * stride + i] = 1e30f;
    }
    const int from_row = expect_host_draws(logits, vocab, stride, every_case(3, {1.0f, 0.5f}));
    if (vocab > kMaxCandidates) {
      EXPECT_GE(from_row, 8);
    }
  }
}

TEST(RowDrawKernelTest, BadShapesAreRefused) {
  RowDrawParams p;
  p.num_rows = 1;
  p.vocab = 10;
  p.stride = 5;
  EXPECT_EQ(launch_row_draw(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.stride = 10;  // and null pointers
  EXPECT_EQ(launch_row_draw(p, nullptr).code(), StatusCode::kInvalidArgument);
  static float logits[10];
  static RowCandidatesAsk ask[1];
  static RowCandidatesSummary summary;
  p.logits = logits;
  p.asks = ask;
  p.summaries = &summary;
  p.vocab = kRowDrawMaxVocab + 1;  // past what the cluster's shared memory holds
  p.stride = p.vocab;
  EXPECT_EQ(launch_row_draw(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.num_rows = 0;
  p.vocab = 10;
  EXPECT_TRUE(launch_row_draw(p, nullptr).ok()) << "no rows: nothing to launch";
}

}  // namespace
}  // namespace cellm::kernels
