// Parts of the request parsing of serve_api.cpp kept in files of their own: the chat messages
// (serve_api_messages.cpp), the output constraints (serve_api_output.cpp), vLLM's sampling extras
// (serve_api_vllm.cpp), and the field readers they share. Internal to serve_api's files; everyone
// else calls serve_api.h. Thread-safety: functions over their arguments.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "batching/gen_config.h"
#include "core/status.h"
#include "serve_api.h"

namespace cellm::app::internal {

// The deepest a JSON text that a request carries (its body, a call's arguments) or a model writes
// (a tool call) may nest arrays and objects: JSON is written and compiled recursively, so deeper
// texts are refused before they are parsed.
inline constexpr size_t kMaxJsonDepth = 128;

// An invalid_argument naming the request field: "\"field\" what".
Status field_error(std::string_view field, std::string_view what);
// A JSON number that is a whole number fitting int64 (5 and 5.0 both are).
std::optional<int64_t> as_integer(const nlohmann::json& value);
// A field's value as a whole number in [min_value, max_value] (5.0 is 5), a finite number, a
// boolean, a string; field_error otherwise.
StatusOr<int32_t> get_int32(const nlohmann::json& value, std::string_view field, int64_t min_value,
                            int64_t max_value = std::numeric_limits<int32_t>::max());
StatusOr<float> get_float(const nlohmann::json& value, std::string_view field);
StatusOr<bool> get_bool(const nlohmann::json& value, std::string_view field);
StatusOr<std::string> get_string(const nlohmann::json& value, std::string_view field);

// "messages" into request.messages: each a role (system, developer as system, user, assistant,
// tool) and a text content (a string or text parts); an assistant's tool_calls (arguments
// rewritten as the templates show them) and reasoning_content; a tool message's tool_call_id.
Status parse_messages(const nlohmann::json& messages, ServeRequest& request);
// vLLM's chat prompt options into request.chat_prompt (after parse_messages): add_generation_prompt
// and continue_final_message (the final message an assistant's, no generation prompt), and
// "chat_template_kwargs" (template variables): enable_thinking and tools_in_user_message,
// booleans, and date_string, a text of at most 64 bytes; any other variable refused by name, and
// any option but the defaults in a completions request.
Status parse_chat_prompt_options(const nlohmann::json& body, ServeRequest& request);

// vLLM's sampling extras: min_tokens (GenConfig::min_new_tokens) and stop_token_ids; the ones
// cellm does not honour refused where they ask for anything but their default.
Status parse_vllm_extras(const nlohmann::json& body, GenConfig& config);

// response_format (json_object, json_schema) and vLLM's guided_json, guided_regex and
// guided_choice, into config's json_object / json_schema / text_pattern; at most one of them.
Status parse_output_constraints(const nlohmann::json& body, GenConfig& config);

}  // namespace cellm::app::internal
