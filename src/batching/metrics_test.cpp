#include "batching/metrics.h"

#include <gtest/gtest.h>

namespace cellm {
namespace {

TEST(LatencyStatsTest, CountsMeanAndExtremesAreExactPercentilesClose) {
  LatencyStats stats;
  EXPECT_EQ(stats.summary().count, 0);
  for (int64_t us = 1; us <= 1000; ++us) stats.add(us);
  const LatencySummary s = stats.summary();
  EXPECT_EQ(s.count, 1000);
  EXPECT_EQ(s.total_us, 500500);
  EXPECT_DOUBLE_EQ(s.mean_us, 500.5);
  EXPECT_EQ(s.min_us, 1);
  EXPECT_EQ(s.max_us, 1000);
  // Buckets are 1/16 octave wide: within 5% of the exact percentile.
  EXPECT_NEAR(s.p50_us, 500, 25);
  EXPECT_NEAR(s.p90_us, 900, 45);
  EXPECT_NEAR(s.p99_us, 990, 50);
  EXPECT_LE(s.p99_us, s.max_us);
}

TEST(LatencyStatsTest, ZeroAndNegativeSamplesCountAsZero) {
  LatencyStats stats;
  stats.add(0);
  stats.add(-5);
  const LatencySummary s = stats.summary();
  EXPECT_EQ(s.count, 2);
  EXPECT_EQ(s.max_us, 0);
  EXPECT_EQ(s.p50_us, 0);
}

TEST(FormatReportTest, NamesTheFiguresPeopleLookFor) {
  EngineMetrics m;
  m.num_generated_tokens = 96;
  m.elapsed_us = 2'000'000;
  m.generated_tokens_per_s = 48.0;
  m.num_preemptions = 3;
  m.num_refusals = 1;
  m.pool_max_cells = 600;
  m.pool_peak_used_cells = 599;
  const std::string report = format_report(m);
  for (const char* words : {"48.0 tokens/s", "time to first token", "inter-token latency",
                            "3 preemptions", "1 refused", "peak 599", "of 600 cells"}) {
    EXPECT_NE(report.find(words), std::string::npos) << "missing '" << words << "' in\n" << report;
  }
}

}  // namespace
}  // namespace cellm
