// End to end on the CUDA executor: batching must not change what a session computes. On
// stories260K: 16 concurrent sessions with mixed prompt lengths (the reference prompts among
// them) each produce exactly its solo tokens (the references' for the reference prompts) under
// two slicing plans; graph replay and eager decode agree; closed sessions' cells are reused with
// no change in outputs; the pool growing mid-run changes nothing; CUDA and the CPU oracle agree
// under several slicing plans and cache dtypes; a refused batch changes nothing. (Through the
// Runner: cuda_runner_test.cpp; random models: cuda_random_model_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cuda/cuda_stories_fixture.h"

namespace cellm {
namespace {

using testing::Tokens;

class CudaBatchingTest : public testing::StoriesReferenceTest {};

TEST_F(CudaBatchingTest, SixteenSessionsWithMixedPromptsEachProduceTheirSoloTokens) {
  const std::vector<Tokens> prompts = sixteen_prompts();
  constexpr int32_t kNumSteps = 24;
  // The model's own plan (16 decodes form a 16-token prefill), and a plan where they replay the
  // decode graph of width 16 and long prompts are cut into 64-token prefills.
  for (const ProgramSpec& spec :
       {model_->spec(), testing::with_plan(model_->spec(), 64, 17, {1, 2, 4, 8, 16})}) {
    SCOPED_TRACE("W=" + std::to_string(spec.max_step_tokens) +
                 " m=" + std::to_string(spec.min_prefill_chunk));
    auto solo_executor = testing::make_cuda(*model_, spec);
    ASSERT_NE(solo_executor, nullptr);
    std::vector<testing::GreedyRun> solo;
    for (const Tokens& prompt : prompts) {
      solo.push_back(testing::run_greedy(*solo_executor, prompt, kNumSteps));
    }
    auto executor = testing::make_cuda(*model_, spec);
    ASSERT_NE(executor, nullptr);
    const std::vector<testing::GreedyRun> together =
        testing::run_greedy_together(*executor, prompts, kNumSteps);
    float worst = 0.0f;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(together[i].tokens, solo[i].tokens) << "session " << i;
      if (i < num_reference_cases()) {
        EXPECT_EQ(solo[i].tokens, reference_tokens(i, kNumSteps)) << "reference case " << i;
      }
      worst = std::max(worst, testing::max_abs_diff(together[i].logits, solo[i].logits));
    }
    std::printf("16 sessions vs solo: worst logits diff %.3g\n", static_cast<double>(worst));
    EXPECT_LE(worst, 1e-3f);
    if (spec.min_prefill_chunk == 17) {
      EXPECT_GT(executor->stats().num_graph_launches, kNumSteps - 2)
          << "the 16-wide decodes did not replay a graph";
    }
  }
}

TEST_F(CudaBatchingTest, GraphReplayAndEagerDecodeGiveIdenticalTokens) {
  std::vector<Tokens> prompts = sixteen_prompts();
  prompts.resize(11);  // 11 decodes pad up to the width-16 graph
  const ProgramSpec spec = testing::with_plan(model_->spec(), 64, 17, {1, 2, 4, 8, 16});
  CudaExecutorOptions eager_options;
  eager_options.use_graphs = false;
  auto graphs = testing::make_cuda(*model_, spec);
  auto eager = testing::make_cuda(*model_, spec, eager_options);
  ASSERT_NE(graphs, nullptr);
  ASSERT_NE(eager, nullptr);
  const auto with_graphs = testing::run_greedy_together(*graphs, prompts, 30);
  const auto without = testing::run_greedy_together(*eager, prompts, 30);
  EXPECT_GT(graphs->stats().num_graph_launches, 0);
  EXPECT_EQ(eager->stats().num_graph_launches, 0);
  EXPECT_GT(graphs->stats().num_padding_rows, 0);
  float worst = 0.0f;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(with_graphs[i].tokens, without[i].tokens) << "session " << i;
    worst = std::max(worst, testing::max_abs_diff(with_graphs[i].logits, without[i].logits));
  }
  std::printf("graph vs eager decode: worst logits diff %.3g\n", static_cast<double>(worst));
  EXPECT_LE(worst, 1e-4f) << "the same kernels ran";
}

TEST_F(CudaBatchingTest, ClosedAndReopenedSessionsReuseCellsWithNoChangeInOutputs) {
  const ProgramSpec spec = testing::with_plan(model_->spec(), 64, 9, {1, 2, 4, 8});
  auto executor = testing::make_cuda(*model_, spec);
  ASSERT_NE(executor, nullptr);
  const std::vector<Tokens> prompts = {sequence(0, 3), sequence(3, 0), sequence(5, 9)};
  std::vector<SessionId> sessions;
  const auto first = testing::run_greedy_together(*executor, prompts, 24, &sessions);
  const CacheUsage used = executor->cache_usage();
  const KvPoolMetrics pool = executor->kv_metrics();
  for (const SessionId s : sessions) ASSERT_TRUE(executor->close_session(s).ok());
  EXPECT_EQ(executor->cache_usage().num_free, used.max_cells);
  // Other sessions take the freed cells in between.
  testing::run_greedy_together(*executor, {sequence(1, 20), sequence(2, 2)}, 10, &sessions);
  for (const SessionId s : sessions) ASSERT_TRUE(executor->close_session(s).ok());
  // The same prompts again, in a different order, land in reused cells.
  const std::vector<Tokens> reversed = {prompts[2], prompts[1], prompts[0]};
  const auto again = testing::run_greedy_together(*executor, reversed, 24, &sessions);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(again[2 - i].tokens, first[i].tokens) << "prompt " << i;
    EXPECT_LE(testing::max_abs_diff(again[2 - i].logits, first[i].logits), 1e-3f);
  }
  EXPECT_EQ(executor->cache_usage().high_water, used.high_water) << "cells were not reused";
  EXPECT_EQ(executor->kv_metrics().num_growths, pool.num_growths) << "the pool grew";
}

TEST_F(CudaBatchingTest, PoolGrowthMidRunChangesNothing) {
  // stories260K's K row is 128 bytes: a 2 MiB granule holds 16384 rows, so growth needs more
  // cells than that. 38 filler sessions of 430 tokens fill 16340 cells; the two measured
  // sessions then decode while 3 more fillers push the high water past the first granule.
  const ProgramSpec spec = testing::with_plan(model_->spec(), 512, 5, {1, 2, 4});
  const Tokens measured_a = sequence(0, 4);
  const Tokens measured_b = sequence(4, 1);
  Tokens filler = {1};
  for (int32_t t = 1; t < 430; ++t) filler.push_back(3 + (t * 7) % (vocab_ - 3));
  const auto run = [&](Executor& executor, int64_t* growths_during_run) {
    CudaExecutor& cuda = static_cast<CudaExecutor&>(executor);
    std::vector<SessionId> fillers;
    BatchInput batch;
    for (int32_t i = 0; i < 38; ++i) {
      fillers.push_back(*executor.open_session());
      batch.inputs.push_back(testing::step_input(fillers.back(), 0, filler, 0, 430, false));
    }
    testing::execute_ok(executor, batch);
    const int64_t before = cuda.kv_metrics().num_growths;
    const SessionId a = *executor.open_session();
    const SessionId b = *executor.open_session();
    std::vector<float> logits;
    Tokens next_a = measured_a;
    Tokens next_b = measured_b;
    int32_t pos_a = 0;
    int32_t pos_b = 0;
    for (int32_t step = 0; step < 12; ++step) {
      BatchInput decode;
      decode.inputs.push_back(
          testing::step_input(a, pos_a, next_a, 0, static_cast<int32_t>(next_a.size()), true));
      decode.inputs.push_back(
          testing::step_input(b, pos_b, next_b, 0, static_cast<int32_t>(next_b.size()), true));
      std::vector<SessionId> more;
      if (step == 4) {  // three more fillers mid-run
        for (int32_t i = 0; i < 3; ++i) {
          more.push_back(*executor.open_session());
          decode.inputs.push_back(testing::step_input(more.back(), 0, filler, 0, 430, false));
        }
      }
      const BatchOutput output = testing::execute_ok(executor, decode);
      EXPECT_EQ(output.outputs.size(), 2u);
      if (output.outputs.size() != 2u) return logits;
      logits.insert(logits.end(), output.logits.begin(), output.logits.end());
      pos_a += static_cast<int32_t>(next_a.size());
      pos_b += static_cast<int32_t>(next_b.size());
      next_a = {testing::argmax(output.logits.subspan(0, vocab_))};
      next_b = {testing::argmax(output.logits.subspan(vocab_, vocab_))};
    }
    *growths_during_run = cuda.kv_metrics().num_growths - before;
    return logits;
  };
  // Control: the pool is grown past every row the run needs before it starts.
  auto control = testing::make_cuda(*model_, spec);
  ASSERT_NE(control, nullptr);
  {
    std::vector<SessionId> big;
    BatchInput batch;
    for (int32_t i = 0; i < 80; ++i) {
      big.push_back(*control->open_session());
      batch.inputs.push_back(testing::step_input(big.back(), 0, filler, 0, 430, false));
    }
    testing::execute_ok(*control, batch);
    for (const SessionId s : big) ASSERT_TRUE(control->close_session(s).ok());
  }
  int64_t control_growths = -1;
  const std::vector<float> expected = run(*control, &control_growths);
  auto executor = testing::make_cuda(*model_, spec);
  ASSERT_NE(executor, nullptr);
  int64_t growths = -1;
  const std::vector<float> got = run(*executor, &growths);
  EXPECT_EQ(control_growths, 0);
  EXPECT_GE(growths, 1) << "the pool did not grow mid-run";
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_LE(testing::max_abs_diff(got, expected), 1e-5f) << "growth changed the outputs";
}

TEST_F(CudaBatchingTest, DeviceArgmaxReturnsTheGreedyTokens) {
  const ProgramSpec spec = testing::with_plan(model_->spec(), 64, 9, {1, 2, 4, 8});
  CudaExecutorOptions options;
  options.device_argmax = true;
  auto executor = testing::make_cuda(*model_, spec, options);
  ASSERT_NE(executor, nullptr);
  std::vector<Tokens> prompts = sixteen_prompts();
  prompts.resize(6);  // the reference prompts
  std::vector<SessionId> sessions;
  for (size_t i = 0; i < prompts.size(); ++i) sessions.push_back(*executor->open_session());
  std::vector<Tokens> pending = prompts;
  std::vector<int32_t> start(prompts.size(), 0);
  for (int32_t step = 0; step < 12; ++step) {
    BatchInput batch;
    for (size_t i = 0; i < prompts.size(); ++i) {
      batch.inputs.push_back(testing::step_input(sessions[i], start[i], pending[i], 0,
                                                 static_cast<int32_t>(pending[i].size()), true));
    }
    // Logits only every other step: the tokens must not depend on it.
    const bool with_logits = step % 2 == 0;
    executor->set_copy_logits(with_logits);
    StatusOr<BatchOutput> output = executor->execute(batch, with_logits);
    ASSERT_TRUE(output.ok()) << output.status().to_string();
    ASSERT_EQ(output->outputs.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(output->outputs[i].token, kNoToken) << "sampling is the caller's";
      const int32_t token = output->outputs[i].greedy_token;
      EXPECT_EQ(token, reference_tokens(i, static_cast<size_t>(step) + 1).back())
          << "session " << i << ", step " << step;
      if (with_logits) {
        EXPECT_EQ(token,
                  testing::argmax(output->logits.subspan(i * static_cast<size_t>(vocab_), vocab_)));
      }
      start[i] += static_cast<int32_t>(pending[i].size());
      pending[i] = {token};
    }
  }
}

TEST_F(CudaBatchingTest, CudaMatchesTheCpuExecutorUnderEverySlicingPlan) {
  const Tokens tokens = sequence(1, 38);  // 43 tokens
  auto cpu = testing::make_cpu(*model_, model_->spec());
  const std::vector<float> expected = logits_at_every_position(*cpu, tokens);
  for (const ProgramSpec& spec : {model_->spec(), testing::with_plan(model_->spec(), 8, 2, {1}),
                                  testing::with_plan(model_->spec(), 8, 5, {1, 2, 4, 8}),
                                  testing::with_plan(model_->spec(), 16, 16, {1, 2, 4, 8, 16}),
                                  testing::with_plan(model_->spec(), 4, 1, {1})}) {
    const std::string what = "W=" + std::to_string(spec.max_step_tokens) +
                             " m=" + std::to_string(spec.min_prefill_chunk);
    auto executor = testing::make_cuda(*model_, spec);
    ASSERT_NE(executor, nullptr);
    const std::vector<float> got = logits_at_every_position(*executor, tokens);
    const float diff = testing::max_abs_diff(got, expected);
    EXPECT_LE(diff, 1e-3f) << what;
    std::printf("%s: max abs diff vs CPU %.3g\n", what.c_str(), static_cast<double>(diff));
  }
}

TEST_F(CudaBatchingTest, HalfPrecisionCachesMatchTheCpuWithTheSameCache) {
  const Tokens tokens = sequence(0, 40);
  auto cpu_f32 = testing::make_cpu(*model_, model_->spec());
  const std::vector<float> f32 = logits_at_every_position(*cpu_f32, tokens);
  for (const KvDtype dtype : {KvDtype::kF16, KvDtype::kBF16}) {
    ProgramSpec spec = model_->spec();
    spec.kv_dtype = dtype;
    auto cpu = testing::make_cpu(*model_, spec);
    auto cuda = testing::make_cuda(*model_, spec);
    ASSERT_NE(cuda, nullptr);
    const std::vector<float> cpu_half = logits_at_every_position(*cpu, tokens);
    const std::vector<float> cuda_half = logits_at_every_position(*cuda, tokens);
    // Rounding K/V to 16 bits moves the CPU's logits by `rounding` (0.013 for f16, 0.12 for
    // bf16). CUDA rounds values that differ from the CPU's in their last f32 bits, so some
    // elements round the other way: its distance to the CPU's half cache is rounding noise of
    // the same size (measured on the H200: 0.0087 f16, 0.023 bf16), while a cache stored in
    // another dtype, layout or row would land far from it.
    const float rounding = testing::max_abs_diff(cpu_half, f32);
    const float diff = testing::max_abs_diff(cuda_half, cpu_half);
    std::printf("%s cache: max abs diff CUDA vs CPU %.3g (the CPU's %s vs f32: %.3g)\n",
                std::string(kv_dtype_name(dtype)).c_str(), static_cast<double>(diff),
                std::string(kv_dtype_name(dtype)).c_str(), static_cast<double>(rounding));
    EXPECT_GT(testing::max_abs_diff(cuda_half, f32), 0.0f) << "the cache dtype is not used";
    EXPECT_LE(diff, rounding) << kv_dtype_name(dtype);
  }
}

TEST_F(CudaBatchingTest, RefusedBatchesChangeNothing) {
  const Tokens tokens = sequence(0, 20);
  const ProgramSpec spec = testing::with_plan(model_->spec(), 8, 2, {1, 2, 4});
  auto executor = testing::make_cuda(*model_, spec);
  ASSERT_NE(executor, nullptr);
  auto control = testing::make_cuda(*model_, spec);
  const Tokens head(tokens.begin(), tokens.begin() + 15);
  const Tokens rest(tokens.begin() + 15, tokens.end());
  const SessionId a = *executor->open_session();
  const SessionId c = *control->open_session();
  BatchInput first;
  first.inputs.push_back(testing::step_input(a, 0, head, 0, 15, false));
  testing::execute_ok(*executor, first);
  first.inputs[0].session = c;
  testing::execute_ok(*control, first);
  const CacheUsage usage = executor->cache_usage();
  const Tokens bad = {vocab_};
  for (const BatchInput& refused :
       {BatchInput{{testing::step_input(a, 15, rest, 0, 5, true),
                    testing::step_input(SessionId{999}, 0, rest, 0, 1, true)}},
        BatchInput{{testing::step_input(a, 15, bad, 0, 1, true)}},
        BatchInput{{testing::step_input(a, 17, rest, 0, 1, true)}}}) {
    EXPECT_FALSE(executor->execute(refused, true).ok());
    EXPECT_EQ(*executor->session_length(a), 15);
    EXPECT_EQ(executor->cache_usage().num_free, usage.num_free);
  }
  BatchInput next;
  next.inputs.push_back(testing::step_input(a, 15, rest, 0, 5, true));
  const BatchOutput got = testing::execute_ok(*executor, next);  // views of two executors
  next.inputs[0].session = c;
  const BatchOutput want = testing::execute_ok(*control, next);
  EXPECT_LE(testing::max_abs_diff(got.logits, want.logits), 1e-5f);
}

}  // namespace
}  // namespace cellm
