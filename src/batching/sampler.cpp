#include "batching/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"
#include "core/hash.h"

namespace cellm {
namespace {

// Higher score first; the lower id wins a tie (so every order is total and reproducible).
struct ByScore {
  const std::vector<float>* scores;
  bool operator()(int32_t a, int32_t b) const {
    const float sa = (*scores)[a];
    const float sb = (*scores)[b];
    return sa != sb ? sa > sb : a < b;
  }
};

}  // namespace

double sampling_uniform(uint64_t seed, int64_t position) {
  const uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(position)));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed) : params_(params), seed_(seed) {}

void Sampler::apply_penalties(std::span<const int32_t> context) {
  const SamplingParams& p = params_;
  if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) {
    return;
  }
  const size_t n = p.penalty_window < 0
                       ? context.size()
                       : std::min(context.size(), static_cast<size_t>(p.penalty_window));
  window_.assign(context.end() - static_cast<std::ptrdiff_t>(n), context.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    size_t j = i;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    const int32_t token = window_[i];
    const auto count = static_cast<float>(j - i);
    i = j;
    if (token < 0 || token >= static_cast<int32_t>(scores_.size())) continue;
    float& score = scores_[token];
    if (p.repetition_penalty != 1.0f) {
      score = score > 0.0f ? score / p.repetition_penalty : score * p.repetition_penalty;
    }
    score -= p.presence_penalty + count * p.frequency_penalty;
  }
}

StatusOr<int32_t> Sampler::sample(std::span<const float> logits, std::span<const int32_t> context) {
  const auto vocab = static_cast<int32_t>(logits.size());
  CELLM_CHECK_GT(vocab, 0) << "sample from an empty logits row";
  scores_.assign(logits.begin(), logits.end());
  for (const LogitBias& bias : params_.logit_bias) {
    CELLM_CHECK(bias.token >= 0 && bias.token < vocab)
        << "logit_bias token " << bias.token << " outside the vocabulary of " << vocab;
    scores_[bias.token] += bias.bias;
  }
  apply_penalties(context);

  candidates_.clear();
  for (int32_t t = 0; t < vocab; ++t) {
    if (std::isfinite(scores_[t])) candidates_.push_back(t);
  }
  if (candidates_.empty()) {
    return failed_precondition("no token has a finite score at position " +
                               std::to_string(context.size()) +
                               " (NaN or infinite logits, or logit_bias banned every token)");
  }
  if (params_.temperature <= 0.0f) {
    return *std::min_element(candidates_.begin(), candidates_.end(), ByScore{&scores_});
  }

  // Temperature, then top-k (candidates sorted best first either way).
  const ByScore by_score{&scores_};
  const auto num = static_cast<int32_t>(candidates_.size());
  if (params_.top_k > 0 && params_.top_k < num) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(),
                      by_score);
    candidates_.resize(params_.top_k);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_score);
  }
  const double inv_temperature = 1.0 / static_cast<double>(params_.temperature);
  const double top = static_cast<double>(scores_[candidates_[0]]) * inv_temperature;
  probs_.resize(candidates_.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    probs_[i] = std::exp(static_cast<double>(scores_[candidates_[i]]) * inv_temperature - top);
    total += probs_[i];
  }
  // Top-p: the shortest prefix whose mass reaches top_p (at least one token).
  size_t keep = candidates_.size();
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double mass = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      mass += probs_[i];
      if (mass >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  // Min-p: relative to the best token's probability (probs_[0] is the largest).
  if (params_.min_p > 0.0f) {
    const double floor = static_cast<double>(params_.min_p) * probs_[0];
    size_t i = 1;
    while (i < keep && probs_[i] >= floor) ++i;
    keep = i;
  }
  double kept_mass = 0.0;
  for (size_t i = 0; i < keep; ++i) kept_mass += probs_[i];
  const double u = sampling_uniform(seed_, static_cast<int64_t>(context.size())) * kept_mass;
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    mass += probs_[i];
    if (u < mass) return candidates_[i];
  }
  return candidates_[keep - 1];  // u rounded up to the whole mass
}

}  // namespace cellm
