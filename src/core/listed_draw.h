// listed_draw: the sampler's chain (top-k, min-p, top-p, one draw) replayed on a row's best tokens
// listed best first, as plain arithmetic that the host and the GPU both compile — so the CUDA
// executor can draw a token on the device that is the one the host's sampler draws from the same
// list (batching/sampler.h's sample_from_candidates is this function on the host), and start a
// session's next step before the host has it.
//
// It knows no rows, vocabularies or sessions: the caller lists the tokens and their weights
// exp(v/T − top/T), best first (the weights are the caller's so that both sides compute them
// once, the same way), and says whether the list holds every finite token of the row. Where the
// chain would need a token past the list, it says so (kListedUndecided) and the caller samples the
// whole row. Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "core/hash.h"
#include "core/host_device.h"

namespace cellm {

inline constexpr int32_t kMaxListedDraw = 64;    // the longest list the draw takes
inline constexpr int32_t kListedUndecided = -1;  // the list does not decide the token

// The sampler's cuts (SamplingParams' fields of the same names): top_k 0 for none, top_p 1 for
// none, min_p 0 for none.
struct ListedDrawParams {
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  friend bool operator==(const ListedDrawParams&, const ListedDrawParams&) = default;
};

// A uniform double in [0, 1) that depends only on (seed, position): splitmix64 of both (the
// sampler's one random draw per token).
CELLM_HOST_DEVICE inline double draw_uniform(uint64_t seed, int64_t position) {
  const uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(position)));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// The token the chain picks with `uniform` (draw_uniform's) from `num` (1..kMaxListedDraw) listed
// tokens: ids[i] and weights[i] best first (higher logit first, the lower id first on ties).
// `complete`: the list holds every finite token of the row. `row_total`: the row's Σ weights over
// every finite token, used when there is no top-k (ignored when complete, where the list's own
// sum in id order is the row's). Sums follow the order the host's sample() sums the same set in:
// best first after a top-k cut, else in vocabulary order. A top-k past the list decides where a
// min-p or top-p cut falls inside the list (the total it needs only bounded: see below).
CELLM_HOST_DEVICE inline int32_t draw_from_listed(const int32_t* ids, const double* weights,
                                                  int32_t num, bool complete, double row_total,
                                                  const ListedDrawParams& params, double uniform) {
  if (num <= 0 || num > kMaxListedDraw) return kListedUndecided;
  // A sum over the list's first n in vocabulary order.
  const auto sum_by_id = [&](int32_t n) {
    int32_t order[kMaxListedDraw];
    for (int32_t i = 0; i < n; ++i) {  // insertion sort of the indices by id
      int32_t j = i;
      while (j > 0 && ids[order[j - 1]] > ids[i]) {
        order[j] = order[j - 1];
        --j;
      }
      order[j] = i;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += weights[order[i]];
    return sum;
  };
  // Top-k: a cut inside the list is summed best first; no cut sums every finite token. A cut past
  // a list that is not the whole row keeps the list and at most top_k − num more tokens, each
  // weighing at most the list's last: its total lies in [the list's sum, that sum + (top_k − num)
  // · the last weight], widened by 2^-30 either way for rounding (the host sums the set best
  // first, or in vocabulary order when top_k reaches past every finite token), and only cuts that
  // fall inside the list whatever the total in that range decide. Their masses are summed best
  // first, as the host sums them but in that last case (where they differ by rounding only).
  int32_t known = num;  // the running set's best-first prefix that is listed
  bool whole = complete;
  bool sorted_set = false;
  bool exact_total = true;
  double total = 0.0;       // the set's total, or with !exact_total <= it
  double total_high = 0.0;  // >= the set's total; equal to `total` when exact_total
  if (params.top_k > 0 && params.top_k < num) {
    known = params.top_k;
    whole = true;
    sorted_set = true;
    for (int32_t i = 0; i < known; ++i) total += weights[i];
    total_high = total;
  } else if (params.top_k > 0 && !complete) {
    sorted_set = true;
    exact_total = false;
    double listed = 0.0;
    for (int32_t i = 0; i < num; ++i) listed += weights[i];
    const double rest = static_cast<double>(params.top_k - num) * weights[num - 1];
    total = listed * (1.0 - 0x1p-30);
    total_high = (listed + rest) * (1.0 + 0x1p-30);
  } else {
    total = complete ? sum_by_id(num) : row_total;
    total_high = total;
  }
  bool exact_mass = exact_total;  // kept_mass is the host's
  double kept_mass = total;
  // Min-p keeps a best-first prefix (the best weight is 1; weights fall with the logit).
  if (params.min_p > 0.0f) {
    const double floor = static_cast<double>(params.min_p);
    int32_t kept = 0;
    while (kept < known && weights[kept] >= floor) ++kept;
    if (kept == known && !whole) return kListedUndecided;  // the prefix may go past the list
    known = kept;
    whole = true;
    exact_mass = true;
    if (sorted_set) {
      kept_mass = 0.0;
      for (int32_t i = 0; i < known; ++i) kept_mass += weights[i];
    } else {
      kept_mass = sum_by_id(known);
    }
  }
  // Top-p: the shortest best-first prefix reaching top_p of the total. With the total only
  // bounded, a prefix decides where it reaches top_p of the bound's top and every shorter one
  // falls short of top_p of its bottom.
  int32_t keep = whole ? known : kMaxListedDraw + 1;  // past the list: not yet known
  if (params.top_p < 1.0f) {
    const double target = static_cast<double>(params.top_p) * total;
    const double target_high = static_cast<double>(params.top_p) * total_high;
    double mass = 0.0;
    int32_t i = 0;
    for (; i < known; ++i) {
      mass += weights[i];
      if (mass >= target_high) break;
      if (mass >= target) return kListedUndecided;  // reached for some totals in the range only
    }
    if (i == known && !whole) return kListedUndecided;  // not reached within the list
    keep = i == known ? known : i + 1;
    kept_mass = mass;
    exact_mass = true;
  }
  if (!exact_mass) return kListedUndecided;  // the set runs past the list: its mass is unknown
  if (keep == 0) return kListedUndecided;    // min-p above 1 keeps nothing: the row's business
  const double u = uniform * kept_mass;
  double mass = 0.0;
  const int32_t walk = keep < known ? keep : known;
  for (int32_t i = 0; i < walk; ++i) {
    mass += weights[i];
    if (u < mass) return ids[i];
  }
  if (walk < keep) return kListedUndecided;  // the draw goes past the list
  return ids[keep - 1];                      // u rounded up to the whole mass
}

}  // namespace cellm
