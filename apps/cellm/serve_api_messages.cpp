// The chat parts of a request body (serve_api_internal.h): "messages" — roles, text contents,
// assistants' tool calls and thinking, tool results — and how the prompt ends
// (add_generation_prompt, continue_final_message, chat_template_kwargs).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "batching/json_prefix.h"
#include "serve_api_internal.h"

namespace cellm::app::internal {
namespace {

using Json = nlohmann::json;

// The most messages a request may carry (far above what any client sends; bounds the work a
// request can ask of the template).
constexpr size_t kMaxMessages = 4096;
// The longest date_string a request may set (a day's text: "26 Jul 2024").
constexpr size_t kMaxDateStringBytes = 64;

// A message's "content": a string, or a list of {"type": "text", "text": ...} parts.
StatusOr<std::string> parse_content(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return field_error("messages[].content", "must be a string or a list");
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return field_error("messages[].content",
                         "parts must be {\"type\": \"text\", \"text\": \"...\"} (only text is "
                         "supported)");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name",
// "arguments": JSON text of an object}}], the arguments rewritten as the templates show them.
StatusOr<std::vector<ChatTurnCall>> parse_tool_calls(const Json& list, size_t message) {
  const std::string field = fmt::format("messages[{}].tool_calls", message);
  if (!list.is_array()) return field_error(field, "must be a list of calls");
  std::vector<ChatTurnCall> calls;
  for (size_t k = 0; k < list.size(); ++k) {
    const Json& call = list[k];
    const std::string at = fmt::format("{}[{}].function", field, k);
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      return field_error(at, "must be an object");
    }
    const Json& function = call["function"];
    if (!function.contains("name") || !function["name"].is_string()) {
      return field_error(at + ".name", "must be a string");
    }
    if (!function.contains("arguments") || !function["arguments"].is_string()) {
      return field_error(at + ".arguments", "must be a string holding a JSON object");
    }
    const std::string& text = function["arguments"].get_ref<const std::string&>();
    if (json_nesting_depth(text) > internal::kMaxJsonDepth) {
      return field_error(at + ".arguments",
                         fmt::format("nests deeper than {} levels", internal::kMaxJsonDepth));
    }
    const nlohmann::ordered_json arguments =
        nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!arguments.is_object()) {
      return field_error(at + ".arguments", "must be a string holding a JSON object");
    }
    std::string id;
    if (call.contains("id") && !call["id"].is_null()) {
      CELLM_ASSIGN_OR_RETURN(id, get_string(call["id"], fmt::format("{}[{}].id", field, k)));
    }
    calls.push_back({function["name"].get<std::string>(), jinja_tojson(arguments), std::move(id)});
  }
  return calls;
}

}  // namespace

Status parse_messages(const Json& messages, ServeRequest& request) {
  if (!messages.is_array() || messages.empty()) {
    return field_error("messages", "must be a non-empty list of {\"role\", \"content\"}");
  }
  if (messages.size() > kMaxMessages) {
    return field_error("messages",
                       fmt::format("holds {} messages; at most {}", messages.size(), kMaxMessages));
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    if (!message.is_object() || !message.contains("role")) {
      return field_error("messages", "items must be objects with \"role\" and \"content\"");
    }
    CELLM_ASSIGN_OR_RETURN(std::string role, get_string(message["role"], "messages[].role"));
    if (role == "developer") role = "system";  // OpenAI's newer name for it
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return field_error(
          "messages[].role",
          fmt::format("is '{}'; cellm knows system, user, assistant and tool", role));
    }
    const bool calls =
        role == "assistant" && message.contains("tool_calls") && !message["tool_calls"].is_null();
    std::string content;
    if (message.contains("content") && !(calls && message["content"].is_null())) {
      CELLM_ASSIGN_OR_RETURN(content, parse_content(message["content"]));
    } else if (!calls) {
      return field_error("messages", "items must be objects with \"role\" and \"content\"");
    }
    ChatTurn turn{std::move(role), std::move(content)};
    if (turn.role == "tool" && message.contains("tool_call_id") &&
        !message["tool_call_id"].is_null()) {
      CELLM_ASSIGN_OR_RETURN(turn.tool_call_id,
                             get_string(message["tool_call_id"], "messages[].tool_call_id"));
    }
    if (calls) {
      CELLM_ASSIGN_OR_RETURN(turn.tool_calls, parse_tool_calls(message["tool_calls"], i));
    }
    if (message.contains("reasoning_content") && !message["reasoning_content"].is_null()) {
      const std::string field = fmt::format("messages[{}].reasoning_content", i);
      if (turn.role != "assistant") return field_error(field, "is an assistant message's only");
      CELLM_ASSIGN_OR_RETURN(turn.reasoning_content,
                             get_string(message["reasoning_content"], field));
    }
    request.messages.push_back(std::move(turn));
  }
  return ok_status();
}

Status parse_chat_prompt_options(const Json& body, ServeRequest& request) {
  const auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  const bool chat = request.endpoint == ServeEndpoint::kChatCompletions;
  ChatPromptOptions& options = request.chat_prompt;
  if (given("add_generation_prompt")) {
    CELLM_ASSIGN_OR_RETURN(options.add_generation_prompt,
                           get_bool(body["add_generation_prompt"], "add_generation_prompt"));
    if (!chat && !options.add_generation_prompt) {
      return field_error("add_generation_prompt", "is a chat completion's only");
    }
  }
  if (given("continue_final_message")) {
    CELLM_ASSIGN_OR_RETURN(options.continue_final_message,
                           get_bool(body["continue_final_message"], "continue_final_message"));
    if (!chat && options.continue_final_message) {
      return field_error("continue_final_message", "is a chat completion's only");
    }
  }
  if (options.continue_final_message) {
    if (options.add_generation_prompt) {
      return field_error("continue_final_message",
                         "needs \"add_generation_prompt\": false (the final message is continued, "
                         "no new turn opened)");
    }
    if (request.messages.back().role != "assistant") {
      return field_error("continue_final_message",
                         "needs the final message to be the assistant's answer to continue");
    }
  }
  if (!given("chat_template_kwargs")) return ok_status();
  const Json& kwargs = body["chat_template_kwargs"];
  if (!kwargs.is_object()) return field_error("chat_template_kwargs", "must be an object");
  if (kwargs.empty()) return ok_status();
  if (!chat) return field_error("chat_template_kwargs", "is a chat completion's only");
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "enable_thinking") {
      CELLM_ASSIGN_OR_RETURN(options.enable_thinking,
                             get_bool(value, "chat_template_kwargs.enable_thinking"));
    } else if (key == "tools_in_user_message") {
      CELLM_ASSIGN_OR_RETURN(options.tools_in_user_message,
                             get_bool(value, "chat_template_kwargs.tools_in_user_message"));
    } else if (key == "date_string") {
      CELLM_ASSIGN_OR_RETURN(options.date_string,
                             get_string(value, "chat_template_kwargs.date_string"));
      if (options.date_string.size() > kMaxDateStringBytes) {
        return field_error("chat_template_kwargs.date_string",
                           fmt::format("is longer than {} bytes", kMaxDateStringBytes));
      }
    } else {
      return field_error("chat_template_kwargs",
                         fmt::format("holds '{}'; cellm's chat formats read enable_thinking, "
                                     "date_string and tools_in_user_message only",
                                     key));
    }
  }
  return ok_status();
}

}  // namespace cellm::app::internal
