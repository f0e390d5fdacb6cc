// Sampler: turns one logits row into one token for one session, on the host (DESIGN §7).
//
// The chain, in order: logit bias; repetition, presence and frequency penalties over the last
// `penalty_window` tokens of the session's context; then greedy argmax (temperature <= 0, lowest
// id on ties) or: divide by the temperature, keep the top-k, softmax, keep the top-p nucleus,
// drop tokens below min_p times the top probability, renormalize and draw. The one random draw
// is sampling_uniform(seed, position) — a counter-based hash of the seed and the position the
// token will take — so a request samples the same tokens whatever it is batched with, preempted
// or not. Knows no sessions, tensors or threads. Who calls it: the Runner, once per output row.
// Thread-safety: a Sampler is used by one thread at a time (it keeps scratch buffers);
// sampling_uniform is pure.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "batching/gen_config.h"
#include "core/status.h"

namespace cellm {

// A uniform double in [0, 1) that depends only on (seed, position): splitmix64 of both.
double sampling_uniform(uint64_t seed, int64_t position);

class Sampler {
 public:
  // params must pass validate_gen_config; its token ids must lie in the vocabulary (the Runner
  // checks both at submit; a bad id here is a CELLM_CHECK failure).
  Sampler(const SamplingParams& params, uint64_t seed);

  // The token for position context.size(), from `logits` ([vocab] f32, raw) given the session's
  // context before it. FailedPrecondition when no token has a finite score (NaN logits, or the
  // bias banned every token).
  StatusOr<int32_t> sample(std::span<const float> logits, std::span<const int32_t> context);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }

 private:
  void apply_penalties(std::span<const int32_t> context);

  SamplingParams params_;
  uint64_t seed_ = 0;
  std::vector<float> scores_;        // [vocab] biased, penalized logits
  std::vector<int32_t> candidates_;  // [<= vocab] token ids still in the running
  std::vector<double> probs_;        // [candidates] probabilities, same order
  std::vector<int32_t> window_;      // [<= penalty_window] sorted copy of the penalized tokens
};

}  // namespace cellm
