// vLLM's sampling extras in a request body (serve_api_internal.h): min_tokens and stop_token_ids
// into the GenConfig; the others cellm cannot honour refused by name where they ask for anything
// but vLLM's default, never ignored.
#include <fmt/format.h>

#include <string>

#include "serve_api_internal.h"

namespace cellm::app::internal {
namespace {

using Json = nlohmann::json;

// The most stop token ids a request may carry.
constexpr size_t kMaxStopTokenIds = 256;

// vLLM's extras cellm does not do: refused unless absent, null or at vLLM's default.
Status refuse_unsupported_extras(const Json& body) {
  const auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  struct Default {
    const char* key;
    Json value;  // vLLM's default; null: any value asks for something
  };
  const Default defaults[] = {
      {"use_beam_search", false},
      {"length_penalty", 1.0},
      {"include_stop_str_in_output", false},
      {"skip_special_tokens", true},
      {"spaces_between_special_tokens", true},
      {"truncate_prompt_tokens", nullptr},
      {"allowed_token_ids", nullptr},
      {"bad_words", Json::array()},
      {"prompt_logprobs", nullptr},
      {"logits_processors", nullptr},
      {"return_tokens_as_token_ids", false},
      {"chat_template", nullptr},
      {"documents", nullptr},
  };
  for (const Default& d : defaults) {
    if (!given(d.key)) continue;
    const Json& value = body[d.key];
    const bool at_default = !d.value.is_null() && value == d.value;
    if (!at_default) {
      return field_error(d.key, d.value.is_null()
                                    ? "is not supported"
                                    : fmt::format("is not supported (only {})", d.value.dump()));
    }
  }
  return ok_status();
}

}  // namespace

Status parse_vllm_extras(const Json& body, GenConfig& config) {
  CELLM_RETURN_IF_ERROR(refuse_unsupported_extras(body));
  if (body.contains("stop_token_ids") && !body["stop_token_ids"].is_null()) {
    const Json& ids = body["stop_token_ids"];
    if (!ids.is_array()) return field_error("stop_token_ids", "must be a list of token ids");
    if (ids.size() > kMaxStopTokenIds) {
      return field_error("stop_token_ids",
                         fmt::format("holds {} ids; at most {}", ids.size(), kMaxStopTokenIds));
    }
    for (const Json& id : ids) {
      CELLM_ASSIGN_OR_RETURN(const int32_t token, get_int32(id, "stop_token_ids", 0));
      config.stop_tokens.push_back(token);
    }
  }
  if (body.contains("min_tokens") && !body["min_tokens"].is_null()) {
    CELLM_ASSIGN_OR_RETURN(config.min_new_tokens, get_int32(body["min_tokens"], "min_tokens", 0));
    if (config.min_new_tokens > 0 && config.constrained()) {
      return field_error("min_tokens",
                         "is not supported beside response_format or guided_* (the format "
                         "decides where the output ends)");
    }
  }
  return ok_status();
}

}  // namespace cellm::app::internal
