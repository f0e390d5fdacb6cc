// Sampling from a row's candidates (sampler.h): sampling_candidates, the host's definition of
// what an executor lists, and Sampler::sample_from_candidates, which replays sample()'s chain on
// the listed tokens and gives up where the chain would need a token the list does not hold.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "batching/sampler.h"
#include "core/check.h"

namespace cellm {
namespace {

// Higher logit first; the lower id wins a tie (sample()'s order).
bool better(const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
  return a.second != b.second ? a.second > b.second : a.first < b.first;
}

}  // namespace

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

// Follows sample() step by step. `known` counts the tokens of the running set known best first
// (a prefix of the list); `whole` says whether that prefix is the whole set.
std::optional<int32_t> Sampler::sample_from_candidates(const RowCandidates& candidates,
                                                       int64_t position) const {
  CELLM_CHECK(takes_candidates()) << "sampling candidates with bias, penalties or greedy";
  CELLM_CHECK_EQ(candidates.temperature, params_.temperature)
      << "candidates listed at another temperature";
  const std::vector<std::pair<int32_t, float>>& list = candidates.top;
  if (list.empty()) return std::nullopt;  // nothing finite: sample() says so
  const size_t listed = list.size();
  const bool complete = listed < static_cast<size_t>(kSamplingCandidates);  // every finite one
  const double inv_temperature = 1.0 / static_cast<double>(params_.temperature);
  const double top = static_cast<double>(list[0].second) * inv_temperature;
  const auto weight = [&](size_t i) {
    return std::exp(static_cast<double>(list[i].second) * inv_temperature - top);
  };
  // A sum over list[0, n) in vocabulary order, as sample() sums a set it has not sorted.
  const auto sum_by_id = [&](size_t n) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return list[a].first < list[b].first; });
    double sum = 0.0;
    for (const size_t i : order) sum += weight(i);
    return sum;
  };

  // Top-k: a cut inside the list is summed best first (sample() sorted it); no cut sums every
  // finite token in vocabulary order.
  size_t known = listed;
  bool whole = complete;
  bool sorted_set = false;  // sample()'s set is in best-first order (a top-k cut)
  double total = 0.0;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < listed) {
    known = static_cast<size_t>(params_.top_k);
    whole = true;
    sorted_set = true;
    for (size_t i = 0; i < known; ++i) total += weight(i);
  } else if (params_.top_k > 0 && !complete) {
    return std::nullopt;  // a cut at or past the list's end: its set is not all listed
  } else {
    total = complete ? sum_by_id(listed) : candidates.total;
  }
  double kept_mass = total;
  // Min-p keeps a best-first prefix (weights fall with the logit).
  if (params_.min_p > 0.0f) {
    const double floor = static_cast<double>(params_.min_p);
    size_t kept = 0;
    while (kept < known && weight(kept) >= floor) ++kept;
    if (kept == known && !whole) return std::nullopt;  // the prefix may go past the list
    known = kept;
    whole = true;
    if (sorted_set) {
      kept_mass = 0.0;
      for (size_t i = 0; i < known; ++i) kept_mass += weight(i);
    } else {
      kept_mass = sum_by_id(known);
    }
  }
  // Top-p: the shortest best-first prefix reaching top_p of the total.
  size_t keep = whole ? known : std::numeric_limits<size_t>::max();
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double mass = 0.0;
    size_t i = 0;
    for (; i < known; ++i) {
      mass += weight(i);
      if (mass >= target) break;
    }
    if (i == known && !whole) return std::nullopt;  // not reached within the list
    keep = i == known ? known : i + 1;
    kept_mass = mass;
  }
  if (keep == 0) return std::nullopt;  // min-p above 1 keeps nothing: sample()'s business
  const double u = sampling_uniform(seed_, position) * kept_mass;
  double mass = 0.0;
  const size_t walk = std::min(keep, known);
  for (size_t i = 0; i < walk; ++i) {
    mass += weight(i);
    if (u < mass) return list[i].first;
  }
  if (walk < keep) return std::nullopt;  // the draw goes past the list
  return list[keep - 1].first;           // u rounded up to the whole mass
}

}  // namespace cellm
