// ChatParts: the builder chat_template.cpp, chat_template_tools.cpp and chat_template_qwen3.cpp
// render a conversation into — markup and message text as ChatTemplate::render_parts returns
// them, adjacent pieces of one kind merged, empty ones dropped — and the helpers the files share.
// Internal to the tokenizer library. Thread-safety: a value owned by one render.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"

namespace cellm::chat_internal {

class ChatParts {
 public:
  ChatParts& markup(std::string_view text) { return add(text, false); }
  ChatParts& message(std::string_view text) { return add(text, true); }
  std::vector<ChatPart> take() { return std::move(parts_); }

 private:
  ChatParts& add(std::string_view text, bool from_message) {
    if (text.empty()) return *this;
    if (parts_.empty() || parts_.back().from_message != from_message) {
      parts_.push_back({std::string(), from_message});
    }
    parts_.back().text.append(text);
    return *this;
  }
  std::vector<ChatPart> parts_;
};

// Python's str.strip() of ASCII whitespace, as the templates' `trim` filter.
std::string_view trim(std::string_view s);

// Python's text.split(separator)[-1]: what follows the separator's last occurrence (the whole
// text without one). The reasoning formats' "the answer after </think>".
inline std::string_view after_last(std::string_view text, std::string_view separator) {
  const size_t at = text.rfind(separator);
  return at == std::string_view::npos ? text : text.substr(at + separator.size());
}

// A chatml turn, "<|im_start|>{role}\n{content}<|im_end|>\n" (chatml and qwen3).
inline void render_chatml_turn(std::string_view role, std::string_view content, ChatParts* out) {
  out->markup("<|im_start|>" + std::string(role) + "\n").message(content).markup("<|im_end|>\n");
}

// Qwen's Hermes tool pieces, shared by chatml and qwen3. render_hermes_system: with tools, the
// system turn holding the system text (when messages[0] is one) and the tools' block; returns how
// many messages it rendered (0 or 1; without tools none, and a system message is a plain turn).
// render_hermes_call: one <tool_call> block. render_hermes_tool_result: the tool message
// messages[i], consecutive ones sharing one user turn.
size_t render_hermes_system(std::span<const ChatMessage> messages, std::span<const ChatTool> tools,
                            ChatParts* out);
void render_hermes_call(const ChatToolCall& call, ChatParts* out);
void render_hermes_tool_result(std::span<const ChatMessage> messages, size_t i, ChatParts* out);

// Chatml with Qwen's tool rendering: the system turn holds the system text and the tools' block
// (when there are tools), assistant turns their calls, runs of tool messages one user turn.
void render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                   std::span<const ChatTool> tools, ChatParts* out);

// Qwen3's template: see chat_template_qwen3.cpp.
void render_qwen3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                  std::span<const ChatTool> tools, const ChatTemplateKwargs& kwargs,
                  ChatParts* out);

// Llama 3; with `date`, Llama 3.1's / 3.2's template (its dated system turn always, tools):
// see chat_template_tools.cpp.
Status render_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools, std::optional<std::string_view> date,
                     bool tools_in_user_message, ChatParts* out);

// Mistral-7B-Instruct-v0.3's format (`spaced`), or Mistral-Nemo's (the same without the spaces
// after its markers and around answers): see chat_template_tools.cpp.
Status render_mistral_v3(const std::optional<std::string>& system,
                         std::span<const ChatMessage> turns, std::span<const ChatTool> tools,
                         bool spaced, ChatParts* out);

}  // namespace cellm::chat_internal
