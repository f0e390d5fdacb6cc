#include "backends/cpu/cpu_executor.h"

#include <gtest/gtest.h>

#include <vector>

#include "backends/cpu/cpu_model.h"
#include "test_models.h"

namespace cellm {
namespace {

class CpuExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<CpuModel> model = CpuModel::open(testing::test_model_path("stories260K.gguf"));
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    model_ = std::make_unique<CpuModel>(std::move(model).value());
  }

  ProgramSpec plan(int32_t max_step_tokens, int32_t min_prefill_chunk,
                   std::vector<int32_t> decode_widths) const {
    ProgramSpec spec = model_->spec;
    spec.max_step_tokens = max_step_tokens;
    spec.min_prefill_chunk = min_prefill_chunk;
    spec.decode_widths = std::move(decode_widths);
    return spec;
  }

  std::unique_ptr<CpuExecutor> executor(const ProgramSpec& spec,
                                        const CpuExecutorOptions& options = {}) const {
    auto executor = std::make_unique<CpuExecutor>(model_->config, model_->weights, spec, options);
    const Status status = executor->initialize();
    EXPECT_TRUE(status.ok()) << status.to_string();
    return executor;
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

  std::unique_ptr<CpuModel> model_;
};

TEST_F(CpuExecutorTest, DefaultsForAPlainModelComeFromTheProgram) {
  EXPECT_TRUE(model_->spec_is_default);
  auto ex = executor(model_->spec);
  const ExecutorLimits limits = ex->limits();
  EXPECT_EQ(limits.max_step_tokens, 512);
  EXPECT_EQ(limits.min_prefill_chunk, 5);
  EXPECT_EQ(limits.max_session_tokens, model_->spec.max_context_len);
  EXPECT_EQ(limits.vocab_size, 512);
  EXPECT_EQ(ex->preferred_batch_tokens(), 512);
  const CacheUsage usage = ex->cache_usage();
  EXPECT_EQ(usage.max_cells, 65536);
  EXPECT_EQ(usage.num_free, 65536);
  EXPECT_EQ(usage.high_water, 0);
  EXPECT_EQ(ex->kv_storage_bytes(), 0u) << "storage grows with use, not up front";
}

TEST_F(CpuExecutorTest, ExecuteBeforeInitializeIsAnError) {
  CpuExecutor ex(model_->config, model_->weights, model_->spec);
  const StatusOr<BatchOutput> output = ex.execute(BatchInput{}, true);
  ASSERT_FALSE(output.ok());
  EXPECT_EQ(output.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(CpuExecutorTest, InitializeRejectsABadProgramOrOptions) {
  const auto initialize = [&](const ProgramSpec& spec, const CpuExecutorOptions& options) {
    CpuExecutor ex(model_->config, model_->weights, spec, options);
    return ex.initialize();
  };
  EXPECT_FALSE(initialize(plan(4, 5, {1}), {}).ok()) << "W < m";
  EXPECT_FALSE(initialize(plan(8, 2, {2, 4}), {}).ok()) << "decode widths not from 1";
  EXPECT_FALSE(initialize(plan(8, 2, {1, 16}), {}).ok()) << "decode width past W";
  ProgramSpec wrong_vocab = model_->spec;
  wrong_vocab.vocab_size = 100;
  EXPECT_FALSE(initialize(wrong_vocab, {}).ok());
  CpuExecutorOptions too_long;
  too_long.max_session_tokens = model_->spec.max_context_len + 1;
  const Status status = initialize(model_->spec, too_long);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  CpuExecutorOptions no_sessions;
  no_sessions.max_sessions = 0;
  EXPECT_FALSE(initialize(model_->spec, no_sessions).ok());
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

TEST_F(CpuExecutorTest, OutputsWithoutLogitsStillAdvanceTheSession) {
  std::vector<int32_t> tokens;
  auto with_logits = executor(model_->spec);
  const StatusOr<BatchOutput> expected = run_prompt(*with_logits, 9, true, tokens);
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(expected->logits.size(), 512u);

  auto ex = executor(model_->spec);
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
  EXPECT_EQ(again->logits, expected->logits);
}

TEST_F(CpuExecutorTest, SessionVerbsReachTheSessionTable) {
  CpuExecutorOptions options;
  options.max_sessions = 2;
  auto ex = executor(model_->spec, options);
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

}  // namespace
}  // namespace cellm
