// Shared helpers of the CUDA end-to-end suites (cuda_*_test.cpp in this folder): open a model,
// build an initialized CudaExecutor (or CpuExecutor, the oracle) for it, drive greedy generation
// through Executor::execute, compare logits rows. Greedy argmax is the test's own (lowest id
// wins ties), not the engine's sampler. Header-only: each suite is its own binary.
// Thread-safety: test code, one thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "backends/cpu/cpu_model.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_test_util.h"
#include "test_models.h"

namespace cellm::testing {

using Tokens = std::vector<int32_t>;

// Opens a model from the test models folder; a failure is a fatal test failure.
inline CpuModel open_model(const std::string& relative) {
  StatusOr<CpuModel> model = CpuModel::open(test_model_path(relative));
  if (!model.ok()) {
    ADD_FAILURE() << model.status().to_string();
    std::abort();
  }
  return std::move(model).value();
}

inline std::unique_ptr<CudaExecutor> make_cuda(const CpuModel& model, const ProgramSpec& spec,
                                               const CudaExecutorOptions& options = {}) {
  auto executor = std::make_unique<CudaExecutor>(model.config, model.weights, spec, options);
  const Status status = executor->initialize();
  EXPECT_TRUE(status.ok()) << status.to_string();
  if (!status.ok()) return nullptr;
  return executor;
}

inline std::unique_ptr<CpuExecutor> make_cpu(const CpuModel& model, const ProgramSpec& spec) {
  auto executor = std::make_unique<CpuExecutor>(model.config, model.weights, spec);
  const Status status = executor->initialize();
  EXPECT_TRUE(status.ok()) << status.to_string();
  return executor;
}

// The model's program with another slicing plan (and optionally another cache).
inline ProgramSpec with_plan(ProgramSpec spec, int32_t max_step_tokens, int32_t min_prefill_chunk,
                             Tokens decode_widths) {
  spec.max_step_tokens = max_step_tokens;
  spec.min_prefill_chunk = min_prefill_chunk;
  spec.decode_widths = std::move(decode_widths);
  return spec;
}

// Index of the largest value; the lowest index on a tie.
inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float diff = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= diff)) diff = std::isnan(d) ? INFINITY : d;
  }
  return diff;
}

inline StepInput step_input(SessionId session, int32_t start_pos, std::span<const int32_t> tokens,
                            int32_t begin, int32_t end, bool wants_output) {
  StepInput input;
  input.session = session;
  input.start_pos = start_pos;
  input.tokens = tokens;
  input.begin = begin;
  input.end = end;
  input.wants_output = wants_output;
  return input;
}

inline BatchOutput execute_ok(Executor& executor, const BatchInput& batch) {
  StatusOr<BatchOutput> output = executor.execute(batch, /*return_logits=*/true);
  EXPECT_TRUE(output.ok()) << output.status().to_string();
  if (!output.ok()) return {};
  return std::move(output).value();
}

struct GreedyRun {
  Tokens tokens;              // [num_steps] generated ids
  std::vector<float> logits;  // [num_steps, vocab] the row that chose each token
};

// Greedy generation of several sessions together: step 0 runs every prompt (whole, in one
// batch, each keeping its last row), then every step feeds each session its last token. The
// sessions stay open; `sessions_out` receives their ids.
inline std::vector<GreedyRun> run_greedy_together(Executor& executor,
                                                  const std::vector<Tokens>& prompts,
                                                  int32_t num_steps,
                                                  std::vector<SessionId>* sessions_out = nullptr) {
  const size_t n = prompts.size();
  std::vector<GreedyRun> runs(n);
  std::vector<SessionId> sessions;
  for (size_t i = 0; i < n; ++i) {
    const std::optional<SessionId> session = executor.open_session();
    EXPECT_TRUE(session.has_value());
    if (!session) return runs;
    sessions.push_back(*session);
  }
  if (sessions_out != nullptr) *sessions_out = sessions;
  const int32_t vocab = executor.limits().vocab_size;
  std::vector<Tokens> pending = prompts;
  std::vector<int32_t> start(n, 0);
  for (int32_t step = 0; step < num_steps; ++step) {
    BatchInput batch;
    for (size_t i = 0; i < n; ++i) {
      batch.inputs.push_back(step_input(sessions[i], start[i], pending[i], 0,
                                        static_cast<int32_t>(pending[i].size()), true));
    }
    const BatchOutput output = execute_ok(executor, batch);
    if (output.outputs.size() != n || output.vocab_size != vocab) {
      ADD_FAILURE() << "step " << step << ": expected " << n << " logits rows of " << vocab;
      return runs;
    }
    for (size_t i = 0; i < n; ++i) {
      const std::span<const float> row(output.logits.data() + i * static_cast<size_t>(vocab),
                                       static_cast<size_t>(vocab));
      runs[i].logits.insert(runs[i].logits.end(), row.begin(), row.end());
      runs[i].tokens.push_back(argmax(row));
      start[i] += static_cast<int32_t>(pending[i].size());
      pending[i] = {runs[i].tokens.back()};
    }
  }
  return runs;
}

inline GreedyRun run_greedy(Executor& executor, const Tokens& prompt, int32_t num_steps,
                            SessionId* session_out = nullptr) {
  std::vector<SessionId> sessions;
  std::vector<GreedyRun> runs = run_greedy_together(executor, {prompt}, num_steps, &sessions);
  if (session_out != nullptr && !sessions.empty()) *session_out = sessions[0];
  return std::move(runs[0]);
}

}  // namespace cellm::testing
