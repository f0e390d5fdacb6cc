// Runner and memory on the FakeExecutor: refusals at submit, clones, idle eviction, capacity.
#include <gtest/gtest.h>

#include "batching/runner.h"
#include "batching/runner_test_util.h"

namespace cellm::testing {
namespace {

// Starts a generation expected to be refused; returns its error message.
std::string refused(Session& session, Tokens prompt, const GenConfig& config) {
  Recorder recorder;
  GenerationHandle handle = session.generate_async(std::move(prompt), config, recorder.callback());
  handle.wait();
  EXPECT_EQ(handle.finish_reason(), FinishReason::kFailed);
  recorder.expect_finished_once();
  EXPECT_TRUE(recorder.tokens.empty());
  return handle.error_message();
}

bool has(const std::string& text, const std::string& words) {
  return text.find(words) != std::string::npos;
}

TEST(RunnerMemoryTest, RequestsThatCanNeverFitAreRefusedAtSubmitWithAClearError) {
  FakeExecutorConfig config;
  config.max_session_tokens = 64;
  config.max_cells = 50;
  Rig rig(config);
  Session session = rig.runner.open_session();
  EXPECT_TRUE(has(refused(session, ramp(60), greedy(10)), "max_session_tokens 64"));
  EXPECT_TRUE(has(refused(session, ramp(40), greedy(20)), "whole cell pool of 50"));
  EXPECT_TRUE(has(refused(session, {1, 99}, greedy(2)), "prompt token 1 (99)"));
  EXPECT_TRUE(has(refused(session, {}, greedy(2)), "nothing to condition on"));
  GenConfig bad = greedy(2);
  bad.sampling.top_p = 2.0f;
  EXPECT_TRUE(has(refused(session, {1}, bad), "top_p"));
  GenConfig strings = greedy(2);
  strings.stop_strings = {"x"};
  EXPECT_TRUE(has(refused(session, {1}, strings), "text stream"));
  GenConfig tokens = greedy(2);
  tokens.stop_tokens = {-1};
  EXPECT_TRUE(has(refused(session, {1}, tokens), "stop token -1"));
  EXPECT_EQ(session.position(), 0) << "a refused prompt is not part of the context";
  EXPECT_EQ(rig.runner.metrics().num_refusals, 7);
  // A request that fits still runs.
  GenerationHandle fits = session.generate_async(ramp(40), greedy(10));
  fits.wait();
  EXPECT_EQ(fits.tokens(), fake_greedy(ramp(40), 10, kVocab));
}

TEST(RunnerMemoryTest, OneGenerationAtATimePerSession) {
  Rig rig;
  testing::StepGate gate(1);  // the first generation is surely running when the second arrives
  rig.executor.set_during_execute(gate.hook());
  Session session = rig.runner.open_session();
  GenerationHandle running = session.generate_async(ramp(5), greedy(200));
  gate.wait_reached();
  GenerationHandle second = session.generate_async({1}, greedy(2));
  gate.open();
  second.wait();
  EXPECT_EQ(second.finish_reason(), FinishReason::kFailed);
  EXPECT_TRUE(has(second.error_message(), "already has a generation")) << second.error_message();
  running.cancel();
  running.wait();
}

TEST(RunnerMemoryTest, CloneOfAPromptBoundaryContinuesLikeASoloSession) {
  Rig rig;
  Session source = rig.runner.open_session();
  const Tokens prefix = ramp(37);
  source.generate_async(prefix, greedy(0)).wait();
  Session clone = source.clone_async(37);
  Session shorter = source.clone_async(20);
  const Tokens delta_a = {3, 4, 5};
  const Tokens delta_b = {9};
  GenerationHandle from_clone = clone.generate_async(delta_a, greedy(12));
  GenerationHandle from_source = source.generate_async(delta_b, greedy(12));
  GenerationHandle from_shorter = shorter.generate_async(delta_a, greedy(12));
  from_clone.wait();
  from_source.wait();
  from_shorter.wait();
  EXPECT_EQ(from_clone.tokens(), fake_greedy(concat(prefix, delta_a), 12, kVocab));
  EXPECT_EQ(from_source.tokens(), fake_greedy(concat(prefix, delta_b), 12, kVocab));
  const Tokens head(prefix.begin(), prefix.begin() + 20);
  EXPECT_EQ(from_shorter.tokens(), fake_greedy(concat(head, delta_a), 12, kVocab));
  EXPECT_EQ(clone.position(), 37 + 3 + 12);
  EXPECT_TRUE(clone.status().ok());
}

TEST(RunnerMemoryTest, ACloneTakesPendingTokensAlongAndABadCloneSaysWhy) {
  Rig rig;
  Session source = rig.runner.open_session();
  const Tokens prompt = ramp(9);
  GenerationHandle first = source.generate_async(prompt, greedy(5));
  first.wait();
  // Position 14; the executor holds 13 (the last token is pending).
  Session clone = source.clone_async(14);
  GenerationHandle next = clone.generate_async({}, greedy(4));
  next.wait();
  EXPECT_EQ(next.tokens(), fake_greedy(concat(prompt, first.tokens()), 4, kVocab));
  Session bad = source.clone_async(15);
  GenerationHandle fails = bad.generate_async({1}, greedy(1));
  fails.wait();
  EXPECT_EQ(fails.finish_reason(), FinishReason::kFailed);
  EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(has(bad.status().message(), "upto 15 outside [0, 14]")) << bad.status().message();
}

TEST(RunnerMemoryTest, IdleSessionsGiveUpTheirCellsAndAreRecomputedLater) {
  FakeExecutorConfig config;
  config.max_cells = 64;
  Rig rig(config);
  Session a = rig.runner.open_session();
  const Tokens prompt_a = ramp(40);
  GenerationHandle first = a.generate_async(prompt_a, greedy(5));
  first.wait();  // a is idle holding 44 cells
  Session b = rig.runner.open_session();
  GenerationHandle other = b.generate_async(ramp(40, 1), greedy(5));
  other.wait();
  EXPECT_EQ(other.tokens(), fake_greedy(ramp(40, 1), 5, kVocab));
  EXPECT_GE(rig.runner.metrics().num_idle_evictions, 1);
  GenerationHandle again = a.generate_async({}, greedy(5));
  again.wait();
  EXPECT_EQ(again.tokens(), fake_greedy(concat(prompt_a, first.tokens()), 5, kVocab));
  EXPECT_EQ(a.position(), 50);
}

TEST(RunnerMemoryTest, OpeningPastCapacityFailsThatSessionOnly) {
  FakeExecutorConfig config;
  config.max_sessions = 2;
  Rig rig(config);
  Session a = rig.runner.open_session();
  Session b = rig.runner.open_session();
  Session c = rig.runner.open_session();
  const std::string error = refused(c, {1}, greedy(1));
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(has(error, "2 sessions are open")) << error;
  a.close();
  EXPECT_FALSE(a.valid());
  Session d = rig.runner.open_session();  // the close is queued before this open
  GenerationHandle works = d.generate_async({1, 2}, greedy(2));
  works.wait();
  EXPECT_EQ(works.tokens(), fake_greedy({1, 2}, 2, kVocab));
}

TEST(RunnerMemoryTest, MovedAndEmptySessionsFailCleanly) {
  Rig rig;
  Session a = rig.runner.open_session();
  Session b = std::move(a);
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move): the moved-from state
  EXPECT_FALSE(a.valid());
  Recorder recorder;
  GenerationHandle handle = a.generate_async({1}, greedy(1), recorder.callback());
  ASSERT_TRUE(handle.done());
  EXPECT_EQ(handle.finish_reason(), FinishReason::kFailed);
  recorder.expect_finished_once();
  GenerationHandle works = b.generate_async({1}, greedy(1));
  works.wait();
  EXPECT_EQ(works.finish_reason(), FinishReason::kNewTokenLimit);
}

}  // namespace
}  // namespace cellm::testing
