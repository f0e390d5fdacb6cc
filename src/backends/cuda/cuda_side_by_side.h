// cuda_side_by_side: two executors fed the same steps, their logits compared after each (the
// CUDA end-to-end tests that hold one path against another), and the pairs of executors over
// one set of random weights those tests build. Test code only; not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_e2e_support.h"

namespace cellm::testing {

// Feeds executors a and b the same steps: `num_sessions` sessions opened on each, at step s
// `lengths[s]` tokens per session (token(step, session, i) for its i-th), all rows kept; after
// each step, check(step, a's logits, b's logits). Stops at a fatal failure.
template <class Token, class Check>
void feed_side_by_side(Executor& a, Executor& b, int32_t num_sessions,
                       const std::vector<int32_t>& lengths, Token token, Check check) {
  std::vector<SessionId> a_sessions;
  std::vector<SessionId> b_sessions;
  for (int32_t i = 0; i < num_sessions; ++i) {
    a_sessions.push_back(*a.open_session());
    b_sessions.push_back(*b.open_session());
  }
  int32_t position = 0;
  for (int32_t step = 0; step < static_cast<int32_t>(lengths.size()); ++step) {
    const int32_t length = lengths[static_cast<size_t>(step)];
    std::vector<int32_t> tokens(static_cast<size_t>(num_sessions * length));
    BatchInput a_batch;
    BatchInput b_batch;
    for (int32_t i = 0; i < num_sessions; ++i) {
      for (int32_t t = 0; t < length; ++t) {
        tokens[static_cast<size_t>(length * i + t)] = token(step, i, t);
      }
      const std::span<const int32_t> input(&tokens[static_cast<size_t>(length * i)],
                                           static_cast<size_t>(length));
      a_batch.inputs.push_back(
          step_input(a_sessions[static_cast<size_t>(i)], position, input, 0, length, true));
      b_batch.inputs.push_back(
          step_input(b_sessions[static_cast<size_t>(i)], position, input, 0, length, true));
    }
    position += length;
    const BatchOutput a_out = execute_ok(a, a_batch);
    const std::vector<float> a_logits(a_out.logits.begin(), a_out.logits.end());
    const BatchOutput b_out = execute_ok(b, b_batch);
    const std::vector<float> b_logits(b_out.logits.begin(), b_out.logits.end());
    check(step, a_logits, b_logits);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// max |a − b| over max |b|.
inline float relative_difference(std::span<const float> a, std::span<const float> b) {
  float range = 0.0f;
  for (const float v : b) range = std::max(range, std::fabs(v));
  return max_abs_diff(a, b) / range;
}

// How closely executor `a` (int8 activations) follows `b` (exact ones) over the same steps
// (feed_side_by_side): the worst |logit difference| / max |logit| of any row, and how many rows
// pick the same greedy token.
struct RowAgreement {
  int32_t rows = 0;
  int32_t same_argmax = 0;
  float worst_relative = 0.0f;
};

template <class Token>
RowAgreement compare_side_by_side(Executor& a, Executor& b, int32_t num_sessions,
                                  const std::vector<int32_t>& lengths, Token token,
                                  int32_t vocab_size) {
  RowAgreement agreement;
  feed_side_by_side(
      a, b, num_sessions, lengths, token,
      [&](int32_t, const std::vector<float>& a_logits, const std::vector<float>& b_logits) {
        ASSERT_EQ(a_logits.size(), b_logits.size());
        const auto vocab = static_cast<size_t>(vocab_size);
        for (size_t r = 0; r * vocab < a_logits.size(); ++r) {
          const std::span<const float> x(a_logits.data() + r * vocab, vocab);
          const std::span<const float> y(b_logits.data() + r * vocab, vocab);
          agreement.worst_relative = std::max(agreement.worst_relative, relative_difference(x, y));
          agreement.same_argmax += argmax(x) == argmax(y) ? 1 : 0;
          ++agreement.rows;
        }
      });
  return agreement;
}

// Int8 rounding, not a broken product: some difference (the int8 path ran), under 5% of the
// logits' range, the same greedy token in 9 rows of 10.
inline void expect_int8_rounding(const RowAgreement& agreement) {
  EXPECT_GT(agreement.worst_relative, 0.0f) << "int8 activations were not used";
  EXPECT_LT(agreement.worst_relative, 0.05f);
  EXPECT_GE(agreement.same_argmax, agreement.rows * 9 / 10);
}

// Random weights of `spec` for `config`, shared by the executors a test compares.
inline void make_random_weights(const ModelConfig& config, const RandomWeightsSpec& spec,
                                const CudaWeightsOptions& options,
                                std::shared_ptr<const CudaWeights>* shared) {
  auto weights = CudaWeights::random(config, spec, options);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  *shared = std::move(weights).value();
}

// Two initialized executors over one set of weights and one program: `a` with `a_options`, `b`
// with `b_options` and, where `b_switch` names one, that environment switch set to 0 while `b` is
// made (the forward reads its switches then), so `b` takes the path the switch turns off to.
struct ExecutorPair {
  std::unique_ptr<CudaExecutor> a;
  std::unique_ptr<CudaExecutor> b;
};

inline void make_executor_pair(const ModelConfig& config,
                               const std::shared_ptr<const CudaWeights>& shared,
                               const ProgramSpec& spec, const CudaExecutorOptions& a_options,
                               const CudaExecutorOptions& b_options, const char* b_switch,
                               ExecutorPair* pair) {
  pair->a = std::make_unique<CudaExecutor>(config, shared, spec, a_options);
  const Status a_initialized = pair->a->initialize();
  ASSERT_TRUE(a_initialized.ok()) << a_initialized.to_string();
  if (b_switch != nullptr) {
    ASSERT_EQ(setenv(b_switch, "0", 1), 0);
  }
  pair->b = std::make_unique<CudaExecutor>(config, shared, spec, b_options);
  const Status b_initialized = pair->b->initialize();
  if (b_switch != nullptr) {
    ASSERT_EQ(unsetenv(b_switch), 0);
  }
  ASSERT_TRUE(b_initialized.ok()) << b_initialized.to_string();
}

// Executor options with exact (f32) activations.
inline CudaExecutorOptions exact_activations() {
  CudaExecutorOptions options;
  options.int8_activations = false;
  return options;
}

}  // namespace cellm::testing
