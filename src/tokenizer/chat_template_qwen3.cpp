// The qwen3 format of ChatTemplate: chatml as Qwen3's template (Qwen/Qwen3-*'s
// tokenizer_config.json) renders it, thinking included.
#include <string_view>

#include "tokenizer/chat_parts.h"

namespace cellm::chat_internal {
namespace {

// Python's str.lstrip / rstrip / strip of one character, as the template calls them with '\n'.
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// The index of the conversation's last user query: the last user message that is not a tool
// result the client sent as user text ("<tool_response>...</tool_response>"); the last message's
// index when there is none.
size_t last_query_index(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string_view content = messages[i].content;
    const bool tool_response =
        content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
    if (messages[i].role == "user" && !tool_response) return i;
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

}  // namespace

// Qwen3: chatml (system, user and tool turns, tools, calls and results exactly as Qwen's
// Hermes rendering in render_chatml) with thinking. An assistant's thinking is its
// reasoning_content when the client sent one, else the text between the content's first
// "</think>" (after a "<think>") and the content after its last "</think>"; the answers up to
// the last user query show their content alone, those after it (a tool-calling round in
// progress) show "<think>\n{thinking}\n</think>\n\n" before it when they have thinking or end
// the conversation. The generation prompt is "<|im_start|>assistant\n", followed by an empty
// thinking block when kwargs.enable_thinking is off.
void render_qwen3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                  std::span<const ChatTool> tools, const ChatTemplateKwargs& kwargs,
                  ChatParts* out) {
  const size_t last_query = last_query_index(messages);
  for (size_t i = render_hermes_system(messages, tools, out); i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      render_hermes_tool_result(messages, i, out);
      continue;
    }
    if (m.role != "assistant") {
      render_chatml_turn(m.role, m.content, out);
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (m.reasoning_content) {
      reasoning = *m.reasoning_content;
    } else if (const size_t end = content.find("</think>"); end != std::string_view::npos) {
      reasoning = lstrip_newlines(after_last(rstrip_newlines(content.substr(0, end)), "<think>"));
      content = lstrip_newlines(after_last(content, "</think>"));
    }
    const bool last = i + 1 == messages.size();
    out->markup("<|im_start|>assistant\n");
    if (i > last_query && (last || !reasoning.empty())) {
      out->markup("<think>\n")
          .message(lstrip_newlines(rstrip_newlines(reasoning)))
          .markup("\n</think>\n\n")
          .message(lstrip_newlines(content));
    } else {
      out->message(content);
    }
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (k > 0 || !content.empty()) out->markup("\n");
      render_hermes_call(m.tool_calls[k], out);
    }
    out->markup("<|im_end|>\n");
  }
  if (add_generation_prompt) {
    out->markup("<|im_start|>assistant\n");
    if (!kwargs.enable_thinking) out->markup("<think>\n\n</think>\n\n");
  }
}

}  // namespace cellm::chat_internal
