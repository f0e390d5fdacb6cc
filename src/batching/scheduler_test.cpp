#include "batching/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace cellm {
namespace {

// A pool where every session holds its own cells (no sharing): `held` per session; sessions in
// `idle` have no task and may be evicted, oldest first.
class PoolModel : public SchedulerMemory {
 public:
  explicit PoolModel(int32_t max_cells) : max_cells_(max_cells) {}
  int32_t num_free_cells() override {
    int32_t used = 0;
    for (const auto& [id, n] : held) used += n;
    return max_cells_ - used;
  }
  bool evict_idle() override {
    for (auto it = idle.begin(); it != idle.end(); ++it) {
      if (held[*it] > 0) {
        held[*it] = 0;
        evicted.push_back(*it);
        idle.erase(it);
        return true;
      }
    }
    return false;
  }
  void preempt(SessionId session) override {
    held[session] = 0;
    preempted.push_back(session);
  }
  // What an executor does with a step: each slice's positions are now held.
  void commit(const StepSchedule& plan) {
    for (const ScheduledSlice& slice : plan.slices) held[slice.session] = slice.end;
  }

  std::map<SessionId, int32_t> held;
  std::vector<SessionId> idle;
  std::vector<SessionId> evicted;
  std::vector<SessionId> preempted;

 private:
  int32_t max_cells_;
};

SchedulerTask prompt(SessionId s, int32_t begin, int32_t end, uint64_t arrival) {
  return {s, TaskKind::kPrompt, begin, end, true, arrival};
}
SchedulerTask decode(SessionId s, int32_t at, uint64_t arrival) {
  return {s, TaskKind::kDecode, at, at + 1, true, arrival};
}

struct Slice {
  SessionId session;
  int32_t begin, end;
  bool operator==(const Slice&) const = default;
};
std::vector<Slice> slices(const StepSchedule& plan) {
  std::vector<Slice> out;
  for (const ScheduledSlice& s : plan.slices) out.push_back({s.session, s.begin, s.end});
  return out;
}
std::ostream& operator<<(std::ostream& os, const Slice& s) {
  return os << "{" << s.session << ": " << s.begin << "-" << s.end << "}";
}

TEST(SchedulerConfigTest, DefaultsFollowWAndBadValuesAreNamed) {
  const SchedulerConfig config = SchedulerConfig::defaults_for(512);
  EXPECT_EQ(config.max_batch_tokens, 512);
  EXPECT_EQ(config.max_decode_sequences, 256);
  EXPECT_EQ(config.max_prefill_chunk, 512);
  EXPECT_EQ(SchedulerConfig::defaults_for(16).max_decode_sequences, 16);
  EXPECT_NE(validate_scheduler_config({0, 1, 1}).message().find("max_batch_tokens"),
            std::string::npos);
  EXPECT_NE(validate_scheduler_config({1, 0, 1}).message().find("max_decode_sequences"),
            std::string::npos);
  EXPECT_NE(validate_scheduler_config({1, 1, 0}).message().find("max_prefill_chunk"),
            std::string::npos);
}

TEST(DecodeFirstSchedulerTest, DecodesComeFirstInFifoOrderThenPromptChunks) {
  DecodeFirstScheduler scheduler({16, 8, 8});
  PoolModel pool(1000);
  pool.held = {{1, 10}, {2, 5}, {3, 7}};
  scheduler.submit(prompt(4, 0, 20, 4));
  scheduler.submit(decode(3, 7, 3));
  scheduler.submit(decode(1, 10, 1));
  scheduler.submit(decode(2, 5, 2));
  const StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{3, 7, 8}, {1, 10, 11}, {2, 5, 6}, {4, 0, 13}}));
  EXPECT_EQ(plan.num_decode_tokens, 3);
  EXPECT_EQ(plan.num_prompt_tokens, 13);
  EXPECT_TRUE(plan.slices[0].completes_task && plan.slices[0].wants_output);
  EXPECT_FALSE(plan.slices[3].completes_task || plan.slices[3].wants_output);
  ASSERT_NE(scheduler.find(4), nullptr);
  EXPECT_EQ(scheduler.find(4)->begin, 13) << "a partly run prompt keeps its progress";
  EXPECT_EQ(scheduler.num_tasks(), 1);
}

TEST(DecodeFirstSchedulerTest, MaxDecodeSequencesLeavesTheRestForTheNextStepInOrder) {
  DecodeFirstScheduler scheduler({16, 2, 8});
  PoolModel pool(1000);
  for (SessionId s = 1; s <= 5; ++s) {
    pool.held[s] = 3;
    scheduler.submit(decode(s, 3, s));
  }
  EXPECT_EQ(slices(scheduler.schedule(pool)), (std::vector<Slice>{{1, 3, 4}, {2, 3, 4}}));
  EXPECT_EQ(slices(scheduler.schedule(pool)), (std::vector<Slice>{{3, 3, 4}, {4, 3, 4}}));
  EXPECT_EQ(slices(scheduler.schedule(pool)), (std::vector<Slice>{{5, 3, 4}}));
  EXPECT_TRUE(scheduler.empty());
}

TEST(DecodeFirstSchedulerTest, PromptChunksGoRoundRobinOnePerSessionPerPass) {
  DecodeFirstScheduler scheduler({32, 8, 8});
  PoolModel pool(1000);
  scheduler.submit(prompt(1, 0, 100, 1));
  scheduler.submit(prompt(2, 0, 100, 2));
  scheduler.submit(prompt(3, 0, 100, 3));
  // Pass 1: 8 each (24); pass 2: session 1 takes the last 8 of the budget.
  StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{1, 0, 16}, {2, 0, 8}, {3, 0, 8}}));
  pool.commit(plan);
  // The next step starts after the last session served (1): 2, 3, 1, then 2 again.
  plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{2, 8, 24}, {3, 8, 16}, {1, 16, 24}}));
}

TEST(DecodeFirstSchedulerTest, ALongPromptCannotStarveShortOnes) {
  DecodeFirstScheduler scheduler({64, 8, 64});
  PoolModel pool(100000);
  scheduler.submit(prompt(1, 0, 10000, 1));
  StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{1, 0, 64}}));
  pool.commit(plan);
  scheduler.submit(prompt(2, 0, 10, 2));
  scheduler.submit(prompt(3, 0, 5, 3));
  // New prompts join the ring behind session 1, which takes one more chunk; then the ring turns
  // and the short prompts are served in full before session 1 gets the rest of the budget.
  plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{1, 64, 128}}));
  pool.commit(plan);
  plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{2, 0, 10}, {3, 0, 5}, {1, 128, 177}}));
  EXPECT_TRUE(plan.slices[0].completes_task && plan.slices[1].completes_task);
}

TEST(DecodeFirstSchedulerTest, PromptChunksTakeOnlyFreeCellsEvictingIdleSessionsFirst) {
  DecodeFirstScheduler scheduler({64, 8, 64});
  PoolModel pool(40);
  pool.held = {{9, 10}, {8, 20}};
  pool.idle = {9};  // session 8 is running (it has a task), 9 is idle
  scheduler.submit(decode(8, 20, 1));
  scheduler.submit(prompt(1, 0, 15, 2));
  StepSchedule plan = scheduler.schedule(pool);
  // 10 free: the decode takes 1; the prompt needs 15, so idle session 9's 10 cells are taken.
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{8, 20, 21}, {1, 0, 15}}));
  EXPECT_EQ(pool.evicted, (std::vector<SessionId>{9}));
  EXPECT_TRUE(pool.preempted.empty()) << "prompts never preempt running sessions";
}

TEST(DecodeFirstSchedulerTest, APromptStartsOnlyWhenAllOfItFitsButGoesOnChunkByChunk) {
  DecodeFirstScheduler scheduler({64, 8, 64});
  PoolModel pool(40);
  pool.held = {{8, 20}, {7, 5}};
  scheduler.submit(decode(8, 20, 1));
  scheduler.submit(prompt(1, 0, 30, 2));  // 30 > 14 free after the decode: it waits
  scheduler.submit(prompt(7, 5, 30, 3));  // already started: takes what is free
  const StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{8, 20, 21}, {7, 5, 19}}));
  EXPECT_EQ(scheduler.find(1)->begin, 0);
}

TEST(DecodeFirstSchedulerTest, PromptsHoldingNoCellStartInArrivalOrder) {
  // Session 2's prompt does not fit beside running session 8; session 3's shorter one would, but
  // starting it would keep the pool from ever holding 2's: it waits behind 2 (a long prompt is
  // not passed for ever by shorter ones under load).
  DecodeFirstScheduler scheduler({64, 8, 64});
  PoolModel pool(50);
  pool.held = {{8, 20}};
  scheduler.submit(decode(8, 20, 1));
  scheduler.submit(prompt(3, 0, 10, 3));  // submitted first, arrived later: order is arrival's
  scheduler.submit(prompt(2, 0, 40, 2));
  StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{8, 20, 21}}));
  pool.commit(plan);
  pool.idle = {8};  // its generation ended: its cells may go
  plan = scheduler.schedule(pool);
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{3, 0, 10}, {2, 0, 40}}));
  EXPECT_EQ(pool.evicted, (std::vector<SessionId>{8}));
  // Started prompts are not held back: one that holds cells goes on beside a waiting start.
  DecodeFirstScheduler later({64, 8, 64});
  PoolModel full(50);
  full.held = {{5, 20}};
  later.submit(prompt(6, 0, 40, 1));   // oldest, does not fit
  later.submit(prompt(5, 20, 30, 2));  // already started
  EXPECT_EQ(slices(later.schedule(full)), (std::vector<Slice>{{5, 20, 30}}));
}

TEST(DecodeFirstSchedulerTest, ADecodeWithoutACellPreemptsTheNewestRunningSession) {
  DecodeFirstScheduler scheduler({64, 8, 64});
  PoolModel pool(30);
  pool.held = {{1, 10}, {2, 10}, {3, 10}};
  scheduler.submit(decode(1, 10, 1));
  scheduler.submit(decode(2, 10, 2));
  scheduler.submit(decode(3, 10, 3));
  const StepSchedule plan = scheduler.schedule(pool);
  // Session 1 needs a cell: 3 (newest) is preempted; session 2 then takes one of its cells, and
  // session 3 waits for a later step (no recompute in the step that preempted it).
  EXPECT_EQ(plan.preempted, (std::vector<SessionId>{3}));
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{1, 10, 11}, {2, 10, 11}}));
  ASSERT_NE(scheduler.find(3), nullptr);
  EXPECT_EQ(scheduler.find(3)->kind, TaskKind::kPrompt);
  EXPECT_EQ(scheduler.find(3)->begin, 0);
  EXPECT_EQ(scheduler.find(3)->end, 11) << "the pending token is restored at the end";
}

TEST(DecodeFirstSchedulerTest, TheNewestSessionPreemptsItselfWhenNoNewerOneHoldsCells) {
  DecodeFirstScheduler scheduler({64, 8, 64});
  PoolModel pool(20);
  pool.held = {{1, 10}, {2, 10}};
  scheduler.submit(decode(2, 10, 2));  // first in FIFO, but the newest
  scheduler.submit(decode(1, 10, 1));
  const StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(plan.preempted, (std::vector<SessionId>{2}));
  // Session 1 takes a freed cell; session 2 is recomputed in a later step.
  EXPECT_EQ(slices(plan), (std::vector<Slice>{{1, 10, 11}}));
  pool.commit(plan);
  pool.idle = {1};  // its generation ended
  const StepSchedule next = scheduler.schedule(pool);
  EXPECT_EQ(slices(next), (std::vector<Slice>{{2, 0, 11}}));
}

TEST(DecodeFirstSchedulerTest, WhenNothingFitsTheOldestTaskGetsRoom) {
  DecodeFirstScheduler scheduler({64, 8, 8});
  PoolModel pool(20);
  pool.held = {{1, 10}, {2, 10}};  // two half-run prompts fill the pool
  scheduler.submit(prompt(1, 10, 15, 1));
  scheduler.submit(prompt(2, 10, 15, 2));
  const StepSchedule plan = scheduler.schedule(pool);
  EXPECT_EQ(plan.preempted, (std::vector<SessionId>{2}));
  EXPECT_EQ(slices(plan).front(), (Slice{1, 10, 15}));
}

TEST(DecodeFirstSchedulerTest, EveryTaskComesBackOnceThroughCancelOrClear) {
  DecodeFirstScheduler scheduler({8, 4, 4});
  scheduler.submit(prompt(1, 0, 10, 1));
  scheduler.submit(decode(2, 4, 2));
  scheduler.submit(prompt(3, 2, 9, 3));
  const std::optional<SchedulerTask> task = scheduler.cancel(3);
  ASSERT_TRUE(task.has_value());
  EXPECT_EQ(task->begin, 2);
  EXPECT_FALSE(scheduler.cancel(3).has_value()) << "a task comes back once";
  const std::vector<SchedulerTask> rest = scheduler.clear();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].session, 2u) << "decodes first";
  EXPECT_EQ(rest[1].session, 1u);
  EXPECT_TRUE(scheduler.empty());
  PoolModel pool(100);
  EXPECT_TRUE(scheduler.schedule(pool).slices.empty());
}

}  // namespace
}  // namespace cellm
