// Parity of the row_logprobs kernel with the host's summarize_logprobs (its oracle) on random
// rows, planted ties, non-finite logits and rows with fewer finite logits than asked.
#include "backends/cuda/kernels/row_logprobs.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/kernels/kernel_test_support.h"
#include "batching/token_logprobs.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

struct RowCase {
  int32_t num_top;
  int32_t scored;
};

void expect_summaries_equal(const std::vector<float>& logits, int64_t vocab, int64_t stride,
                            const std::vector<RowCase>& cases,
                            const std::vector<RowLogprobsSummary>& got, int run);

// Runs the kernel on `rows` rows of `vocab` logits (row stride `stride`) and compares every
// summary with summarize_logprobs of the same row; rows with num_top -1 must stay untouched.
void expect_host_summaries(const std::vector<float>& logits, int64_t vocab, int64_t stride,
                           const std::vector<RowCase>& cases, bool split) {
  const auto rows = static_cast<int32_t>(cases.size());
  std::vector<int32_t> num_top;
  std::vector<int32_t> scored;
  for (const RowCase& c : cases) {
    num_top.push_back(c.num_top);
    scored.push_back(c.scored);
  }
  DeviceArray<float> logits_dev(logits);
  DeviceArray<int32_t> num_top_dev(num_top);
  DeviceArray<int32_t> scored_dev(scored);
  DeviceArray<RowLogprobsSummary> out(static_cast<size_t>(rows));
  RowLogprobsParams p;
  p.num_rows = rows;
  p.vocab = vocab;
  p.logits = logits_dev.get();
  p.stride = stride;
  p.num_top = num_top_dev.get();
  p.scored = scored_dev.get();
  p.out = out.get();
  // Split: each row over several blocks merged through the scratch, twice (the first launch must
  // leave it ready for the next).
  DeviceArray<uint8_t> scratch(split ? row_logprobs_scratch_bytes(rows) : 0);
  if (split) {
    ASSERT_EQ(cudaMemset(scratch.get(), 0, scratch.size()), cudaSuccess);
    p.scratch = scratch.get();
    p.scratch_bytes = scratch.size();
  }
  for (int run = 0; run < (split ? 2 : 1); ++run) {
    ASSERT_EQ(cudaMemset(out.get(), 0xff, out.size() * sizeof(RowLogprobsSummary)), cudaSuccess);
    ASSERT_TRUE(launch_row_logprobs(p, nullptr).ok());
    expect_summaries_equal(logits, vocab, stride, cases, out.download(), run);
  }
}

void expect_summaries_equal(const std::vector<float>& logits, int64_t vocab, int64_t stride,
                            const std::vector<RowCase>& cases,
                            const std::vector<RowLogprobsSummary>& got, int run) {
  const auto rows = static_cast<int32_t>(cases.size());
  for (int32_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r) + ", run " + std::to_string(run));
    if (cases[r].num_top < 0) {
      RowLogprobsSummary untouched;
      std::memset(&untouched, 0xff, sizeof(untouched));
      EXPECT_EQ(std::memcmp(&got[r], &untouched, sizeof(untouched)), 0) << "a skipped row written";
      continue;
    }
    const std::span<const float> row(logits.data() + r * stride, static_cast<size_t>(vocab));
    const RowLogprobs want = summarize_logprobs(row, cases[r].scored, cases[r].num_top);
    EXPECT_EQ(got[r].max_logit, want.max_logit);
    EXPECT_NEAR(got[r].log_sum_exp, want.log_sum_exp, 2e-6 * std::fabs(want.log_sum_exp) + 1e-7);
    if (std::isnan(want.scored_logit)) {
      EXPECT_TRUE(std::isnan(got[r].scored_logit));
    } else {
      EXPECT_EQ(got[r].scored_logit, want.scored_logit);
    }
    ASSERT_EQ(got[r].num_top, static_cast<int32_t>(want.top.size()));
    for (int32_t k = 0; k < got[r].num_top; ++k) {
      EXPECT_EQ(got[r].top_ids[k], want.top[k].first) << "rank " << k;
      EXPECT_EQ(got[r].top_logits[k], want.top[k].second) << "rank " << k;
    }
  }
}

TEST(RowLogprobsKernelTest, SummariesMatchTheHostOnA128KVocabulary) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 128256;
  const std::vector<RowCase> cases = {{5, 17},  {20, kNoToken}, {-1, 3}, {0, 128255},
                                      {1, 0},   {20, 99},       {20, 7}, {3, 70000},
                                      {20, 11}, {12, 4000}};
  std::vector<float> logits = random_floats(static_cast<size_t>(cases.size() * vocab), 91, 8.0f);
  const auto at = [&](int r, int64_t i) -> float& { return logits[r * vocab + i]; };
  // Row 5: ties across threads and tiles at the top (the lower id first).
  for (const int64_t i : {100000, 70000, 4097, 4096, 255, 1}) at(5, i) = 40.0f;
  // Rows 6-9: non-finite values near the top with the best last; nothing finite; three finite
  // logits (fewer than asked); every logit equal.
  testing::plant_edge_rows(logits, vocab, 6);
  for (const bool split : {false, true}) {
    SCOPED_TRACE(split ? "split over blocks" : "a block per row");
    expect_host_summaries(logits, vocab, vocab, cases, split);
  }
}

TEST(RowLogprobsKernelTest, AnOddVocabularyWithPaddedRowsAndAWideSpread) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 32003;
  const int64_t stride = 32016;
  const std::vector<RowCase> cases = {{20, 32002}, {4, 0}, {7, kNoToken}};
  std::vector<float> logits = random_floats(static_cast<size_t>(cases.size() * stride), 92, 1.0f);
  for (size_t r = 0; r < cases.size(); ++r) {
    for (int64_t i = 0; i < stride; ++i) {
      float& v = logits[r * stride + i];
      v = i < vocab ? v * 150.0f - 140.0f : 1e30f;  // padding past the vocabulary never ranks
    }
  }
  for (const bool split : {false, true}) {
    SCOPED_TRACE(split ? "split over blocks" : "a block per row");
    expect_host_summaries(logits, vocab, stride, cases, split);
  }
}

// One block holding the whole row (at most 8,192 logits: also the split launch's), and a row just
// long enough to split into a full part and a one-value one; ties everywhere (more values at the
// floor than are ranked by counting) and a row of three finite logits in each.
TEST(RowLogprobsKernelTest, VocabulariesOfOneHeldPartAndJustPastIt) {
  CELLM_REQUIRE_DEVICE();
  for (const int64_t vocab : {512, 8192, 8193}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const std::vector<RowCase> cases = {{20, 3}, {5, kNoToken}, {20, 0}, {2, 1}};
    std::vector<float> logits = random_floats(static_cast<size_t>(4 * vocab), 96, 8.0f);
    testing::plant_tie_and_sparse_rows(logits, vocab, 2);
    for (const bool split : {false, true}) {
      SCOPED_TRACE(split ? "split over blocks" : "a block per row");
      expect_host_summaries(logits, vocab, vocab, cases, split);
    }
  }
}

TEST(RowLogprobsKernelTest, BadShapesAreRefused) {
  RowLogprobsParams p;
  p.num_rows = 1;
  p.vocab = 10;
  p.stride = 5;
  EXPECT_EQ(launch_row_logprobs(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.stride = 10;  // and null pointers
  EXPECT_EQ(launch_row_logprobs(p, nullptr).code(), StatusCode::kInvalidArgument);
  // Every pointer set, but a scratch too small for the row: refused before anything reads them.
  alignas(16) static uint8_t small[16];
  static float logits[10];
  static int32_t asks[1];
  static RowLogprobsSummary summary;
  p.logits = logits;
  p.num_top = asks;
  p.scored = asks;
  p.out = &summary;
  p.scratch = small;
  p.scratch_bytes = sizeof(small);
  EXPECT_EQ(launch_row_logprobs(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.scratch_bytes = row_logprobs_scratch_bytes(1);
  p.scratch = small + 4;  // large enough (claimed) but unaligned
  EXPECT_EQ(launch_row_logprobs(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.scratch = nullptr;
  p.scratch_bytes = 0;
  p.num_rows = 0;
  EXPECT_TRUE(launch_row_logprobs(p, nullptr).ok()) << "no rows: nothing to launch";
}

}  // namespace
}  // namespace cellm::kernels
