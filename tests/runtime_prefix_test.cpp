// End to end on stories260K: prefix reuse (RunnerOptions::prefix_reuse) — sessions whose prompts
// begin with positions another session's cells hold, open or closed and retained, run only the
// rest and generate exactly the tokens of a solo session that computed everything.
#include <gtest/gtest.h>

#include "runtime_e2e_util.h"

namespace cellm {
namespace {

using testing::concat;
using testing::greedy;
using testing::solo;
using testing::Tokens;

TEST(RuntimePrefixTest, PromptsSharingAPrefixReuseItsCellsAndGenerateTheSoloTokens) {
  std::mt19937 rng(11);
  const Tokens prefix = testing::random_prompt(90, rng);
  const Tokens deltas[3] = {{403, 407}, {261, 378, 403}, {407}};
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({16, 5, {1, 2, 4}});
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(16)));
  GenerationHandle handles[3];
  Session first = runner.open_session();
  handles[0] = first.generate_async(concat(prefix, deltas[0]), greedy(24));
  handles[0].wait();
  {
    Session second = runner.open_session();  // from the open first session's cells
    handles[1] = second.generate_async(concat(prefix, deltas[1]), greedy(24));
    handles[1].wait();
  }
  first.close();
  Session third = runner.open_session();  // from a retained one
  handles[2] = third.generate_async(concat(prefix, deltas[2]), greedy(24));
  handles[2].wait();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(handles[i].tokens(), solo(concat(prefix, deltas[i]), 24)) << "prompt " << i;
    const GenerationMetrics m = handles[i].metrics();
    EXPECT_EQ(m.num_reused_tokens, i == 0 ? 0 : 91) << "prompt " << i << ": BOS and the 90";
    EXPECT_EQ(m.num_reused_tokens + m.num_prefilled_tokens + (i == 2 ? 1 : 0),
              static_cast<int32_t>(prefix.size() + deltas[i].size()))
        << "prompt " << i << ": every position runs once (a lone last one as a decode)";
  }
  EXPECT_EQ(runner.metrics().num_prefix_hits, 2);
}

TEST(RuntimePrefixTest, PromptsStartedTogetherComputeTheirSharedPrefixOnce) {
  std::mt19937 rng(12);
  const Tokens prefix = testing::random_prompt(90, rng);
  const Tokens deltas[4] = {{403}, {407, 261}, {378, 403, 407}, {261, 261}};
  std::unique_ptr<CpuExecutor> executor = testing::make_executor({16, 5, {1, 2, 4}});
  Runner runner(*executor, DecodeFirstScheduler(SchedulerConfig::defaults_for(16)));
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  for (const Tokens& delta : deltas) {  // all submitted at once: none waits for another to finish
    sessions.push_back(runner.open_session());
    handles.push_back(sessions.back().generate_async(concat(prefix, delta), greedy(16)));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    handles[i].wait();
    EXPECT_EQ(handles[i].tokens(), solo(concat(prefix, deltas[i]), 16)) << "prompt " << i;
    EXPECT_EQ(handles[i].metrics().num_reused_tokens, i == 0 ? 0 : 91)
        << "prompt " << i << ": BOS and the 90 computed once, by the first";
  }
}

}  // namespace
}  // namespace cellm
