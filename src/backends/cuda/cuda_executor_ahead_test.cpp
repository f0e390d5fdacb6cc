// The CUDA executor's run-ahead (CudaExecutorOptions::run_ahead) on stories260K: a greedy session
// fed its own device argmax gets, step for step, the tokens, lengths and pool counts of an
// executor that runs every step when asked; a token that is not the argmax, a rewind, a close and
// an open each give the step run ahead back and change nothing else.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_e2e_support.h"
#include "backends/cuda/cuda_executor.h"

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
