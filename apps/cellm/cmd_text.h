// TextCodec: the tokenizer as `cellm run` and `cellm generate` use it — prompts to token ids
// (BOS added when the vocabulary adds one, as the reference does), chat prompts through the
// model's chat template, the model's stop tokens, and the TextStreamFactory that gives the Runner
// streaming text (whole UTF-8 characters; the first generated token keeps its leading space).
//
// Built from a loaded Program, whose tokenizer Program::load already checked against the LM head.
// This header names no tokenizer type (pimpl), so the commands' files see only the Runner's.
// Who calls it: the run, generate, perplexity and serve commands. Thread-safety: immutable after
// creation; the factory may be called from the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batching/runner.h"
#include "batching/stop_matcher.h"
#include "core/status.h"
#include "program/program.h"

namespace cellm::app {

// A call an assistant's message made: arguments as the template shows them (serve_tools.h's
// jinja_tojson of the arguments object).
struct ChatTurnCall {
  std::string name;
  std::string arguments_json;
  std::string id = {};
};

// One message of a conversation (the tokenizer's ChatMessage, without naming its header).
struct ChatTurn {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ChatTurnCall> tool_calls = {};
  std::string tool_call_id = {};  // a tool message's: the call it answers
  std::optional<std::string> reasoning_content = std::nullopt;  // an assistant's thinking
};

// A field of a tool's function object as the template writes it (the tokenizer's ChatToolField).
struct ChatToolFieldText {
  std::string key;
  std::string text;  // a string as itself, anything else as JSON
  bool is_string = false;
};

// A tool offered to the model, as the template shows it (the tokenizer's ChatTool).
struct ChatToolText {
  std::string json;
  std::string json_indented;
  std::vector<ChatToolFieldText> function_fields = {};
};

// How a conversation's prompt ends, and the template variables it is rendered with.
struct ChatPromptOptions {
  bool add_generation_prompt = true;  // the assistant's turn opened after the last message
  // The prompt ends inside the final message, an assistant's answer the model goes on writing
  // (vLLM's continue_final_message; add_generation_prompt off).
  bool continue_final_message = false;
  // Off: a format with a thinking switch (qwen3) opens the answer with an empty thinking block.
  bool enable_thinking = true;
  // The day the formats that date their prompt (llama-3.1, llama-3.2) write; empty: their default
  // (llama-3.2's is today).
  std::string date_string = {};
  // Off: llama-3.1 / 3.2 list the tools in the system turn instead of the first user message.
  bool tools_in_user_message = true;
};

// How the model's chat format writes a tool call: chatml and qwen3 models as Hermes does
// (<tool_call> blocks), Llama 3.1 as a JSON answer, Mistral v0.3 as a JSON list after its
// [TOOL_CALLS] control token (serve_tools.h reads them).
enum class ChatToolSyntax { kNone, kHermes, kLlamaJson, kMistralJson };

class TextCodec {
 public:
  // The program's tokenizer (Program::load checked it against the LM head) and chat template.
  static TextCodec from_program(const Program& program);

  // Plain text: BOS first when the vocabulary adds one; special-token text stays plain text.
  StatusOr<std::vector<int32_t>> encode_prompt(std::string_view text) const;
  // The same without BOS (a text to cut into pieces, as `cellm perplexity` does).
  StatusOr<std::vector<int32_t>> encode_text(std::string_view text) const;
  // One user message (after a system message, when `system` is not empty) rendered with the
  // model's chat template (recognized from the file), followed by the assistant's turn opening;
  // the template's markers become their tokens, the messages stay plain text
  // (tokenizer/chat_prompt.h). enable_thinking off: a format with a thinking switch (qwen3) opens
  // the answer with an empty thinking block.
  StatusOr<std::vector<int32_t>> encode_chat(std::string_view user_message,
                                             std::string_view system = {},
                                             bool enable_thinking = true) const;
  // A whole conversation, the same way, ending as `options` say (by default with the
  // assistant's turn opening); `tools` shown as the format shows them (InvalidArgument where it
  // takes none, or where the final message cannot be continued).
  StatusOr<std::vector<int32_t>> encode_conversation(std::span<const ChatTurn> turns,
                                                     std::span<const ChatToolText> tools = {},
                                                     const ChatPromptOptions& options = {}) const;
  // How the model's chat template writes tool calls (kNone without a template that takes tools).
  ChatToolSyntax tool_syntax() const;
  // Text of generated tokens (a continuation: a leading space is kept).
  StatusOr<std::string> decode(std::span<const int32_t> tokens) const;
  // The bytes one token decodes to, control tokens as their text ("<|eot_id|>"); maybe not
  // UTF-8 on its own. "" for an id outside the vocabulary.
  std::string token_piece(int32_t id) const;

  // EOS, end-of-turn and similar tokens: the Runner's default stop tokens.
  std::vector<int32_t> stop_token_ids() const;
  bool adds_bos() const;
  int32_t bos_token() const;  // kNoToken when the vocabulary has none
  TextStreamFactory text_streams() const;
  // The Runner's options for this model's text: stop_token_ids(), text_streams() and each
  // token's bytes (the rest at their defaults, for the caller to set).
  RunnerOptions runner_options() const;

 private:
  struct State;
  explicit TextCodec(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace cellm::app
