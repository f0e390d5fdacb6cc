#include "batching/scheduler.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace cellm {
namespace {

bool contains(const std::vector<SessionId>& ids, SessionId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

SchedulerConfig SchedulerConfig::defaults_for(int32_t max_step_tokens) {
  const int32_t w = std::max(max_step_tokens, 1);
  return {.max_batch_tokens = w, .max_decode_sequences = std::min(w, 256), .max_prefill_chunk = w};
}

Status validate_scheduler_config(const SchedulerConfig& config) {
  if (config.max_batch_tokens < 1) {
    return invalid_argument("max_batch_tokens is " + std::to_string(config.max_batch_tokens) +
                            "; it must be at least 1");
  }
  if (config.max_decode_sequences < 1) {
    return invalid_argument("max_decode_sequences is " +
                            std::to_string(config.max_decode_sequences) +
                            "; it must be at least 1");
  }
  if (config.max_prefill_chunk < 1) {
    return invalid_argument("max_prefill_chunk is " + std::to_string(config.max_prefill_chunk) +
                            "; it must be at least 1");
  }
  return ok_status();
}

// One pass of planning: the step's running state.
struct DecodeFirstScheduler::Planner {
  DecodeFirstScheduler& scheduler;
  SchedulerMemory& memory;
  StepSchedule& out;
  std::vector<SessionId> in_step;    // sessions with a slice in this step
  std::vector<SessionId> preempted;  // by this planner: they wait for a later step
  int32_t budget = 0;                // tokens the step may still take
  int32_t planned = 0;               // tokens planned so far: cells they will take
  int32_t free = 0;                  // cells the pool still has for this step

  // Re-reads the pool after a release: what is free minus what this step already took.
  void refresh() { free = memory.num_free_cells() - planned; }

  // Up to `wanted` cells, evicting idle sessions while short.
  int32_t take_cells(int32_t wanted) {
    while (free < wanted && memory.evict_idle()) refresh();
    return std::max(0, std::min(free, wanted));
  }

  void take(int32_t n) {
    free -= n;
    budget -= n;
    planned += n;
  }

  void plan_decodes() {
    const std::vector<SessionId> queue(scheduler.decode_queue_.begin(),
                                       scheduler.decode_queue_.end());
    for (const SessionId id : queue) {
      if (budget == 0 || out.num_decode_tokens >= scheduler.config_.max_decode_sequences) break;
      const auto it = scheduler.tasks_.find(id);
      if (it == scheduler.tasks_.end() || it->second.kind != TaskKind::kDecode) continue;
      bool preempted_self = false;
      while (take_cells(1) < 1) {
        // The newest holder of cells outside the step: another session, or this one.
        const std::optional<SessionId> victim = scheduler.newest_holder(in_step, std::nullopt);
        if (!victim) break;
        scheduler.preempt(*victim, memory, out);
        preempted.push_back(*victim);
        refresh();
        if (*victim == id) {
          preempted_self = true;
          break;
        }
      }
      if (preempted_self || free < 1) continue;
      const SchedulerTask task = it->second;
      scheduler.tasks_.erase(it);
      scheduler.remove_from_queues(id, TaskKind::kDecode);
      out.slices.push_back({id, TaskKind::kDecode, task.begin, task.end, task.wants_output, true});
      in_step.push_back(id);
      take(1);
      out.num_decode_tokens += 1;
    }
  }

  // Round-robin passes over the prompt ring, `first` (if any) served before the ring.
  void plan_prompts(std::optional<SessionId> first) {
    std::vector<SessionId> order;
    if (first) order.push_back(*first);
    for (const SessionId id : scheduler.prompt_ring_) {
      if (id != first) order.push_back(id);
    }
    // Prompts holding no cell start in arrival order: the next may start only once every older
    // one has, so a long prompt waiting for room is not passed for ever by shorter ones.
    std::vector<SessionId> unstarted;
    for (const SessionId id : order) {
      if (scheduler.tasks_.at(id).begin == 0) unstarted.push_back(id);
    }
    std::stable_sort(unstarted.begin(), unstarted.end(), [&](SessionId a, SessionId b) {
      return scheduler.tasks_.at(a).arrival < scheduler.tasks_.at(b).arrival;
    });
    size_t next_start = 0;       // [unstarted] the one that may start next
    bool starts_closed = false;  // an unstarted prompt did not fit: none after it starts
    std::vector<int32_t> progress(order.size(), 0);  // [order] tokens planned this step
    std::optional<SessionId> last_served;
    for (bool any = true; any && budget > 0;) {
      any = false;
      for (size_t i = 0; i < order.size() && budget > 0; ++i) {
        const SchedulerTask& task = scheduler.tasks_.at(order[i]);
        const int32_t left = task.end - (task.begin + progress[i]);
        if (left == 0) continue;
        const bool starts = task.begin + progress[i] == 0;
        if (starts && (starts_closed || unstarted[next_start] != order[i])) continue;
        if (contains(preempted, order[i])) {  // back at 0: it restarts in a later step, first
          starts_closed = true;
          continue;
        }
        // A prompt holding no cell starts only when all of it fits: a half-run prompt that a
        // decode then preempts would be wasted work.
        if (starts && take_cells(left) < left) {
          starts_closed = true;
          continue;
        }
        if (starts) ++next_start;
        const int32_t chunk =
            take_cells(std::min({scheduler.config_.max_prefill_chunk, left, budget}));
        if (chunk == 0) continue;
        progress[i] += chunk;
        take(chunk);
        any = true;
        last_served = order[i];
      }
    }
    for (size_t i = 0; i < order.size(); ++i) {
      if (progress[i] == 0) continue;
      const auto it = scheduler.tasks_.find(order[i]);
      SchedulerTask& task = it->second;
      const int32_t end = task.begin + progress[i];
      const bool completes = end == task.end;
      out.slices.push_back({task.session, TaskKind::kPrompt, task.begin, end,
                            completes && task.wants_output, completes});
      in_step.push_back(task.session);
      out.num_prompt_tokens += progress[i];
      if (completes) {
        scheduler.tasks_.erase(it);
      } else {
        task.begin = end;
      }
    }
    // Next step starts after the last session served; completed tasks leave the ring.
    std::vector<SessionId>& ring = scheduler.prompt_ring_;
    if (last_served) {
      const auto at = std::find(ring.begin(), ring.end(), *last_served);
      if (at != ring.end()) std::rotate(ring.begin(), at + 1, ring.end());
    }
    std::erase_if(ring, [&](SessionId id) { return scheduler.tasks_.count(id) == 0; });
  }
};

DecodeFirstScheduler::DecodeFirstScheduler(const SchedulerConfig& config) : config_(config) {
  const Status status = validate_scheduler_config(config);
  CELLM_CHECK(status.ok()) << "DecodeFirstScheduler: " << status.message();
}

void DecodeFirstScheduler::submit(const SchedulerTask& task) {
  CELLM_CHECK(task.session != 0) << "a task of session 0";
  CELLM_CHECK(tasks_.count(task.session) == 0) << "session " << task.session << " has a task";
  CELLM_CHECK(0 <= task.begin && task.begin < task.end)
      << "task [" << task.begin << ", " << task.end << ") of session " << task.session;
  CELLM_CHECK(task.kind == TaskKind::kPrompt || task.end == task.begin + 1)
      << "a decode task of " << task.end - task.begin << " tokens";
  tasks_.emplace(task.session, task);
  if (task.kind == TaskKind::kDecode) {
    decode_queue_.push_back(task.session);
  } else {
    prompt_ring_.push_back(task.session);
  }
}

std::optional<SchedulerTask> DecodeFirstScheduler::cancel(SessionId session) {
  const auto it = tasks_.find(session);
  if (it == tasks_.end()) return std::nullopt;
  const SchedulerTask task = it->second;
  tasks_.erase(it);
  remove_from_queues(session, task.kind);
  return task;
}

std::vector<SchedulerTask> DecodeFirstScheduler::clear() {
  std::vector<SchedulerTask> all;
  for (const SessionId id : decode_queue_) all.push_back(tasks_.at(id));
  for (const SessionId id : prompt_ring_) all.push_back(tasks_.at(id));
  CELLM_CHECK_EQ(all.size(), tasks_.size()) << "scheduler queues out of step with its tasks";
  tasks_.clear();
  decode_queue_.clear();
  prompt_ring_.clear();
  return all;
}

const SchedulerTask* DecodeFirstScheduler::find(SessionId session) const {
  const auto it = tasks_.find(session);
  return it == tasks_.end() ? nullptr : &it->second;
}

void DecodeFirstScheduler::remove_from_queues(SessionId session, TaskKind kind) {
  if (kind == TaskKind::kDecode) {
    const auto at = std::find(decode_queue_.begin(), decode_queue_.end(), session);
    if (at != decode_queue_.end()) decode_queue_.erase(at);
  } else {
    std::erase(prompt_ring_, session);
  }
}

std::optional<SessionId> DecodeFirstScheduler::newest_holder(
    const std::vector<SessionId>& in_step, std::optional<SessionId> exclude) const {
  std::optional<SessionId> newest;
  uint64_t newest_arrival = 0;
  for (const auto& [id, task] : tasks_) {
    if (task.begin == 0 || id == exclude || contains(in_step, id)) continue;
    if (!newest || task.arrival > newest_arrival) {
      newest = id;
      newest_arrival = task.arrival;
    }
  }
  return newest;
}

void DecodeFirstScheduler::preempt(SessionId victim, SchedulerMemory& memory, StepSchedule& out) {
  SchedulerTask& task = tasks_.at(victim);
  memory.preempt(victim);
  if (task.kind == TaskKind::kDecode) {
    remove_from_queues(victim, TaskKind::kDecode);
    prompt_ring_.push_back(victim);
    task.kind = TaskKind::kPrompt;
  }
  task.begin = 0;
  out.preempted.push_back(victim);
}

StepSchedule DecodeFirstScheduler::schedule(SchedulerMemory& memory) {
  StepSchedule out;
  {
    Planner planner{*this, memory, out, {}, {}, config_.max_batch_tokens, 0, 0};
    planner.refresh();
    planner.plan_decodes();
    planner.plan_prompts(std::nullopt);
  }
  if (!out.slices.empty() || tasks_.empty()) return out;

  // Nothing could take a cell (prompts only, pool full of running sessions): make room for the
  // oldest task by preempting newer holders, then serve it first. The oldest always progresses,
  // so preemption cannot cycle.
  SessionId oldest = 0;
  uint64_t oldest_arrival = 0;
  for (const auto& [id, task] : tasks_) {
    if (oldest == 0 || task.arrival < oldest_arrival) {
      oldest = id;
      oldest_arrival = task.arrival;
    }
  }
  const SchedulerTask& first = tasks_.at(oldest);
  const int32_t needed = first.begin == 0 ? first.end : 1;
  int32_t free = memory.num_free_cells();
  while (free < needed) {
    const std::optional<SessionId> victim = newest_holder({}, oldest);
    if (!victim) break;
    preempt(*victim, memory, out);
    free = memory.num_free_cells();
  }
  if (free < needed) return out;
  const bool oldest_is_prompt = first.kind == TaskKind::kPrompt;
  Planner planner{*this, memory, out, {}, {}, config_.max_batch_tokens, 0, free};
  planner.plan_decodes();
  planner.plan_prompts(oldest_is_prompt ? std::optional<SessionId>(oldest) : std::nullopt);
  return out;
}

}  // namespace cellm
