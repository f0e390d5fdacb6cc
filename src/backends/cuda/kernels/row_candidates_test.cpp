// Parity of the row_candidates kernel with the host's sampling_candidates (its oracle) on random
// rows at several temperatures, planted ties, non-finite logits, rows with fewer finite logits
// than the list holds and padded rows, with a block per row and split over blocks; the
// sampler's draws from the device's candidates against its draws from the rows; and the token the
// device draws from its list against the sampler's draws from the list and from the row.
#include "backends/cuda/kernels/row_candidates.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/kernels/kernel_test_support.h"
#include "batching/sampler.h"

namespace cellm::kernels {
namespace {

using testing::DeviceArray;
using testing::random_floats;

static_assert(kMaxCandidates == kSamplingCandidates, "the device lists what the sampler reads");

// Row r's ask: its temperature, and a draw with one of four sets of cuts (none, a top-k inside
// the list, a nucleus, a top-k past the list with min-p and a nucleus) at its own seed and
// position; every fifth row asks for no draw.
RowCandidatesAsk ask_of(size_t r, float temperature) {
  constexpr ListedDrawParams kCuts[4] = {
      {0, 1.0f, 0.0f}, {20, 1.0f, 0.0f}, {0, 0.9f, 0.0f}, {kMaxCandidates + 8, 0.95f, 0.05f}};
  RowCandidatesAsk ask;
  ask.temperature = temperature;
  ask.draw = r % 5 == 4 ? 0 : 1;
  ask.cuts = kCuts[r % 4];
  ask.seed = 1000 + r;
  ask.position = static_cast<int64_t>(7 * r + 3);
  return ask;
}

// Split: each row over several blocks merged through the scratch, launched twice (the first
// launch must leave the scratch ready for the second) — the second launch's lists returned.
std::vector<RowCandidatesSummary> run_kernel(const std::vector<float>& logits, int64_t vocab,
                                             int64_t stride, const std::vector<float>& temperatures,
                                             bool split) {
  const auto rows = static_cast<int32_t>(temperatures.size());
  std::vector<RowCandidatesAsk> asks;
  for (size_t r = 0; r < temperatures.size(); ++r) asks.push_back(ask_of(r, temperatures[r]));
  DeviceArray<float> logits_dev(logits);
  DeviceArray<RowCandidatesAsk> asks_dev(asks);
  DeviceArray<RowCandidatesSummary> out(static_cast<size_t>(rows));
  EXPECT_EQ(cudaMemset(out.get(), 0xff, out.size() * sizeof(RowCandidatesSummary)), cudaSuccess);
  RowCandidatesParams p;
  p.num_rows = rows;
  p.vocab = vocab;
  p.logits = logits_dev.get();
  p.stride = stride;
  p.asks = asks_dev.get();
  p.out = out.get();
  DeviceArray<uint8_t> scratch(split ? row_candidates_scratch_bytes(rows) : 0);
  if (split) {
    EXPECT_EQ(cudaMemset(scratch.get(), 0, scratch.size()), cudaSuccess);
    p.scratch = scratch.get();
    p.scratch_bytes = scratch.size();
  }
  for (int run = 0; run < (split ? 2 : 1); ++run) {
    EXPECT_TRUE(launch_row_candidates(p, nullptr).ok());
    if (run == 0 && split) {  // the second launch must write every asked row again
      EXPECT_EQ(cudaMemset(out.get(), 0xff, out.size() * sizeof(RowCandidatesSummary)),
                cudaSuccess);
    }
  }
  return out.download();
}

RowCandidates as_host(const RowCandidatesSummary& s) {
  RowCandidates c;
  c.max_logit = s.max_logit;
  c.temperature = s.temperature;
  c.total = s.total;
  for (int32_t k = 0; k < s.num; ++k) c.top.emplace_back(s.ids[k], s.logits[k]);
  return c;
}

// How many of the rows that asked for a draw the device's list decided, and how many it did not.
struct DrawCounts {
  int decided = 0;
  int undecided = 0;
};

// Every row's summary against sampling_candidates of the same row; rows at temperature <= 0
// must stay untouched. Then a sampler at each row's temperature draws from both at many
// positions: a draw the device's candidates decide is the one the row gives. The device's own
// draw (ask_of's cuts, seed and position) is the sampler's from the device's list, and, when
// decided, the sampler's from the row.
void expect_host_candidates(const std::vector<float>& logits, int64_t vocab, int64_t stride,
                            const std::vector<float>& temperatures, bool split,
                            DrawCounts* counts = nullptr) {
  SCOPED_TRACE(split ? "split over blocks" : "a block per row");
  const std::vector<RowCandidatesSummary> got =
      run_kernel(logits, vocab, stride, temperatures, split);
  for (size_t r = 0; r < temperatures.size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    if (!(temperatures[r] > 0.0f)) {
      RowCandidatesSummary untouched;
      std::memset(&untouched, 0xff, sizeof(untouched));
      EXPECT_EQ(std::memcmp(&got[r], &untouched, sizeof(untouched)), 0) << "a skipped row written";
      continue;
    }
    const std::span<const float> row(logits.data() + r * stride, static_cast<size_t>(vocab));
    const RowCandidates want = sampling_candidates(row, temperatures[r]);
    const RowCandidates have = as_host(got[r]);
    EXPECT_EQ(have.max_logit, want.max_logit);
    EXPECT_EQ(have.temperature, want.temperature);
    const RowCandidatesAsk ask = ask_of(r, temperatures[r]);
    const bool has_total = ask.cuts.top_k <= 0;  // a top-k: no draw reads the total
    if (has_total) {
      // The same terms summed in another order: within the bound of a sum of `vocab` terms in
      // double (n · 2^-52 of the sum; the host's sequential sum is the less accurate one).
      EXPECT_NEAR(have.total, want.total, static_cast<double>(vocab) * 0x1p-52 * want.total);
    } else {
      EXPECT_TRUE(std::isnan(have.total)) << "a total the draw never reads: " << have.total;
    }
    EXPECT_EQ(have.top, want.top);
    if (want.top.empty() || ask.draw == 0) {
      EXPECT_EQ(got[r].drawn, kListedUndecided) << "a draw from no list, or not asked for";
    } else {
      SamplingParams cut;
      cut.temperature = temperatures[r];
      cut.top_k = ask.cuts.top_k;
      cut.top_p = ask.cuts.top_p;
      cut.min_p = ask.cuts.min_p;
      const Sampler drawer(cut, ask.seed);
      const std::optional<int32_t> host = drawer.sample_from_candidates(have, ask.position);
      EXPECT_EQ(got[r].drawn, host.value_or(kListedUndecided)) << "the device's draw";
      if (host.has_value()) {
        Sampler whole(cut, ask.seed);
        const StatusOr<int32_t> sampled =
            whole.sample(row, std::vector<int32_t>(static_cast<size_t>(ask.position), 0));
        ASSERT_TRUE(sampled.ok());
        EXPECT_EQ(got[r].drawn, *sampled) << "the device's draw against the row's";
      }
      if (counts != nullptr) ++(host.has_value() ? counts->decided : counts->undecided);
    }
    if (want.top.empty()) continue;
    SamplingParams params;  // a nucleus; where the total was left out, under a top-k past the list
    params.temperature = temperatures[r];
    params.top_p = 0.95f;
    params.top_k = has_total ? 0 : kMaxCandidates + 8;
    Sampler sampler(params, 77 + r);
    for (int position = 0; position < 16; ++position) {
      const std::optional<int32_t> decided = sampler.sample_from_candidates(have, position);
      if (!decided.has_value()) continue;
      const StatusOr<int32_t> sampled =
          sampler.sample(row, std::vector<int32_t>(static_cast<size_t>(position), 0));
      ASSERT_TRUE(sampled.ok());
      EXPECT_EQ(*decided, *sampled) << "position " << position;
    }
  }
}

TEST(RowCandidatesKernelTest, CandidatesMatchTheHostOnA128KVocabulary) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 128256;
  const std::vector<float> temperatures = {1.0f, 0.7f, 0.0f, 1.5f, 0.3f,  1.0f,
                                           0.9f, 1.0f, 2.0f, 1.0f, -1.0f, 0.05f};
  const auto rows = static_cast<int64_t>(temperatures.size());
  std::vector<float> logits = random_floats(static_cast<size_t>(rows * vocab), 93, 8.0f);
  const auto at = [&](int r, int64_t i) -> float& { return logits[r * vocab + i]; };
  // Row 5: ties across threads, tiles and parts at the top (the lower id first), more of them than
  // the list holds.
  for (int64_t k = 0; k < kMaxCandidates + 16; ++k) at(5, (k * 3203) % vocab) = 40.0f;
  // Rows 6-9: non-finite values near the top with the best last; nothing finite; three finite
  // logits (fewer than asked); every logit equal.
  testing::plant_edge_rows(logits, vocab, 6);
  // Row 11: a peaked row at a low temperature (terms that underflow).
  at(11, 4242) = 30.0f;
  for (const bool split : {false, true}) {
    DrawCounts counts;
    expect_host_candidates(logits, vocab, vocab, temperatures, split, &counts);
    // Both ways a draw goes: the top-k rows (1, 5), the edge rows 6 and 8 and the peaked row 11
    // (min-p inside the list under a top-k past it) decide, the flat rows 0 and 3 do not.
    EXPECT_GE(counts.decided, 4);
    EXPECT_GE(counts.undecided, 2);
  }
}

TEST(RowCandidatesKernelTest, AnOddVocabularyWithPaddedRowsAndAWideSpread) {
  CELLM_REQUIRE_DEVICE();
  const int64_t vocab = 32003;
  const int64_t stride = 32016;
  const std::vector<float> temperatures = {1.0f, 0.8f, 3.0f};
  std::vector<float> logits =
      random_floats(static_cast<size_t>(temperatures.size() * stride), 94, 1.0f);
  for (size_t r = 0; r < temperatures.size(); ++r) {
    for (int64_t i = 0; i < stride; ++i) {
      float& v = logits[r * stride + i];
      v = i < vocab ? v * 150.0f - 140.0f : 1e30f;  // padding past the vocabulary never ranks
    }
  }
  for (const bool split : {false, true})
    expect_host_candidates(logits, vocab, stride, temperatures, split);
}

// One block holding the whole row (at most 8,192 logits: also the split launch's), and a row just
// long enough to split into a full part and a one-value one; ties everywhere (more values at the
// floor than are ranked by counting) and a row of three finite logits in each.
TEST(RowCandidatesKernelTest, VocabulariesOfOneHeldPartAndJustPastIt) {
  CELLM_REQUIRE_DEVICE();
  for (const int64_t vocab : {512, 8192, 8193}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const std::vector<float> temperatures = {1.0f, 0.7f, 0.8f, 1.0f};
    std::vector<float> logits = random_floats(static_cast<size_t>(4 * vocab), 95, 8.0f);
    testing::plant_tie_and_sparse_rows(logits, vocab, 2);
    for (const bool split : {false, true})
      expect_host_candidates(logits, vocab, vocab, temperatures, split);
  }
}

TEST(RowCandidatesKernelTest, BadShapesAreRefused) {
  RowCandidatesParams p;
  p.num_rows = 1;
  p.vocab = 10;
  p.stride = 5;
  EXPECT_EQ(launch_row_candidates(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.stride = 10;  // and null pointers
  EXPECT_EQ(launch_row_candidates(p, nullptr).code(), StatusCode::kInvalidArgument);
  // Every pointer set, but a scratch too small for the row: refused before anything reads them.
  alignas(16) static uint8_t small[16];
  static float logits[10];
  static RowCandidatesAsk ask[1];
  static RowCandidatesSummary summary;
  p.logits = logits;
  p.asks = ask;
  p.out = &summary;
  p.scratch = small;
  p.scratch_bytes = sizeof(small);
  EXPECT_EQ(launch_row_candidates(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.scratch_bytes = row_candidates_scratch_bytes(1);
  p.scratch = small + 4;  // large enough (claimed) but unaligned
  EXPECT_EQ(launch_row_candidates(p, nullptr).code(), StatusCode::kInvalidArgument);
  p.scratch = nullptr;
  p.scratch_bytes = 0;
  p.num_rows = 0;
  EXPECT_TRUE(launch_row_candidates(p, nullptr).ok()) << "no rows: nothing to launch";
}

}  // namespace
}  // namespace cellm::kernels
