// Runner prefix reuse (RunnerOptions::prefix_reuse) on the FakeExecutor, whose logits hash every
// token its cells hold: a clone of the wrong cells, or of too many, changes the tokens.
#include <gtest/gtest.h>

#include <initializer_list>
#include <thread>

#include "batching/runner.h"
#include "batching/runner_test_util.h"

namespace cellm::testing {
namespace {

struct Finished {
  Tokens tokens;
  GenerationMetrics metrics;
};

Finished generate(Session& session, Tokens prompt, int32_t max_new_tokens) {
  GenerationHandle handle = session.generate_async(std::move(prompt), greedy(max_new_tokens));
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kNewTokenLimit) << handle.error_message();
  return {handle.tokens(), handle.metrics()};
}

// Metrics once the engine has applied every command queued before (a session's close is
// asynchronous): a one-token generation on a probe session, which stays open (and counted in the
// executor's open sessions) while the caller looks.
EngineMetrics settled(Runner& runner, Session& probe) {
  probe = runner.open_session();
  generate(probe, {0}, 1);
  return runner.metrics();
}

// Each prompt generated on a session of its own, closed after: retained, the first the oldest.
void retain_each(Runner& runner, std::initializer_list<Tokens> prompts) {
  for (const Tokens& prompt : prompts) {
    Session session = runner.open_session();
    generate(session, prompt, 2);
  }
}

RunnerOptions reuse(int32_t min_tokens = 16, int32_t max_retained = 64) {
  RunnerOptions options;
  options.prefix_reuse.min_tokens = min_tokens;
  options.prefix_reuse.max_retained = max_retained;
  return options;
}

TEST(RunnerPrefixTest, ASessionStartsFromAnotherSessionsCellsAndGeneratesTheSameTokens) {
  Rig rig({}, std::nullopt, reuse());
  const Tokens shared = ramp(40, 3);
  Session first = rig.runner.open_session();
  const Finished a = generate(first, concat(shared, {1, 2, 3}), 8);
  Session second = rig.runner.open_session();
  const Tokens prompt = concat(shared, {9, 8, 7, 6});
  const Finished b = generate(second, prompt, 8);
  EXPECT_EQ(b.tokens, fake_greedy(prompt, 8, kVocab));
  EXPECT_EQ(b.metrics.num_reused_tokens, 40);
  EXPECT_EQ(b.metrics.num_prefilled_tokens, 4) << "only the positions after the shared ones run";
  EXPECT_EQ(a.metrics.num_reused_tokens, 0);
  const EngineMetrics m = rig.runner.metrics();
  EXPECT_EQ(m.num_prefix_hits, 1);
  EXPECT_EQ(m.num_reused_tokens, 40);
  // The donor goes on unharmed after the clone.
  const Finished more = generate(first, {5}, 4);
  Tokens context = concat(concat(shared, {1, 2, 3}), a.tokens);
  context.push_back(5);
  EXPECT_EQ(more.tokens, fake_greedy(context, 4, kVocab));
}

TEST(RunnerPrefixTest, AClosedSessionIsRetainedAndItsWholeContextReused) {
  Rig rig({}, std::nullopt, reuse());
  const Tokens prompt = ramp(30, 5);
  Tokens context;
  {
    Session first = rig.runner.open_session();
    const Finished a = generate(first, prompt, 6);
    context = concat(prompt, a.tokens);
  }  // closed: retained, holding every position but the last delivered token (pending)
  Session second = rig.runner.open_session();
  const Tokens next = concat(context, {4, 4});
  const Finished b = generate(second, next, 6);
  EXPECT_EQ(b.tokens, fake_greedy(next, 6, kVocab));
  EXPECT_EQ(b.metrics.num_reused_tokens, static_cast<int32_t>(context.size()) - 1);
  EXPECT_EQ(b.metrics.num_prefilled_tokens, 3);
  EXPECT_EQ(rig.runner.metrics().num_retained_prefixes, 1);
}

TEST(RunnerPrefixTest, NothingIsReusedWhenDisabledOrShorterThanMinTokens) {
  for (const bool enabled : {false, true}) {
    RunnerOptions options = reuse(/*min_tokens=*/16);
    options.prefix_reuse.enabled = enabled;
    Rig rig({}, std::nullopt, options);
    const Tokens shared = ramp(enabled ? 15 : 40, 1);  // enabled: one position short
    Session first = rig.runner.open_session();
    generate(first, concat(shared, {2}), 3);
    Session second = rig.runner.open_session();
    const Tokens prompt = concat(shared, {7, 7});
    const Finished b = generate(second, prompt, 3);
    EXPECT_EQ(b.tokens, fake_greedy(prompt, 3, kVocab));
    EXPECT_EQ(b.metrics.num_reused_tokens, 0);
    EXPECT_EQ(b.metrics.num_prefilled_tokens, static_cast<int32_t>(prompt.size()));
    EXPECT_EQ(rig.runner.metrics().num_prefix_hits, 0);
  }
}

TEST(RunnerPrefixTest, TheLastPositionOfAFullyHeldContextStillRunsForItsLogits) {
  Rig rig({}, std::nullopt, reuse());
  const Tokens prompt = ramp(24, 2);
  Session first = rig.runner.open_session();
  generate(first, concat(prompt, {1}), 2);
  Session second = rig.runner.open_session();
  const Finished b = generate(second, prompt, 5);  // every position is in first's cells
  EXPECT_EQ(b.tokens, fake_greedy(prompt, 5, kVocab));
  EXPECT_EQ(b.metrics.num_reused_tokens, 23);
  EXPECT_EQ(b.metrics.num_prefilled_tokens, 0) << "the last position runs as a decode";
}

TEST(RunnerPrefixTest, RetainedPrefixesGiveWayWhenThePoolRunsShort) {
  FakeExecutorConfig config;
  config.max_cells = 128;
  Rig rig(config, std::nullopt, reuse());
  {
    Session first = rig.runner.open_session();
    generate(first, ramp(60, 1), 4);
  }
  Session probe;
  EXPECT_EQ(settled(rig.runner, probe).num_retained_prefixes, 1);
  Session second = rig.runner.open_session();
  const Tokens prompt = ramp(100, 2);  // needs cells the retained prefix holds
  const Finished b = generate(second, prompt, 10);
  EXPECT_EQ(b.tokens, fake_greedy(prompt, 10, kVocab));
  const EngineMetrics m = rig.runner.metrics();
  EXPECT_EQ(m.num_retained_prefixes, 0);
  EXPECT_GE(m.num_idle_evictions, 1);
  EXPECT_EQ(m.num_preemptions, 0);
}

TEST(RunnerPrefixTest, RetainedPrefixesGiveWayWhenTheExecutorHasNoRoomForASession) {
  FakeExecutorConfig config;
  config.max_sessions = 2;
  Rig rig(config, std::nullopt, reuse());
  for (int32_t i = 0; i < 2; ++i) {
    Session session = rig.runner.open_session();
    generate(session, ramp(20, i), 2);
  }
  {
    Session probe;  // takes the place of one retained prefix
    EXPECT_EQ(settled(rig.runner, probe).num_retained_prefixes, 1);
  }
  Session a = rig.runner.open_session();
  Session b = rig.runner.open_session();
  const Finished fa = generate(a, ramp(20, 7), 3);
  const Finished fb = generate(b, ramp(20, 9), 3);
  EXPECT_TRUE(a.status().ok()) << a.status().to_string();
  EXPECT_TRUE(b.status().ok()) << b.status().to_string();
  EXPECT_EQ(fa.tokens, fake_greedy(ramp(20, 7), 3, kVocab));
  EXPECT_EQ(fb.tokens, fake_greedy(ramp(20, 9), 3, kVocab));
}

// At the executor's session limit (the retained prefix and a new session), the new session, which
// takes no executor session before it runs, starts from a clone of the retained prefix: the
// prefix is reused, not recomputed.
TEST(RunnerPrefixTest, AtTheSessionLimitANewSessionStillStartsFromARetainedPrefix) {
  FakeExecutorConfig config;
  config.max_sessions = 2;
  Rig rig(config, std::nullopt, reuse());
  const Tokens shared = ramp(40, 3);
  retain_each(rig.runner, {shared});
  Session probe;  // the retained prefix and the probe fill both places
  EXPECT_EQ(settled(rig.runner, probe).num_retained_prefixes, 1);
  probe.close();
  Session second = rig.runner.open_session();  // the retained prefix and this: the limit again
  const Tokens prompt = concat(shared, {7, 8, 9});
  const Finished b = generate(second, prompt, 4);
  EXPECT_EQ(b.tokens, fake_greedy(prompt, 4, kVocab));
  EXPECT_EQ(b.metrics.num_reused_tokens, 40) << "the retained prefix's 40 positions";
  EXPECT_TRUE(second.status().ok()) << second.status().to_string();
}

// At the limit, a session already holding cells has the least recently used retained prefix
// closed for the clone — never the donor, though it is the least recently used.
TEST(RunnerPrefixTest, AtTheSessionLimitAnotherRetainedPrefixGivesWayToTheDonorsClone) {
  FakeExecutorConfig config;
  config.max_sessions = 3;
  Rig rig(config, std::nullopt, reuse());
  const Tokens shared = ramp(40, 3);
  retain_each(rig.runner, {shared, ramp(30, 11)});  // the donor first: it is the older
  Session z = rig.runner.open_session();            // two retained prefixes and this: the limit
  generate(z, Tokens(shared.begin(), shared.begin() + 10), 0);  // too short to reuse anything
  const Tokens rest = concat(Tokens(shared.begin() + 10, shared.end()), {7, 8});
  const Finished f = generate(z, rest, 4);
  EXPECT_EQ(f.tokens, fake_greedy(concat(shared, {7, 8}), 4, kVocab));
  EXPECT_GE(f.metrics.num_reused_tokens, 26) << "the donor's positions past z's first 10";
  EXPECT_EQ(rig.runner.metrics().num_retained_prefixes, 1);
  EXPECT_TRUE(z.status().ok()) << z.status().to_string();
}

// An open takes no executor session: at the limit, the retained prefix closed for room is
// chosen once the prompt is known, so the one the prompt continues is kept (a conversation's
// earlier turn, the least recently used, is not closed for its own next turn).
TEST(RunnerPrefixTest, AtTheSessionLimitTheRetainedPrefixAPromptContinuesIsNotClosedForIt) {
  FakeExecutorConfig config;
  config.max_sessions = 2;
  Rig rig(config, std::nullopt, reuse());
  const Tokens earlier_turn = ramp(40, 3);
  retain_each(rig.runner, {earlier_turn, ramp(30, 11)});  // the turn first: it is the older
  Session next = rig.runner.open_session();               // both places held by retained prefixes
  const Tokens prompt = concat(earlier_turn, {7, 8, 9});
  const Finished f = generate(next, prompt, 4);
  EXPECT_TRUE(next.status().ok()) << next.status().to_string();
  EXPECT_EQ(f.tokens, fake_greedy(prompt, 4, kVocab));
  EXPECT_EQ(f.metrics.num_reused_tokens, 40) << "the earlier turn's 40 positions";
  EXPECT_EQ(rig.runner.metrics().num_retained_prefixes, 1) << "the other prefix gave way";
}

// With one place, held by the retained prefix a new session's prompt continues, the session
// takes that executor session over (no clone fits): the prefix is reused, not recomputed.
TEST(RunnerPrefixTest, AtTheSessionLimitANewSessionTakesTheRetainedPrefixItContinuesOver) {
  FakeExecutorConfig config;
  config.max_sessions = 1;
  Rig rig(config, std::nullopt, reuse());
  const Tokens shared = ramp(40, 3);
  retain_each(rig.runner, {shared});
  Session second = rig.runner.open_session();
  const Tokens prompt = concat(shared, {7, 8, 9});
  const Finished f = generate(second, prompt, 4);
  EXPECT_TRUE(second.status().ok()) << second.status().to_string();
  EXPECT_EQ(f.tokens, fake_greedy(prompt, 4, kVocab));
  EXPECT_EQ(f.metrics.num_reused_tokens, 40);
  EXPECT_EQ(rig.runner.metrics().num_retained_prefixes, 0);
  second.close();
  Session third = rig.runner.open_session();  // second's context, retained in its turn
  const Tokens longer = concat(concat(prompt, f.tokens), {5});
  const Finished g = generate(third, longer, 2);
  EXPECT_EQ(g.tokens, fake_greedy(longer, 2, kVocab));
  EXPECT_GE(g.metrics.num_reused_tokens, 43) << "the whole prompt second ran";
}

// Sessions preempted for room start again from the cells that still hold their shared prefix, as
// a new generation would: only their own part runs again, and the prefix stays shared.
TEST(RunnerPrefixTest, PreemptedGenerationsStartAgainFromTheSharedPrefix) {
  FakeExecutorConfig config;
  config.max_cells = 400;  // the 100-position prefix once, and 300 for 8 x (4 + 40) of their own
  Rig rig(config, std::nullopt, reuse());
  const Tokens shared = ramp(100, 3);
  testing::StepGate gate(1);  // started together
  rig.executor.set_during_execute(gate.hook());
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  std::vector<Tokens> prompts;
  for (int32_t i = 0; i < 8; ++i) {
    prompts.push_back(concat(shared, ramp(4, 11 + i)));
    sessions.push_back(rig.runner.open_session());
    handles.push_back(sessions.back().generate_async(prompts.back(), greedy(40)));
  }
  gate.open();
  for (int32_t i = 0; i < 8; ++i) {
    handles[i].wait();
    EXPECT_EQ(handles[i].tokens(), fake_greedy(prompts[i], 40, kVocab)) << "session " << i;
  }
  const EngineMetrics m = rig.runner.metrics();
  ASSERT_GT(m.num_preemptions, 0) << "the pool is too small for all of them at once";
  EXPECT_LT(m.num_recomputed_tokens, 100 * m.num_preemptions)
      << "a preempted generation ran the shared prefix again";
}

// An explicit clone at the executor's session limit closes a retained prefix first, as an open
// does.
TEST(RunnerPrefixTest, ACloneAtTheSessionLimitClosesARetainedPrefixFirst) {
  FakeExecutorConfig config;
  config.max_sessions = 2;
  Rig rig(config, std::nullopt, reuse());
  {
    Session first = rig.runner.open_session();
    generate(first, ramp(30, 1), 2);
  }
  Session a = rig.runner.open_session();
  const Tokens a_prompt = ramp(20, 5);
  const Finished fa = generate(a, a_prompt, 3);
  EXPECT_EQ(rig.runner.metrics().num_retained_prefixes, 1) << "the limit: a and the prefix";
  Session clone = a.clone_async(12);
  const Finished fc = generate(clone, {4, 2}, 3);
  EXPECT_TRUE(clone.status().ok()) << clone.status().to_string();
  const Tokens clone_context = concat(Tokens(a_prompt.begin(), a_prompt.begin() + 12), {4, 2});
  EXPECT_EQ(fc.tokens, fake_greedy(clone_context, 3, kVocab));
  EXPECT_EQ(rig.runner.metrics().num_retained_prefixes, 0);
}

TEST(RunnerPrefixTest, AtMostMaxRetainedAreKeptAndShutdownClosesEachOnce) {
  Rig rig({}, std::nullopt, reuse(16, /*max_retained=*/2));
  Tokens last_context;
  for (int32_t i = 0; i < 4; ++i) {
    Session session = rig.runner.open_session();
    last_context = concat(ramp(20, i), generate(session, ramp(20, i), 2).tokens);
  }
  Session probe;
  EXPECT_EQ(settled(rig.runner, probe).num_retained_prefixes, 2);
  EXPECT_EQ(rig.executor.counts().num_open, 3) << "two retained and the probe";
  probe.close();
  // A context that extends a retained one replaces it instead of taking a second place.
  {
    Session session = rig.runner.open_session();
    const Finished f = generate(session, concat(last_context, {1}), 2);
    EXPECT_EQ(f.metrics.num_reused_tokens, 21) << "the retained 20 + 2 - 1 positions";
  }
  EXPECT_EQ(settled(rig.runner, probe).num_retained_prefixes, 2);
  EXPECT_EQ(rig.executor.counts().num_open, 3);
  rig.runner.shutdown();
  expect_every_session_closed_once(rig.executor);
}

// W = 16: a 40-token prompt takes three steps. The gate holds the engine in the first of them
// while the second generation is submitted, so it arrives with 16 of the shared positions done.
struct WaitRig {
  WaitRig() : rig(narrow_config(), std::nullopt, reuse()), gate(1) {
    rig.executor.set_during_execute(gate.hook());
  }
  static FakeExecutorConfig narrow_config() {
    FakeExecutorConfig config;
    config.max_step_tokens = 16;
    return config;
  }
  Rig rig;
  StepGate gate;
};

TEST(RunnerPrefixTest, AGenerationWaitsForTheOneComputingItsPrefixThenReusesIt) {
  WaitRig w;
  const Tokens shared = ramp(40, 4);
  const Tokens prompt_a = concat(shared, {1}), prompt_b = concat(shared, {2, 3});
  Session a = w.rig.runner.open_session();
  Session b = w.rig.runner.open_session();
  GenerationHandle first = a.generate_async(prompt_a, greedy(6));
  w.gate.wait_reached();
  GenerationHandle second = b.generate_async(prompt_b, greedy(6));
  w.gate.open();
  first.wait();
  second.wait();
  EXPECT_EQ(first.tokens(), fake_greedy(prompt_a, 6, kVocab));
  EXPECT_EQ(second.tokens(), fake_greedy(prompt_b, 6, kVocab));
  EXPECT_EQ(second.metrics().num_reused_tokens, 40);
  EXPECT_EQ(second.metrics().num_prefilled_tokens, 2);
  const EngineMetrics m = w.rig.runner.metrics();
  EXPECT_EQ(m.num_prefix_waits, 1);
  EXPECT_EQ(m.num_prefix_hits, 1);
}

TEST(RunnerPrefixTest, ACancelledWaitingGenerationEndsAtOnceAndTheOtherGoesOn) {
  WaitRig w;
  const Tokens shared = ramp(40, 6);
  Session a = w.rig.runner.open_session();
  Session b = w.rig.runner.open_session();
  GenerationHandle first = a.generate_async(concat(shared, {1}), greedy(6));
  w.gate.wait_reached();
  Recorder recorder;
  GenerationHandle second = b.generate_async(concat(shared, {2}), greedy(6), recorder.callback());
  second.cancel();
  w.gate.open();
  second.wait();
  first.wait();
  EXPECT_EQ(second.finish_reason(), FinishReason::kCancelled);
  EXPECT_TRUE(second.tokens().empty());
  recorder.expect_finished_once();
  EXPECT_EQ(first.tokens(), fake_greedy(concat(shared, {1}), 6, kVocab));
  // The cancelled prompt stays b's context; the next generation on b continues it.
  GenerationHandle next = b.generate_async({5}, greedy(3));
  next.wait();
  EXPECT_EQ(next.tokens(), fake_greedy(concat(concat(shared, {2}), {5}), 3, kVocab));
}

TEST(RunnerPrefixTest, AWaitingGenerationRunsItsWholePromptWhenItsDonorIsCancelled) {
  WaitRig w;
  const Tokens shared = ramp(40, 8);
  const Tokens prompt_b = concat(shared, {2, 2});
  Session a = w.rig.runner.open_session();
  Session b = w.rig.runner.open_session();
  GenerationHandle first = a.generate_async(concat(shared, {1}), greedy(6));
  w.gate.wait_reached();
  GenerationHandle second = b.generate_async(prompt_b, greedy(6));
  first.cancel();
  w.gate.open();
  first.wait();
  second.wait();
  EXPECT_EQ(first.finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ(second.tokens(), fake_greedy(prompt_b, 6, kVocab));
  const GenerationMetrics m = second.metrics();
  EXPECT_EQ(m.num_reused_tokens + m.num_prefilled_tokens, static_cast<int32_t>(prompt_b.size()))
      << "what the donor had computed when it was cancelled, and the rest";
}

TEST(RunnerPrefixTest, ShutdownEndsWaitingGenerationsAndClosesEverySessionOnce) {
  WaitRig w;
  const Tokens shared = ramp(40, 9);
  Session a = w.rig.runner.open_session();
  Session b = w.rig.runner.open_session();
  GenerationHandle first = a.generate_async(concat(shared, {1}), greedy(50));
  w.gate.wait_reached();
  GenerationHandle second = b.generate_async(concat(shared, {2}), greedy(50));
  std::thread stopper([&] { w.rig.runner.shutdown(); });
  wait_until_stopping(w.rig.runner);
  w.gate.open();
  stopper.join();
  EXPECT_EQ(first.finish_reason(), FinishReason::kCancelled);
  EXPECT_EQ(second.finish_reason(), FinishReason::kCancelled);
  expect_every_session_closed_once(w.rig.executor);
}

}  // namespace
}  // namespace cellm::testing
