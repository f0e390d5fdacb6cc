// Runner log-probabilities on the FakeExecutor: every delivered token's and every prompt
// token's, from the raw rows or the executor's summaries, checked against the toy model's
// log-softmax; they change no token and survive chunking, continuations and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "batching/runner.h"
#include "batching/runner_test_util.h"

namespace cellm::testing {
namespace {

// Checks `entry` against the toy model at `context`: `token`'s log-softmax (in long double) and
// the `num_top` best tokens (the lower id first on ties).
void expect_logprobs(const Tokens& context, int32_t token, size_t num_top,
                     const TokenLogprobs& entry) {
  const std::vector<float> row = fake_logits(context, kVocab);
  const long double top = *std::max_element(row.begin(), row.end());
  long double sum = 0;
  for (const float v : row) sum += std::exp(static_cast<long double>(v) - top);
  const auto logprob = [&](int32_t t) {
    return static_cast<double>(static_cast<long double>(row[t]) - top - std::log(sum));
  };
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  EXPECT_EQ(entry.token, token);
  EXPECT_NEAR(entry.logprob, logprob(token), 1e-6) << "at position " << context.size();
  ASSERT_EQ(entry.top.size(), num_top);
  for (size_t r = 0; r < num_top; ++r) {
    EXPECT_EQ(entry.top[r].first, order[r]) << "position " << context.size() << " rank " << r;
    EXPECT_NEAR(entry.top[r].second, logprob(order[r]), 1e-6);
  }
}

TEST(RunnerTest, LogprobsComeWithEveryTokenFromTheRawRowAndChangeNoToken) {
  // From the rows on the host, or from the executor's summaries of them (the CUDA executor's
  // way): the same values either way.
  for (const bool summarizing : {false, true}) {
    FakeExecutorConfig executor;
    executor.greedy_tokens = true;  // plain greedy would not read rows: logprobs must
    executor.logprobs = summarizing;
    Rig rig(executor);
    const Tokens prompt = {4, 9, 2, 6};
    for (const float temperature : {0.0f, 0.9f}) {
      SCOPED_TRACE("temperature " + std::to_string(temperature) +
                   (summarizing ? ", summarized by the executor" : ", from the rows"));
      GenConfig plain = greedy(12);
      plain.sampling.temperature = temperature;
      plain.seed = 77;
      Session reference_session = rig.runner.open_session();
      GenerationHandle reference = reference_session.generate_async(prompt, plain);
      reference.wait();

      GenConfig asking = plain;
      asking.sampling.logprobs = 3;
      Session session = rig.runner.open_session();
      Tokens delivered;
      std::vector<TokenLogprobs> all;
      size_t mismatched_updates = 0;
      const int64_t logits_steps_before = rig.executor.counts().num_logits_steps;
      GenerationHandle handle =
          session.generate_async(prompt, asking, [&](const GenerationUpdate& update) {
            mismatched_updates += update.logprobs.size() != update.tokens.size();
            delivered.insert(delivered.end(), update.tokens.begin(), update.tokens.end());
            all.insert(all.end(), update.logprobs.begin(), update.logprobs.end());
          });
      handle.wait();
      EXPECT_EQ(handle.tokens(), reference.tokens()) << "asking for logprobs changed the tokens";
      EXPECT_EQ(mismatched_updates, 0u);
      if (summarizing && temperature == 0.0f) {
        EXPECT_EQ(rig.executor.counts().num_logits_steps, logits_steps_before)
            << "greedy rows with summaries need no logits on the host";
      }
      ASSERT_EQ(all.size(), delivered.size());
      Tokens context = prompt;
      for (size_t i = 0; i < all.size(); ++i) {
        expect_logprobs(context, delivered[i], 3, all[i]);
        if (temperature == 0.0f) {
          EXPECT_EQ(all[i].top[0].first, delivered[i]);
        }
        context.push_back(delivered[i]);
      }
    }
    GenConfig too_many = greedy(1);
    too_many.sampling.logprobs = kMaxLogprobs + 1;
    Session session = rig.runner.open_session();
    GenerationHandle refused = session.generate_async(prompt, too_many);
    refused.wait();
    EXPECT_EQ(refused.finish_reason(), FinishReason::kFailed);
    EXPECT_NE(refused.error_message().find("logprobs"), std::string::npos)
        << refused.error_message();
  }
}

TEST(RunnerTest, GreedyLogprobsFromSummariesNeverReadTheRows) {
  // The executor returns rows of NaN but right greedy tokens and summaries: an engine that read
  // a row for a log-probability would deliver NaN.
  FakeExecutorConfig executor;
  executor.greedy_tokens = true;
  executor.logprobs = true;
  executor.nan_logits = true;
  executor.max_step_tokens = 8;
  executor.min_prefill_chunk = 1;
  Rig rig(executor);
  const Tokens prompt = ramp(13, 2);
  GenConfig config = greedy(6);
  config.sampling.logprobs = 2;
  config.sampling.prompt_logprobs = 4;
  Session session = rig.runner.open_session();
  std::vector<TokenLogprobs> generated;
  std::vector<TokenLogprobs> prompt_entries;
  GenerationHandle handle =
      session.generate_async(prompt, config, [&](const GenerationUpdate& update) {
        generated.insert(generated.end(), update.logprobs.begin(), update.logprobs.end());
        prompt_entries.insert(prompt_entries.end(), update.prompt_logprobs.begin(),
                              update.prompt_logprobs.end());
      });
  handle.wait();
  ASSERT_EQ(handle.finish_reason(), FinishReason::kNewTokenLimit) << handle.error_message();
  EXPECT_EQ(handle.tokens(), fake_greedy(prompt, 6, kVocab));
  EXPECT_EQ(rig.executor.counts().num_logits_steps, 0);
  Tokens context = prompt;
  ASSERT_EQ(generated.size(), 6u);
  for (size_t i = 0; i < generated.size(); ++i) {
    expect_logprobs(context, handle.tokens()[i], 2, generated[i]);
    context.push_back(handle.tokens()[i]);
  }
  ASSERT_EQ(prompt_entries.size(), prompt.size() - 1);
  for (size_t p = 1; p < prompt.size(); ++p) {
    expect_logprobs(Tokens(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(p)),
                    prompt[p], 4, prompt_entries[p - 1]);
  }
}

// Collects what a generation's updates carry.
struct LogprobsRecorder {
  Tokens tokens;
  std::vector<TokenLogprobs> prompt;
  int num_updates_with_prompt = 0;
  GenerationCallback callback() {
    return [this](const GenerationUpdate& update) {
      tokens.insert(tokens.end(), update.tokens.begin(), update.tokens.end());
      if (!update.prompt_logprobs.empty()) ++num_updates_with_prompt;
      prompt.insert(prompt.end(), update.prompt_logprobs.begin(), update.prompt_logprobs.end());
    };
  }
  // Every prompt token after position `first` against the toy model.
  void expect_prompt(const Tokens& earlier, const Tokens& prompt_tokens, size_t num_top) const {
    Tokens context = earlier;
    size_t entry = 0;
    for (const int32_t token : prompt_tokens) {
      if (!context.empty()) {
        ASSERT_LT(entry, prompt.size());
        expect_logprobs(context, token, num_top, prompt[entry++]);
      }
      context.push_back(token);
    }
    EXPECT_EQ(entry, prompt.size()) << "one entry per prompt token after position 0";
    EXPECT_EQ(num_updates_with_prompt, prompt.empty() ? 0 : 1) << "all with the first update";
  }
};

TEST(RunnerTest, PromptLogprobsCoverEveryPromptTokenAcrossChunksAndContinuations) {
  FakeExecutorConfig executor;
  executor.max_step_tokens = 8;  // prompts run in several chunks
  executor.min_prefill_chunk = 1;
  executor.greedy_tokens = true;
  Rig rig(executor);
  const Tokens prompt = ramp(21, 3);
  GenConfig config = greedy(4);
  config.sampling.prompt_logprobs = 2;

  Session session = rig.runner.open_session();
  LogprobsRecorder first;
  GenerationHandle a = session.generate_async(prompt, config, first.callback());
  a.wait();
  EXPECT_EQ(a.tokens(), fake_greedy(prompt, 4, kVocab)) << "asking changes no token";
  first.expect_prompt({}, prompt, 2);

  // A continuation: its first prompt token is predicted by the last delivered token's row.
  Tokens earlier = prompt;
  earlier.insert(earlier.end(), first.tokens.begin(), first.tokens.end());
  const Tokens more = {5, 17, 2};
  LogprobsRecorder second;
  session.generate_async(more, config, second.callback()).wait();
  second.expect_prompt(earlier, more, 2);

  // Another session with the same prompt computes it again (no prefix reuse), and a generation
  // of no new token still gets its prompt's entries, in its final update.
  Session other = rig.runner.open_session();
  LogprobsRecorder third;
  GenConfig prompt_only = config;
  prompt_only.max_new_tokens = 0;
  GenerationHandle c = other.generate_async(prompt, prompt_only, third.callback());
  c.wait();
  EXPECT_EQ(c.finish_reason(), FinishReason::kNewTokenLimit);
  EXPECT_EQ(c.metrics().num_reused_tokens, 0);
  third.expect_prompt({}, prompt, 2);

  // Without asking, the updates carry none.
  LogprobsRecorder plain;
  Session fourth = rig.runner.open_session();
  fourth.generate_async(prompt, greedy(2), plain.callback()).wait();
  EXPECT_TRUE(plain.prompt.empty());
}

TEST(RunnerTest, PreemptedGenerationsRecordEachPromptLogprobOnce) {
  FakeExecutorConfig executor;
  executor.max_step_tokens = 16;
  executor.min_prefill_chunk = 1;
  executor.max_cells = 64;  // three sessions of 30 positions cannot all hold their cells
  Rig rig(executor);
  GenConfig config = greedy(12);
  config.sampling.prompt_logprobs = 1;
  std::vector<Session> sessions;
  std::vector<LogprobsRecorder> recorders(3);
  std::vector<GenerationHandle> handles;
  std::vector<Tokens> prompts;
  // Started together: the first step waits for every request (else a slow machine may finish one
  // generation before the next arrives, and nothing needs preempting).
  StepGate gate(1);
  rig.executor.set_during_execute(gate.hook());
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(ramp(18, 5 * i + 1));
    sessions.push_back(rig.runner.open_session());
    handles.push_back(sessions.back().generate_async(prompts[i], config, recorders[i].callback()));
  }
  gate.open();
  int32_t preemptions = 0;
  for (int i = 0; i < 3; ++i) {
    handles[i].wait();
    EXPECT_EQ(handles[i].tokens(), fake_greedy(prompts[i], 12, kVocab));
    recorders[i].expect_prompt({}, prompts[i], 1);
    preemptions += handles[i].metrics().num_preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the pool should have forced a preemption";
}

}  // namespace
}  // namespace cellm::testing
