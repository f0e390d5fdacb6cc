// cuda_side_by_side: two executors fed the same steps, their logits compared after each (the
// CUDA end-to-end tests that hold one path against another). Test code only; not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
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

}  // namespace cellm::testing
