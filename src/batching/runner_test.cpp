// Runner outcomes on the FakeExecutor: greedy output, stop tokens, stop strings, token limits,
// batched runs equal solo runs, seeded sampling independent of batching, metrics
// (log-probabilities: runner_logprobs_test.cpp).
#include "batching/runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "batching/runner_test_util.h"

namespace cellm::testing {
namespace {

TEST(RunnerTest, GreedyGenerationEqualsTheModelsOwnContinuation) {
  Rig rig;
  Session session = rig.runner.open_session();
  Recorder recorder;
  const Tokens prompt = {1, 2, 3};
  GenerationHandle handle = session.generate_async(prompt, greedy(10), recorder.callback());
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kNewTokenLimit);
  EXPECT_EQ(recorder.tokens, fake_greedy(prompt, 10, kVocab));
  EXPECT_EQ(handle.tokens(), recorder.tokens);
  recorder.expect_finished_once();
  EXPECT_EQ(recorder.num_updates, 10) << "one update per token, the last one finishing";
  EXPECT_EQ(recorder.tokens_in_final, 1u) << "the finish comes with the last token";
  EXPECT_EQ(session.position(), 13);
  const GenerationMetrics metrics = handle.metrics();
  EXPECT_EQ(metrics.num_generated_tokens, 10);
  EXPECT_EQ(metrics.num_prompt_tokens, 3);
  EXPECT_EQ(metrics.num_prefilled_tokens, 3);
  EXPECT_EQ(metrics.num_steps, 10);
  EXPECT_LE(metrics.submit_us, metrics.first_step_us);
  EXPECT_LE(metrics.first_step_us, metrics.first_token_us);
  EXPECT_LE(metrics.first_token_us, metrics.end_us);
  EXPECT_EQ(metrics.inter_token.count, 9);
}

TEST(RunnerTest, ASecondGenerationContinuesTheContextWithTheLastTokenFedBack) {
  Rig rig;
  Session session = rig.runner.open_session();
  const Tokens prompt = {4, 5};
  GenerationHandle first = session.generate_async(prompt, greedy(4));
  first.wait();
  const Tokens more = {6, 7};
  GenerationHandle second = session.generate_async(more, greedy(5));
  second.wait();
  const Tokens context = concat(concat(prompt, first.tokens()), more);
  EXPECT_EQ(second.tokens(), fake_greedy(context, 5, kVocab));
  EXPECT_EQ(session.position(), static_cast<int32_t>(context.size()) + 5);
  // An empty delta just continues.
  GenerationHandle third = session.generate_async({}, greedy(3));
  third.wait();
  EXPECT_EQ(third.tokens(), fake_greedy(concat(context, second.tokens()), 3, kVocab));
}

TEST(RunnerTest, MaxNewTokensZeroOnlyRunsThePromptAndAnEmptyDeltaThenRerunsTheLastPosition) {
  Rig rig;
  Session session = rig.runner.open_session();
  const Tokens prompt = {9, 8, 7, 6};
  Recorder recorder;
  GenerationHandle handle = session.generate_async(prompt, greedy(0), recorder.callback());
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kNewTokenLimit);
  EXPECT_TRUE(recorder.tokens.empty());
  recorder.expect_finished_once();
  EXPECT_EQ(session.position(), 4);
  GenerationHandle next = session.generate_async({}, greedy(3));
  next.wait();
  EXPECT_EQ(next.tokens(), fake_greedy(prompt, 3, kVocab));
}

TEST(RunnerTest, AStopTokenIsDeliveredAndEndsTheGeneration) {
  const Tokens prompt = {3, 1, 4, 1, 5};
  const Tokens expected = fake_greedy(prompt, 40, kVocab);
  // The first token whose first occurrence is at index >= 3.
  size_t stop_at = 3;
  while (std::find(expected.begin(), expected.begin() + stop_at, expected[stop_at]) !=
         expected.begin() + stop_at) {
    ++stop_at;
  }
  ASSERT_LT(stop_at, expected.size());
  const int32_t stop = expected[stop_at];
  const Tokens until_stop(expected.begin(), expected.begin() + stop_at + 1);

  {  // a stop token of the request
    Rig rig;
    Session session = rig.runner.open_session();
    GenConfig config = greedy(40);
    config.stop_tokens = {stop};
    Recorder recorder;
    GenerationHandle handle = session.generate_async(prompt, config, recorder.callback());
    handle.wait();
    EXPECT_EQ(handle.finish_reason(), FinishReason::kStopToken);
    EXPECT_EQ(recorder.tokens, until_stop);
    EXPECT_EQ(recorder.tokens_in_final, 1u);
    EXPECT_EQ(session.position(), static_cast<int32_t>(prompt.size() + until_stop.size()));
  }
  {  // the model's default stop tokens, and ignoring them
    RunnerOptions options;
    options.default_stop_tokens = {stop};
    Rig rig({}, std::nullopt, options);
    Session session = rig.runner.open_session();
    GenerationHandle stops = session.generate_async(prompt, greedy(40));
    stops.wait();
    EXPECT_EQ(stops.finish_reason(), FinishReason::kStopToken);
    EXPECT_EQ(stops.tokens(), until_stop);
    Session other = rig.runner.open_session();
    GenConfig ignore = greedy(40);
    ignore.use_default_stop_tokens = false;
    GenerationHandle runs_on = other.generate_async(prompt, ignore);
    runs_on.wait();
    EXPECT_EQ(runs_on.finish_reason(), FinishReason::kNewTokenLimit);
    EXPECT_EQ(runs_on.tokens(), expected);
  }
}

// min_new_tokens: the stop token is banned from the first tokens (the toy model's next best is
// picked there), and ends the generation after them. The expected tokens come from the toy
// model's rows directly; on the host, and with the executor listing, drawing and rewriting rows
// as the CUDA executor does (the ban is a rewrite until min_new_tokens, none after).
TEST(RunnerTest, MinNewTokensBansTheStopTokensUntilThenAndAStopTokenEndsAfter) {
  const Tokens prompt = {2, 7, 1, 8};
  const Tokens plain = fake_greedy(prompt, 40, kVocab);
  const int32_t stop = plain[2];  // the plain run stops at its third token
  for (const int32_t min_new : {1, 3, 6}) {
    Tokens expected;
    Tokens context = prompt;
    for (int i = 0; i < 40; ++i) {
      std::vector<float> row = fake_logits(context, kVocab);
      if (i < min_new) row[static_cast<size_t>(stop)] = -INFINITY;
      const auto best =
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      expected.push_back(best);
      context.push_back(best);
      if (best == stop) break;
    }
    ASSERT_GE(static_cast<int32_t>(expected.size()), min_new);
    for (int k = 0; k < min_new; ++k) ASSERT_NE(expected[static_cast<size_t>(k)], stop);
    FakeExecutorConfig listing;
    listing.candidates = listing.draws_rows = listing.rewrites_rows = true;
    for (const FakeExecutorConfig& executor : {FakeExecutorConfig{}, listing}) {
      Rig rig(executor);
      Session session = rig.runner.open_session();
      GenConfig config = greedy(40);
      config.stop_tokens = {stop};
      config.min_new_tokens = min_new;
      GenerationHandle handle = session.generate_async(prompt, config);
      handle.wait();
      EXPECT_EQ(handle.tokens(), expected) << "min_new_tokens " << min_new;
      EXPECT_EQ(handle.finish_reason(),
                expected.back() == stop ? FinishReason::kStopToken : FinishReason::kNewTokenLimit);
    }
  }
  // Refused: more than max_new_tokens, or beside a constrained output.
  Rig rig;
  Session session = rig.runner.open_session();
  GenConfig too_many = greedy(4);
  too_many.min_new_tokens = 5;
  GenerationHandle refused = session.generate_async(prompt, too_many);
  refused.wait();
  EXPECT_EQ(refused.finish_reason(), FinishReason::kFailed);
  GenConfig json = greedy(8);
  json.min_new_tokens = 2;
  json.json_object = true;
  EXPECT_FALSE(validate_gen_config(json).ok());
}

// Token t reads as the letter 'a' + t % 26.
class LetterStream : public TextStream {
 public:
  std::string append(int32_t token) override { return std::string(1, char('a' + token % 26)); }
  std::string finish() override { return ""; }
};
std::string letters(const Tokens& tokens) {
  std::string text;
  for (const int32_t t : tokens) text += char('a' + t % 26);
  return text;
}

TEST(RunnerTest, AStopStringCutsTheTextAndNoPartialMatchIsEverShown) {
  const Tokens prompt = {2, 7, 1, 8};
  const Tokens expected = fake_greedy(prompt, 40, kVocab);
  const std::string text = letters(expected);
  // A two-letter stop string whose first occurrence starts at index >= 4.
  size_t at = 4;
  while (text.find(text.substr(at, 2)) != at) ++at;
  ASSERT_LT(at + 1, text.size());
  RunnerOptions options;
  options.text_streams = [](std::span<const int32_t>) { return std::make_unique<LetterStream>(); };
  Rig rig({}, std::nullopt, options);
  Session session = rig.runner.open_session();
  GenConfig config = greedy(40);
  config.stop_strings = {text.substr(at, 2)};
  std::vector<std::string> shown;
  Recorder recorder;
  GenerationHandle handle =
      session.generate_async(prompt, config, [&](const GenerationUpdate& update) {
        shown.emplace_back(update.text);
        recorder.record(update);
      });
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kStopString);
  EXPECT_EQ(recorder.text, text.substr(0, at));
  EXPECT_EQ(handle.text(), text.substr(0, at));
  EXPECT_EQ(recorder.tokens, Tokens(expected.begin(), expected.begin() + at + 2))
      << "tokens up to the one completing the stop string are delivered";
  std::string so_far;
  for (const std::string& piece : shown) {
    so_far += piece;
    EXPECT_EQ(so_far.find(config.stop_strings[0]), std::string::npos);
  }
}

struct BatchCase {
  int32_t max_step_tokens;
  int32_t min_prefill_chunk;
  std::vector<int32_t> decode_widths;
  int32_t max_cells;
};

class RunnerBatchingTest : public ::testing::TestWithParam<BatchCase> {};

// Sixteen sessions with prompts of 1 to 300 tokens, started together: each equals its own
// continuation, however the steps packed them, and whatever preemption did.
TEST_P(RunnerBatchingTest, SixteenSessionsBatchedEqualTheirSoloRuns) {
  const BatchCase& c = GetParam();
  FakeExecutorConfig config;
  config.max_step_tokens = c.max_step_tokens;
  config.min_prefill_chunk = c.min_prefill_chunk;
  config.decode_widths = c.decode_widths;
  config.max_cells = c.max_cells;
  Rig rig(config);
  std::mt19937 rng(17);
  std::vector<Tokens> prompts;
  for (int i = 0; i < 16; ++i) {
    const int32_t length = i == 0 ? 1 : std::uniform_int_distribution<int32_t>(1, 300)(rng);
    Tokens prompt(length);
    for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng);
    prompts.push_back(prompt);
  }
  testing::StepGate gate(1);  // started together: the first step waits for every request
  rig.executor.set_during_execute(gate.hook());
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  std::vector<Recorder> recorders(16);
  for (int i = 0; i < 16; ++i) {
    sessions.push_back(rig.runner.open_session());
    handles.push_back(sessions[i].generate_async(prompts[i], greedy(24), recorders[i].callback()));
  }
  gate.open();
  for (int i = 0; i < 16; ++i) {
    handles[i].wait();
    EXPECT_EQ(handles[i].finish_reason(), FinishReason::kNewTokenLimit)
        << handles[i].error_message();
    EXPECT_EQ(recorders[i].tokens, fake_greedy(prompts[i], 24, kVocab)) << "session " << i;
    recorders[i].expect_finished_once();
    EXPECT_EQ(sessions[i].position(), static_cast<int32_t>(prompts[i].size()) + 24);
  }
  const EngineMetrics metrics = rig.runner.metrics();
  EXPECT_EQ(metrics.num_generated_tokens, 16 * 24);
  EXPECT_EQ(metrics.finished(FinishReason::kNewTokenLimit), 16);
  EXPECT_LE(rig.executor.counts().max_step_tokens_seen, c.max_step_tokens);
  if (c.max_cells < 16 * 330) {
    EXPECT_GT(metrics.num_preemptions, 0) << "a pool this small must preempt";
    EXPECT_GT(metrics.num_recomputed_tokens, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, RunnerBatchingTest,
                         ::testing::Values(BatchCase{512, 5, {1}, 8192},
                                           BatchCase{32, 5, {1}, 8192}, BatchCase{16, 1, {1}, 8192},
                                           BatchCase{512, 5, {1, 2, 4, 8, 16}, 8192},
                                           BatchCase{16, 1, {1, 2, 4, 8, 16}, 8192},
                                           BatchCase{64, 5, {1}, 600},
                                           BatchCase{16, 1, {1, 2, 4}, 400}));

TEST(RunnerTest, SeededSamplingIsTheSameAloneAndBatchedWithFifteenOthersPickedOnFourThreads) {
  std::vector<Tokens> prompts;
  std::mt19937 rng(5);
  for (int i = 0; i < 16; ++i) {
    Tokens prompt(std::uniform_int_distribution<int32_t>(1, 60)(rng));
    for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng);
    prompts.push_back(prompt);
  }
  const auto config_for = [](int i) {
    GenConfig config = greedy(20);
    config.sampling.temperature = 0.8f;
    config.sampling.top_p = 0.9f;
    config.seed = 1000 + i;
    return config;
  };
  FakeExecutorConfig executor;
  executor.max_step_tokens = 16;
  executor.min_prefill_chunk = 1;
  std::vector<Tokens> alone(16);
  RunnerOptions one_thread;
  one_thread.sampling_threads = 1;
  for (int i = 0; i < 16; ++i) {
    Rig rig(executor, std::nullopt, one_thread);
    Session session = rig.runner.open_session();
    GenerationHandle handle = session.generate_async(prompts[i], config_for(i));
    handle.wait();
    alone[i] = handle.tokens();
  }
  // Batched, the rows of a step are sampled on four threads (RunnerOptions::sampling_threads).
  RunnerOptions four_threads;
  four_threads.sampling_threads = 4;
  Rig rig(executor, std::nullopt, four_threads);
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  for (int i = 0; i < 16; ++i) {
    sessions.push_back(rig.runner.open_session());
    handles.push_back(sessions[i].generate_async(prompts[i], config_for(i)));
  }
  int differs_from_greedy = 0;
  for (int i = 0; i < 16; ++i) {
    handles[i].wait();
    EXPECT_EQ(handles[i].tokens(), alone[i]) << "request " << i;
    differs_from_greedy += handles[i].tokens() != fake_greedy(prompts[i], 20, kVocab);
  }
  EXPECT_GT(differs_from_greedy, 8) << "temperature 0.8 should not be greedy";
}

TEST(RunnerTest, PlainGreedyTakesTheExecutorsArgmaxAndEverythingElseReadsTheRow) {
  // The rows are NaN but each row's greedy token is right: plain greedy never reads a row, while
  // a generation whose sampler rewrites scores (a logit bias) must, and fails on NaN.
  FakeExecutorConfig executor;
  executor.greedy_tokens = true;
  executor.nan_logits = true;
  Rig rig(executor);
  Session plain = rig.runner.open_session();
  Session biased = rig.runner.open_session();
  const Tokens prompt = {3, 1, 4, 1, 5};
  GenConfig with_bias = greedy(6);
  with_bias.sampling.logit_bias = {{0, 0.5f}};
  GenerationHandle a = plain.generate_async(prompt, greedy(12));
  GenerationHandle b = biased.generate_async(prompt, with_bias);
  a.wait();
  b.wait();
  EXPECT_EQ(a.finish_reason(), FinishReason::kNewTokenLimit);
  EXPECT_EQ(a.tokens(), fake_greedy(prompt, 12, kVocab));
  EXPECT_EQ(b.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(b.error_message().find("finite"), std::string::npos) << b.error_message();
}

TEST(RunnerTest, StepsWhoseRowsAllTakeTheExecutorsArgmaxAskForNoLogits) {
  const Tokens prompt = {2, 7, 1, 8};
  GenConfig with_bias = greedy(6);
  with_bias.sampling.logit_bias = {{0, 0.5f}};
  {
    FakeExecutorConfig executor;
    executor.greedy_tokens = true;
    Rig rig(executor);
    Session session = rig.runner.open_session();
    GenerationHandle plain = session.generate_async(prompt, greedy(10));
    plain.wait();
    EXPECT_EQ(plain.tokens(), fake_greedy(prompt, 10, kVocab));
    EXPECT_EQ(rig.executor.counts().num_logits_steps, 0) << "plain greedy never reads a row";
    const int64_t steps_before = rig.executor.counts().num_executes;
    GenerationHandle biased = session.generate_async({3}, with_bias);
    biased.wait();
    EXPECT_EQ(biased.finish_reason(), FinishReason::kNewTokenLimit);
    EXPECT_EQ(rig.executor.counts().num_logits_steps,
              rig.executor.counts().num_executes - steps_before)
        << "a logit bias reads every row it samples";
  }
  {
    Rig rig;  // no greedy tokens from the executor: every step with an output row reads logits
    Session session = rig.runner.open_session();
    session.generate_async(prompt, greedy(5)).wait();
    EXPECT_EQ(rig.executor.counts().num_logits_steps, rig.executor.counts().num_executes);
  }
}

TEST(RunnerTest, AGreedyRowWithNothingFiniteFailsItsGenerationAndNothingElse) {
  // The executor reports no finite logit and, every row being greedy, returns no rows: the
  // generation fails with the reason instead of sampling a row that is not there.
  FakeExecutorConfig executor;
  executor.greedy_tokens = true;
  executor.no_finite_logits = true;
  Rig rig(executor);
  Session session = rig.runner.open_session();
  GenerationHandle handle = session.generate_async({3, 1, 4}, greedy(4));
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(handle.error_message().find("finite"), std::string::npos) << handle.error_message();
  EXPECT_TRUE(handle.tokens().empty());
  EXPECT_EQ(rig.executor.counts().num_logits_steps, 0);
  Session other = rig.runner.open_session();  // the runner goes on
  GenerationHandle next = other.generate_async({5}, greedy(0));
  next.wait();
  EXPECT_EQ(next.finish_reason(), FinishReason::kNewTokenLimit);
}

TEST(RunnerTest, EngineMetricsCountWhatRan) {
  Rig rig;
  Session a = rig.runner.open_session();
  Session b = rig.runner.open_session();
  GenerationHandle ha = a.generate_async({1, 2, 3, 4}, greedy(5));
  GenerationHandle hb = b.generate_async({5, 6}, greedy(7));
  ha.wait();
  hb.wait();
  const EngineMetrics m = rig.runner.metrics();
  EXPECT_EQ(m.num_generated_tokens, 12);
  EXPECT_EQ(m.num_submitted, 2);
  EXPECT_EQ(m.finished(FinishReason::kNewTokenLimit), 2);
  EXPECT_EQ(m.num_prompt_tokens, 6);
  EXPECT_EQ(m.num_decode_tokens, 12 - 2) << "every token but the last is fed back";
  EXPECT_EQ(m.ttft.count, 2);
  EXPECT_EQ(m.inter_token.count, 10);
  EXPECT_EQ(m.num_steps, rig.executor.counts().num_executes);
  EXPECT_EQ(m.pool_peak_used_cells, 6 + 10);
  EXPECT_GT(m.generated_tokens_per_s, 0.0);
  EXPECT_EQ(m.num_preemptions, 0);
  EXPECT_EQ(m.num_refusals, 0);
}

}  // namespace
}  // namespace cellm::testing
