// The OpenAI-compatible responses: bodies, server-sent events and errors (serve_api.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>
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

bool wants_logprobs(const ServeRequest& request) { return request.config.sampling.logprobs >= 0; }

// JSON has no infinity: a token the model rules out shows -9999.0, as vLLM shows it.
nlohmann::ordered_json shown_logprob(std::optional<float> logprob) {
  if (!logprob) return nullptr;
  return std::isfinite(*logprob) ? static_cast<double>(*logprob) : -9999.0;
}

nlohmann::ordered_json bytes_json(const std::string& token) {
  nlohmann::ordered_json bytes = nlohmann::ordered_json::array();
  for (const char c : token) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

// Completions' shape for `entries`, the first of which starts at byte `text_offset` of the
// choice's generated text.
nlohmann::ordered_json completion_logprobs_json(std::span<const ServeTokenLogprobs> entries,
                                                size_t text_offset) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::array();
  nlohmann::ordered_json token_logprobs = nlohmann::ordered_json::array();
  nlohmann::ordered_json top_logprobs = nlohmann::ordered_json::array();
  nlohmann::ordered_json offsets = nlohmann::ordered_json::array();
  for (const ServeTokenLogprobs& entry : entries) {
    tokens.push_back(entry.sampled.token);
    token_logprobs.push_back(shown_logprob(entry.sampled.logprob));
    nlohmann::ordered_json top = nlohmann::ordered_json::object();
    for (const ServeLogprob& t : entry.top) {
      if (!top.contains(t.token)) top[t.token] = shown_logprob(t.logprob);
    }
    // An echoed prompt's first token: nothing predicts it (null, as OpenAI shows it).
    top_logprobs.push_back(entry.sampled.logprob ? std::move(top) : nlohmann::ordered_json());
    offsets.push_back(text_offset);
    text_offset += entry.sampled.token.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

// Chat completions' shape: {"content": [{token, logprob, bytes, top_logprobs}]}.
nlohmann::ordered_json chat_logprobs_json(std::span<const ServeTokenLogprobs> entries) {
  const auto one = [](const ServeLogprob& t) {
    return nlohmann::ordered_json{
        {"token", t.token}, {"logprob", shown_logprob(t.logprob)}, {"bytes", bytes_json(t.token)}};
  };
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const ServeTokenLogprobs& entry : entries) {
    nlohmann::ordered_json item = one(entry.sampled);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const ServeLogprob& t : entry.top) top.push_back(one(t));
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  return {{"content", std::move(content)}};
}

// The "logprobs" of a choice's `entries` (null when the request did not ask), the first of
// them at byte `text_offset` of its generated text.
nlohmann::ordered_json logprobs_json(const ServeRequest& request,
                                     std::span<const ServeTokenLogprobs> entries,
                                     size_t text_offset) {
  if (!wants_logprobs(request)) return nullptr;
  return is_chat(request) ? chat_logprobs_json(entries)
                          : completion_logprobs_json(entries, text_offset);
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
    case FinishReason::kFormatComplete:
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

namespace {

// "tool_calls" for a choice that made calls and ended by itself or at its length.
std::string_view finish_reason_with_calls(FinishReason reason, bool made_calls) {
  const bool ended = reason != FinishReason::kCancelled && reason != FinishReason::kFailed;
  return ended && made_calls ? "tool_calls" : openai_finish_reason(reason);
}

// OpenAI's tool_calls of a message (`with_index`: of a stream's delta, each with its index).
nlohmann::ordered_json tool_calls_json(const std::vector<ServeToolCall>& calls, bool with_index) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    nlohmann::ordered_json call = nlohmann::ordered_json::object();
    if (with_index) call["index"] = i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    list.push_back(std::move(call));
  }
  return list;
}

}  // namespace

std::string_view openai_finish_reason(const ServeChoice& choice) {
  return finish_reason_with_calls(choice.finish_reason, !choice.tool_calls.empty());
}

nlohmann::ordered_json completion_response_json(const ServeRequest& request,
                                                const ServeResult& result) {
  nlohmann::ordered_json response = header_json(request, result, /*chunk=*/false);
  nlohmann::ordered_json choices = nlohmann::ordered_json::array();
  for (size_t k = 0; k < result.choices.size(); ++k) {
    const ServeChoice& c = result.choices[k];
    nlohmann::ordered_json choice = {{"index", k}};
    const size_t prompt = k / static_cast<size_t>(std::max(request.n, 1));
    const std::string echoed =
        request.echo && prompt < result.prompt_texts.size() ? result.prompt_texts[prompt] : "";
    if (is_chat(request)) {
      nlohmann::ordered_json message = {{"role", "assistant"}};
      if (c.reasoning) message["reasoning_content"] = *c.reasoning;
      const std::string content = echoed + c.text;
      message["content"] = content;
      // No answer beside calls or thinking is null, as OpenAI's calls and vLLM's thinking come.
      if (content.empty() && (!c.tool_calls.empty() || c.reasoning)) message["content"] = nullptr;
      if (!c.tool_calls.empty()) {
        message["tool_calls"] = tool_calls_json(c.tool_calls, /*with_index=*/false);
      }
      choice["message"] = std::move(message);
    } else {
      choice["text"] = echoed + c.text;
    }
    choice["logprobs"] = logprobs_json(request, c.logprobs, 0);
    choice["finish_reason"] = openai_finish_reason(c);
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
                                             std::optional<FinishReason> finish_reason,
                                             size_t first_logprob) {
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
  if (wants_logprobs(request)) {
    // The entries not sent before; the text before them is their offset.
    const std::vector<ServeTokenLogprobs>& all = result.choices.at(index).logprobs;
    const size_t first_entry = std::min(first_logprob, all.size());
    size_t text_offset = 0;
    for (size_t i = 0; i < first_entry; ++i) text_offset += all[i].sampled.token.size();
    choice["logprobs"] = logprobs_json(
        request, std::span<const ServeTokenLogprobs>(all).subspan(first_entry), text_offset);
  }
  choice["finish_reason"] = finish_reason
                                ? nlohmann::ordered_json(finish_reason_with_calls(
                                      *finish_reason, !result.choices.at(index).tool_calls.empty()))
                                : nlohmann::ordered_json(nullptr);
  chunk["choices"] = nlohmann::ordered_json::array({choice});
  if (request.return_token_ids && first && is_chat(request)) {
    chunk["prompt_token_ids"] = prompt_of(request, result, index);
  }
  return chunk;
}

nlohmann::ordered_json reasoning_chunk_json(const ServeRequest& request, const ServeResult& result,
                                            size_t index, std::string_view reasoning_delta,
                                            bool first) {
  nlohmann::ordered_json chunk = header_json(request, result, /*chunk=*/true);
  nlohmann::ordered_json delta = nlohmann::ordered_json::object();
  if (first) delta["role"] = "assistant";
  delta["reasoning_content"] = reasoning_delta;
  chunk["choices"] = nlohmann::ordered_json::array(
      {{{"index", index}, {"delta", std::move(delta)}, {"finish_reason", nullptr}}});
  return chunk;
}

nlohmann::ordered_json tool_calls_chunk_json(const ServeRequest& request, const ServeResult& result,
                                             size_t index) {
  nlohmann::ordered_json chunk = header_json(request, result, /*chunk=*/true);
  nlohmann::ordered_json delta = {
      {"tool_calls", tool_calls_json(result.choices.at(index).tool_calls, /*with_index=*/true)}};
  chunk["choices"] = nlohmann::ordered_json::array(
      {{{"index", index}, {"delta", std::move(delta)}, {"finish_reason", nullptr}}});
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

HttpRefusal http_refusal(int status, std::string_view method, std::string_view path,
                         bool has_body_length, std::string_view allowed_method) {
  if (status == 404 && !allowed_method.empty()) {
    return {405,
            {{"error",
              {{"message", fmt::format("{} takes {}, not {}", path, allowed_method, method)},
               {"type", "invalid_request_error"},
               {"code", "method_not_allowed"}}}}};
  }
  const Status error =
      status == 404   ? not_found(fmt::format("no route for {} {}", method, path))
      : status == 413 ? invalid_argument("the request body is larger than the server accepts")
      : status == 400 && method == "POST" && !has_body_length
          ? invalid_argument(
                fmt::format("{} takes a JSON body, and the request has no Content-Length", path))
          : invalid_argument(fmt::format("HTTP status {}", status));
  return {status, error_json(error)};
}

}  // namespace cellm::app
