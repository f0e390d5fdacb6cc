#include "batching/step_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace cellm {
namespace {

using Widths = std::vector<int32_t>;

SliceCall P(int32_t begin, int32_t n) { return {SliceMethod::kPrefill, begin, n, n}; }
SliceCall D(int32_t begin, int32_t n = 1, int32_t width = 1) {
  return {SliceMethod::kDecode, begin, n, width};
}

std::vector<SliceCall> plan(int32_t total, int32_t w, int32_t m, const Widths& widths = {1}) {
  return plan_slices(total, w, m, widths);
}

TEST(StepPlanTest, TheIssuesCasesWithWidthOne) {
  using Calls = std::vector<SliceCall>;
  EXPECT_EQ(plan(0, 8, 2), Calls{});
  EXPECT_EQ(plan(1, 8, 2), (Calls{D(0)}));
  EXPECT_EQ(plan(2, 8, 2), (Calls{P(0, 2)}));
  EXPECT_EQ(plan(8, 8, 2), (Calls{P(0, 8)}));
  EXPECT_EQ(plan(9, 8, 2), (Calls{P(0, 8), D(8)}));
  EXPECT_EQ(plan(10, 8, 2), (Calls{P(0, 8), P(8, 2)}));
  EXPECT_EQ(plan(16, 8, 2), (Calls{P(0, 8), P(8, 8)}));
  EXPECT_EQ(plan(4, 8, 5), (Calls{D(0), D(1), D(2), D(3)}));
  EXPECT_EQ(plan(5, 8, 5), (Calls{P(0, 5)}));
  EXPECT_EQ(plan(11, 8, 5), (Calls{P(0, 8), D(8), D(9), D(10)}));
}

TEST(StepPlanTest, ShortSlicesRunAsFewPaddedDecodeCalls) {
  using Calls = std::vector<SliceCall>;
  EXPECT_EQ(plan(3, 8, 5, {1, 2, 4, 8}), (Calls{D(0, 3, 4)}));  // one padded row
  EXPECT_EQ(plan(11, 8, 5, {1, 2, 4, 8}), (Calls{P(0, 8), D(8, 3, 4)}));
  EXPECT_EQ(plan(4, 8, 5, {1, 2, 4, 8}), (Calls{D(0, 4, 4)}));
  EXPECT_EQ(plan(1, 8, 5, {1, 2, 4, 8}), (Calls{D(0, 1, 1)}));
  EXPECT_EQ(plan(3, 8, 5, {1, 2}), (Calls{D(0, 2, 2), D(2, 1, 1)}));
  EXPECT_EQ(plan(7, 16, 8, {1, 4}), (Calls{D(0, 4, 4), D(4, 3, 4)}));
  EXPECT_EQ(plan(2, 8, 3, {1, 8}), (Calls{D(0, 2, 8)}));
}

TEST(StepPlanTest, PrefillOfExactlyMinChunkAndOneOfEveryToken) {
  using Calls = std::vector<SliceCall>;
  EXPECT_EQ(plan(3, 1, 1), (Calls{P(0, 1), P(1, 1), P(2, 1)}));
  EXPECT_EQ(plan(13, 4, 4), (Calls{P(0, 4), P(4, 4), P(8, 4), D(12)}));
}

TEST(StepPlanTest, BadParametersAreNamed) {
  EXPECT_TRUE(validate_slice_params(8, 2, Widths{1, 2, 8}).ok());
  EXPECT_EQ(validate_slice_params(8, 0, Widths{1}).code(), StatusCode::kInvalidArgument);
  EXPECT_NE(validate_slice_params(4, 5, Widths{1}).message().find("max_step_tokens"),
            std::string::npos);
  EXPECT_FALSE(validate_slice_params(8, 2, Widths{}).ok());
  EXPECT_FALSE(validate_slice_params(8, 2, Widths{2, 4}).ok());
  EXPECT_FALSE(validate_slice_params(8, 2, Widths{1, 4, 4}).ok());
  EXPECT_FALSE(validate_slice_params(8, 2, Widths{1, 4, 2}).ok());
  EXPECT_NE(validate_slice_params(8, 2, Widths{1, 16}).message().find("16"), std::string::npos);
}

TEST(StepPlanTest, SlicesAlwaysCoverTheStepContiguouslyWithinTheRules) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    const int32_t w = 1 + static_cast<int32_t>(rng() % 40);
    const int32_t m = 1 + static_cast<int32_t>(rng() % w);
    Widths widths = {1};
    for (int32_t width = 2; width <= w; ++width) {
      if (rng() % 4 == 0) widths.push_back(width);
    }
    const int32_t total = static_cast<int32_t>(rng() % 200);
    SCOPED_TRACE("total " + std::to_string(total) + " W " + std::to_string(w) + " m " +
                 std::to_string(m) + " widest " + std::to_string(widths.back()));
    const std::vector<SliceCall> calls = plan_slices(total, w, m, widths);

    int32_t next = 0;
    int32_t num_prefill = 0;
    int32_t num_decode = 0;
    int32_t num_decode_tokens = 0;
    for (const SliceCall& call : calls) {
      ASSERT_EQ(call.begin, next);
      ASSERT_GE(call.num_tokens, 1);
      ASSERT_LE(call.num_tokens, call.width);
      ASSERT_LE(call.width, w);
      if (call.method == SliceMethod::kPrefill) {
        ASSERT_EQ(num_decode, 0) << "a prefill after a decode";
        ASSERT_EQ(call.width, call.num_tokens);
        ASSERT_GE(call.num_tokens, m);
        ++num_prefill;
      } else {
        // The smallest static width that holds it.
        int32_t smallest = 0;
        for (int32_t width : widths) {
          if (width >= call.num_tokens) {
            smallest = width;
            break;
          }
        }
        ASSERT_EQ(call.width, smallest);
        ++num_decode;
        num_decode_tokens += call.num_tokens;
      }
      next += call.num_tokens;
    }
    ASSERT_EQ(next, total);
    // Full W-slices are prefills; only the remainder may be short.
    const int32_t rest = total % w;
    const bool short_rest = rest > 0 && rest < m;
    ASSERT_EQ(num_prefill, total / w + (rest >= m && rest > 0 ? 1 : 0));
    ASSERT_EQ(num_decode_tokens, short_rest ? rest : 0);
    const int32_t widest = widths.back();
    ASSERT_EQ(num_decode, short_rest ? (rest + widest - 1) / widest : 0) << "not the fewest calls";
    for (size_t i = 0; i + 1 < calls.size(); ++i) {
      if (calls[i].method == SliceMethod::kPrefill) {
        ASSERT_EQ(calls[i].num_tokens, w);
      }
    }
  }
}

}  // namespace
}  // namespace cellm
