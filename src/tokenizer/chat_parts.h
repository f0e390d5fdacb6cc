// ChatParts: the builder chat_template.cpp and chat_template_tools.cpp render a conversation
// into — markup and message text as ChatTemplate::render_parts returns them, adjacent pieces of
// one kind merged, empty ones dropped — and the helpers both files share. Internal to the
// tokenizer library. Thread-safety: a value owned by one render.
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

// Chatml with Qwen's tool rendering: the system turn holds the system text and the tools' block
// (when there are tools), assistant turns their calls, runs of tool messages one user turn.
void render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                   std::span<const ChatTool> tools, ChatParts* out);

// Llama 3 (Llama 3.1's template where tools come): see chat_template_tools.cpp.
Status render_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools, ChatParts* out);

// Mistral-7B-Instruct-v0.3's format: see chat_template_tools.cpp.
Status render_mistral_v3(const std::optional<std::string>& system,
                         std::span<const ChatMessage> turns, std::span<const ChatTool> tools,
                         ChatParts* out);

}  // namespace cellm::chat_internal
