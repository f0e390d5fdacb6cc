// The Runner with an executor that lists sampling candidates (FakeExecutorConfig::candidates, as
// the CUDA executor does on the device): sampled generations get the tokens and log-probabilities
// that sampling the rows gives, a row the candidates decide is never read on the host, and with
// an executor that keeps the rows (FakeExecutorConfig::fetches_logits) only the undecided ones
// are fetched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "batching/runner.h"
#include "batching/runner_test_util.h"

namespace cellm::testing {
namespace {

GenConfig sampled(int32_t max_new_tokens, float temperature, int32_t top_k, float top_p,
                  float min_p, uint64_t seed) {
  GenConfig config;
  config.max_new_tokens = max_new_tokens;
  config.sampling.temperature = temperature;
  config.sampling.top_k = top_k;
  config.sampling.top_p = top_p;
  config.sampling.min_p = min_p;
  config.seed = seed;
  return config;
}

struct Outcome {
  Tokens tokens;
  std::vector<TokenLogprobs> logprobs;
  FinishReason reason = FinishReason::kFailed;
  std::string error;
};

// Runs every config at once, one session each, on a fresh executor made from `executor`; its
// counts after into `counts` when given.
std::vector<Outcome> run_all(const FakeExecutorConfig& executor, const Tokens& prompt,
                             const std::vector<GenConfig>& configs,
                             FakeExecutor::Counts* counts = nullptr) {
  Rig rig(executor);
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  std::vector<Outcome> outcomes(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    sessions.push_back(rig.runner.open_session());
    Outcome& outcome = outcomes[i];
    handles.push_back(sessions.back().generate_async(
        prompt, configs[i], [&outcome](const GenerationUpdate& update) {
          outcome.logprobs.insert(outcome.logprobs.end(), update.logprobs.begin(),
                                  update.logprobs.end());
        }));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    handles[i].wait();
    outcomes[i].tokens = handles[i].tokens();
    outcomes[i].reason = handles[i].finish_reason();
    outcomes[i].error = handles[i].error_message();
  }
  if (counts != nullptr) *counts = rig.executor.counts();
  return outcomes;
}

TEST(RunnerCandidatesTest, SampledTokensAreTheOnesTheRowsGiveWhetherTheCandidatesDecideOrNot) {
  // Cuts inside the candidates (decided there), none or past them (the whole vocabulary of 32 is
  // listed but a draw may still need the row), at several temperatures, all in one batch.
  std::vector<GenConfig> configs;
  uint64_t seed = 100;
  for (const float temperature : {0.5f, 1.0f, 2.0f}) {
    for (const int32_t top_k : {0, 3, 40}) {
      for (const float top_p : {1.0f, 0.7f}) {
        for (const float min_p : {0.0f, 0.1f}) {
          configs.push_back(sampled(10, temperature, top_k, top_p, min_p, ++seed));
        }
      }
    }
  }
  FakeExecutorConfig plain;
  plain.greedy_tokens = true;
  FakeExecutorConfig listing = plain;
  listing.candidates = true;
  const Tokens prompt = ramp(9, 3);
  const std::vector<Outcome> want = run_all(plain, prompt, configs);
  const std::vector<Outcome> got = run_all(listing, prompt, configs);
  int differs_from_greedy = 0;
  const Tokens greedy_tokens = fake_greedy(prompt, 10, kVocab);
  for (size_t i = 0; i < configs.size(); ++i) {
    ASSERT_EQ(got[i].reason, FinishReason::kNewTokenLimit) << got[i].error;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "config " << i;
    differs_from_greedy += got[i].tokens != greedy_tokens;
  }
  EXPECT_GT(differs_from_greedy, static_cast<int>(configs.size()) / 2) << "the configs sample";
}

TEST(RunnerCandidatesTest, TheDrawAnExecutorMakesFromTheCandidatesIsTheTokenTheSessionGets) {
  // Every sampled row asks the executor to draw (StepInput::candidates_draw) with its sampler's
  // cuts, seed and the token's position: each draw the list decides must be the token the
  // generation then gets at that position (a wrong seed, position or cut draws another).
  std::vector<GenConfig> configs;
  uint64_t seed = 500;
  for (const int32_t top_k : {0, 5, 20}) {
    for (const float top_p : {1.0f, 0.8f}) {
      for (const float min_p : {0.0f, 0.2f}) {
        configs.push_back(sampled(12, 0.7f, top_k, top_p, min_p, ++seed));
      }
    }
  }
  configs.push_back(sampled(12, 0.0f, 0, 1.0f, 0.0f, ++seed));  // greedy: asks for no draw
  FakeExecutorConfig listing;
  listing.greedy_tokens = true;
  listing.candidates = true;
  listing.vocab_size = 64;  // more tokens than the list holds: some draws stay undecided
  const Tokens prompt = ramp(7, 5);
  FakeExecutor::Counts counts;
  const std::vector<Outcome> got = run_all(listing, prompt, configs, &counts);
  int decided = 0;
  int undecided = 0;
  for (const auto& [draw_seed, position, token] : counts.draws) {
    ASSERT_GT(draw_seed, 500u);
    const auto config = static_cast<size_t>(draw_seed - 501);
    ASSERT_LT(config, configs.size() - 1) << "the greedy generation asked for a draw";
    const int64_t index = position - static_cast<int64_t>(prompt.size());
    ASSERT_GE(index, 0);
    ASSERT_LT(index, static_cast<int64_t>(got[config].tokens.size()));
    if (token == kNoToken) {
      ++undecided;
      continue;
    }
    ++decided;
    EXPECT_EQ(token, got[config].tokens[static_cast<size_t>(index)])
        << "config " << config << ", position " << position;
  }
  EXPECT_EQ(counts.draws.size(), (configs.size() - 1) * 12) << "one draw per sampled token";
  EXPECT_GT(decided, 20);
  EXPECT_GT(undecided, 0) << "the undecided draws are the host's";
}

TEST(RunnerCandidatesTest, RowsTheCandidatesDecideAreNeverReadWithTheirLogprobs) {
  // Rows of NaN but right candidates and summaries: an engine that read a row to sample it or to
  // score its token would fail the generation or deliver NaN. A vocabulary of 16: every row is
  // listed whole, so the candidates decide every draw.
  FakeExecutorConfig plain;
  plain.vocab_size = 16;
  plain.greedy_tokens = true;
  FakeExecutorConfig listing = plain;
  listing.candidates = true;
  listing.logprobs = true;
  listing.nan_logits = true;
  Tokens prompt = ramp(11, 1);
  for (int32_t& token : prompt) token %= 16;
  std::vector<GenConfig> configs = {sampled(12, 0.9f, 0, 1.0f, 0.0f, 5),
                                    sampled(12, 1.3f, 4, 0.8f, 0.05f, 6)};
  for (GenConfig& config : configs) config.sampling.logprobs = 3;
  const std::vector<Outcome> want = run_all(plain, prompt, configs);
  const std::vector<Outcome> got = run_all(listing, prompt, configs);
  for (size_t i = 0; i < configs.size(); ++i) {
    ASSERT_EQ(got[i].reason, FinishReason::kNewTokenLimit) << got[i].error;
    EXPECT_EQ(got[i].tokens, want[i].tokens);
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (size_t k = 0; k < got[i].logprobs.size(); ++k) {
      const TokenLogprobs& g = got[i].logprobs[k];
      const TokenLogprobs& w = want[i].logprobs[k];
      EXPECT_EQ(g.token, w.token);
      EXPECT_FALSE(std::isnan(g.logprob));
      EXPECT_NEAR(g.logprob, w.logprob, 1e-6);
      ASSERT_EQ(g.top.size(), w.top.size());
      for (size_t j = 0; j < g.top.size(); ++j) {
        EXPECT_EQ(g.top[j].first, w.top[j].first);
        EXPECT_NEAR(g.top[j].second, w.top[j].second, 1e-6);
      }
    }
  }
}

TEST(RunnerCandidatesTest, TopKInsideTheListCopiesNoRowsToTheHost) {
  // A top-k shorter than the list is always decided by the candidates: such steps ask for no
  // logits, whatever else the sampler does (top-p, min-p, log-probabilities summarized).
  FakeExecutorConfig plain;
  plain.greedy_tokens = true;
  FakeExecutorConfig listing = plain;
  listing.candidates = true;
  listing.logprobs = true;
  std::vector<GenConfig> configs = {sampled(9, 0.9f, 5, 1.0f, 0.0f, 1),
                                    sampled(9, 1.5f, 31, 0.8f, 0.1f, 2), greedy(9)};
  configs[1].sampling.logprobs = 2;
  const Tokens prompt = ramp(7, 2);
  const std::vector<Outcome> want = run_all(plain, prompt, configs);
  Rig rig(listing);
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  for (const GenConfig& config : configs) {
    sessions.push_back(rig.runner.open_session());
    handles.push_back(sessions.back().generate_async(prompt, config));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    handles[i].wait();
    ASSERT_EQ(handles[i].finish_reason(), FinishReason::kNewTokenLimit)
        << handles[i].error_message();
    EXPECT_EQ(handles[i].tokens(), want[i].tokens);
  }
  EXPECT_EQ(rig.executor.counts().num_logits_steps, 0);
  // A top-k of the list's length may need the row: those steps copy it.
  GenConfig wide = sampled(3, 1.0f, kSamplingCandidates, 1.0f, 0.0f, 3);
  Session session = rig.runner.open_session();
  GenerationHandle handle = session.generate_async(prompt, wide);
  handle.wait();
  EXPECT_GT(rig.executor.counts().num_logits_steps, 0);
}

// Flat rows of a vocabulary of 256 (the toy logits lie in [0, 1)): at these temperatures most
// draws fall past the candidates, at low ones and with a top-k past the list fewer, with greedy and
// a top-k inside the list beside them.
std::vector<GenConfig> mostly_undecided_configs() {
  std::vector<GenConfig> configs;
  uint64_t seed = 300;
  for (const float temperature : {0.05f, 1.0f, 3.0f}) {
    for (const int32_t top_k : {0, kSamplingCandidates + 8}) {
      for (const float top_p : {1.0f, 0.6f}) {
        configs.push_back(sampled(8, temperature, top_k, top_p, 0.0f, ++seed));
      }
    }
  }
  configs.push_back(sampled(8, 1.0f, 0, 1.0f, 0.02f, ++seed));
  configs.push_back(sampled(8, 1.0f, 7, 1.0f, 0.0f, ++seed));
  configs.push_back(greedy(8));
  return configs;
}

// Rows the host always reads: a penalty rewrites the row (even under a top-k inside the list).
GenConfig penalized(uint64_t seed) {
  GenConfig config = sampled(8, 0.7f, 5, 1.0f, 0.0f, seed);
  config.sampling.repetition_penalty = 1.3f;
  return config;
}

Tokens wide_prompt() {
  Tokens prompt = ramp(9, 5);
  for (int32_t& token : prompt) token = token * 7 + 3;  // below 256
  return prompt;
}

// mostly_undecided_configs() and a penalized generation on `executor` (a vocabulary of 256,
// greedy tokens and log-probability summaries besides what it sets) give the tokens of an executor
// that samples every row on the host, and config 8 (T 3) its log-probabilities; its counts.
FakeExecutor::Counts expect_the_hosts_tokens(FakeExecutorConfig executor) {
  FakeExecutorConfig plain;
  plain.vocab_size = 256;
  plain.greedy_tokens = true;
  plain.logprobs = true;
  executor.vocab_size = plain.vocab_size;
  executor.greedy_tokens = true;
  executor.logprobs = true;
  std::vector<GenConfig> configs = mostly_undecided_configs();
  configs[8].sampling.logprobs = 3;  // T 3: its token scored from its row or with the row's draw
  configs.push_back(penalized(400));
  const Tokens prompt = wide_prompt();
  const std::vector<Outcome> want = run_all(plain, prompt, configs);
  FakeExecutor::Counts counts;
  const std::vector<Outcome> got = run_all(executor, prompt, configs, &counts);
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(got[i].reason, FinishReason::kNewTokenLimit) << got[i].error;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "config " << i;
  }
  EXPECT_EQ(got[8].logprobs.size(), want[8].logprobs.size());
  for (size_t k = 0; k < std::min(got[8].logprobs.size(), want[8].logprobs.size()); ++k) {
    EXPECT_EQ(got[8].logprobs[k].token, want[8].logprobs[k].token);
    EXPECT_FALSE(std::isnan(got[8].logprobs[k].logprob));
    EXPECT_NEAR(got[8].logprobs[k].logprob, want[8].logprobs[k].logprob, 1e-6);
    EXPECT_EQ(got[8].logprobs[k].top, want[8].logprobs[k].top);
  }
  return counts;
}

TEST(RunnerCandidatesTest, OnlyTheRowsTheCandidatesLeaveUndecidedAreFetched) {
  FakeExecutorConfig fetching;
  fetching.candidates = true;
  fetching.fetches_logits = true;
  const FakeExecutor::Counts counts = expect_the_hosts_tokens(fetching);
  EXPECT_EQ(counts.num_logits_steps, 0) << "a step copied every row";
  EXPECT_GT(counts.num_kept_steps, 0);
  // The unfetched rows are NaN: a token sampled from one would have failed above.
  EXPECT_GT(counts.num_fetched_rows, 0) << "the flat rows need their rows";
  EXPECT_LT(counts.num_fetched_rows, counts.num_kept_rows) << "the decided rows were fetched too";
}

TEST(RunnerCandidatesTest, AnExecutorThatDrawsFromTheRowsFetchesOnlyTheRowsTheSamplerRewrites) {
  // The draws the candidates leave undecided are drawn by the executor from the whole row
  // (Executor::draws_rows()): the same tokens and log-probabilities as sampling every row on the
  // host, and only the penalized session's rows travel.
  FakeExecutorConfig drawing;
  drawing.candidates = true;
  drawing.fetches_logits = true;
  drawing.draws_rows = true;
  const FakeExecutor::Counts counts = expect_the_hosts_tokens(drawing);
  // Every draw was made (none left to the host), though most lists did not decide.
  int drawn = 0;
  for (const auto& draw : counts.draws) drawn += std::get<2>(draw) != kNoToken;
  EXPECT_EQ(drawn, static_cast<int>(counts.draws.size()));
  EXPECT_EQ(counts.num_logits_steps, 0) << "a step copied every row";
  EXPECT_EQ(counts.num_fetched_rows, 8) << "one row per token of the penalized session";
}

TEST(RunnerCandidatesTest, AnExecutorThatRewritesRowsFetchesOnlyRowsScoredForLogprobs) {
  // Samplers with bias and penalties of every kind, greedy ones too, their rows rewritten and
  // drawn from by the executor (Executor::rewrites_rows()): the tokens of sampling every row on
  // the host, the same failure where the bias bans every token, and only the rows of the
  // generation that asks for log-probabilities (of the raw row) travel.
  std::vector<GenConfig> configs;
  configs.push_back(penalized(500));  // a top-k inside the list
  GenConfig nucleus = sampled(8, 1.0f, 0, 0.9f, 0.0f, 501);
  nucleus.sampling.presence_penalty = 0.4f;
  nucleus.sampling.frequency_penalty = 0.3f;
  nucleus.sampling.penalty_window = -1;  // the whole context
  configs.push_back(nucleus);
  GenConfig biased = sampled(8, 3.0f, kSamplingCandidates + 6, 1.0f, 0.0f, 502);
  // A token named twice (its biases add in order), one banned, one past the prompt's tokens.
  biased.sampling.logit_bias = {{5, 2.0f}, {10, -INFINITY}, {5, 1.5f}, {200, 0.25f}};
  biased.sampling.frequency_penalty = 0.2f;
  configs.push_back(biased);
  GenConfig encouraged = sampled(8, 0.5f, 0, 1.0f, 0.05f, 503);
  encouraged.sampling.repetition_penalty = 0.8f;  // below 1: seen tokens are favored
  encouraged.sampling.penalty_window = 3;
  configs.push_back(encouraged);
  GenConfig banned = sampled(8, 1.0f, 0, 1.0f, 0.0f, 504);
  for (int32_t token = 0; token < 256; ++token) {
    banned.sampling.logit_bias.push_back({token, -INFINITY});
  }
  configs.push_back(banned);
  GenConfig scored = penalized(505);
  scored.sampling.logprobs = 2;
  configs.push_back(scored);
  configs.push_back(sampled(8, 1.0f, 0, 1.0f, 0.0f, 506));  // rewrites nothing
  // Greedy with penalties and a bias: the rewritten row's argmax, the head of its list.
  GenConfig greedy_penalized = greedy(8);
  greedy_penalized.sampling.repetition_penalty = 1.3f;
  greedy_penalized.sampling.frequency_penalty = -1.0f;  // negative: seen tokens are favored
  configs.push_back(greedy_penalized);
  GenConfig greedy_biased = greedy(8);
  greedy_biased.sampling.logit_bias = {{wide_prompt()[2], 0.5f}, {7, -INFINITY}};
  configs.push_back(greedy_biased);

  FakeExecutorConfig plain;
  plain.vocab_size = 256;
  plain.greedy_tokens = true;
  plain.logprobs = true;
  FakeExecutorConfig rewriting = plain;
  rewriting.candidates = true;
  rewriting.fetches_logits = true;
  rewriting.draws_rows = true;
  rewriting.rewrites_rows = true;
  const Tokens prompt = wide_prompt();
  const std::vector<Outcome> want = run_all(plain, prompt, configs);
  FakeExecutor::Counts counts;
  const std::vector<Outcome> got = run_all(rewriting, prompt, configs, &counts);
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(got[i].reason, want[i].reason) << "config " << i << ": " << got[i].error;
    EXPECT_EQ(got[i].error, want[i].error) << "config " << i;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "config " << i;
  }
  EXPECT_EQ(want[4].reason, FinishReason::kFailed);
  EXPECT_NE(want[4].error.find("banned every token"), std::string::npos) << want[4].error;
  ASSERT_EQ(got[5].logprobs.size(), want[5].logprobs.size());
  for (size_t k = 0; k < got[5].logprobs.size(); ++k) {
    EXPECT_EQ(got[5].logprobs[k].token, want[5].logprobs[k].token);
    EXPECT_NEAR(got[5].logprobs[k].logprob, want[5].logprobs[k].logprob, 1e-6);
  }
  // Four sampled and two greedy generations of 8 tokens and the banned one's first row were
  // rewritten; the greedy ones' tokens are not the plain argmax's.
  EXPECT_EQ(counts.num_rewritten_rows, 6 * 8 + 1);
  EXPECT_NE(want[7].tokens, fake_greedy(prompt, 8, 256));
  EXPECT_NE(want[8].tokens, fake_greedy(prompt, 8, 256));
  EXPECT_EQ(counts.num_logits_steps, 0) << "a step copied every row";
  EXPECT_EQ(counts.num_fetched_rows, 8) << "one row per token of the scored session";
}

TEST(RunnerCandidatesTest, ARowTheSamplerReadsIsFetchedAloneBesideDecidedOnes) {
  // A penalized session among greedy and top-k ones: without fetching, every step of theirs
  // copies every row; with it, only the penalized session's row travels.
  FakeExecutorConfig plain;
  plain.vocab_size = 256;
  plain.greedy_tokens = true;
  FakeExecutorConfig fetching = plain;
  fetching.candidates = true;
  fetching.fetches_logits = true;
  const std::vector<GenConfig> configs = {greedy(8), sampled(8, 0.9f, 10, 0.9f, 0.0f, 7),
                                          penalized(8), greedy(8)};
  const Tokens prompt = wide_prompt();
  FakeExecutor::Counts plain_counts;
  const std::vector<Outcome> want = run_all(plain, prompt, configs, &plain_counts);
  EXPECT_GT(plain_counts.num_logits_steps, 0);
  FakeExecutor::Counts counts;
  const std::vector<Outcome> got = run_all(fetching, prompt, configs, &counts);
  for (size_t i = 0; i < configs.size(); ++i) {
    ASSERT_EQ(got[i].reason, FinishReason::kNewTokenLimit) << got[i].error;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "config " << i;
  }
  EXPECT_EQ(counts.num_logits_steps, 0) << "a step copied every row";
  EXPECT_EQ(counts.num_fetched_rows, 8) << "one row per token of the penalized session";
}

TEST(RunnerCandidatesTest, AFailedFetchFailsOnlyTheGenerationsThatNeededARow) {
  FakeExecutorConfig executor;
  executor.vocab_size = 256;
  executor.greedy_tokens = true;
  executor.candidates = true;
  executor.fetches_logits = true;
  executor.fail_fetches = true;
  Rig rig(executor);
  const Tokens prompt = wide_prompt();
  const std::vector<GenConfig> configs = {greedy(6), sampled(6, 1.0f, 7, 1.0f, 0.0f, 1),
                                          sampled(6, 3.0f, 0, 1.0f, 0.0f, 2)};
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  for (const GenConfig& config : configs) {
    sessions.push_back(rig.runner.open_session());
    handles.push_back(sessions.back().generate_async(prompt, config));
  }
  for (GenerationHandle& handle : handles) handle.wait();
  EXPECT_EQ(handles[0].finish_reason(), FinishReason::kNewTokenLimit) << handles[0].error_message();
  EXPECT_EQ(handles[0].tokens(), fake_greedy(prompt, 6, 256));
  EXPECT_EQ(handles[1].finish_reason(), FinishReason::kNewTokenLimit) << handles[1].error_message();
  EXPECT_EQ(handles[1].tokens().size(), 6u);
  EXPECT_EQ(handles[2].finish_reason(), FinishReason::kFailed);
  EXPECT_NE(handles[2].error_message().find("fetching its logits"), std::string::npos)
      << handles[2].error_message();
  // The engine goes on: a session opened after it still generates.
  Session after = rig.runner.open_session();
  GenerationHandle again = after.generate_async(prompt, greedy(3));
  again.wait();
  EXPECT_EQ(again.tokens(), fake_greedy(prompt, 3, 256));
}

TEST(RunnerCandidatesTest, ARowWithNothingFiniteFailsItsGenerationWithoutTheRow) {
  FakeExecutorConfig executor;
  executor.greedy_tokens = true;
  executor.candidates = true;
  executor.no_finite_logits = true;
  Rig rig(executor);
  Session session = rig.runner.open_session();
  GenerationHandle handle = session.generate_async(ramp(5), sampled(4, 1.0f, 8, 1.0f, 0.0f, 4));
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kFailed);
  EXPECT_NE(handle.error_message().find("no token has a finite score"), std::string::npos)
      << handle.error_message();
  EXPECT_EQ(rig.executor.counts().num_logits_steps, 0);
}

}  // namespace
}  // namespace cellm::testing
