// End to end on stories260K and the CudaExecutor, randomized (tests/support/chaos_workload.h):
// sixteen conversations at once through one Runner in a pool too small for all of them — prefix
// reuse (clones of device cells), preemption, forks, restarts, cancellations (the batch-1
// run-ahead step dropped among them), sampling drawn on the device, stop tokens and strings, the
// pool growing — and each turn delivers exactly what a solo session on another CudaExecutor
// computing its whole context delivers. The executors run as `cellm` runs them (device argmax,
// graphs, run-ahead). CELLM_CHAOS_SEEDS=N runs seeds 1..N; the device check runs 2, not under
// memcheck (thousands of steps; every kernel they launch is checked by the other suites).
#include <gtest/gtest.h>

#include "backends/cuda/cuda_e2e_support.h"
#include "chaos_workload.h"
#include "tokenizer/tokenizer.h"

namespace cellm {
namespace {

std::unique_ptr<CudaExecutor> make_chaos_executor(const Program& program, int32_t max_step_tokens,
                                                  int32_t min_prefill_chunk,
                                                  std::vector<int32_t> decode_widths,
                                                  int32_t max_cells, int32_t max_sessions) {
  ProgramSpec spec = testing::with_plan(program.spec(), max_step_tokens, min_prefill_chunk,
                                        std::move(decode_widths));
  spec.kv_max_cells = max_cells;
  CudaExecutorOptions options;
  options.max_sessions = max_sessions;
  options.device_argmax = true;  // as `cellm` runs it
  return testing::make_cuda(program, spec, options);
}

class CudaChaosTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device()); }
};

TEST_P(CudaChaosTest, EveryTurnDeliversItsSoloTokensWhateverTheInterleaving) {
  const auto seed = static_cast<uint32_t>(GetParam());
  const testing::chaos::Shape shape = testing::chaos::random_shape(seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": " + shape.describe());
  const Program& program = testing::stories260k();
  std::unique_ptr<CudaExecutor> executor =
      make_chaos_executor(program, shape.max_step_tokens, shape.min_prefill_chunk,
                          shape.decode_widths, shape.max_cells, shape.max_sessions);
  ASSERT_NE(executor, nullptr);
  const testing::chaos::WorkloadResult result =
      testing::chaos::run_workload(*executor, program.tokenizer(), shape, seed);
  std::unique_ptr<CudaExecutor> solo =
      make_chaos_executor(program, 16, 5, {1, 2, 4}, testing::chaos::kMaxContext + 64, 4);
  ASSERT_NE(solo, nullptr);
  testing::chaos::expect_solo_results(result, *solo, program.tokenizer(), seed);
}

INSTANTIATE_TEST_SUITE_P(Seeds, CudaChaosTest,
                         ::testing::Range(1, 1 + testing::chaos::num_seeds(2)));

}  // namespace
}  // namespace cellm
