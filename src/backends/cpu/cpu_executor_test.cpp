#include "backends/cpu/cpu_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "cpu_executor_testing.h"

namespace cellm {
namespace {

class CpuExecutorTest : public ::testing::Test {
 protected:
  ProgramSpec plan(int32_t max_step_tokens, int32_t min_prefill_chunk,
                   std::vector<int32_t> decode_widths) const {
    return testing::with_plan(program_.spec(), max_step_tokens, min_prefill_chunk,
                              std::move(decode_widths));
  }

  std::unique_ptr<CpuExecutor> executor(const ProgramSpec& spec,
                                        const CpuExecutorOptions& options = {}) const {
    return testing::make_executor(program_, spec, options);
  }

  // Runs `n` tokens (ids 3, 4, ...) on a new session in one input keeping its last row.
  StatusOr<BatchOutput> run_prompt(CpuExecutor& executor, int32_t n, bool return_logits,
                                   std::vector<int32_t>& tokens) const {
    tokens.clear();
    for (int32_t i = 0; i < n; ++i) tokens.push_back(3 + i);
    const std::optional<SessionId> session = executor.open_session();
    EXPECT_TRUE(session.has_value());
    BatchInput batch;
    batch.inputs.push_back({*session, 0, tokens, 0, n, true});
    return executor.execute(batch, return_logits);
  }

  const Program& program_ = testing::stories260k();
  const ModelConfig& config_ = program_.config();
  const ModelWeights& weights_ = program_.weights();
};

TEST_F(CpuExecutorTest, DefaultsForAPlainModelComeFromTheProgram) {
  EXPECT_TRUE(program_.uses_default_spec());
  auto ex = executor(program_.spec());
  const ExecutorLimits limits = ex->limits();
  EXPECT_EQ(limits.max_step_tokens, 512);
  EXPECT_EQ(limits.min_prefill_chunk, 5);
  EXPECT_EQ(limits.max_session_tokens, program_.spec().max_context_len);
  EXPECT_EQ(limits.vocab_size, 512);
  EXPECT_EQ(ex->preferred_batch_tokens(), 512);
  const CacheUsage usage = ex->cache_usage();
  EXPECT_EQ(usage.max_cells, 65536);
  EXPECT_EQ(usage.num_free, 65536);
  EXPECT_EQ(usage.high_water, 0);
  EXPECT_EQ(ex->kv_storage_bytes(), 0u) << "storage grows with use, not up front";
}

TEST_F(CpuExecutorTest, ExecuteBeforeInitializeIsAnError) {
  CpuExecutor ex(config_, weights_, program_.spec());
  const StatusOr<BatchOutput> output = ex.execute(BatchInput{}, true);
  ASSERT_FALSE(output.ok());
  EXPECT_EQ(output.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(CpuExecutorTest, InitializeRejectsABadProgramOrOptions) {
  const auto initialize = [&](const ProgramSpec& spec, const CpuExecutorOptions& options) {
    CpuExecutor ex(config_, weights_, spec, options);
    return ex.initialize();
  };
  EXPECT_FALSE(initialize(plan(4, 5, {1}), {}).ok()) << "W < m";
  EXPECT_FALSE(initialize(plan(8, 2, {2, 4}), {}).ok()) << "decode widths not from 1";
  EXPECT_FALSE(initialize(plan(8, 2, {1, 16}), {}).ok()) << "decode width past W";
  ProgramSpec wrong_vocab = program_.spec();
  wrong_vocab.vocab_size = 100;
  EXPECT_FALSE(initialize(wrong_vocab, {}).ok());
  CpuExecutorOptions too_long;
  too_long.max_session_tokens = program_.spec().max_context_len + 1;
  const Status status = initialize(program_.spec(), too_long);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  CpuExecutorOptions no_sessions;
  no_sessions.max_sessions = 0;
  EXPECT_FALSE(initialize(program_.spec(), no_sessions).ok());
  CpuExecutorOptions too_many_threads;  // refused, not a pool that aborts on its count
  too_many_threads.num_threads = static_cast<int32_t>(ThreadPool::kMaxThreads) + 1;
  EXPECT_EQ(initialize(program_.spec(), too_many_threads).code(), StatusCode::kInvalidArgument);
}

TEST_F(CpuExecutorTest, CallsFollowTheSlicePlan) {
  std::vector<int32_t> tokens;
  // W=8, m=2: 10 tokens are prefill 8 + prefill 2.
  auto ex = executor(plan(8, 2, {1}));
  ASSERT_TRUE(run_prompt(*ex, 10, true, tokens).ok());
  EXPECT_EQ(ex->stats().num_prefill_calls, 2);
  EXPECT_EQ(ex->stats().num_decode_calls, 0);
  // m=5: 11 tokens are prefill 8 + three width-1 decodes.
  ex = executor(plan(8, 5, {1}));
  ASSERT_TRUE(run_prompt(*ex, 11, true, tokens).ok());
  EXPECT_EQ(ex->stats().num_prefill_calls, 1);
  EXPECT_EQ(ex->stats().num_decode_calls, 3);
  EXPECT_EQ(ex->stats().num_padding_rows, 0);
  // With widths {1, 2, 4, 8} the three decodes are one width-4 call with one padded row.
  ex = executor(plan(8, 5, {1, 2, 4, 8}));
  ASSERT_TRUE(run_prompt(*ex, 11, true, tokens).ok());
  EXPECT_EQ(ex->stats().num_prefill_calls, 1);
  EXPECT_EQ(ex->stats().num_decode_calls, 1);
  EXPECT_EQ(ex->stats().num_padding_rows, 1);
  EXPECT_EQ(ex->stats().num_tokens, 11);
  EXPECT_EQ(ex->stats().num_steps, 1);
}

TEST_F(CpuExecutorTest, TheRecommendedPlanRunsShortSlicesAsPaddedDecodesWithTheSameLogits) {
  std::vector<int32_t> tokens;
  auto oracle = executor(plan(512, 5, {1}));  // one 200-token prefill
  const StatusOr<BatchOutput> expected = run_prompt(*oracle, 200, true, tokens);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  EXPECT_EQ(oracle->stats().num_prefill_calls, 1);
  // W 512, m 257, widths 1 ... 256: the 200 tokens are one decode call padded to 256 rows.
  auto ex = executor(plan(512, 257, recommended_decode_widths(512)));
  const StatusOr<BatchOutput> got = run_prompt(*ex, 200, true, tokens);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(ex->stats().num_prefill_calls, 0);
  EXPECT_EQ(ex->stats().num_decode_calls, 1);
  EXPECT_EQ(ex->stats().num_padding_rows, 56);
  EXPECT_LE(testing::max_abs_diff(got->logits, expected->logits), 1e-5f);
  // 300 tokens reach m: one prefill call.
  auto wide = executor(plan(512, 257, recommended_decode_widths(512)));
  ASSERT_TRUE(run_prompt(*wide, 300, true, tokens).ok());
  EXPECT_EQ(wide->stats().num_prefill_calls, 1);
  EXPECT_EQ(wide->stats().num_decode_calls, 0);
}

TEST_F(CpuExecutorTest, OutputsWithoutLogitsStillAdvanceTheSession) {
  std::vector<int32_t> tokens;
  auto with_logits = executor(program_.spec());
  const StatusOr<BatchOutput> expected = run_prompt(*with_logits, 9, true, tokens);
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(expected->logits.size(), 512u);

  auto ex = executor(program_.spec());
  const StatusOr<BatchOutput> output = run_prompt(*ex, 9, false, tokens);
  ASSERT_TRUE(output.ok()) << output.status().to_string();
  ASSERT_EQ(output->outputs.size(), 1u);
  EXPECT_EQ(output->outputs[0].token, kNoToken);
  EXPECT_EQ(output->outputs[0].row, 0);
  EXPECT_TRUE(output->logits.empty());
  const SessionId session = output->outputs[0].session;
  EXPECT_EQ(*ex->session_length(session), 9);
  EXPECT_EQ(ex->cache_usage().high_water, 9);
  EXPECT_GT(ex->kv_storage_bytes(), 0u);
  // Rewinding the last position and re-running it gives the row the first executor kept, so
  // K/V of every token were written.
  BatchInput batch;
  batch.inputs.push_back({session, 0, tokens, 8, 9, true});
  const StatusOr<BatchOutput> again = ex->execute(batch, true);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_TRUE(std::ranges::equal(again->logits, expected->logits));
}

TEST_F(CpuExecutorTest, SessionVerbsReachTheSessionTable) {
  CpuExecutorOptions options;
  options.max_sessions = 2;
  auto ex = executor(program_.spec(), options);
  std::vector<int32_t> tokens;
  const StatusOr<BatchOutput> output = run_prompt(*ex, 6, true, tokens);
  ASSERT_TRUE(output.ok()) << output.status().to_string();
  const SessionId first = output->outputs.at(0).session;
  ASSERT_EQ(*ex->session_length(first), 6);
  const StatusOr<SessionId> clone = ex->clone_session(first, 4);
  ASSERT_TRUE(clone.ok()) << clone.status().to_string();
  EXPECT_EQ(*ex->session_length(*clone), 4);
  EXPECT_EQ(ex->cache_usage().num_free, 65536 - 6) << "a clone shares its cells";
  EXPECT_FALSE(ex->open_session().has_value()) << "max_sessions reached";
  EXPECT_TRUE(ex->rewind_session(first, 2).ok());
  EXPECT_EQ(ex->cache_usage().num_free, 65536 - 4);
  EXPECT_TRUE(ex->close_session(*clone).ok());
  EXPECT_EQ(ex->cache_usage().num_free, 65536 - 2);
  EXPECT_EQ(ex->close_session(*clone).code(), StatusCode::kNotFound);
  EXPECT_EQ(ex->session_length(*clone).status().code(), StatusCode::kNotFound);
}

// Everything a failed step must leave as it was: each session's length and cells, the pool.
struct SessionState {
  std::vector<int32_t> lengths;
  std::vector<std::vector<int32_t>> cells;
  int32_t num_free = 0;
  int32_t high_water = 0;
  bool operator==(const SessionState&) const = default;
};

// NOLINTNEXTLINE(readability-identifier-naming): the name GoogleTest looks for
void PrintTo(const SessionState& state, std::ostream* os) {
  *os << "lengths " << ::testing::PrintToString(state.lengths) << ", cells "
      << ::testing::PrintToString(state.cells) << ", " << state.num_free << " free, high water "
      << state.high_water;
}

SessionState session_state(const CpuExecutor& ex, const std::vector<SessionId>& sessions) {
  SessionState state;
  for (const SessionId id : sessions) {
    state.lengths.push_back(*ex.session_length(id));
    state.cells.push_back(*ex.session_cells(id));
  }
  state.num_free = ex.cache_usage().num_free;
  state.high_water = ex.cache_usage().high_water;
  return state;
}

TEST_F(CpuExecutorTest, AFailedStepThatRewoundLeavesEverySessionExactlyAsItWas) {
  // W=8, m=2: the failing batch of 9 tokens is a prefill call of 8 and a decode call of 1.
  const ProgramSpec spec = plan(8, 2, {1});
  const std::vector<int32_t> history_a = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  const std::vector<int32_t> history_b = {20, 21, 22, 23, 24};
  const std::vector<int32_t> redo_a = {40, 41, 42, 43, 44, 45};  // a from position 4
  const std::vector<int32_t> more_b = {50, 51, 52};
  const std::vector<int32_t> next = {60};
  for (const int64_t failing_call : {0, 1}) {
    SCOPED_TRACE("the step's call " + std::to_string(failing_call) + " fails");
    int64_t fail_at = -1;  // the executor's call index to fail; -1 = none
    CpuExecutorOptions options;
    options.after_call_for_test = [&fail_at](int64_t call) {
      return call == fail_at ? internal_error("injected fault") : ok_status();
    };
    auto ex = executor(spec, options);
    auto control = executor(spec);
    std::vector<SessionId> sessions;
    for (CpuExecutor* e : {ex.get(), control.get()}) {
      const SessionId a = *e->open_session();
      const SessionId b = *e->open_session();
      sessions = {a, b};  // the same ids on both fresh executors
      BatchInput history;
      history.inputs = {{a, 0, history_a, 0, 12, true}, {b, 0, history_b, 0, 5, true}};
      ASSERT_TRUE(e->execute(history, false).ok());
    }
    const SessionId a = sessions[0];
    const SessionId b = sessions[1];
    const SessionState before = session_state(*ex, sessions);

    BatchInput step;  // a rewinds from 12 to 4 (dropping 8 cells), b continues
    step.inputs = {{a, 4, redo_a, 0, 6, true}, {b, 5, more_b, 0, 3, true}};
    fail_at = ex->stats().num_prefill_calls + ex->stats().num_decode_calls + failing_call;
    const StatusOr<BatchOutput> failed = ex->execute(step, true);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.status().message().find("injected fault"), std::string::npos)
        << failed.status().to_string();
    EXPECT_EQ(session_state(*ex, sessions), before)
        << "a failed step changed a session's length or cells, or the pool";
    EXPECT_EQ(ex->stats().num_steps, 1);

    // The sessions then continue exactly like the control's, which never saw the failure.
    fail_at = -1;
    for (const BatchInput& batch :
         {step, BatchInput{{{a, 10, next, 0, 1, true}, {b, 8, next, 0, 1, true}}}}) {
      const StatusOr<BatchOutput> got = ex->execute(batch, true);
      const StatusOr<BatchOutput> expected = control->execute(batch, true);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_TRUE(expected.ok()) << expected.status().to_string();
      EXPECT_TRUE(std::ranges::equal(got->logits, expected->logits));
      EXPECT_EQ(session_state(*ex, sessions), session_state(*control, sessions));
    }
  }
}

}  // namespace
}  // namespace cellm
