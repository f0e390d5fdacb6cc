// Sampler: turns one logits row into one token for one session, on the host (DESIGN §7).
//
// The chain, in order: logit bias; repetition, presence and frequency penalties over the last
// `penalty_window` tokens of the session's context; then greedy argmax (temperature <= 0, lowest
// id on ties) or: divide by the temperature, keep the top-k, softmax, keep the top-p nucleus,
// drop tokens below min_p times the top probability, renormalize and draw. The one random draw
// is sampling_uniform(seed, position) — a counter-based hash of the seed and the position the
// token will take — so a request samples the same tokens whatever it is batched with, preempted
// or not.
//
// Cost per row, for vocabularies of 128K and 256 rows a step: greedy without bias or penalties
// reads the row once in place (no copy; or not at all when the executor already computed the
// argmax: takes_argmax()); bias and penalties copy the row once. Sampling never sorts the whole
// vocabulary: top-k selects k tokens, and the nucleus and the draw sort only the prefix of
// candidates (best first) they reach, extended by partial selection as needed.
//
// A row an executor lists as candidates (batch.h's RowCandidates: its best kSamplingCandidates
// tokens and the normalizer at the sampler's temperature) is sampled from them when the chain's
// outcome lies among them — top-k within the list, a nucleus or min-p cut inside it, or a draw
// that lands there — with the same arithmetic in the same order, so the token is the one
// sample() picks from the whole row. (With no top-k, the normalizer is the executor's sum: the
// CUDA executor's differs from the host's by rounding only, so the two agree unless the draw
// falls within that rounding of a boundary. With a top-k past the list, the nucleus is decided
// only where it falls inside the list for every total the unlisted tokens allow.) Otherwise
// sample_from_candidates says so and the caller samples the row (core/listed_draw.h) — or takes
// the draw an executor that draws_rows() made from it (RowCandidates::drawn_from_row). With bias
// or penalties the list must be of the rewritten row: rewrite_for says what sample() rewrites
// (core/score_rewrite.h's arithmetic), for an executor that rewrites_rows() to apply first.
// Knows no sessions, tensors or threads. Who calls it: the Runner, once per output row.
// Thread-safety: a Sampler is used by one thread at a time (it keeps scratch buffers);
// sampling_uniform, argmax_finite and max_finite are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "batching/batch.h"
#include "batching/gen_config.h"
#include "core/status.h"
#include "core/token_id.h"

namespace cellm {

// A uniform double in [0, 1) that depends only on (seed, position): splitmix64 of both.
double sampling_uniform(uint64_t seed, int64_t position);

// The index of the largest finite value of `row`, the lowest on ties; kNoToken when no value is
// finite.
int32_t argmax_finite(std::span<const float> row);

// The largest finite value of `row`; -infinity when none is finite.
float max_finite(std::span<const float> row);

// The sampling chain's cuts of `params` as core/listed_draw.h takes them.
ListedDrawParams listed_draw_params(const SamplingParams& params);

// The host's definition of a row's sampling candidates at `temperature` (> 0): what an executor
// that computes_candidates() returns, the normalizer summed in vocabulary order as sample() sums
// it.
RowCandidates sampling_candidates(std::span<const float> row, float temperature);

// A sampler's rewrite of a row for one context (Sampler::rewrite_for): the storage behind a
// RowRewrite (batch.h).
struct SamplerRewrite {
  std::vector<TokenRewrite> tokens;  // distinct tokens, ascending
  std::vector<float> biases;         // per token, in the params' order
  PenaltyParams penalties;
  RowRewrite view() const { return {true, tokens, biases, penalties}; }
};

// Applies `rewrite` to `row` in place (core/score_rewrite.h's rewrite_score per listed token): what
// sample() does to its copy of the row, and an executor's host-side stand-in for its device
// rewrite. Context tokens past the row are skipped; a biased one is a CELLM_CHECK failure (the
// Runner checks bias tokens at submit).
void apply_rewrite(const RowRewrite& rewrite, std::span<float> row);

class Sampler {
 public:
  // params must pass validate_gen_config; its token ids must lie in the vocabulary (the Runner
  // checks both at submit; a bad id here is a CELLM_CHECK failure). A `masked` sampler is told at
  // every sample() which tokens it may pick (a constrained output: GenConfig::json_object,
  // json_schema).
  Sampler(const SamplingParams& params, uint64_t seed, bool masked = false);

  // The token for position context.size(), from `logits` ([vocab] f32, raw) given the session's
  // context before it; a masked sampler's `allowed` ([vocab], nonzero: may be picked) bans the
  // others before the chain, as a bias of -infinity would. FailedPrecondition when no token has
  // a finite score (NaN logits, or the bias or the mask banned every token).
  StatusOr<int32_t> sample(std::span<const float> logits, std::span<const int32_t> context,
                           std::span<const uint8_t> allowed = {});

  // True when sample() returns the raw row's argmax_finite (greedy, no bias, no penalties, no
  // mask): a caller that already holds the argmax (OutputRow::greedy_token) may use it instead.
  bool takes_argmax() const { return takes_argmax_; }

  // True when sample_from_candidates may stand in for sample(): sampling at a temperature, no
  // bias, no penalties (they rewrite the row), no mask (the list may hold no allowed token).
  bool takes_candidates() const {
    return params_.temperature > 0.0f && !rewrites_scores_ && !masked_;
  }

  // True when every sample() takes a mask of the allowed tokens (no executor shortcut stands in).
  bool masked() const { return masked_; }

  // True when bias or penalties rewrite the row before the chain (rewrite_for says how).
  bool rewrites_scores() const { return rewrites_scores_; }

  // What sample() does to the row for the token after `context` before its chain: every token
  // the bias names or the penalty window holds, with its biases and count (core/score_rewrite.h).
  // An executor that rewrites_rows() applies it on its side, so that candidates listed from the
  // rewritten row stand in for sample() (sample_from_candidates) with bias and penalties too.
  SamplerRewrite rewrite_for(std::span<const int32_t> context) const;
  // The same into `out`, reusing its storage and this sampler's scratch (the engine's per-step
  // path: no allocation once the buffers have grown).
  void rewrite_into(std::span<const int32_t> context, SamplerRewrite& out);

  // True when the candidates always decide (a top-k cut inside the list): unless the row has no
  // finite logit, sample_from_candidates never leaves the draw to the row, so the row need not
  // travel to the host.
  bool candidates_always_decide() const {
    return takes_candidates() && params_.top_k > 0 && params_.top_k < kSamplingCandidates;
  }

  // The token sample() picks for `position` (the context's size) from the row `candidates`
  // lists (at this sampler's temperature), or nullopt when the list does not decide it (the
  // caller then samples the row). Needs a temperature > 0; with bias or penalties the list must
  // be of the row rewritten by rewrite_for (StepInput::rewrite).
  std::optional<int32_t> sample_from_candidates(const RowCandidates& candidates,
                                                int64_t position) const;

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }

 private:
  // rewrite_for into `out`, reusing its storage; `window` is scratch.
  void build_rewrite(std::span<const int32_t> context, std::vector<int32_t>& window,
                     SamplerRewrite& out) const;
  // Sorts candidates_ best first far enough that [0, n) holds the n best, in order.
  void sort_prefix(size_t n);
  // exp(score / temperature - top): the unnormalized probability of `token`.
  double weight(int32_t token) const;

  SamplingParams params_;
  uint64_t seed_ = 0;
  bool takes_argmax_ = false;
  bool rewrites_scores_ = false;  // bias or penalties: scores_ differs from the row
  bool masked_ = false;
  // The row being sampled: the raw logits, or scores_ when rewritten. Valid inside sample().
  std::span<const float> row_;
  double inv_temperature_ = 1.0;
  double top_ = 0.0;                 // the best score / temperature
  std::vector<float> scores_;        // [vocab] biased, penalized, masked logits
  std::vector<int32_t> candidates_;  // [<= vocab] token ids still in the running
  size_t num_sorted_ = 0;            // candidates_[0, num_sorted_) are sorted best first
  std::vector<int32_t> heap_;        // sort_prefix's selection of the next best candidates
  // The biases as (token, bias), by token, each token's in the params' order (rewrite_for's).
  std::vector<std::pair<int32_t, float>> biases_by_token_;
  SamplerRewrite rewrite_;       // sample()'s rewrite of the row
  std::vector<int32_t> window_;  // [<= penalty_window] the penalized tokens, sorted (scratch)
};

}  // namespace cellm
