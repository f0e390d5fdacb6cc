// Shared helpers of the tests that run a real model on the CpuExecutor (backend unit tests and
// the end-to-end suites in tests/): load a program from the test models folder, give it another
// slicing plan, build an initialized executor, drive greedy generation one step at a time
// through Executor::execute, compare logits rows. Greedy argmax here is the test's own (lowest
// id wins ties, as the references' drivers did), not the engine's sampler. Header-only: each
// suite is its own binary, linked against the CPU backend (the CUDA suites build on it too:
// backends/cuda/cuda_e2e_support.h). Thread-safety: test code; the programs stories260k() caches
// are immutable once loaded.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_executor.h"
#include "program/program.h"
#include "test_models.h"

namespace cellm::testing {

// Loads a program (or plain GGUF model) from the test models folder; null and a test failure
// when it cannot.
inline std::unique_ptr<Program> load_test_program(const std::string& relative) {
  StatusOr<Program> program = Program::load(test_model_path(relative));
  if (!program.ok()) {
    ADD_FAILURE() << program.status().to_string();
    return nullptr;
  }
  return std::make_unique<Program>(std::move(program).value());
}

// stories260K, loaded once per process and kept for its lifetime. A load failure is a test
// failure and aborts the binary (nothing can run without it).
inline const Program& stories260k() {
  static const Program* const program = [] {
    std::unique_ptr<Program> loaded = load_test_program("stories260K.gguf");
    if (loaded == nullptr) std::abort();
    return loaded.release();
  }();
  return *program;
}

// `spec` with another slicing plan: W, m and the static decode widths.
inline ProgramSpec with_plan(ProgramSpec spec, int32_t max_step_tokens, int32_t min_prefill_chunk,
                             std::vector<int32_t> decode_widths) {
  spec.max_step_tokens = max_step_tokens;
  spec.min_prefill_chunk = min_prefill_chunk;
  spec.decode_widths = std::move(decode_widths);
  return spec;
}

// An initialized executor over `program`'s weights with `spec` (its W, m, widths, cache) and
// `options`; a failed initialize() is a test failure.
inline std::unique_ptr<CpuExecutor> make_executor(const Program& program, const ProgramSpec& spec,
                                                  const CpuExecutorOptions& options = {}) {
  auto executor = std::make_unique<CpuExecutor>(program.config(), program.weights(), spec, options);
  const Status status = executor->initialize();
  EXPECT_TRUE(status.ok()) << status.to_string();
  return executor;
}

inline std::unique_ptr<CpuExecutor> make_executor(const Program& program) {
  return make_executor(program, program.spec());
}

// Index of the largest value; the lowest index on a tie.
inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// The largest |a[i] - b[i]|; infinity when a difference is NaN (a NaN never passes a tolerance).
inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float diff = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= diff)) diff = std::isnan(d) ? INFINITY : d;
  }
  return diff;
}

// Compares two [rows, vocab] logits blocks row by row: a test failure naming `what` and the row
// for each row whose max abs diff passes `tolerance`. Returns the worst row's max abs diff.
inline float expect_rows_near(std::span<const float> actual, std::span<const float> expected,
                              int32_t vocab, float tolerance, const std::string& what) {
  EXPECT_EQ(actual.size(), expected.size()) << what;
  const size_t width = static_cast<size_t>(vocab);
  float worst = 0.0f;
  for (size_t row = 0; (row + 1) * width <= std::min(actual.size(), expected.size()); ++row) {
    const float diff =
        max_abs_diff(actual.subspan(row * width, width), expected.subspan(row * width, width));
    worst = std::max(worst, diff);
    EXPECT_LE(diff, tolerance) << what << ", logits row " << row;
  }
  return worst;
}

// One input running payload[begin, end) of `tokens` (payload[0] at start_pos).
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

// Runs one batch with logits; a refused batch is a test failure (empty output).
inline BatchOutput execute_ok(Executor& executor, const BatchInput& batch) {
  StatusOr<BatchOutput> output = executor.execute(batch, /*return_logits=*/true);
  EXPECT_TRUE(output.ok()) << output.status().to_string();
  if (!output.ok()) return {};
  return std::move(output).value();
}

struct GreedyRun {
  std::vector<int32_t> tokens;  // [num_steps] generated ids
  std::vector<float> logits;    // [num_steps, vocab] the row that chose each token
};

// Greedy generation of several sessions together on new sessions: step 0 runs every prompt
// (whole, in one batch, each keeping its last row), then every step feeds each session its last
// token. The rows are copied out of each step's BatchOutput (a view valid until the next step).
// The sessions stay open; `sessions_out` receives their ids.
inline std::vector<GreedyRun> run_greedy_together(Executor& executor,
                                                  const std::vector<std::vector<int32_t>>& prompts,
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
  std::vector<std::vector<int32_t>> pending = prompts;  // the payload of each next input
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
      const std::span<const float> row =
          output.logits.subspan(i * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      runs[i].logits.insert(runs[i].logits.end(), row.begin(), row.end());
      runs[i].tokens.push_back(argmax(row));
      start[i] += static_cast<int32_t>(pending[i].size());
      pending[i] = {runs[i].tokens.back()};
    }
  }
  return runs;
}

// Greedy generation on a new session: the whole prompt in one input (keeping its last row),
// then each chosen token fed back alone at the next position. The session stays open.
inline GreedyRun run_greedy(Executor& executor, const std::vector<int32_t>& prompt,
                            int32_t num_steps, SessionId* session_out = nullptr) {
  std::vector<SessionId> sessions;
  std::vector<GreedyRun> runs = run_greedy_together(executor, {prompt}, num_steps, &sessions);
  if (session_out != nullptr && !sessions.empty()) *session_out = sessions[0];
  return std::move(runs[0]);
}

}  // namespace cellm::testing
