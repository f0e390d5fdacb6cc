// The CUDA executor's run-ahead (CudaExecutorOptions::run_ahead) on stories260K: a greedy session
// fed its own device argmax gets, step for step, the tokens, lengths and pool counts of an
// executor that runs every step when asked; a token that is not the argmax, a rewind, a close and
// an open each give the step run ahead back and change nothing else. A sampled session whose
// candidates always decide runs ahead on the device's draw from its candidates and gets the
// tokens, lists and argmaxes of steps run one at a time — also where the list does not decide and
// the device draws from the whole row; a changed draw gives the step back, and a session whose
// rows are kept for the host runs nothing ahead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_e2e_support.h"
#include "backends/cuda/cuda_executor.h"
#include "batching/runner.h"
#include "batching/sampler.h"
#include "batching/scheduler.h"

namespace cellm {
namespace {

class CudaExecutorAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::require_cuda_device());
    model_ = testing::open_model("stories260K.gguf");
    for (const bool ahead : {true, false}) {
      CudaExecutorOptions options;
      options.device_argmax = true;
      options.run_ahead = ahead;
      executors_[ahead ? 0 : 1] = testing::make_cuda(*model_, model_->spec(), options);
      ASSERT_NE(executors_[ahead ? 0 : 1], nullptr);
    }
  }

  CudaExecutor& ahead() { return *executors_[0]; }
  CudaExecutor& plain() { return *executors_[1]; }

  // One session's tokens [begin, end) of `tokens` at `start_pos` on both executors (session ids
  // per executor); both must give the same greedy token, which is returned.
  int32_t step_both(const SessionId (&sessions)[2], int32_t start_pos,
                    const std::vector<int32_t>& tokens, const std::string& what) {
    int32_t greedy[2] = {kNoToken, kNoToken};
    for (int e = 0; e < 2; ++e) {
      BatchInput batch;
      batch.inputs.push_back(testing::step_input(sessions[e], start_pos, tokens, 0,
                                                 static_cast<int32_t>(tokens.size()), true));
      const StatusOr<BatchOutput> output = executors_[e]->execute(batch, false);
      EXPECT_TRUE(output.ok()) << what << ": " << output.status().to_string();
      if (!output.ok()) return kNoToken;
      EXPECT_TRUE(output->logits.empty()) << what;
      greedy[e] = output->outputs.at(0).greedy_token;
    }
    EXPECT_EQ(greedy[0], greedy[1]) << what << ": run ahead against one step at a time";
    EXPECT_NE(greedy[0], kNoToken) << what;
    expect_same_state(sessions, what);
    return greedy[0];
  }

  void expect_same_state(const SessionId (&sessions)[2], const std::string& what) {
    const StatusOr<int32_t> length_ahead = ahead().session_length(sessions[0]);
    const StatusOr<int32_t> length_plain = plain().session_length(sessions[1]);
    ASSERT_TRUE(length_ahead.ok() && length_plain.ok()) << what;
    EXPECT_EQ(*length_ahead, *length_plain) << what << ": session length";
    EXPECT_EQ(ahead().cache_usage().num_free, plain().cache_usage().num_free)
        << what << ": free cells";
  }

  std::unique_ptr<Program> model_;
  std::unique_ptr<CudaExecutor> executors_[2];  // run ahead, one step at a time
};

TEST_F(CudaExecutorAheadTest, AGreedySessionGetsTheTokensOfStepsRunOneAtATime) {
  SessionId s[2] = {*ahead().open_session(), *plain().open_session()};
  int32_t pos = 0;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 488};
  int32_t next = step_both(s, pos, prompt, "prompt");
  pos += static_cast<int32_t>(prompt.size());
  const auto greedy_steps = [&](int32_t count, const std::string& what) {
    for (int32_t i = 0; i < count && next != kNoToken; ++i) {
      next = step_both(s, pos, {next}, what + " step " + std::to_string(i));
      ++pos;
    }
  };
  greedy_steps(24, "greedy");
  EXPECT_GE(ahead().stats().num_steps_run_ahead, 22) << "the steps after the first two run ahead";
  EXPECT_EQ(plain().stats().num_steps_run_ahead, 0);
  EXPECT_EQ(ahead().stats().num_steps, plain().stats().num_steps);

  // Another token than the argmax: the step run ahead is given back, this one runs.
  const int64_t dropped = ahead().stats().num_steps_ahead_dropped;
  next = step_both(s, pos, {(next + 7) % 512}, "a token that is not the argmax");
  ++pos;
  EXPECT_EQ(ahead().stats().num_steps_ahead_dropped, dropped + 1);
  greedy_steps(6, "greedy again");

  // A rewind between steps gives the step run ahead back first.
  for (int e = 0; e < 2; ++e) ASSERT_TRUE(executors_[e]->rewind_session(s[e], pos - 3).ok());
  pos -= 3;
  expect_same_state(s, "after the rewind");
  EXPECT_EQ(ahead().stats().num_steps_ahead_dropped, dropped + 2);
  next = step_both(s, pos, {next}, "the rewound position");  // any token: a plain step
  ++pos;
  greedy_steps(6, "greedy after the rewind");

  // Closing the session and opening another: the pool as without running ahead.
  for (int e = 0; e < 2; ++e) ASSERT_TRUE(executors_[e]->close_session(s[e]).ok());
  EXPECT_EQ(ahead().cache_usage().num_free, plain().cache_usage().num_free);
  s[0] = *ahead().open_session();
  s[1] = *plain().open_session();
  pos = 0;
  next = step_both(s, pos, prompt, "a new session's prompt");
  pos += static_cast<int32_t>(prompt.size());
  greedy_steps(4, "the new session");
  EXPECT_GT(ahead().stats().num_steps_run_ahead, 30);
}

// One sampled step of one session on both executors: candidates listed at the sampler's
// temperature and drawn on the device (the sampler's cuts and seed, the token's position); the
// host's sampler draws the token from each executor's list where it decides, the device from the
// whole row where it does not (counted in `row_draws`). Both must list the same candidates, give
// the same argmax and draw, the device's draw must be the host's (from the row the step kept, with
// `keep`), and the token is returned.
int32_t sample_both(CudaExecutor* (&executors)[2], const SessionId (&sessions)[2],
                    int32_t start_pos, const std::vector<int32_t>& tokens, const Sampler& sampler,
                    bool keep, const std::string& what, int* row_draws = nullptr) {
  int32_t drawn[2] = {kNoToken, kNoToken};
  RowCandidates lists[2];
  int32_t greedy[2] = {kNoToken, kNoToken};
  const auto position = static_cast<int64_t>(start_pos) + static_cast<int64_t>(tokens.size());
  for (int e = 0; e < 2; ++e) {
    BatchInput batch;
    batch.keep_logits = keep;
    StepInput& input = batch.inputs.emplace_back(testing::step_input(
        sessions[e], start_pos, tokens, 0, static_cast<int32_t>(tokens.size()), true));
    input.candidates_temperature = sampler.params().temperature;
    input.candidates_draw = {true, listed_draw_params(sampler.params()), sampler.seed(), position};
    const StatusOr<BatchOutput> output = executors[e]->execute(batch, false);
    EXPECT_TRUE(output.ok()) << what << ": " << output.status().to_string();
    if (!output.ok()) return kNoToken;
    const OutputRow& row = output->outputs.at(0);
    EXPECT_TRUE(row.candidates.has_value()) << what;
    if (!row.candidates.has_value()) return kNoToken;
    lists[e] = *row.candidates;
    greedy[e] = row.greedy_token;
    const std::optional<int32_t> host = sampler.sample_from_candidates(lists[e], position);
    if (host.has_value()) {
      EXPECT_EQ(lists[e].drawn, *host) << what << ": the device's draw against the host's";
      EXPECT_FALSE(lists[e].drawn_from_row) << what;
    } else {
      EXPECT_TRUE(lists[e].drawn_from_row) << what << ": an undecided list drawn from the row";
      if (row_draws != nullptr && e == 0) ++*row_draws;
    }
    drawn[e] = host.value_or(lists[e].drawn);
    if (!host.has_value() && keep) {  // the row the step kept decides
      const StatusOr<std::span<const float>> row = executors[e]->fetch_logits(std::vector{0});
      EXPECT_TRUE(row.ok()) << what << ": " << row.status().to_string();
      if (!row.ok()) return kNoToken;
      Sampler whole = sampler;
      const StatusOr<int32_t> sampled =
          whole.sample(*row, std::vector<int32_t>(static_cast<size_t>(position), 0));
      EXPECT_TRUE(sampled.ok()) << what;
      EXPECT_EQ(lists[e].drawn, sampled.ok() ? *sampled : kNoToken)
          << what << ": the device's draw from the row against the host's";
      drawn[e] = sampled.ok() ? *sampled : kNoToken;
    }
  }
  EXPECT_EQ(lists[0].top, lists[1].top) << what << ": run ahead against one step at a time";
  // The row's total: summed alike by both, or left out by both where the cuts hold a top-k.
  EXPECT_EQ(std::isnan(lists[0].total), sampler.params().top_k > 0) << what;
  EXPECT_EQ(std::isnan(lists[1].total), std::isnan(lists[0].total)) << what;
  if (!std::isnan(lists[0].total)) {
    EXPECT_EQ(lists[0].total, lists[1].total) << what;
  }
  EXPECT_EQ(greedy[0], greedy[1]) << what;
  EXPECT_NE(greedy[0], kNoToken) << what;
  EXPECT_EQ(drawn[0], drawn[1]) << what;
  return drawn[0];
}

TEST_F(CudaExecutorAheadTest, ASampledSessionRunsAheadOnTheDevicesDrawWithTheTokensOfSteps) {
  CudaExecutor* both[2] = {&ahead(), &plain()};
  SessionId s[2] = {*ahead().open_session(), *plain().open_session()};
  SamplingParams params;
  params.temperature = 0.9f;
  params.top_k = 20;  // inside the list: the candidates always decide
  params.top_p = 0.95f;
  const Sampler sampler(params, 1234);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 488};
  int32_t next = sample_both(both, s, 0, prompt, sampler, false, "prompt");
  int32_t pos = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> drawn;
  int row_draws = 0;
  const auto sampled_steps = [&](const Sampler& by, int32_t count, bool keep,
                                 const std::string& what) {
    for (int32_t i = 0; i < count && next != kNoToken; ++i) {
      next = sample_both(both, s, pos, {next}, by, keep, what + " step " + std::to_string(i),
                         &row_draws);
      drawn.push_back(next);
      ++pos;
    }
  };
  sampled_steps(sampler, 30, false, "sampled");
  EXPECT_GE(ahead().stats().num_steps_run_ahead, 28) << "the steps after the first two run ahead";
  EXPECT_EQ(ahead().stats().num_steps_ahead_dropped, 0) << "every draw agreed";
  EXPECT_EQ(plain().stats().num_steps_run_ahead, 0);
  std::sort(drawn.begin(), drawn.end());
  EXPECT_GT(std::unique(drawn.begin(), drawn.end()) - drawn.begin(), 5)
      << "a sampled session, not a greedy one";

  // Another seed: the step run ahead drew with the old one and is given back.
  const Sampler reseeded(params, 99);
  sampled_steps(reseeded, 6, false, "reseeded");
  EXPECT_EQ(ahead().stats().num_steps_ahead_dropped, 1);
  EXPECT_GE(ahead().stats().num_steps_run_ahead, 32);

  // A nucleus the list may not hold, its rows kept for the host (as an engine keeps them for an
  // executor that does not draw from rows): nothing runs ahead.
  SamplingParams open = params;
  open.top_k = 0;
  const Sampler open_sampler(open, 1234);
  const int64_t run_ahead = ahead().stats().num_steps_run_ahead;
  sampled_steps(open_sampler, 6, true, "rows kept");
  EXPECT_EQ(ahead().stats().num_steps_run_ahead, run_ahead);
  EXPECT_EQ(ahead().stats().num_steps, plain().stats().num_steps);

  // Flat draws (T 10, no cuts) mostly past the list, no rows kept: drawn from the whole row on the
  // device, and run ahead on that draw.
  SamplingParams flat;
  flat.temperature = 10.0f;
  const Sampler flat_sampler(flat, 4321);
  row_draws = 0;
  const int64_t dropped = ahead().stats().num_steps_ahead_dropped;
  sampled_steps(flat_sampler, 16, false, "drawn from the row");
  EXPECT_GE(row_draws, 4) << "the lists decided the flat draws: the row draw went untested";
  EXPECT_GE(ahead().stats().num_steps_run_ahead, run_ahead + 13);
  EXPECT_EQ(ahead().stats().num_steps_ahead_dropped, dropped) << "every draw agreed";
}

// Through the Runner (the engine asks for the device's draw, from the list or the whole row):
// sampled generations give the same tokens on the executor that runs ahead as on the one that
// does not, and the first runs most of its steps ahead — top-k ones, a nucleus without a top-k
// (drawn from the row where the list does not hold it), and alone, a greedy one.
TEST_F(CudaExecutorAheadTest, ThroughTheRunnerSampledGenerationsRunAheadWithTheSameTokens) {
  std::vector<testing::Tokens> tokens[2];
  for (int e = 0; e < 2; ++e) {
    Runner runner(*executors_[e], DecodeFirstScheduler(SchedulerConfig::defaults_for(64)));
    // Top-k 40 (llama.cpp's default) and 20 and 5: inside the list, always decided; -1: no top-k,
    // T 10 (flat: drawn from the row where the list does not hold the nucleus); 0: greedy.
    for (const int32_t top_k : {40, 20, 5, -1, 0}) {
      GenConfig config;
      config.max_new_tokens = 40;
      config.sampling.temperature = top_k > 0 ? 1.1f : top_k < 0 ? 10.0f : 0.0f;
      config.sampling.top_k = std::max(top_k, 0);
      config.sampling.top_p = 0.9f;
      config.seed = 17 + static_cast<uint64_t>(top_k + 1);
      config.use_default_stop_tokens = false;
      Session session = runner.open_session();
      GenerationHandle handle = session.generate_async({1, 403, 407, 261}, config);
      handle.wait();
      EXPECT_EQ(handle.tokens().size(), 40u) << handle.error_message();
      tokens[e].push_back(handle.tokens());
    }
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_NE(tokens[0][0], tokens[0][4]) << "a sampled generation, not the greedy one";
  EXPECT_NE(tokens[0][3], tokens[0][4]) << "a sampled generation, not the greedy one";
  EXPECT_GE(ahead().stats().num_steps_run_ahead, 5 * 36) << "the steps after the first few";
  EXPECT_EQ(plain().stats().num_steps_run_ahead, 0);
}

TEST_F(CudaExecutorAheadTest, NothingRunsAheadOfStepsThatAskForLogitsOrOfSeveralSessions) {
  const SessionId a = *ahead().open_session();
  const SessionId b = *ahead().open_session();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 488};
  BatchInput two;
  two.inputs.push_back(testing::step_input(a, 0, prompt, 0, 6, true));
  two.inputs.push_back(testing::step_input(b, 0, prompt, 0, 6, true));
  StatusOr<BatchOutput> out = ahead().execute(two, false);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<int32_t> fed = {out->outputs[0].greedy_token, out->outputs[1].greedy_token};
  for (int32_t step = 0; step < 4; ++step) {
    BatchInput both;
    both.inputs.push_back(testing::step_input(a, 6 + step, {&fed[0], 1}, 0, 1, true));
    both.inputs.push_back(testing::step_input(b, 6 + step, {&fed[1], 1}, 0, 1, true));
    out = ahead().execute(both, false);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    fed = {out->outputs[0].greedy_token, out->outputs[1].greedy_token};
  }
  int32_t token = fed[0];
  for (int32_t step = 0; step < 4; ++step) {  // one session, but its rows are read
    BatchInput one;
    one.inputs.push_back(testing::step_input(a, 10 + step, {&token, 1}, 0, 1, true));
    out = ahead().execute(one, true);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(out->logits.size(), 512u);
    token = out->outputs[0].greedy_token;
  }
  EXPECT_EQ(ahead().stats().num_steps_run_ahead, 0);
  EXPECT_EQ(ahead().stats().num_steps_ahead_dropped, 0);
}

}  // namespace
}  // namespace cellm
