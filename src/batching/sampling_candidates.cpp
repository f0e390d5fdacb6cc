// Sampling from a row's candidates (sampler.h): sampling_candidates, the host's definition of
// what an executor lists, and Sampler::sample_from_candidates, which replays sample()'s chain on
// the listed tokens and gives up where the chain would need a token the list does not hold.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "batching/sampler.h"
#include "core/check.h"
#include "core/listed_draw.h"

namespace cellm {
namespace {

// Higher logit first; the lower id wins a tie (sample()'s order).
bool better(const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
  return a.second != b.second ? a.second > b.second : a.first < b.first;
}

}  // namespace

ListedDrawParams listed_draw_params(const SamplingParams& params) {
  return {params.top_k, params.top_p, params.min_p};
}

RowCandidates sampling_candidates(std::span<const float> row, float temperature) {
  CELLM_CHECK_GT(temperature, 0.0f) << "sampling candidates at a temperature <= 0";
  RowCandidates out;
  out.temperature = temperature;
  out.max_logit = max_finite(row);
  if (out.max_logit == -std::numeric_limits<float>::infinity()) return out;
  const double inv_temperature = 1.0 / static_cast<double>(temperature);
  const double top = static_cast<double>(out.max_logit) * inv_temperature;
  std::vector<std::pair<int32_t, float>> finite;
  finite.reserve(row.size());
  for (size_t t = 0; t < row.size(); ++t) {
    const float v = row[t];
    if (!std::isfinite(v)) continue;
    out.total += std::exp(static_cast<double>(v) * inv_temperature - top);
    finite.emplace_back(static_cast<int32_t>(t), v);
  }
  const size_t n = std::min(finite.size(), static_cast<size_t>(kSamplingCandidates));
  std::partial_sort(finite.begin(), finite.begin() + static_cast<std::ptrdiff_t>(n), finite.end(),
                    better);
  out.top.assign(finite.begin(), finite.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

// Follows sample() step by step: core/listed_draw.h's chain on the list's weights, the one the
// CUDA executor runs on the device.
std::optional<int32_t> Sampler::sample_from_candidates(const RowCandidates& candidates,
                                                       int64_t position) const {
  // With bias or penalties the caller lists the rewritten row's candidates (StepInput::rewrite).
  CELLM_CHECK_GT(params_.temperature, 0.0f) << "sampling candidates for a greedy sampler";
  CELLM_CHECK_EQ(candidates.temperature, params_.temperature)
      << "candidates listed at another temperature";
  const std::vector<std::pair<int32_t, float>>& list = candidates.top;
  if (list.empty()) return std::nullopt;  // nothing finite: sample() says so
  CELLM_CHECK_LE(list.size(), static_cast<size_t>(kSamplingCandidates))
      << "more candidates than a list holds";
  const auto num = static_cast<int32_t>(list.size());
  CELLM_CHECK(!std::isnan(candidates.total) || params_.top_k > 0 || num < kSamplingCandidates)
      << "candidates listed without the row's total for a draw that reads it (no top-k)";
  const double inv_temperature = 1.0 / static_cast<double>(params_.temperature);
  const double top = static_cast<double>(list[0].second) * inv_temperature;
  int32_t ids[kMaxListedDraw];
  double weights[kMaxListedDraw];  // exp(v / T - top / T), as sample()'s weight() computes it
  for (int32_t i = 0; i < num; ++i) {
    ids[i] = list[static_cast<size_t>(i)].first;
    weights[i] =
        std::exp(static_cast<double>(list[static_cast<size_t>(i)].second) * inv_temperature - top);
  }
  const int32_t token =
      draw_from_listed(ids, weights, num, num < kSamplingCandidates, candidates.total,
                       listed_draw_params(params_), sampling_uniform(seed_, position));
  if (token == kListedUndecided) return std::nullopt;
  return token;
}

}  // namespace cellm
