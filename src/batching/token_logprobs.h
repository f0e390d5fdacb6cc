// TokenLogprobs: the model's log-probabilities at one generated position — the sampled token's
// and the most likely tokens' — for a generation that asks for them (SamplingParams::logprobs).
//
// They are the raw model's: log-softmax of the logits row as the executor returned it, before
// logit bias, penalties, temperature and truncation (what OpenAI's and vLLM's APIs report by
// default). A token whose logit is not finite has a log-probability of -infinity. Knows no
// sessions or sampler state. Who calls it: the Runner's engine, once per delivered token of such
// a generation (from the row, or from the executor's summary of it). Thread-safety: pure.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "batching/batch.h"

namespace cellm {

struct TokenLogprobs {
  int32_t token = 0;     // the sampled token
  float logprob = 0.0f;  // its log-probability
  // The `num_top` most likely tokens and their log-probabilities, best first (the lower id first
  // on ties); only tokens with a finite logit.
  std::vector<std::pair<int32_t, float>> top;
};

// The log-probabilities of `token` and of the `num_top` most likely tokens of `logits` ([vocab]
// raw logits). With no finite logit every log-probability is -infinity and `top` is empty.
// Requires 0 <= token < logits.size() and num_top >= 0.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t num_top);

// The same in two halves, for executors that summarize rows beside them (batch.h's RowLogprobs):
// the summary of a row — its normalizer, the logit of `scored_token` (kNoToken: none) and its
// `num_top` best tokens — as the host computes it (the oracle of the CUDA executor's kernel), and
// the log-probabilities of `token` (its logit `token_logit`) and of the summary's top tokens.
// Requires num_top >= 0 and scored_token in [kNoToken, logits.size()).
RowLogprobs summarize_logprobs(std::span<const float> logits, int32_t scored_token,
                               int32_t num_top);
TokenLogprobs logprobs_from_summary(const RowLogprobs& summary, int32_t token, float token_logit);

}  // namespace cellm
