// DecodeFirstScheduler: picks the tokens of one step — decodes first, then prompt chunks — within
// a token budget and the cells the pool has free (DESIGN §6).
//
// One scheduling quantity: a task is a session's pending positions [begin, end) (begin = what the
// executor holds, end = its host context), either a prompt (any length, run in chunks) or a
// decode (the one token sampled last step, fed back). schedule() takes decode tasks first, in
// FIFO order, one token each, up to max_decode_sequences; then prompt chunks round-robin, at most
// one chunk of max_prefill_chunk per session per pass, passes repeating until the budget
// (max_batch_tokens) is spent; the round-robin start rotates across steps, so a long prompt
// cannot starve the others. Memory: a prompt chunk takes only free cells (evicting idle sessions
// first, least recently used), and a prompt holding no cell starts only when all of it fits, in
// arrival order (none starts while an older one waits for room, so a long prompt is not passed
// for ever by shorter ones; prompts already holding cells go on meanwhile); a decode that finds
// no free cell preempts the newest running session (its cells released, its
// task restarting at position 0 as a prompt, recomputed in a later step with the same output).
// When nothing at all fits, the oldest task gets room by preempting newer ones, so the oldest
// always progresses and preemption cannot cycle. Every submitted task comes back exactly once: as
// the last slice of a step (completes_task), from cancel(), or from clear(). Knows no tokens,
// tensors or threads; memory is asked through SchedulerMemory. Who calls it: the Runner (engine
// thread). Thread-safety: none.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "batching/batch.h"
#include "core/status.h"

namespace cellm {

struct SchedulerConfig {
  int32_t max_batch_tokens = 0;      // tokens in one step; >= 1
  int32_t max_decode_sequences = 0;  // decode tokens in one step; >= 1
  int32_t max_prefill_chunk = 0;     // prompt tokens of one session in one pass; >= 1

  // W tokens a step, up to W decodes (at most 256), prompt chunks of up to W.
  static SchedulerConfig defaults_for(int32_t max_step_tokens);
};

// OK, or a message naming the field out of range.
Status validate_scheduler_config(const SchedulerConfig& config);

enum class TaskKind { kPrompt, kDecode };

struct SchedulerTask {
  SessionId session = 0;
  TaskKind kind = TaskKind::kPrompt;
  int32_t begin = 0;          // first position still to run (the session's committed length)
  int32_t end = 0;            // one past the last pending position; begin < end
  bool wants_output = false;  // keep the logits row of position end - 1
  uint64_t arrival = 0;       // submission order of its generation; preemption takes the largest
};

// One session's positions run in a step.
struct ScheduledSlice {
  SessionId session = 0;
  TaskKind kind = TaskKind::kPrompt;
  int32_t begin = 0;  // positions [begin, end) run this step
  int32_t end = 0;
  bool wants_output = false;    // the task's output row (only on the slice completing it)
  bool completes_task = false;  // the task came back through this step and left the scheduler
};

struct StepSchedule {
  // Decode slices first (FIFO), then prompt slices; at most one slice per session.
  std::vector<ScheduledSlice> slices;
  // Sessions preempted while planning this step, in order: their cells are released and their
  // tasks restart at position 0 as prompts.
  std::vector<SessionId> preempted;
  int32_t num_decode_tokens = 0;
  int32_t num_prompt_tokens = 0;
  int32_t num_tokens() const { return num_decode_tokens + num_prompt_tokens; }
};

// What the scheduler asks of the pool while it plans a step. Calls happen between steps, so
// releases take effect at once.
class SchedulerMemory {
 public:
  virtual ~SchedulerMemory() = default;
  virtual int32_t num_free_cells() = 0;
  // Releases the cells of one session without a task (least recently used first); false when no
  // such session holds a cell.
  virtual bool evict_idle() = 0;
  // Releases every cell of `session`, which has a task here (rewind to 0; tokens stay on the
  // host).
  virtual void preempt(SessionId session) = 0;
};

class DecodeFirstScheduler {
 public:
  // The config must validate (CELLM_CHECK).
  explicit DecodeFirstScheduler(const SchedulerConfig& config);

  const SchedulerConfig& config() const { return config_; }

  // Accepts a task: its session has none here, begin < end, and a decode is exactly one token
  // (CELLM_CHECK).
  void submit(const SchedulerTask& task);
  // Gives back the session's task (nullopt when it has none).
  std::optional<SchedulerTask> cancel(SessionId session);
  // Gives back every task, decodes first.
  std::vector<SchedulerTask> clear();

  bool empty() const { return tasks_.empty(); }
  int32_t num_tasks() const { return static_cast<int32_t>(tasks_.size()); }
  // The session's task as it stands (begin advanced by earlier steps); null when none.
  const SchedulerTask* find(SessionId session) const;

  // Plans one step; tasks it completes leave the scheduler, the others keep their progress. An
  // empty schedule with tasks left means nothing can run (the pool cannot give a single cell even
  // after evicting and preempting everything it may): a caller's bug or a refused-at-submit rule
  // broken.
  StepSchedule schedule(SchedulerMemory& memory);

 private:
  struct Planner;
  void preempt(SessionId victim, SchedulerMemory& memory, StepSchedule& out);
  // The newest task holding cells that is not in this step, or nullopt.
  std::optional<SessionId> newest_holder(const std::vector<SessionId>& in_step,
                                         std::optional<SessionId> exclude) const;
  void remove_from_queues(SessionId session, TaskKind kind);

  SchedulerConfig config_;
  std::unordered_map<SessionId, SchedulerTask> tasks_;
  std::deque<SessionId> decode_queue_;  // decode tasks, FIFO
  std::vector<SessionId> prompt_ring_;  // prompt tasks; index 0 is served first next step
};

}  // namespace cellm
