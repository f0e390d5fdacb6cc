// Helpers for the runtime's end-to-end suites on stories260K: the model loaded once, a
// CpuExecutor with a chosen W / m / decode widths / pool, and runs of many requests through a
// Runner, either all started together or one at a time (solo). Header-only (tests/ compiles
// only *_test.cpp files). Thread-safety: test thread only.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "batching/runner.h"
#include "cpu_executor_testing.h"

namespace cellm::testing {

using Tokens = std::vector<int32_t>;

struct ExecutorShape {
  int32_t max_step_tokens = 512;
  int32_t min_prefill_chunk = 5;
  std::vector<int32_t> decode_widths = {1};
  int32_t max_cells = 65536;
  int32_t max_sessions = 64;
};

// An initialized executor over stories260K (loaded once per process) with `shape`.
inline std::unique_ptr<CpuExecutor> make_executor(const ExecutorShape& shape) {
  const Program& program = stories260k();
  ProgramSpec spec = with_plan(program.spec(), shape.max_step_tokens, shape.min_prefill_chunk,
                               shape.decode_widths);
  spec.kv_max_cells = shape.max_cells;
  spec.max_context_len = std::max(spec.max_context_len, shape.max_step_tokens + 1);
  CpuExecutorOptions options;
  options.max_sessions = shape.max_sessions;
  options.num_threads = 2;
  return make_executor(program, spec, options);
}

// BOS then `n` random ordinary tokens (ids 3..vocab-1), from `rng`.
inline Tokens random_prompt(int32_t n, std::mt19937& rng) {
  Tokens prompt = {1};
  std::uniform_int_distribution<int32_t> token(3, 511);
  for (int32_t i = 0; i < n; ++i) prompt.push_back(token(rng));
  return prompt;
}

// Forwards to an executor; execute() waits until open() (so requests submitted meanwhile all
// start together, however the engine thread was scheduled).
class GatedExecutor : public Executor {
 public:
  explicit GatedExecutor(Executor& inner) : inner_(inner) {}
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  Status initialize() override { return inner_.initialize(); }
  ExecutorLimits limits() const override { return inner_.limits(); }
  CacheUsage cache_usage() const override { return inner_.cache_usage(); }
  std::optional<SessionId> open_session() override { return inner_.open_session(); }
  Status close_session(SessionId id) override { return inner_.close_session(id); }
  StatusOr<SessionId> clone_session(SessionId src, int32_t upto) override {
    return inner_.clone_session(src, upto);
  }
  StatusOr<int32_t> session_length(SessionId id) const override {
    return inner_.session_length(id);
  }
  Status rewind_session(SessionId id, int32_t pos) override {
    return inner_.rewind_session(id, pos);
  }
  StatusOr<BatchOutput> execute(const BatchInput& batch, bool return_logits) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return open_; });
    }
    return inner_.execute(batch, return_logits);
  }

 private:
  Executor& inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

struct RunResult {
  std::vector<Tokens> tokens;  // [request] generated tokens
  std::vector<FinishReason> reasons;
  EngineMetrics metrics;
};

// Every request on its own session; together = all started at once, else one after another.
inline RunResult run_requests(Executor& inner, const std::vector<Tokens>& prompts,
                              const std::vector<GenConfig>& configs, bool together) {
  GatedExecutor executor(inner);
  if (!together) executor.open();
  Runner runner(executor, DecodeFirstScheduler(
                              SchedulerConfig::defaults_for(executor.limits().max_step_tokens)));
  RunResult result;
  std::vector<Session> sessions;
  std::vector<GenerationHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sessions.push_back(runner.open_session());
    handles.push_back(sessions.back().generate_async(prompts[i], configs[i]));
    if (!together) handles.back().wait();
  }
  executor.open();
  for (size_t i = 0; i < prompts.size(); ++i) {
    handles[i].wait();
    EXPECT_TRUE(handles[i].error_message().empty())
        << "request " << i << ": " << handles[i].error_message();
    result.tokens.push_back(handles[i].tokens());
    result.reasons.push_back(handles[i].finish_reason());
  }
  sessions.clear();
  result.metrics = runner.metrics();
  return result;
}

inline Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline GenConfig greedy(int32_t max_new_tokens) {
  GenConfig config;
  config.max_new_tokens = max_new_tokens;
  return config;
}

// The greedy continuation of `prompt` on a session of its own (W 16, m 5, widths 1, 2, 4).
inline Tokens solo(const Tokens& prompt, int32_t n) {
  std::unique_ptr<CpuExecutor> executor = make_executor({16, 5, {1, 2, 4}});
  return run_requests(*executor, {prompt}, {greedy(n)}, false).tokens[0];
}

inline std::vector<GenConfig> greedy_configs(size_t n, int32_t max_new_tokens) {
  GenConfig config;
  config.max_new_tokens = max_new_tokens;
  return std::vector<GenConfig>(n, config);
}

// The same requests run one at a time on one executor of `shape` and all started together on
// another (kept, so tests can read its stats).
struct SoloAndBatched {
  RunResult solo;
  RunResult batched;
  std::unique_ptr<CpuExecutor> batched_executor;
};

inline SoloAndBatched run_solo_and_batched(const ExecutorShape& shape,
                                           const std::vector<Tokens>& prompts,
                                           const std::vector<GenConfig>& configs) {
  SoloAndBatched out;
  const std::unique_ptr<CpuExecutor> solo_executor = make_executor(shape);
  out.solo = run_requests(*solo_executor, prompts, configs, /*together=*/false);
  out.batched_executor = make_executor(shape);
  out.batched = run_requests(*out.batched_executor, prompts, configs, /*together=*/true);
  return out;
}

}  // namespace cellm::testing
