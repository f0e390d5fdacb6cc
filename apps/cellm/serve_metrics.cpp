// Prometheus text and JSON for `cellm serve`'s metrics (serve_metrics.h).
#include "serve_metrics.h"

#include <fmt/format.h>

#include <string_view>

#include "cmd_run_report.h"

namespace cellm::app {
namespace {

class Exposition {
 public:
  void metric(std::string_view name, std::string_view type, std::string_view help, double value) {
    header(name, type, help);
    out_ += fmt::format("{} {}\n", name, value);
  }
  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void line(std::string_view text) { (out_ += text) += "\n"; }
  // A latency summary in seconds.
  void summary(std::string_view name, std::string_view help, const LatencySummary& s) {
    header(name, "summary", help);
    out_ += fmt::format("{}{{quantile=\"0.5\"}} {}\n", name, s.p50_us * 1e-6);
    out_ += fmt::format("{}{{quantile=\"0.9\"}} {}\n", name, s.p90_us * 1e-6);
    out_ += fmt::format("{}{{quantile=\"0.99\"}} {}\n", name, s.p99_us * 1e-6);
    out_ += fmt::format("{}_sum {}\n{}_count {}\n", name, s.total_us * 1e-6, name, s.count);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string prometheus_metrics(const ServerCounters& server, const EngineMetrics& m) {
  Exposition e;
  e.metric("cellm_requests_total", "counter", "Generation requests received.", server.requests);
  e.metric("cellm_rejected_requests_total", "counter",
           "Generation requests answered with an error status.", server.rejected_requests);
  e.metric("cellm_running_generations", "gauge", "Generations holding a slot.",
           server.running_generations);
  e.metric("cellm_queued_requests", "gauge", "Requests waiting for a generation slot.",
           server.queued_requests);
  e.metric("cellm_max_concurrent_generations", "gauge", "Generation slots.",
           server.max_concurrent_generations);
  e.metric("cellm_steps_total", "counter", "Engine steps run.", m.num_steps);
  e.metric("cellm_failed_steps_total", "counter", "Engine steps the executor failed.",
           m.num_failed_steps);
  e.metric("cellm_prompt_tokens_total", "counter",
           "Positions run as prompt chunks (recomputation included).", m.num_prompt_tokens);
  e.metric("cellm_recomputed_tokens_total", "counter",
           "Prompt positions run again after a preemption.", m.num_recomputed_tokens);
  e.metric("cellm_generated_tokens_total", "counter", "Tokens delivered.", m.num_generated_tokens);
  e.metric("cellm_preemptions_total", "counter", "Generations whose cells were released.",
           m.num_preemptions);
  e.metric("cellm_prefix_hits_total", "counter",
           "Generations that started from another session's cells.", m.num_prefix_hits);
  e.metric("cellm_reused_tokens_total", "counter", "Positions prefix reuse did not compute.",
           m.num_reused_tokens);
  e.metric("cellm_refusals_total", "counter", "Generations refused at submit.", m.num_refusals);
  e.metric("cellm_pool_used_cells", "gauge", "KV cells in use after the latest step.",
           m.pool_used_cells);
  e.metric("cellm_pool_max_cells", "gauge", "KV cells the pool may hold.", m.pool_max_cells);
  e.header("cellm_finished_total", "counter", "Generations ended, by finish reason.");
  for (const FinishReason reason : kFinishReasons) {
    e.line(fmt::format("cellm_finished_total{{reason=\"{}\"}} {}", finish_reason_name(reason),
                       m.finished(reason)));
  }
  e.summary("cellm_time_to_first_token_seconds", "Submit to first token, per generation.", m.ttft);
  e.summary("cellm_inter_token_latency_seconds", "Between consecutive tokens of a generation.",
            m.inter_token);
  e.summary("cellm_decode_step_seconds", "Wall time of steps that ran only decodes.",
            m.decode_steps);
  return e.take();
}

nlohmann::ordered_json metrics_json(const ServerCounters& server, const EngineMetrics& engine) {
  return {{"server",
           {{"requests", server.requests},
            {"rejected_requests", server.rejected_requests},
            {"running_generations", server.running_generations},
            {"queued_requests", server.queued_requests},
            {"max_concurrent_generations", server.max_concurrent_generations}}},
          {"engine", engine_metrics_json(engine)}};
}

}  // namespace cellm::app
