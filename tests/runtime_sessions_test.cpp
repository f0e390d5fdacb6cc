// End to end on stories260K: sessions across generations — a clone at a prompt boundary
// continues exactly like a solo session with the same prefix, a prefill cancelled halfway leaves
// the whole prompt in the context, and a stop token ends a generation with the token included.
#include <gtest/gtest.h>

#include "runtime_e2e_util.h"

namespace cellm {
namespace {

using testing::concat;
using testing::greedy;
using testing::solo;
using testing::Tokens;

TEST(RuntimeSessionsTest, ACloneOfAPromptBoundaryContinuesLikeASoloSession) {
  std::mt19937 rng(3);
  const Tokens prefix = testing::random_prompt(90, rng);
  const Tokens delta = {403, 407, 261};
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({16, 5, {1, 2, 4}});
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(16)));
  Session source = runner.open_session();
  source.generate_async(prefix, greedy(0)).wait();
  Session clone = source.clone_async(static_cast<int32_t>(prefix.size()));
  GenerationHandle from_clone = clone.generate_async(delta, greedy(32));
  GenerationHandle from_source = source.generate_async({}, greedy(32));
  from_clone.wait();
  from_source.wait();
  EXPECT_EQ(from_clone.tokens(), solo(concat(prefix, delta), 32));
  EXPECT_EQ(from_source.tokens(), solo(prefix, 32));
}

TEST(RuntimeSessionsTest, APrefillCancelledHalfwayKeepsThePromptAndTheNextTurnContinuesIt) {
  std::mt19937 rng(4);
  const Tokens short_prompt = testing::random_prompt(4, rng);
  const Tokens long_prompt = testing::random_prompt(300, rng);
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({16, 5, {1}});
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(16)));
  Session a = runner.open_session();
  Session b = runner.open_session();
  // b's long prompt is queued first, so it holds the first chunk of every step a's prompt could
  // join (W = 16, round-robin from b); a's first token thus arrives with b's prompt part-way run,
  // however the two commands were drained.
  GenerationHandle long_handle = b.generate_async(long_prompt, greedy(8));
  GenerationHandle short_handle =
      a.generate_async(short_prompt, greedy(8), [&](const GenerationUpdate& update) {
        if (!update.finished && !update.tokens.empty()) long_handle.cancel();
      });
  long_handle.wait();
  short_handle.wait();
  EXPECT_EQ(long_handle.finish_reason(), FinishReason::kCancelled);
  EXPECT_TRUE(long_handle.tokens().empty());
  EXPECT_EQ(b.position(), 301) << "the whole prompt is context, though not all of it ran";
  const GenerationMetrics metrics = long_handle.metrics();
  EXPECT_GT(metrics.num_prefilled_tokens, 0);
  EXPECT_LT(metrics.num_prefilled_tokens, 301) << "cancelled part-way";
  GenerationHandle next = b.generate_async({}, greedy(16));
  next.wait();
  EXPECT_EQ(next.tokens(), solo(long_prompt, 16));
  EXPECT_EQ(b.position(), 317);
}

TEST(RuntimeSessionsTest, AStopTokenEndsTheGenerationWithTheTokenIncluded) {
  // stories260K ends a story with BOS (id 1); sampling reaches one within a few hundred tokens.
  const Tokens prompt = {1, 403, 407, 261, 378};  // "Once upon a time"
  GenConfig free_running = greedy(400);
  free_running.sampling.temperature = 1.0f;
  free_running.seed = 1;  // its first story ends after 233 tokens
  GenConfig stopping = free_running;
  stopping.stop_tokens = {1};
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({32, 5, {1}});
  const testing::RunResult r =
      testing::run_requests(*executor, {prompt, prompt}, {free_running, stopping}, true);
  const Tokens& all = r.tokens[0];
  const auto first_bos = std::find(all.begin(), all.end(), 1);
  ASSERT_NE(first_bos, all.end()) << "no story end in 400 sampled tokens; pick another seed";
  EXPECT_EQ(r.reasons[1], FinishReason::kStopToken);
  EXPECT_EQ(r.tokens[1], Tokens(all.begin(), first_bos + 1));
  EXPECT_EQ(r.reasons[0], FinishReason::kNewTokenLimit);
}

}  // namespace
}  // namespace cellm
