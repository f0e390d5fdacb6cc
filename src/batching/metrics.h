// Metrics of the runtime (DESIGN §7): per generation (times, token counts, steps, inter-token
// latency) and per engine (steps, tokens by kind, step latency by kind, decode tokens/s, TTFT,
// pool use and growth, preemptions, refusals), with format_report for people.
//
// Plain data plus LatencyStats, a bounded log-bucket histogram (16 buckets per octave, so
// percentiles are within ~5%; count, mean, min and max are exact). Times are microseconds on the
// Runner's steady clock, counted from its start. No JSON here (DESIGN: JSON lives under apps/;
// `cellm run --report-json` serializes these structs). Who fills them: the Runner, on the engine
// thread; readers get copies. Thread-safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "batching/gen_config.h"

namespace cellm {

struct LatencySummary {
  int64_t count = 0;
  double mean_us = 0.0;
  int64_t min_us = 0;
  int64_t p50_us = 0;
  int64_t p90_us = 0;
  int64_t p99_us = 0;
  int64_t max_us = 0;
  int64_t total_us = 0;
};

class LatencyStats {
 public:
  void add(int64_t us);  // negative values count as 0
  int64_t count() const { return count_; }
  LatencySummary summary() const;

 private:
  int64_t count_ = 0;
  int64_t total_us_ = 0;
  int64_t min_us_ = 0;
  int64_t max_us_ = 0;
  std::vector<int64_t> buckets_;  // [grown on demand] samples per log bucket
};

struct GenerationMetrics {
  int64_t submit_us = -1;            // generate_async was called
  int64_t first_step_us = -1;        // a step first ran one of its positions; -1 = never
  int64_t first_token_us = -1;       // its first token was delivered; -1 = none
  int64_t end_us = -1;               // its finish reason was delivered
  int32_t num_prompt_tokens = 0;     // the prompt delta it was given
  int32_t num_prefilled_tokens = 0;  // positions run for it as prompt chunks (recompute included)
  int32_t num_generated_tokens = 0;  // tokens delivered
  int32_t num_steps = 0;             // steps that ran one of its positions
  int32_t num_preemptions = 0;       // times its cells were released and recomputed
  int32_t num_reused_tokens = 0;     // context positions taken from another session's cells
  LatencySummary inter_token;        // between consecutive delivered tokens

  int64_t ttft_us() const { return first_token_us < 0 ? -1 : first_token_us - submit_us; }
};

struct EngineMetrics {
  int64_t elapsed_us = 0;  // first submit to the latest finish (0 before any)
  int64_t num_steps = 0;
  int64_t num_failed_steps = 0;       // execute() returned an error
  int64_t num_decode_tokens = 0;      // positions run as decodes (one fed-back token each)
  int64_t num_prompt_tokens = 0;      // positions run as prompt chunks (recompute included)
  int64_t num_recomputed_tokens = 0;  // of those, positions run again after a preemption
  int64_t num_generated_tokens = 0;   // tokens delivered
  // Step wall time by kind: only decodes, only prompt chunks, both.
  LatencySummary decode_steps;
  LatencySummary prompt_steps;
  LatencySummary mixed_steps;
  LatencySummary ttft;                  // submit to first token, per generation
  LatencySummary inter_token;           // between consecutive tokens of a generation
  double decode_tokens_per_s = 0.0;     // delivered tokens / time in steps that ran decodes
  double generated_tokens_per_s = 0.0;  // delivered tokens / elapsed_us
  int32_t pool_max_cells = 0;
  int32_t pool_used_cells = 0;       // after the latest step
  int32_t pool_peak_used_cells = 0;  // most cells in use after any step
  int32_t pool_high_water = 0;       // storage rows needed now
  int32_t pool_peak_high_water = 0;
  int32_t pool_num_growths = 0;  // steps after which the high water rose
  int64_t num_preemptions = 0;
  int64_t num_idle_evictions = 0;     // idle sessions and retained prefixes released for others
  int64_t num_prefix_hits = 0;        // generations that started from another session's cells
  int64_t num_reused_tokens = 0;      // positions those generations did not compute
  int64_t num_prefix_waits = 0;       // generations that waited for another to compute theirs
  int32_t num_retained_prefixes = 0;  // closed sessions kept for their prefixes, now
  int64_t num_refusals = 0;           // generations refused at submit
  int64_t num_submitted = 0;
  // Generations ended, by FinishReason (index = the enum's value).
  std::array<int64_t, kFinishReasons.size()> num_finished = {};

  int64_t finished(FinishReason reason) const { return num_finished[static_cast<size_t>(reason)]; }
};

// A few lines for people: tokens/s, TTFT, ITL, steps by kind, pool use, preemptions, refusals.
std::string format_report(const EngineMetrics& metrics);

}  // namespace cellm
