#include "batching/token_logprobs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "batching/sampler.h"
#include "core/check.h"

namespace cellm {

namespace {

// exp(x) for x <= 0 in float, within 2 ulp; a value below -87 or not finite is taken as -87
// (exp ≈ 1.6e-38, nothing beside terms near 1). Round x / ln 2 to n by the 1.5 · 2^23 trick, a
// degree-6 polynomial for the rest, 2^n built in the exponent bits. No branch and no library
// call (the clamp is integer masks: a float compare would keep GCC from vectorizing at -O2), so
// loops over a row of logits vectorize: std::exp in double costs about 15 ns a value, 2 ms for a
// 128K vocabulary.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 · 2^23
  constexpr int32_t kLowest = std::bit_cast<int32_t>(-87.0f);
  // A negative float's bits, as an int32, grow with its magnitude; all-ones exponent bits are an
  // infinity or a NaN.
  const auto bits = std::bit_cast<int32_t>(x);
  const int32_t clamp = ((bits < 0) & (bits > kLowest)) | ((bits & 0x7f800000) == 0x7f800000);
  const int32_t mask = -clamp;
  x = std::bit_cast<float>((kLowest & mask) | (bits & ~mask));
  const float shifted = x * kLog2e + kRound;
  const float n = shifted - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;  // in [-ln 2 / 2, ln 2 / 2]
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // n in [-126, 0]: its bits sit in the low bits of `shifted`.
  const int32_t exponent = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound) + 127;
  return p * std::bit_cast<float>(static_cast<uint32_t>(exponent) << 23);
}

// The sum of exp(v - top) over the finite values of `row` (top: their largest): float lanes over
// blocks of 1,024 values (each lane sums 128 terms of at most 1), the blocks added in double.
double sum_exp_finite(std::span<const float> row, float top) {
  constexpr size_t kLanes = 8;
  constexpr size_t kBlock = 1024;
  const float* values = row.data();
  const size_t n = row.size();
  double sum = 0.0;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    float lane_sum[kLanes] = {};
    for (size_t b = 0; b < kBlock; b += kLanes) {
      for (size_t l = 0; l < kLanes; ++l) {
        lane_sum[l] += exp_nonpositive(values[i + b + l] - top);  // not finite: ≈ 0
      }
    }
    for (size_t l = 0; l < kLanes; ++l) sum += static_cast<double>(lane_sum[l]);
  }
  for (; i < n; ++i) {
    if (std::isfinite(values[i])) sum += static_cast<double>(exp_nonpositive(values[i] - top));
  }
  return sum;
}

}  // namespace

RowLogprobs summarize_logprobs(std::span<const float> logits, int32_t scored_token,
                               int32_t num_top) {
  CELLM_CHECK(scored_token >= kNoToken &&
              static_cast<int64_t>(scored_token) < static_cast<int64_t>(logits.size()))
      << "scored token " << scored_token << " outside a logits row of " << logits.size();
  CELLM_CHECK_GE(num_top, 0) << "a negative number of top log-probabilities";
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  RowLogprobs out;
  if (scored_token != kNoToken) out.scored_logit = logits[static_cast<size_t>(scored_token)];
  out.max_logit = max_finite(logits);
  if (out.max_logit == kNone) return out;
  out.log_sum_exp = std::log(sum_exp_finite(logits, out.max_logit));

  // The best num_top finite logits by one pass over the row, a sorted list of at most num_top;
  // once it is full, only a value above its last can enter (an equal one has a higher id).
  const auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  std::vector<std::pair<int32_t, float>>& best = out.top;
  best.reserve(static_cast<size_t>(num_top) + 1);
  float threshold = kNone;  // -infinity enters nothing: only finite values rank
  const float* values = logits.data();
  for (size_t i = 0; i < logits.size() && num_top > 0; ++i) {
    const float v = values[i];
    if (!(v > threshold) || v == -kNone) continue;
    const std::pair<int32_t, float> candidate{static_cast<int32_t>(i), v};
    best.insert(std::upper_bound(best.begin(), best.end(), candidate, better), candidate);
    if (best.size() > static_cast<size_t>(num_top)) best.pop_back();
    if (best.size() == static_cast<size_t>(num_top)) threshold = best.back().second;
  }
  return out;
}

TokenLogprobs logprobs_from_summary(const RowLogprobs& summary, int32_t token, float token_logit) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  const auto logprob_of = [&](float v) {
    return std::isfinite(v) && summary.max_logit != kNone
               ? static_cast<float>(static_cast<double>(v) - summary.max_logit -
                                    summary.log_sum_exp)
               : kNone;
  };
  TokenLogprobs out;
  out.token = token;
  out.logprob = logprob_of(token_logit);
  out.top.reserve(summary.top.size());
  for (const auto& [id, logit] : summary.top) out.top.emplace_back(id, logprob_of(logit));
  return out;
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t num_top) {
  CELLM_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size())
      << "token " << token << " outside a logits row of " << logits.size();
  return logprobs_from_summary(summarize_logprobs(logits, kNoToken, num_top), token,
                               logits[static_cast<size_t>(token)]);
}

}  // namespace cellm
