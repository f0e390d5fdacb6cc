// The formats of ChatTemplate that take tools: chatml, llama-3.1 / 3.2 (and llama-3, which shares
// their renderer) and mistral-v3, with and without tools, and the Hermes pieces chatml shares with
// qwen3 (chat_template_qwen3.cpp).
#include <fmt/format.h>

#include <string>

#include "tokenizer/chat_parts.h"

namespace cellm::chat_internal {
namespace {

// Python's json.dumps of a string with ensure_ascii off (the templates' `tojson`): quotes,
// backslashes and control characters escaped, everything else as it is.
std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

size_t render_hermes_system(std::span<const ChatMessage> messages, std::span<const ChatTool> tools,
                            ChatParts* out) {
  if (tools.empty()) return 0;
  size_t consumed = 0;
  out->markup("<|im_start|>system\n");
  if (!messages.empty() && messages[0].role == "system") {
    out->message(messages[0].content).markup("\n\n");
    consumed = 1;
  }
  out->markup(
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
      "provided with function signatures within <tools></tools> XML tags:\n<tools>");
  for (const ChatTool& tool : tools) out->markup("\n").message(tool.json);
  out->markup(
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
  return consumed;
}

void render_hermes_call(const ChatToolCall& call, ChatParts* out) {
  out->markup("<tool_call>\n{\"name\": \"")
      .message(call.name)
      .markup("\", \"arguments\": ")
      .message(call.arguments_json)
      .markup("}\n</tool_call>");
}

void render_hermes_tool_result(std::span<const ChatMessage> messages, size_t i, ChatParts* out) {
  if (i == 0 || messages[i - 1].role != "tool") out->markup("<|im_start|>user");
  out->markup("\n<tool_response>\n").message(messages[i].content).markup("\n</tool_response>");
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out->markup("<|im_end|>\n");
}

// ChatML: OpenAI's chatml.md ("<|im_start|>{role}\n{content}<|im_end|>"), as Qwen2's
// tokenizer_config.json applies it, one message per line, generation prompt
// "<|im_start|>assistant\n". (Qwen's own template adds a default system prompt; plain chatml
// does not.) Tools as Qwen2.5-Instruct's template renders them (Qwen3's where there is no system
// message, since that one has no default): the system turn holds the system text, "\n\n" and the
// Hermes block of one tool per line inside <tools></tools> with the instructions for
// <tool_call>; an assistant's calls follow its text, one <tool_call> each; consecutive tool
// messages share one user turn, each inside <tool_response>.
void render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                   std::span<const ChatTool> tools, ChatParts* out) {
  for (size_t i = render_hermes_system(messages, tools, out); i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      render_hermes_tool_result(messages, i, out);
    } else if (!m.tool_calls.empty()) {
      out->markup("<|im_start|>assistant");
      if (!m.content.empty()) out->markup("\n").message(m.content);
      for (const ChatToolCall& call : m.tool_calls) {
        out->markup("\n");
        render_hermes_call(call, out);
      }
      out->markup("<|im_end|>\n");
    } else {
      render_chatml_turn(m.role, m.content, out);
    }
  }
  if (add_generation_prompt) out->markup("<|im_start|>assistant\n");
}

// Llama 3: Meta's model card prompt format and llama3's ChatFormat: per message
// "<|start_header_id|>{role}<|end_header_id|>\n\n{content.strip()}<|eot_id|>", generation prompt
// "<|start_header_id|>assistant<|end_header_id|>\n\n". With a `date`, as Llama 3.1's and 3.2's
// templates render (their custom tools in the user message, tools_in_user_message): the system
// turn always comes, "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n" before the
// stripped system text, "Environment: ipython\n" first where there are tools; the first user
// message then opens with the instructions and each tool as tojson(indent=4) followed by "\n\n"
// — or, with tools_in_user_message off, the system turn holds them after its date.
// An assistant message with a call is the call alone ({"name": "...", "parameters": {...}}: one
// call a message, its text not shown) and a tool message is an "ipython" turn holding its content
// as a JSON string (the template's `content is iterable` holds for text too).
Status render_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools, std::optional<std::string_view> date,
                     bool tools_in_user_message, ChatParts* out) {
  constexpr std::string_view kCallFormat =
      "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument "
      "name and its value}.Do not use variables.\n\n";
  const auto header = [&](std::string_view role) {
    out->markup(fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n", role));
  };
  const auto list_tools = [&] {
    for (const ChatTool& tool : tools) out->message(tool.json_indented).markup("\n\n");
  };
  size_t first = 0;
  if (date) {
    header("system");
    if (!tools.empty()) out->markup("Environment: ipython\n");
    out->markup("Cutting Knowledge Date: December 2023\nToday Date: ")
        .message(*date)
        .markup("\n\n");
    if (!tools.empty() && !tools_in_user_message) {
      out->markup(
             "You have access to the following functions. To call a function, please respond "
             "with JSON for a function call.")
          .markup(kCallFormat);
      list_tools();
    }
    if (!messages.empty() && messages[0].role == "system") {
      out->message(trim(messages[0].content));
      first = 1;
    }
    out->markup("<|eot_id|>");
  }
  if (!tools.empty() && tools_in_user_message) {
    if (first == messages.size() || messages[first].role != "user") {
      return invalid_argument(
          "chat template: Llama 3.1's puts the tools in the first user message; the conversation "
          "does not begin with one");
    }
    header("user");
    out->markup(
           "Given the following functions, please respond with a JSON for a function call with "
           "its proper arguments that best answers the given prompt.\n\n")
        .markup(kCallFormat);
    list_tools();
    out->message(trim(messages[first].content)).markup("<|eot_id|>");
    ++first;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      header("ipython");
      out->message(json_quote(m.content));
    } else if (!m.tool_calls.empty()) {
      if (m.tool_calls.size() != 1) {
        return invalid_argument(
            fmt::format("chat template: Llama 3.1's takes one tool call an assistant message; "
                        "message {} holds {}",
                        i, m.tool_calls.size()));
      }
      header("assistant");
      out->markup("{\"name\": \"")
          .message(m.tool_calls[0].name)
          .markup("\", \"parameters\": ")
          .message(m.tool_calls[0].arguments_json)
          .markup("}");
    } else {
      header(m.role);
      out->message(trim(m.content));
    }
    out->markup("<|eot_id|>");
  }
  if (add_generation_prompt) header("assistant");
  return ok_status();
}

// Mistral-7B-Instruct-v0.3's template (tokenizer V3; Mistral-Nemo-Instruct-2407's writes the
// same without the space after each marker and answers as sent, "{content}</s>"): user turns
// "[INST] {content}[/INST]", the system text (with "\n\n") only in the conversation's last
// message and only if that is the user's, assistant turns " {content.strip()}</s>"; the tools,
// each function's fields written one by one (strings as they are, other values as tojson), in an
// [AVAILABLE_TOOLS] block before the last user turn; calls as "[TOOL_CALLS] [{"name": ...,
// "arguments": ..., "id": "..."}, ...]</s>" and results as "[TOOL_RESULTS] {"content": ...,
// "call_id": "..."}[/TOOL_RESULTS]", the content as it is. Ids must be 9 characters (the template
// raises otherwise); turns other than calls and results alternate user / assistant. No opening
// of the assistant's turn: the user's ends with it.
Status render_mistral_v3(const std::optional<std::string>& system,
                         std::span<const ChatMessage> turns, std::span<const ChatTool> tools,
                         bool spaced, ChatParts* out) {
  const std::string_view space = spaced ? " " : "";
  size_t last_user = turns.size();
  size_t num_plain = 0;  // turns neither calls nor results, which alternate
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& m = turns[i];
    if (m.role == "user") last_user = i;
    const auto bad_id = [&](std::string_view id) {
      return invalid_argument(fmt::format(
          "chat template: Mistral's needs tool call ids of 9 characters; message {} has '{}'", i,
          id));
    };
    if (m.role == "tool") {
      if (m.tool_call_id.size() != 9) return bad_id(m.tool_call_id);
      continue;
    }
    if (!m.tool_calls.empty()) {
      for (const ChatToolCall& call : m.tool_calls) {
        if (call.id.size() != 9) return bad_id(call.id);
      }
      continue;
    }
    if ((m.role == "user") != (num_plain % 2 == 0)) {
      return invalid_argument(
          fmt::format("chat template: Mistral's: message {} is '{}'; user and assistant turns must "
                      "alternate, starting with user",
                      i, m.role));
    }
    ++num_plain;
  }
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& m = turns[i];
    if (m.role == "user") {
      if (!tools.empty() && i == last_user) {
        out->markup(fmt::format("[AVAILABLE_TOOLS]{}[", space));
        for (size_t t = 0; t < tools.size(); ++t) {
          if (t > 0) out->markup(", ");
          out->markup("{\"type\": \"function\", \"function\": {");
          const std::vector<ChatToolField>& fields = tools[t].function_fields;
          for (size_t f = 0; f < fields.size(); ++f) {
            if (f > 0) out->markup(", ");
            out->markup("\"").message(fields[f].key).markup("\": ");
            if (fields[f].is_string) out->markup("\"");
            out->message(fields[f].text);
            if (fields[f].is_string) out->markup("\"");
          }
          out->markup("}}");
        }
        out->markup("][/AVAILABLE_TOOLS]");
      }
      out->markup(fmt::format("[INST]{}", space));
      if (i + 1 == turns.size() && system) out->message(*system).markup("\n\n");
      out->message(m.content).markup("[/INST]");
    } else if (!m.tool_calls.empty()) {
      out->markup(fmt::format("[TOOL_CALLS]{}[", space));
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        const ChatToolCall& call = m.tool_calls[k];
        if (k > 0) out->markup(", ");
        out->markup("{\"name\": ")
            .message(json_quote(call.name))
            .markup(", \"arguments\": ")
            .message(call.arguments_json)
            .markup(", \"id\": \"")
            .message(call.id)
            .markup("\"}");
      }
      out->markup("]</s>");
    } else if (m.role == "tool") {
      out->markup(fmt::format("[TOOL_RESULTS]{}{{\"content\": ", space))
          .message(m.content)
          .markup(", \"call_id\": \"")
          .message(m.tool_call_id)
          .markup("\"}[/TOOL_RESULTS]");
    } else if (spaced) {
      out->markup(" ").message(trim(m.content)).markup("</s>");
    } else {
      out->message(m.content).markup("</s>");
    }
  }
  return ok_status();
}

}  // namespace cellm::chat_internal
