// BatchInput and BatchOutput: what the scheduler hands an executor for one step, and what
// comes back. Plain data across the Executor seam (DESIGN §5).
//
// An input runs a slice of a session's pending tokens: payload[i] sits at position start_pos + i,
// and this step runs payload[begin, end). The Runner keeps a session's pending tokens (a prompt
// delta, or the one sampled token fed back) in one payload and lets the scheduler run it slice by
// slice across steps; an input starting below the session's length rewinds it. An input that
// wants an output keeps the logits row of its last token (payload[end - 1]); the session's
// sampler turns it into a token after the step, and that token stays pending until it is fed back
// as the next input. No tensors here. Thread-safety: plain values; `tokens` is a view the caller
// keeps alive until execute() returns, and `logits` a view into the executor's own memory, valid
// until the next execute() on that executor (read, copy or sample it before calling again).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/listed_draw.h"
#include "core/score_rewrite.h"
#include "core/token_id.h"

namespace cellm {

// A session of the engine. Ids are never reused; 0 is never a valid id.
using SessionId = uint64_t;

// The most top tokens a row's log-probabilities may ask for (StepInput::num_top_logprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;

// The best tokens of a row an executor lists for sampling (StepInput::candidates_temperature):
// enough that a top-k up to 63 — llama.cpp's and Ollama's default of 40 among them — always
// decides from the list (Sampler::candidates_always_decide).
inline constexpr int32_t kSamplingCandidates = 64;
static_assert(kSamplingCandidates <= kMaxListedDraw, "core/listed_draw.h draws from every list");

// What drawing a token from a row's candidates needs beyond the temperature: the session's
// sampler's cuts and seed, and the position the token will take (StepInput::candidates_draw).
struct CandidatesDraw {
  bool enabled = false;
  ListedDrawParams cuts;
  uint64_t seed = 0;
  int64_t position = 0;  // the drawn token's position: the session's context size
  friend bool operator==(const CandidatesDraw&, const CandidatesDraw&) = default;
};

// What a session's sampler does to its row before drawing — its logit bias and penalties
// (Sampler::rewrite_for) — for an executor that rewrites rows on its side
// (Executor::rewrites_rows()): each listed token's score is core/score_rewrite.h's rewrite_score
// of its logit. The spans are views the caller keeps alive until execute() returns.
struct RowRewrite {
  bool enabled = false;
  std::span<const TokenRewrite> tokens;  // distinct tokens, ascending
  std::span<const float> biases;         // TokenRewrite::first_bias indexes here
  PenaltyParams penalties;
};

struct StepInput {
  SessionId session = 0;
  int32_t start_pos = 0;            // position of tokens[0] in the session; >= 0
  std::span<const int32_t> tokens;  // [payload] token ids, each in [0, vocab)
  int32_t begin = 0;                // this step runs tokens[begin, end): 0 <= begin < end
  int32_t end = 0;                  //   <= tokens.size(), at positions start_pos + [begin, end)
  bool wants_output = false;        // keep the logits row of tokens[end - 1]
  // With wants_output, an executor that computes_logprobs() summarizes the kept row for
  // log-probabilities (OutputRow::logprobs) when this is >= 0: its log-softmax normalizer and its
  // `num_top_logprobs` best tokens (at most kMaxTopLogprobs). -1: no summary.
  int32_t num_top_logprobs = -1;
  // A token whose logit the summary reports too (RowLogprobs::scored_logit; a prompt's next token
  // for prompt log-probabilities); kNoToken: none.
  int32_t scored_token = kNoToken;
  // With wants_output, an executor that computes_candidates() lists the kept row's best tokens
  // and its softmax normalizer at this temperature (OutputRow::candidates) when it is > 0, so
  // that a sampler may draw without reading the row (Sampler::sample_from_candidates). 0: none.
  float candidates_temperature = 0.0f;
  // With candidates listed and this enabled, an executor may also draw the token from the list
  // as the session's sampler would (core/listed_draw.h; RowCandidates::drawn): the CUDA executor
  // does, and starts a batch-1 session's next step with it before the host has sampled. The
  // sampler's draw is still the token; a step run ahead on another one is given back.
  CandidatesDraw candidates_draw = {};
  // With candidates listed, the row is rewritten first when this is enabled (an executor that
  // rewrites_rows()): the candidates, their total and the draw are of the rewritten scores, and
  // the row as returned or fetched afterwards may hold them too. Log-probability summaries and
  // OutputRow::greedy_token stay of the raw row.
  RowRewrite rewrite = {};
};

struct BatchInput {
  // Inputs run in this order on one packed token axis. Several inputs of one session must follow
  // each other without gap or overlap; the first of a session may start below its length (a
  // rewind) but not above it.
  std::vector<StepInput> inputs;
  // Asked without return_logits of an executor that fetches_logits(): keep the kept rows until
  // the next execute() for fetch_logits() (the rows the caller may read after the step).
  bool keep_logits = false;
};

// What log-probabilities need of one logits row, computed by the executor beside the row
// (StepInput::num_top_logprobs) so that the row itself need not travel: log p(v) = v - max_logit
// - log_sum_exp for a finite logit v. Plain values.
struct RowLogprobs {
  float max_logit = -std::numeric_limits<float>::infinity();  // -infinity: no finite logit
  double log_sum_exp = 0.0;  // log of the sum of exp(v - max_logit) over the finite logits v
  // The logit of StepInput::scored_token; NaN when it named none.
  float scored_logit = std::numeric_limits<float>::quiet_NaN();
  // The num_top_logprobs best finite logits as (token, logit), best first, the lower id first on
  // ties; fewer when fewer are finite.
  std::vector<std::pair<int32_t, float>> top;
  // The token the executor drew from `top` (StepInput::candidates_draw), the one the sampler's
  // sample_from_candidates picks up to the rounding of exp; kNoToken when it drew none or the
  // list does not decide the token.
  int32_t drawn = kNoToken;
};

// What sampling at one temperature T needs of a logits row when the draw stays among its best
// tokens (StepInput::candidates_temperature): the row's kSamplingCandidates best finite logits
// and the normalizer over all of them. Plain values; sampling_candidates (sampler.h) is the
// host's definition.
struct RowCandidates {
  float max_logit = -std::numeric_limits<float>::infinity();  // -infinity: no finite logit
  float temperature = 0.0f;                                   // the T asked for
  // Σ exp(v / T − max_logit / T) over the finite logits v, each term in double. NaN where the
  // executor left it out: when the draw's cuts (StepInput::candidates_draw) hold a top-k, which
  // the sampler's draw never reads it with.
  double total = 0.0;
  // The best min(kSamplingCandidates, finite logits) as (token, logit), best first, the lower id
  // first on ties: every finite logit of the row when it holds fewer than kSamplingCandidates.
  std::vector<std::pair<int32_t, float>> top;
  // The token the executor drew from `top` (StepInput::candidates_draw), the one the sampler's
  // sample_from_candidates picks up to the rounding of exp; kNoToken when it drew none or the
  // list does not decide the token — unless drawn_from_row.
  int32_t drawn = kNoToken;
  // True when the list did not decide and an executor that draws_rows() drew `drawn` from the
  // whole row instead: the token the sampler's sample() picks from the row, up to the rounding of
  // exp and of the sums (kernels/row_draw.cuh); drawn_logit is its logit.
  bool drawn_from_row = false;
  float drawn_logit = std::numeric_limits<float>::quiet_NaN();
};

struct OutputRow {
  SessionId session = 0;
  int32_t input_index = 0;   // the BatchInput input that asked for it
  int32_t row = 0;           // its row in BatchOutput::logits (= index of this OutputRow)
  int32_t token = kNoToken;  // the sampled token once the session's sampler ran; pending until
                             // fed back as the session's next input
  // The row's greedy token when the executor computed it (the CUDA executor's device argmax):
  // the lowest id of the largest finite logit. kNoToken when it did not, or when no logit of the
  // row is finite. It is what a greedy Sampler without bias or penalties picks from the row, so
  // the Runner takes it instead of reading the row.
  int32_t greedy_token = kNoToken;
  // The row's log-probability summary, when its input asked for one and the executor computes
  // them (Executor::computes_logprobs()).
  std::optional<RowLogprobs> logprobs;
  // The row's sampling candidates, when its input asked for them and the executor computes them
  // (Executor::computes_candidates()).
  std::optional<RowCandidates> candidates;
};

struct BatchOutput {
  // One per input with wants_output, in input order.
  std::vector<OutputRow> outputs;
  int32_t vocab_size = 0;  // width of a logits row; 0 when no logits are returned
  // [outputs.size(), vocab_size], f32: a view into memory the executor owns (the CPU executor's
  // buffer, the CUDA executor's pinned host buffer that the device copies into), so no step pays
  // for a copy of every row. Valid until the next execute() on the same executor, whatever it
  // returns; empty when the executor returns no logits. Copy the rows you keep across steps.
  std::span<const float> logits;
};

}  // namespace cellm
