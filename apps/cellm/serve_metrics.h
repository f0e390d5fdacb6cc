// What `cellm serve` reports at GET /metrics (Prometheus' text format, what scrapers read) and
// GET /metrics.json: the server's request counters and the engine's EngineMetrics.
//
// Pure functions of plain structs; names are `cellm_*`, counters end in `_total`, latencies are
// summaries in seconds (quantiles 0.5, 0.9, 0.99, with _sum and _count). Who calls it:
// serve_http.cpp. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "batching/metrics.h"

namespace cellm::app {

struct ServerCounters {
  int64_t requests = 0;           // generation requests received
  int64_t rejected_requests = 0;  // answered with an error status
  int32_t running_generations = 0;
  int32_t queued_requests = 0;  // waiting for a generation slot
  int32_t max_concurrent_generations = 0;
};

std::string prometheus_metrics(const ServerCounters& server, const EngineMetrics& engine);
nlohmann::ordered_json metrics_json(const ServerCounters& server, const EngineMetrics& engine);

}  // namespace cellm::app
