#include "batching/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"
#include "core/listed_draw.h"
#include "core/score_rewrite.h"

namespace cellm {
namespace {

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t position) { return draw_uniform(seed, position); }

// Lanes of independent maxima so the compiler vectorizes the loop (v - v is 0 exactly when v is
// finite).
float max_finite(std::span<const float> row) {
  constexpr size_t kLanes = 16;
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  float lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, kNone);
  const float* values = row.data();
  const size_t n = row.size();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      const float v = values[i + l];
      const float finite = v - v == 0.0f ? v : kNone;
      lane_max[l] = finite > lane_max[l] ? finite : lane_max[l];
    }
  }
  float best = kNone;
  for (size_t l = 0; l < kLanes; ++l) best = lane_max[l] > best ? lane_max[l] : best;
  for (; i < n; ++i) {
    const float v = values[i];
    if (v - v == 0.0f && v > best) best = v;
  }
  return best;
}

int32_t argmax_finite(std::span<const float> row) {
  const float best = max_finite(row);
  if (best == -std::numeric_limits<float>::infinity()) return kNoToken;  // nothing finite
  // The first value equal to the best (the lowest id on a tie); it exists and is finite.
  const auto found = std::find(row.begin(), row.end(), best);
  return static_cast<int32_t>(found - row.begin());
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed, bool masked)
    : params_(params),
      seed_(seed),
      rewrites_scores_(!params.logit_bias.empty() || has_penalties(params)),
      masked_(masked) {
  // Log-probabilities are the engine's business: it reads them from the row or from the
  // executor's summary of it (batch.h's RowLogprobs).
  takes_argmax_ = params_.temperature <= 0.0f && !rewrites_scores_ && !masked_;
  for (const LogitBias& bias : params_.logit_bias)
    biases_by_token_.emplace_back(bias.token, bias.bias);
  std::stable_sort(biases_by_token_.begin(), biases_by_token_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

void apply_rewrite(const RowRewrite& rewrite, std::span<float> row) {
  const auto vocab = static_cast<int32_t>(row.size());
  for (const TokenRewrite& entry : rewrite.tokens) {
    if (entry.token < 0 || entry.token >= vocab) {  // a context token past the vocabulary
      CELLM_CHECK_EQ(entry.num_biases, 0)
          << "logit_bias token " << entry.token << " outside the vocabulary of " << vocab;
      continue;
    }
    float& score = row[static_cast<size_t>(entry.token)];
    score = rewrite_score(score, rewrite.biases.data() + entry.first_bias, entry.num_biases,
                          entry.count, rewrite.penalties);
  }
}

SamplerRewrite Sampler::rewrite_for(std::span<const int32_t> context) const {
  SamplerRewrite out;
  std::vector<int32_t> window;
  build_rewrite(context, window, out);
  return out;
}

void Sampler::rewrite_into(std::span<const int32_t> context, SamplerRewrite& out) {
  build_rewrite(context, window_, out);
}

void Sampler::build_rewrite(std::span<const int32_t> context, std::vector<int32_t>& window,
                            SamplerRewrite& out) const {
  const SamplingParams& p = params_;
  out.tokens.clear();
  out.biases.clear();
  out.penalties = {p.repetition_penalty, p.presence_penalty, p.frequency_penalty};
  // The window's tokens ascending, merged with the biases by token (each token's in the params'
  // order).
  window.clear();
  if (has_penalties(p)) {
    const size_t n = p.penalty_window < 0
                         ? context.size()
                         : std::min(context.size(), static_cast<size_t>(p.penalty_window));
    window.assign(context.end() - static_cast<std::ptrdiff_t>(n), context.end());
    std::sort(window.begin(), window.end());
  }
  const std::vector<std::pair<int32_t, float>>& aimed = biases_by_token_;
  size_t w = 0;
  size_t b = 0;
  while (w < window.size() || b < aimed.size()) {
    const int32_t token = b == aimed.size()    ? window[w]
                          : w == window.size() ? aimed[b].first
                                               : std::min(window[w], aimed[b].first);
    TokenRewrite entry;
    entry.token = token;
    entry.first_bias = static_cast<int32_t>(out.biases.size());
    for (; b < aimed.size() && aimed[b].first == token; ++b) out.biases.push_back(aimed[b].second);
    entry.num_biases = static_cast<int32_t>(out.biases.size()) - entry.first_bias;
    for (; w < window.size() && window[w] == token; ++w) ++entry.count;
    out.tokens.push_back(entry);
  }
}

double Sampler::weight(int32_t token) const {
  return std::exp(static_cast<double>(row_[token]) * inv_temperature_ - top_);
}

void Sampler::sort_prefix(size_t n) {
  if (n <= num_sorted_) return;
  // Higher score first; the lower id wins a tie (so every order is total and reproducible).
  const auto by_score = [row = row_](int32_t a, int32_t b) {
    const float sa = row[a];
    const float sb = row[b];
    return sa != sb ? sa > sb : a < b;
  };
  // Grow geometrically, so walking the candidates one by one costs O(vocab) per doubling.
  const size_t size = candidates_.size();
  const size_t end = std::min(size, std::max({n, 2 * num_sorted_, size_t{64}}));
  const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(num_sorted_);
  const auto last = candidates_.begin() + static_cast<std::ptrdiff_t>(end);
  const size_t wanted = end - num_sorted_;
  const size_t rest = size - num_sorted_;
  if (end < size && wanted * 16 > rest) {
    // Many of the rest (a wide nucleus of flat rows): a selection in linear time brings the best
    // `wanted` to the front. A bounded heap would take most candidates in at log(wanted) each
    // (top-p 0.95 on flat 128K-token rows: 20-22 ms a row against 12.5-13; bench/sampler_bench).
    std::nth_element(first, last, candidates_.end(), by_score);
  } else if (end < size) {
    // The best end - num_sorted_ of the rest: one pass with a bounded heap whose front is the
    // worst kept so far (most candidates lose one comparison with it), then a partition that
    // brings every candidate not worse than it to the front.
    heap_.assign(first, last);
    std::make_heap(heap_.begin(), heap_.end(), by_score);
    for (auto it = last; it != candidates_.end(); ++it) {
      if (!by_score(*it, heap_.front())) continue;
      std::pop_heap(heap_.begin(), heap_.end(), by_score);
      heap_.back() = *it;
      std::push_heap(heap_.begin(), heap_.end(), by_score);
    }
    const int32_t worst = heap_.front();
    std::partition(first, candidates_.end(), [&](int32_t t) { return !by_score(worst, t); });
  }
  std::sort(first, last, by_score);
  num_sorted_ = end;
}

StatusOr<int32_t> Sampler::sample(std::span<const float> logits, std::span<const int32_t> context,
                                  std::span<const uint8_t> allowed) {
  const auto vocab = static_cast<int32_t>(logits.size());
  CELLM_CHECK_GT(vocab, 0) << "sample from an empty logits row";
  CELLM_CHECK(masked_ ? allowed.size() == logits.size() : allowed.empty())
      << "a mask of " << allowed.size() << " tokens for a " << (masked_ ? "" : "un")
      << "masked sampler over " << vocab;
  row_ = logits;
  if (rewrites_scores_ || masked_) {
    scores_.assign(logits.begin(), logits.end());
    if (rewrites_scores_) {
      build_rewrite(context, window_, rewrite_);
      apply_rewrite(rewrite_.view(), scores_);
    }
    constexpr float kBanned = -std::numeric_limits<float>::infinity();
    for (size_t t = 0; t < allowed.size(); ++t) scores_[t] = allowed[t] != 0 ? scores_[t] : kBanned;
    row_ = scores_;
  }
  const int32_t best = argmax_finite(row_);
  if (best == kNoToken) {
    return failed_precondition(
        "no token has a finite score at position " + std::to_string(context.size()) +
        " (NaN or infinite logits, or logit_bias or the response format banned every token)");
  }
  if (params_.temperature <= 0.0f) return best;

  // The candidates: every finite score, best first as far as a step needs (sort_prefix).
  candidates_.resize(static_cast<size_t>(vocab));
  size_t num_finite = 0;
  for (int32_t t = 0; t < vocab; ++t) {  // branch-free: most scores are finite
    const float v = row_[t];
    candidates_[num_finite] = t;
    num_finite += v - v == 0.0f ? 1 : 0;
  }
  candidates_.resize(num_finite);
  num_sorted_ = 0;
  inv_temperature_ = 1.0 / static_cast<double>(params_.temperature);
  top_ = static_cast<double>(row_[best]) * inv_temperature_;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < candidates_.size()) {
    sort_prefix(static_cast<size_t>(params_.top_k));
    candidates_.resize(static_cast<size_t>(params_.top_k));
    num_sorted_ = std::min(num_sorted_, candidates_.size());
  }
  double total = 0.0;
  for (const int32_t t : candidates_) total += weight(t);
  double kept_mass = total;
  // Min-p: the best token's weight is 1, so keep weights >= min_p. Weights fall with the score,
  // so the kept set is a best-first prefix and what is sorted stays sorted.
  if (params_.min_p > 0.0f) {
    const double floor = static_cast<double>(params_.min_p);
    const auto kept = std::stable_partition(candidates_.begin(), candidates_.end(),
                                            [&](int32_t t) { return weight(t) >= floor; });
    candidates_.erase(kept, candidates_.end());
    num_sorted_ = std::min(num_sorted_, candidates_.size());
    kept_mass = 0.0;
    for (const int32_t t : candidates_) kept_mass += weight(t);
  }
  // Top-p: the shortest best-first prefix whose mass reaches top_p of the total (at least one
  // token), within what min-p kept.
  size_t keep = candidates_.size();
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double mass = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      sort_prefix(i + 1);
      mass += weight(candidates_[i]);
      if (mass >= target) {
        keep = i + 1;
        break;
      }
    }
    kept_mass = mass;
  }
  const double u = sampling_uniform(seed_, static_cast<int64_t>(context.size())) * kept_mass;
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    sort_prefix(i + 1);
    mass += weight(candidates_[i]);
    if (u < mass) return candidates_[i];
  }
  sort_prefix(keep);
  return candidates_[keep - 1];  // u rounded up to the whole mass
}

}  // namespace cellm
