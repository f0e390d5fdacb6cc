// The OpenAI-compatible responses: bodies, server-sent events and errors (serve_api.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "serve_api.h"

namespace cellm::app {
namespace {

bool is_chat(const ServeRequest& request) {
  return request.endpoint == ServeEndpoint::kChatCompletions;
}

nlohmann::ordered_json usage_json(const ServeResult& result) {
  size_t prompt = 0, completion = 0;
  for (const std::vector<int32_t>& tokens : result.prompt_tokens) prompt += tokens.size();
  for (const ServeChoice& choice : result.choices) completion += choice.tokens.size();
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

// The prompt token ids of choice `index`.
const std::vector<int32_t>& prompt_of(const ServeRequest& request, const ServeResult& result,
                                      size_t index) {
  static const std::vector<int32_t> kNone;
  const size_t prompt = index / static_cast<size_t>(std::max(request.n, 1));
  return prompt < result.prompt_tokens.size() ? result.prompt_tokens[prompt] : kNone;
}

nlohmann::ordered_json header_json(const ServeRequest& request, const ServeResult& result,
                                   bool chunk) {
  const char* object =
      is_chat(request) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", result.id},
          {"object", object},
          {"created", result.created_s},
          {"model", result.model}};
}

}  // namespace

std::string_view openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken:
    case FinishReason::kStopString:
      return "stop";
    case FinishReason::kNewTokenLimit:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kFailed:
      break;
  }
  return "error";
}

nlohmann::ordered_json completion_response_json(const ServeRequest& request,
                                                const ServeResult& result) {
  nlohmann::ordered_json response = header_json(request, result, /*chunk=*/false);
  nlohmann::ordered_json choices = nlohmann::ordered_json::array();
  for (size_t k = 0; k < result.choices.size(); ++k) {
    const ServeChoice& c = result.choices[k];
    nlohmann::ordered_json choice = {{"index", k}};
    if (is_chat(request)) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    choice["finish_reason"] = openai_finish_reason(c.finish_reason);
    if (request.return_token_ids) {
      choice["token_ids"] = c.tokens;
      if (!is_chat(request)) choice["prompt_token_ids"] = prompt_of(request, result, k);
    }
    choices.push_back(std::move(choice));
  }
  response["choices"] = std::move(choices);
  response["usage"] = usage_json(result);
  if (request.return_token_ids && is_chat(request)) {
    response["prompt_token_ids"] = prompt_of(request, result, 0);
  }
  return response;
}

nlohmann::ordered_json completion_chunk_json(const ServeRequest& request, const ServeResult& result,
                                             size_t index, std::string_view text_delta,
                                             const std::vector<int32_t>& token_delta, bool first,
                                             std::optional<FinishReason> finish_reason) {
  nlohmann::ordered_json chunk = header_json(request, result, /*chunk=*/true);
  nlohmann::ordered_json choice = {{"index", index}};
  if (is_chat(request)) {
    nlohmann::ordered_json delta = nlohmann::ordered_json::object();
    if (first) delta["role"] = "assistant";
    if (!text_delta.empty() || !finish_reason) delta["content"] = text_delta;
    choice["delta"] = delta;
  } else {
    choice["text"] = text_delta;
  }
  if (request.return_token_ids) {
    choice["token_ids"] = token_delta;
    if (first && !is_chat(request)) choice["prompt_token_ids"] = prompt_of(request, result, index);
  }
  choice["finish_reason"] = finish_reason
                                ? nlohmann::ordered_json(openai_finish_reason(*finish_reason))
                                : nlohmann::ordered_json(nullptr);
  chunk["choices"] = nlohmann::ordered_json::array({choice});
  if (request.return_token_ids && first && is_chat(request)) {
    chunk["prompt_token_ids"] = prompt_of(request, result, index);
  }
  return chunk;
}

nlohmann::ordered_json usage_chunk_json(const ServeRequest& request, const ServeResult& result) {
  nlohmann::ordered_json chunk = header_json(request, result, /*chunk=*/true);
  chunk["choices"] = nlohmann::ordered_json::array();
  chunk["usage"] = usage_json(result);
  return chunk;
}

std::string sse_event(const nlohmann::ordered_json& data) {
  // Invalid UTF-8 (a model can emit a partial character at a stop) is replaced, never thrown.
  return "data: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() { return "data: [DONE]\n\n"; }

nlohmann::ordered_json error_json(const Status& status) {
  const int http = http_status_for(status);
  std::string code(status_code_name(status.code()));  // "invalid argument" -> "invalid_argument"
  std::replace(code.begin(), code.end(), ' ', '_');
  const char* type = http == 400   ? "invalid_request_error"
                     : http == 404 ? "not_found_error"
                     : http == 503 ? "server_busy_error"
                                   : "server_error";
  return {{"error", {{"message", status.message()}, {"type", type}, {"code", code}}}};
}

int http_status_for(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
    case StatusCode::kCancelled:
      return 503;
    default:
      return 500;
  }
}

}  // namespace cellm::app
