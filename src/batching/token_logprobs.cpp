#include "batching/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace cellm {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t num_top) {
  CELLM_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size())
      << "token " << token << " outside a logits row of " << logits.size();
  CELLM_CHECK_GE(num_top, 0) << "a negative number of top log-probabilities";
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  float top = kNone;
  for (const float v : logits) {
    if (std::isfinite(v) && v > top) top = v;
  }
  TokenLogprobs out;
  out.token = token;
  if (top == kNone) {
    out.logprob = kNone;
    return out;
  }
  double sum = 0.0;  // of exp(v - top) over the finite logits
  for (const float v : logits) {
    if (std::isfinite(v)) sum += std::exp(static_cast<double>(v) - top);
  }
  const double log_sum = std::log(sum);
  const auto logprob_of = [&](float v) {
    return std::isfinite(v) ? static_cast<float>(static_cast<double>(v) - top - log_sum) : kNone;
  };
  out.logprob = logprob_of(logits[static_cast<size_t>(token)]);

  // The best num_top finite logits by one pass over the row, a sorted list of at most num_top.
  const auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  std::vector<std::pair<int32_t, float>>& best = out.top;
  best.reserve(static_cast<size_t>(num_top) + 1);
  for (size_t i = 0; i < logits.size() && num_top > 0; ++i) {
    const float v = logits[i];
    if (!std::isfinite(v)) continue;
    const std::pair<int32_t, float> candidate{static_cast<int32_t>(i), v};
    if (best.size() == static_cast<size_t>(num_top) && !better(candidate, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), candidate, better), candidate);
    if (best.size() > static_cast<size_t>(num_top)) best.pop_back();
  }
  for (auto& [id, value] : best) value = logprob_of(value);
  return out;
}

}  // namespace cellm
