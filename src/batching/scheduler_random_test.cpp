// A randomized model test of DecodeFirstScheduler: thousands of submits, cancels, clears,
// closes and steps against a model of sessions and a pool, checking the scheduler's contract
// after every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "batching/scheduler.h"

namespace cellm {
namespace {

constexpr int32_t kNumSessions = 12;
constexpr int32_t kMaxCells = 200;
constexpr int32_t kMaxContext = 150;  // every session fits the pool alone

struct ModelSession {
  int32_t held = 0;                   // positions the pool holds (cells, unshared)
  int32_t context = 0;                // host tokens
  std::optional<SchedulerTask> task;  // outstanding in the scheduler
  int32_t steps_without_progress = 0;
};

class Model : public SchedulerMemory {
 public:
  int32_t num_free_cells() override {
    int32_t used = 0;
    for (const auto& [id, s] : sessions) used += s.held;
    return kMaxCells - used;
  }
  bool evict_idle() override {
    for (auto it = idle.begin(); it != idle.end(); ++it) {
      ModelSession& s = sessions[*it];
      EXPECT_FALSE(s.task.has_value()) << "idle session " << *it << " has a task";
      if (s.held > 0) {
        s.held = 0;
        idle.erase(it);
        return true;
      }
    }
    return false;
  }
  void preempt(SessionId id) override {
    ModelSession& s = sessions[id];
    EXPECT_TRUE(s.task.has_value()) << "preempted session " << id << " has no task";
    EXPECT_GT(s.held, 0) << "preempted session " << id << " holds nothing";
    s.held = 0;
    ++num_preemptions;
  }
  void make_idle(SessionId id) {
    std::erase(idle, id);
    idle.push_back(id);
  }

  std::map<SessionId, ModelSession> sessions;
  std::vector<SessionId> idle;  // least recently used first
  int64_t num_preemptions = 0;
};

class SchedulerRandomTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SchedulerRandomTest, InvariantsHoldOverThousandsOfOperations) {
  std::mt19937 rng(GetParam());
  const auto uniform = [&](int32_t lo, int32_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  const SchedulerConfig config{uniform(1, 48), uniform(1, 8), uniform(1, 24)};
  // A task waits at most while the tasks ahead of it run: every session's positions up to the
  // context limit, max_batch_tokens a step (the model then restarts them as newer tasks).
  const int32_t starving_steps = 200 + kNumSessions * kMaxContext / config.max_batch_tokens;
  DecodeFirstScheduler scheduler(config);
  Model model;
  for (SessionId id = 1; id <= kNumSessions; ++id) model.sessions[id] = {};
  uint64_t arrival = 0;
  int64_t num_steps = 0, num_returned = 0, num_submitted = 0;

  const auto task_returned = [&](SessionId id, const SchedulerTask& task) {
    ModelSession& s = model.sessions.at(id);
    ASSERT_TRUE(s.task.has_value()) << "session " << id << " got a task back twice";
    EXPECT_EQ(task.session, id);
    EXPECT_EQ(task.end, s.task->end);
    s.task.reset();
    ++num_returned;
  };
  const auto submit = [&](SessionId id) {
    ModelSession& s = model.sessions[id];
    const int32_t delta = uniform(0, 40);
    if (s.context + delta + 1 > kMaxContext) {  // start over: a close and reopen
      s.held = 0;
      s.context = 0;
    }
    s.context += std::max(delta, s.context == 0 ? 1 : 0);
    if (s.held == s.context) --s.held;  // nothing pending: run the last position again
    const bool decode = s.held > 0 && s.context == s.held + 1;
    s.task = SchedulerTask{id,
                           decode ? TaskKind::kDecode : TaskKind::kPrompt,
                           s.held,
                           s.context,
                           uniform(0, 9) > 0,
                           ++arrival};
    std::erase(model.idle, id);
    scheduler.submit(*s.task);
    ++num_submitted;
  };

  for (int op = 0; op < 5000; ++op) {
    const int32_t kind = uniform(0, 99);
    const SessionId id = static_cast<SessionId>(uniform(1, kNumSessions));
    ModelSession& chosen = model.sessions[id];
    if (kind < 25) {
      if (!chosen.task) submit(id);
    } else if (kind < 32) {
      const std::optional<SchedulerTask> task = scheduler.cancel(id);
      ASSERT_EQ(task.has_value(), chosen.task.has_value()) << "cancel of session " << id;
      if (task) {
        EXPECT_EQ(task->begin, chosen.held) << "a cancelled task's progress";
        task_returned(id, *task);
        model.make_idle(id);
      }
    } else if (kind < 34) {
      if (!chosen.task) {  // close an idle session
        chosen.held = 0;
        chosen.context = 0;
        std::erase(model.idle, id);
      }
    } else if (kind == 34) {
      for (const SchedulerTask& task : scheduler.clear()) {
        task_returned(task.session, task);
        model.make_idle(task.session);
      }
    } else {
      // A step.
      const int32_t free_before = model.num_free_cells();
      ASSERT_GE(free_before, 0);
      const int32_t num_tasks = scheduler.num_tasks();
      const StepSchedule plan = scheduler.schedule(model);
      ++num_steps;
      ASSERT_TRUE(num_tasks == 0 || !plan.slices.empty())
          << "step " << num_steps << ": " << num_tasks << " tasks but nothing scheduled";
      EXPECT_LE(plan.num_tokens(), config.max_batch_tokens);
      EXPECT_LE(plan.num_decode_tokens, config.max_decode_sequences);
      EXPECT_LE(plan.num_tokens(), model.num_free_cells()) << "more tokens than free cells";
      std::set<SessionId> seen;
      bool prompts_started = false;
      int32_t num_decode = 0, num_prompt = 0;
      for (const ScheduledSlice& slice : plan.slices) {
        ModelSession& s = model.sessions.at(slice.session);
        ASSERT_TRUE(seen.insert(slice.session).second) << "two slices of one session";
        ASSERT_TRUE(s.task.has_value()) << "a slice of session " << slice.session << " w/o task";
        EXPECT_EQ(slice.begin, s.held) << "a slice must start at what the pool holds";
        EXPECT_LT(slice.begin, slice.end);
        EXPECT_LE(slice.end, s.task->end);
        EXPECT_EQ(slice.completes_task, slice.end == s.task->end);
        EXPECT_EQ(slice.wants_output, slice.completes_task && s.task->wants_output);
        if (slice.kind == TaskKind::kDecode) {
          EXPECT_FALSE(prompts_started) << "a decode after a prompt chunk";
          EXPECT_EQ(slice.end - slice.begin, 1);
          ++num_decode;
        } else {
          prompts_started = true;
          num_prompt += slice.end - slice.begin;
        }
      }
      EXPECT_EQ(num_decode, plan.num_decode_tokens);
      EXPECT_EQ(num_prompt, plan.num_prompt_tokens);
      // Execute: commit, deliver, continue some generations with a decode.
      for (const ScheduledSlice& slice : plan.slices) {
        ModelSession& s = model.sessions.at(slice.session);
        s.held = slice.end;
        s.steps_without_progress = -1;  // bumped to 0 below
        if (!slice.completes_task) {
          const SchedulerTask* left = scheduler.find(slice.session);
          ASSERT_NE(left, nullptr);
          EXPECT_EQ(left->begin, slice.end);
          continue;
        }
        EXPECT_EQ(scheduler.find(slice.session), nullptr) << "a completed task stayed";
        task_returned(slice.session, *s.task);
        if (slice.wants_output && s.context + 1 <= kMaxContext && uniform(0, 3) > 0) {
          ++s.context;  // the sampled token, pending
          s.task =
              SchedulerTask{slice.session, TaskKind::kDecode, s.held, s.context, true, ++arrival};
          scheduler.submit(*s.task);
          ++num_submitted;
        } else {
          model.make_idle(slice.session);
        }
      }
      for (auto& [sid, s] : model.sessions) {
        if (s.task) {
          EXPECT_LT(++s.steps_without_progress, starving_steps) << "session " << sid << " starves";
        } else {
          s.steps_without_progress = 0;
        }
      }
    }
    // After every operation: the scheduler's tasks are exactly the model's.
    for (const auto& [sid, s] : model.sessions) {
      const SchedulerTask* task = scheduler.find(sid);
      ASSERT_EQ(task != nullptr, s.task.has_value()) << "session " << sid << " after op " << op;
      if (task) {
        EXPECT_EQ(task->begin, s.held) << "session " << sid;
        EXPECT_EQ(task->end, s.task->end);
      }
    }
    ASSERT_GE(model.num_free_cells(), 0) << "the pool overflowed";
    if (::testing::Test::HasFailure()) break;
  }
  for (const SchedulerTask& task : scheduler.clear()) task_returned(task.session, task);
  EXPECT_EQ(num_returned, num_submitted) << "every task comes back exactly once";
  EXPECT_GT(num_steps, 1000);
  RecordProperty("preemptions", static_cast<int>(model.num_preemptions));
}

INSTANTIATE_TEST_SUITE_P(Seeds, SchedulerRandomTest, ::testing::Range(1u, 33u));

}  // namespace
}  // namespace cellm
