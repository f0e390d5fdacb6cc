// The `cellm run` report (cmd_run_report.h).
#include "cmd_run_report.h"

#include <fmt/format.h>

namespace cellm::app {

nlohmann::ordered_json latency_json(const LatencySummary& s) {
  return {{"count", s.count},   {"mean_us", s.mean_us},  {"min_us", s.min_us},
          {"p50_us", s.p50_us}, {"p90_us", s.p90_us},    {"p99_us", s.p99_us},
          {"max_us", s.max_us}, {"total_us", s.total_us}};
}

nlohmann::ordered_json generation_metrics_json(const GenerationMetrics& m) {
  return {{"submit_us", m.submit_us},
          {"first_step_us", m.first_step_us},
          {"first_token_us", m.first_token_us},
          {"end_us", m.end_us},
          {"ttft_us", m.ttft_us()},
          {"prompt_tokens", m.num_prompt_tokens},
          {"prefilled_tokens", m.num_prefilled_tokens},
          {"generated_tokens", m.num_generated_tokens},
          {"steps", m.num_steps},
          {"preemptions", m.num_preemptions},
          {"reused_tokens", m.num_reused_tokens},
          {"inter_token", latency_json(m.inter_token)}};
}

nlohmann::ordered_json engine_metrics_json(const EngineMetrics& m) {
  nlohmann::ordered_json finished;
  for (const FinishReason reason : kFinishReasons) {
    finished[std::string(finish_reason_name(reason))] = m.finished(reason);
  }
  return {{"elapsed_us", m.elapsed_us},
          {"steps", m.num_steps},
          {"failed_steps", m.num_failed_steps},
          {"decode_tokens", m.num_decode_tokens},
          {"prompt_tokens", m.num_prompt_tokens},
          {"recomputed_tokens", m.num_recomputed_tokens},
          {"generated_tokens", m.num_generated_tokens},
          {"decode_tokens_per_s", m.decode_tokens_per_s},
          {"generated_tokens_per_s", m.generated_tokens_per_s},
          {"ttft", latency_json(m.ttft)},
          {"inter_token", latency_json(m.inter_token)},
          {"decode_steps", latency_json(m.decode_steps)},
          {"prompt_steps", latency_json(m.prompt_steps)},
          {"mixed_steps", latency_json(m.mixed_steps)},
          {"pool",
           {{"max_cells", m.pool_max_cells},
            {"used_cells", m.pool_used_cells},
            {"peak_used_cells", m.pool_peak_used_cells},
            {"high_water", m.pool_high_water},
            {"peak_high_water", m.pool_peak_high_water},
            {"growths", m.pool_num_growths}}},
          {"preemptions", m.num_preemptions},
          {"idle_evictions", m.num_idle_evictions},
          {"prefix_reuse",
           {{"hits", m.num_prefix_hits},
            {"waits", m.num_prefix_waits},
            {"reused_tokens", m.num_reused_tokens},
            {"retained_sessions", m.num_retained_prefixes}}},
          {"refusals", m.num_refusals},
          {"submitted", m.num_submitted},
          {"finished", finished}};
}

nlohmann::ordered_json run_report_json(const std::vector<GenerationRecord>& generations,
                                       const EngineMetrics& engine, nlohmann::ordered_json config) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const GenerationRecord& g : generations) {
    nlohmann::ordered_json entry;
    entry["prompt"] = g.prompt ? nlohmann::ordered_json(*g.prompt) : nlohmann::ordered_json();
    entry["prompt_tokens"] = g.prompt_tokens;
    entry["generated_tokens"] = g.generated_tokens;
    entry["text"] = g.text;
    entry["finish_reason"] = std::string(finish_reason_name(g.finish_reason));
    if (!g.error.empty()) entry["error"] = g.error;
    entry["metrics"] = generation_metrics_json(g.metrics);
    list.push_back(std::move(entry));
  }
  nlohmann::ordered_json report;
  report["generations"] = std::move(list);
  report["engine"] = engine_metrics_json(engine);
  report["config"] = std::move(config);
  return report;
}

std::string run_summary_text(const EngineMetrics& m, size_t num_prompts) {
  std::string out = fmt::format(
      "summary: {} prompts, {} tokens in {:.3f} s = {:.1f} tokens/s; TTFT p50 {:.2f} ms; ITL "
      "mean {:.2f} ms; {} steps; pool peak {} of {} cells; {} preemptions\n",
      num_prompts, m.num_generated_tokens, static_cast<double>(m.elapsed_us) / 1e6,
      m.generated_tokens_per_s, static_cast<double>(m.ttft.p50_us) / 1e3,
      m.inter_token.mean_us / 1e3, m.num_steps, m.pool_peak_used_cells, m.pool_max_cells,
      m.num_preemptions);
  return out + format_report(m);
}

}  // namespace cellm::app
