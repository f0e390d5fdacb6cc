#include "backends/cuda/kernels/decode_ring_timeline.h"

#include <gtest/gtest.h>

#include "backends/cuda/kernels/decode_ring_bench.h"

namespace cellm::kernels {
namespace {

constexpr int kLayers = 2;
constexpr int kBlocks = 2;
constexpr int kStages = 4 * kLayers;

// A made-up timeline (ns): stage s's barrier releases block b at 1000 s + 100 + 10 b; b's input
// is ready 20 ns after its previous release, its tiles take 500 + 100 b, the handover 30 (its
// first warp's own part 12); its consumers waited 200 cycles at 0.5 ns per cycle; block 1 holds 6
// tiles, block 0 four. The first layer's tiles take a million ns: the summary must leave that layer
// out.
std::vector<uint64_t> made_up_timeline(uint64_t start_ns = 0) {
  std::vector<uint64_t> words(static_cast<size_t>(kStages + 1) * kBlocks * RingTimeline::kFields);
  const auto at = [&](int row, int b, int field) -> uint64_t& {
    return words[(static_cast<size_t>(row) * kBlocks + b) * RingTimeline::kFields + field];
  };
  for (int b = 0; b < kBlocks; ++b) {
    at(kStages, b, RingTimeline::kStartNs) = start_ns;
    at(kStages, b, RingTimeline::kStartCycles) = 1000;
    at(kStages, b, RingTimeline::kEndNs) = start_ns + 100000;
    at(kStages, b, RingTimeline::kEndCycles) = 201000;
    for (int s = 0; s < kStages; ++s) {
      const uint64_t released_before = start_ns + (s == 0 ? 0 : 1000 * (s - 1) + 100 + 10 * b);
      const uint64_t work = s < 4 ? 1000000 : 500 + 100 * b;
      at(s, b, RingTimeline::kReady) = released_before + 20;
      at(s, b, RingTimeline::kTilesDone) = released_before + 20 + work;
      at(s, b, RingTimeline::kHandedOwn) = released_before + 20 + work + 12;
      at(s, b, RingTimeline::kHanded) = released_before + 20 + work + 30;
      at(s, b, RingTimeline::kPassed) = start_ns + 1000 * s + 100 + 10 * b;
      at(s, b, RingTimeline::kWaitCycles) = 200;
      at(s, b, RingTimeline::kTiles) = b == 0 ? 4 : 6;
    }
  }
  return words;
}

TEST(RingTimelineTest, SummaryTellsWhereEachKindOfStageSpendsItsTimeAfterTheFirstLayer) {
  // The second start is a real globaltimer reading (ns since 1970): beyond a double's exact
  // integers, so the summary must subtract before it converts.
  for (const uint64_t start_ns : {uint64_t{0}, uint64_t{1764640000123456789}}) {
    const RingTimelineSummary summary =
        summarize_ring_timeline(made_up_timeline(start_ns), kLayers, kBlocks);
    const std::vector<RingStageTimes>& kinds = summary.kinds;
    ASSERT_EQ(kinds.size(), 4u);
    EXPECT_NEAR(summary.sm_clock_ghz, 2.0, 1e-9);
    EXPECT_EQ(summary.timer_step_ns, 12.0);
    for (const RingStageTimes& k : kinds) {
      EXPECT_EQ(k.num_stages, 1);
      EXPECT_NEAR(k.stage_us, 1.0, 1e-9);
      EXPECT_NEAR(k.input_us, 0.020, 1e-9);
      EXPECT_NEAR(k.work_us, 0.550, 1e-9);
      EXPECT_NEAR(k.work_max_us, 0.600, 1e-9);
      EXPECT_NEAR(k.wait_us, 0.100, 1e-9);
      EXPECT_NEAR(k.handover_own_us, 0.012, 1e-9);
      EXPECT_NEAR(k.handover_us, 0.030, 1e-9);
      EXPECT_NEAR(k.last_after_mean_us, 0.055, 1e-9);
      // The first release (block 0, 1000 s + 100) after the last handover (block 1).
      EXPECT_NEAR(k.barrier_us, 0.340, 1e-9);
      EXPECT_NEAR(k.last_tiles_ratio, 1.2, 1e-9);
    }
    const std::string table = format_ring_timeline(summary);
    EXPECT_NE(table.find("gate|up"), std::string::npos);
    EXPECT_NE(table.find("a layer       4.00"), std::string::npos) << table;
  }
}

TEST(RingTimelineTest, WordsOfTheWrongSizeGiveAnEmptySummary) {
  std::vector<uint64_t> words = made_up_timeline();
  words.pop_back();
  for (const RingStageTimes& k : summarize_ring_timeline(words, kLayers, kBlocks).kinds) {
    EXPECT_EQ(k.num_stages, 0);
  }
}

}  // namespace
}  // namespace cellm::kernels
