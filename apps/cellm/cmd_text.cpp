// TextCodec (cmd_text.h): the only file of the run/generate commands that sees tokenizer types.
#include "cmd_text.h"

#include <ctime>
#include <optional>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace cellm::app {

struct TextCodec::State {
  Tokenizer tokenizer;
  std::optional<ChatTemplate> chat;  // none when the file's template is absent or unknown
  Status chat_status;                // why there is none
};

namespace {

// A generated continuation's text through the tokenizer's streaming detokenizer.
class DetokenizerStream : public TextStream {
 public:
  explicit DetokenizerStream(Tokenizer tokenizer)
      : tokenizer_(std::move(tokenizer)),
        detokenizer_(tokenizer_,
                     DecodeOptions{.render_special = false, .strip_leading_space = false}) {}
  std::string append(int32_t token) override {
    StatusOr<std::string> text = detokenizer_.push(token);
    return text.ok() ? std::move(text).value() : std::string();  // ids are checked at submit
  }
  std::string finish() override { return detokenizer_.finish(); }

 private:
  Tokenizer tokenizer_;  // shares the immutable state; detokenizer_ refers to this copy
  StreamingDetokenizer detokenizer_;
};

// The template variables of a prompt: the options' and the day, as Hugging Face's strftime_now
// gives it to the templates that date their prompts (local time, "%d %b %Y").
ChatTemplateKwargs template_kwargs(const ChatPromptOptions& options) {
  ChatTemplateKwargs kwargs{.enable_thinking = options.enable_thinking,
                            .date_string = options.date_string,
                            .tools_in_user_message = options.tools_in_user_message};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  char day[32];
  if (localtime_r(&now, &local) != nullptr &&
      std::strftime(day, sizeof(day), "%d %b %Y", &local) > 0) {
    kwargs.today = day;
  }
  return kwargs;
}

}  // namespace

TextCodec TextCodec::from_program(const Program& program) {
  const std::string& path = program.file().path();
  auto state = std::make_shared<State>(State{program.tokenizer(), std::nullopt, ok_status()});
  const std::string& source = state->tokenizer.vocab().chat_template;
  if (source.empty()) {
    state->chat_status =
        failed_precondition(path + " has no chat template (tokenizer.chat_template)");
  } else {
    StatusOr<ChatTemplate> chat = ChatTemplate::detect(source);
    if (chat.ok()) {
      state->chat = *chat;
    } else {
      state->chat_status = chat.status().with_context(path);
    }
  }
  return TextCodec(std::move(state));
}

StatusOr<std::vector<int32_t>> TextCodec::encode_prompt(std::string_view text) const {
  return state_->tokenizer.encode(text, EncodeOptions{.add_special = true, .parse_special = false});
}

StatusOr<std::vector<int32_t>> TextCodec::encode_text(std::string_view text) const {
  return state_->tokenizer.encode(text,
                                  EncodeOptions{.add_special = false, .parse_special = false});
}

StatusOr<std::vector<int32_t>> TextCodec::encode_chat(std::string_view user_message,
                                                      std::string_view system,
                                                      bool enable_thinking) const {
  std::vector<ChatTurn> turns;
  if (!system.empty()) turns.push_back({"system", std::string(system)});
  turns.push_back({"user", std::string(user_message)});
  return encode_conversation(turns, {}, ChatPromptOptions{.enable_thinking = enable_thinking});
}

StatusOr<std::vector<int32_t>> TextCodec::encode_conversation(
    std::span<const ChatTurn> turns, std::span<const ChatToolText> tools,
    const ChatPromptOptions& options) const {
  if (!state_->chat) return state_->chat_status;
  std::vector<ChatMessage> messages;
  messages.reserve(turns.size());
  for (const ChatTurn& turn : turns) {
    ChatMessage message{turn.role, turn.content};
    message.tool_call_id = turn.tool_call_id;
    message.reasoning_content = turn.reasoning_content;
    for (const ChatTurnCall& call : turn.tool_calls) {
      message.tool_calls.push_back({call.name, call.arguments_json, call.id});
    }
    messages.push_back(std::move(message));
  }
  std::vector<ChatTool> chat_tools;
  for (const ChatToolText& tool : tools) {
    ChatTool chat_tool{tool.json, tool.json_indented};
    for (const ChatToolFieldText& field : tool.function_fields) {
      chat_tool.function_fields.push_back({field.key, field.text, field.is_string});
    }
    chat_tools.push_back(std::move(chat_tool));
  }
  const ChatPromptEnd end = options.continue_final_message  ? ChatPromptEnd::kInsideFinalMessage
                            : options.add_generation_prompt ? ChatPromptEnd::kGenerationPrompt
                                                            : ChatPromptEnd::kAfterLastMessage;
  return cellm::encode_chat(state_->tokenizer, *state_->chat, messages, end, chat_tools,
                            template_kwargs(options));
}

ChatToolSyntax TextCodec::tool_syntax() const {
  if (!state_->chat) return ChatToolSyntax::kNone;
  switch (state_->chat->format()) {
    case ChatFormat::kChatml:
    case ChatFormat::kQwen3:
      return ChatToolSyntax::kHermes;
    case ChatFormat::kLlama31:
    case ChatFormat::kLlama32:
      return ChatToolSyntax::kLlamaJson;
    case ChatFormat::kMistralV3:
    case ChatFormat::kMistralNemo:
      return ChatToolSyntax::kMistralJson;
    default:
      return ChatToolSyntax::kNone;
  }
}

StatusOr<std::string> TextCodec::decode(std::span<const int32_t> tokens) const {
  return state_->tokenizer.decode(
      tokens, DecodeOptions{.render_special = false, .strip_leading_space = false});
}

std::string TextCodec::token_piece(int32_t id) const {
  return std::string(state_->tokenizer.token_piece(id, /*render_special=*/true));
}

std::vector<int32_t> TextCodec::stop_token_ids() const {
  return state_->tokenizer.stop_token_ids();
}

bool TextCodec::adds_bos() const { return state_->tokenizer.vocab().add_bos; }

int32_t TextCodec::bos_token() const { return state_->tokenizer.bos_id(); }

TextStreamFactory TextCodec::text_streams() const {
  return [state = state_](std::span<const int32_t>) -> std::unique_ptr<TextStream> {
    return std::make_unique<DetokenizerStream>(state->tokenizer);
  };
}

RunnerOptions TextCodec::runner_options() const {
  RunnerOptions options;
  options.default_stop_tokens = stop_token_ids();
  options.text_streams = text_streams();
  const Tokenizer& tokenizer = state_->tokenizer;
  options.token_bytes.reserve(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    options.token_bytes.emplace_back(tokenizer.token_piece(id, /*render_special=*/false));
  }
  return options;
}

}  // namespace cellm::app
