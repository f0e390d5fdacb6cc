// The CUDA executor's own contract on stories260K: limits come from the program, bad programs
// and unsupported weights are clear errors at initialize(), nothing runs before it, and the
// factory of cuda_backend.h builds a working executor.
#include "backends/cuda/cuda_executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_e2e_support.h"

namespace cellm {
namespace {

class CudaExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
    model_ = testing::open_model("stories260K.gguf");
  }
  Status initialize(const ProgramSpec& spec, const CudaExecutorOptions& options = {},
                    const ModelWeights* weights = nullptr) {
    CudaExecutor executor(model_->config(), weights != nullptr ? *weights : model_->weights(), spec,
                          options);
    return executor.initialize();
  }
  std::unique_ptr<Program> model_;
};

TEST_F(CudaExecutorTest, LimitsComeFromTheProgramAndNothingIsHeldUpFront) {
  auto executor = testing::make_cuda(*model_, model_->spec());
  ASSERT_NE(executor, nullptr);
  const ExecutorLimits limits = executor->limits();
  EXPECT_EQ(limits.max_step_tokens, 512);
  EXPECT_EQ(limits.min_prefill_chunk, 5);
  EXPECT_EQ(limits.max_session_tokens, model_->spec().max_context_len);
  EXPECT_EQ(limits.vocab_size, 512);
  const CacheUsage usage = executor->cache_usage();
  EXPECT_EQ(usage.max_cells, 65536);
  EXPECT_EQ(usage.num_free, 65536);
  EXPECT_EQ(usage.high_water, 0);
  const KvPoolMetrics pool = executor->kv_metrics();
  EXPECT_GE(pool.num_rows, 1) << "the scratch row";
  EXPECT_LT(pool.mapped_bytes, pool.reserved_bytes) << "the pool grows with use";
}

TEST_F(CudaExecutorTest, ExecuteBeforeInitializeIsAnError) {
  CudaExecutor executor(model_->config(), model_->weights(), model_->spec());
  const StatusOr<BatchOutput> output = executor.execute(BatchInput{}, true);
  ASSERT_FALSE(output.ok());
  EXPECT_EQ(output.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(CudaExecutorTest, InitializeRejectsABadProgramOrOptions) {
  ProgramSpec widths = model_->spec();
  widths.decode_widths = {2, 4};
  EXPECT_EQ(initialize(widths).code(), StatusCode::kInvalidArgument);
  ProgramSpec last = model_->spec();
  last.logits_to_keep_mode = LogitsToKeepMode::kLast;
  EXPECT_EQ(initialize(last).code(), StatusCode::kUnimplemented);
  CudaExecutorOptions too_long;
  too_long.max_session_tokens = model_->spec().max_context_len + 1;
  EXPECT_EQ(initialize(model_->spec(), too_long).code(), StatusCode::kInvalidArgument);
  CudaExecutorOptions no_sessions;
  no_sessions.max_sessions = 0;
  EXPECT_FALSE(initialize(model_->spec(), no_sessions).ok());
}

TEST_F(CudaExecutorTest, AWeightTypeTheKernelsLackIsAnErrorNamingTheTensor) {
  ModelWeights weights = model_->weights();
  weights.layers[2].w_down.type = TensorType::kQ5_1;
  const Status status = initialize(model_->spec(), {}, &weights);
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << status.to_string();
  EXPECT_NE(status.message().find("blk.2.ffn_down.weight"), std::string::npos)
      << status.to_string();
}

TEST_F(CudaExecutorTest, LogitsAreAViewOfThePinnedRowsValidUntilTheNextStep) {
  auto executor = testing::make_cuda(*model_, model_->spec());
  ASSERT_NE(executor, nullptr);
  const SessionId a = *executor->open_session();
  const SessionId b = *executor->open_session();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 488};
  BatchInput batch;
  batch.inputs.push_back(testing::step_input(a, 0, prompt, 0, 6, true));
  batch.inputs.push_back(testing::step_input(b, 0, prompt, 0, 3, true));
  const StatusOr<BatchOutput> output = executor->execute(batch, true);
  ASSERT_TRUE(output.ok()) << output.status().to_string();
  ASSERT_EQ(output->outputs.size(), 2u);
  EXPECT_EQ(output->vocab_size, 512);
  EXPECT_EQ(output->logits.size(), 2u * 512u);
  EXPECT_EQ(output->logits.data(), executor->last_logits().data()) << "copied, not viewed";
  EXPECT_EQ(output->outputs[0].greedy_token, kNoToken) << "no device argmax asked for";
  // The rows are the CPU oracle's.
  auto cpu = testing::make_cpu(*model_, model_->spec());
  BatchInput same = batch;
  same.inputs[0].session = *cpu->open_session();
  same.inputs[1].session = *cpu->open_session();
  const StatusOr<BatchOutput> expected = cpu->execute(same, true);
  ASSERT_TRUE(expected.ok());
  EXPECT_LE(testing::max_abs_diff(output->logits, expected->logits), 1e-3f);
}

TEST_F(CudaExecutorTest, StepTimingMeasuresTheDevicePartOfEachStepOnlyWhenAsked) {
  for (const bool timed : {false, true}) {
    CudaExecutorOptions options;
    options.time_steps = timed;
    CudaExecutor executor(model_->config(), model_->weights(), model_->spec(), options);
    ASSERT_TRUE(executor.initialize().ok());
    const SessionId session = *executor.open_session();
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 488};
    int32_t pos = 0;
    for (int32_t step = 0; step < 3; ++step) {  // a prefill call, then decode graphs
      const int32_t length = step == 0 ? 6 : 1;
      BatchInput batch;
      const std::span<const int32_t> tokens =
          std::span<const int32_t>(prompt).subspan(step == 0 ? 0 : step, length);
      batch.inputs.push_back(testing::step_input(session, pos, tokens, 0, length, true));
      const auto start = std::chrono::steady_clock::now();
      const StatusOr<BatchOutput> output = executor.execute(batch, true);
      const double wall_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      ASSERT_TRUE(output.ok()) << output.status().to_string();
      pos += length;
      const double device_ms = executor.stats().last_step_device_ms;
      if (timed) {
        EXPECT_GT(device_ms, 0.0) << "step " << step;
        EXPECT_LE(device_ms, wall_ms) << "step " << step << ": the device part of a step";
      } else {
        EXPECT_EQ(device_ms, 0.0) << "no events without time_steps";
      }
    }
  }
}

TEST_F(CudaExecutorTest, TheFactoryBuildsAnExecutorThatRunsAStep) {
  ASSERT_TRUE(cuda_device_available()) << cuda_device_summary();
  StatusOr<std::unique_ptr<Executor>> made = make_cuda_executor(
      model_->config(), model_->weights(), model_->spec(), CudaExecutorOptions{});
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  Executor& executor = **made;
  ASSERT_TRUE(executor.initialize().ok());
  EXPECT_EQ(executor.initialize().code(), StatusCode::kFailedPrecondition) << "twice";
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const testing::GreedyRun run = testing::run_greedy(executor, prompt, 3);
  EXPECT_EQ(run.tokens.size(), 3u);
  CudaExecutorOptions exact;
  exact.int8_activations = false;
  StatusOr<std::unique_ptr<Executor>> exact_made =
      make_cuda_executor(model_->config(), model_->weights(), model_->spec(), exact);
  ASSERT_TRUE(exact_made.ok()) << exact_made.status().to_string();
  ASSERT_TRUE((*exact_made)->initialize().ok());
  EXPECT_EQ(testing::run_greedy(**exact_made, prompt, 3).tokens, run.tokens)
      << "stories260K has f32 weights: int8 activations never apply";
  std::printf("device: %s\n", cuda_device_summary().c_str());
}

}  // namespace
}  // namespace cellm
