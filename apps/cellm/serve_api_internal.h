// Parts of the request parsing of serve_api.cpp kept in files of their own: the output
// constraints (serve_api_output.cpp). Internal to serve_api's files; everyone else calls
// serve_api.h. Thread-safety: functions over their arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "batching/gen_config.h"
#include "core/status.h"

namespace cellm::app::internal {

// An invalid_argument naming the request field: "\"field\" what".
Status field_error(std::string_view field, std::string_view what);

// response_format (json_object, json_schema) and vLLM's guided_json, guided_regex and
// guided_choice, into config's json_object / json_schema / text_pattern; at most one of them.
Status parse_output_constraints(const nlohmann::json& body, GenConfig& config);

}  // namespace cellm::app::internal
