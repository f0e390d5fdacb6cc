// score_rewrite: what a sampler's logit bias and repetition, presence and frequency penalties do
// to one token's logit, as plain arithmetic that the host and the GPU both compile — so the CUDA
// executor can rewrite a session's row on the device (kernels/row_rewrite.cuh) to exactly the
// scores the host's Sampler::sample() computes from it, and draw from them there.
//
// It knows no rows, contexts or vocabularies: the caller lists, per token the sampler touches, the
// biases aimed at it (in the order the sampler's params list them) and how often it occurs in the
// penalty window. Every operation rounds once (no fused multiply-add on either side), so the two
// sides agree bit for bit. Thread-safety: pure functions and plain values.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace cellm {

// The sampler's penalties (SamplingParams' fields of the same names): 1, 0 and 0 for none.
struct PenaltyParams {
  float repetition = 1.0f;
  float presence = 0.0f;
  float frequency = 0.0f;
  friend bool operator==(const PenaltyParams&, const PenaltyParams&) = default;
};

// One token a rewrite touches: biases[first_bias, first_bias + num_biases) of its rewrite are
// added in order, then the penalties for `count` occurrences in the window (none when 0).
struct TokenRewrite {
  int32_t token = 0;
  int32_t count = 0;
  int32_t first_bias = 0;
  int32_t num_biases = 0;
  friend bool operator==(const TokenRewrite&, const TokenRewrite&) = default;
};

namespace score_rewrite_detail {

// Single roundings on the device; on the host the operations are separate statements of a file
// compiled without contraction (a lone product or sum has nothing to fuse with).
CELLM_HOST_DEVICE inline float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
CELLM_HOST_DEVICE inline float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
CELLM_HOST_DEVICE inline float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
CELLM_HOST_DEVICE inline float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

}  // namespace score_rewrite_detail

// The score of a token whose logit is `score` after the biases aimed at it (`biases`, `num_biases`
// of them, in order) and the penalties for `count` occurrences in the window: the repetition
// penalty divides a positive score and multiplies any other, then presence + count · frequency is
// subtracted.
CELLM_HOST_DEVICE inline float rewrite_score(float score, const float* biases, int32_t num_biases,
                                             int32_t count, const PenaltyParams& penalties) {
  namespace d = score_rewrite_detail;
  for (int32_t i = 0; i < num_biases; ++i) score = d::add(score, biases[i]);
  if (count <= 0) return score;
  if (penalties.repetition != 1.0f) {
    score =
        score > 0.0f ? d::div(score, penalties.repetition) : d::mul(score, penalties.repetition);
  }
  const float per_count = d::mul(static_cast<float>(count), penalties.frequency);
  return d::sub(score, d::add(penalties.presence, per_count));
}

}  // namespace cellm
