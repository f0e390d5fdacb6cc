// ChatTemplate: renders a conversation (system / user / assistant messages) into the prompt text
// a chat model was trained on, for the common formats: chatml (Qwen2.5), qwen3 (chatml with
// Qwen3's thinking: an earlier answer's thinking left out, the turns after the last user query
// showing theirs, enable_thinking), llama-2, llama-3 (Llama 3.0), llama-3.1 and llama-3.2 (Llama
// 3.1 / 3.3's and 3.2's templates: a system turn dated "Today Date: ..." always), mistral
// (tokenizer V1), mistral-v3 (Mistral-7B-Instruct-v0.3), mistral-nemo (Mistral-Nemo: v0.3's
// format without its spaces), phi-3 (Phi-3, Phi-3.5), phi-4-mini (Phi-4-mini: phi-3's markers
// without line breaks), phi-4 (Phi-4: <|im_start|> / <|im_sep|>), zephyr (Zephyr, TinyLlama-Chat),
// gemma and
// deepseek-r1 (DeepSeek-R1's distills: <｜User｜> / <｜Assistant｜>, thinking opened in the
// prompt).
//
// A template is named explicitly or recognized from a GGUF file's `tokenizer.chat_template` by
// the format's distinctive markers (no Jinja is executed). Six formats take tools (functions the
// model may call, OpenAI's `tools`), assistant messages that called them and the tool messages
// that answer: chatml and qwen3 as Qwen2.5's and Qwen3's templates render them (Hermes' <tools>
// block in the system turn, <tool_call> and <tool_response>), llama-3.1 and llama-3.2 as their
// templates do (the tools in the first user message, JSON calls, results as "ipython" turns) and
// mistral-v3 and mistral-nemo as Mistral-7B-Instruct-v0.3's and Mistral-Nemo-Instruct's do
// ([AVAILABLE_TOOLS], [TOOL_CALLS], [TOOL_RESULTS]). The rendered text never starts with the BOS
// token. render_parts() tells the format's markup (<|im_start|>, [INST], </s>, ...) from the
// messages' own text, so that encode_chat (chat_prompt.h) turns the markup into its tokens and
// keeps what a user typed plain text. Formats without a system role (mistral, gemma) put the system
// text in front of the first user message. Each format's source is cited where it is rendered.
// Knows strings only, not tokens, not JSON and not the clock: a tool and a call's arguments come as
// the JSON texts the templates' `tojson` writes, the day as text (the caller writes them).
// Thread-safety: immutable values.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cellm {

// A call an assistant message made (one of OpenAI's tool_calls): the function's name and its
// arguments as Jinja's `tojson` writes the arguments object (Python's json.dumps: ", ", ": ").
struct ChatToolCall {
  std::string name;
  std::string arguments_json;
  std::string id = {};  // the client's id of the call (mistral-v3 shows it)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" (a call's result)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // an assistant's calls
  std::string tool_call_id = {};              // a tool message's: the call it answers
  // An assistant's thinking, sent apart from its content (OpenAI-style clients send back the
  // reasoning_content they were given). qwen3 shows it in the turns after the last user query;
  // without it qwen3 takes the thinking from the content's "<think>...</think>". Other formats
  // ignore it, as their templates do.
  std::optional<std::string> reasoning_content = std::nullopt;
};

// The template variables a request may set beside the messages (vLLM's chat_template_kwargs)
// that some format reads. enable_thinking: qwen3 with it off opens the answer with an empty
// thinking block ("<think>\n\n</think>\n\n"), so the model answers without thinking; formats
// without that switch ignore it, as their Jinja templates do.
struct ChatTemplateKwargs {
  bool enable_thinking = true;
  // date_string (llama-3.1, llama-3.2: the system turn's "Today Date: ..."); empty: the format's
  // default — llama-3.1's "26 Jul 2024", llama-3.2's `today`.
  std::string date_string = {};
  // The day the prompt is rendered, as "%d %b %Y" ("05 Dec 2026"): what Hugging Face's
  // strftime_now gives llama-3.2's template. The caller's clock, so rendering stays a pure
  // function; empty: "26 Jul 2024", as that template has without strftime_now.
  std::string today = {};
  // tools_in_user_message (llama-3.1, llama-3.2): the tools open the first user message; off, they
  // follow the system turn's date instead.
  bool tools_in_user_message = true;
};

// A field of a tool's function object, in order: its key, and its value as the template writes
// it — a string as itself (`is_string`), anything else as Jinja's tojson.
struct ChatToolField {
  std::string key;
  std::string text;
  bool is_string = false;
};

// A function the model may call: OpenAI's tool object ({"type": "function", "function": {...}})
// as Jinja's `tojson` writes it (`json`) and as `tojson(indent=4)` does (`json_indented`), and
// its function object's fields (mistral-v3 writes them one by one).
struct ChatTool {
  std::string json;
  std::string json_indented;
  std::vector<ChatToolField> function_fields = {};
};

// A piece of a rendered conversation: the format's markup, or text copied from a message (its
// content or the system text). Their texts, in order, are the rendered text.
struct ChatPart {
  std::string text;
  bool from_message = false;
};

enum class ChatFormat {
  kChatml,
  kLlama2,
  kLlama3,
  kLlama31,
  kLlama32,
  kMistral,
  kMistralV3,
  kMistralNemo,
  kPhi3,
  kGemma,
  kDeepSeekR1,
  kQwen3,
  kZephyr,
  kPhi4Mini,
  kPhi4,
};

class ChatTemplate {
 public:
  // "chatml", "qwen3", "llama-2", "llama-3", "llama-3.1", "llama-3.2", "mistral", "mistral-v3",
  // "mistral-nemo", "phi-3", "phi-4-mini", "phi-4", "zephyr", "gemma" or "deepseek-r1";
  // InvalidArgument listing them.
  static StatusOr<ChatTemplate> from_name(std::string_view name);
  // Recognizes a Jinja chat template by its markers; an empty or unrecognized one is
  // Unimplemented, naming the formats that can be chosen by name instead.
  static StatusOr<ChatTemplate> detect(std::string_view jinja_source);
  static std::vector<std::string_view> names();

  ChatFormat format() const { return format_; }
  std::string_view name() const;

  // Whether the format takes tools, tool calls and tool messages (chatml, qwen3, llama-3.1,
  // llama-3.2, mistral-v3, mistral-nemo).
  bool takes_tools() const;

  // InvalidArgument for an unknown role, a system message that is not first, or (llama-2,
  // mistral, gemma) turns that do not alternate user / assistant; for tools, tool calls or tool
  // messages in a format that takes none; for llama-3.1 / 3.2 with tools, a conversation whose
  // first turn (after the system message) is not the user's, or an assistant message with more than
  // one call; for mistral-v3 and mistral-nemo, a call or tool message whose id is not 9 characters
  // long.
  // add_generation_prompt appends the opening of the assistant's turn (the [INST] formats have
  // none: their user turn ends with it).
  StatusOr<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               std::span<const ChatTool> tools = {},
                               const ChatTemplateKwargs& kwargs = {}) const;
  // The conversation rendered to be continued inside its final message, an assistant's answer
  // that the client began and the model goes on writing (vLLM's continue_final_message, as
  // Hugging Face's apply_chat_template cuts it): render_parts without a generation prompt, cut
  // after the final message's text (its ends' whitespace kept where the format keeps it), before
  // the markup that closes the turn. InvalidArgument unless the final message is an assistant's
  // with text and no calls, and for a format that leaves part of that text out (deepseek-r1 an
  // answer's thinking, qwen3 a "<think>" block it rewrites).
  StatusOr<std::vector<ChatPart>> render_parts_continuing(
      std::span<const ChatMessage> messages, std::span<const ChatTool> tools = {},
      const ChatTemplateKwargs& kwargs = {}) const;
  // render() as parts: markup and message text alternate, none empty. A tool's JSON, a call's
  // name and arguments and a tool's result are message text (what a client sent stays text).
  StatusOr<std::vector<ChatPart>> render_parts(std::span<const ChatMessage> messages,
                                               bool add_generation_prompt,
                                               std::span<const ChatTool> tools = {},
                                               const ChatTemplateKwargs& kwargs = {}) const;

 private:
  explicit ChatTemplate(ChatFormat format) : format_(format) {}
  ChatFormat format_;
};

}  // namespace cellm
