// The report of `cellm run`: what each generation produced and how the engine did, as JSON
// (--report-json) and as text for people.
//
// JSON top-level keys: `generations` (in prompt order: prompt, prompt_tokens, generated_tokens,
// text, finish_reason, error, metrics), `engine` (EngineMetrics, including `preemptions`) and
// `config` (the effective configuration, given by the caller). JSON lives here, under apps/,
// since batching hands out plain structs (DESIGN §1). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "batching/gen_config.h"
#include "batching/metrics.h"

namespace cellm::app {

struct GenerationRecord {
  std::optional<std::string> prompt;  // the text given; none for a token-file prompt
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> generated_tokens;
  std::string text;
  FinishReason finish_reason = FinishReason::kFailed;
  std::string error;
  GenerationMetrics metrics;
};

nlohmann::ordered_json latency_json(const LatencySummary& summary);
nlohmann::ordered_json generation_metrics_json(const GenerationMetrics& metrics);
nlohmann::ordered_json engine_metrics_json(const EngineMetrics& metrics);
nlohmann::ordered_json run_report_json(const std::vector<GenerationRecord>& generations,
                                       const EngineMetrics& engine, nlohmann::ordered_json config);

// One paragraph: tokens/s, TTFT, ITL, steps, pool use, preemptions (then format_report's lines).
std::string run_summary_text(const EngineMetrics& engine, size_t num_prompts);

}  // namespace cellm::app
