// Sampling candidates on the CUDA executor (StepInput::candidates_temperature): on stories260K,
// six sessions decode sampled tokens with every row listing candidates at its own temperature
// (one row none); each list is the host's sampling_candidates of the row the executor returns,
// every draw the candidates decide is the draw from that row, and the device's draw — from the
// list, or from the whole row where the list does not decide — is the sampler's; a step that keeps
// its rows on the device returns the ones fetched (fetch_logits); rows rewritten for samplers with
// bias and penalties (StepInput::rewrite) are the host sampler's rewrites and draw its tokens,
// through the Runner with no row fetched. Needs a GPU (labels e2e cuda).
// Thread-safety: test code, one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_e2e_support.h"
#include "batching/runner.h"
#include "batching/sampler.h"
#include "batching/scheduler.h"

namespace cellm {
namespace {

using testing::Tokens;

TEST(CudaCandidatesTest, ListsAreTheHostsAndDecideTheDrawsTheRowsGive) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  std::unique_ptr<Program> model = testing::open_model("stories260K.gguf");
  const int32_t vocab = model->config().vocab_size;
  const ProgramSpec spec = testing::with_plan(model->spec(), 64, 9, {1, 2, 4, 8});
  CudaExecutorOptions options;
  options.device_argmax = true;
  auto executor = testing::make_cuda(*model, spec, options);
  ASSERT_NE(executor, nullptr);
  ASSERT_TRUE(executor->computes_candidates());
  // Temperatures per session (0: the row lists nothing; 10: flat rows whose draws mostly fall
  // past the list) and the samplers' other settings.
  const std::vector<float> temperatures = {1.0f, 0.6f, 10.0f, 0.0f, 0.9f, 2.0f};
  std::vector<Sampler> samplers;
  for (size_t i = 0; i < temperatures.size(); ++i) {
    SamplingParams params;
    params.temperature = temperatures[i] > 0.0f ? temperatures[i] : 1.0f;
    params.top_p = i % 2 == 0 ? 0.9f : 1.0f;
    params.min_p = i == 4 ? 0.05f : 0.0f;
    params.top_k = i == 5 ? 20 : 0;
    samplers.emplace_back(params, 1000 + i);
  }
  std::vector<SessionId> sessions;
  std::vector<Tokens> context;
  std::vector<int32_t> committed(temperatures.size(), 0);
  for (size_t i = 0; i < temperatures.size(); ++i) {
    sessions.push_back(*executor->open_session());
    context.push_back({1, static_cast<int32_t>(3 + 11 * i), static_cast<int32_t>(40 + 7 * i)});
  }
  int decided = 0;
  int undecided = 0;
  for (int32_t step = 0; step < 24; ++step) {
    BatchInput batch;
    for (size_t i = 0; i < sessions.size(); ++i) {
      StepInput input = testing::step_input(sessions[i], 0, context[i], committed[i],
                                            static_cast<int32_t>(context[i].size()), true);
      input.candidates_temperature = temperatures[i];
      input.candidates_draw = {true, listed_draw_params(samplers[i].params()), samplers[i].seed(),
                               static_cast<int64_t>(context[i].size())};
      batch.inputs.push_back(input);
    }
    const BatchOutput output = testing::execute_ok(*executor, batch);
    ASSERT_EQ(output.outputs.size(), sessions.size());
    for (size_t i = 0; i < sessions.size(); ++i) {
      SCOPED_TRACE("session " + std::to_string(i) + ", step " + std::to_string(step));
      const std::span<const float> row =
          output.logits.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      const OutputRow& out = output.outputs[i];
      ASSERT_EQ(out.candidates.has_value(), temperatures[i] > 0.0f);
      const StatusOr<int32_t> sampled = samplers[i].sample(row, context[i]);
      ASSERT_TRUE(sampled.ok());
      if (out.candidates.has_value()) {
        const RowCandidates want = sampling_candidates(row, temperatures[i]);
        EXPECT_EQ(out.candidates->top, want.top);
        EXPECT_EQ(out.candidates->max_logit, want.max_logit);
        // Another summation order: within n · 2^-52 of the sum of n terms; none where the draw's
        // cuts hold a top-k (it never reads it then).
        if (samplers[i].params().top_k > 0) {
          EXPECT_TRUE(std::isnan(out.candidates->total));
        } else {
          EXPECT_NEAR(out.candidates->total, want.total,
                      static_cast<double>(vocab) * 0x1p-52 * want.total);
        }
        const std::optional<int32_t> from_list = samplers[i].sample_from_candidates(
            *out.candidates, static_cast<int64_t>(context[i].size()));
        if (from_list.has_value()) {
          EXPECT_EQ(*from_list, *sampled);
          ++decided;
        } else {
          ++undecided;
        }
        // The device's draw: from the list where it decides, else from the whole row.
        EXPECT_EQ(out.candidates->drawn, *sampled);
        EXPECT_EQ(out.candidates->drawn_from_row, !from_list.has_value());
        if (out.candidates->drawn_from_row) {
          EXPECT_EQ(out.candidates->drawn_logit, row[static_cast<size_t>(*sampled)]);
        }
      }
      committed[i] = static_cast<int32_t>(context[i].size());
      context[i].push_back(*sampled);
    }
  }
  std::printf("stories260K rows: the candidates decided %d draws, left %d to the rows\n", decided,
              undecided);
  EXPECT_GT(decided, 0) << "no draw decided: the comparison compared nothing";
  EXPECT_GE(undecided, 8) << "the lists decided the draws: the row draws went untested";
}

TEST(CudaCandidatesTest, KeptRowsFetchedAreTheRowsTheStepListedAndArgmaxed) {
  // A step that keeps its rows (BatchInput::keep_logits) copies none; fetch_logits() copies the
  // rows asked for. Step 0 runs six prompts of 30-55 tokens through calls of at most 64 tokens
  // (rows of the calls before the last are copied aside on the device), the steps after it one
  // decode call each (rows fetched from the forward's buffer). A fetched row must be the row the
  // step listed and argmaxed: its candidates and argmax, computed again on the host from it.
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  std::unique_ptr<Program> model = testing::open_model("stories260K.gguf");
  const auto vocab = static_cast<size_t>(model->config().vocab_size);
  const ProgramSpec spec = testing::with_plan(model->spec(), 64, 9, {1, 2, 4, 8});
  CudaExecutorOptions options;
  options.device_argmax = true;
  auto executor = testing::make_cuda(*model, spec, options);
  ASSERT_NE(executor, nullptr);
  ASSERT_TRUE(executor->fetches_logits());
  const float temperature = 0.8f;
  constexpr size_t kSessions = 6;
  std::vector<SessionId> sessions;
  std::vector<Tokens> context(kSessions);
  std::vector<int32_t> committed(kSessions, 0);
  for (size_t i = 0; i < kSessions; ++i) {
    sessions.push_back(*executor->open_session());
    context[i].push_back(1);
    for (size_t t = 1; t < 30 + 5 * i; ++t) {
      context[i].push_back(static_cast<int32_t>(1 + (37 * t + 101 * i) % (vocab - 1)));
    }
  }
  // Which rows each step fetches: some, all, a run and singles, none, the last alone.
  const std::vector<std::vector<int32_t>> fetches = {
      {0, 2, 3, 5}, {0, 1, 2, 3, 4, 5}, {1, 2, 4}, {}, {5}, {0, 1, 5}};
  const int64_t fetched_before = executor->stats().num_fetched_rows;
  int64_t num_fetched = 0;
  for (size_t step = 0; step < fetches.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    BatchInput batch;
    batch.keep_logits = true;
    for (size_t i = 0; i < kSessions; ++i) {
      StepInput input = testing::step_input(sessions[i], 0, context[i], committed[i],
                                            static_cast<int32_t>(context[i].size()), true);
      input.candidates_temperature = temperature;
      batch.inputs.push_back(input);
    }
    StatusOr<BatchOutput> output = executor->execute(batch, /*return_logits=*/false);
    ASSERT_TRUE(output.ok()) << output.status().to_string();
    ASSERT_EQ(output->outputs.size(), kSessions);
    EXPECT_TRUE(output->logits.empty()) << "a step that keeps its rows copied them";
    const StatusOr<std::span<const float>> rows = executor->fetch_logits(fetches[step]);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    ASSERT_EQ(rows->size(), kSessions * vocab);
    num_fetched += static_cast<int64_t>(fetches[step].size());
    for (const int32_t r : fetches[step]) {
      SCOPED_TRACE("row " + std::to_string(r));
      const std::span<const float> row = rows->subspan(static_cast<size_t>(r) * vocab, vocab);
      const OutputRow& out = output->outputs[static_cast<size_t>(r)];
      EXPECT_EQ(argmax_finite(row), out.greedy_token);
      ASSERT_TRUE(out.candidates.has_value());
      const RowCandidates want = sampling_candidates(row, temperature);
      EXPECT_EQ(out.candidates->top, want.top);
      EXPECT_EQ(out.candidates->max_logit, want.max_logit);
    }
    // Asked again in another order, or for a row past the step: refused.
    EXPECT_FALSE(executor->fetch_logits(std::vector<int32_t>{3, 1}).ok());
    EXPECT_FALSE(
        executor->fetch_logits(std::vector<int32_t>{static_cast<int32_t>(kSessions)}).ok());
    for (size_t i = 0; i < kSessions; ++i) {
      committed[i] = static_cast<int32_t>(context[i].size());
      context[i].push_back(output->outputs[i].greedy_token);
    }
  }
  EXPECT_EQ(executor->stats().num_fetched_rows - fetched_before, num_fetched);
  // A step that did not ask to keep its rows has none to fetch.
  BatchInput plain;
  plain.inputs.push_back(testing::step_input(sessions[0], 0, context[0], committed[0],
                                             static_cast<int32_t>(context[0].size()), true));
  ASSERT_TRUE(executor->execute(plain, /*return_logits=*/false).ok());
  EXPECT_FALSE(executor->fetch_logits(std::vector<int32_t>{0}).ok());
}

// Samplers with bias and penalties (one of each kind, and all at once): each step runs on two
// executors in step, one asked to rewrite the rows (StepInput::rewrite) and one not (its rows are
// the raw ones). The rewritten row returned must be the host sampler's rewrite of the raw row, bit
// for bit, and the device's draw from it the token sample() draws from the raw row; a session
// sampled without a rewrite sits beside them.
TEST(CudaCandidatesTest, RowsRewrittenForBiasAndPenaltiesDrawTheSamplersTokens) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  std::unique_ptr<Program> model = testing::open_model("stories260K.gguf");
  const auto vocab = static_cast<size_t>(model->config().vocab_size);
  const ProgramSpec spec = testing::with_plan(model->spec(), 64, 9, {1, 2, 4, 8});
  CudaExecutorOptions options;
  options.device_argmax = true;
  auto rewriting = testing::make_cuda(*model, spec, options);
  auto plain = testing::make_cuda(*model, spec, options);
  ASSERT_NE(rewriting, nullptr);
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(rewriting->rewrites_rows());
  std::vector<SamplingParams> params(5);
  for (SamplingParams& p : params) p.temperature = 0.9f;
  params[0].repetition_penalty = 1.5f;
  params[0].top_k = 20;
  params[1].presence_penalty = 1.0f;
  params[1].frequency_penalty = 0.5f;
  params[1].penalty_window = -1;
  params[1].top_p = 0.9f;
  params[2].logit_bias = {{13, 4.0f}, {99, -INFINITY}, {13, -1.5f}, {300, 2.5f}};
  params[2].temperature = 2.0f;
  params[3].repetition_penalty = 0.7f;
  params[3].frequency_penalty = 0.3f;
  params[3].logit_bias = {{40, 1.0f}};
  params[3].min_p = 0.02f;
  std::vector<Sampler> samplers;
  for (size_t i = 0; i < params.size(); ++i) samplers.emplace_back(params[i], 2000 + i);
  std::vector<SessionId> sessions[2];
  std::vector<Tokens> context;
  std::vector<int32_t> committed(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    sessions[0].push_back(*rewriting->open_session());
    sessions[1].push_back(*plain->open_session());
    context.push_back({1, static_cast<int32_t>(3 + 11 * i), static_cast<int32_t>(40 + 7 * i)});
  }
  int rewritten_tokens = 0;
  int drawn_otherwise = 0;  // draws the raw row would have given another token
  for (int32_t step = 0; step < 20; ++step) {
    BatchInput batches[2];
    std::vector<SamplerRewrite> rewrites;
    rewrites.reserve(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      for (int e = 0; e < 2; ++e) {
        StepInput input = testing::step_input(sessions[e][i], 0, context[i], committed[i],
                                              static_cast<int32_t>(context[i].size()), true);
        input.candidates_temperature = params[i].temperature;
        input.candidates_draw = {true, listed_draw_params(params[i]), samplers[i].seed(),
                                 static_cast<int64_t>(context[i].size())};
        if (e == 0 && samplers[i].rewrites_scores()) {
          input.rewrite = rewrites.emplace_back(samplers[i].rewrite_for(context[i])).view();
        }
        batches[e].inputs.push_back(input);
      }
    }
    const BatchOutput got = testing::execute_ok(*rewriting, batches[0]);
    const BatchOutput raw = testing::execute_ok(*plain, batches[1]);
    for (size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE("session " + std::to_string(i) + ", step " + std::to_string(step));
      const std::span<const float> raw_row = raw.logits.subspan(i * vocab, vocab);
      const std::span<const float> got_row = got.logits.subspan(i * vocab, vocab);
      const StatusOr<int32_t> sampled = samplers[i].sample(raw_row, context[i]);
      ASSERT_TRUE(sampled.ok()) << sampled.status().to_string();
      // The row as the sampler rewrites it: a sampler without bias or penalties leaves it as is.
      std::vector<float> want(raw_row.begin(), raw_row.end());
      if (samplers[i].rewrites_scores()) {
        const SamplerRewrite rewrite = samplers[i].rewrite_for(context[i]);
        apply_rewrite(rewrite.view(), want);
        rewritten_tokens += static_cast<int>(rewrite.tokens.size());
      }
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got_row.begin()))
          << "the rewritten row is not the sampler's";
      EXPECT_EQ(got.outputs[i].greedy_token, raw.outputs[i].greedy_token) << "of the raw row";
      ASSERT_TRUE(got.outputs[i].candidates.has_value());
      EXPECT_EQ(got.outputs[i].candidates->drawn, *sampled);
      SamplingParams cuts_only;
      cuts_only.temperature = params[i].temperature;
      cuts_only.top_k = params[i].top_k;
      cuts_only.top_p = params[i].top_p;
      cuts_only.min_p = params[i].min_p;
      Sampler unrewritten(cuts_only, samplers[i].seed());
      drawn_otherwise += *unrewritten.sample(raw_row, context[i]) != *sampled;
      committed[i] = static_cast<int32_t>(context[i].size());
      context[i].push_back(*sampled);
    }
  }
  EXPECT_GT(rewritten_tokens, 20 * 4 * 3) << "the samplers rewrote almost nothing";
  EXPECT_GE(drawn_otherwise, 10) << "the rewrites changed no draw: they went untested";
}

// Through the Runner: generations with bias and penalties (a greedy one too) give the same
// tokens whether the rows are rewritten and drawn on the device or fetched and sampled on the
// host, and on the device no row travels.
TEST(CudaCandidatesTest, ThroughTheRunnerPenalizedGenerationsFetchNoRows) {
  ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
  std::unique_ptr<Program> model = testing::open_model("stories260K.gguf");
  const ProgramSpec spec = testing::with_plan(model->spec(), 64, 9, {1, 2, 4, 8});
  std::vector<std::vector<Tokens>> tokens(2);
  int64_t fetched[2] = {0, 0};
  for (int e = 0; e < 2; ++e) {
    CudaExecutorOptions options;
    options.device_argmax = true;
    options.row_rewrites = e == 0;
    auto executor = testing::make_cuda(*model, spec, options);
    ASSERT_NE(executor, nullptr);
    ASSERT_EQ(executor->rewrites_rows(), e == 0);
    Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(64)));
    std::vector<Session> sessions;
    std::vector<GenerationHandle> handles;
    for (int g = 0; g < 5; ++g) {
      GenConfig config;
      config.max_new_tokens = 32;
      // The last greedy: the rewritten row's argmax, the head of its list.
      config.sampling.temperature = g == 4 ? 0.0f : 0.8f + 0.2f * static_cast<float>(g);
      config.sampling.top_k = g == 0 ? 40 : 0;
      config.sampling.top_p = g == 1 ? 0.95f : 1.0f;
      config.sampling.frequency_penalty = g == 3 ? 0.0f : 0.6f;
      config.sampling.presence_penalty = g == 2 ? 0.4f : 0.0f;
      config.sampling.repetition_penalty = g == 3 ? 1.2f : g == 4 ? 1.5f : 1.0f;
      if (g == 2 || g == 4) config.sampling.logit_bias = {{13, 3.0f}};
      config.seed = 50 + static_cast<uint64_t>(g);
      config.use_default_stop_tokens = false;
      sessions.push_back(runner.open_session());
      handles.push_back(sessions.back().generate_async({1, 403, 407, 261}, config));
    }
    for (GenerationHandle& handle : handles) {
      handle.wait();
      EXPECT_EQ(handle.tokens().size(), 32u) << handle.error_message();
      tokens[static_cast<size_t>(e)].push_back(handle.tokens());
    }
    fetched[e] = executor->stats().num_fetched_rows;
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_EQ(fetched[0], 0) << "a rewritten row travelled to the host";
  EXPECT_GE(fetched[1], 5 * 31) << "the host path fetched no rows: it compared nothing";
}

}  // namespace
}  // namespace cellm
