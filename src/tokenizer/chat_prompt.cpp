#include "tokenizer/chat_prompt.h"

namespace cellm {

StatusOr<std::vector<int32_t>> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                           std::span<const ChatMessage> messages, ChatPromptEnd end,
                                           std::span<const ChatTool> tools,
                                           const ChatTemplateKwargs& kwargs) {
  CELLM_ASSIGN_OR_RETURN(
      const std::vector<ChatPart> parts,
      end == ChatPromptEnd::kInsideFinalMessage
          ? chat.render_parts_continuing(messages, tools, kwargs)
          : chat.render_parts(messages, end == ChatPromptEnd::kGenerationPrompt, tools, kwargs));
  std::vector<TextPart> text_parts;
  text_parts.reserve(parts.size());
  for (const ChatPart& part : parts) {
    text_parts.push_back({part.text, /*parse_special=*/!part.from_message});
  }
  return tokenizer.encode_parts(text_parts, /*add_special=*/true);
}

}  // namespace cellm
