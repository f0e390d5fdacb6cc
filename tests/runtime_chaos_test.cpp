// End to end on stories260K and the CpuExecutor, randomized (tests/support/chaos_workload.h):
// sixteen conversations at once through one Runner in a pool too small for all of them — prefix
// reuse, preemption, forks, restarts, cancellations, sampling, stop tokens and strings — and each
// turn delivers exactly what a solo session computing its whole context delivers; shut down
// part-way, every turn ends with a prefix of that.
// CELLM_CHAOS_SEEDS=N runs seeds 1..N (a soak, about a second a seed); CI runs 6, and one under
// TSan (a minute or two).
#include <gtest/gtest.h>

#include "chaos_workload.h"
#include "runtime_e2e_util.h"
#include "sanitizers.h"
#include "tokenizer/tokenizer.h"

namespace cellm {
namespace {

// Under ThreadSanitizer a seed takes a minute or so: the TSan job runs one.
constexpr int kDefaultSeeds = testing::kThreadSanitizer ? 1 : 6;

class RuntimeChaosTest : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeChaosTest, EveryTurnDeliversItsSoloTokensWhateverTheInterleaving) {
  const auto seed = static_cast<uint32_t>(GetParam());
  const testing::chaos::Shape shape = testing::chaos::random_shape(seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": " + shape.describe());
  const Tokenizer& tokenizer = testing::stories260k().tokenizer();
  std::unique_ptr<CpuExecutor> executor =
      testing::make_executor({shape.max_step_tokens, shape.min_prefill_chunk, shape.decode_widths,
                              shape.max_cells, shape.max_sessions});
  const testing::chaos::WorkloadResult result =
      testing::chaos::run_workload(*executor, tokenizer, shape, seed);
  std::unique_ptr<CpuExecutor> solo = testing::make_executor({16, 5, {1, 2, 4}});
  testing::chaos::expect_solo_results(result, *solo, tokenizer, seed);
}

// The same workload, the runner shut down part-way (5-400 ms in; a seed's workload takes about
// a second): every turn ends, none with more than its solo tokens, and every thread returns.
TEST_P(RuntimeChaosTest, AShutdownMidWorkloadEndsEveryTurnWithAPrefixOfItsSoloTokens) {
  const auto seed = static_cast<uint32_t>(GetParam());
  const testing::chaos::Shape shape = testing::chaos::random_shape(seed);
  const int32_t shutdown_after_ms = static_cast<int32_t>(5 + (seed * 7919) % 396);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": " + shape.describe() + ", shutdown after " +
               std::to_string(shutdown_after_ms) + " ms");
  const Tokenizer& tokenizer = testing::stories260k().tokenizer();
  std::unique_ptr<CpuExecutor> executor =
      testing::make_executor({shape.max_step_tokens, shape.min_prefill_chunk, shape.decode_widths,
                              shape.max_cells, shape.max_sessions});
  const testing::chaos::WorkloadResult result =
      testing::chaos::run_workload(*executor, tokenizer, shape, seed, shutdown_after_ms);
  std::unique_ptr<CpuExecutor> solo = testing::make_executor({16, 5, {1, 2, 4}});
  testing::chaos::expect_solo_results(result, *solo, tokenizer, seed, /*shut_down=*/true);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RuntimeChaosTest,
                         ::testing::Range(1, 1 + testing::chaos::num_seeds(kDefaultSeeds)));

}  // namespace
}  // namespace cellm
