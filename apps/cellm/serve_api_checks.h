// The promises of parse_serve_request (serve_api.h), and of the /tokenize and /detokenize
// parsers, checked on any input: a refusal is
// InvalidArgument with a message; an accepted request has the one prompt form of its endpoint, a
// GenConfig validate_gen_config accepts, at most 16 non-empty stop strings, known roles, and its
// response bodies and events serialize whatever bytes it holds; its tools are well formed and
// their calls read alike from a whole text and from the same text streamed in pieces, as is
// reasoning told apart from an answer. Shared by the
// fuzzer (fuzz/serve_request_fuzz.cpp) and the fixed-seed mutation test CI runs under ASan+UBSan.
// Header-only test support. Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "serve_api.h"

namespace cellm::app::serve_testing {

// The /tokenize and /detokenize parsers: refusals are InvalidArgument, token ids non-negative.
inline std::string check_token_parsers(std::string_view body) {
  const StatusOr<TokenizeRequest> tokenize = parse_tokenize_request(body);
  if (!tokenize.ok() && tokenize.status().code() != StatusCode::kInvalidArgument) {
    return "a tokenize refusal that is not InvalidArgument: " + tokenize.status().to_string();
  }
  if (tokenize.ok() && num_prompts(tokenize->prompt) != 1) return "tokenize of several prompts";
  const StatusOr<std::vector<int32_t>> detokenize = parse_detokenize_request(body);
  if (!detokenize.ok() && detokenize.status().code() != StatusCode::kInvalidArgument) {
    return "a detokenize refusal that is not InvalidArgument: " + detokenize.status().to_string();
  }
  if (detokenize.ok()) {
    for (const int32_t id : *detokenize) {
      if (id < 0) return "detokenize accepted a negative id";
    }
  }
  return "";
}

// The tools of an accepted request, and reading calls from `text` (the body itself: any bytes)
// in each syntax, whole and cut into pieces.
inline std::string check_tools(const ServeRequest& r, std::string_view text) {
  const ServeTools& tools = r.tools;
  if (tools.tools.empty() && tools.choice != ToolChoice::kNone) return "a choice without tools";
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const nlohmann::json json =
        nlohmann::json::parse(tools.tools[i].text.json, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object() || json.value("type", "") != "function") return "a tool's JSON";
    for (size_t k = 0; k < i; ++k) {
      if (tools.tools[k].name == tools.tools[i].name) return "two tools of one name";
    }
  }
  const bool constrained =
      tools.choice == ToolChoice::kRequired || tools.choice == ToolChoice::kNamed;
  if (constrained && r.config.json_schema == nullptr) return "a required call without a schema";
  if (!tools.reads_calls()) return "";
  for (const ChatToolSyntax syntax : {ChatToolSyntax::kNone, ChatToolSyntax::kHermes,
                                      ChatToolSyntax::kLlamaJson, ChatToolSyntax::kMistralJson}) {
    ServeTools with_syntax = tools;
    with_syntax.syntax = syntax;
    const ToolCallOutput whole = read_tool_calls(with_syntax, text);
    if (whole.calls.empty() && whole.content != text) return "content lost without calls";
    ToolCallStream stream(with_syntax);
    std::string shown;
    for (size_t at = 0; at < text.size(); at += 3) shown += stream.push(text.substr(at, 3));
    const ToolCallOutput rest = stream.finish();
    if (shown + rest.content != whole.content) return "streamed content differs";
    if (rest.calls.size() != whole.calls.size()) return "streamed calls differ";
    for (size_t i = 0; i < whole.calls.size(); ++i) {
      if (rest.calls[i].arguments != whole.calls[i].arguments) return "streamed arguments differ";
      const nlohmann::json arguments =
          nlohmann::json::parse(whole.calls[i].arguments, nullptr, /*allow_exceptions=*/false);
      if (!arguments.is_object()) return "call arguments that are not an object";
    }
  }
  return "";
}

// Reasoning split from `text` (any bytes) by each parser, whole and cut into pieces.
inline std::string check_reasoning(std::string_view text) {
  for (const ReasoningParser parser :
       {ReasoningParser::kNone, ReasoningParser::kQwen3, ReasoningParser::kDeepSeekR1}) {
    const ReasoningSplit whole = split_reasoning(parser, text);
    if (whole.reasoning.value_or("").size() + whole.content.size() > text.size()) {
      return "a split longer than its text";
    }
    ReasoningStream stream(parser);
    std::string reasoning;
    std::string content;
    for (size_t at = 0; at < text.size(); at += 5) {
      const ReasoningStream::Pieces p = stream.push(text.substr(at, 5));
      reasoning += p.reasoning;
      content += p.content;
    }
    const ReasoningStream::Pieces rest = stream.finish();
    if (reasoning + rest.reasoning != whole.reasoning.value_or("") ||
        content + rest.content != whole.content) {
      return "streamed reasoning differs";
    }
  }
  return "";
}

// "" when every promise holds for `body`, else what broke.
inline std::string check_serve_parse(std::string_view body, ServeEndpoint endpoint) {
  if (std::string broken = check_token_parsers(body); !broken.empty()) return broken;
  if (std::string broken = check_reasoning(body); !broken.empty()) return broken;
  const StatusOr<ServeRequest> parsed = parse_serve_request(body, endpoint);
  if (!parsed.ok()) {
    if (parsed.status().code() != StatusCode::kInvalidArgument) {
      return "a refusal that is not InvalidArgument: " + parsed.status().to_string();
    }
    return parsed.status().message().empty() ? "a refusal without a message" : "";
  }
  const ServeRequest& r = *parsed;
  if (r.endpoint != endpoint) return "the endpoint changed";
  if (r.n < 1 || num_prompts(r) * static_cast<size_t>(r.n) > kMaxServeChoices) {
    return "n = " + std::to_string(r.n) + " accepted for " + std::to_string(num_prompts(r)) +
           " prompts";
  }
  if (endpoint == ServeEndpoint::kCompletions) {
    if (r.prompts.empty()) return "a completion without a prompt";
    if (!r.messages.empty()) return "a completion with messages";
    for (const ServePrompt& prompt : r.prompts) {
      if (prompt.text.has_value() == !prompt.tokens.empty()) return "not one prompt form";
      for (const int32_t id : prompt.tokens) {
        if (id < 0) return "a negative token id accepted";
      }
    }
    if (!r.chat_prompt.enable_thinking || !r.chat_prompt.add_generation_prompt ||
        r.chat_prompt.continue_final_message) {
      return "a completion with a chat prompt's options";
    }
  } else {
    if (r.messages.empty() || !r.prompts.empty()) return "chat prompt form";
    if (r.chat_prompt.continue_final_message &&
        (r.chat_prompt.add_generation_prompt || r.messages.back().role != "assistant")) {
      return "a final message continued after a generation prompt or not an assistant's";
    }
    for (const ChatTurn& t : r.messages) {
      if (t.role != "system" && t.role != "user" && t.role != "assistant" && t.role != "tool") {
        return "role '" + t.role + "' accepted";
      }
      if (!t.tool_calls.empty() && t.role != "assistant") return "calls on a non-assistant turn";
      if (t.reasoning_content && t.role != "assistant") return "thinking on a non-assistant turn";
      for (const ChatTurnCall& call : t.tool_calls) {
        const nlohmann::json arguments =
            nlohmann::json::parse(call.arguments_json, nullptr, /*allow_exceptions=*/false);
        if (!arguments.is_object()) return "call arguments that are not an object";
      }
    }
  }
  if (r.max_tokens && *r.max_tokens < 0) return "a negative max_tokens accepted";
  if (const Status valid = validate_gen_config(r.config); !valid.ok()) {
    return "an invalid GenConfig accepted: " + valid.to_string();
  }
  if (r.config.stop_strings.size() > 16) return "more than 16 stop strings accepted";
  for (const std::string& s : r.config.stop_strings) {
    if (s.empty()) return "an empty stop string accepted";
  }
  if (r.stream_include_usage && !r.stream) return "include_usage without stream";
  if (std::string broken = check_tools(r, body); !broken.empty()) return broken;
  ServeResult result;
  result.prompt_tokens.resize(num_prompts(r));
  std::string text;  // arbitrary bytes, maybe not UTF-8
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    text += r.prompts[i].text.value_or("");
    result.prompt_tokens[i] = r.prompts[i].tokens;
  }
  ServeChoice choice;
  choice.text = text;
  choice.finish_reason = FinishReason::kNewTokenLimit;
  choice.tokens = {5, 6};
  if (r.config.sampling.logprobs >= 0) {  // entries for both tokens, their pieces any bytes
    choice.logprobs.assign(2, {{text, -0.5f}, {{text, -0.5f}, {"\xff", -INFINITY}}});
  }
  result.choices.assign(num_prompts(r) * static_cast<size_t>(r.n), choice);
  if (sse_event(completion_response_json(r, result)).empty() ||
      sse_event(completion_chunk_json(r, result, result.choices.size() - 1, text, {6}, true,
                                      std::nullopt))
          .empty()) {
    return "an empty event";
  }
  return "";
}

}  // namespace cellm::app::serve_testing
