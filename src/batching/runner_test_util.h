// Helpers for the Runner's unit tests: a callback recorder, a gate that holds the engine inside
// execute(), and a rig that builds a FakeExecutor + Runner. Test code only.
// Thread-safety: Recorder is written by the engine thread and read after GenerationHandle::wait
// (which orders the two); StepGate is made for two threads.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "batching/fake_executor.h"
#include "batching/runner.h"

namespace cellm::testing {

using Tokens = std::vector<int32_t>;

// FakeExecutorConfig's default vocabulary: every token id of the runner tests is below it.
inline constexpr int32_t kVocab = 32;

// n tokens (7i + offset) mod kVocab: prompts that differ with the offset and rarely repeat.
inline Tokens ramp(int32_t n, int32_t offset = 0) {
  Tokens tokens(n);
  for (int32_t i = 0; i < n; ++i) tokens[i] = (i * 7 + offset) % kVocab;
  return tokens;
}

// Records every update of one generation and checks the callback contract as it goes.
struct Recorder {
  std::vector<int32_t> tokens;
  std::string text;
  int num_updates = 0;
  int num_finished = 0;
  int num_after_finish = 0;  // updates after the final one (must stay 0)
  size_t tokens_in_final = 0;
  FinishReason reason = FinishReason::kFailed;
  std::string error;

  GenerationCallback callback() {
    return [this](const GenerationUpdate& update) { record(update); };
  }
  void record(const GenerationUpdate& update) {
    if (num_finished > 0) ++num_after_finish;
    ++num_updates;
    tokens.insert(tokens.end(), update.tokens.begin(), update.tokens.end());
    text.append(update.text);
    if (update.finished) {
      ++num_finished;
      tokens_in_final = update.tokens.size();
      reason = update.finish_reason;
      error = std::string(update.error);
    }
  }
  // The contract every finished generation keeps.
  void expect_finished_once() const {
    EXPECT_EQ(num_finished, 1) << "the finish reason must arrive exactly once";
    EXPECT_EQ(num_after_finish, 0) << "an update after the final one";
  }
};

// Holds the engine inside execute() number `at` (1-based) until open() is called.
class StepGate {
 public:
  explicit StepGate(int at) : at_(at) {}
  std::function<void()> hook() {
    return [this] {
      if (++count_ != at_) return;
      std::unique_lock<std::mutex> lock(mutex_);
      reached_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
    };
  }
  void wait_reached() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return reached_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  const int at_;
  std::atomic<int> count_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool reached_ = false;
  bool open_ = false;
};

struct Rig {
  explicit Rig(const FakeExecutorConfig& executor_config = {},
               std::optional<SchedulerConfig> scheduler = std::nullopt, RunnerOptions options = {})
      : executor(executor_config),
        runner(executor,
               DecodeFirstScheduler(scheduler.value_or(
                   SchedulerConfig::defaults_for(executor_config.max_step_tokens))),
               std::move(options)) {}
  FakeExecutor executor;
  Runner runner;
};

inline GenConfig greedy(int32_t max_new_tokens) {
  GenConfig config;
  config.max_new_tokens = max_new_tokens;
  return config;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Blocks until `runner` refuses new work (a shutdown() on another thread has begun). Probing opens
// sessions that the shutdown then closes like any other.
inline void wait_until_stopping(Runner& runner) {
  for (;;) {
    Session probe = runner.open_session();
    if (!probe.status().ok()) return;
    std::this_thread::yield();
  }
}

// Every id the executor handed out was closed exactly once.
inline void expect_every_session_closed_once(const FakeExecutor& executor) {
  const FakeExecutor::Counts counts = executor.counts();
  EXPECT_EQ(counts.num_open, 0);
  for (const SessionId id : counts.opened) {
    const auto it = counts.closes.find(id);
    EXPECT_TRUE(it != counts.closes.end() && it->second == 1)
        << "session " << id << " closed " << (it == counts.closes.end() ? 0 : it->second)
        << " times";
  }
  EXPECT_EQ(counts.closes.size(), counts.opened.size()) << "a close of an id never opened";
}

}  // namespace cellm::testing
