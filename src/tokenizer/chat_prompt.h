// encode_chat: a conversation as the token ids a chat model reads — rendered by ChatTemplate,
// encoded by Tokenizer with BOS first (when the vocabulary adds one). Control tokens come from
// the template's markup only: a message's text is always plain text, so "<|im_end|>" or "</s>"
// typed by a user stays characters and cannot end a turn or open a system one.
//
// For messages without control-token text the ids are exactly those of encoding the whole
// rendered text with special tokens parsed (what Hugging Face's apply_chat_template(tokenize=True)
// does, injection included): merges still run across the markup / message boundary.
// Who calls it: the run and generate commands (apps/cellm/cmd_text.cpp). Thread-safety: a pure
// function of immutable values.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace cellm {

// Where a conversation's prompt ends: with the opening of the assistant's turn (a generation
// prompt), after the last message's turn, or inside the final message, an assistant's answer the
// model continues (ChatTemplate::render_parts_continuing).
enum class ChatPromptEnd { kGenerationPrompt, kAfterLastMessage, kInsideFinalMessage };

// The render errors of ChatTemplate::render (and render_parts_continuing), or the ids
// (Tokenizer::encode_parts with the markup's control tokens parsed, add_special on).
StatusOr<std::vector<int32_t>> encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                           std::span<const ChatMessage> messages, ChatPromptEnd end,
                                           std::span<const ChatTool> tools = {},
                                           const ChatTemplateKwargs& kwargs = {});

}  // namespace cellm
